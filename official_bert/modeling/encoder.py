"""`BertEncoder`: embeddings + Transformer stack + pooler."""

import keras
from keras import ops

from official_bert.modeling.bert_config import BertConfig
from official_bert.modeling.layers.config_layer import truncated_normal
from official_bert.modeling.layers.embeddings import BertEmbeddings
from official_bert.modeling.layers.transformer_block import TransformerBlock

INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")


def unpack_inputs(inputs):
  """Returns (word_ids, mask, type_ids) from a dict or a 3-sequence."""
  if isinstance(inputs, dict):
    missing = [k for k in INPUT_NAMES if k not in inputs]
    if missing:
      raise ValueError(f"BertEncoder inputs are missing {missing}; got keys "
                       f"{sorted(inputs)}.")
    return tuple(inputs[k] for k in INPUT_NAMES)
  if isinstance(inputs, (list, tuple)) and len(inputs) == 3:
    return tuple(inputs)
  raise ValueError("BertEncoder expects a dict with keys "
                   f"{list(INPUT_NAMES)} or a list of 3 tensors.")


@keras.saving.register_keras_serializable(package="official_bert")
class BertEncoder(keras.Model):
  """The BERT Transformer encoder; constructor args are `BertConfig` fields.

  Call args:
    inputs: dict with int32 [batch, seq] tensors `input_word_ids`,
      `input_mask` (1 = real token, 0 = padding) and `input_type_ids`
      (or a list in that order).
    training: enables dropout.

  Attributes:
    skip_padding: False by default. True: inference (`training` false) runs the Transformer
      layers on the real tokens only (`TokenPacking`), a batch of uneven texts then costs
      its tokens, not batch x seq; outputs at padded positions are 0 instead of the (unused)
      values the padded computation gives them. For CPU/GPU inference graphs (exports): its
      shapes depend on the data, which XLA and TPUs do not take. Not saved in the config.
    xla_single_sequence: False by default. True: at inference a batch of one sequence runs
      XLA-compiled (`SingleSequenceXla`: lower latency on a CPU; serving then needs XLA),
      other batches as above. Not saved in the config.
    recompute_grad: False by default. True: in training, each Transformer layer's
      activations are recomputed in the backward pass instead of kept (gradient
      checkpointing: less memory, about a third more compute; the same loss and gradients,
      dropout included). `--recompute_grad` of the commands. Not saved in the config.
    pack_training: False by default. True: training calls run the Transformer layers on the
      real tokens only, as `skip_padding` does at inference (TensorFlow, no XLA): the same
      outputs at real positions, 0 at padded ones, so the same loss and gradients for a
      head and loss that read real positions only (the dropout masks are laid out on the
      packed tokens). `--pack_tokens` of the fine-tuning commands. Not saved in the config.

  Returns:
    dict with
      sequence_output: [batch, seq, hidden], the last layer's output;
      embedding_output: [batch, seq, hidden], the embeddings (before the first layer);
      pooled_output: [batch, hidden], tanh(Dense(first token));
      encoder_outputs: list of num_hidden_layers [batch, seq, hidden].
  """

  def __init__(self, vocab_size, **kwargs):
    # The signature is `BertConfig`'s: its fields are written once, there. The other kwargs
    # (name, dtype, trainable) go to keras.Model.
    fields = {k: kwargs.pop(k) for k in BertConfig.__dataclass_fields__ if k in kwargs}
    super().__init__(**kwargs)
    self.skip_padding = False
    self.xla_single_sequence = False
    self.recompute_grad = False
    self.pack_training = False
    # Validates all fields up front with clear messages.
    self.bert_config = BertConfig(vocab_size=vocab_size, **fields)
    for name, value in self.bert_config.to_dict().items():  # e.g. self.hidden_size
      setattr(self, name, value)
    c = self.bert_config
    self._single_sequence = None  # `SingleSequenceXla`: TensorFlow only.
    if keras.backend.backend() == "tensorflow":
      # pylint: disable=g-import-not-at-top
      from official_bert.modeling.tensorflow_only.single_sequence_xla import SingleSequenceXla
      self._single_sequence = SingleSequenceXla(
          lambda ids, mask, types, zero_padding: self._forward(
              ids, mask, types, training=False, packing=None, zero_padding=zero_padding),
          lambda ids, types: self.embeddings(ids, types, training=False),
          c.max_position_embeddings)

    self.embeddings = BertEmbeddings(**c.layer_arguments(BertEmbeddings),
                                     dtype=self.dtype_policy, name="embeddings")
    self.transformer_layers = [
        TransformerBlock(**c.layer_arguments(TransformerBlock), dtype=self.dtype_policy,
                         name=f"transformer_layer_{i}") for i in range(c.num_hidden_layers)
    ]
    self.pooler_dense = keras.layers.Dense(
        c.hidden_size,
        activation="tanh",
        kernel_initializer=truncated_normal(c.initializer_range),
        dtype=self.dtype_policy,
        name="pooler_dense")

  @classmethod
  def from_bert_config(cls, bert_config, **kwargs):
    """Builds an encoder from a `BertConfig`; kwargs go to keras.Model."""
    return cls(**bert_config.to_dict(), **kwargs)

  def build(self, input_shape=None):
    # Every shape follows from the config; building eagerly lets checkpoint
    # loaders assign weights without a dummy forward pass.
    if self.built:  # Idempotent: a parent may rebuild a built child.
      return
    self.embeddings.build()
    for layer in self.transformer_layers:
      layer.build((None, None, self.hidden_size))
    self.pooler_dense.build((None, self.hidden_size))
    self.built = True

  def call(self, inputs, training=None):
    word_ids, mask, type_ids = unpack_inputs(inputs)
    length = word_ids.shape[1] if len(word_ids.shape) > 1 else None
    # TensorFlow's static length only: JAX's symbolic dimensions do not compare, and Keras
    # infers PyTorch's output shapes from stand-in lengths.
    if keras.backend.backend() == "tensorflow" and isinstance(length, int):
      # Known when the inputs are built: not a failed position gather at the first batch.
      self.bert_config.check_sequence_length(length, "the inputs' length (a Preprocessor's "
                                             "sequence_length)")
    if training:
      packing = self._training_packing(mask) if self.pack_training else None
      return self._forward(word_ids, mask, type_ids, training, packing=packing)
    if not (self.skip_padding or self.xla_single_sequence):
      return self._forward(word_ids, mask, type_ids, training, packing=None)
    return self._tensorflow_inference(word_ids, mask, type_ids)

  def _training_packing(self, mask):
    """`pack_training`'s `TokenPacking` (TensorFlow only, as `skip_padding`); None with
    `recompute_grad`, whose recomputed layers take the padded batch."""
    if keras.backend.backend() != "tensorflow":
      raise ValueError("pack_training needs the TensorFlow backend; this is "
                       f"{keras.backend.backend()!r}.")
    if self.recompute_grad:
      return None
    # pylint: disable=g-import-not-at-top
    from official_bert.modeling.tensorflow_only.token_packing import TokenPacking
    return TokenPacking(mask)

  def _tensorflow_inference(self, word_ids, mask, type_ids):
    """`skip_padding` and `xla_single_sequence`: TensorFlow only (data-dependent shapes, a
    `tf.cond`, `tf.function(jit_compile=True)`), for the TensorFlow exports."""
    if keras.backend.backend() != "tensorflow":
      raise ValueError("skip_padding and xla_single_sequence need the TensorFlow backend; "
                       f"this is {keras.backend.backend()!r}.")
    # pylint: disable=g-import-not-at-top
    from official_bert.modeling.tensorflow_only.token_packing import TokenPacking
    usual = lambda: self._forward(  # noqa: E731
        word_ids, mask, type_ids, False, TokenPacking(mask) if self.skip_padding else None)
    if not self.xla_single_sequence:
      return usual()
    return self._single_sequence(word_ids, mask, type_ids, usual,
                                 zero_padding=self.skip_padding)

  def _forward(self, word_ids, mask, type_ids, training, packing, zero_padding=False):
    """zero_padding: the padded computation's padded positions set to 0 (as `packing`
    leaves them) before the pooler reads the first one."""
    x = self.embeddings(word_ids, type_ids,
                        training=training)  # [batch, seq, hidden]
    embedding_output = x
    if packing is not None:
      x = packing.pack(x)  # [tokens, hidden]
    encoder_outputs = []
    for layer in self.transformer_layers:
      x = layer(x, padding_mask=mask, training=training, packing=packing,
                recompute=self.recompute_grad)  # [b, seq, hidden]
      encoder_outputs.append(x if packing is None else packing.unpack(x))
    if zero_padding:
      keep = ops.cast(ops.not_equal(ops.cast(mask, "int32"), 0), x.dtype)[..., None]
      encoder_outputs = [y * keep for y in encoder_outputs]  # [b, seq, hidden]
    x = encoder_outputs[-1]
    first_token = first_positions(x)  # [batch, hidden]
    pooled = self.pooler_dense(first_token)  # [batch, hidden]
    return {
        "sequence_output": x,
        "pooled_output": pooled,
        "embedding_output": embedding_output,
        "encoder_outputs": encoder_outputs,
    }

  def get_config(self):
    # Deliberately not super().get_config(): the functional-model keys it may
    # add do not apply to this subclassed model.
    config = {"name": self.name, "trainable": self.trainable,
              "dtype": keras.saving.serialize_keras_object(self.dtype_policy)}
    config.update(self.bert_config.to_dict())
    return config

  @classmethod
  def from_config(cls, config):
    """Accepts a `get_config()` dict or a `BertConfig`."""
    if isinstance(config, BertConfig):
      return cls.from_bert_config(config)
    config = dict(config)
    if "dtype" in config and isinstance(config["dtype"], dict):
      config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
    return cls(**config)


def first_positions(sequence):
  """[batch, seq, hidden] -> [batch, hidden], the first position's ([CLS]) vectors. The sum
  over a one-position slice (exact), not `sequence[:, 0]`: a replica's empty last batch under
  MirroredStrategy arrives as [0, 0, hidden] when batches are cut to their longest text, and
  has no index 0. (Nor a reshape to [-1, hidden], which the ONNX export would take for a
  flattening before the pooler's MatMul.)"""
  return ops.sum(sequence[:, :1, :], axis=1)
