"""The losses a student learns its teacher by (`tasks.distillation`), per example or token.

Each returns a value per scored item ([batch] for a classifier, [batch, seq] for a tagger);
the task weighs and sums them as every loss (`losses.weighted_sum`).

  soft_cross_entropy   Hinton et al. (2015): KL(teacher_T || student_T) over the classes,
                       both softened by the temperature T, times T^2 (so the gradient keeps
                       its scale as T changes). KL, not cross-entropy: the same gradient, and 0
                       when the student matches, so the logged value means something.
  binary_soft_cross_entropy   the same for independent sigmoids (multi-label), averaged over
                       the labels, as the hard multi-label loss is.
  regression_distance  a regression teacher's output as the target: squared difference.
  hidden_distance      TinyBERT's hidden-state loss: mean squared difference over the width.
  attention_distance   TinyBERT's attention loss: mean squared difference of the attention
                       scores (q k^T / sqrt(d), before the softmax) over the heads and the
                       real keys, per query token.

`keras.ops` only, float32.
"""

from keras import ops


def _float(x):
  return ops.cast(x, "float32")


def soft_cross_entropy(student_logits, teacher_logits, temperature):
  """T^2 KL(softmax(t / T) || softmax(s / T)): [..., classes] x2 -> [...]."""
  t = float(temperature)
  teacher_log_p = ops.log_softmax(_float(teacher_logits) / t, axis=-1)
  student_log_p = ops.log_softmax(_float(student_logits) / t, axis=-1)
  kl = ops.sum(ops.exp(teacher_log_p) * (teacher_log_p - student_log_p), axis=-1)
  return kl * (t * t)


def binary_soft_cross_entropy(student_logits, teacher_logits, temperature):
  """T^2 mean over labels of KL(Bernoulli(sigmoid(t / T)) || Bernoulli(sigmoid(s / T))):
  [..., labels] x2 -> [...]."""
  t = float(temperature)
  s_logits, t_logits = _float(student_logits) / t, _float(teacher_logits) / t
  p = ops.sigmoid(t_logits)
  # log sigmoid(x) = -softplus(-x), log(1 - sigmoid(x)) = -softplus(x): stable for any x.
  kl = (p * (ops.softplus(-s_logits) - ops.softplus(-t_logits)) + (1.0 - p) *
        (ops.softplus(s_logits) - ops.softplus(t_logits)))
  return ops.mean(kl, axis=-1) * (t * t)


def regression_distance(student_outputs, teacher_outputs):
  """(s - t)^2 of the first output: [batch, 1] x2 -> [batch]."""
  return ops.square(_float(student_outputs)[..., 0] - _float(teacher_outputs)[..., 0])


def hidden_distance(student_states, teacher_states):
  """Mean over the width of (s - t)^2, averaged over the pairs of hidden states:
  lists of [batch, seq, hidden] -> [batch, seq]."""
  distances = [
      ops.mean(ops.square(_float(s) - _float(t)), axis=-1)
      for s, t in zip(student_states, teacher_states)
  ]
  return sum(distances[1:], distances[0]) / float(len(distances))


def attention_distance(student_scores, teacher_scores, mask):
  """Per query token, the mean over heads and real keys of (s - t)^2, averaged over the
  pairs of layers: lists of [batch, heads, seq, seq] scores and the [batch, seq] mask (1 for
  real tokens) -> [batch, seq]. Padded keys are left out (TinyBERT zeroes their masked
  scores, which comes to the same), padded queries are the caller's to weigh."""
  keys = _float(mask)[:, None, None, :]  # [b, 1, 1, s]
  num_keys = ops.maximum(ops.sum(_float(mask), axis=-1), 1.0)[:, None]  # [b, 1]
  distances = []
  for s, t in zip(student_scores, teacher_scores):
    squared = ops.square(_float(s) - _float(t)) * keys  # [b, h, s, s]
    per_query = ops.mean(ops.sum(squared, axis=-1), axis=1)  # [b, s]
    distances.append(per_query / num_keys)
  return sum(distances[1:], distances[0]) / float(len(distances))
