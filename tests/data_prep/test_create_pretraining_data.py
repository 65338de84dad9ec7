"""create_pretraining_data: schema, algorithm invariants, determinism, errors, atomic output."""

import glob
import os
import random
import signal
import subprocess
import sys
import time

from conftest import REAL_UNCASED_VOCAB
from conftest import REPO
from conftest import UNCASED_VOCAB
from conftest import corpus_slice
from conftest import corpus_text
from conftest import need
from conftest import run_command
import numpy as np
import pytest
import tensorflow as tf

from data_prep import schema
from data_prep import tokenization
from data_prep.pretraining import instances as pretraining_instances
from data_prep.pretraining import writer

pytestmark = pytest.mark.large  # trains or runs commands: `make test`, not `make test-fast`

L, P = 64, 10


def _settings(corpus, out, **kw):
  base = dict(input_file=str(corpus), output_file=str(out), vocab_file=need(UNCASED_VOCAB),
              max_seq_length=L, max_predictions_per_seq=P, dupe_factor=2, num_workers=1,
              chunk_size_mb=0.05, min_docs_per_chunk=4)
  base.update(kw)
  return writer.Settings(**base)


def _read(paths, seq=L, preds=P, compression=""):
  spec = schema.tf_feature_spec(schema.pretraining_features(seq, preds))
  ds = tf.data.TFRecordDataset(paths, compression_type=compression)
  rows = [{k: v.numpy() for k, v in tf.io.parse_single_example(r, spec).items()} for r in ds]
  return {k: np.stack([r[k] for r in rows]) for k in rows[0]}


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory):
  path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
  path.write_text(corpus_text(120_000), encoding="utf-8")
  return path


@pytest.fixture(scope="module")
def written(small_corpus, tmp_path_factory):
  out = tmp_path_factory.mktemp("out") / "pretrain.tfrecord"
  summary = writer.run(_settings(small_corpus, out))
  return summary, _read([str(out)]), out


def test_schema_matches_the_model_garden_loader(written):
  from official.nlp.data import pretrain_dataloader  # the peer's reader
  _, _, out = written
  config = pretrain_dataloader.BertPretrainDataConfig(
      input_path=str(out), seq_length=L, max_predictions_per_seq=P, global_batch_size=8,
      is_training=False, use_next_sentence_label=True)
  batch = next(iter(pretrain_dataloader.BertPretrainDataLoader(config).load()))
  assert batch["input_word_ids"].shape == (8, L) and batch["input_word_ids"].dtype == tf.int32
  assert batch["masked_lm_positions"].shape == (8, P)
  assert batch["masked_lm_weights"].dtype == tf.float32
  assert batch["next_sentence_labels"].shape == (8, 1)


def test_instances_follow_the_original_layout(written):
  summary, f, _ = written
  tok = tokenization.FullTokenizer(UNCASED_VOCAB)
  cls, sep, mask = tok.vocab["[CLS]"], tok.vocab["[SEP]"], tok.vocab["[MASK]"]
  n = len(f["input_ids"])
  assert n == summary["instances"] > 500
  lengths = f["input_mask"].sum(1)
  for i in range(n):
    length = lengths[i]
    assert f["input_mask"][i, :length].all() and not f["input_mask"][i, length:].any()
    assert not f["input_ids"][i, length:].any() and not f["segment_ids"][i, length:].any()
    ids, seg = f["input_ids"][i], f["segment_ids"][i]
    assert ids[0] == cls and ids[length - 1] == sep
    len_a = int((seg[:length] == 0).sum()) - 2
    assert ids[len_a + 1] == sep and seg[len_a + 1] == 0 and seg[len_a + 2] == 1
    assert len_a >= 1 and length - len_a - 3 >= 1
    count = int(f["masked_lm_weights"][i].sum())
    assert count == min(P, max(1, round(length * 0.15)))
    pos = f["masked_lm_positions"][i, :count]
    assert (np.diff(pos) > 0).all() and not f["masked_lm_positions"][i, count:].any()
    assert set(pos.tolist()).isdisjoint({0, len_a + 1, length - 1})
    assert (pos < length).all() and not f["masked_lm_ids"][i, count:].any()
    assert not np.isin(f["masked_lm_ids"][i, :count], [cls, sep]).any()
  assert (f["input_ids"] == mask).sum() > 0


