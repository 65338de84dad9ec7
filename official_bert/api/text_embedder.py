"""`TextEmbedder`: one vector per text, as the encoder export's `mean_pooled_output`.

  embedder = ob.TextEmbedder.from_preset(minilm_path)             # mean pooling, unit length
  vectors = embedder.encode(["a sentence", ...], batch_size=32)   # numpy [n, hidden]
  scores = vectors @ vectors.T                                    # cosine similarities

pooling: "mean" (the mean over real tokens: sentence-transformers' definition,
`modeling.sentence_embedding`), "cls" (the last layer's [CLS] vector) or "pooled" (BERT's
tanh pooler over [CLS]).
"""

import os

import keras
import numpy as np
import tensorflow as tf

from official_bert.api import presets
from official_bert.api import task_model
from official_bert.api.backbone import Backbone
from official_bert.api.backbone import BackboneModelConfig
from official_bert.api.preprocessor import Preprocessor
from official_bert.api.preprocessor import as_string_tensor
from official_bert.modeling import sentence_embedding

POOLINGS = ("mean", "cls", "pooled")


@keras.saving.register_keras_serializable(package="official_bert")
class TextEmbedder(BackboneModelConfig, keras.Model):
  """Args: a `Backbone`, a `Preprocessor`, `pooling` (POOLINGS) and `normalize` (unit L2)."""

  def __init__(self, backbone, preprocessor, pooling="mean", normalize=True, **kwargs):
    super().__init__(**kwargs)
    if pooling not in POOLINGS:
      raise ValueError(f"pooling={pooling!r} must be one of {', '.join(POOLINGS)}")
    self.backbone = backbone
    self.preprocessor = preprocessor
    self.pooling = pooling
    self.normalize = bool(normalize)
    task_model.check_sequence_length(preprocessor, backbone)

  @classmethod
  def from_preset(cls, path, pooling=None, normalize=None, sequence_length=None, **kwargs):
    """Any model folder; a saved TextEmbedder brings its pooling, normalization and
    sequence length (defaults: mean, normalized, 128)."""
    preset = presets.load(path)
    stored = preset.run_settings if preset.run_settings.get("model_type") == "encoder" else {}
    pooling = pooling or stored.get("pooling") or "mean"
    normalize = stored.get("normalize_embeddings", True) if normalize is None else normalize
    sequence_length = sequence_length or stored.get("max_seq_length") or 128
    backbone = Backbone.from_bert_config(preset.config, name="encoder")
    backbone.build()
    presets.assign(backbone, preset)
    preprocessor = Preprocessor(preset.vocab_file, preset.do_lower_case, sequence_length)
    return cls(backbone, preprocessor, pooling, normalize, **kwargs)

  def call(self, inputs, training=None):
    out = self.backbone(inputs, training=training)
    if self.pooling == "mean":
      return sentence_embedding.mean_pool(out["sequence_output"], inputs["input_mask"],
                                          self.normalize)
    vector = out["pooled_output"] if self.pooling == "pooled" else out["sequence_output"][:, 0]
    vector = tf.cast(vector, tf.float32)
    return tf.math.l2_normalize(vector, axis=-1) if self.normalize else vector

  def get_config(self):
    return dict(super().get_config(), pooling=self.pooling, normalize=self.normalize)

  def encode(self, texts, batch_size=32):
    """numpy float32 [n, hidden]: one embedding per text."""
    texts = as_string_tensor(texts, "texts")
    dataset = tf.data.Dataset.from_tensor_slices(texts).batch(batch_size).map(
        lambda t: (self.preprocessor(t),), num_parallel_calls=tf.data.AUTOTUNE)
    if int(texts.shape[0]) == 0:
      return np.zeros([0, self.backbone.hidden_size], np.float32)
    return self.predict(dataset, verbose=0)

  def save(self, path, overwrite=True, **kwargs):
    """A model folder `from_preset` and `export --checkpoint` read (the encoder); a path
    ending in `.keras` is Keras' format."""
    path = os.fspath(path)
    if path.endswith(".keras"):
      return super().save(path, overwrite=overwrite, **kwargs)
    presets.save(path, self.backbone, self.preprocessor, {
        "task": "encoder", "model_type": "encoder",
        "max_seq_length": self.preprocessor.sequence_length, "pooling": self.pooling,
        "normalize_embeddings": self.normalize})
    return None

  def export(self, path, overwrite=False, **options):
    """The `export --model_type=encoder` SavedModel (raw text in). Its `mean_pooled_output`
    is `encode`'s for mean pooling (normalized as this embedder); for "cls" take
    `sequence_output[:, 0]`, for "pooled" `pooled_output`."""
    options.setdefault("normalize_embeddings", self.normalize and self.pooling == "mean")
    return task_model.export_saved(self, "encoder", path, overwrite, dict(
        options, max_seq_length=self.preprocessor.sequence_length))
