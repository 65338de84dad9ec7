"""create_pretraining_data's newer recipes: masked-LM only (--next_sentence=False,
--cross_document), unmasked records (--masking=none) and Chinese whole-word masking
(--chinese_word_segmenter=jieba)."""

import glob
import logging
import random

from conftest import CHINESE_VOCAB
from conftest import FIXTURES
from conftest import UNCASED_VOCAB
from conftest import corpus_text
from conftest import run_command
import numpy as np
import pytest
import tensorflow as tf
from test_create_pretraining_data import _find_doc

from data_prep import schema
from data_prep import tokenization
from data_prep.pretraining import chinese_words
from data_prep.pretraining import instances
from data_prep.pretraining import packing
from data_prep.pretraining import tokens
from data_prep.pretraining import writer

L, P = 64, 10
CHINESE = f"{FIXTURES}/corpus/chinese_sample.txt"


def _settings(corpus, out, **kw):
  base = dict(input_file=str(corpus), output_file=str(out), vocab_file=UNCASED_VOCAB,
              max_seq_length=L, max_predictions_per_seq=P, dupe_factor=1, num_workers=1,
              chunk_size_mb=0.02, min_docs_per_chunk=4)
  base.update(kw)
  return writer.Settings(**base)


def _read(path, features):
  spec = schema.tf_feature_spec(features)
  rows = [{k: v.numpy() for k, v in tf.io.parse_single_example(r, spec).items()}
          for r in tf.data.TFRecordDataset(str(path))]
  return {k: np.stack([r[k] for r in rows]) for k in rows[0]}


def _unmasked(f):
  """input_ids with the masked positions restored."""
  ids = f["input_ids"].copy()
  valid = f["masked_lm_weights"] > 0
  rows = np.nonzero(valid)[0]
  ids[rows, f["masked_lm_positions"][valid]] = f["masked_lm_ids"][valid]
  return ids


def _documents(path):
  text = open(path, encoding="utf-8").read()
  return [[l for l in d.split("\n") if l.strip()] for d in text.split("\n\n") if d.strip()]


@pytest.fixture(scope="module")
def english(tmp_path_factory):
  # Real sentences in documents of 4, so that sequences cross many document boundaries.
  lines = [l for l in corpus_text(60_000).split("\n") if l.strip()]
  path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
  path.write_text("\n\n".join("\n".join(lines[i:i + 4]) for i in range(0, len(lines), 4)),
                  encoding="utf-8")
  tok = tokenization.FullTokenizer(UNCASED_VOCAB)
  docs = [tok.encode_batch(d)[0] for d in _documents(path)]
  return path, tok, docs


# --- packing, exactly, on synthetic sentence lengths ---------------------------------------

def _chunk(doc_lengths):
  lengths = [n for d in doc_lengths for n in d]
  line_splits = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
  doc_splits = np.concatenate([[0], np.cumsum([len(d) for d in doc_lengths])]).astype(np.int64)
  ids = np.arange(line_splits[-1], dtype=np.int32) + 1000  # token k has id 1000 + k
  return instances.Chunk(0, ids, line_splits, doc_splits)


@pytest.mark.parametrize("cross_document", [False, True])
def test_packing_tiles_every_document_with_whole_sentences(cross_document):
  rng = np.random.default_rng(5)
  docs = [rng.integers(1, 40, rng.integers(1, 12)).tolist() for _ in range(40)]
  docs[3] = [5, 150, 7]  # a sentence longer than a sequence: split, nothing dropped
  chunk = _chunk(docs)
  opts = instances.InstanceOptions(max_seq_length=64, dupe_factor=2, short_seq_prob=0.2,
                                   next_sentence=False, cross_document=cross_document)
  spans = packing.packed_spans(chunk, opts, random.Random(0))
  stream = packing.extended_stream(chunk, sep_id=102)
  assert (spans["length"] >= 1).all() and (spans["length"] <= 62).all()
  assert not spans["label"].any()
  sentence_starts = set(chunk.line_splits.tolist())
  long_sentence = set(range(chunk.line_splits[doc_lengths_index(docs, 3, 1)] + 1,
                            chunk.line_splits[doc_lengths_index(docs, 3, 1) + 1]))
  covered = []
  for lo, n in zip(spans["lo"].tolist(), spans["length"].tolist()):
    piece = stream.ids[lo:lo + n]
    assert not stream.is_sep[lo] and not stream.is_sep[lo + n - 1]  # never at an end
    if not cross_document:
      assert not stream.is_sep[lo:lo + n].any()
    text = piece[piece != 102] - 1000
    assert (np.diff(text) == 1).all()  # contiguous text of the chunk
    # whole sentences, but for the pieces of the long one
    assert text[0] in sentence_starts or text[0] in long_sentence
    covered.append(text)
  covered = np.sort(np.concatenate(covered))
  want = np.arange(len(chunk.ids))
  assert (covered == np.sort(np.concatenate([want, want]))).all()  # each token once a pass