def _doc_streams(corpus, tok):
  """Each document's tokens, as bytes of int32, for contiguous-span searches."""
  docs = [d for d in corpus.read_text(encoding="utf-8").split("\n\n") if d.strip()]
  return [np.array([i for line in d.split("\n") for i in tok.tokenize_to_ids_batch([line])[0]],
                   np.int32).tobytes() for d in docs]


def _find_doc(streams, tokens):
  """(document, token offset) of every place the tokens occur contiguously."""
  needle = np.asarray(tokens, np.int32).tobytes()
  hits = []
  for k, s in enumerate(streams):
    at = s.find(needle)
    while at >= 0:
      if at % 4 == 0:
        hits.append((k, at // 4))
      at = s.find(needle, at + 1)
  return hits


def test_segments_are_contiguous_text_and_labels_mean_what_they_say(written, small_corpus):
  """Unmasked, A and B are each a contiguous run of a document; for label 0, B follows A in
  the same document (truncation may cut A's end and B's start); for label 1, B usually comes
  from another document."""
  _, f, _ = written
  tok = tokenization.FullTokenizer(UNCASED_VOCAB)
  streams = _doc_streams(small_corpus, tok)
  other_doc = 0
  for i in range(0, len(f["input_ids"]), 7):
    ids = f["input_ids"][i].copy()
    count = int(f["masked_lm_weights"][i].sum())
    ids[f["masked_lm_positions"][i, :count]] = f["masked_lm_ids"][i, :count]
    length = f["input_mask"][i].sum()
    len_a = int((f["segment_ids"][i, :length] == 0).sum()) - 2
    a, b = ids[1:len_a + 1], ids[len_a + 2:length - 1]
    hits_a, hits_b = _find_doc(streams, a), _find_doc(streams, b)
    assert hits_a and hits_b, i
    if f["next_sentence_labels"][i, 0] == 0:
      assert any(da == db and ob >= oa + len(a) for da, oa in hits_a for db, ob in hits_b), i
    else:
      other_doc += not {d for d, _ in hits_a} & {d for d, _ in hits_b}
  assert other_doc > 0


def test_masking_statistics_and_nsp_balance(written):
  _, f, _ = written
  tok = tokenization.FullTokenizer(UNCASED_VOCAB)
  valid = f["masked_lm_weights"] > 0
  rows = np.nonzero(valid)[0]
  shown = f["input_ids"][rows, f["masked_lm_positions"][valid]]
  labels = f["masked_lm_ids"][valid]
  as_mask = np.mean(shown == tok.vocab["[MASK]"])
  kept = np.mean(shown == labels)
  assert abs(as_mask - 0.8) < 0.03 and abs(kept - 0.1) < 0.02
  # Above 0.5: a chunk of one sentence always takes a random next one (see the peer test).
  assert 0.5 <= f["next_sentence_labels"].mean() < 0.75
  assert abs(valid.sum() / f["input_mask"].sum() - 0.15) < 0.01


def _statistics(f, mask_id, seq):
  valid = f["masked_lm_weights"] > 0
  shown = f["input_ids"][np.nonzero(valid)[0], f["masked_lm_positions"][valid]]
  labels = f["masked_lm_ids"][valid]
  lengths = f["input_mask"].sum(1)
  len_a = (f["segment_ids"] == 0).sum(1) - (seq - lengths)
  return {
      "masked_fraction": valid.sum() / lengths.sum(),
      "as_mask": np.mean(shown == mask_id),
      "kept": np.mean(shown == labels),
      "random_next": f["next_sentence_labels"].mean(),
      "mean_length": lengths.mean() / seq,
      "full_length": np.mean(lengths >= seq - 1),
      "short": np.mean(lengths < seq // 2),
      "a_share": np.mean(len_a / lengths),
  }


def test_statistics_agree_with_the_peer_on_real_text(tmp_path):
  """Same corpus and flags through the Model Garden's create_pretraining_data and ours.

  Real data: 600 KB of ../shared's Gutenberg corpus and the full uncased vocabulary."""
  # Real sentences in documents of 10: the per-document draws (short target, random
  # document) then average over ~500 documents instead of the ~40 chapters of the slice.
  lines = [l for l in corpus_slice(600_000, start=12_000_000).split("\n") if l.strip()]
  corpus = tmp_path / "corpus.txt"
  corpus.write_text("\n\n".join("\n".join(lines[i:i + 10]) for i in range(0, len(lines), 10)),
                    encoding="utf-8")
  flags = [f"--input_file={corpus}", f"--vocab_file={need(REAL_UNCASED_VOCAB)}",
           "--do_lower_case=True", "--max_seq_length=128", "--max_predictions_per_seq=20",
           "--dupe_factor=2", "--masked_lm_prob=0.15", "--short_seq_prob=0.1"]
  peer_out = tmp_path / "peer.tfrecord"
  subprocess.run([sys.executable, "-m", "official.nlp.data.create_pretraining_data",
                  f"--output_file={peer_out}"] + flags, check=True, capture_output=True,
                 timeout=300)
  ours_out = tmp_path / "ours.tfrecord"
  writer.run(writer.Settings(input_file=str(corpus), output_file=str(ours_out),
                             vocab_file=REAL_UNCASED_VOCAB, dupe_factor=2, num_workers=1))
  peer = _statistics(_read([str(peer_out)], 128, 20), 103, 128)
  ours = _statistics(_read([str(ours_out)], 128, 20), 103, 128)
  tolerance = {"masked_fraction": 0.005, "as_mask": 0.02, "kept": 0.015,
               "random_next": 0.04, "mean_length": 0.03, "full_length": 0.04,
               "short": 0.03, "a_share": 0.03}
  for name, tol in tolerance.items():
    assert abs(ours[name] - peer[name]) < tol, (name, ours[name], peer[name])
  assert abs(ours["as_mask"] - 0.8) < 0.02 and abs(ours["kept"] - 0.1) < 0.015


def test_deterministic_for_any_worker_count_and_seed_sensitive(small_corpus, tmp_path, written):
  _, _, first = written
  again = tmp_path / "again.tfrecord"
  writer.run(_settings(small_corpus, again, num_workers=2))
  assert again.read_bytes() == first.read_bytes()
  other = tmp_path / "other_seed.tfrecord"
  writer.run(_settings(small_corpus, other, random_seed=1))
  assert other.read_bytes() != first.read_bytes()


def test_shards_gzip_and_v2_names(small_corpus, tmp_path, written):
  _, single, _ = written
  out = tmp_path / "sharded.tfrecord"
  summary = writer.run(_settings(small_corpus, out, num_output_shards=3, gzip_compress=True,
                                 use_v2_feature_names=True))
  paths = sorted(glob.glob(str(out) + "-*"))
  assert [os.path.basename(p) for p in paths] == [
      f"sharded.tfrecord-0000{i}-of-00003" for i in range(3)]
  assert all(schema.compression_of(p) == "GZIP" for p in paths)
  spec = {schema.V2_NAMES.get(k, k): v for k, v in
          schema.tf_feature_spec(schema.pretraining_features(L, P)).items()}
  counts = []
  for p in paths:
    ds = tf.data.TFRecordDataset(p, compression_type="GZIP")
    counts.append(sum(1 for _ in ds))
    first = tf.io.parse_single_example(next(iter(ds)), spec)
    assert "input_word_ids" in first and "input_type_ids" in first
  assert sum(counts) == summary["instances"] == len(single["input_ids"])
  assert max(counts) - min(counts) <= 1  # round robin, as the original


def test_whole_word_masking_masks_every_piece_of_a_word(small_corpus, tmp_path):
  out = tmp_path / "wwm.tfrecord"
  writer.run(_settings(small_corpus, out, do_whole_word_mask=True))
  f = _read([str(out)])
  tok = tokenization.FullTokenizer(UNCASED_VOCAB)
  is_cont = np.array([t.startswith("##") for t in tok.inv_vocab.values()])
  checked = 0
  for i in range(len(f["input_ids"])):
    count = int(f["masked_lm_weights"][i].sum())
    ids = f["input_ids"][i].copy()
    pos = f["masked_lm_positions"][i, :count]
    ids[pos] = f["masked_lm_ids"][i, :count]
    masked = set(pos.tolist())
    assert count <= min(P, max(1, round(f["input_mask"][i].sum() * 0.15)))
    for p in pos:  # the piece after a masked word piece is masked too if it continues it
      if p + 1 < len(ids) and is_cont[ids[p + 1]] and ids[p + 1] != 0:
        assert p + 1 in masked
        checked += 1
      if is_cont[ids[p]]:
        assert p - 1 in masked or ids[p - 1] in (101, 102)
  assert checked > 10


def _original_document_loop(docs, rng, dupe, max_seq_length, short_seq_prob):
  """google-research/bert's create_instances_from_document, on segment lengths only."""
  out, max_num_tokens = [], max_seq_length - 3
  for _ in range(dupe):
    for d, document in enumerate(docs):
      target = max_num_tokens
      if rng.random() < short_seq_prob:
        target = rng.randint(2, max_num_tokens)
      chunk, length, i = [], 0, 0
      while i < len(document):
        chunk.append(document[i])
        length += document[i]
        if i == len(document) - 1 or length >= target:
          a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
          len_a = sum(chunk[:a_end])
          if len(chunk) == 1 or rng.random() < 0.5:
            for _ in range(10):
              other = rng.randint(0, len(docs) - 1)
              if other != d:
                break
            start, len_b = rng.randint(0, len(docs[other]) - 1), 0
            for j in range(start, len(docs[other])):
              len_b += docs[other][j]
              if len_b >= target - len_a:
                break
            i -= len(chunk) - a_end
            out.append((len_a, len_b, 1))
          else:
            out.append((len_a, sum(chunk[a_end:]), 0))
          chunk, length = [], 0
        i += 1
  return out


def test_pair_decisions_reproduce_the_original_loop_exactly():
  """Given the same random.Random stream, every (len A, len B, label) is the original's."""
  rng = np.random.default_rng(3)
  docs = [rng.integers(1, 60, rng.integers(1, 30)).tolist() for _ in range(60)]
  lengths = [n for d in docs for n in d]
  line_splits = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
  doc_splits = np.concatenate([[0], np.cumsum([len(d) for d in docs])]).astype(np.int64)
  chunk = pretraining_instances.Chunk(0, np.zeros(line_splits[-1], np.int32), line_splits,
                                      doc_splits)
  for seq, seed in [(128, 0), (64, 1), (512, 2)]:
    opts = pretraining_instances.InstanceOptions(max_seq_length=seq, dupe_factor=3,
                                                 short_seq_prob=0.3)
    spans = pretraining_instances.pair_spans(chunk, opts, random.Random(seed))
    expected = _original_document_loop(docs, random.Random(seed), 3, seq, 0.3)
    got = list(zip(spans["a_len"].tolist(), spans["b_len"].tolist(), spans["label"].tolist()))
    assert got == expected


def test_truncation_counts_match_the_original_loop():
  rng = np.random.default_rng(0)
  for _ in range(500):
    la, lb, limit = (int(x) for x in rng.integers(1, 60, 3))
    a, b = la, lb
    while a + b > limit:
      if a > b:
        a -= 1
      else:
        b -= 1
    assert pretraining_instances._truncation_counts(la, lb, limit) == (la - a, lb - b)


@pytest.mark.parametrize("flags_and_message", [
    (["--max_seq_length=4"], "too small for a sentence pair"),
    (["--max_predictions_per_seq=0"], "max_predictions_per_seq=0"),
    (["--input_file=/nonexistent/*.txt"], "matches no file"),
    (["--vocab_file=/nonexistent/vocab.txt"], "vocab file not found"),
    (["--input_file={empty}"], "empty corpus"),
    (["--input_file={latin1}"], "latin1.txt:3: invalid UTF-8"),
    (["--vocab_file={no_mask_vocab}"], r"lacks special token\(s\) \['\[MASK\]'\]"),
])
def test_bad_input_is_a_clear_error_and_writes_nothing(flags_and_message, tmp_path,
                                                       small_corpus):
  flags, message = flags_and_message
  (tmp_path / "empty.txt").write_text("\n  \n\n")
  (tmp_path / "latin1.txt").write_bytes(b"Fine line.\nAnother.\nCaf\xe9 au lait.\n")
  vocab = [l for l in open(need(UNCASED_VOCAB), encoding="utf-8").read().split("\n")
           if l != "[MASK]"]
  (tmp_path / "no_mask_vocab.txt").write_text("\n".join(vocab), encoding="utf-8")
  names = {"empty": tmp_path / "empty.txt", "latin1": tmp_path / "latin1.txt",
           "no_mask_vocab": tmp_path / "no_mask_vocab.txt"}
  out = tmp_path / "out" / "x.tfrecord"
  args = [f"--input_file={small_corpus}", f"--output_file={out}",
          f"--vocab_file={UNCASED_VOCAB}"] + [f.format(**names) for f in flags]
  # In this process through the command's launcher; the signal tests below run it as a process.
  proc = run_command("data_prep.create_pretraining_data", *args)
  assert proc.returncode != 0
  assert __import__("re").search(message, proc.stderr), proc.stderr[-2000:]
  assert not out.exists() and not glob.glob(str(out.parent / ".*tmp*"))


def test_errors_replace_accepts_bad_bytes(tmp_path):
  corpus = tmp_path / "latin1.txt"
  corpus.write_bytes(b"Caf\xe9 one.\nSecond line here.\n\nOther doc.\nMore text.\n")
  summary = writer.run(_settings(corpus, tmp_path / "o.tfrecord", errors="replace"))
  assert summary["instances"] > 0


def test_failure_midway_leaves_no_output(small_corpus, tmp_path, monkeypatch):
  calls = []

  def flaky(chunk, opts):
    calls.append(chunk.index)
    if len(calls) == 2:
      raise RuntimeError("disk on fire")
    return pretraining_instances.serialize_chunk(chunk, opts)

  monkeypatch.setattr(pretraining_instances, "serialize_chunk", flaky)
  out = tmp_path / "o.tfrecord"
  with pytest.raises(RuntimeError, match="disk on fire"):
    writer.run(_settings(small_corpus, out))
  assert os.listdir(tmp_path) == []


def test_killed_run_never_leaves_a_complete_looking_file(tmp_path):
  corpus = tmp_path / "c.txt"
  corpus.write_text(corpus_text() * 10, encoding="utf-8")  # ~3 MB: long enough to kill
  out = tmp_path / "o.tfrecord"
  proc = subprocess.Popen(
      [sys.executable, "-m", "data_prep.create_pretraining_data", f"--input_file={corpus}",
       f"--output_file={out}", f"--vocab_file={UNCASED_VOCAB}", "--dupe_factor=10",
       "--num_workers=1"], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  deadline = time.time() + 90
  while not glob.glob(str(tmp_path / ".o.tfrecord.tmp-*")) and time.time() < deadline:
    time.sleep(0.05)
  time.sleep(0.5)
  proc.send_signal(signal.SIGKILL)
  proc.wait()
  left = glob.glob(str(tmp_path / ".o.tfrecord.tmp-*"))
  assert left, "the run never started writing"
  assert not out.exists()
  # The next run of the writer removes what the killed one left, and only that: a temporary
  # file of a live process (a run writing the same output now) and another output's stay.
  live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
  try:
    kept = [tmp_path / f".o.tfrecord.tmp-{live.pid}", tmp_path / f".x.tfrecord.tmp-{proc.pid}",
            tmp_path / ".o.tfrecord.tmp-notapid", tmp_path / ".o.tfrecord.tmp-0"]
    for path in kept:
      path.write_bytes(b"")
    small = tmp_path / "small.txt"
    small.write_text(corpus_text(20_000), encoding="utf-8")
    writer.run(_settings(small, out))
    assert all(p.exists() for p in kept) and not any(os.path.exists(p) for p in left)
    assert sorted(os.listdir(tmp_path)) == sorted(
        ["c.txt", "small.txt", "o.tfrecord"] + [p.name for p in kept])
  finally:
    live.kill()
    live.wait()


def test_signals_remove_partial_shards_and_a_rerun_equals_an_uninterrupted_run(tmp_path):
  """Fault injection: kill the writer at random moments (-9, TERM, INT), then rerun."""
  corpus = tmp_path / "c.txt"
  corpus.write_text(corpus_text() * 10, encoding="utf-8")  # ~3 MB: a few seconds of work
  args = [f"--input_file={corpus}", f"--vocab_file={UNCASED_VOCAB}", "--dupe_factor=3",
          "--num_workers=2", "--num_output_shards=3", "--chunk_size_mb=0.2"]

  def start(out):
    return subprocess.Popen(
        [sys.executable, "-m", "data_prep.create_pretraining_data", f"--output_file={out}"]
        + args, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

  straight = tmp_path / "straight" / "o.tfrecord"
  assert start(straight).wait() == 0
  out = tmp_path / "killed" / "o.tfrecord"
  rng = random.Random(7)
  for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGKILL):
    for attempt in range(4):
      proc = start(out)
      deadline = time.time() + 90
      while not glob.glob(str(out.parent / ".o.tfrecord-*.tmp-*")) and time.time() < deadline:
        time.sleep(0.05)
      # A random moment of the writing; the writing itself takes about a second on an idle
      # machine, so a run that finished first is tried again, with a shorter wait.
      time.sleep(rng.uniform(0.0, 1.0) / 2**attempt)
      if proc.poll() is None:
        break
      assert proc.returncode == 0, proc.communicate()[1][-2000:]
      for done in glob.glob(str(out.parent / "o.tfrecord-*")):
        os.remove(done)
    else:
      pytest.fail("the writer always finished before the signal")
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    if proc.returncode == 0:  # the signal came after the last record (interpreter exit)
      assert "Wrote " in err, err[-2000:]
      for done in glob.glob(str(out.parent / "o.tfrecord-*")):
        os.remove(done)
      continue
    if signum == signal.SIGKILL:
      assert proc.returncode == -signal.SIGKILL
      continue
    # Stopped, not finished: the signal's status, one line, no partial shard left behind.
    assert proc.returncode == 128 + signum, err[-2000:]
    assert "Traceback" not in err, err[-2000:]
    assert f"by signal {signum.name}" in err or "interrupted (SIGINT)" in err, err[-2000:]
    assert not glob.glob(str(out.parent / ".*.tmp-*")), os.listdir(out.parent)
    assert not glob.glob(str(out.parent / "o.tfrecord-*")), "a stopped run left output"
  assert start(out).wait() == 0
  want = sorted(glob.glob(str(straight.parent / "o.tfrecord-*")))
  got = sorted(glob.glob(str(out.parent / "o.tfrecord-*")))
  assert len(want) == 3 and [os.path.basename(p) for p in got] == \
      [os.path.basename(p) for p in want]
  for a, b in zip(want, got):
    assert open(a, "rb").read() == open(b, "rb").read(), b


def test_shards_of_an_earlier_write_with_another_count_are_warned_of_and_kept(tmp_path, caplog):
  from data_prep.pretraining import outputs  # pylint: disable=g-import-not-at-top
  old = tmp_path / "pre.tfrecord-00000-of-00004"
  old.write_bytes(b"")
  base = str(tmp_path / "pre.tfrecord")
  with caplog.at_level("WARNING"):
    assert outputs.output_paths(base, 2) == [f"{base}-00000-of-00002", f"{base}-00001-of-00002"]
  assert "1 shard(s) of an earlier write of" in caplog.text and str(old) in caplog.text
  caplog.clear()
  with caplog.at_level("WARNING"):
    outputs.output_paths(base, 4)  # the same count: its own shards, rewritten
  assert "earlier write" not in caplog.text and old.exists()
