"""run_classifier's job for the user's own files (`--train_file`, `--dev_file`, `--test_file`).

The files are read by `data_prep.classification.own_files` (.tsv/.csv/.jsonl, columns by
header name). The label set is `--label_names`, else the training file's labels (sorted),
else those of the run in --output_dir: it is written to `OUTPUT_DIR/labels.txt`, which a later
run without --train_file and `export` (label strings) read. Regression has no label set. A
training label outside `--label_names` is an error (file and line); an inferred label set
warns of a label rare enough to be a typo (`file_splits.warn_rare_labels`).
"""

from absl import logging
import numpy as np

from data_prep import schema
from data_prep.classification import features as classifier_features
from data_prep.classification import own_files
from data_prep.classification import windows
from official_bert.interop import model_files
from official_bert.interop import run_record
from official_bert.tasks import file_splits
from official_bert.tasks import metrics
from official_bert.tasks.classification import ClassificationTask
from official_bert.training import finetuning_runner


def sigmoid(logits):
  return 1.0 / (1.0 + np.exp(-logits))


class OwnFilesJob(file_splits.FileSplitsJob):
  """Own files' data, metrics and predictions for `finetuning_runner.run`."""

  missing_file_note = " with your own files"

  def __init__(self, settings):
    super().__init__(settings)
    self.problem_type = settings.problem_type
    self.columns = own_files.Columns(settings.text_column, settings.text_b_column,
                                     settings.label_column)
    self.labels = None  # None: regression
    self.class_weights = None
    self.owner = {}  # split -> example index of each record (--doc_stride), else absent

  def _read(self, split):
    s = self.settings
    return own_files.read_examples(self._path(split), self.columns, self.problem_type,
                                   s.label_separator, self.labels,
                                   need_labels=split != "test", quoting=s.quoting)

  def _label_set(self):
    """The labels (see the module docstring), written to OUTPUT_DIR/labels.txt."""
    s = self.settings
    if s.label_names:
      labels = list(s.label_names)
      if len(set(labels)) != len(labels):
        raise ValueError(f"--label_names={','.join(labels)}: a label is repeated")
    elif s.train_file:
      train = self.data["train"]
      labels = own_files.label_set(train.examples, self.problem_type)
      file_splits.warn_rare_labels([e.label for e in train.examples],
                                   [f"{s.train_file}:{line}" for line in train.lines],
                                   "--label_names")
    else:
      labels = finetuning_runner.trained_labels(s, ("classifier",))
      if labels is None:
        raise ValueError(f"no --train_file, --label_names, or labels of a trained model in "
                         f"--output_dir={s.output_dir} or --init_checkpoint (its "
                         f"{model_files.RUN_SETTINGS_FILE} or {model_files.LABELS_FILE}): the "
                         f"label set is unknown")
      return labels
    if len(labels) < (1 if self.problem_type == "multi_label" else 2):
      raise ValueError(f"{s.train_file or '--label_names'}: {len(labels)} label(s) {labels}; "
                       "classification needs two or more")
    finetuning_runner.check_trained_labels(
        s, labels, "--label_names" if s.label_names else f"--train_file={s.train_file}")
    model_files.write_labels(s.output_dir, labels)
    return labels

  def prepare(self):
    s = self.settings
    if s.do_train or s.train_file:  # the training file also gives the label set
      # With --label_names the training labels are checked against them as they are read.
      self.labels = list(s.label_names) if s.label_names else None
      self.data["train"] = self._read("train")
    if self.problem_type != "regression":
      self.labels = self._label_set()
      logging.info("Labels (%d): %s", len(self.labels), " ".join(self.labels))
      if s.class_weights:
        if self.problem_type != "single_label":
          raise ValueError("--class_weights applies to --problem_type=single_label")
        if s.class_weights == "balanced" and "train" not in self.data:
          raise ValueError("--class_weights=balanced needs --train_file")
        train = self.data["train"].examples if "train" in self.data else []
        self.class_weights = own_files.class_weights(s.class_weights, train, self.labels)
        logging.info("Class weights: %s", dict(zip(self.labels, self.class_weights)))
    elif s.class_weights:
      raise ValueError("--class_weights applies to --problem_type=single_label")
    return finetuning_runner.prepare_splits(s, self._write)

  def _columns(self, examples, has_labels, tokenizer):
    """The classifier columns; a file without labels gets placeholders (never scored)."""
    s, labels = self.settings, self.labels
    if self.problem_type == "regression":
      placeholder, label_list = 0.0, [None]
    else:
      placeholder, label_list = labels[0], labels
    plain = [e if has_labels and self.problem_type != "multi_label" else
             e._replace(label=placeholder) for e in examples]
    columns = classifier_features.convert_examples(plain, label_list, s.max_seq_length,
                                                   tokenizer)
    if self.problem_type == "multi_label":
      columns["label_ids"] = (own_files.multi_hot(examples, labels) if has_labels else
                              np.zeros([len(examples), len(labels)], np.float32))
    owner = None
    if s.doc_stride:
      columns, owner = windows.windowed_columns(examples, columns, s.max_seq_length,
                                                s.doc_stride, tokenizer)
    if self.problem_type == "multi_label":
      features = schema.multi_label_classifier_features(s.max_seq_length, len(labels))
    else:
      features = schema.classifier_features(s.max_seq_length, self.problem_type == "regression")
    return features, columns, owner

  def _write(self, split, vocab):
    s = self.settings
    examples = self._examples(split)

    def build():
      tokenizer = classifier_features.cached_tokenizer(vocab, s.do_lower_case)
      features, columns, owner = self._columns(examples, self.data[split].has_labels,
                                               tokenizer)
      return features, columns, {"owner": owner}

    record, meta = self._cached_records(
        split, vocab, examples, build, columns=list(self.columns),
        problem_type=self.problem_type, label_separator=s.label_separator, labels=self.labels,
        doc_stride=s.doc_stride)
    if meta.get("owner") is not None:
      self.owner[split] = meta["owner"]
    return record, meta["num_examples"]

  def make_task(self, bert_config):
    num_labels = 1 if self.problem_type == "regression" else len(self.labels)
    return ClassificationTask(bert_config, num_labels, self.settings.max_seq_length,
                              problem_type=self.problem_type,
                              class_weights=self.class_weights,
                              multi_label_threshold=self.settings.multi_label_threshold)

  def main_metric(self):
    """--best_metric's default: macro-F1 weighs rare classes as much as frequent ones."""
    return {"single_label": "macro_f1", "multi_label": "micro_f1",
            "regression": "pearson"}[self.problem_type]

  def run_record(self):
    """For OUTPUT_DIR/run_settings.json (export's defaults)."""
    regression = self.problem_type == "regression"
    s = self.settings
    return run_record.RunRecord.of(
        "classifier", task="own_files", problem_type=self.problem_type,
        labels=None if regression else list(self.labels),
        num_labels=1 if regression else len(self.labels),
        multi_label_threshold=s.multi_label_threshold, label_separator=s.label_separator,
        doc_stride=s.doc_stride or 0, text_pairs=s.text_b_column is not None)

  def _per_example(self, split, predictions):
    """(values, gold) per input example: probabilities [n, labels] (the score [n, 1] for
    regression), with --doc_stride the mean over the example's windows."""
    real = predictions["is_real_example"] > 0
    logits, gold = predictions["logits"][real], predictions["label_ids"][real]
    if self.problem_type == "regression":
      values = logits[:, :1]
    elif self.problem_type == "multi_label":
      values = sigmoid(logits)
    else:
      values = finetuning_runner.softmax(logits)
    if split in self.owner:
      values = windows.average_windows(values, self.owner[split])
      gold = gold[windows.first_windows(self.owner[split])]
    return values, gold

  def score(self, split, predictions):
    if not self.data[split].has_labels:
      return {}  # a file to predict: no labels to score against
    values, gold = self._per_example(split, predictions)
    if self.problem_type == "regression":
      return metrics.regression_scores(values[:, 0], gold)
    if self.problem_type == "multi_label":
      predicted = values > self.settings.multi_label_threshold
      return metrics.multi_label_scores(predicted, gold.reshape(values.shape))
    predicted = np.argmax(values, -1)
    metrics.warn_if_one_class(np.bincount(predicted, minlength=len(self.labels)), self.labels,
                              split, metrics.ONE_CLASS_ADVICE)
    return metrics.per_class_scores(predicted, gold, self.labels)

  def write_predictions(self, split, predictions):
    """`<split>_predictions.tsv`: a header, then one row per input in the input's order:
    id (if the file has one), the prediction (labels joined by --label_separator for
    multi-label) and each label's probability. Returns the paths written."""
    s = self.settings
    probabilities = self._per_example(split, predictions)[0]
    header = ["prediction"]
    if self.problem_type == "regression":
      rows = [[f"{v:.6f}"] for v in probabilities[:, 0]]
    else:
      header += [f"prob_{label}" for label in self.labels]
      if self.problem_type == "multi_label":
        chosen = [s.label_separator.join(np.array(self.labels)[p > s.multi_label_threshold])
                  for p in probabilities]
      else:
        chosen = [self.labels[i] for i in np.argmax(probabilities, -1)]
      rows = [[c] + [f"{p:.6f}" for p in row] for c, row in zip(chosen, probabilities)]
    return self._write_prediction_rows(split, predictions, header, rows)