def doc_lengths_index(docs, d, i):
  """Global sentence number of sentence i of document d."""
  return sum(len(x) for x in docs[:d]) + i


def test_full_targets_pack_greedily():
  """short_seq_prob=0: a sequence ends only where the next sentence would not fit."""
  chunk = _chunk([[10, 20, 30, 15, 2], [40, 1], [61], [5]])  # sequences of up to 62
  opts = instances.InstanceOptions(max_seq_length=64, dupe_factor=1, short_seq_prob=0.0,
                                   next_sentence=False)
  spans = packing.packed_spans(chunk, opts, random.Random(0))
  assert spans["length"].tolist() == [60, 17, 41, 61, 5]
  opts = instances.InstanceOptions(max_seq_length=64, dupe_factor=1, short_seq_prob=0.0,
                                   next_sentence=False, cross_document=True)
  spans = packing.packed_spans(chunk, opts, random.Random(0))
  # 10 20 30 | 15 2 [SEP] 40 1 ([SEP] dropped: 61 does not fit) | 61 ([SEP] dropped) | 5
  assert spans["length"].tolist() == [60, 59, 61, 5]
  assert spans["lo"].tolist() == [0, 60, 120, 182]


def test_token_packing_cuts_every_pass_into_full_sequences():
  rng = np.random.default_rng(6)
  docs = [rng.integers(1, 40, rng.integers(1, 12)).tolist() for _ in range(40)]
  chunk = _chunk(docs)
  opts = instances.InstanceOptions(max_seq_length=64, dupe_factor=3, short_seq_prob=0.5,
                                   next_sentence=False, packing="tokens")
  spans = packing.packed_spans(chunk, opts, random.Random(0))
  stream = packing.extended_stream(chunk, sep_id=102)
  assert (spans["length"] >= 1).all() and (spans["length"] <= 62).all()
  passes, covered, boundaries = [], [], []
  for lo, n in zip(spans["lo"].tolist(), spans["length"].tolist()):
    assert not stream.is_sep[lo] and not stream.is_sep[lo + n - 1]  # never at an end
    piece = stream.ids[lo:lo + n]
    text = piece[piece != 102] - 1000
    assert (np.diff(text) == 1).all()  # contiguous text, documents running on
    covered.append(text)
    if lo == 0:
      passes.append([])
    passes[-1].append((lo, n))
  assert len(passes) == 3
  want = np.arange(len(chunk.ids))
  covered = np.sort(np.concatenate(covered))
  assert (covered == np.sort(np.concatenate([want] * 3))).all()  # each token once a pass
  for spans_of_pass in passes:
    # Full but for the pass's first (from a random offset) and last spans, and a [SEP]
    # left out at an end; no short targets whatever short_seq_prob says.
    full = [n for lo, n in spans_of_pass[1:-1]]
    assert min(full) >= 61, full
    boundaries.append({lo for lo, _ in spans_of_pass})
  assert boundaries[0] != boundaries[1] != boundaries[2]  # the passes cut elsewhere


# --- masked-LM only, through the writer ------------------------------------------------------

