"""The task abstraction every job (`tasks/*_job.py`, `tasks/pretraining_job.py`) composes
with the one training loop.

A task says how to build its model and inputs, and how to score a batch. Losses are given as
sums over examples plus the normalizer they are divided by; the loop adds the normalizers over
all replicas and micro-batches of a step before differentiating. So a step's gradient is the
gradient of the loss over the whole global batch, whatever the strategy or accumulation, and
MirroredStrategy on N devices or k accumulated micro-batches equals one big batch. Evaluation
adds the same sums over the whole evaluation set before dividing (`training.evaluation`).
"""

import abc

from official_bert.training import input_pipeline


class Task(abc.ABC):
  """What the training loop needs to know about a task.

  Subclasses set `bert_config`, `features` (the records' schema, `data_prep.schema`) and
  optionally `shapes` (model feature name -> per-example shape of a flattened feature),
  `shuffle_buffer_size`, `keep_features` (features passed through predictions) and
  `token_features`/`position_outputs` (what cutting padding applies to).
  """

  # name -> epsilon added to its global normalizer (the original MLM loss adds 1e-5).
  loss_epsilons = {}
  features = ()
  shapes = None
  shuffle_buffer_size = 10000
  keep_features = ()
  bert_config = None
  # Features with a position axis (model names), cut with the inputs when batches are
  # trimmed to their longest real sequence; () for a task whose batches keep the record
  # length. Not position indices (SQuAD's answers point at real tokens, which stay).
  token_features = ("input_word_ids", "input_mask", "input_type_ids")
  # Outputs with a position axis (logits per token): `evaluation` concatenates the outputs
  # of all batches, which needs one width, so evaluation and prediction keep the length.
  position_outputs = False
  # The run's --trim_padding, --group_by_length and --last_partial_batch
  # (`runner.make_trainer` sets them).
  trim_padding = False
  group_by_length = False
  last_partial_batch = False

  @abc.abstractmethod
  def build_model(self):
    """A Keras model mapping a features dict to an outputs dict."""

  def input_id_limits(self):
    """feature name -> (bert_config key, its value): the exclusive upper bound of the ids.

    The loop checks every batch, so records written for another vocabulary fail with a
    message naming the feature and the config value, not inside a gather.
    """
    if self.bert_config is None:
      return {}
    return {"input_word_ids": ("vocab_size", self.bert_config.vocab_size),
            "input_type_ids": ("type_vocab_size", self.bert_config.type_vocab_size)}

  def record_features(self, is_training):
    """The schema of the records read for training (True) or evaluation/prediction."""
    del is_training
    return self.features

  def batch_transform(self, input_context=None):
    """None (batches as parsed), or the function `build_dataset` applies to every batch:
    (parsed batch, element indices) -> batch (`input_pipeline.dataset`'s batch_transform),
    e.g. pretraining's masking on the fly. input_context: the pipeline's, so that randomness
    can be keyed by it."""
    del input_context
    return None

  def build_dataset(self, input_patterns, per_replica_batch_size, is_training,
                    input_context=None, seed=None, skip_examples=0):
    """A tf.data.Dataset of feature dicts with per-replica batches, after skipping
    `skip_examples` examples of this input pipeline's (seeded, repeated) stream; every task's
    through `input_pipeline.dataset`, with its `batch_transform` and padding options."""
    trim = self.trim_padding and (is_training or not self.position_outputs)
    epoch_batches = is_training and self.last_partial_batch
    return input_pipeline.dataset(
        input_patterns, self.record_features(is_training), per_replica_batch_size,
        is_training=is_training, input_context=input_context, seed=seed,
        skip_examples=skip_examples, shuffle_buffer_size=self.shuffle_buffer_size,
        shapes=self.shapes, batch_transform=self.batch_transform(input_context),
        trim_features=self.token_features if trim else (),
        group_by_length=self.group_by_length, epoch_batches=epoch_batches)

  @abc.abstractmethod
  def loss_normalizers(self, features):
    """name -> this batch's share of each loss normalizer (e.g. its number of examples)."""

  @abc.abstractmethod
  def loss_sums(self, features, outputs):
    """name -> sum of the loss over this batch (float32 scalar)."""

  @abc.abstractmethod
  def metric_sums(self, features, outputs):
    """name -> (numerator, denominator) sums for metrics reported as their ratio."""
