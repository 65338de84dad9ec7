"""`TaskModel`: a fine-tuning network with its preprocessing, trained with Keras' `fit`.

The network is the commands' (`modeling/finetuning_models.py`), the loss the commands' task
(`tasks/`: summed over examples or labeled tokens, divided by their count), the optimizer the
commands' (`optimization.scheduled_optimizer`). Text is turned into ids inside `tf.data`
(`make_dataset`), so `fit`, `evaluate` and `predict` take raw text and the compiled step sees
only int32 tensors: the step the commands' loop takes.

`compile(learning_rate=5e-5, warmup_fraction=0.1, weight_decay=0.01)` (the default when `fit`
is called uncompiled) builds AdamW, warmup then linear decay over the steps of the next
`fit`, gradients clipped at global norm 1.0. `compile(optimizer=..., loss=..., metrics=...)`
takes Keras' own arguments instead.
"""

import contextlib
import dataclasses
import math
import os
import re
import tempfile
import weakref

from absl import logging
import keras
import numpy as np
import tensorflow as tf

from official_bert.api import distillation
from official_bert.api import presets
from official_bert.api.backbone import Backbone
from official_bert.api.backbone import BackboneModelConfig
from official_bert.api.preprocessor import Preprocessor
from official_bert.interop import folder_writes
from official_bert.interop import model_files
from official_bert.interop import model_folder
from official_bert.interop import run_record
from official_bert.interop import weight_names
from official_bert.modeling import model_types
from official_bert.serving import exporter
from official_bert.training import distribution
from official_bert.training import optimization
from official_bert.training import padding
from official_bert.training import train_step as shared_step

AUTOTUNE = tf.data.AUTOTUNE
# The Keras backend the model computes on. Text is preprocessed by tensorflow-text in tf.data
# on every backend (as keras-hub does); the model, its step and its losses are Keras 3.
ON_TENSORFLOW = keras.backend.backend() == "tensorflow"


@contextlib.contextmanager
def outputs_for_tensorflow_ops():
  """For a direct call of the network whose outputs TensorFlow ops then read (`answer`'s
  n-best, `fill_mask`'s top-k: the exports' own code). PyTorch records every op for a backward
  pass unless told not to, and a tensor that records them cannot be read as an array; Keras'
  `predict` turns recording off the same way. JAX's and TensorFlow's tensors are read as they
  are."""
  if keras.backend.backend() != "torch":
    yield
    return
  import torch  # pylint: disable=g-import-not-at-top  (the torch backend only)
  with torch.no_grad():
    yield


class HostOutputs:
  """A network (or layer) whose calls give numpy arrays, and whose sub-layers do too, for
  TensorFlow ops that read its outputs (`answer`'s n-best, `fill_mask`'s top-k): a JAX or
  PyTorch tensor on a GPU is not an array TensorFlow can read. On TensorFlow: the network."""

  def __new__(cls, layer):
    if ON_TENSORFLOW or not isinstance(layer, keras.layers.Layer):
      return layer
    return super().__new__(cls)

  def __init__(self, layer):
    self._layer = layer

  def __call__(self, *args, **kwargs):
    return tf.nest.map_structure(keras.ops.convert_to_numpy, self._layer(*args, **kwargs))

  def __getattr__(self, name):
    if name == "_layer":  # not set yet (a copy being made): not the layer's
      raise AttributeError(name)
    return HostOutputs(getattr(self._layer, name))