@pytest.mark.parametrize("cross_document", [False, True])
def test_mlm_only_records_are_one_segment_of_contiguous_text(english, tmp_path, cross_document):
  path, tok, docs = english
  cls, sep = tok.vocab["[CLS]"], tok.vocab["[SEP]"]
  out = tmp_path / "mlm.tfrecord"
  summary = writer.run(_settings(path, out, next_sentence=False, cross_document=cross_document,
                                 do_whole_word_mask=True))
  f = _read(out, schema.pretraining_features(L, P))
  assert len(f["input_ids"]) == summary["instances"]
  assert summary["random_next_fraction"] == 0 and not f["next_sentence_labels"].any()
  assert not f["segment_ids"].any()
  ids = _unmasked(f)
  lengths = f["input_mask"].sum(1)
  streams = [d.tobytes() for d in docs]
  doc_len = [len(d) for d in docs]
  texts, inner_seps = [], 0
  for i in range(len(ids)):
    n = lengths[i]
    assert f["input_mask"][i, :n].all() and not f["input_ids"][i, n:].any()
    assert ids[i, 0] == cls and ids[i, n - 1] == sep and n <= L
    count = int(f["masked_lm_weights"][i].sum())
    assert count == min(P, max(1, round(n * 0.15))) or count < round(n * 0.15)  # whole words
    pos = f["masked_lm_positions"][i, :count]
    assert not np.isin(ids[i, pos], [cls, sep]).any()  # inner [SEP]s too
    body = ids[i, 1:n - 1]
    parts = np.split(body, np.flatnonzero(body == sep))
    parts = [parts[0]] + [p[1:] for p in parts[1:]]
    inner_seps += len(parts) - 1
    if not cross_document:
      assert len(parts) == 1
    for k, part in enumerate(parts):
      hits = _find_doc(streams, part)
      assert hits, i
      if k > 0:  # a document's start follows the [SEP] ...
        assert any(o == 0 for _, o in hits), i
      if k < len(parts) - 1:  # ... and one's end precedes it
        assert any(o + len(part) == doc_len[d] for d, o in hits), i
      texts.append(part)
  # Nothing dropped, nothing twice (dupe_factor=1): the same tokens as the corpus.
  got = np.bincount(np.concatenate(texts), minlength=len(tok.vocab))
  want = np.bincount(np.concatenate(docs), minlength=len(tok.vocab))
  assert (got == want).all()
  if cross_document:
    assert inner_seps > len(docs) / 4 and np.mean(lengths) > 0.75 * L  # fuller sequences
  else:
    assert np.mean(lengths) > 0.6 * L


def test_token_packed_records_are_full_and_hold_the_corpus_once(english, tmp_path):
  path, tok, docs = english
  sep = tok.vocab["[SEP]"]
  out = tmp_path / "tokens.tfrecord"
  writer.run(_settings(path, out, next_sentence=False, packing="tokens", max_seq_length=128,
                       masking="none", chunk_size_mb=0.05))
  f = _read(out, schema.unmasked_pretraining_features(128))
  assert f["input_mask"].mean() >= 0.98  # the bar at length 128
  lengths = f["input_mask"].sum(1)
  texts = []
  for i in range(len(lengths)):
    body = f["input_ids"][i, 1:lengths[i] - 1]
    texts.append(body[body != sep])
    first = np.flatnonzero(f["input_mask"][i])[1]
    assert f["word_starts"][i, first] == 1  # a sequence cut inside a word opens one
  got = np.bincount(np.concatenate(texts), minlength=len(tok.vocab))
  want = np.bincount(np.concatenate(docs), minlength=len(tok.vocab))
  assert (got == want).all()  # nothing dropped, nothing twice (dupe_factor=1)


# --- unmasked records ---------------------------------------------------------------------

