r"""Pretraining input pipeline throughput: ours vs Model Garden's BertPretrainDataLoader.

  python bench/bench_input_pipeline.py [--seq=128] [--preds=20] [--batch=256]
      [--examples=65536] [--shards=8] [--batches=200] [--repeats=3] [--gzip]

Writes --examples synthetic pretraining records (the original writer's schema, via our
`data_prep` encoder; random but well-formed rows from `synthetic_pretraining_dataset`) into
--shards files, then reads them for training (shuffle, repeat, batch, parse, int32) with
  ours  official_bert.training.input_pipeline.pretraining_dataset(is_training=True): batches the
        serialized records and parses a whole batch in one op;
  peer  official.nlp.data.pretrain_dataloader.BertPretrainDataLoader(is_training=True):
        parses record by record, then batches.
examples/s = batch * --batches / wall seconds to pull them (after 20 warm-up batches that fill
the shuffle buffer and prefetch), median of --repeats, sides alternating. This is the rate a
training step can consume at most: on GPU it must stay above the step's seq/s (BERT-base on an
H200: a few thousand seq/s at seq 128).
"""

import argparse
import datetime
import os
import platform
import statistics
import sys
import tempfile
import time

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, _REPO)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# pylint: disable=wrong-import-position
import numpy as np  # noqa: E402
from official.nlp.data import pretrain_dataloader  # noqa: E402
import tensorflow as tf  # noqa: E402

from data_prep import example_encoder  # noqa: E402
from data_prep import schema  # noqa: E402
from data_prep import tfrecord_io  # noqa: E402
from official_bert.training import input_pipeline  # noqa: E402

WARMUP_BATCHES = 20


def write_records(directory, args):
  """--shards files of synthetic records with the original feature names; returns a glob."""
  encoder = example_encoder.ExampleEncoder(schema.pretraining_features(args.seq, args.preds))
  stream = input_pipeline.synthetic_pretraining_dataset(args.seq, args.preds, 30522, 1024, seed=0)
  names = {ours: original for original, ours in schema.V2_NAMES.items()}
  per_shard = -(-args.examples // args.shards)
  iterator = iter(stream)
  for shard in range(args.shards):
    path = os.path.join(directory, f"pretrain-{shard:05d}.tfrecord")
    out = tfrecord_io.RecordFile(path, gzip_compress=args.gzip)
    written = 0
    while written < per_shard:
      batch = {names.get(k, k): v.numpy() for k, v in next(iterator).items()}
      batch["next_sentence_labels"] = batch["next_sentence_labels"].reshape(-1, 1)
      take = min(per_shard - written, len(batch["input_ids"]))
      rows = encoder.encode({k: v[:take] for k, v in batch.items()})
      out.write_framed(b"".join(tfrecord_io.frame(r) for r in rows))
      written += take
    out.commit()
  return os.path.join(directory, "pretrain-*.tfrecord")


def ours(pattern, args):
  return input_pipeline.pretraining_dataset(pattern,
                                            args.seq,
                                            args.preds,
                                            args.batch,
                                            is_training=True,
                                            seed=1)


def peer(pattern, args):
  config = pretrain_dataloader.BertPretrainDataConfig(input_path=pattern,
                                                      seq_length=args.seq,
                                                      max_predictions_per_seq=args.preds,
                                                      global_batch_size=args.batch,
                                                      is_training=True,
                                                      use_next_sentence_label=True)
  return pretrain_dataloader.BertPretrainDataLoader(config).load()


def timed(iterator, batches, batch_size):
  start = time.perf_counter()
  for _ in range(batches):
    next(iterator)
  return batches * batch_size / (time.perf_counter() - start)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  for flag, default in (("seq", 128), ("preds", 20), ("batch", 256), ("examples", 65536),
                        ("shards", 8), ("batches", 200), ("repeats", 3)):
    parser.add_argument("--" + flag, type=int, default=default)
  parser.add_argument("--gzip",
                      action="store_true",
                      help="GZIP records: ours only (the peer's loader reads no compression)")
  args = parser.parse_args()
  print(
      f"command : python {' '.join(sys.argv)}\n"
      f"date    : {datetime.datetime.now().isoformat(timespec='seconds')}\n"
      f"machine : nproc={len(os.sched_getaffinity(0))}, {platform.platform()}, loadavg "
      f"{' '.join(open('/proc/loadavg').read().split()[:3])}; tensorflow {tf.__version__}",
      flush=True)
  with tempfile.TemporaryDirectory() as directory:
    start = time.perf_counter()
    pattern = write_records(directory, args)
    size = sum(os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory))
    print(
        f"wrote {args.examples} records (seq {args.seq}, {args.preds} predictions"
        f"{', gzip' if args.gzip else ''}) in {args.shards} shards, {size / 2**20:.0f} MiB, "
        f"{time.perf_counter() - start:.1f} s",
        flush=True)
    iterators = {"ours": iter(ours(pattern, args))}
    if not args.gzip:
      iterators["peer"] = iter(peer(pattern, args))
    first = {side: next(it) for side, it in iterators.items()}
    for name in ("input_word_ids", "input_mask", "input_type_ids", "masked_lm_positions",
                 "masked_lm_ids", "masked_lm_weights", "next_sentence_labels"):
      a = first["ours"][name]
      assert a.shape[0] == args.batch, (name, a.shape)
      if "peer" in first:  # the same features, dtypes and sizes on both sides
        b = first["peer"][name]
        assert a.dtype == b.dtype and np.prod(a.shape) == np.prod(b.shape), (name, a, b)
    for it in iterators.values():
      timed(it, WARMUP_BATCHES, args.batch)
    rates = {side: [] for side in iterators}
    for _ in range(args.repeats):
      for side, it in iterators.items():
        rates[side].append(timed(it, args.batches, args.batch))
  median = {side: statistics.median(r) for side, r in rates.items()}
  for side in rates:
    print(f"{side}: {median[side]:10,.0f} examples/s  (runs: "
          f"{', '.join(f'{r:,.0f}' for r in rates[side])})")
  if "peer" in median:
    print(f"ours/peer: {median['ours'] / median['peer']:.2f}x")


if __name__ == "__main__":
  main()
