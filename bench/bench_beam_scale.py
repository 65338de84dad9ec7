r"""create_pretraining_data at scale: the local writer from 100 MB to 1 GB, and on Apache Beam.

  python bench/bench_beam_scale.py [--sizes_mb=100,1024] [--beam_sizes_mb=100,1024]
                                   [--workers=2] [--work_dir=/tmp/bench_beam_scale]

The corpus is synthesized from the books corpus (../shared/data/corpus/gutenberg_books.txt):
its sentences re-cut into documents of 5 to 60 sentences, copy after copy, each copy with its
own seeded rotation, document lengths and 10% of the sentences left out, so documents differ
between copies; the largest size is written once and the smaller ones are its prefixes (cut at
a document boundary). For each size:
  local: python -m data_prep.create_pretraining_data <flags> --num_workers=N
  beam:  the same flags + --runner=DirectRunner --direct_running_mode=multi_processing
         --direct_num_workers=N
Per run: wall seconds (interpreter start-up included), MB/s of text, instances (from the
writer's summary line) and the peak RSS summed over the whole process tree (the process and
every descendant: the local writer's worker pool, Beam's SDK workers), sampled every 0.5 s.
Where both ran on a size, the instance counts must agree; with --check_records the two
outputs' multisets of serialized records are compared (reads every record: slow at 1 GB).
Flags: seq 128, 20 predictions, masked_lm_prob 0.15, dupe_factor 1 (one pass: the time
scales with it), 4 output shards, uncompressed. This process never imports TensorFlow.
"""

import argparse
import collections
import datetime
import glob
import hashlib
import os
import random
import re
import shlex
import struct
import sys

import bench_create_pretraining_data as common  # beside this script: run_measured, tree_rss
import machine

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_DATA = os.path.join(os.path.dirname(_REPO), "shared", "data")
_FLAGS = ["--do_lower_case=True", "--max_seq_length=128", "--max_predictions_per_seq=20",
          "--masked_lm_prob=0.15", "--dupe_factor=1", "--random_seed=12345",
          "--short_seq_prob=0.1", "--num_output_shards=4"]


def parse_args():
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--sizes_mb", default="100,1024", help="Local writer sizes (MB, 2^20 bytes).")
  p.add_argument("--beam_sizes_mb", default="100,1024", help="Beam DirectRunner sizes.")
  p.add_argument("--workers", type=int, default=2)
  p.add_argument("--work_dir", default="/tmp/bench_beam_scale")
  p.add_argument("--corpus", default=os.path.join(_DATA, "corpus", "gutenberg_books.txt"))
  p.add_argument("--vocab", default=os.path.join(_DATA, "vocab", "bert-base-uncased",
                                                 "vocab.txt"))
  p.add_argument("--check_records", action="store_true",
                 help="Also compare the record multisets of local and Beam outputs.")
  p.add_argument("--keep_outputs", action="store_true")
  return p.parse_args()


def synthesize(corpus, path, target_bytes, seed=0):
  """Writes >= target_bytes of re-cut, perturbed copies of `corpus` (module doc); returns the
  byte offsets where each document ends (to cut smaller sizes at a document boundary)."""
  with open(corpus, "rb") as f:
    lines = [line for line in f.read().split(b"\n") if line.strip()]
  ends = []
  written = 0
  with open(path + ".tmp", "wb") as out:
    copy = 0
    while written < target_bytes:
      rng = random.Random(seed * 1000 + copy)
      start = rng.randrange(len(lines))
      order = lines[start:] + lines[:start]
      i = 0
      while i < len(order) and written < target_bytes:
        n = rng.randint(5, 60)
        doc = [line for line in order[i:i + n] if rng.random() >= 0.1]
        i += n
        if not doc:
          continue
        block = b"\n".join(doc) + b"\n\n"
        out.write(block)
        written += len(block)
        ends.append(written)
      copy += 1
  os.replace(path + ".tmp", path)
  return ends


def write_prefix(src, dst, num_bytes):
  with open(src, "rb") as f, open(dst, "wb") as out:
    remaining = num_bytes
    while remaining > 0:
      block = f.read(min(remaining, 64 << 20))
      if not block:
        break
      out.write(block)
      remaining -= len(block)


def record_digests(pattern):
  """Multiset (Counter) of the sha1 of every record in the uncompressed TFRecord files."""
  digests = collections.Counter()
  for path in sorted(glob.glob(pattern)):
    with open(path, "rb") as f:
      while True:
        head = f.read(12)
        if not head:
          break
        (length,) = struct.unpack("<Q", head[:8])
        digests[hashlib.sha1(f.read(length)).digest()] += 1
        f.read(4)
  return digests


def instances_from_log(log_path):
  with open(log_path, encoding="utf-8", errors="replace") as f:
    found = re.findall(r"Wrote (\d+) instances", f.read())
  return int(found[-1]) if found else None