@pytest.mark.parametrize("next_sentence", [True, False])
def test_masking_none_writes_the_offline_runs_ids_unmasked(english, tmp_path, next_sentence):
  path, tok, _ = english
  offline, none = tmp_path / "offline.tfrecord", tmp_path / "none.tfrecord"
  kw = dict(next_sentence=next_sentence, dupe_factor=2)
  writer.run(_settings(path, offline, **kw))
  summary = writer.run(_settings(path, none, masking="none", **kw))
  assert summary["masked_fraction"] == 0
  f = _read(offline, schema.pretraining_features(L, P))
  g = _read(none, schema.unmasked_pretraining_features(L))
  assert set(g) == {"input_ids", "input_mask", "segment_ids", "next_sentence_labels",
                    "word_starts"}
  assert (g["input_ids"] == _unmasked(f)).all()  # same seed: same pairs, same order
  for name in ("input_mask", "segment_ids", "next_sentence_labels"):
    assert (g[name] == f[name]).all(), name
  is_cont = np.array([tok.inv_vocab[i].startswith("##") for i in range(len(tok.inv_vocab))])
  real = (g["input_mask"] == 1) & ~np.isin(g["input_ids"], [tok.vocab["[CLS]"],
                                                             tok.vocab["[SEP]"]])
  assert (g["word_starts"] == (real & ~is_cont[g["input_ids"]])).all()
  assert 0 < (real & is_cont[g["input_ids"]]).sum()  # there were continuations to mark 0
  with pytest.raises(tf.errors.InvalidArgumentError):  # not readable as masked records
    _read(none, schema.pretraining_features(L, P))


# --- Chinese whole-word masking ---------------------------------------------------------------

HELD_OUT = "蝶"  # not in the test's vocabulary: [UNK]


@pytest.fixture(scope="module")
def chinese(tmp_path_factory):
  """The Chinese fixture text in documents of 5 sentences; the fixture vocab plus its
  characters; per document, the token ids and the expected word starts."""
  root = tmp_path_factory.mktemp("zh")
  lines = [l for d in _documents(CHINESE) for l in d]
  lines.append(f"蝴{HELD_OUT}在花丛中飞来飞去，iPhone手机的价格是4999元。")
  corpus = root / "zh.txt"
  corpus.write_text("\n\n".join("\n".join(lines[i:i + 5]) for i in range(0, len(lines), 5)),
                    encoding="utf-8")
  vocab = [t if t != HELD_OUT else "[held out]"
           for t in open(CHINESE_VOCAB, encoding="utf-8").read().split("\n")]
  known = set(vocab)
  extra = sorted({c for c in "".join(lines) if chinese_words.is_cjk(c)} - known - {HELD_OUT})
  (root / "vocab.txt").write_text("\n".join(vocab + extra), encoding="utf-8")
  tok = tokenization.FullTokenizer(str(root / "vocab.txt"))
  documents = _documents(corpus)
  cut = chinese_words._load_jieba().cut  # pylint: disable=protected-access
  words = [[list(cut(line)) for line in doc] for doc in documents]
  flat = [w for doc in words for line in doc for w in line]
  pieces = iter(tok.tokenize_to_ids_batch(flat))
  docs, starts = [], []
  for doc, doc_words in zip(documents, words):
    ids, want = [], []
    for word in (w for line in doc_words for w in line):
      word_ids = next(pieces)
      ids += word_ids
      cjk = [chinese_words.is_cjk(c) for c in word]
      assert all(cjk) or not any(cjk), word  # no mixed words such as "T恤" here
      # Chinese: a word's first character; otherwise the "##" rule
      want += [k == 0 or not (cjk[0] or tok.inv_vocab[p].startswith("##"))
               for k, p in enumerate(word_ids)]
    assert ids == tok.encode_batch(doc)[0].tolist()  # words tokenize as their text does
    docs.append(np.array(ids, np.int32))
    starts.append(np.array(want))
  assert tok.vocab["[UNK]"] in np.concatenate(docs)
  return corpus, tok, docs, starts


def _word_spans(starts):
  """[(start, end)] of the words given per-token start flags (the first token opens one)."""
  bounds = np.append(np.flatnonzero(starts), len(starts))
  return list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))


