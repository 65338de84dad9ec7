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

import tensorflow as tf

LOSSES = ("multiple_negatives", "cosine", "contrastive")


def _unit(x):
  return tf.math.l2_normalize(tf.cast(x, tf.float32), axis=-1)


def cosine(a, b):
  """cos(a_i, b_i): [n, h], [n, h] -> [n]."""
  return tf.reduce_sum(_unit(a) * _unit(b), axis=-1)


def cosine_matrix(a, b):
  """cos(a_i, b_j): [n, h], [m, h] -> [n, m]."""
  return tf.matmul(_unit(a), _unit(b), transpose_b=True)


def in_batch_scores(a, b, real, scale):
  """scale * cos(a_i, b_j) [n, n], with the columns of padding pairs (`real` 0) at -1e9: a
  padding example is no one's negative."""
  scores = scale * cosine_matrix(a, b)
  return tf.where(tf.cast(real, tf.bool)[None, :], scores, -1e9)


def multiple_negatives(a, b, real, scale=20.0, symmetric=False):
  """[n]: -log softmax_j(scale * cos(a_i, b_j))[i] (mean with the b -> a direction if
  `symmetric`); `real` [n] is 1 for real pairs."""
  n = tf.shape(a)[0]
  right = tf.range(n)
  forward = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=right, logits=in_batch_scores(a, b, real, scale))
  if not symmetric:
    return forward
  backward = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=right, logits=in_batch_scores(b, a, real, scale))
  return (forward + backward) / 2.0


def cosine_similarity(a, b, target):
  """[n]: (cos(a_i, b_i) - target_i)^2."""
  return tf.square(cosine(a, b) - tf.cast(target, tf.float32))


def contrastive(a, b, label, margin=0.5):
  """[n]: 0.5 * (y d^2 + (1 - y) relu(margin - d)^2), d = 1 - cos(a, b)."""
  distance = 1.0 - cosine(a, b)
  label = tf.cast(label, tf.float32)
  return 0.5 * (label * tf.square(distance)
                + (1.0 - label) * tf.square(tf.nn.relu(margin - distance)))


def in_batch_hits(a, b, real):
  """[n]: 1.0 where pair i's second text is the closest second text of the batch to a_i."""
  best = tf.argmax(in_batch_scores(a, b, real, 1.0), axis=-1, output_type=tf.int32)
  return tf.cast(tf.equal(best, tf.range(tf.shape(a)[0])), tf.float32)