class TaskModel(BackboneModelConfig, keras.Model):
  """Subclasses set `model_type` and implement `make_dataset` and `loss_features`.

  Args:
    network: a fine-tuning model (`BertClassifier`, ...) whose encoder is a `Backbone`.
    preprocessor: the `Preprocessor` (or tokenizer holder) the task's inputs go through.
    task: the `tasks.base.Task` whose `loss_sums`/`loss_normalizers` are the loss.
  """

  model_type = None
  default_sequence_length = 128

  @classmethod
  def folder_sequence_length(cls, preset):
    """The length this task reads a folder's model at by the folder's own files, or None."""
    del preset
    return None

  @classmethod
  def from_preset(cls, path, sequence_length=None, lower_case=None, allow_case_mismatch=False,
                  **kwargs):
    """Any model folder (`presets.load`: the one reader). A folder trained as this task (a
    command's OUTPUT_DIR or a model of this class saved with `save`) brings its settings
    (labels, sequence length, ...) and loads its head; any other folder gets a new head.
    `lower_case` overrides the folder's case (refused where the folder contradicts it, unless
    `allow_case_mismatch`). `kwargs`: the class's arguments (`preset_arguments`), which win
    over the folder's."""
    preset = presets.load(path, lower_case=lower_case, allow_case_mismatch=allow_case_mismatch)
    stored = presets.trained_as(preset, cls.model_type)
    # The class's default only where the model takes that many positions (a small model's
    # folder needs no argument).
    if sequence_length is None:
      sequence_length = (stored.get("max_seq_length") or cls.folder_sequence_length(preset)
                         or model_folder.default_sequence_length(preset.config,
                                                                 cls.default_sequence_length))
    backbone = Backbone.from_bert_config(preset.config, name="encoder")
    preprocessor = Preprocessor(preset.vocab_file, preset.do_lower_case, sequence_length)
    arguments, require_heads = cls.preset_arguments(path, preset, stored, dict(kwargs))
    model, untrained = presets.built_and_assigned(
        lambda: cls(backbone, preprocessor, **arguments), preset, lambda m: m.network,
        require_heads=bool(require_heads))
    if require_heads is not None:  # None: no head of its own (an embedder)
      model.untrained_weights = untrained
    model.built = True  # its network is (and `save` would warn of a model with no weights)
    return model

  @classmethod
  def preset_arguments(cls, path, preset, stored, kwargs):
    """(the constructor's keyword arguments, whether the folder's head must load) for
    `from_preset`: `stored` is the folder's run record when trained as this task, else {}."""
    raise NotImplementedError

  def __init__(self, network, preprocessor, task, **kwargs):
    super().__init__(**kwargs)
    # A clear error now rather than a failed gather at the first batch.
    network.encoder.bert_config.check_sequence_length(preprocessor.sequence_length,
                                                      "sequence_length")
    self.network = network
    self.preprocessor = preprocessor
    self.task = task
    self._optimizer_settings = None
    self._uses_task_loss = True
    self._uses_task_metrics = True
    # The commands' metrics (`Task.metric_sums`: ratios of sums over the whole set).
    self.task_metrics = [RatioMetric(name=name) for name in task.metric_names()]
    # Names of the variables at their random initialization (`from_preset` of a model
    # without this head) until `fit` trains them: `predict` says so (`warn_if_untrained`).
    self.untrained_weights = []
    self._relaxed_predict_function = lambda: None  # `_trace_predict_for_every_shape`'s

  @property
  def backbone(self):
    return self.network.encoder

  def build(self, input_shape=None):
    self.network.build()
    self.built = True

  # `from_preset` builds the network, head included, without calling the model, so Keras
  # records no build shapes; a `.keras` file would then say nothing to build, and loading it
  # would skip the head's weights and draw new ones. The file says whether the network was.
  def get_build_config(self):
    if self.network.built:
      return {"network_built": True}
    return super().get_build_config()

  def build_from_config(self, config):
    if config.get("network_built"):
      self.build()
    else:
      super().build_from_config(config)

  # --- what subclasses define -------------------------------------------------------------

  def make_dataset(self, x, y=None, batch_size=32, shuffle=False, seed=None):
    """A batched tf.data.Dataset of (features, y[, sample_weight]) from raw inputs."""
    raise NotImplementedError

  def user_batches(self, dataset):
    """A user's dataset of raw (x, y) batches, its labels as this model's raw inputs take
    them (a subclass's: TextClassifier's label names); default: as they are."""
    return dataset

  def map_batches(self, dataset):
    """A user's dataset of raw (x, y) batches -> (features, y); default: preprocess x."""
    return dataset.map(lambda x, *rest: (self.trimmed(self.preprocessor(x)),) + tuple(rest),
                       num_parallel_calls=AUTOTUNE)

  def trimmed(self, features):
    """A preprocessed batch cut to its longest real sequence, at the commands' bucket
    lengths (`training.padding`, --trim_padding): fit, evaluate and predict do no work on
    padding. Not for a task with per-position outputs, whose arrays keep their width."""
    if self.task.position_outputs:
      return features
    return padding.trimmer(self.task.token_features, self.preprocessor.sequence_length)(
        features)

  def run_settings(self):
    """The run record's fields beyond the model type (a subclass adds its own)."""
    return {"max_seq_length": self.preprocessor.sequence_length}

  def run_record(self):
    """The folder's `run_record.RunRecord` (what `export` and the commands read back): the
    same type a command's OUTPUT_DIR holds; a distilled student's names its teacher."""
    record = run_record.RunRecord.of(self.model_type, task=type(self).__name__,
                                     **self.run_settings())
    record.distillation = getattr(self, "distillation", None)
    return record

  # --- Keras --------------------------------------------------------------------------------

  def call(self, inputs, training=None):
    outputs = self.network(inputs, training=training)
    # A distillation student's training calls also return what its teacher's losses match.
    return outputs if "hidden_states" in outputs else outputs["logits"]

  # evaluate and predict run the Transformer layers on the real tokens only, as the exports
  # do, where `model_types.skips_padding` allows. Set only while a step is traced (or run
  # eagerly): the backbone may be shared, and calls outside these steps keep its own setting.

  # `*args`: (data,), or (state, data) on JAX, whose steps are stateless.
  def test_step(self, *args):
    with self._inference_without_padding():
      return super().test_step(*args)

  def predict_step(self, *args):
    with self._inference_without_padding():
      return super().predict_step(*args)

  @contextlib.contextmanager
  def _training_without_padding(self):
    """fit's steps run the Transformer layers on the real tokens, as `--pack_tokens`
    (`model_types.packs_training`: the same losses and gradients)."""
    backbone, own = self.backbone, self.backbone.pack_training
    backbone.pack_training = ON_TENSORFLOW and model_types.packs_training(
        self.network,
        static_shapes=bool(self.jit_compile) or distribution.is_tpu(self.distribute_strategy))
    try:
      yield
    finally:
      backbone.pack_training = own

  @contextlib.contextmanager
  def _inference_without_padding(self):
    backbone, own = self.backbone, self.backbone.skip_padding
    # Data-dependent shapes: TensorFlow only (`modeling/tensorflow_only`).
    backbone.skip_padding = ON_TENSORFLOW and model_types.skips_padding(
        self.model_type,
        static_shapes=bool(self.jit_compile) or distribution.is_tpu(self.distribute_strategy))
    try:
      yield
    finally:
      backbone.skip_padding = own

  def make_train_function(self, force=False):
    """Keras' own; on JAX, `steps_per_execution > 1` runs as one jitted scan per execution
    (`jax_steps`: no host work between the steps), where Keras loops in Python."""
    if self.train_function is not None and not force:
      return
    super().make_train_function(force)
    if (keras.backend.backend() == "jax" and self.steps_per_execution > 1
        and self.jit_compile and not self.run_eagerly
        and keras.distribution.distribution() is None):
      from official_bert.api import jax_steps  # pylint: disable=g-import-not-at-top
      self.train_function = jax_steps.scanned_train_function(
          self.train_step, self.steps_per_execution, self.task.token_features)

  def compile(self, optimizer=None, loss=None, metrics=None, learning_rate=5e-5,
              warmup_fraction=0.1, weight_decay=0.01, lr_schedule="linear",
              adam_bias_correction=True, clip_norm=1.0, **kwargs):
    """Keras' compile; without `optimizer`, the original's AdamW and schedule (built by the
    next `fit`, which knows its number of steps), `lr_schedule` and `adam_bias_correction`
    as the commands' flags of those names."""
    if not 0.0 <= warmup_fraction < 1.0:
      raise ValueError(f"warmup_fraction={warmup_fraction} must be in [0, 1)")
    self._optimizer_settings = None if optimizer is not None else dict(
        learning_rate=learning_rate, warmup_fraction=warmup_fraction,
        weight_decay=weight_decay, lr_schedule=lr_schedule,
        adam_bias_correction=adam_bias_correction, clip_norm=clip_norm)
    self._uses_task_loss = loss is None
    self._uses_task_metrics = loss is None and metrics is None
    self._compile_kwargs = dict(loss=loss, metrics=metrics, **kwargs)
    if optimizer is None:
      optimizer = self._scheduled_optimizer(1)
    self._compile(optimizer)

  def _compile(self, optimizer):
    super().compile(optimizer=optimizer, **self._compile_kwargs)
    if self._optimizer_settings is not None and ON_TENSORFLOW:
      shared_step.takes_summed_gradients(self.optimizer)  # `train_step` sums them itself

  def _use_fresh_optimizer(self, optimizer):
    """fit's own optimizer in place of the last, as Keras' `compile` sets one (wrapped for
    mixed float16 loss scaling, the layers' trainable state taken again), but without the rest
    of `compile`, which would also drop the traced evaluate and predict steps: they do not use
    the optimizer, and were traced again after every fit (a model's whole forward pass)."""
    # What Keras' `get_compile_config` saves (compile with Keras' arguments): this optimizer,
    # unwrapped, as `compile` records it.
    self._compile_config.config = dict(self._compile_config.config, optimizer=optimizer)
    if (self._compile_kwargs.get("auto_scale_loss", True)
        and self.dtype_policy.name == "mixed_float16"):
      optimizer = keras.optimizers.LossScaleOptimizer(optimizer, name="loss_scale_optimizer")
    self.optimizer = optimizer
    self._compiled_trainable_state = {layer: layer.trainable for layer in self._flatten_layers()}
    self.stop_training = False
    self.train_function = None  # the train step closes over the optimizer
    if ON_TENSORFLOW:
      shared_step.takes_summed_gradients(self.optimizer)  # `train_step` sums them itself

  def get_compile_config(self):
    if self._optimizer_settings is not None and not any(self._compile_kwargs.values()):
      return {"bert_optimizer": dict(self._optimizer_settings),
              "optimizer_built": bool(self.optimizer is not None and self.optimizer.built)}
    return super().get_compile_config()

  def compile_from_config(self, config):
    if "bert_optimizer" in config:  # a `.keras` file of a model compiled the default way
      self.compile(**config["bert_optimizer"])
      if config.get("optimizer_built"):  # slots to load the file's optimizer state into
        self._build_optimizer()
    else:
      super().compile_from_config(config)

  @property
  def metrics(self):
    metrics = super().metrics
    if not self._uses_task_metrics:
      metrics = [m for m in metrics if all(m is not t for t in self.task_metrics)]
    return metrics

  def _task_batch(self, x, y, y_pred, sample_weight):
    """(features, outputs) as the task's loss and metric sums take them: the label features
    with the inputs' (a distillation task runs its teacher on them)."""
    outputs = y_pred if isinstance(y_pred, dict) else {"logits": y_pred}
    features = dict(x) if isinstance(x, dict) else {}
    features.update(self.loss_features(x, y, sample_weight))
    return features, outputs

  def compute_metrics(self, x, y, y_pred, sample_weight=None):
    if self._uses_task_metrics:
      sums = self.task.metric_sums(*self._task_batch(x, y, y_pred, sample_weight))
      for metric in self.task_metrics:
        metric.update_state(*sums[metric.name])
    return super().compute_metrics(x, y, y_pred, sample_weight)

  def _scheduled_optimizer(self, num_train_steps):
    s = self._optimizer_settings
    with self._strategy_scope():
      optimizer = optimization.scheduled_optimizer(
          "adamw", s["learning_rate"], num_train_steps,
          int(num_train_steps * s["warmup_fraction"]), s["weight_decay"], s["lr_schedule"],
          s["adam_bias_correction"])
    if not ON_TENSORFLOW and s["clip_norm"]:
      # Keras' own step (JAX, PyTorch: one device) clips at the global norm, as ours does.
      optimizer.global_clipnorm = s["clip_norm"]
    return optimizer  # on TensorFlow it does not clip: `train_step` does, as the commands'

  def _strategy_scope(self):
    """The tf.distribute strategy's scope on TensorFlow; nothing on the other backends."""
    if ON_TENSORFLOW:
      return self.distribute_strategy.scope()
    return contextlib.nullcontext()

  def train_step(self, *args):
    """With `compile`'s own optimizer, the commands' step (`training.train_step`, as
    `training_loop.Trainer` takes it): dense gradients, summed over the replicas, clipped at
    their global norm. (Keras would clip each replica's part before summing, and measure an
    embedding's sparse gradient with its repeated rows apart; its all-reduce of sparse
    gradients also fails when the replicas' row counts differ.) On JAX and PyTorch (one
    device, dense gradients) Keras' own step, on the backend's gradient machinery, with the
    same loss (`compute_loss`) and the optimizer clipping at the global norm."""
    with self._training_without_padding():
      if self._optimizer_settings is None or not ON_TENSORFLOW:
        return super().train_step(*args)
      return self._summed_gradients_step(*args)

  def _summed_gradients_step(self, data):
    replicas = self.distribute_strategy.num_replicas_in_sync
    x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)

    def loss_and_outputs():
      y_pred = self(x, training=True)
      return self.compute_loss(x, y, y_pred, sample_weight, training=True), y_pred

    variables = self.trainable_weights
    grads, loss, y_pred = shared_step.replica_gradients(loss_and_outputs, variables,
                                                       self.optimizer)
    self._loss_tracker.update_state(loss * replicas, sample_weight=tf.shape(
        tf.nest.flatten(x)[0])[0])
    shared_step.apply(self.optimizer, grads, variables, self._optimizer_settings["clip_norm"])
    return self.compute_metrics(x, y, y_pred, sample_weight)

  def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
    if not self._uses_task_loss:
      return super().compute_loss(x, y, y_pred, sample_weight, training=training)
    features, outputs = self._task_batch(x, y, y_pred, sample_weight)
    normalizers = shared_step.global_normalizers(self.task, features)
    loss, _ = shared_step.task_loss(self.task, features, outputs, normalizers)
    extra = [keras.ops.cast(value, "float32") for value in self.losses]
    if extra:  # regularization losses, per replica as Keras scales them
      replicas = self.distribute_strategy.num_replicas_in_sync if ON_TENSORFLOW else 1
      loss += sum(extra[1:], extra[0]) / float(replicas)
    return loss

  def loss_features(self, x, y, sample_weight):
    """The task's label features from a batch's (x, y, sample_weight)."""
    raise NotImplementedError

  @classmethod
  def distill(cls, teacher, x, y, unlabeled=None, num_layers=None, student=None,
              temperature=2.0, distill_weight=0.5, hidden_weight=0.0, attention_weight=None,
              epochs=3, batch_size=32, learning_rate=5e-5, seed=None, validation_data=None,
              **fit_kwargs):
    """A smaller model of this class trained to answer as `teacher` does (`run_distillation`'s
    recipe); `TextClassifier` and `TokenTagger` (`distillation_batches`).

    Args:
      teacher: a trained model of this class, or its folder (a command's OUTPUT_DIR too).
      x, y: the labeled inputs and their labels, as `fit` takes them (texts or pairs and
        labels; word lists and tag lists).
      unlabeled: more inputs without labels, the teacher's outputs their targets (the
        transfer set, where distillation gains most): texts or pairs; for a tagger word
        lists or raw texts, split into words as `predict_entities` splits them.
      num_layers: the student keeps this many of the teacher's layers (evenly spaced, first
        and last included, as DistilBERT), its embeddings, head and preprocessor; or
      student: a model of this class with the teacher's labels to train instead.
      temperature: softens both distributions (Hinton et al.; the soft loss is times T^2).
      distill_weight: the soft loss's weight; the labels' loss weighs 1 - it (0: labels only).
      hidden_weight: TinyBERT's hidden-state loss's weight (equal hidden sizes).
      attention_weight: TinyBERT's attention-score loss's weight (equal numbers of heads);
        None: hidden_weight where the heads are equal, else 0.
      epochs, batch_size, learning_rate, seed, validation_data, fit_kwargs: `fit`'s.
    Returns:
      The trained student; `save` writes a folder whose run record names the teacher.
    """
    return distillation.distill(cls, teacher, x, y, unlabeled=unlabeled,
                                num_layers=num_layers, student=student,
                                temperature=temperature, distill_weight=distill_weight,
                                hidden_weight=hidden_weight, attention_weight=attention_weight,
                                epochs=epochs, batch_size=batch_size,
                                learning_rate=learning_rate, seed=seed,
                                validation_data=validation_data, **fit_kwargs)

  def distillation_batches(self, x, y, unlabeled, batch_size, seed):
    """(a shuffled dataset `fit` takes, the number of unlabeled examples) of labeled `x`, `y`
    and `unlabeled` inputs whose labels say "none" (`tasks.distillation.UNLABELED`)."""
    raise ValueError(f"distill takes a TextClassifier or a TokenTagger, not a "
                     f"{type(self).__name__}")

  def _dataset(self, x, y, batch_size, shuffle=False, seed=None, training=False,
               sample_weight=None):
    del training  # a subclass's: whether the batches are fit's training batches
    if isinstance(x, tf.data.Dataset):
      if y is not None:
        raise ValueError("y must be None when x is a tf.data.Dataset of (x, y) batches")
      return self.map_batches(self.user_batches(x)).prefetch(AUTOTUNE)
    return self.make_dataset(x, y, batch_size, shuffle, seed,
                             **_weights(sample_weight)).prefetch(AUTOTUNE)

  # Whether `fit`/`evaluate` take `sample_weight` (a weight per example, which the subclass's
  # `make_dataset` takes) and `fit` a `class_weight` (`class_weights_of_examples`).
  takes_example_weights = False

  def _example_weights(self, kwargs, call, x):
    """(sample_weight, class_weight) taken out of Keras' keyword arguments `kwargs`: Keras
    would refuse them with the dataset the raw inputs become."""
    sample_weight = kwargs.pop("sample_weight", None)
    class_weight = kwargs.pop("class_weight", None)
    if sample_weight is None and class_weight is None:
      return None, None
    given = "sample_weight" if sample_weight is not None else "class_weight"
    if not self.takes_example_weights:
      raise ValueError(f"{call}: {type(self).__name__} takes no {given}: its loss weighs "
                       f"every labelled example (or token) alike")
    if isinstance(x, tf.data.Dataset) and sample_weight is not None:
      raise ValueError(f"{call}: with x a tf.data.Dataset, give the weights in its batches: "
                       f"(x, y, sample_weight)")
    return sample_weight, class_weight

  def class_weights_of_examples(self, class_weight, x, y, sample_weight):
    """fit's `class_weight` as each example's weight (times `sample_weight`), where the
    subclass takes one (`takes_example_weights`)."""
    raise NotImplementedError

  # Whether `fit`/`evaluate` take a file's path as x (QuestionAnswerer: a SQuAD JSON file).
  reads_files = False

  # Whether `fit`/`evaluate` need labels `y` beside raw `x` (not a dataset of (x, y)), and
  # what they are.
  needs_y = False
  y_description = "the labels of x, one per example"

  def _check_inputs(self, x, y, call, batch_size=None):
    """A clear error for inputs Keras would reject with a message about something else."""
    if batch_size is not None:
      check_batch_size(batch_size)
    if isinstance(x, (str, bytes, os.PathLike)) and not self.reads_files:
      advice = f"pass a list, {call}([{os.fspath(x)!r}])"
      if call != "predict":
        columns = "df['text'], df['label']" if self.needs_y else "df['text']"
        advice += (f"; for a file, read its columns first, e.g. with pandas: `df = "
                   f"pandas.read_csv(path)`, then {call}({columns})")
      raise ValueError(f"{call}: x is one string ({os.fspath(x)!r}), not a list of texts: "
                       f"{advice}")
    if not isinstance(x, tf.data.Dataset) and x is not None and _length(x) == 0:
      raise ValueError(f"{call}: x has no examples (an empty list)")
    if isinstance(x, tf.data.Dataset):
      spec = x.element_spec
      leaves = tf.nest.flatten(spec[0] if isinstance(spec, tuple) else spec)
      if leaves and all(getattr(s, "shape", None) is not None and s.shape.rank == 0
                        for s in leaves):
        raise ValueError(f"{call}: x is a tf.data.Dataset of single examples, not of "
                         f"batches: batch it first, e.g. {call}(dataset.batch(32))")
    if call == "predict" or isinstance(x, tf.data.Dataset):
      return
    if isinstance(y, (str, bytes)):
      raise ValueError(f"{call}: y is one string ({y!r}), not a list of labels (one per "
                       f"example of x)")
    if y is None and self.needs_y:
      raise ValueError(f"{call}: y is None: give {self.y_description} (or x as a "
                       f"tf.data.Dataset of (x, y) batches)")

  def fit(self, x=None, y=None, batch_size=32, epochs=1, validation_data=None, shuffle=True,
          seed=None, steps_per_epoch=None, **kwargs):
    """Keras' fit on raw inputs (see the subclass); `x` may be a tf.data.Dataset of raw
    (x, y) batches. `seed` (an int) makes the run repeatable: it sets the order of the
    examples, dropout, and an untrained head's initial weights (drawn again from it); it
    sets TensorFlow's global seed too (`tf.random.set_seed`)."""
    self._check_inputs(x, y, "fit", batch_size)
    sample_weight, class_weight = self._example_weights(kwargs, "fit", x)
    if class_weight is not None:  # as Keras: each example weighs its label's weight
      sample_weight = self.class_weights_of_examples(class_weight, x, y, sample_weight)
    split, split_off = kwargs.pop("validation_split", None), None
    if split and validation_data is None:  # as Keras: the last fraction, before shuffling
      x, y, sample_weight, split_off = self._split_off_validation(x, y, sample_weight, split)
    if seed is not None:
      self._reseed(seed)
    if not self.compiled:
      self.compile()
    dataset = self._dataset(x, y, batch_size, shuffle, seed, training=True,
                            **_weights(sample_weight))
    if self._optimizer_settings is not None:
      steps = steps_per_epoch or int(dataset.cardinality())
      if steps == 0:
        raise ValueError("fit: x has no examples")
      if steps < 0:
        raise ValueError("fit: the number of batches is unknown; pass steps_per_epoch "
                         "(the learning rate schedule spans the steps of this fit)")
      # A fresh optimizer whose schedule spans exactly this fit's steps.
      self._use_fresh_optimizer(self._scheduled_optimizer(steps * epochs))
    if validation_data is not None:
      validation_data = self._dataset(*self.validation_x_y(validation_data), batch_size)
    elif split_off is not None:
      x_val, y_val, weights_val = split_off
      validation_data = self._dataset(x_val, y_val, batch_size, **_weights(weights_val))
    self._build_optimizer()
    history = super().fit(dataset, epochs=epochs, validation_data=validation_data,
                          steps_per_epoch=steps_per_epoch, shuffle=False, **kwargs)
    self.untrained_weights = []
    return history

  def _split_off_validation(self, x, y, sample_weight, split):
    """fit's `validation_split`: (x, y, sample_weight) of the first examples, and those of
    the last `split` of them, as Keras splits arrays."""
    files = self.reads_files and (isinstance(x, (str, os.PathLike)) or (
        isinstance(x, (list, tuple)) and x and all(
            isinstance(f, (str, os.PathLike)) for f in x)))
    if isinstance(x, tf.data.Dataset) or files:
      raise ValueError("fit: validation_split needs x as a list of examples (Keras splits "
                       "arrays only); give validation_data")
    if isinstance(split, bool) or not isinstance(split, (int, float)) or not 0 < split < 1:
      raise ValueError(f"fit: validation_split={split!r}: expected a fraction between 0 and 1")
    n = _length(x)
    k = math.ceil(n * (1 - split))  # as Keras
    if not 0 < k < n:
      raise ValueError(f"fit: validation_split={split} of {n} examples leaves none to "
                       f"{'train on' if k == 0 else 'validate on'}")

    def cut(value, part):
      if value is None:
        return None
      if isinstance(value, tuple):  # a pair of text lists
        return tuple(cut(v, part) for v in value)
      value = value.iloc if hasattr(value, "iloc") else value
      return value[:k] if part == 0 else value[k:]
    return (cut(x, 0), cut(y, 0), cut(sample_weight, 0),
            (cut(x, 1), cut(y, 1), cut(sample_weight, 1)))

  def validation_x_y(self, data):
    """fit's validation_data -> (x, y): (x, y) or a Dataset of raw (x, y) batches."""
    if isinstance(data, tf.data.Dataset):
      return data, None
    if isinstance(data, (tuple, list)) and len(data) == 2:
      return data[0], data[1]
    raise ValueError("validation_data must be (x, y) or a tf.data.Dataset of (x, y) batches")

  def _reseed(self, seed):
    """Dropout's random state, the order of the examples and an untrained head's initial
    weights from `seed`."""
    # tf.data's shuffle(seed=s) pairs s with TensorFlow's global seed: set it too, so that a
    # script's earlier tf.random.set_seed (or keras.utils.set_random_seed) leaves the order
    # of a seeded fit as it is.
    tf.random.set_seed(seed)
    generators = []
    for layer in self._flatten_layers(include_self=True, recursive=True):
      generators += [v for v in vars(layer).values()
                     if isinstance(v, keras.random.SeedGenerator)]
    for i, generator in enumerate(generators):
      generator.state.assign(np.array([seed + i, 0], generator.state.dtype))
    if keras.backend.backend() == "torch":
      # Keras' torch dropout draws from torch's global generator when the layer's
      # SeedGenerator has no initial seed (its fast path), not from the state above: a seeded
      # fit seeds torch's global generator (torch.manual_seed), as a seeded torch script does.
      import torch  # pylint: disable=g-import-not-at-top  (the torch backend only)
      torch.manual_seed(seed)
    if not self.untrained_weights:
      return
    variables = dict(weight_names.model_weight_pairs(self.network))
    initializer = keras.initializers.TruncatedNormal(
        stddev=self.backbone.bert_config.initializer_range, seed=seed)
    for name in self.untrained_weights:  # kernels as the heads draw them; biases stay 0
      variable = variables[name]
      if len(variable.shape) >= 2:
        variable.assign(initializer(variable.shape, variable.dtype))

  def _build_optimizer(self):
    """Creates the optimizer's slots now. Under the default strategy Keras leaves that to the
    first trace of the train step, and a tf.function that creates variables is traced twice:
    on CPU that doubled trace was half of a short fit's time (MiniLM: 7 s each)."""
    if self.optimizer is not None and not self.optimizer.built:
      with self._strategy_scope():
        if not self.built:
          self.build()
        self.optimizer.build(self.trainable_variables)

  def evaluate(self, x=None, y=None, batch_size=32, **kwargs):
    if kwargs.get("_use_cached_eval_dataset"):  # fit's validation: already preprocessed
      return super().evaluate(x, y, batch_size=batch_size, **kwargs)
    self._check_inputs(x, y, "evaluate", batch_size)
    if "class_weight" in kwargs:
      raise ValueError("evaluate takes no class_weight (as Keras' evaluate): give sample_weight")
    sample_weight, _ = self._example_weights(kwargs, "evaluate", x)
    self.warn_if_untrained("evaluate")
    if not self.compiled:
      self.compile()
    return super().evaluate(self._dataset(x, y, batch_size, **_weights(sample_weight)),
                            **kwargs)

  def warn_if_untrained(self, call):
    """A warning, once per model, when its head has never been trained: its outputs are
    random (`untrained_weights`)."""
    if self.untrained_weights and not getattr(self, "_warned_untrained", False):
      self._warned_untrained = True
      logging.warning(
          "%s: this %s's head was never trained (the model it was loaded from has no "
          "weights for it, e.g. %s), so its outputs are random: call fit() first, or load a "
          "fine-tuned model folder", call, type(self).__name__, self.untrained_weights[0])

  def predict_logits(self, x, batch_size=32, **kwargs):
    """The network's raw outputs over raw inputs (numpy)."""
    self._check_inputs(x, None, "predict", batch_size)
    self.warn_if_untrained("predict")
    return self.predict_features(self._dataset(x, None, batch_size), **kwargs)

  def predict_features(self, dataset, **kwargs):
    """The network's raw outputs (numpy) over a dataset of preprocessed `(features,)`
    batches."""
    if int(dataset.cardinality()) == 0:  # Keras' predict fails inside, and on JAX breaks the
      raise ValueError("predict: x has no examples")  # model's variables for later calls
    self._trace_predict_for_every_shape(dataset)
    outputs = super().predict(dataset, verbose=kwargs.pop("verbose", 0), **kwargs)
    # float32 whatever the compute dtype (mixed precision computes logits in float16).
    return tf.nest.map_structure(lambda a: a.astype("float32"), outputs)

  def _trace_predict_for_every_shape(self, dataset):
    """Traces Keras' predict function once for batches of any size and length. Keras traces
    it at the first batch's shapes and again, relaxed, at the first batch of others (the last,
    shorter batch; a batch cut to shorter sequences): the first trace is then wasted.
    TensorFlow's eager predict with one step per call, under the default strategy, where
    Keras calls it with the batch itself."""
    if (not ON_TENSORFLOW or self.run_eagerly or self.steps_per_execution != 1
        or (self.predict_function is not None
            and self.predict_function is self._relaxed_predict_function())
        or self.distribute_strategy is not tf.distribute.get_strategy()
        or tf.distribute.has_strategy()):
      return
    if not all(isinstance(spec, tf.TensorSpec) and spec.shape.rank is not None
               for spec in tf.nest.flatten(dataset.element_spec)):
      return  # (a ragged or sparse input, or one of unknown rank: Keras' own tracing)
    self.make_predict_function()
    relaxed = tf.nest.map_structure(
        lambda spec: tf.TensorSpec([None] * spec.shape.rank, spec.dtype), dataset.element_spec)
    self.predict_function.get_concrete_function([relaxed])
    # A weak reference: a tf.function held by the model would be saved in its SavedModel.
    self._relaxed_predict_function = weakref.ref(self.predict_function)

  # --- files -------------------------------------------------------------------------------

  def save(self, path, overwrite=None, **kwargs):
    """Writes a self-contained model folder (a checkpoint and the model files) that
    `from_preset`, `export --checkpoint` and `run_* --init_checkpoint` read.

    A folder that exists and is not empty is refused unless `overwrite=True`, which replaces
    the model there (its checkpoint and model files) and keeps every other file. A path
    ending in `.keras` is Keras' own one-file format instead (`keras.saving.load_model`;
    what `keras.callbacks.ModelCheckpoint` writes; overwritten unless `overwrite=False`,
    as Keras does)."""
    path = os.fspath(path)
    if path.endswith(".keras"):
      return super().save(path, overwrite=True if overwrite is None else overwrite, **kwargs)
    if path.endswith((".h5", ".hdf5")):  # Keras 3 writes no HDF5 model: not a folder so named
      raise ValueError(f"save: {path} names an HDF5 file, which Keras 3 models are not saved "
                       f"as: give a folder (a model folder), or a path ending in .keras")
    presets.save(path, self.network, self.preprocessor, self.run_record(),
                 overwrite=bool(overwrite))
    return None

  def export(self, path, overwrite=False, **options):
    """Writes the raw-text SavedModel the `export` command writes for this model. A
    non-empty folder is refused unless `overwrite=True` (which replaces the export's files
    and keeps every other file). TensorFlow backend only: elsewhere, `save` a folder and
    export it from a TensorFlow process."""
    if not ON_TENSORFLOW:
      raise ValueError(
          f"export writes a TensorFlow SavedModel: it needs KERAS_BACKEND=tensorflow (this "
          f"is {keras.backend.backend()}). Save the model instead, model.save(FOLDER), and "
          f"export that folder where TensorFlow runs: python -m official_bert.export "
          f"--checkpoint=FOLDER --export_dir={os.fspath(path)}")
    _check_export_options(options, self.export_option_names)
    return export_saved(self, self.model_type, path, overwrite, self.export_arguments(options))

  # `export` keywords of a model's own beside ExportOptions' (`export_arguments` maps them).
  export_option_names = ()

  def export_arguments(self, options):
    """`exporter.ExportOptions` keyword arguments (max_seq_length, labels, ...)."""
    return dict({"max_seq_length": self.preprocessor.sequence_length}, **options)