@pytest.mark.parametrize("next_sentence", [True, False])
def test_chinese_whole_word_masking_masks_whole_jieba_words(chinese, tmp_path, next_sentence):
  corpus, tok, docs, starts = chinese
  out = tmp_path / "zh.tfrecord"
  writer.run(_settings(corpus, out, vocab_file=tok.vocab_file, max_seq_length=128,
                       max_predictions_per_seq=20, dupe_factor=8, do_whole_word_mask=True,
                       chinese_word_segmenter="jieba", next_sentence=next_sentence,
                       chunk_size_mb=0.005, min_docs_per_chunk=2))
  f = _read(out, schema.pretraining_features(128, 20))
  ids = _unmasked(f)
  streams = [d.tobytes() for d in docs]
  sep = tok.vocab["[SEP]"]
  checked = multi = 0
  for i in range(len(ids)):
    n = f["input_mask"][i].sum()
    count = int(f["masked_lm_weights"][i].sum())
    masked = set(f["masked_lm_positions"][i, :count].tolist())
    seps = [0] + np.flatnonzero(ids[i, :n] == sep).tolist()
    for a, b in zip(seps[:-1], seps[1:]):  # each segment between [CLS]/[SEP]s
      seg = ids[i, a + 1:b]
      d, o = _find_doc(streams, seg)[0]
      m = len(seg)
      # words wholly inside the segment: truncation may cut one at either end
      whole_end = o + m == len(docs[d]) or starts[d][o + m]
      for s, e in _word_spans(starts[d][o:o + m]):  # skips a cut word at the front
        if e == m and not whole_end:
          continue
        word = set(range(a + 1 + s, a + 1 + e))
        if word & masked:
          assert word <= masked, (i, s, e, masked)
          checked += 1
          multi += e - s > 1
  assert checked > 1000 and multi > 0.4 * checked  # most masked words have 2+ characters
  valid = f["masked_lm_weights"] > 0
  shown = f["input_ids"][np.nonzero(valid)[0], f["masked_lm_positions"][valid]]
  labels = f["masked_lm_ids"][valid]
  assert abs(valid.sum() / f["input_mask"].sum() - 0.15) < 0.01
  assert abs(np.mean(shown == tok.vocab["[MASK]"]) - 0.8) < 0.025
  assert abs(np.mean(shown == labels) - 0.1) < 0.02


def test_without_the_segmenter_chinese_characters_are_masked_one_by_one(chinese, tmp_path):
  """The contrast: "##" grouping alone leaves Chinese words partly masked."""
  corpus, tok, _, _ = chinese
  out = tmp_path / "zh.tfrecord"
  writer.run(_settings(corpus, out, vocab_file=tok.vocab_file, max_seq_length=128,
                       max_predictions_per_seq=20, do_whole_word_mask=True, next_sentence=False))
  f = _read(out, schema.pretraining_features(128, 20))
  pos = f["masked_lm_positions"][f["masked_lm_weights"] > 0]
  runs = np.diff(pos)
  assert np.mean(runs == 1) < 0.3  # neighbours masked together only by chance


def test_chinese_word_starts_in_unmasked_records(chinese, tmp_path):
  corpus, tok, docs, starts = chinese
  out = tmp_path / "zh.tfrecord"
  writer.run(_settings(corpus, out, vocab_file=tok.vocab_file, max_seq_length=128,
                       masking="none", chinese_word_segmenter="jieba", next_sentence=False,
                       chunk_size_mb=0.005, min_docs_per_chunk=2))
  g = _read(out, schema.unmasked_pretraining_features(128))
  streams = [d.tobytes() for d in docs]
  total = 0
  for i in range(len(g["input_ids"])):
    n = g["input_mask"][i].sum()
    (d, o), = {h for h in _find_doc(streams, g["input_ids"][i, 1:n - 1])}
    want = starts[d][o:o + n - 2]
    assert g["word_starts"][i, 0] == 0 and not g["word_starts"][i, n - 1:].any()
    assert (g["word_starts"][i, 1:n - 1] == want).all(), i
    total += n - 2
  assert total == sum(len(d) for d in docs)  # every token, once


def test_show_pretraining_data_groups_the_words_of_unmasked_records(chinese, tmp_path):
  from data_prep.pretraining import records_view  # pylint: disable=g-import-not-at-top
  corpus, tok, _, _ = chinese
  out = tmp_path / "zh.tfrecord"
  writer.run(_settings(corpus, out, vocab_file=tok.vocab_file, max_seq_length=128,
                       masking="none", chinese_word_segmenter="jieba", next_sentence=False))
  f = records_view.read_instances([str(out)], 128, 20)
  lines = records_view.describe(f, tok.inv_vocab, 50)
  assert lines[0] == f"instances: {len(f['input_ids'])} (unmasked: --masking=none)"
  shown = " ".join(lines)
  assert " 北京 " in shown and " 人工智能 " in shown  # jieba's words, whole
  # The files are the training input's (tfrecord_io.expand_patterns): a writer's hidden
  # temporary file, a folder and a second match of one file are not read.
  (tmp_path / ".zh.tfrecord.tmp-99").write_bytes(b"half")
  (tmp_path / "sub").mkdir()
  report = records_view.report(f"{out},{tmp_path}/*", tok.vocab_file, 128, 20, 50)
  assert report[0] == f"files: {out}" and report[1:] == lines


