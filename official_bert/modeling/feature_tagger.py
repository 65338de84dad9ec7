"""The paper's feature-based NER model (section 5.3, Table 7): a frozen BERT encoder whose
chosen layers feed a BiLSTM and a linear tag classifier.

BERT's weights never change (the encoder is not trainable and runs without dropout), so its
activations are fixed features of each sentence; only the layer mix, the BiLSTM and the
classifier learn. The BiLSTM reads every WordPiece position (padding masked out); as in
fine-tuning, the loss and predictions use the first piece of each word.
"""

import keras
from keras import ops

from official_bert.modeling import layer_selection
from official_bert.modeling.encoder import BertEncoder
from official_bert.modeling.finetuning_models import OutputProjection


@keras.saving.register_keras_serializable(package="official_bert")
class ScalarMix(keras.layers.Layer):
  """ELMo's learned layer mix: scale * sum_k softmax(w)_k * h_k (w = 0: the mean at first)."""

  def __init__(self, num_inputs, **kwargs):
    super().__init__(**kwargs)
    self.num_inputs = num_inputs

  def build(self, input_shape=None):
    self.layer_weights = self.add_weight(name="layer_weights", shape=(self.num_inputs,),
                                         initializer="zeros")
    self.layer_scale = self.add_weight(name="layer_scale", shape=(), initializer="ones")
    self.built = True

  def call(self, states):  # k x [b, s, h] -> [b, s, h]
    weights = ops.cast(ops.softmax(self.layer_weights), states[0].dtype)
    mixed = ops.sum(ops.stack(states, axis=-1) * weights, axis=-1)
    return mixed * ops.cast(self.layer_scale, mixed.dtype)

  def get_config(self):
    return dict(super().get_config(), num_inputs=self.num_inputs)


def combine_layers(states, combine, mix=None):
  """k chosen hidden states [b, s, h] -> the features `layer_selection` describes."""
  if combine == "concat":
    return ops.concatenate(states, axis=-1)  # [b, s, k*h]
  if combine == "sum":
    return ops.sum(ops.stack(states, axis=0), axis=0)  # [b, s, h]
  if combine == "weighted":
    return mix(states)
  return states[-1]  # "last": the topmost chosen layer (indices are sorted)


@keras.saving.register_keras_serializable(package="official_bert")
class BertFeatureTagger(keras.Model):
  """Frozen encoder -> chosen layers combined -> BiLSTM x lstm_layers -> linear tags.

  Args:
    encoder: a `BertEncoder` (made non-trainable here).
    num_labels: tags, "O" included.
    layers: hidden-state indices (0 = embeddings, L = last; `layer_selection.parse_layers`).
    combine: one of `layer_selection.COMBINE_MODES`.
    lstm_units, lstm_layers: the BiLSTM (the paper: 768 units, 2 layers).
    dropout_rate: on the BiLSTM's input and on the classifier's input.

  Returns {"logits": [batch, seq, num_labels]}.
  """

  def __init__(self, encoder, num_labels, layers=(-1, -2, -3, -4), combine="concat",
               lstm_units=768, lstm_layers=2, dropout_rate=0.1, **kwargs):
    super().__init__(**kwargs)
    if not isinstance(encoder, BertEncoder):
      raise ValueError(f"BertFeatureTagger needs a BertEncoder, got {type(encoder).__name__}")
    layer_selection.check_combine(combine)
    self.encoder = encoder
    self.encoder.trainable = False
    num_layers = encoder.num_hidden_layers
    # Hidden-state indices (0 = embeddings); negative ones count from the top (-1 = last).
    self.layers_used = sorted(i if i >= 0 else num_layers + 1 + i for i in layers)
    bad = [i for i in self.layers_used if not 0 <= i <= num_layers]
    if bad:
      raise ValueError(f"hidden states {bad} out of range 0..{num_layers}")
    if len(set(self.layers_used)) != len(self.layers_used):
      raise ValueError(f"layers {list(layers)} name a hidden state more than once")
    self.num_labels = num_labels
    self.combine = combine
    self.lstm_units = lstm_units
    self.lstm_layers = lstm_layers
    self.dropout_rate = dropout_rate
    self.mix = (ScalarMix(len(self.layers_used), dtype=self.dtype_policy, name="layer_mix")
                if combine == "weighted" else None)
    self.input_dropout = keras.layers.Dropout(dropout_rate, name="feature_dropout")
    self.bilstms = [
        keras.layers.Bidirectional(
            keras.layers.LSTM(lstm_units, return_sequences=True, dtype=self.dtype_policy,
                              name=f"lstm_{i}_fw"),
            backward_layer=keras.layers.LSTM(lstm_units, return_sequences=True,
                                             go_backwards=True, dtype=self.dtype_policy,
                                             name=f"lstm_{i}_bw"),
            dtype=self.dtype_policy, name=f"bilstm_{i}") for i in range(lstm_layers)
    ]
    self.head_dropout = keras.layers.Dropout(dropout_rate, name="head_dropout")
    self.projection = OutputProjection(num_labels, 2 * lstm_units, encoder.initializer_range,
                                       dtype=self.dtype_policy, name="head")

  @property
  def feature_width(self):
    return layer_selection.output_width(self.combine, len(self.layers_used),
                                        self.encoder.hidden_size)

  def build(self, input_shape=None):
    if self.built:
      return
    self.encoder.build()
    if self.mix is not None:
      self.mix.build()
    width = self.feature_width
    for bilstm in self.bilstms:
      bilstm.build((None, None, width))
      width = 2 * self.lstm_units
    self.projection.build()
    self.built = True

  def features(self, inputs):
    """The frozen encoder's chosen layers, combined: [b, s, feature_width]."""
    out = self.encoder(inputs, training=False)  # fixed activations: never dropout
    states = layer_selection.hidden_states(out)
    # The encoder is non-trainable already; stopping the gradient also spares the backward
    # pass through it (no gradient is computed for activations nothing trains).
    chosen = [ops.stop_gradient(states[i]) for i in self.layers_used]
    return combine_layers(chosen, self.combine, self.mix)

  def call(self, inputs, training=None):
    x = self.input_dropout(self.features(inputs), training=training)
    mask = ops.cast(inputs["input_mask"], "bool")  # [b, s]
    for bilstm in self.bilstms:
      x = bilstm(x, mask=mask, training=training)  # [b, s, 2 * units]
    return {"logits": self.projection(self.head_dropout(x, training=training))}

  def head_config(self):
    """What `model_types.build_model` needs besides the BERT config and num_labels."""
    return {"layers": list(self.layers_used), "combine": self.combine,
            "lstm_units": self.lstm_units, "lstm_layers": self.lstm_layers}

  def get_config(self):
    return {"name": self.name, "trainable": self.trainable,
            "encoder": keras.saving.serialize_keras_object(self.encoder),
            "num_labels": self.num_labels, "dropout_rate": self.dropout_rate,
            **self.head_config()}

  @classmethod
  def from_config(cls, config):
    config = dict(config)
    config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
    return cls(**config)