def main():
  args = parse_args()
  os.makedirs(args.work_dir, exist_ok=True)
  local_sizes = [float(s) for s in args.sizes_mb.split(",") if s]
  beam_sizes = [float(s) for s in args.beam_sizes_mb.split(",") if s]
  largest = max(local_sizes + beam_sizes)
  full = os.path.join(args.work_dir, f"corpus_{largest:g}mb.txt")
  ends = None
  if not os.path.exists(full) or os.path.getsize(full) < largest * 2**20:
    print(f"synthesizing {largest:g} MB from {args.corpus} ...", flush=True)
    ends = synthesize(args.corpus, full, int(largest * 2**20))
  print(f"# {datetime.datetime.now():%Y-%m-%d %H:%M}  nproc={os.cpu_count()} "
        f"cpu='{machine.cpu_model()}' load average {os.getloadavg()[0]:.1f}", flush=True)
  rows = []
  for mb in sorted(set(local_sizes + beam_sizes)):
    corpus = full
    if mb != largest:
      corpus = os.path.join(args.work_dir, f"corpus_{mb:g}mb.txt")
      if not os.path.exists(corpus):
        if ends is None:
          ends = synthesize(args.corpus, full, int(largest * 2**20))
        cut = next(e for e in ends if e >= mb * 2**20)
        write_prefix(full, corpus, cut)
    size = os.path.getsize(corpus)
    outputs = {}
    for tool in ("local", "beam"):
      if mb not in (local_sizes if tool == "local" else beam_sizes):
        continue
      out = os.path.join(args.work_dir, f"out_{tool}_{mb:g}mb", "pretrain.tfrecord")
      for old in glob.glob(out + "*"):
        os.remove(old)
      os.makedirs(os.path.dirname(out), exist_ok=True)
      cmd = [sys.executable, "-m", "data_prep.create_pretraining_data",
             f"--input_file={corpus}", f"--output_file={out}", f"--vocab_file={args.vocab}"]
      cmd += _FLAGS
      if tool == "local":
        cmd.append(f"--num_workers={args.workers}")
      else:
        cmd += ["--runner=DirectRunner", "--direct_running_mode=multi_processing",
                f"--direct_num_workers={args.workers}"]
      log = os.path.join(args.work_dir, f"log_{tool}_{mb:g}mb.txt")
      print("$ " + " ".join(shlex.quote(c) for c in cmd), flush=True)
      wall, peak, rc = common.run_measured(cmd, log, 0.5)
      if rc != 0:
        with open(log, encoding="utf-8", errors="replace") as f:
          print(f.read()[-3000:])
        raise SystemExit(f"{tool} failed on {mb:g} MB (exit {rc}); log: {log}")
      outputs[tool] = out
      row = {"mb": size / 2**20, "tool": tool, "wall": wall, "mb_s": size / 2**20 / wall,
             "instances": instances_from_log(log), "peak_mb": peak / 2**20}
      rows.append(row)
      print(f"  {tool:5s} {row['mb']:8.1f} MB  {wall:8.1f} s  {row['mb_s']:6.2f} MB/s  "
            f"{row['instances']} instances  peak RSS (tree) {row['peak_mb']:.0f} MB", flush=True)
    if len(outputs) == 2:
      counts = [r["instances"] for r in rows[-2:]]
      print(f"  instances local {counts[0]} / beam {counts[1]}: "
            f"{'equal' if counts[0] == counts[1] else 'DIFFERENT'}", flush=True)
      if args.check_records:
        same = record_digests(outputs["local"] + "*") == record_digests(outputs["beam"] + "*")
        print(f"  record multisets: {'equal' if same else 'DIFFERENT'}", flush=True)
    if not args.keep_outputs:
      for out in outputs.values():
        for old in glob.glob(out + "*"):
          os.remove(old)

  print("\n| MB | tool | wall s | MB/s | instances | peak RSS MB (tree) |")
  print("|---|---|---|---|---|---|")
  for r in rows:
    print(f"| {r['mb']:.0f} | {r['tool']} | {r['wall']:.1f} | {r['mb_s']:.2f} | "
          f"{r['instances']:,} | {r['peak_mb']:,.0f} |")
  by = {(r["tool"], round(r["mb"])): r for r in rows}
  local = sorted((r for r in rows if r["tool"] == "local"), key=lambda r: r["mb"])
  if len(local) >= 2:
    a, b = local[0], local[-1]
    print(f"\nlocal {a['mb']:.0f} -> {b['mb']:.0f} MB: size x{b['mb'] / a['mb']:.2f}, wall "
          f"x{b['wall'] / a['wall']:.2f}, peak RSS x{b['peak_mb'] / a['peak_mb']:.2f}")
  for (tool, mb), r in sorted(by.items()):
    if tool == "beam" and ("local", mb) in by:
      print(f"beam / local at {mb} MB: wall x{r['wall'] / by[('local', mb)]['wall']:.2f}")


if __name__ == "__main__":
  main()