def export_saved(model, model_type, path, overwrite, arguments):
  """`model.save`s a model folder, then exports it with the export library, as the `export`
  command exports a command's OUTPUT_DIR."""
  path = os.fspath(path)
  folder_writes.check_writable(path, overwrite, "overwrite=True")  # before any work
  with tempfile.TemporaryDirectory() as folder:
    saved = os.path.join(folder, "model")
    model.save(saved)
    options = exporter.ExportOptions(model_type=model_type, overwrite=overwrite,
                                     source=f"the Python API's {type(model).__name__}",
                                     **arguments)
    return exporter.export(model_folder.read(saved), path, options)


# What `export` takes from the model itself, not as an option.
_MODEL_EXPORT_SETTINGS = ("model_type", "num_labels", "label_names", "squad_options",
                          "classifier_options", "head_config_file", "allow_random_head",
                          "overwrite", "source")


def _check_export_options(options, own_names=()):
  """ValueError naming an `export` keyword that is not one of the export command's options
  (or `own_names`, a model's own), or that the model sets (its labels, its task's
  settings)."""
  known = {f.name for f in dataclasses.fields(exporter.ExportOptions)} | set(own_names)
  unknown = sorted(set(options) - known)
  own = sorted(set(options) & set(_MODEL_EXPORT_SETTINGS))
  if unknown or own:
    allowed = sorted(known - set(_MODEL_EXPORT_SETTINGS))
    problem = (f"unknown option(s) {unknown}" if unknown else
               f"{own} come from the model, not an option")
    raise ValueError(f"export: {problem}; it takes the export command's options "
                     f"{', '.join(allowed)}")