def test_segmenter_changes_nothing_for_english(english):
  path, tok, _ = english
  texts = _documents(path)[:30]
  kw = dict(max_seq_length=L, max_predictions_per_seq=P, dupe_factor=2, do_whole_word_mask=True,
            vocab_size=len(tok.vocab),
            continuation_ids=tuple(i for t, i in tok.vocab.items() if t.startswith("##")))
  plain = tokens.tokenize_documents(tok, texts, 0)
  segmented = tokens.tokenize_documents(tok, texts, 0, "jieba")
  assert (plain.ids == segmented.ids).all() and plain.word_starts is None
  opts = instances.InstanceOptions(**kw)
  assert instances.serialize_chunk(plain, opts) == instances.serialize_chunk(segmented, opts)


# --- bad combinations -------------------------------------------------------------------------

@pytest.mark.parametrize("kw, message", [
    (dict(cross_document=True), r"--cross_document=True .* needs --next_sentence=False"),
    (dict(packing="tokens"), r"--packing=tokens .* needs --next_sentence=False"),
    (dict(chinese_word_segmenter="jieba"), r"add --do_whole_word_mask"),
    (dict(chinese_word_segmenter="ltp", do_whole_word_mask=True),
     r"--chinese_word_segmenter='ltp': must be one of \['none', 'jieba'\]"),
    (dict(masking="dynamic"), r"--masking='dynamic' must be one of \['offline', 'none'\]"),
    (dict(next_sentence=False, max_seq_length=2), r"--max_seq_length=2 is too small"),
])
def test_bad_combinations_are_clear_errors(english, tmp_path, kw, message):
  path, _, _ = english
  out = tmp_path / "x.tfrecord"
  with pytest.raises(ValueError, match=message):
    writer.run(_settings(path, out, **kw))
  assert not out.exists()


def test_bad_flags_on_the_command_line(english, tmp_path):
  path, _, _ = english
  out = tmp_path / "x.tfrecord"
  for flag, message in [("--cross_document=True", "needs --next_sentence=False"),
                        ("--chinese_word_segmenter=ltp", "one of <none|jieba>")]:
    proc = run_command("data_prep.create_pretraining_data", f"--input_file={path}",
                       f"--output_file={out}", f"--vocab_file={UNCASED_VOCAB}", flag)
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
  assert not glob.glob(str(tmp_path / "*"))


def test_unmasked_records_still_check_the_pair_options():
  for bad, message in ((dict(dupe_factor=0), "dupe_factor=0 must be >= 1"),
                       (dict(short_seq_prob=1.5), "short_seq_prob=1.5 must be in")):
    with pytest.raises(ValueError, match=message):
      instances.InstanceOptions(masking="none", **bad).validate()


def test_flags_a_recipe_leaves_unused_are_named_when_set(caplog):
  """--masking=none --masked_lm_prob=0.5: the value vanished with an INFO line only."""
  from data_prep.pretraining import settings as settings_lib  # pylint: disable=g-import-not-at-top
  for kw, said in ((dict(masking="none", masked_lm_prob=0.5, do_whole_word_mask=True),
                    "--masking=none: --masked_lm_prob=0.5 and --do_whole_word_mask=True are "
                    "not used here; give them to run_pretraining --dynamic_masking"),
                   (dict(packing="tokens", next_sentence=False, short_seq_prob=0.5),
                    "--packing=tokens: --short_seq_prob=0.5 is not used here"),
                   (dict(masking="none"), None)):
    caplog.clear()
    with caplog.at_level(logging.WARNING):
      settings_lib._check_recipe(settings_lib.Settings("in", "out", "vocab", **kw))  # noqa: SLF001
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings == ([said] if said else []), warnings
