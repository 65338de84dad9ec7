"""Tests for data_prep.vocab.learn: reserved ids, size, [UNK] rate, determinism, pipeline use."""

import collections
import os
import random

from conftest import corpus_text
import pytest

from data_prep import tokenization
from data_prep.pretraining import corpus
from data_prep.pretraining import writer
from data_prep.vocab import learn

_STEMS = ("walk talk play work jump cook paint clean start finish open close visit watch "
          "help call move live love learn teach read build write climb travel order answer "
          "follow listen wonder").split()
_SUFFIXES = ("", "s", "ed", "ing", "er", "ers")
_SMALL = ("the a an of to in on at with from and but or because while after before "
          "she he they we you it this that my your our their").split()
_NOUNS = ("river mountain garden kitchen window village teacher student doctor engineer "
          "morning evening summer winter letter story question country city harbour "
          "café naïve résumé").split()


def _sentence(rng):
  words = [rng.choice(_SMALL), rng.choice(_NOUNS), rng.choice(_STEMS) + rng.choice(_SUFFIXES)]
  for _ in range(rng.randint(2, 8)):
    words.append(rng.choice(_SMALL + _NOUNS + [s + rng.choice(_SUFFIXES) for s in _STEMS]))
  text = " ".join(words)
  if rng.random() < 0.3:
    text += f", {rng.randint(1, 1999)} times"
  return text[0].upper() + text[1:] + rng.choice([".", ".", "!", "?"])


def _documents(seed, n_docs):
  rng = random.Random(seed)
  return [[_sentence(rng) for _ in range(rng.randint(3, 8))] for _ in range(n_docs)]


def _write_corpus(path, docs):
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n\n".join("\n".join(d) for d in docs) + "\n")
  return str(path)


def _unk_rate(vocab_file, lines, do_lower_case=True):
  tok = tokenization.FullTokenizer(vocab_file, do_lower_case)
  ids, _ = tok.encode_batch(lines)
  return float((ids == tok.vocab["[UNK]"]).mean()), tok


@pytest.fixture(scope="module")
def small(tmp_path_factory):
  """A synthetic corpus (train + held-out from the same generator) and its learned vocab."""
  d = tmp_path_factory.mktemp("small")
  train = _write_corpus(d / "train.txt", _documents(1, 300))
  heldout = [s for doc in _documents(2, 40) for s in doc]
  vocab = learn.learn_vocab([train], vocab_size=400, do_lower_case=True)
  vocab_file = str(d / "vocab.txt")
  learn.write_vocab(vocab, vocab_file)
  return {"dir": d, "train": train, "heldout": heldout, "vocab": vocab, "vocab_file": vocab_file}


def test_reserved_tokens_first(small):
  assert small["vocab"][:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
  assert tokenization.load_vocab_tokens(small["vocab_file"]) == small["vocab"]


def test_size_and_no_duplicates(small):
  vocab = small["vocab"]
  assert len(vocab) == len(set(vocab))
  assert len(vocab) <= 400
  assert len(vocab) >= 0.8 * 400  # the learner aims at [0.95, 1] x size; corpus is small
  assert all(t and not any(c.isspace() for c in t) for t in vocab)


def test_every_character_and_continuation(small):
  vocab = set(small["vocab"])
  with open(small["train"], encoding="utf-8") as f:
    words = tokenization.FullTokenizer(small["vocab_file"]).split_words_batch(f.read().split("\n"))
  chars = {c for line in words for w in line for c in w}
  assert "é" not in chars and "e" in chars  # lower_case strips accents, like the tokenizer
  for c in chars:
    assert c in vocab and "##" + c in vocab, c


def test_low_unk_rate_and_frequent_words_whole(small):
  rate, tok = _unk_rate(small["vocab_file"], small["heldout"])
  assert rate < 0.01
  counts = collections.Counter(w for line in tok.split_words_batch(small["heldout"]) for w in line)
  for word, _ in counts.most_common(25):
    assert tok.tokenize(word) == [word], word


def test_deterministic(small, tmp_path):
  again = learn.learn_vocab(small["train"], vocab_size=400, do_lower_case=True)
  path = str(tmp_path / "vocab2.txt")
  learn.write_vocab(again, path)
  with open(path, "rb") as a, open(small["vocab_file"], "rb") as b:
    assert a.read() == b.read()
  assert not [p for p in os.listdir(tmp_path) if ".tmp" in p]  # the temp file was renamed


def test_cased_vocab_keeps_case(small):
  vocab = learn.learn_vocab([small["train"]], vocab_size=400, do_lower_case=False)
  assert "The" in vocab and "é" in vocab and "##é" in vocab


def test_works_with_create_pretraining_data(small):
  out = str(small["dir"] / "pretrain.tfrecord")
  docs = _documents(3, 12)
  inp = _write_corpus(small["dir"] / "tiny.txt", docs)
  summary = writer.run(writer.Settings(
      input_file=inp, output_file=out, vocab_file=small["vocab_file"], do_lower_case=True,
      max_seq_length=32, max_predictions_per_seq=5, dupe_factor=1, num_workers=1))
  assert summary["instances"] > 0
  assert os.path.getsize(out) > 0


def test_missing_and_empty_input(tmp_path):
  missing = str(tmp_path / "nope.txt")
  with pytest.raises(corpus.CorpusError, match="nope.txt"):
    learn.learn_vocab(missing, vocab_size=100)
  with pytest.raises(corpus.CorpusError, match="nope.txt"):
    learn.learn_vocab([missing], vocab_size=100)
  empty = tmp_path / "empty.txt"
  empty.write_text("\n  \n\n", encoding="utf-8")
  with pytest.raises(corpus.CorpusError, match="empty.txt"):
    learn.learn_vocab([str(empty)], vocab_size=100)


def test_vocab_too_small_for_characters(small):
  with pytest.raises(ValueError, match="vocab_size=20"):
    learn.learn_vocab([small["train"]], vocab_size=20)


def test_assemble_trims_learned_tail_and_adds_characters():
  learned = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "the", "##s", "and",
             "rare", "##a", "##b"]
  vocab = learn.assemble(learned, ["a", "b", "c"], vocab_size=13)
  assert vocab[:5] == list(learn.RESERVED_TOKENS)
  assert set(vocab[5:]) == {"a", "b", "c", "##a", "##b", "##c", "the", "##s"}
  assert vocab.index("the") < vocab.index("##s")  # the learner's (frequency) order is kept


def test_gutenberg_sample(tmp_path):
  """Real prose: tests/data's ~300 KB slice of the Gutenberg corpus."""
  lines = corpus_text().split("\n")
  cut = int(len(lines) * 0.85)
  train = tmp_path / "train.txt"
  train.write_text("\n".join(lines[:cut]) + "\n", encoding="utf-8")
  vocab = learn.learn_vocab([str(train)], vocab_size=2000, do_lower_case=True)
  assert vocab[:5] == list(learn.RESERVED_TOKENS)
  assert 0.9 * 2000 <= len(vocab) <= 2000
  vocab_file = str(tmp_path / "vocab.txt")
  learn.write_vocab(vocab, vocab_file)
  heldout = [l for l in lines[cut:] if l.strip()]
  rate, tok = _unk_rate(vocab_file, heldout)
  assert rate < 0.01
  for word in ("the", "and", "of", "to", "was", "her", "said"):
    assert tok.tokenize(word) == [word]
