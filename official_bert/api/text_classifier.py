"""`TextClassifier`: sentence (pair) classification on raw text, as `run_classifier`.

  clf = ob.TextClassifier.from_preset(path, labels=["neg", "pos"], sequence_length=64)
  clf.fit(x=texts, y=["pos", "neg", ...], epochs=1, batch_size=32)
  clf.predict(texts)         # [n, 2] probabilities
  clf.predict_labels(texts)  # ["pos", ...]

Problem types as `run_classifier --problem_type`: single_label (softmax), multi_label (one
sigmoid per label; `y` lists of labels), regression (`y` floats; `predict` -> [n] scores).
`x` is a list / array / pandas Series of strings, or a `(first, second)` pair of them.

Long texts as `run_classifier --doc_stride` (`doc_stride=N`; a run_classifier folder trained
with it brings its own): a first text longer than the sequence is cut into windows starting
every N pieces (a second text kept in each, cut to half the sequence if both do not fit).
`fit` and `evaluate` take each window as an example with its text's label, `batch_size`
windows a batch (evaluate's metrics count windows); `predict` averages each
text's windows, as the export and `--do_predict` do: the mean of the windows' probabilities
(scores for regression), and `predict_logits` the mean of their logits.
"""

import keras
import numpy as np
import tensorflow as tf

from data_prep.classification import windows as text_windows
from official_bert.api import task_model
from official_bert.api.preprocessor import as_string_tensor
from official_bert.interop import model_files
from official_bert.modeling.finetuning_models import BertClassifier
from official_bert.serving import classifier_outputs
from official_bert.tasks import file_splits
from official_bert.tasks import metrics
from official_bert.tasks.classification import ClassificationTask
from official_bert.tasks.distillation import UNLABELED


