"""One vector per text from the encoder's token vectors: their mean over the real tokens.

This is how sentence-transformers models (all-MiniLM-L6-v2, ...) are trained and meant to be
used: mean pooling, then (most of them) L2 normalization, so that cosine similarity is a dot
product. The one implementation: the export's `mean_pooled_output` and
`extract_features --pooling=mean` both call `mean_pool`.
"""

import tensorflow as tf


def mean_pool(sequence_output, input_mask, normalize=False):
  """[batch, seq, hidden] and [batch, seq] -> [batch, hidden] float32.

  Only positions with input_mask 1 count; [CLS] and [SEP] are real tokens and count, as in
  sentence-transformers' Pooling(mean). An example without real tokens gives zeros, not NaN.
  With `normalize`, every vector has unit L2 norm.
  """
  # float32 even under mixed precision: a sum over hundreds of tokens loses digits in float16.
  values = tf.cast(sequence_output, tf.float32)
  mask = tf.cast(input_mask, tf.float32)[:, :, None]
  count = tf.maximum(tf.reduce_sum(mask, axis=1), 1.0)
  pooled = tf.reduce_sum(values * mask, axis=1) / count
  return tf.math.l2_normalize(pooled, axis=-1) if normalize else pooled