def check_batch_size(batch_size):
  if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or (
      batch_size < 1):
    raise ValueError(f"batch_size={batch_size!r}: expected a whole number of examples, 1 or "
                     f"more")


def needs_a_new_head(cls, path, preset, arguments):
  """The error of `from_preset` on a folder not trained as `cls`'s task, without the
  `arguments` a new head needs: says what the folder is."""
  kind = preset.record.model_type
  what = (f"a {kind} model (its {model_files.RUN_SETTINGS_FILE})" if kind else
          f"a model with labels {preset.labels} (its {model_files.LABELS_FILE}) but no run "
          f"record of a task" if preset.labels else
          "a pretrained model (no run record of a task)")
  return ValueError(f"{cls.__name__}.from_preset: {path} is {what}, not a {cls.__name__}: "
                    f"pass {arguments} for a new head on its encoder")


class RatioMetric(keras.metrics.Metric):
  """sum(numerator) / sum(denominator) over every batch seen (a task's metric sums)."""

  def __init__(self, name, **kwargs):
    super().__init__(name=name, **kwargs)
    self.numerator = self.add_variable((), "zeros", name="numerator", aggregation="sum")
    self.denominator = self.add_variable((), "zeros", name="denominator", aggregation="sum")

  def update_state(self, numerator, denominator):  # pylint: disable=arguments-differ
    self.numerator.assign_add(keras.ops.cast(numerator, self.dtype))
    self.denominator.assign_add(keras.ops.cast(denominator, self.dtype))

  def result(self):
    return self.numerator / keras.ops.maximum(self.denominator, 1e-12)


