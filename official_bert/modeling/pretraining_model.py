"""`BertPretrainingModel`: encoder + masked-LM and next-sentence heads."""

import keras

from official_bert.modeling.encoder import BertEncoder
from official_bert.modeling.layers.heads import MaskedLMHead
from official_bert.modeling.layers.heads import NextSentenceHead


@keras.saving.register_keras_serializable(package="official_bert")
class BertPretrainingModel(keras.Model):
  """BERT with both pretraining heads; the MLM decoder is tied to the
  encoder's word embeddings.

  Call args:
    inputs: dict with the encoder inputs (`input_word_ids`, `input_mask`,
      `input_type_ids`, int32 [batch, seq]) plus `masked_lm_positions`
      (int32 [batch, num_predictions]).
    training: enables dropout.

  Returns:
    dict with
      masked_lm_logits: [batch, num_predictions, vocab_size];
      next_sentence_logits: [batch, 2].
  """

  def __init__(self, encoder, **kwargs):
    super().__init__(**kwargs)
    if not isinstance(encoder, BertEncoder):
      raise ValueError("BertPretrainingModel needs a BertEncoder, got "
                       f"{type(encoder).__name__}.")
    self.encoder = encoder
    config = encoder.bert_config
    self.masked_lm_head = MaskedLMHead(**config.layer_arguments(MaskedLMHead),
                                       dtype=self.dtype_policy, name="masked_lm_head")
    self.next_sentence_head = NextSentenceHead(**config.layer_arguments(NextSentenceHead),
                                               dtype=self.dtype_policy,
                                               name="next_sentence_head")

  def build(self, input_shape=None):
    if self.built:  # Idempotent: a parent may rebuild a built child.
      return
    self.encoder.build()
    self.masked_lm_head.build()
    self.next_sentence_head.build()
    self.built = True

  def call(self, inputs, training=None):
    if "masked_lm_positions" not in inputs:
      raise ValueError("BertPretrainingModel inputs need "
                       "'masked_lm_positions' [batch, num_predictions].")
    outputs = self.encoder(inputs, training=training)
    mlm_logits = self.masked_lm_head(
        outputs["sequence_output"], inputs["masked_lm_positions"],
        self.encoder.embeddings.embedding_table)  # [batch, P, vocab]
    nsp_logits = self.next_sentence_head(
        outputs["pooled_output"])  # [batch, 2]
    return {
        "masked_lm_logits": mlm_logits,
        "next_sentence_logits": nsp_logits,
    }

  def get_config(self):
    return {
        "name": self.name,
        "trainable": self.trainable,
        "dtype": keras.saving.serialize_keras_object(self.dtype_policy),
        "encoder": keras.saving.serialize_keras_object(self.encoder),
    }

  @classmethod
  def from_config(cls, config):
    config = dict(config)
    config["encoder"] = keras.saving.deserialize_keras_object(
        config["encoder"])
    if "dtype" in config and isinstance(config["dtype"], dict):
      config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
    return cls(**config)
