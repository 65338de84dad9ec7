"""The task abstraction every `run_*.py` composes with the one training loop.

A task says how to build its model and inputs, and how to score a batch. Losses are given as
sums over examples plus the normalizer they are divided by; the loop adds the normalizers over
all replicas and micro-batches of a step before differentiating. So a step's gradient is the
gradient of the loss over the whole global batch, whatever the strategy or accumulation, and
MirroredStrategy on N devices or k accumulated micro-batches equals one big batch.
"""

import abc

import keras
import tensorflow as tf

from official_bert.training import input_pipeline
from official_bert.modeling.encoder import BertEncoder
from official_bert.modeling.pretraining_model import BertPretrainingModel


class Task(abc.ABC):
  """What the training loop needs to know about a task."""

  # name -> epsilon added to its global normalizer (the original MLM loss adds 1e-5).
  loss_epsilons = {}

  @abc.abstractmethod
  def build_model(self):
    """A Keras model mapping a features dict to an outputs dict."""

  def input_id_limits(self):
    """feature name -> (bert_config key, its value): the exclusive upper bound of the ids.

    The loop checks every batch, so records written for another vocabulary fail with a
    message naming the feature and the config value, not inside a gather.
    """
    config = getattr(self, "bert_config", None)
    if config is None:
      return {}
    return {"input_word_ids": ("vocab_size", config.vocab_size),
            "input_type_ids": ("type_vocab_size", config.type_vocab_size)}

  @abc.abstractmethod
  def build_dataset(self, input_patterns, per_replica_batch_size, is_training,
                    input_context=None, seed=None, skip_examples=0):
    """A tf.data.Dataset of feature dicts with per-replica batches, after skipping
    `skip_examples` examples of this input pipeline's (seeded, repeated) stream."""

  @abc.abstractmethod
  def loss_normalizers(self, features):
    """name -> this batch's share of each loss normalizer (e.g. its number of examples)."""

  @abc.abstractmethod
  def loss_sums(self, features, outputs):
    """name -> sum of the loss over this batch (float32 scalar)."""

  @abc.abstractmethod
  def metric_sums(self, features, outputs):
    """name -> (numerator, denominator) sums for metrics reported as their ratio."""


def _sparse_nll(labels, logits):
  # The fused kernel: a gather from log_softmax would backprop through a scatter
  # (UnsortedSegmentSum) into a zeroed [batch, P, vocab] tensor, much slower.
  return tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=tf.cast(labels, tf.int32), logits=tf.cast(logits, tf.float32))


class PretrainingTask(Task):
  """Masked LM + next sentence prediction, as the original run_pretraining.py."""

  loss_epsilons = {"masked_lm_loss": 1e-5, "next_sentence_loss": 0.0}

  def __init__(self, bert_config, seq_length, max_predictions_per_seq,
               shuffle_buffer_size=10000):
    self.bert_config = bert_config
    self.seq_length = seq_length
    self.max_predictions_per_seq = max_predictions_per_seq
    self.shuffle_buffer_size = shuffle_buffer_size

  def build_model(self):
    encoder = BertEncoder.from_bert_config(self.bert_config)
    model = BertPretrainingModel(encoder, name="bert_pretraining")
    model.build()
    return model

  def build_dataset(self, input_patterns, per_replica_batch_size, is_training,
                    input_context=None, seed=None, skip_examples=0):
    return input_pipeline.pretraining_dataset(
        input_patterns, self.seq_length, self.max_predictions_per_seq,
        per_replica_batch_size, is_training=is_training, input_context=input_context,
        seed=seed, skip_examples=skip_examples, shuffle_buffer_size=self.shuffle_buffer_size)

  def input_id_limits(self):
    return dict(super().input_id_limits(),
                masked_lm_ids=("vocab_size", self.bert_config.vocab_size))

  def loss_normalizers(self, features):
    weights = tf.cast(features["masked_lm_weights"], tf.float32)
    examples = tf.cast(tf.shape(features["next_sentence_labels"])[0], tf.float32)
    return {"masked_lm_loss": tf.reduce_sum(weights), "next_sentence_loss": examples}

  def loss_sums(self, features, outputs):
    weights = tf.cast(features["masked_lm_weights"], tf.float32)  # [b, P]
    mlm_nll = _sparse_nll(features["masked_lm_ids"], outputs["masked_lm_logits"])  # [b, P]
    nsp_nll = _sparse_nll(features["next_sentence_labels"],
                          outputs["next_sentence_logits"])  # [b]
    return {"masked_lm_loss": tf.reduce_sum(mlm_nll * weights),
            "next_sentence_loss": tf.reduce_sum(nsp_nll)}

  def metric_sums(self, features, outputs):
    weights = tf.cast(features["masked_lm_weights"], tf.float32)
    mlm_hit = tf.cast(tf.equal(tf.argmax(outputs["masked_lm_logits"], -1, output_type=tf.int32),
                               features["masked_lm_ids"]), tf.float32)
    nsp_hit = tf.cast(tf.equal(tf.argmax(outputs["next_sentence_logits"], -1,
                                         output_type=tf.int32),
                               features["next_sentence_labels"]), tf.float32)
    return {"masked_lm_accuracy": (tf.reduce_sum(mlm_hit * weights), tf.reduce_sum(weights)),
            "next_sentence_accuracy": (tf.reduce_sum(nsp_hit),
                                       tf.cast(tf.size(nsp_hit), tf.float32))}


def set_precision(dtype):
  """Global Keras policy for float32 | bfloat16 | float16 (mixed: float32 variables)."""
  policies = {"float32": "float32", "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}
  if dtype not in policies:
    raise ValueError(f"--dtype={dtype!r}: expected one of {sorted(policies)}")
  keras.mixed_precision.set_dtype_policy(policies[dtype])