@keras.saving.register_keras_serializable(package="official_bert")
class TextClassifier(task_model.TaskModel):
  """Args: see `from_preset`; built from a `Backbone`, a `Preprocessor` and the labels."""

  model_type = "classifier"
  needs_y = True

  def __init__(self, backbone, preprocessor, num_classes=None, labels=None,
               problem_type="single_label", multi_label_threshold=0.5, text_pairs=None,
               doc_stride=0, **kwargs):
    if problem_type not in classifier_outputs.PROBLEM_TYPES:
      raise ValueError(f"problem_type={problem_type!r} must be one of "
                       f"{', '.join(classifier_outputs.PROBLEM_TYPES)}")
    # The labels as given (ints stay ints: `predict_labels` returns them as they went in);
    # `self.labels` are their names, matched against `y` and written to the model files.
    label_values = None if labels is None else [task_model.plain_label(label) for label in labels]
    if labels is not None:
      labels = [str(label) for label in labels]
      if len(set(labels)) != len(labels):
        raise ValueError(f"labels has duplicates: {labels}")
      if num_classes not in (None, len(labels)):
        raise ValueError(f"num_classes={num_classes} but {len(labels)} labels")
      num_classes = len(labels)
    if problem_type == "regression":
      if num_classes not in (None, 1) or labels:
        raise ValueError("problem_type='regression' predicts one score: no labels or "
                         "num_classes")
      num_classes = 1
    if not num_classes:
      raise ValueError("TextClassifier needs num_classes or labels")
    if int(doc_stride or 0) < 0:
      raise ValueError(f"doc_stride={doc_stride} must be >= 0 (0 or None: a long text is "
                       f"truncated)")
    network = BertClassifier(backbone, num_classes, name="classifier")
    classifier_outputs.check_threshold(multi_label_threshold, "multi_label_threshold")
    task = ClassificationTask(backbone.bert_config, num_classes,
                              preprocessor.sequence_length, problem_type=problem_type,
                              multi_label_threshold=multi_label_threshold)
    super().__init__(network, preprocessor, task, **kwargs)
    self.num_classes = num_classes
    self.labels = labels
    self.label_values = label_values
    self.problem_type = problem_type
    # Whether the model was trained on (first, second) pairs; None until known.
    self.text_pairs = text_pairs
    self.doc_stride = int(doc_stride or 0)  # 0: long texts truncated, else windows (module doc)
    # How often each class was predicted in the current evaluation (not a reported metric):
    # all in one class is a model that has not learned, which `evaluate` says.
    self.predicted_classes = ClassCounts(num_classes, name="predicted_classes")

  @classmethod
  def preset_arguments(cls, path, preset, stored, kwargs):
    """A `run_classifier` OUTPUT_DIR (or a saved TextClassifier) brings its labels, problem
    type and kind of input; its head is then loaded, else the head is new."""
    labels, num_classes = kwargs.pop("labels", None), kwargs.pop("num_classes", None)
    problem_type = kwargs.pop("problem_type", None)
    if stored and labels is not None and preset.labels and list(map(str, labels)) != list(
        preset.labels):
      raise ValueError(f"labels={list(labels)} but {path} was trained with labels "
                       f"{preset.labels} (in that order): leave labels out to use its head, or "
                       f"start from the model it was fine-tuned from")
    fine_tuned = bool(stored) and num_classes is None
    if fine_tuned:
      labels = stored.get("label_values") or preset.labels
      num_classes = stored.get("num_labels") if not labels else None
      problem_type = problem_type or classifier_outputs.problem_type_of(
          stored.get("problem_type"), num_classes, labels)
      threshold = stored.get("multi_label_threshold")
      if threshold is not None and "multi_label_threshold" not in kwargs:
        classifier_outputs.check_threshold(
            threshold, f"{path}/{model_files.RUN_SETTINGS_FILE}'s multi_label_threshold")
      kwargs.setdefault("multi_label_threshold", 0.5 if threshold is None else threshold)
      kwargs.setdefault("text_pairs", stored.get("text_pairs"))
      kwargs.setdefault("doc_stride", stored.get("doc_stride") or 0)
    if not stored and num_classes is None and labels is None and problem_type != "regression":
      raise task_model.needs_a_new_head(
          cls, path, preset, "labels=[...] or num_classes= (or problem_type='regression')")
    return dict(kwargs, num_classes=num_classes, labels=labels,
                problem_type=problem_type or "single_label"), fine_tuned

  # --- data ---------------------------------------------------------------------------------

  def _check_pairs(self, x):
    """Whether `x` is a (first, second) pair, refused when training's kind was the other."""
    pairs = isinstance(x, tuple) and len(x) == 2
    if self.text_pairs is not None and pairs != self.text_pairs:
      raise ValueError(
          "x is a (first, second) pair of text lists, but this classifier was trained on "
          "single texts" if pairs else "x is one list of texts, but this classifier was "
          "trained on (first, second) pairs: pass x=(first_texts, second_texts)")
    return pairs

  def _texts(self, x):
    if self._check_pairs(x):
      first, second = as_string_tensor(x[0], "x[0]"), as_string_tensor(x[1], "x[1]")
      if first.shape[0] != second.shape[0]:
        raise ValueError(f"x: {first.shape[0]} first texts but {second.shape[0]} second texts")
      return (first, second)
    return as_string_tensor(x)

  def encode_labels(self, y, n):
    """y (ids, label strings, label lists, multi-hot rows or floats) -> a numpy array."""
    y = list(y.to_numpy()) if hasattr(y, "to_numpy") else list(y)
    if len(y) != n:
      raise ValueError(f"y has {len(y)} labels for {n} texts")
    if self.problem_type == "regression":
      return np.asarray(y, np.float32)
    if self.problem_type == "multi_label":
      hot = np.zeros([n, self.num_classes], np.float32)
      for i, row in enumerate(y):
        row = np.asarray(row)
        # A numeric row of num_classes zeros and ones is multi-hot; else label names or ids.
        if (row.dtype.kind in "iuf" and row.shape == (self.num_classes,)
            and np.isin(row, (0, 1)).all()):
          hot[i] = row
        else:
          hot[i, [self._label_id(label, i) for label in row.tolist()]] = 1.0
      return hot
    return np.asarray([self._label_id(label, i) for i, label in enumerate(y)], np.int32)

  def _label_id(self, label, index):
    if isinstance(label, (bytes, np.bytes_)):
      label = label.decode("utf-8")
    if self.labels and str(label) in self.labels:  # a label's name, whatever its type
      return self.labels.index(str(label))
    if isinstance(label, str):
      if not self.labels:
        raise ValueError(f"y[{index}] is the label {label!r}: give labels=[...] to map label "
                         f"strings to ids")
      if label not in self.labels:
        raise ValueError(f"y[{index}]: label {label!r} is not in labels {self.labels}")
      return self.labels.index(label)
    if task_model.ids_are_names(self.labels):
      raise ValueError(f"y[{index}]: label {label!r} is not in labels {self.labels} (whole "
                       f"numbers are these labels' names, not ids)")
    if isinstance(label, (float, np.floating)) and not float(label).is_integer():
      raise ValueError(f"y[{index}] is {label}: a single_label classifier takes label ids or "
                       f"names (problem_type='regression' takes scores)")
    label = int(label)
    if not 0 <= label < self.num_classes:
      raise ValueError(f"y[{index}]: label id {label} is not in [0, {self.num_classes})")
    return label

  def windows(self, texts):
    """Texts (a string tensor [n], or a (first, second) pair) -> (features of every window,
    int32 [windows, sequence_length] each; owner int64 [windows], each window's text), cut as
    run_classifier's --doc_stride and the export cut them."""
    pre = self.preprocessor.text_to_inputs
    first, second = texts if isinstance(texts, tuple) else (texts, None)
    return classifier_outputs.window_inputs(
        pre.tokenize(first), None if second is None else pre.tokenize(second), pre.seq_length,
        self.doc_stride, pre.pack)

  def _window_batches(self, texts, labels, batch_size, shuffle, seed, weights=None):
    """(batches of `batch_size` windows, each with its text's label (and weight) when
    `labels` is given, as run_classifier batches its window records; owner [windows], each
    window's text)."""
    features, owner = self.windows(texts)
    owner = owner.numpy()
    if labels is None:
      dataset = task_model.batches(features, batch_size, False, None)
      return dataset.map(lambda f: (self.trimmed(f),), num_parallel_calls=tf.data.AUTOTUNE), owner
    per_window = (labels[owner],) + (() if weights is None else (weights[owner],))
    dataset = task_model.batches((features,) + per_window, batch_size, shuffle, seed)
    return dataset.map(lambda f, *rest: (self.trimmed(f),) + rest,
                       num_parallel_calls=tf.data.AUTOTUNE), owner

  def map_batches(self, dataset):
    """With doc_stride, every window of a batch's texts is an example, with its text's label
    (and weight): a tf.data.Dataset of raw batches (and distillation's) gives batches of each
    batch's windows."""
    if not self.doc_stride:
      return super().map_batches(dataset)

    def windowed(x, *rest):
      features, owner = self.windows(x)
      return (self.trimmed(features),) + tuple(tf.gather(r, owner) for r in rest)
    return dataset.map(windowed, num_parallel_calls=tf.data.AUTOTUNE)

  def user_batches(self, dataset):
    """A user's dataset of (texts, label names) batches -> (texts, label ids), as `fit` maps a
    list of names; ids and scores pass as they are."""
    spec = dataset.element_spec
    dtype = getattr(spec[1], "dtype", None) if isinstance(spec, tuple) and len(spec) >= 2 else None
    # Whole-number names (star ratings 1..5): an int in y is a name there too, never an id.
    by_number = (dtype is not None and dtype.is_integer and self.problem_type == "single_label"
                 and task_model.ids_are_names(self.labels))
    if dtype != tf.string and not by_number:
      return dataset
    if self.problem_type != "single_label" or not self.labels:
      raise ValueError(f"y holds strings (label names): that needs a single_label classifier "
                       f"with labels=[...], this is {self.problem_type} with labels "
                       f"{self.labels}; give label ids")
    labels = list(self.labels)
    keys = tf.constant([int(label) for label in labels], tf.int64) if by_number else (
        tf.constant(labels))
    table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
        keys, tf.range(len(labels), dtype=tf.int32)), default_value=-1)

    def ids(x, y, *rest):
      label_ids = table.lookup(tf.cast(y, tf.int64) if by_number else y)
      check = tf.debugging.assert_non_negative(
          label_ids, message=f"a label name in y is not one of the labels {labels}")
      with tf.control_dependencies([check]):
        return (x, tf.identity(label_ids)) + tuple(rest)
    return dataset.map(ids, num_parallel_calls=tf.data.AUTOTUNE)

  def make_dataset(self, x, y=None, batch_size=32, shuffle=False, seed=None,
                   sample_weight=None):
    texts = self._texts(x)
    n = int((texts[0] if isinstance(texts, tuple) else texts).shape[0])
    weights = None if y is None else task_model.example_weights(sample_weight, n)
    if self.doc_stride:
      labels = None if y is None else self.encode_labels(y, n)
      return self._window_batches(texts, labels, batch_size, shuffle, seed, weights)[0]
    if y is None:
      return self.map_batches(task_model.batches((texts,), batch_size, False, None))
    return self.map_batches(task_model.batches(
        (texts, self.encode_labels(y, n)) + (() if weights is None else (weights,)),
        batch_size, shuffle, seed))

  takes_example_weights = True

  def class_weights_of_examples(self, class_weight, x, y, sample_weight):
    """fit's `class_weight` ({label name or id: weight}; a label left out weighs 1) as each
    example's weight, times its `sample_weight`: as Keras turns class weights into sample
    weights, and as run_classifier's --class_weights weighs the loss. Training only."""
    if self.problem_type != "single_label":
      raise ValueError(f"fit: class_weight applies to a single_label classifier, this is "
                       f"{self.problem_type} (give sample_weight)")
    if isinstance(x, tf.data.Dataset):
      raise ValueError("fit: with x a tf.data.Dataset, give each example's weight in its "
                       "batches, (x, y, sample_weight), not class_weight")
    if not isinstance(class_weight, dict):
      raise ValueError(f"fit: class_weight should be a dict {{label: weight}}, got "
                       f"{type(class_weight).__name__}")
    weights = np.ones([self.num_classes], np.float32)
    for key, weight in class_weight.items():
      name = key.decode("utf-8") if isinstance(key, bytes) else str(key)
      if self.labels and name in self.labels:
        index = self.labels.index(name)
      elif (isinstance(key, (int, np.integer)) and not isinstance(key, bool)
            and not task_model.ids_are_names(self.labels) and 0 <= key < self.num_classes):
        index = int(key)
      else:
        raise ValueError(f"fit: class_weight key {key!r} is not a label ({self.labels}) nor "
                         f"a label id 0..{self.num_classes - 1}")
      if isinstance(weight, bool) or not isinstance(weight, (int, float, np.number)) or not (
          np.isfinite(weight) and weight >= 0):
        raise ValueError(f"fit: class_weight[{key!r}]={weight!r}: expected a number >= 0")
      weights[index] = float(weight)
    texts = self._texts(x)
    n = int((texts[0] if isinstance(texts, tuple) else texts).shape[0])
    per_example = weights[self.encode_labels(y, n)]
    given = task_model.example_weights(sample_weight, n)
    return per_example if given is None else per_example * given

  def distillation_batches(self, x, y, unlabeled, batch_size, seed):
    texts = self._texts(x)
    n = int((texts[0] if isinstance(texts, tuple) else texts).shape[0])
    labels = self.encode_labels(y, n)
    num_unlabeled = 0
    if unlabeled is not None:
      more = self._texts(unlabeled)
      if isinstance(more, tuple) != isinstance(texts, tuple):
        raise ValueError("distill: unlabeled must be single texts or pairs, as x is")
      num_unlabeled = int((more[0] if isinstance(more, tuple) else more).shape[0])
      texts = (tuple(tf.concat([a, b], 0) for a, b in zip(texts, more)) if isinstance(
          texts, tuple) else tf.concat([texts, more], 0))
      labels = np.concatenate([labels, self._no_labels(num_unlabeled)], 0)
    return task_model.batches((texts, labels), batch_size, True, seed), num_unlabeled

  def _no_labels(self, n):
    """The labels of `n` unlabeled examples: `UNLABELED` (NaN for a regression score)."""
    if self.problem_type == "regression":
      return np.full([n], np.nan, np.float32)
    if self.problem_type == "multi_label":
      return np.full([n, self.num_classes], UNLABELED, np.float32)
    return np.full([n], UNLABELED, np.int32)

  def fit(self, x=None, y=None, *args, **kwargs):
    self._check_inputs(x, y, "fit")  # before y is read here
    if not isinstance(x, tf.data.Dataset):
      self.text_pairs = self._check_pairs(x)  # the same kind as an earlier fit, if any
      if y is not None and self.problem_type == "single_label":
        # A label seen once among many (a typo, or a class too rare to learn).
        y_list = [task_model.plain_label(v)
                  for v in (y.to_numpy() if hasattr(y, "to_numpy") else y)]
        file_splits.warn_rare_labels(y_list, [f"y[{i}]" for i in range(len(y_list))],
                                     unit="labels in y", fix="Check y")
    return super().fit(x, y, *args, **kwargs)

  @property
  def multi_label_threshold(self):
    """multi_label: a label is predicted where its probability exceeds this, in
    `predict_labels`, exports and `evaluate`'s exact_match alike."""
    return self.task.multi_label_threshold

  @multi_label_threshold.setter
  def multi_label_threshold(self, value):
    classifier_outputs.check_threshold(value, "multi_label_threshold")
    self.task.multi_label_threshold = float(value)
    self.test_function = self.train_function = None  # traced with the old one: trace again

  @property
  def metrics(self):
    return [m for m in super().metrics if m is not self.predicted_classes]

  def compute_metrics(self, x, y, y_pred, sample_weight=None):
    if self.problem_type == "single_label":
      self.predicted_classes.update_state(y_pred, sample_weight)
    return super().compute_metrics(x, y, y_pred, sample_weight)

  def evaluate(self, x=None, y=None, batch_size=32, **kwargs):
    """Keras' evaluate (also fit's validation); a warning when every prediction is one
    class (a model that learned nothing but the majority class)."""
    self.predicted_classes.reset_state()
    results = super().evaluate(x, y, batch_size=batch_size, **kwargs)
    if self.problem_type == "single_label":
      metrics.warn_if_one_class(
          np.asarray(self.predicted_classes.result()),
          self.label_values or list(range(self.num_classes)), "evaluate",
          "Train longer (more epochs or examples) or try another learning rate: "
          "docs/python_api.md#small-data")
    return results

  def loss_features(self, x, y, sample_weight):
    ones = keras.ops.ones(keras.ops.shape(y)[:1], "float32")
    return {"label_ids": y, "is_real_example": ones if sample_weight is None else
            keras.ops.cast(sample_weight, "float32")}

  def predict(self, x, batch_size=32, **kwargs):
    """Probabilities [n, num_classes] (softmax; sigmoid for multi_label), or [n] scores;
    with doc_stride each text's windows' mean (module doc)."""
    if self.doc_stride:
      logits, owner = self._window_logits(x, batch_size, **kwargs)
      return text_windows.average_windows(self._probabilities(logits), owner).astype(logits.dtype)
    return self._probabilities(self.predict_logits(x, batch_size, **kwargs))

  def predict_logits(self, x, batch_size=32, **kwargs):
    """Logits [n, num_classes]; with doc_stride the mean of each text's windows'."""
    if not self.doc_stride:
      return super().predict_logits(x, batch_size, **kwargs)
    logits, owner = self._window_logits(x, batch_size, **kwargs)
    return text_windows.average_windows(logits, owner).astype(logits.dtype)

  def _window_logits(self, x, batch_size, **kwargs):
    """(logits [windows, num_classes] of every window of x's texts, owner [windows])."""
    if isinstance(x, tf.data.Dataset):
      raise ValueError("predict with doc_stride takes the texts (a list, array or Series, or "
                       "a (first, second) pair), not a tf.data.Dataset: each text's windows "
                       "are averaged")
    self._check_inputs(x, None, "predict", batch_size)
    self.warn_if_untrained("predict")
    texts = self._texts(x)
    dataset, owner = self._window_batches(texts, None, batch_size, False, None)
    return self.predict_features(dataset.prefetch(tf.data.AUTOTUNE), **kwargs), owner

  def _probabilities(self, logits):
    if self.problem_type == "regression":
      return logits[:, 0]
    if self.problem_type == "multi_label":
      return 1.0 / (1.0 + np.exp(-logits))
    logits = logits - logits.max(axis=-1, keepdims=True)
    return np.exp(logits) / np.exp(logits).sum(axis=-1, keepdims=True)

  def predict_labels(self, x, batch_size=32):
    """Label names (ids without labels); multi_label: lists; regression: the scores."""
    probabilities = self.predict(x, batch_size)
    names = self.label_values or list(range(self.num_classes))
    if self.problem_type == "regression":
      return probabilities.tolist()
    if self.problem_type == "multi_label":
      return [[names[j] for j in np.nonzero(row > self.multi_label_threshold)[0]]
              for row in probabilities]
    return [names[j] for j in probabilities.argmax(axis=-1)]

  # --- files -------------------------------------------------------------------------------

  def get_config(self):
    return dict(super().get_config(), num_classes=self.num_classes, labels=self.label_values,
                problem_type=self.problem_type,
                multi_label_threshold=self.multi_label_threshold, text_pairs=self.text_pairs,
                doc_stride=self.doc_stride)

  def run_settings(self):
    settings = dict(super().run_settings(), problem_type=self.problem_type,
                    num_labels=self.num_classes,
                    multi_label_threshold=self.multi_label_threshold,
                    text_pairs=self.text_pairs, doc_stride=self.doc_stride)
    if self.labels:
      settings["labels"] = self.labels
      if self.label_values != self.labels:  # e.g. ints: from_preset gives them back as such
        settings["label_values"] = self.label_values
    return settings

  export_option_names = ("label_separator",)

  def export_arguments(self, options):
    """`label_separator` (multi_label): joins the served predicted_labels, "," unless given."""
    options = dict(options)
    separator = options.pop("label_separator", ",")
    options.setdefault("classifier_options", classifier_outputs.Options(
        self.problem_type, self.multi_label_threshold, separator, self.doc_stride))
    return dict(super().export_arguments(options), num_labels=self.num_classes,
                label_names=self.labels)


class ClassCounts(keras.metrics.Metric):
  """How many examples each class was predicted for (the argmax of the logits)."""

  def __init__(self, num_classes, name="class_counts", **kwargs):
    super().__init__(name=name, **kwargs)
    self.num_classes = num_classes
    self.counts = self.add_variable((num_classes,), "zeros", name="counts", aggregation="sum")

  def update_state(self, logits, sample_weight=None):  # pylint: disable=arguments-differ
    ops = keras.ops
    hot = ops.one_hot(ops.argmax(logits, axis=-1), self.num_classes, dtype=self.dtype)
    if sample_weight is not None:  # padding examples of the last batch count for nothing
      hot *= ops.cast(ops.reshape(sample_weight, (-1, 1)), self.dtype)
    self.counts.assign_add(ops.sum(hot, axis=0))

  def result(self):
    return keras.ops.copy(self.counts)

  def get_config(self):
    return dict(super().get_config(), num_classes=self.num_classes)
