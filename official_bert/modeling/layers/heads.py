"""Pretraining heads: `MaskedLMHead` and `NextSentenceHead`."""

import keras
from keras import ops

from official_bert.modeling import activations
from official_bert.modeling.bert_config import LAYER_NORM_EPSILON
from official_bert.modeling.layers.config_layer import ConfigLayer
from official_bert.modeling.layers.config_layer import truncated_normal


def gather_positions(x, positions):
  """x [batch, seq, ...] and int positions [batch, P] -> x at those positions [batch, P, ...].

  One gather from the flattened batch: keras' `take_along_axis` broadcasts and transposes
  the whole [batch, seq, hidden] input first (on TensorFlow), several times the work.
  """
  positions = ops.cast(positions, "int32")
  batch, seq = ops.shape(x)[0], ops.shape(x)[1]
  offsets = ops.arange(batch, dtype="int32")[:, None] * seq  # [batch, 1]
  flat = ops.reshape(x, (-1,) + tuple(x.shape[2:]))  # [batch * seq, ...]
  return ops.take(flat, positions + offsets, axis=0)  # [batch, P, ...]


@keras.saving.register_keras_serializable(package="official_bert")
class MaskedLMHead(ConfigLayer):
  """Masked-LM head of original BERT (`cls/predictions`).

  transform = LN(act(Dense(H)(h))); logits = transform @ E^T + output_bias,
  where E is the word embedding table. E is passed at call time rather than
  owned, so the decoder stays tied to the encoder's embedding variable and
  this layer serializes without a copy of it.

  Call args:
    sequence_output: float [batch, seq, hidden].
    masked_positions: int [batch, num_predictions], indices into `seq`.
    embedding_table: float [vocab_size, hidden] (e.g.
      `encoder.embeddings.embedding_table`).

  Returns:
    Logits, float [batch, num_predictions, vocab_size].
  """

  def __init__(self,
               vocab_size,
               hidden_size=768,
               hidden_act="gelu",
               initializer_range=0.02,
               layer_norm_epsilon=LAYER_NORM_EPSILON,
               **kwargs):
    super().__init__(**kwargs)
    self.store_config(locals())
    self._activation_fn = activations.get_activation(hidden_act)

    self.transform_dense = keras.layers.Dense(
        hidden_size,
        kernel_initializer=truncated_normal(initializer_range),
        dtype=self.dtype_policy,
        name="transform_dense")
    self.transform_layer_norm = keras.layers.LayerNormalization(
        epsilon=layer_norm_epsilon, dtype=self.dtype_policy,
        name="transform_layer_norm")

  def build(self, input_shape=None):
    if self.built:  # Idempotent: a parent may rebuild a built child.
      return
    self.transform_dense.build((None, None, self.hidden_size))
    self.transform_layer_norm.build((None, None, self.hidden_size))
    # The original initializes this bias to zeros; HF calls it
    # `cls.predictions.bias`.
    self.output_bias = self.add_weight(
        name="output_bias", shape=(self.vocab_size,), initializer="zeros")
    self.built = True

  def call(self, sequence_output, masked_positions, embedding_table):
    gathered = gather_positions(sequence_output, masked_positions)  # [batch, P, hidden]
    x = self._activation_fn(self.transform_dense(gathered))  # [b, P, hidden]
    x = self.transform_layer_norm(x)  # [batch, P, hidden]
    table = ops.cast(embedding_table, x.dtype)  # [vocab, hidden]
    # One 2-D matmul: a batched [b, P, h] x [h, v] product would make the
    # table's gradient a [b, h, v] batch of matmuls summed over b, several
    # times slower (and b times the memory) on CPU. The transpose folds into the matmul
    # (TensorFlow's graph optimizer, XLA).
    batch, predictions = ops.shape(x)[0], ops.shape(x)[1]
    flat = ops.reshape(x, (-1, self.hidden_size))  # [batch * P, hidden]
    logits = ops.matmul(flat, ops.transpose(table))  # [batch * P, vocab]
    logits = logits + ops.cast(self.output_bias, x.dtype)
    return ops.reshape(logits, (batch, predictions, self.vocab_size))

  def compute_output_shape(self, sequence_output_shape, masked_positions_shape,
                           embedding_table_shape=None):
    return tuple(masked_positions_shape) + (self.vocab_size,)


@keras.saving.register_keras_serializable(package="official_bert")
class NextSentenceHead(ConfigLayer):
  """2-way next-sentence classifier on the pooled output.

  Weights are stored as [2, hidden] (like `cls/seq_relationship/
  output_weights` in the TF1 checkpoint and `cls.seq_relationship.weight` in
  HF), not as a Dense [hidden, 2] kernel, so conversion needs no transpose.

  Call args:
    pooled_output: float [batch, hidden].

  Returns:
    Logits, float [batch, 2]; index 0 means "is next", as in the original.
  """

  def __init__(self, hidden_size=768, initializer_range=0.02, **kwargs):
    super().__init__(**kwargs)
    self.store_config(locals())

  def build(self, input_shape=None):
    if self.built:  # Idempotent: a parent may rebuild a built child.
      return
    self.output_weights = self.add_weight(
        name="output_weights",
        shape=(2, self.hidden_size),
        initializer=truncated_normal(self.initializer_range))
    self.output_bias = self.add_weight(
        name="output_bias", shape=(2,), initializer="zeros")
    self.built = True

  def call(self, pooled_output):
    logits = ops.matmul(pooled_output,
                        ops.transpose(self.output_weights))  # [batch, 2]
    return logits + self.output_bias

  def compute_output_shape(self, input_shape):
    return (input_shape[0], 2)

