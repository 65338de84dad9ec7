"""One run at a time in an --output_dir (TF-free; local folders), and no empty folder left
by a run that failed before writing anything there (`held`).

Two runs writing one output directory mix their files: the second's labels.txt and run
record beside the first's checkpoints (predictions served under swapped labels), each
resuming the other's steps. A run holds an exclusive lock for its output directory while it
works; a second run there stops with a message. The lock file lives in the system's temporary
folder, keyed by the directory's absolute path, so the user's folder gets no extra file and a
killed run's lock goes with its process (the kernel releases it).

Not for remote paths (gs://: no lock there), nor for multi-worker runs, whose workers share
the directory by design (the chief writes; the others write copies they remove).
"""

import contextlib
import fcntl
import hashlib
import os
import tempfile

_HELD = {}  # absolute path -> open lock file, in this process


@contextlib.contextmanager
def held(output_dir, distribution_strategy=None):
  """The lock of `output_dir` while the body runs; ValueError if another process holds it.
  Reentrant in one process (a run's restarts, a command run again by a test). A local
  `output_dir` the body created and left empty (a run stopped by bad input) is removed."""
  local = bool(output_dir) and "://" not in output_dir
  existed = local and os.path.exists(output_dir)
  try:
    with _locked(output_dir, distribution_strategy):
      yield
  except BaseException:
    if local and not existed and os.path.isdir(output_dir) and not os.listdir(output_dir):
      os.rmdir(output_dir)  # ours, and empty
    raise


@contextlib.contextmanager
def _locked(output_dir, distribution_strategy):
  if (not output_dir or "://" in output_dir
      or distribution_strategy == "multi_worker_mirrored"):
    yield
    return
  key = os.path.abspath(output_dir)
  if key in _HELD:
    yield
    return
  path = os.path.join(tempfile.gettempdir(),
                      "official_bert-" + hashlib.sha1(key.encode()).hexdigest()[:16] + ".lock")
  handle = open(path, "a", encoding="utf-8")  # pylint: disable=consider-using-with
  try:
    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
  except OSError:
    handle.close()
    raise ValueError(f"--output_dir={output_dir} is being written by another run on this "
                     f"machine (it holds {path}): wait for it to end, or choose another "
                     f"--output_dir") from None
  _HELD[key] = handle
  try:
    yield
  finally:
    del _HELD[key]
    fcntl.flock(handle, fcntl.LOCK_UN)
    handle.close()
