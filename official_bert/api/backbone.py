"""`Backbone`: the BERT encoder as a Keras model for users' own models, with LoRA.

  backbone = ob.Backbone.from_preset(path)
  outputs = backbone(preprocessor(texts))  # sequence_output [b, s, h], pooled_output [b, h],
                                           # encoder_outputs: per layer [b, s, h]
  backbone.trainable = False               # frozen features
  backbone.enable_lora(rank=8)             # only low-rank adapters of query/value train
"""

import os

import keras

from official_bert.api import presets
from official_bert.modeling.encoder import BertEncoder

# Where LoRA adapters go: the attention's query and value projections (Hu et al., 2021, and
# keras-hub's and PEFT's default for BERT).
LORA_TARGETS = ("query", "value")


class BackboneModelConfig:
  """Keras config (the `.keras` format) of a model built from `backbone` and `preprocessor`
  plus its own arguments (a subclass adds them to `get_config`)."""

  def get_config(self):
    return {"name": self.name, "trainable": self.trainable,
            "backbone": keras.saving.serialize_keras_object(self.backbone),
            "preprocessor": keras.saving.serialize_keras_object(self.preprocessor)}

  @classmethod
  def from_config(cls, config):
    config = dict(config)
    for key in ("backbone", "preprocessor"):
      config[key] = keras.saving.deserialize_keras_object(config[key])
    return cls(**config)


@keras.saving.register_keras_serializable(package="official_bert")
class Backbone(BertEncoder):
  """A `BertEncoder` (same weights, names and outputs) that loads presets and takes LoRA."""

  @classmethod
  def from_preset(cls, path, load_weights=True, **kwargs):
    """The encoder of any model folder (`presets.load`), weights loaded."""
    preset = presets.load(path, read_weights=load_weights)
    name = kwargs.pop("name", "encoder")
    build = lambda: cls.from_bert_config(preset.config, name=name, **kwargs)  # noqa: E731
    if not load_weights:
      backbone = build()
      backbone.build()
      return backbone
    return presets.built_and_assigned(build, preset)[0]

  def save(self, filepath, *args, **kwargs):
    """Keras' `.keras` file. A model folder (what `from_preset` and the commands read) needs
    a vocabulary, which a backbone has not: save a task model, whose folder holds it."""
    if not os.fspath(filepath).endswith(".keras"):
      raise ValueError(f"Backbone.save({os.fspath(filepath)!r}): a backbone saves as a .keras "
                       f"file (e.g. 'encoder.keras'); for a model folder, save the task model "
                       f"built on it (its folder holds the vocabulary), e.g. "
                       f"ob.TextEmbedder(backbone, preprocessor).save(folder)")
    return super().save(filepath, *args, **kwargs)

  def enable_lora(self, rank, alpha=None):
    """Freezes every weight and adds trainable rank-`rank` adapters to each layer's query and
    value projections (`keras.layers.Dense.enable_lora`): kernel + A @ B * alpha / rank.

    The original weights stay bit-identical through training; `save` writes merged kernels.
    """
    self.build()
    for variable in self.variables:
      variable.trainable = False
    for block in self.transformer_layers:
      for target in LORA_TARGETS:
        getattr(block.attention, target).enable_lora(rank, lora_alpha=alpha)
    self.lora_rank = int(rank)
