"""`TransformerBlock`: one post-LayerNorm BERT encoder layer."""

import keras

from official_bert.modeling import activations
from official_bert.modeling.bert_config import LAYER_NORM_EPSILON
from official_bert.modeling.layers import recomputation
from official_bert.modeling.layers.attention import BertSelfAttention
from official_bert.modeling.layers.config_layer import ConfigLayer
from official_bert.modeling.layers.config_layer import truncated_normal


@keras.saving.register_keras_serializable(package="official_bert")
class TransformerBlock(ConfigLayer):
  """Post-LN Transformer layer, as in the BERT paper and original code.

    x = LN(x + Dropout(Dense(SelfAttention(x, mask))))
    x = LN(x + Dropout(Dense2(act(Dense1(x)))))

  Sublayer names mirror the TF1 checkpoint scopes (`attention/self`,
  `attention/output/dense`, `intermediate/dense`, `output/dense`, ...).

  Call args:
    x: float [batch, seq, hidden], or [tokens, hidden] with `packing`.
    padding_mask: optional [batch, seq], 1 for real tokens, 0 for padding.
    training: enables dropout.
    packing: optional `TokenPacking` of `padding_mask` (`x` holds the real tokens only).
    recompute: with `training`, the layer's activations are not kept for the backward pass
      but recomputed there (`recomputation`: gradient checkpointing, exact with dropout).

  Returns:
    float shaped like `x`.
  """

  def __init__(self,
               hidden_size=768,
               num_attention_heads=12,
               intermediate_size=3072,
               hidden_act="gelu",
               hidden_dropout_prob=0.1,
               attention_probs_dropout_prob=0.1,
               initializer_range=0.02,
               layer_norm_epsilon=LAYER_NORM_EPSILON,
               **kwargs):
    super().__init__(**kwargs)
    self.store_config(locals())
    # Resolve now so an unknown name fails at construction, not first call.
    self._activation_fn = activations.get_activation(hidden_act)

    def dense(units, name):
      return keras.layers.Dense(units, kernel_initializer=truncated_normal(initializer_range),
                                dtype=self.dtype_policy, name=name)

    def dropout(name):
      return keras.layers.Dropout(hidden_dropout_prob, dtype=self.dtype_policy, name=name)

    def layer_norm(name):
      return keras.layers.LayerNormalization(
          epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name=name)

    self.attention = BertSelfAttention(
        hidden_size=hidden_size,
        num_attention_heads=num_attention_heads,
        attention_probs_dropout_prob=attention_probs_dropout_prob,
        initializer_range=initializer_range,
        dtype=self.dtype_policy,
        name="attention_self")
    self.attention_output_dense = dense(hidden_size, "attention_output_dense")
    self.attention_dropout = dropout("attention_dropout")
    self.attention_layer_norm = layer_norm("attention_output_layer_norm")
    self.intermediate_dense = dense(intermediate_size, "intermediate_dense")
    self.output_dense = dense(hidden_size, "output_dense")
    self.output_dropout = dropout("output_dropout")
    self.output_layer_norm = layer_norm("output_layer_norm")

  def build(self, input_shape=None):
    if self.built:  # Idempotent: a parent may rebuild a built child.
      return
    hidden = (None, None, self.hidden_size)
    self.attention.build(hidden)
    self.attention_output_dense.build(hidden)
    self.attention_layer_norm.build(hidden)
    self.intermediate_dense.build(hidden)
    self.output_dense.build((None, None, self.intermediate_size))
    self.output_layer_norm.build(hidden)
    self.built = True

  def call(self, x, padding_mask=None, training=None, packing=None, recompute=False):
    if not training:
      return self._layer(x, padding_mask, False, packing, seeds=(None, None, None))
    # The three dropouts' seeds, drawn once per call: the same masks if recomputed.
    seeds = recomputation.layer_seeds(
        [self.output_dropout, self.attention_dropout, self.attention.dropout], 3)
    if recompute and packing is None:
      return keras.remat(lambda h: self._layer(h, padding_mask, True, None, seeds))(x)
    return self._layer(x, padding_mask, True, packing, seeds)

  def _layer(self, x, padding_mask, training, packing, seeds):
    # Shapes say [batch, seq, hidden]; with packing they are [tokens, hidden].
    context = self.attention(x, padding_mask=padding_mask, training=training,
                             packing=packing, dropout_seed=seeds[0])  # [batch, seq, hidden]
    attn = self.attention_output_dense(context)  # [batch, seq, hidden]
    attn = recomputation.dropout(self.attention_dropout, attn, training, seeds[1])
    x = self.attention_layer_norm(x + attn)  # [batch, seq, hidden]

    inner = self._activation_fn(
        self.intermediate_dense(x))  # [batch, seq, intermediate]
    out = self.output_dense(inner)  # [batch, seq, hidden]
    out = recomputation.dropout(self.output_dropout, out, training, seeds[2])
    return self.output_layer_norm(x + out)  # [batch, seq, hidden]

  def compute_output_shape(self, input_shape):
    return tuple(input_shape)

