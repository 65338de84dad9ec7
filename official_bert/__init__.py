"""official_bert: a Keras 3 (TensorFlow backend) reimplementation of BERT.

The Python API, `import official_bert as ob` (`official_bert/api/`):
  ob.Preprocessor, ob.Backbone                     text -> ids; the encoder (with LoRA)
  ob.TextClassifier, ob.TokenTagger, ob.QuestionAnswerer, ob.TextEmbedder, ob.MaskedLM
each with `from_preset(path)`. Importing the package stays cheap: TensorFlow is imported when
one of these names is first used. It only quiets TensorFlow's C++ start-up logs first
(`data_prep.quiet_startup`).
"""

import importlib

from data_prep import quiet_startup

quiet_startup.quiet_tensorflow_startup()

_API = {
    "Preprocessor": "official_bert.api.preprocessor",
    "Backbone": "official_bert.api.backbone",
    "TextClassifier": "official_bert.api.text_classifier",
    "TokenTagger": "official_bert.api.token_tagger",
    "QuestionAnswerer": "official_bert.api.question_answerer",
    "TextEmbedder": "official_bert.api.text_embedder",
    "MaskedLM": "official_bert.api.masked_lm",
}
__all__ = sorted(_API)


def __getattr__(name):
  if name in _API:
    value = getattr(importlib.import_module(_API[name]), name)
    globals()[name] = value
    return value
  raise AttributeError(f"module 'official_bert' has no attribute {name!r}")


def __dir__():
  return sorted(set(globals()) | set(_API))
