"""Fine-tuning models: an encoder plus one small head each (keras-hub style: heads wrap a
backbone).

Head weights have the original's layout (`output_weights` [num_outputs, hidden],
`output_bias` [num_outputs]), so TF1 checkpoints convert by copying; their names in
checkpoint files (`cls/squad/...`, ...) are `interop.weight_names`'.
"""

import keras
from keras import ops

from official_bert.modeling.encoder import BertEncoder


class OutputProjection(keras.layers.Layer):
  """x @ output_weights^T + output_bias, weights [num_outputs, hidden] as in TF1 files."""

  def __init__(self, num_outputs, hidden_size, initializer_range=0.02, **kwargs):
    super().__init__(**kwargs)
    self.supports_masking = True  # per position: a BiLSTM's mask passes through
    self.num_outputs = num_outputs
    self.hidden_size = hidden_size
    self.initializer_range = initializer_range

  def build(self, input_shape=None):
    if self.built:
      return
    self.output_weights = self.add_weight(
        name="output_weights", shape=(self.num_outputs, self.hidden_size),
        initializer=keras.initializers.TruncatedNormal(stddev=self.initializer_range))
    self.output_bias = self.add_weight(name="output_bias", shape=(self.num_outputs,),
                                       initializer="zeros")
    self.built = True

  def call(self, x):  # [..., hidden] -> [..., num_outputs]
    return ops.matmul(x, ops.transpose(ops.cast(self.output_weights, x.dtype))) + ops.cast(
        self.output_bias, x.dtype)

  def get_config(self):
    config = super().get_config()
    config.update(num_outputs=self.num_outputs, hidden_size=self.hidden_size,
                  initializer_range=self.initializer_range)
    return config


class _FineTuningModel(keras.Model):
  """Shared plumbing: the encoder, dropout, one projection and the config."""

  num_outputs_attr = "num_labels"

  def __init__(self, encoder, num_outputs, dropout_rate=0.1, **kwargs):
    super().__init__(**kwargs)
    if not isinstance(encoder, BertEncoder):
      raise ValueError(f"{type(self).__name__} needs a BertEncoder, got "
                       f"{type(encoder).__name__}")
    self.encoder = encoder
    self.dropout_rate = dropout_rate
    self.dropout = keras.layers.Dropout(dropout_rate, name="head_dropout")
    self.projection = OutputProjection(num_outputs, encoder.hidden_size,
                                        encoder.initializer_range, dtype=self.dtype_policy,
                                        name="head")
    # Set by distillation (not a config: the weights and serving are the same): "training"
    # (a student) or "always" (its teacher) adds "hidden_states" to the outputs, [embeddings,
    # layer 1, ..., layer L] each [b, s, h], for a hidden-state loss without a second pass.
    # A student's evaluation and prediction calls never return them.
    self.hidden_states_output = None
    # With it, the layers (1-based) whose attention scores are added as "attention_scores",
    # each [b, heads, s, s] (`BertSelfAttention.scores` of the layer's input hidden state:
    # the scores its attention computed, without a second pass through the layer).
    self.attention_scores_layers = []

  def _with_hidden_states(self, outputs, encoded, training):
    if self.hidden_states_output == "always" or (training
                                                 and self.hidden_states_output == "training"):
      states = [encoded["embedding_output"]] + list(encoded["encoder_outputs"])
      outputs["hidden_states"] = states
      if self.attention_scores_layers:
        layers = self.encoder.transformer_layers
        outputs["attention_scores"] = [
            layers[n - 1].attention.scores(states[n - 1]) for n in self.attention_scores_layers
        ]
    return outputs

  def build(self, input_shape=None):
    if self.built:
      return
    self.encoder.build()
    self.projection.build()
    self.built = True

  def get_config(self):
    config = {"name": self.name, "trainable": self.trainable,
              "encoder": keras.saving.serialize_keras_object(self.encoder),
              "dropout_rate": self.dropout_rate}
    if self.num_outputs_attr:  # heads with a fixed number of outputs don't take it
      config[self.num_outputs_attr] = self.projection.num_outputs
    return config

  @classmethod
  def from_config(cls, config):
    config = dict(config)
    config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
    return cls(**config)


@keras.saving.register_keras_serializable(package="official_bert")
class BertClassifier(_FineTuningModel):
  """Sentence (pair) classification on the pooled output; num_labels=1 is regression.

  Returns {"logits": [batch, num_labels]}.
  """

  def __init__(self, encoder, num_labels, dropout_rate=0.1, **kwargs):
    super().__init__(encoder, num_labels, dropout_rate, **kwargs)
    self.num_labels = num_labels

  def call(self, inputs, training=None):
    encoded = self.encoder(inputs, training=training)
    pooled = encoded["pooled_output"]  # [b, h]
    return self._with_hidden_states(
        {"logits": self.projection(self.dropout(pooled, training=training))}, encoded, training)


@keras.saving.register_keras_serializable(package="official_bert")
class BertSpanLabeler(_FineTuningModel):
  """SQuAD: start and end logits per token. Returns {"start_logits", "end_logits"} [b, seq]."""

  num_outputs_attr = None

  def __init__(self, encoder, dropout_rate=0.0, **kwargs):
    # The original run_squad.py applies no dropout on top of the encoder.
    super().__init__(encoder, 2, dropout_rate, **kwargs)

  def call(self, inputs, training=None):
    sequence = self.encoder(inputs, training=training)["sequence_output"]  # [b, s, h]
    logits = self.projection(self.dropout(sequence, training=training))  # [b, s, 2]
    return {"start_logits": logits[..., 0], "end_logits": logits[..., 1]}


@keras.saving.register_keras_serializable(package="official_bert")
class BertTokenClassifier(_FineTuningModel):
  """Token tagging (NER). Returns {"logits": [batch, seq, num_labels]}."""

  def __init__(self, encoder, num_labels, dropout_rate=0.1, **kwargs):
    super().__init__(encoder, num_labels, dropout_rate, **kwargs)
    self.num_labels = num_labels

  def call(self, inputs, training=None):
    encoded = self.encoder(inputs, training=training)
    sequence = encoded["sequence_output"]  # [b, s, h]
    return self._with_hidden_states(
        {"logits": self.projection(self.dropout(sequence, training=training))}, encoded, training)


@keras.saving.register_keras_serializable(package="official_bert")
class BertMultipleChoice(_FineTuningModel):
  """SWAG-style: inputs [batch, num_choices, seq]; one score per choice from [CLS].

  Returns {"logits": [batch, num_choices]} (softmax over choices in the loss).
  """

  num_outputs_attr = None

  def __init__(self, encoder, dropout_rate=0.1, **kwargs):
    super().__init__(encoder, 1, dropout_rate, **kwargs)

  def call(self, inputs, training=None):
    word_ids = inputs["input_word_ids"]
    batch, choices = ops.shape(word_ids)[0], ops.shape(word_ids)[1]
    flat = {k: ops.reshape(inputs[k], (-1, ops.shape(word_ids)[-1]))
            for k in ("input_word_ids", "input_mask", "input_type_ids")}  # [b*n, s]
    pooled = self.encoder(flat, training=training)["pooled_output"]  # [b*n, h]
    scores = self.projection(self.dropout(pooled, training=training))  # [b*n, 1]
    return {"logits": ops.reshape(scores, (batch, choices))}
