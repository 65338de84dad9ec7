"""Shared test fixtures: paths to the real data next to the repo (../shared/data)."""

import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DATA = os.path.join(os.path.dirname(REPO), "shared", "data")
UNCASED_VOCAB = os.path.join(SHARED_DATA, "vocab", "bert-base-uncased", "vocab.txt")
CASED_VOCAB = os.path.join(SHARED_DATA, "vocab", "bert-base-cased", "vocab.txt")
CHINESE_VOCAB = os.path.join(SHARED_DATA, "vocab", "bert-base-chinese", "vocab.txt")
GUTENBERG = os.path.join(SHARED_DATA, "corpus", "gutenberg_books.txt")


def need(path):
  """Skip when ../shared/data is absent (it is present here and in CI)."""
  if not os.path.exists(path):
    pytest.skip(f"needs {path}")
  return path


def corpus_slice(num_bytes, start=0):
  """The first `num_bytes` of the Gutenberg corpus, cut at a line boundary, as text."""
  with open(need(GUTENBERG), "rb") as f:
    f.seek(start)
    data = f.read(num_bytes)
  return data[:data.rfind(b"\n") + 1].decode("utf-8")
