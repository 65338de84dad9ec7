"""Tests for data_prep.demo: the stdlib-docstring corpus is sizable, clean, deterministic."""

import os

import pytest

from data_prep.demo import docstring_sentences
from data_prep.demo import stdlib_corpus

DEFAULT_BYTES = 3 * 2**20


@pytest.fixture(scope="module")
def written(tmp_path_factory):
  path = str(tmp_path_factory.mktemp("demo") / "sub" / "corpus.txt")
  stats = stdlib_corpus.write_corpus(path, DEFAULT_BYTES)
  with open(path, "rb") as f:
    data = f.read()
  return {"path": path, "stats": stats, "text": data.decode("utf-8"), "bytes": data}


def _docs(text):
  return [doc.split("\n") for doc in text[:-1].split("\n\n")]


def test_nontrivial_size(written):
  stats = written["stats"]
  assert stats["documents"] > 200
  assert len(written["bytes"]) > 500_000
  assert len(written["bytes"]) <= DEFAULT_BYTES
  assert stats["bytes"] == len(written["bytes"])
  assert stats["sentences"] == sum(len(d) for d in _docs(written["text"]))
  assert stats["documents"] == len(_docs(written["text"]))


def test_layout_one_blank_line_between_documents(written):
  text = written["text"]
  assert text.endswith("\n") and not text.endswith("\n\n")
  assert not text.startswith("\n")
  assert "\n\n\n" not in text
  assert "\r" not in text
  for doc in _docs(text):
    assert len(doc) >= stdlib_corpus.MIN_SENTENCES
    for line in doc:
      assert line.strip() and line == line.strip() and "  " not in line


def test_no_doctest_prompts_or_control_characters(written):
  for line in written["text"].split("\n"):
    assert ">>>" not in line
    assert not line.startswith("...")
    assert not any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F for c in line)


def test_deterministic(written):
  again = stdlib_corpus.render(stdlib_corpus.build_corpus(DEFAULT_BYTES))
  assert again.encode("utf-8") == written["bytes"]
  assert not [p for p in os.listdir(os.path.dirname(written["path"])) if ".tmp" in p]


def test_max_bytes_gives_a_prefix(written):
  small = stdlib_corpus.build_corpus(100_000)
  text = stdlib_corpus.render(small)
  assert 0 < len(text.encode("utf-8")) <= 100_000
  assert written["text"].startswith(text[:-1])


def test_module_files_skip_tests_and_are_sorted():
  files = stdlib_corpus.module_files(stdlib_corpus.stdlib_dir())
  assert files == sorted(files)
  assert "os.py" in files
  for rel in files:
    parts = rel.split(os.sep)
    assert not set(parts[:-1]) & stdlib_corpus.SKIP_DIRS, rel


def test_sentences_from_a_docstring():
  doc = """Summary line without a period

  First sentence here. Second one follows! Is this third? 42 is a number.
  A line that wraps
  onto the next line.

  Example::

      x = compute(1, 2)
      for item in things:
          print(item)

  >>> compute(1, 2)
  3
  ... more

  ======================
  :param x: the input value.
  """
  import inspect  # pylint: disable=g-import-not-at-top
  assert docstring_sentences.sentences(inspect.cleandoc(doc)) == [
      "Summary line without a period",
      "First sentence here.", "Second one follows!", "Is this third?", "42 is a number.",
      "A line that wraps onto the next line.",
      "Example:",
      ":param x: the input value.",
  ]


def test_write_corpus_fails_clearly_without_sources(tmp_path):
  with pytest.raises(ValueError, match="no documents"):
    stdlib_corpus.write_corpus(str(tmp_path / "c.txt"), DEFAULT_BYTES, root=str(tmp_path))


def test_heldout_documents_are_disjoint_from_training(tmp_path):
  train, heldout = tmp_path / "train.txt", tmp_path / "heldout.txt"
  stats = stdlib_corpus.write_corpus(str(train), 400_000, heldout_path=str(heldout),
                                     heldout_every=10)
  train_docs = set(train.read_text(encoding="utf-8").strip().split("\n\n"))
  heldout_docs = set(heldout.read_text(encoding="utf-8").strip().split("\n\n"))
  assert stats["heldout_documents"] == len(heldout_docs) > 3
  assert not train_docs & heldout_docs
