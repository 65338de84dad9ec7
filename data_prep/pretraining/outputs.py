"""Where a pretraining-data run's records go and what it reports: the output file names, the
local writer's round-robin shards, its progress lines, and the summary both writers log."""

import os
import re
import time

from absl import logging

from data_prep import tfrecord_io

# A sharded output's file names: OUT-00003-of-00016 (the local writer's and Beam's template).
SHARD_NAME = re.compile(r"^(.*)-(\d{5})-of-(\d{5})$")


def output_paths(output_file, num_output_shards):
  paths = [p.strip() for p in output_file.split(",") if p.strip()]
  if not paths:
    raise ValueError("--output_file is empty")
  if num_output_shards < 1:
    raise ValueError(f"num_output_shards={num_output_shards} must be >= 1")
  base = paths[0]
  if num_output_shards > 1:
    if len(paths) != 1:
      raise ValueError("--num_output_shards needs a single --output_file to number")
    paths = [f"{base}-{i:05d}-of-{num_output_shards:05d}" for i in range(num_output_shards)]
  if len(paths) == 1 or num_output_shards > 1:  # one output, in one file or numbered shards
    _warn_of_other_shards(base, paths)
  tfrecord_io.check_replaceable_records(paths, "--output_file")
  return paths


def _warn_of_other_shards(base, paths):
  """A warning where shards of output `base` with another count than `paths` are there (an
  earlier write's): `--input_file=OUT-*` would read them too (run_pretraining refuses that).
  They are left as they are: the user's to remove."""
  own = {os.path.normpath(p) for p in paths}
  others = [p for p in tfrecord_io.glob(f"{base}-*-of-*")
            if (m := SHARD_NAME.match(p)) and os.path.normpath(m.group(1)) ==
            os.path.normpath(base) and os.path.normpath(p) not in own]
  if others:
    logging.warning("%d shard(s) of an earlier write of %s with another shard count are there "
                    "(e.g. %s): remove them, or a pattern %s-* reads both writes", len(others),
                    base, others[0], base)


class ShardedWriter:
  """Round-robin TFRecord shards (`tfrecord_io.RecordFile`s: written under temporary names,
  after removing what killed writers of the same paths left); `commit` renames them all,
  `abort` deletes them all."""

  def __init__(self, paths, gzip_compress):
    self.paths = paths
    self._files = []
    try:
      for path in paths:
        self._files.append(tfrecord_io.RecordFile(path, gzip_compress))
    except BaseException:
      self.abort()
      raise
    self.written = 0

  def write(self, framed):
    """framed: TFRecord-framed records; record i of the run goes to shard i % num_shards."""
    n = len(self._files)
    for shard, f in enumerate(self._files):
      f.write_framed(b"".join(framed[(shard - self.written) % n::n]))
    self.written += len(framed)

  def commit(self):
    for f in self._files:
      f.commit()

  def abort(self):
    for f in self._files:
      f.abort()


class Progress:
  """Logs documents/s, instances written and ETA at most every `every` seconds."""

  def __init__(self, total_bytes, every=5.0):
    self.total_bytes = max(total_bytes, 1)
    self.every = every
    self.start = self.last = time.time()

  def update(self, docs, done_bytes, written, force=False):
    now = time.time()
    if not force and now - self.last < self.every:
      return
    self.last = now
    elapsed = max(now - self.start, 1e-9)
    frac = min(done_bytes / self.total_bytes, 1.0)
    eta = elapsed * (1 - frac) / frac if frac > 0 else float("nan")
    logging.info("%5.1f%% | %d docs (%.0f docs/s) | %d instances written (%.0f/s) | "
                 "elapsed %.0fs | ETA %.0fs", 100 * frac, docs, docs / elapsed, written,
                 written / elapsed, elapsed, eta)


def summarize(documents, instances, totals, seconds, paths):
  """The run's summary (both writers): logged and returned as a dict."""
  summary = {
      "documents": documents, "instances": instances, "seconds": seconds,
      "instances_per_second": instances / max(seconds, 1e-9), "files": paths,
      "masked_fraction": totals["masked"] / max(totals["tokens"], 1),
      "random_next_fraction": totals["random_next"] / max(instances, 1),
  }
  logging.info("Wrote %d instances from %d documents to %d file(s) in %.1fs (%.0f instances/s); "
               "masked %.2f%% of tokens, %.1f%% random next sentences: %s",
               instances, documents, len(paths), seconds, summary["instances_per_second"],
               100 * summary["masked_fraction"], 100 * summary["random_next_fraction"],
               ", ".join(paths))
  return summary
