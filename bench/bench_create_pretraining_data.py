r"""create_pretraining_data end to end: ours vs the peer, subprocesses on the same data and flags.

  python bench/bench_create_pretraining_data.py [--sizes=2,20] [--repeats=1] [--workers=2]
                                                [--skip_peer] [--corpus=...] [--vocab=...]

For each size (MB) the first N MB of the corpus (cut at a line boundary) go to a temp dir, then
  ours: python -m data_prep.create_pretraining_data <common flags> --num_workers=<workers>
  peer: python -m official.nlp.data.create_pretraining_data <common flags>
run from the repo root. Per run: wall seconds (whole process, interpreter + TF import included),
instances (TFRecord records counted by a pure-Python scan of the length prefixes), instances/s
(over wall), and peak RSS summed over the process tree (the process and all its descendants,
sampled every --sample_ms). "internal s": ours' own 'Wrote N instances ... in X.Xs' (excludes
start-up); for the peer, wall minus a `python -c "import tensorflow"` start-up measured once.
With --repeats > 1 each number is the median over runs (peak RSS: the max).
This process never imports TensorFlow.
"""

import argparse
import datetime
import os
import re
import shlex
import statistics
import struct
import subprocess
import sys
import tempfile
import time

import machine  # bench/machine.py: the script's own folder is on sys.path
import psutil

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_COMMON = ["--do_lower_case=True", "--max_seq_length=128", "--max_predictions_per_seq=20",
           "--masked_lm_prob=0.15", "--dupe_factor=5", "--random_seed=12345",
           "--short_seq_prob=0.1"]


def parse_args():
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--sizes", default="2,20", help="Comma-separated corpus sizes in MB.")
  p.add_argument("--repeats", type=int, default=1, help="Runs per tool and size.")
  p.add_argument("--workers", type=int, default=2, help="Ours' --num_workers.")
  p.add_argument("--skip_peer", action="store_true", help="Run ours only.")
  p.add_argument("--sample_ms", type=float, default=50, help="RSS sampling period.")
  p.add_argument("--python", default=sys.executable, help="Interpreter for the subprocesses.")
  p.add_argument("--corpus",
                 default=os.path.join(_REPO, "../shared/data/corpus/gutenberg_books.txt"))
  p.add_argument("--vocab", default=os.path.join(
      _REPO, "../shared/data/vocab/bert-base-uncased/vocab.txt"))
  p.add_argument("--keep_logs", action="store_true", help="Print each run's log tail.")
  return p.parse_args()


def write_head(src, dst, mb):
  with open(src, "rb") as f:
    data = f.read(int(mb * 1e6))
  if len(data) == int(mb * 1e6) and b"\n" in data:
    data = data[:data.rfind(b"\n") + 1]
  with open(dst, "wb") as f:
    f.write(data)
  return len(data)


def count_records(path):
  """Records in an uncompressed TFRecord file: uint64 length, 4 crc, data, 4 crc."""
  n = 0
  size = os.path.getsize(path)
  with open(path, "rb") as f:
    pos = 0
    while pos < size:
      head = f.read(8)
      if len(head) < 8:
        raise ValueError(f"{path}: truncated record header at byte {pos}")
      (length,) = struct.unpack("<Q", head)
      pos += 8 + 4 + length + 4
      f.seek(pos)
      n += 1
  if pos != size:
    raise ValueError(f"{path}: truncated last record")
  return n


def tree_rss(proc):
  total = 0
  try:
    procs = [proc] + proc.children(recursive=True)
  except psutil.Error:
    return 0
  for p in procs:
    try:
      total += p.memory_info().rss
    except psutil.Error:
      pass
  return total


def run_measured(cmd, log_path, sample_s):
  """(wall s, peak tree RSS bytes, return code); output to log_path."""
  with open(log_path, "wb") as log:
    t0 = time.perf_counter()
    popen = subprocess.Popen(cmd, cwd=_REPO, stdout=log, stderr=subprocess.STDOUT)
    proc = psutil.Process(popen.pid)
    peak = 0
    while popen.poll() is None:
      peak = max(peak, tree_rss(proc))
      time.sleep(sample_s)
    wall = time.perf_counter() - t0
  return wall, peak, popen.returncode


