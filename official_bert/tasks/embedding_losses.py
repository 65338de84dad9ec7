"""Sentence-embedding losses as plain functions of a batch's embedding pairs, per example.

Each takes the first and second texts' embeddings `a`, `b` [n, hidden] (any length: every loss
compares directions) and returns the loss of each pair [n], float32; the task sums them over
the real pairs and the loop divides by their number in the global batch, so the value is
sentence-transformers' mean loss over the batch.

  multiple_negatives  Henderson et al. 2017 / sentence-transformers'
                      MultipleNegativesRankingLoss: pair i's second text is the right answer
                      among every second text of the batch, cross-entropy over
                      scale * cos(a_i, b_j). `symmetric` also ranks the first texts for each
                      second text and averages both (MultipleNegativesSymmetricRankingLoss).
  cosine              CosineSimilarityLoss: (cos(a, b) - target)^2, target in [0, 1].
  contrastive         ContrastiveLoss (Hadsell et al. 2006) on the cosine distance
                      d = 1 - cos(a, b): 0.5 * (y d^2 + (1 - y) max(margin - d, 0)^2), y 1 for
                      similar pairs, 0 for dissimilar ones.
"""

from keras import ops

from official_bert.modeling.sentence_embedding import l2_normalize
from official_bert.tasks import losses

LOSSES = ("multiple_negatives", "cosine", "contrastive")


def _unit(x):
  return l2_normalize(ops.cast(x, "float32"))


def cosine(a, b):
  """cos(a_i, b_i): [n, h], [n, h] -> [n]."""
  return ops.sum(_unit(a) * _unit(b), axis=-1)


def cosine_matrix(a, b):
  """cos(a_i, b_j): [n, h], [m, h] -> [n, m]."""
  return ops.matmul(_unit(a), ops.transpose(_unit(b)))


def in_batch_scores(a, b, real, scale):
  """scale * cos(a_i, b_j) [n, n], with the columns of padding pairs (`real` 0) at -1e9: a
  padding example is no one's negative."""
  scores = scale * cosine_matrix(a, b)
  return ops.where(ops.cast(real, "bool")[None, :], scores, -1e9)


def multiple_negatives(a, b, real, scale=20.0, symmetric=False):
  """[n]: -log softmax_j(scale * cos(a_i, b_j))[i] (mean with the b -> a direction if
  `symmetric`); `real` [n] is 1 for real pairs."""
  right = ops.arange(ops.shape(a)[0], dtype="int32")
  forward = losses.sparse_nll(right, in_batch_scores(a, b, real, scale))
  if not symmetric:
    return forward
  backward = losses.sparse_nll(right, in_batch_scores(b, a, real, scale))
  return (forward + backward) / 2.0


def cosine_similarity(a, b, target):
  """[n]: (cos(a_i, b_i) - target_i)^2."""
  return ops.square(cosine(a, b) - ops.cast(target, "float32"))


def contrastive(a, b, label, margin=0.5):
  """[n]: 0.5 * (y d^2 + (1 - y) relu(margin - d)^2), d = 1 - cos(a, b)."""
  distance = 1.0 - cosine(a, b)
  label = ops.cast(label, "float32")
  return 0.5 * (label * ops.square(distance)
                + (1.0 - label) * ops.square(ops.relu(margin - distance)))


def in_batch_hits(a, b, real):
  """[n]: 1.0 where pair i's second text is the closest second text of the batch to a_i."""
  return losses.argmax_hits(ops.arange(ops.shape(a)[0], dtype="int32"),
                            in_batch_scores(a, b, real, 1.0))
