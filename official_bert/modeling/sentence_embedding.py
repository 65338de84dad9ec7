"""One vector per text from the encoder's token vectors: their mean over the real tokens.

This is how sentence-transformers models (all-MiniLM-L6-v2, ...) are trained and meant to be
used: mean pooling, then (most of them) L2 normalization, so that cosine similarity is a dot
product. The one implementation: the export's `mean_pooled_output` and
`extract_features --pooling=mean` both call `mean_pool`; `pool` adds [CLS] pooling, and
`SentenceEmbedder` is the model `run_embeddings` and `ob.TextEmbedder` train.
"""

import keras
from keras import ops

from official_bert.modeling.encoder import first_positions


def mean_pool(sequence_output, input_mask, normalize=False):
  """[batch, seq, hidden] and [batch, seq] -> [batch, hidden] float32.

  Only positions with input_mask 1 count; [CLS] and [SEP] are real tokens and count, as in
  sentence-transformers' Pooling(mean). An example without real tokens gives zeros, not NaN.
  With `normalize`, every vector has unit L2 norm.
  """
  # float32 even under mixed precision: a sum over hundreds of tokens loses digits in float16.
  values = ops.cast(sequence_output, "float32")
  mask = ops.cast(input_mask, "float32")[:, :, None]
  count = ops.maximum(ops.sum(mask, axis=1), 1.0)
  pooled = ops.sum(values * mask, axis=1) / count
  return l2_normalize(pooled) if normalize else pooled


def l2_normalize(x):
  """x / ||x|| over the last axis, as `tf.math.l2_normalize` (a zero vector stays zero)."""
  return x * ops.rsqrt(ops.maximum(ops.sum(ops.square(x), axis=-1, keepdims=True), 1e-12))


POOLINGS = ("mean", "cls", "pooled")


def pool(encoder_outputs, input_mask, pooling="mean", normalize=False):
  """One vector per sequence from the encoder's outputs: [batch, hidden] float32.

  pooling: "mean" (`mean_pool`), "cls" (the last layer's [CLS] vector, as a sentence
  encoder trained with CLS pooling) or "pooled" (BERT's tanh pooler over [CLS]).
  """
  if pooling == "mean":
    return mean_pool(encoder_outputs["sequence_output"], input_mask, normalize)
  if pooling == "cls":
    vector = first_positions(encoder_outputs["sequence_output"])
  elif pooling == "pooled":
    vector = encoder_outputs["pooled_output"]
  else:
    raise ValueError(f"pooling={pooling!r} must be one of {', '.join(POOLINGS)}")
  vector = ops.cast(vector, "float32")
  return l2_normalize(vector) if normalize else vector


@keras.saving.register_keras_serializable(package="official_bert")
class SentenceEmbedder(keras.Model):
  """An encoder and a pooling: texts in, one vector each; no weights of its own.

  Inputs are [batch, seq] (one text each) or [batch, texts, seq] (pairs for training, every
  text encoded on its own); returns {"embeddings": [batch, (texts,) hidden]} float32.
  """

  def __init__(self, encoder, pooling="mean", normalize=False, **kwargs):
    super().__init__(**kwargs)
    if pooling not in POOLINGS:
      raise ValueError(f"pooling={pooling!r} must be one of {', '.join(POOLINGS)}")
    self.encoder = encoder
    self.pooling = pooling
    self.normalize = bool(normalize)

  def build(self, input_shape=None):
    self.encoder.build()
    self.built = True

  def call(self, inputs, training=None):
    word_ids = inputs["input_word_ids"]
    shape = ops.shape(word_ids)  # (batch, seq) or (batch, texts, seq)
    flat = {k: ops.reshape(inputs[k], (-1, shape[-1]))
            for k in ("input_word_ids", "input_mask", "input_type_ids")}  # [b*texts, seq]
    outputs = self.encoder(flat, training=training)
    vectors = pool(outputs, flat["input_mask"], self.pooling, self.normalize)  # [b*texts, h]
    return {"embeddings": ops.reshape(vectors, tuple(shape[:-1]) + (-1,))}

  def get_config(self):
    return {"name": self.name, "trainable": self.trainable,
            "encoder": keras.saving.serialize_keras_object(self.encoder),
            "pooling": self.pooling, "normalize": self.normalize}

  @classmethod
  def from_config(cls, config):
    config = dict(config)
    config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
    return cls(**config)