def main():
  args = parse_args()
  sizes = [float(s) for s in args.sizes.split(",") if s.strip()]
  vocab = os.path.normpath(args.vocab)
  py = args.python
  print(f"# bench_create_pretraining_data  {datetime.datetime.now().isoformat(timespec='seconds')}")
  print(f"# machine: nproc={os.cpu_count()} cpu='{machine.cpu_model()}' "
        f"mem={psutil.virtual_memory().total / 2**30:.1f} GiB  python={py}")
  print(f"# corpus {os.path.normpath(args.corpus)}; sizes {sizes} MB; repeats {args.repeats}; "
        f"RSS sampled every {args.sample_ms:g} ms over the whole process tree")

  t0 = time.perf_counter()
  subprocess.run([py, "-c", "import tensorflow"], check=True, cwd=_REPO,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  tf_import = time.perf_counter() - t0
  print(f"# start-up: `python -c \"import tensorflow\"` took {tf_import:.2f} s")

  tools = [("ours", ["-m", "data_prep.create_pretraining_data"], [f"--num_workers={args.workers}"])]
  if not args.skip_peer:
    tools.append(("peer", ["-m", "official.nlp.data.create_pretraining_data"], []))
  results = {}  # (size, tool) -> dict
  shown = set()
  with tempfile.TemporaryDirectory(prefix="bench_cpd_") as tmp:
    for size in sizes:
      corpus = os.path.join(tmp, f"corpus_{size:g}mb.txt")
      n_bytes = write_head(args.corpus, corpus, size)
      for tool, module, extra in tools:
        walls, peaks, counts, internals = [], [], [], []
        for r in range(args.repeats):
          out = os.path.join(tmp, f"{tool}_{size:g}mb_{r}.tfrecord")
          log = out + ".log"
          cmd = [py, *module, f"--input_file={corpus}", f"--output_file={out}",
                 f"--vocab_file={vocab}", *_COMMON, *extra]
          if tool not in shown:
            shown.add(tool)
            print(f"# {tool} command: (cwd {_REPO})\n#   " + " ".join(shlex.quote(c) for c in cmd))
          wall, peak, rc = run_measured(cmd, log, args.sample_ms / 1000)
          with open(log, encoding="utf-8", errors="replace") as f:
            text = f.read()
          if rc != 0 or args.keep_logs:
            print(f"--- {tool} {size:g} MB log tail (rc={rc}) ---\n" + text[-3000:])
          if rc != 0:
            sys.exit(f"{tool} failed with exit status {rc}")
          count = count_records(out)
          m = re.search(r"Wrote (\d+) instances .*? in ([\d.]+)s", text)
          if tool == "ours":
            if not m:
              sys.exit("ours: no 'Wrote N instances ... in X.Xs' line in the log")
            if int(m.group(1)) != count:
              print(f"WARNING: ours logged {m.group(1)} instances, file holds {count}")
            internals.append(float(m.group(2)))
          else:
            internals.append(wall - tf_import)
          walls.append(wall)
          peaks.append(peak)
          counts.append(count)
          os.remove(out)
        results[(size, tool)] = dict(
            mb=n_bytes / 1e6, wall=statistics.median(walls), peak=max(peaks),
            instances=counts[0], internal=statistics.median(internals),
            walls=walls, consistent=len(set(counts)) == 1)

  for size in sizes:
    print()
    rows = [(t, results[(size, t)]) for t, _, _ in tools]
    print(f"== {rows[0][1]['mb']:.2f} MB of text (first {size:g} MB, cut at a line) ==")
    print(f"{'tool':6s} {'wall s':>8s} {'instances':>10s} {'inst/s':>8s} {'internal s':>11s} "
          f"{'inst/s int.':>11s} {'peak RSS MB (tree)':>19s}")
    for tool, r in rows:
      print(f"{tool:6s} {r['wall']:8.2f} {r['instances']:10d} {r['instances'] / r['wall']:8.0f} "
            f"{r['internal']:11.2f} {r['instances'] / max(r['internal'], 1e-9):11.0f} "
            f"{r['peak'] / 2**20:19.0f}"
            + ("" if r["consistent"] else "  (instance count varied between runs!)"))
    if len(rows) == 2:
      o, p = rows[0][1], rows[1][1]
      wall = (o['instances'] / o['wall']) / (p['instances'] / p['wall'])
      internal = (o['instances'] / o['internal']) / (p['instances'] / p['internal'])
      print(f"ours/peer: throughput (wall) {wall:.2f}x, throughput (internal) {internal:.2f}x, "
            f"wall {o['wall'] / p['wall']:.2f}x, peak RSS {o['peak'] / p['peak']:.2f}x, "
            f"instances {o['instances'] / p['instances']:.3f}x")
  if len(sizes) > 1:
    lo, hi = min(sizes), max(sizes)
    for tool, _, _ in tools:
      a, b = results[(lo, tool)], results[(hi, tool)]
      print(f"{tool}: peak RSS({hi:g} MB) / RSS({lo:g} MB) = {b['peak'] / a['peak']:.2f}")
  print("\n(internal s: ours = its logged processing time; "
        f"peer = wall - {tf_import:.2f} s TF import. "
        f"ours --num_workers={args.workers}; peer is single-process.)")


if __name__ == "__main__":
  main()
