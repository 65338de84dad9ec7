"""Where a pretraining-data run's records go and what it reports: the output file names, the
local writer's round-robin shards (and the temporary files killed runs left of them), its
progress lines, and the summary both writers log."""

import os
import time

from absl import logging

from data_prep import tfrecord_io


def output_paths(output_file, num_output_shards):
  paths = [p.strip() for p in output_file.split(",") if p.strip()]
  if not paths:
    raise ValueError("--output_file is empty")
  if num_output_shards < 1:
    raise ValueError(f"num_output_shards={num_output_shards} must be >= 1")
  if num_output_shards > 1:
    if len(paths) != 1:
      raise ValueError("--num_output_shards needs a single --output_file to number")
    paths = [f"{paths[0]}-{i:05d}-of-{num_output_shards:05d}" for i in range(num_output_shards)]
  return paths


def _process_alive(pid):
  """Whether process `pid` exists here; True for what is no process id (keep the file)."""
  if pid <= 0:  # 0 and negative ids name process groups
    return True
  try:
    os.kill(pid, 0)  # signal 0: only asks whether the process exists
  except ProcessLookupError:
    return False
  except PermissionError:  # another user's process
    return True
  except OverflowError:  # too large for a pid_t: not a writer's name
    return True
  return True


def remove_stale_temporary_files(paths):
  """Deletes the temporary files (`tfrecord_io.temporary_path`: `.NAME.tmp-PID`) of `paths`
  that earlier writers left when they died without cleaning up (kill -9, a crash, a reboot).

  Returns the paths removed. Only local paths, on POSIX: the name holds the writer's process
  id, which means something only on the host that wrote it. A file whose process is alive
  (a zombie counts) is kept: a run writing the same output now, or an unrelated process that
  reuses the id. The one case it gets wrong: a disk shared by several hosts, with a writer of
  the same output running on another host now; two runs writing one output at once clash
  anyway (the last rename wins).
  """
  if os.name != "posix":  # os.kill(pid, 0) is no probe elsewhere (on Windows, CTRL_C_EVENT)
    return []
  own = str(os.getpid())
  removed = []
  for path in paths:
    ours = tfrecord_io.temporary_path(path)
    if "://" in path or not ours.endswith(own):
      continue
    directory, prefix = os.path.split(ours[:-len(own)])  # ".NAME.tmp-"
    fs = tfrecord_io.gfile()
    if not fs.isdir(directory or "."):
      continue
    for name in fs.listdir(directory or "."):
      pid = name[len(prefix):]
      if not (name.startswith(prefix) and pid.isascii() and pid.isdigit() and pid != own):
        continue
      if not _process_alive(int(pid)):
        stale = os.path.join(directory, name)
        logging.info("Removing %s, left by a writer (process %s) that is gone", stale, pid)
        try:
          fs.remove(stale)
        except Exception:  # pylint: disable=broad-except  (another rerun removed it first)
          if fs.exists(stale):
            raise
          continue
        removed.append(stale)
  return removed


class ShardedWriter:
  """Round-robin TFRecord shards (`tfrecord_io.RecordFile`s: written under temporary names);
  `commit` renames them all, `abort` deletes them all. Opening them first removes what killed
  writers of the same paths left (`remove_stale_temporary_files`)."""

  def __init__(self, paths, gzip_compress):
    self.paths = paths
    self._files = []
    remove_stale_temporary_files(paths)
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
