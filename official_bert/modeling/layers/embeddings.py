"""`BertEmbeddings`: word + position + token-type embeddings, LN, dropout."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="official_bert")
class BertEmbeddings(keras.layers.Layer):
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
               layer_norm_epsilon=1e-12,
               **kwargs):
    super().__init__(**kwargs)
    self.vocab_size = vocab_size
    self.hidden_size = hidden_size
    self.max_position_embeddings = max_position_embeddings
    self.type_vocab_size = type_vocab_size
    self.hidden_dropout_prob = hidden_dropout_prob
    self.initializer_range = initializer_range
    self.layer_norm_epsilon = layer_norm_epsilon

    def init():
      return keras.initializers.TruncatedNormal(stddev=initializer_range)

    self.word_embeddings = keras.layers.Embedding(
        vocab_size, hidden_size, embeddings_initializer=init(),
        dtype=self.dtype_policy, name="word_embeddings")
    self.position_embeddings = keras.layers.Embedding(
        max_position_embeddings, hidden_size, embeddings_initializer=init(),
        dtype=self.dtype_policy, name="position_embeddings")
    self.token_type_embeddings = keras.layers.Embedding(
        type_vocab_size, hidden_size, embeddings_initializer=init(),
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
    return self.dropout(x, training=training)

  def compute_output_shape(self, input_shape):
    return tuple(input_shape) + (self.hidden_size,)

  def get_config(self):
    config = super().get_config()
    config.update({
        "vocab_size": self.vocab_size,
        "hidden_size": self.hidden_size,
        "max_position_embeddings": self.max_position_embeddings,
        "type_vocab_size": self.type_vocab_size,
        "hidden_dropout_prob": self.hidden_dropout_prob,
        "initializer_range": self.initializer_range,
        "layer_norm_epsilon": self.layer_norm_epsilon,
    })
    return config
