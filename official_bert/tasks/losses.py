"""The losses and metric sums every task is made of, as plain functions of tensors.

Tasks report sums over a batch plus the normalizer they are divided by (see `base.Task`); the
loop divides by the normalizer summed over the global batch. With the masked-LM normalizer
(the number of real predictions) plus 1e-5, this is exactly google-research/bert's
`sum(-log p * weight) / (sum(weight) + 1e-5)`: a batch whose prediction slots are all padding
yields loss 0 rather than NaN.
"""

import tensorflow as tf


def sparse_nll(labels, logits):
  """-log softmax(logits)[label], in float32: [...], [..., classes] -> [...].

  The fused kernel: a gather from log_softmax would backprop through a scatter
  (UnsortedSegmentSum) into a zeroed [batch, P, vocab] tensor, much slower.
  """
  return tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=tf.cast(labels, tf.int32), logits=tf.cast(logits, tf.float32))


def weighted_sum(values, weights=None):
  """sum(values * weights) in float32 (all weights 1 when None)."""
  values = tf.cast(values, tf.float32)
  return tf.reduce_sum(values if weights is None else values * tf.cast(weights, tf.float32))


def count(labels, weights=None):
  """The normalizer of `labels`: their number, or the sum of their weights."""
  if weights is None:
    return tf.cast(tf.size(labels), tf.float32)
  return tf.reduce_sum(tf.cast(weights, tf.float32))


def argmax_hits(labels, logits):
  """1.0 where argmax(logits) == label, else 0.0: [...], [..., classes] -> [...]."""
  predicted = tf.argmax(logits, -1, output_type=tf.int32)
  return tf.cast(tf.equal(predicted, tf.cast(labels, tf.int32)), tf.float32)


def accuracy_sums(labels, logits, weights=None):
  """(hits, count) of the argmax predictions: a ratio metric for `Task.metric_sums`."""
  return weighted_sum(argmax_hits(labels, logits), weights), count(labels, weights)
