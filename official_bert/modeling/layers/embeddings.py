"""`BertEmbeddings`: word + position + token-type embeddings, LN, dropout."""

import keras
from keras import ops

from official_bert.modeling.bert_config import LAYER_NORM_EPSILON
from official_bert.modeling.layers import recomputation
from official_bert.modeling.layers.config_layer import ConfigLayer
from official_bert.modeling.layers.config_layer import truncated_normal


@keras.saving.register_keras_serializable(package="official_bert")
class BertEmbeddings(ConfigLayer):
  """Sums word, absolute-position and token-type embeddings.

  Call args:
    input_word_ids: int [batch, seq].
    input_type_ids: int [batch, seq]; all zeros when omitted.
    training: enables dropout.

  Returns:
    float [batch, seq, hidden_size].
  """

  def __init__(self,
               vocab_size,
               hidden_size=768,
               max_position_embeddings=512,
               type_vocab_size=16,
               hidden_dropout_prob=0.1,
               initializer_range=0.02,
               layer_norm_epsilon=LAYER_NORM_EPSILON,
               **kwargs):
    super().__init__(**kwargs)
    self.store_config(locals())

    self.word_embeddings = keras.layers.Embedding(
        vocab_size, hidden_size,
        embeddings_initializer=truncated_normal(initializer_range),
        dtype=self.dtype_policy, name="word_embeddings")
    self.position_embeddings = keras.layers.Embedding(
        max_position_embeddings, hidden_size,
        embeddings_initializer=truncated_normal(initializer_range),
        dtype=self.dtype_policy, name="position_embeddings")
    self.token_type_embeddings = keras.layers.Embedding(
        type_vocab_size, hidden_size,
        embeddings_initializer=truncated_normal(initializer_range),
        dtype=self.dtype_policy, name="token_type_embeddings")
    self.layer_norm = keras.layers.LayerNormalization(
        epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="layer_norm")
    self.dropout = keras.layers.Dropout(
        hidden_dropout_prob, dtype=self.dtype_policy, name="dropout")

  def build(self, input_shape=None):
    # Shapes depend only on the config, so weights can be created (e.g. for
    # checkpoint loading) before the layer ever sees data.
    if self.built:  # Idempotent: a parent may rebuild a built child.
      return
    self.word_embeddings.build()
    self.position_embeddings.build()
    self.token_type_embeddings.build()
    self.layer_norm.build((None, None, self.hidden_size))
    self.built = True

  @property
  def embedding_table(self):
    """The word embedding variable [vocab_size, hidden_size] (tied to MLM)."""
    return self.word_embeddings.embeddings

  def call(self, input_word_ids, input_type_ids=None, training=None):
    if input_type_ids is None:
      input_type_ids = ops.zeros_like(input_word_ids)
    seq_length = ops.shape(input_word_ids)[1]
    words = self.word_embeddings(input_word_ids)  # [batch, seq, hidden]
    # Position ids are implicit: position i always uses row i of the table.
    positions = self.position_embeddings(
        ops.arange(seq_length, dtype="int32"))  # [seq, hidden]
    types = self.token_type_embeddings(input_type_ids)  # [batch, seq, hidden]
    x = words + positions[None, :, :] + types  # [batch, seq, hidden]
    x = self.layer_norm(x)
    return recomputation.dropout(self.dropout, x, training, seed=None)

  def compute_output_shape(self, input_shape):
    return tuple(input_shape) + (self.hidden_size,)

