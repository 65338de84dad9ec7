"""Pretraining losses and metrics, as plain functions of tensors.

They follow google-research BERT's `run_pretraining.py` exactly, including
the 1e-5 in the masked-LM denominator (so a batch whose prediction slots are
all padding yields loss 0 rather than NaN).
"""

from keras import ops


def masked_lm_loss(labels, logits, weights):
  """Weighted mean negative log-likelihood of the masked tokens.

  Args:
    labels: int [batch, P], target token ids (`masked_lm_ids`).
    logits: float [batch, P, vocab].
    weights: float [batch, P], 1.0 for real predictions, 0.0 for padding
      (`masked_lm_weights`).

  Returns:
    Scalar: sum(-log p(label) * weight) / (sum(weight) + 1e-5).
  """
  logits = ops.cast(logits, "float32")
  log_probs = ops.log_softmax(logits, axis=-1)  # [batch, P, vocab]
  one_hot = ops.one_hot(ops.cast(labels, "int32"), ops.shape(logits)[-1],
                        dtype="float32")  # [batch, P, vocab]
  per_example = -ops.sum(log_probs * one_hot, axis=-1)  # [batch, P]
  weights = ops.cast(weights, "float32")
  numerator = ops.sum(per_example * weights)
  denominator = ops.sum(weights) + 1e-5
  return numerator / denominator


def next_sentence_loss(labels, logits):
  """Mean cross-entropy of the 2-way next-sentence classifier.

  Args:
    labels: int [batch] (or [batch, 1]), 0 = "is next", 1 = "random".
    logits: float [batch, 2].
  """
  logits = ops.cast(logits, "float32")
  labels = ops.reshape(ops.cast(labels, "int32"), (-1,))  # [batch]
  log_probs = ops.log_softmax(logits, axis=-1)  # [batch, 2]
  one_hot = ops.one_hot(labels, 2, dtype="float32")  # [batch, 2]
  return ops.mean(-ops.sum(log_probs * one_hot, axis=-1))


def masked_lm_accuracy(labels, logits, weights):
  """Weighted fraction of masked tokens whose argmax equals the label.

  Returns 0 when all weights are 0 (like the original `tf.metrics.accuracy`
  with weights).
  """
  predictions = ops.argmax(logits, axis=-1)  # [batch, P]
  correct = ops.cast(
      ops.equal(predictions, ops.cast(labels, predictions.dtype)),
      "float32")  # [batch, P]
  weights = ops.cast(weights, "float32")
  return ops.divide_no_nan(ops.sum(correct * weights), ops.sum(weights))


def next_sentence_accuracy(labels, logits):
  """Fraction of examples whose argmax equals the next-sentence label."""
  predictions = ops.argmax(logits, axis=-1)  # [batch]
  labels = ops.reshape(ops.cast(labels, predictions.dtype), (-1,))  # [batch]
  return ops.mean(ops.cast(ops.equal(predictions, labels), "float32"))