def plain_label(label):
  """A label as JSON and `==` take it: numpy scalars as Python ones, bytes as str; anything
  else JSON cannot hold as its name (labels come back from `predict` as they went in)."""
  if isinstance(label, (bytes, np.bytes_)):
    return label.decode("utf-8")
  label = label.item() if isinstance(label, np.generic) else label
  return label if isinstance(label, (str, int, float, bool)) else str(label)


def _weights(sample_weight):
  """`_dataset`'s and `make_dataset`'s keyword for a sample_weight: none without one (a
  subclass's, MaskedLM's, takes no weights)."""
  return {} if sample_weight is None else {"sample_weight": sample_weight}


def example_weights(sample_weight, n):
  """fit/evaluate's `sample_weight` for `n` examples -> float32 [n] (None stays None)."""
  if sample_weight is None:
    return None
  weights = np.asarray(sample_weight.to_numpy() if hasattr(sample_weight, "to_numpy")
                       else sample_weight)
  if weights.shape != (n,) or weights.dtype.kind not in "biuf":
    raise ValueError(f"sample_weight: expected {n} numbers (one per example of x), got "
                     f"shape {weights.shape} of {weights.dtype}")
  weights = weights.astype(np.float32)
  if not (np.isfinite(weights).all() and (weights >= 0).all()):
    raise ValueError("sample_weight: every weight should be a finite number >= 0")
  return weights


def ids_are_names(labels):
  """Whether the label names are whole numbers (star ratings 1..5): an int in y is then a
  label's name, never an id (0 would silently be the first label)."""
  return bool(labels) and all(re.fullmatch(r"-?\d+", str(label)) for label in labels)


def _length(x):
  """The number of examples in raw inputs x (a list, array, Series or a pair of them)."""
  if isinstance(x, tuple) and x:
    x = x[0]
  try:
    return len(x)
  except TypeError:
    return int(x.shape[0]) if getattr(x, "shape", None) is not None and x.shape else -1


def batches(features, batch_size, shuffle, seed):
  """A dataset of `features` (a structure of numpy arrays or tensors), batched."""
  check_batch_size(batch_size)
  dataset = tf.data.Dataset.from_tensor_slices(features)
  if shuffle:
    n = int(dataset.cardinality())
    dataset = dataset.shuffle(max(n, 1), seed=seed, reshuffle_each_iteration=True)
  return dataset.batch(batch_size)
