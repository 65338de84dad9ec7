"""`MaskedLM`: fill in `[MASK]` tokens with a pretrained model's masked-LM head.

  mlm = ob.MaskedLM.from_preset(pretraining_output_dir)
  mlm.fill_mask(["the capital of france is [MASK] ."], top_k=5)
  # [[[("paris", 0.61), ("lyon", 0.05), ...]]]: per text, per [MASK], (token, probability)

The same computation as the pretraining export (`serving.signatures`): "[MASK]" in the text is
the mask token, the head's softmax over the vocabulary, best first.
"""

import keras
import tensorflow as tf

from official_bert.api import presets
from official_bert.api.backbone import Backbone
from official_bert.api.preprocessor import Preprocessor
from official_bert.api.preprocessor import as_string_tensor
from official_bert.interop import weight_names
from official_bert.modeling.pretraining_model import BertPretrainingModel
from official_bert.serving import signatures


class MaskedLM(keras.Model):
  """Args: a built `BertPretrainingModel` (weights loaded) and a `Preprocessor`."""

  def __init__(self, network, preprocessor, **kwargs):
    super().__init__(**kwargs)
    self.network = network
    self.preprocessor = preprocessor
    # One entry per model id: a checkpoint may have more ids than vocab.txt has tokens.
    vocab = list(preprocessor.vocabulary)
    size = network.encoder.vocab_size
    self._vocab = tf.constant(vocab[:size] + [f"[id {i}]" for i in range(len(vocab), size)])

  @property
  def backbone(self):
    return self.network.encoder

  @classmethod
  def from_preset(cls, path, sequence_length=128, **kwargs):
    """A pretraining checkpoint (ours, TF1, or an HF BertForPreTraining/MaskedLM folder);
    an error if it has no masked-LM head."""
    preset = presets.load(path)
    names = list(preset.weights.tensors)
    if not any(n.startswith(weight_names.MLM_SCOPE) for n in names):
      raise ValueError(f"{preset.weights.source} has no masked-LM head "
                       f"({weight_names.MLM_SCOPE}*): MaskedLM needs a pretraining checkpoint")
    encoder = Backbone.from_bert_config(preset.config, name="encoder")
    network = BertPretrainingModel(encoder, next_sentence=not weight_names.is_masked_lm_only(
        names), name="pretraining")
    network.build()
    presets.assign(network, preset, require_heads=True)
    return cls(network, Preprocessor(preset.vocab_file, preset.do_lower_case, sequence_length),
               **kwargs)

  def call(self, inputs, training=None):
    return self.network(inputs, training=training)

  def fill_mask(self, texts, top_k=5, batch_size=32):
    """Per text, per `[MASK]` in order, the `top_k` (token, probability) pairs."""
    single = isinstance(texts, str)
    texts = as_string_tensor(texts, "texts")
    result = []
    for start in range(0, int(texts.shape[0]), batch_size):
      inputs = self.preprocessor(texts[start:start + batch_size])
      out = signatures.model_outputs(self.network, "pretraining", inputs,
                                     self.preprocessor.text_to_inputs.mask_id, self._vocab,
                                     top_k)
      positions = out["masked_lm_positions"].numpy()
      tokens = out["masked_lm_top_tokens"].numpy()
      probabilities = out["masked_lm_top_probabilities"].numpy()
      for row in range(positions.shape[0]):
        result.append([[(t.decode("utf-8"), float(p))
                        for t, p in zip(tokens[row, m], probabilities[row, m])]
                       for m in range(positions.shape[1]) if positions[row, m] >= 0])
    return result[0] if single else result
