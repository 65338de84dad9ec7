"""`BertPretrainingModel`: encoder + masked-LM and (unless MLM-only) next-sentence heads."""

import keras

from official_bert.modeling.encoder import BertEncoder
from official_bert.modeling.layers.heads import MaskedLMHead
from official_bert.modeling.layers.heads import NextSentenceHead


@keras.saving.register_keras_serializable(package="official_bert")
class BertPretrainingModel(keras.Model):
  """BERT with both pretraining heads; the MLM decoder is tied to the
  encoder's word embeddings.

  With `next_sentence=False` (masked-LM-only pretraining, as RoBERTa) there is no
  next-sentence head, so no `cls/seq_relationship` weights, and the encoder's pooler, which
  only that head reads, is frozen: it gets no gradient anyway, and freezing keeps weight decay
  off it, so a checkpoint holds the pooler exactly as it was initialized.

  Call args:
    inputs: dict with the encoder inputs (`input_word_ids`, `input_mask`,
      `input_type_ids`, int32 [batch, seq]) plus `masked_lm_positions`
      (int32 [batch, num_predictions]).
    training: enables dropout.

  Returns:
    dict with
      masked_lm_logits: [batch, num_predictions, vocab_size];
      next_sentence_logits: [batch, 2] (not with `next_sentence=False`).
  """

  def __init__(self, encoder, next_sentence=True, **kwargs):
    super().__init__(**kwargs)
    if not isinstance(encoder, BertEncoder):
      raise ValueError("BertPretrainingModel needs a BertEncoder, got "
                       f"{type(encoder).__name__}.")
    self.encoder = encoder
    config = encoder.bert_config
    self.masked_lm_head = MaskedLMHead(**config.layer_arguments(MaskedLMHead),
                                       dtype=self.dtype_policy, name="masked_lm_head")
    self.next_sentence = next_sentence
    self.next_sentence_head = None
    if next_sentence:
      self.next_sentence_head = NextSentenceHead(**config.layer_arguments(NextSentenceHead),
                                                 dtype=self.dtype_policy,
                                                 name="next_sentence_head")
    else:
      encoder.pooler_dense.trainable = False

  def build(self, input_shape=None):
    if self.built:  # Idempotent: a parent may rebuild a built child.
      return
    self.encoder.build()
    self.masked_lm_head.build()
    if self.next_sentence_head is not None:
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
    if self.next_sentence_head is None:
      return {"masked_lm_logits": mlm_logits}
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
        "next_sentence": self.next_sentence,
    }

  @classmethod
  def from_config(cls, config):
    config = dict(config)
    config["encoder"] = keras.saving.deserialize_keras_object(
        config["encoder"])
    if "dtype" in config and isinstance(config["dtype"], dict):
      config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
    return cls(**config)
