"""`BertSelfAttention`: multi-head self-attention exactly as original BERT."""

import keras
from keras import ops

from official_bert.modeling.layers import recomputation
from official_bert.modeling.layers.config_layer import ConfigLayer
from official_bert.modeling.layers.config_layer import truncated_normal

# The original adds -10000 (not -inf) to logits of padded keys. exp(-10000)
# underflows to 0 in float32, so real positions match an -inf mask, and a row
# with every key masked still yields a finite (uniform) distribution.
_MASK_ADDER = -10000.0


def _key_bias(mask, dtype):
  """[batch, seq] 1 for real keys -> [batch, 1, 1, seq]: 0, or -10000 for padded keys."""
  return (1.0 - ops.cast(mask, dtype)[:, None, None, :]) * _MASK_ADDER


@keras.saving.register_keras_serializable(package="official_bert")
class BertSelfAttention(ConfigLayer):
  """Scaled dot-product self-attention with [hidden, hidden] projections.

  Separate `query`/`key`/`value` Dense layers (instead of
  `keras.layers.MultiHeadAttention`'s [hidden, heads, head_size] kernels) keep
  every variable shaped like the TF1 checkpoint's `attention/self/*/kernel`,
  so checkpoint conversion is a plain copy. The output projection lives in
  `TransformerBlock`, matching the checkpoint's `attention/output/dense`.

  Call args:
    x: float [batch, seq, hidden], or [tokens, hidden] with `packing`.
    padding_mask: optional [batch, seq], 1 (or True) for real tokens.
    training: enables dropout on attention probabilities.
    packing: optional `TokenPacking` of `padding_mask`: `x` holds the real tokens only; the
      projections run on them, the seq x seq part on the packing's blocks of sequences.
    dropout_seed: with `training`, the seed of the dropout on the probabilities
      (`recomputation.FixedSeed`); None: the dropout layer's own generator.

  Returns:
    Context vectors, float shaped like `x`.
  """

  def __init__(self,
               hidden_size=768,
               num_attention_heads=12,
               attention_probs_dropout_prob=0.1,
               initializer_range=0.02,
               **kwargs):
    super().__init__(**kwargs)
    self.store_config(locals())
    if hidden_size % num_attention_heads:
      raise ValueError(
          f"hidden_size ({hidden_size}) must be a multiple of "
          f"num_attention_heads ({num_attention_heads}).")
    self.head_size = hidden_size // num_attention_heads

    def dense(name):
      return keras.layers.Dense(
          hidden_size,
          kernel_initializer=truncated_normal(initializer_range),
          dtype=self.dtype_policy,
          name=name)

    self.query = dense("query")
    self.key = dense("key")
    self.value = dense("value")
    self.dropout = keras.layers.Dropout(
        attention_probs_dropout_prob, dtype=self.dtype_policy, name="dropout")

  def build(self, input_shape=None):
    if self.built:  # Idempotent: a parent may rebuild a built child.
      return
    shape = (None, None, self.hidden_size)
    self.query.build(shape)
    self.key.build(shape)
    self.value.build(shape)
    self.built = True

  def _split_heads(self, x):
    # [batch, seq, hidden] -> [batch, heads, seq, head_size]
    batch, seq = ops.shape(x)[0], ops.shape(x)[1]
    x = ops.reshape(x, (batch, seq, self.num_attention_heads, self.head_size))
    return ops.transpose(x, (0, 2, 1, 3))

  def call(self, x, padding_mask=None, training=None, packing=None, dropout_seed=None):
    q, k, v = self.query(x), self.key(x), self.value(x)  # [batch, seq, hidden]
    if packing is None:
      bias = None if padding_mask is None else _key_bias(padding_mask, q.dtype)
      batch, seq = ops.shape(q)[0], ops.shape(q)[1]
      if self._fused(training):  # takes and gives [batch, seq, heads, head_size]
        heads = lambda t: ops.reshape(  # noqa: E731
            t, (batch, seq, self.num_attention_heads, self.head_size))
        context = ops.dot_product_attention(heads(q), heads(k), heads(v), bias=bias)
      else:
        context = self._attend(self._split_heads(q), self._split_heads(k),
                               self._split_heads(v), bias, training,
                               dropout_seed)  # [batch, heads, seq, head_size]
        context = ops.transpose(context, (0, 2, 1, 3))  # [batch, seq, heads, head_size]
      return ops.reshape(context, (batch, seq, self.hidden_size))

    # Packed [tokens, hidden]: attention per block of similar-length sequences, each gathered
    # from the packed rows as [n, length, heads, head_size] (reshapes with static sizes only:
    # no shape arithmetic per block, which would multiply the graph's ops).
    def heads(t):  # [tokens, hidden] -> per block [n, heads, length, head_size]
      t = ops.reshape(t, (-1, self.num_attention_heads, self.head_size))
      return [ops.transpose(block, (0, 2, 1, 3)) for block in packing.split(t)]

    biases = [_key_bias(mask, q.dtype) for mask in packing.block_masks]
    blocks = zip(heads(q), heads(k), heads(v), biases)
    contexts = [ops.transpose(self._attend(*block, training), (0, 2, 1, 3))
                for block in blocks]  # per block [n, length, heads, head_size]
    return ops.reshape(packing.merge(contexts), (-1, self.hidden_size))  # [tokens, hidden]

  def scores(self, x):
    """The unmasked scaled dot products q k^T / sqrt(head_size) of `x` [batch, seq, hidden]
    -> [batch, heads, seq, seq]: TinyBERT's attention matrices, which a student matches to
    its teacher's (`tasks.distillation`). The same ops as `_attend`'s, before its bias."""
    q = self._split_heads(self.query(x))  # [b, h, s, d]
    k = self._split_heads(self.key(x))
    return ops.matmul(q, ops.transpose(k, (0, 1, 3, 2))) * (1.0 / float(self.head_size)**0.5)

  def _fused(self, training):
    """Whether attention runs as one `keras.ops.dot_product_attention` (flash / cuDNN
    kernels on a GPU; the same softmax(q k^T / sqrt(d) + bias) v): on JAX and PyTorch, when
    no dropout acts on the probabilities (it has no dropout). TensorFlow keeps the explicit
    ops, which its exports (SavedModel, ONNX, TFLite) and parity tests are built on."""
    no_dropout = not training or self.attention_probs_dropout_prob == 0
    return no_dropout and keras.backend.backend() in ("jax", "torch")

  def _attend(self, q, k, v, key_bias, training, dropout_seed=None):
    """q, k, v [batch, heads, seq, head_size], `_key_bias` or None -> context, q's shape."""
    scores = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2)))  # [b, h, s, s]
    scores = scores * (1.0 / float(self.head_size) ** 0.5)
    if key_bias is not None:
      # Only keys are masked; padded *queries* still produce (ignored) rows.
      scores = scores + key_bias  # [b, 1, 1, s]
    probs = ops.softmax(scores, axis=-1)  # [batch, heads, seq, seq]
    probs = recomputation.dropout(self.dropout, probs, training, dropout_seed)
    return ops.matmul(probs, v)  # [batch, heads, seq, head_size]

  def compute_output_shape(self, input_shape):
    return tuple(input_shape)

