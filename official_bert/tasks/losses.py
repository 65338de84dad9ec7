"""The losses and metric sums every task is made of, as plain functions of tensors.

Tasks report sums over a batch plus the normalizer they are divided by (see `base.Task`); the
loop divides by the normalizer summed over the global batch. With the masked-LM normalizer
(the number of real predictions) plus 1e-5, this is exactly google-research/bert's
`sum(-log p * weight) / (sum(weight) + 1e-5)`: a batch whose prediction slots are all padding
yields loss 0 rather than NaN.

`keras.ops` only: the same functions serve the Python API's `fit` on every Keras backend.
"""

from keras import ops


def sparse_nll(labels, logits):
  """-log softmax(logits)[label], in float32: [...], [..., classes] -> [...].

  On TensorFlow the fused kernel (`tf.nn.sparse_softmax_cross_entropy_with_logits`): a
  gather from log_softmax would backprop through a scatter into a zeroed [batch, P, vocab]
  tensor, much slower.
  """
  return ops.sparse_categorical_crossentropy(
      ops.cast(labels, "int32"), ops.cast(logits, "float32"), from_logits=True)


def weighted_sum(values, weights=None):
  """sum(values * weights) in float32 (all weights 1 when None)."""
  values = ops.cast(values, "float32")
  return ops.sum(values if weights is None else values * ops.cast(weights, "float32"))


def count(labels, weights=None):
  """The normalizer of `labels`: their number, or the sum of their weights."""
  if weights is None:
    return ops.cast(ops.size(labels), "float32")
  return ops.sum(ops.cast(weights, "float32"))


def argmax_hits(labels, logits):
  """1.0 where argmax(logits) == label, else 0.0: [...], [..., classes] -> [...]."""
  predicted = ops.cast(ops.argmax(logits, axis=-1), "int32")
  return ops.cast(ops.equal(predicted, ops.cast(labels, "int32")), "float32")


def accuracy_sums(labels, logits, weights=None):
  """(hits, count) of the argmax predictions: a ratio metric for `Task.metric_sums`."""
  return weighted_sum(argmax_hits(labels, logits), weights), count(labels, weights)
