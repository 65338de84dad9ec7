r"""SQuAD features on the whole dev-v1.1 set: ours vs tf-models-official's squad_lib, one run.

  python bench/bench_squad_features.py [--input_file=...] [--vocab=...] [--repeats=3]
                                       [--workers=1,2] [--skip_peer]

Both make PREDICTION features (what dev files are for; the peer's training mode refuses dev
questions with several answers), max_seq_length 384, doc_stride 128, max_query_length 64,
uncased vocab. Timed from the JSON file to features, tokenizer construction included,
TensorFlow import excluded (both import it):
  peer  squad_lib.read_squad_examples + FullTokenizer + convert_examples_to_features,
        features kept in memory (its output_fn), TPU padding windows not counted;
  ours  data_prep.squad.writing.run: TFRecord + FILE.meta.jsonl written to disk,
        for each --workers; median of --repeats. Also ours in training mode (first answer).
Parity (the full-dev check the tests do on a slice): the same number of windows, identical
unique_ids, input_ids, input_mask, segment_ids, tokens, token_to_orig_map and
token_is_max_context.
"""

import argparse
import datetime
import os
import statistics
import sys
import tempfile
import time

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, _REPO)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

_DATA = os.path.join(os.path.dirname(_REPO), "shared", "data")


def parse_args():
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--input_file", default=os.path.join(_DATA, "squad", "dev-v1.1.json"))
  p.add_argument("--vocab", default=os.path.join(_DATA, "vocab", "bert-base-uncased", "vocab.txt"))
  p.add_argument("--repeats", type=int, default=3)
  p.add_argument("--workers", default="1,2", help="comma-separated --num_workers to time")
  p.add_argument("--skip_peer", action="store_true")
  return p.parse_args()


def run_peer(input_file, vocab):
  from absl import logging  # pylint: disable=g-import-not-at-top
  from official.nlp.data import squad_lib  # pylint: disable=g-import-not-at-top
  from official.nlp.tools import tokenization  # pylint: disable=g-import-not-at-top
  logging.set_verbosity(logging.WARNING)  # it logs its first 20 windows at INFO
  features = []
  t0 = time.perf_counter()
  examples = squad_lib.read_squad_examples(input_file, False, False)
  tokenizer = tokenization.FullTokenizer(vocab, do_lower_case=True)
  squad_lib.convert_examples_to_features(examples,
                                         tokenizer,
                                         384,
                                         128,
                                         64,
                                         False,
                                         lambda f, is_padding: None
                                         if is_padding else features.append(f),
                                         batch_size=8)
  return time.perf_counter() - t0, features


def run_ours(input_file, vocab, output_file, workers, is_training):
  from data_prep.squad import writing as squad_writing  # pylint: disable=g-import-not-at-top
  t0 = time.perf_counter()
  summary = squad_writing.run(
      squad_writing.Settings(input_file=input_file,
                             output_file=output_file,
                             vocab_file=vocab,
                             is_training=is_training,
                             num_workers=workers))
  return time.perf_counter() - t0, summary


def parity(peer, output_file):
  """Mismatch messages (empty when ours equals the peer window for window)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  from data_prep import schema  # pylint: disable=g-import-not-at-top
  from data_prep.squad import records as squad_schema  # pylint: disable=g-import-not-at-top
  meta = squad_schema.read_metadata(squad_schema.metadata_path(output_file))
  spec = schema.tf_feature_spec(schema.squad_features(384, False))
  records = tf.data.TFRecordDataset(output_file).batch(4096).map(
      lambda s: tf.io.parse_example(s, spec))
  cols = {}
  for batch in records:
    for k, v in batch.items():
      cols.setdefault(k, []).append(v.numpy())
  cols = {k: np.concatenate(v) for k, v in cols.items()}
  problems = []
  if len(peer) != len(meta.features) or len(peer) != len(cols["unique_ids"]):
    return [
        f"window count: peer {len(peer)}, ours {len(cols['unique_ids'])} records / "
        f"{len(meta.features)} metadata"
    ]
  for i, (p, m) in enumerate(zip(peer, meta.features)):
    for name in ("input_ids", "input_mask", "segment_ids"):
      if list(cols[name][i]) != list(getattr(p, name)):
        problems.append(f"window {p.unique_id}: {name} differs")
    if cols["unique_ids"][i][0] != p.unique_id or m.unique_id != p.unique_id:
      problems.append(f"window {i}: unique_id {m.unique_id} vs {p.unique_id}")
    for name in ("tokens", "token_to_orig_map", "token_is_max_context", "example_index",
                 "doc_span_index"):
      if getattr(m, name) != getattr(p, name):
        problems.append(f"window {p.unique_id}: {name} differs")
  return problems


def main():
  args = parse_args()
  import tensorflow as tf  # noqa: F401  # pylint: disable=g-import-not-at-top,unused-import
  print(f"# bench_squad_features  {datetime.datetime.now().isoformat(timespec='seconds')}")
  print(f"# {args.input_file}; nproc={os.cpu_count()} (load average "
        f"{os.getloadavg()[0]:.1f} at start: the cores may be shared)")
  rows = []
  with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "eval.tf_record")
    peer_seconds, peer = (None, None) if args.skip_peer else run_peer(args.input_file, args.vocab)
    if peer is not None:
      rows.append(("squad_lib (peer)", "predict", 1, len(peer), peer_seconds))
    for workers in [int(w) for w in args.workers.split(",") if w.strip()]:
      for is_training in (False, True):
        times, summary = [], None
        for _ in range(args.repeats):
          seconds, summary = run_ours(args.input_file, args.vocab, out, workers, is_training)
          times.append(seconds)
        rows.append(
            ("ours", "train" if is_training else "predict", workers, summary["num_features"],
             statistics.median(times)))
    problems = None
    if peer is not None:
      run_ours(args.input_file, args.vocab, out, 1, False)
      problems = parity(peer, out)
  print()
  print("| implementation | features | workers | windows | seconds | windows/s | vs peer |")
  print("|---|---|---|---|---|---|---|")
  for name, mode, workers, n, seconds in rows:
    ratio = f"{peer_seconds / seconds:.1f}x" if peer_seconds else "-"
    print(f"| {name} | {mode} | {workers} | {n} | {seconds:.2f} | {n / seconds:.0f} | {ratio} |")
  if problems is not None:
    print()
    print(f"parity with squad_lib on {len(peer)} windows: " +
          ("identical" if not problems else f"{len(problems)} mismatch(es): {problems[:5]}"))
    if problems:
      sys.exit(1)


if __name__ == "__main__":
  main()
