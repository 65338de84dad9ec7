"""TFRecord framing and the file mechanism of data_prep: reads through gfile, atomic writes.

A TFRecord file is a sequence of
  uint64 length (little endian) | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)
with `masked_crc = ((crc >> 15) | (crc << 17)) + 0xa282ead8` (mod 2**32), as TensorFlow
writes them. GZIP files are the same bytes in one gzip stream (header mtime 0, so the bytes
are deterministic).

Every user file data_prep reads or writes goes through `tf.io.gfile` (so gs:// works), via
`open_file` and `AtomicFile`; TensorFlow is imported only there, when a file is opened.
Outputs are written under a temporary name and renamed when complete, so an interrupted run
never leaves a complete-looking file. Examples are serialized by `example_encoder`.
"""

import errno
import glob as _glob
import gzip
import io
import os
import struct

from absl import logging
import google_crc32c

from data_prep import example_encoder
from data_prep import schema

_MASK_DELTA = 0xA282EAD8


def gfile():
  """`tf.io.gfile`, imported on first use."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top  (workers never open files)
  return tf.io.gfile


def masked_crc32c(data):
  crc = google_crc32c.value(data)
  return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def looks_like_records(path):
  """Whether the file at `path` may be TFRecords a writer wrote (empty, gzip, or its first
  record's length framed with the length's CRC): what a rerun may replace. A text or any other
  file of the user's is not."""
  with gfile().GFile(path, "rb") as f:
    head = f.read(12)
  if not head or head[:2] == b"\x1f\x8b":
    return True
  return len(head) == 12 and struct.unpack("<I", head[8:])[0] == masked_crc32c(head[:8])


def not_records(paths):
  """The `paths` that hold a file that is not TFRecords (`looks_like_records`): a user's,
  which a rerun must not replace as it replaces its own records."""
  return [path for path in paths if is_file(path) and not looks_like_records(path)]


def check_replaceable_records(paths, flag):
  """ValueError, before any work, where one of `paths` (outputs of `flag`) holds a file that
  is not TFRecords (`not_records`)."""
  theirs = not_records(paths)
  if theirs:
    raise ValueError(f"{flag}: {theirs[0]} holds a file that is not TFRecords (not a writer's "
                     f"output): not replaced. Choose another {flag}, or move it")


def frame(record):
  """One serialized example -> its TFRecord bytes."""
  length = struct.pack("<Q", len(record))
  return b"".join((length, struct.pack("<I", masked_crc32c(length)), record,
                   struct.pack("<I", masked_crc32c(record))))


class _GFileRaw(io.RawIOBase):
  """A GFile as a raw stream, so `io.BufferedReader` gives it open()'s fast line iteration
  (GFile's own readline is a TensorFlow call per line, ~30x slower)."""

  def __init__(self, f):
    super().__init__()
    self._f = f

  def readable(self):
    return True

  def seekable(self):
    return True

  def readinto(self, b):
    data = self._f.read(len(b))
    b[:len(data)] = data
    return len(data)

  def seek(self, offset, whence=io.SEEK_SET):
    self._f.seek(offset, whence)
    return self._f.tell()

  def tell(self):
    return self._f.tell()

  def close(self):
    if not self.closed:
      self._f.close()
    super().close()


def open_file(path, mode="rb", encoding="utf-8", newline=None):
  """Opens a file for reading ("rb" or "r") through tf.io.gfile, buffered like `open()`.

  Missing files raise FileNotFoundError and directories IsADirectoryError, as `open()`.
  """
  if mode not in ("r", "rb"):
    raise ValueError(f"open_file reads only (mode {mode!r}); write with AtomicFile")
  fs = gfile()
  if not fs.exists(path):
    raise FileNotFoundError(errno.ENOENT, "No such file or directory", path)
  if fs.isdir(path):
    raise IsADirectoryError(errno.EISDIR, "Is a directory", path)
  binary = io.BufferedReader(_GFileRaw(fs.GFile(path, "rb")), 1 << 20)
  if mode == "rb":
    return binary
  return io.TextIOWrapper(binary, encoding=encoding, newline=newline)


def read_text(path):
  """The whole of a UTF-8 text file; bad bytes are a ValueError naming file, line and column
  (Python's own message names neither)."""
  with open_file(path, "rb") as f:
    data = f.read()
  try:
    return data.decode("utf-8")
  except UnicodeDecodeError as e:
    line = data.count(b"\n", 0, e.start) + 1
    column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
    raise ValueError(f"{path}:{line}:{column}: not valid UTF-8 (byte "
                     f"0x{data[e.start]:02x}); convert the file to UTF-8") from None


def count_records(path):
  """Records in a TFRecord file (uncompressed or GZIP), or None if it is truncated: the
  framing's lengths are walked, the payloads skipped (a cheap check of a cached file)."""
  compressed = schema.compression_of(path) == "GZIP"
  with open_file(path, "rb") as raw:
    f = gzip.GzipFile(fileobj=raw, mode="rb") if compressed else raw
    count = 0
    try:
      while True:
        header = f.read(12)
        if not header:
          return count
        if len(header) < 12:
          return None
        length = struct.unpack("<Q", header[:8])[0]
        body = f.read(length + 4)
        if len(body) < length + 4:
          return None
        count += 1
    except (EOFError, OSError):  # a truncated gzip stream
      return None


def glob(pattern):
  """Sorted matches of a pattern on any tf.io.gfile filesystem.

  Like `glob.glob`, a wildcard does not match a leading "." of a file name (gfile's does),
  so `out/*` does not pick up hidden files such as our own temporary ones.
  """
  hidden_ok = os.path.basename(pattern).startswith(".")
  return sorted(m for m in gfile().glob(pattern)
                if hidden_ok or not os.path.basename(m).startswith("."))


def expand_patterns(patterns, error=ValueError):
  """Comma-separated paths/globs -> files: each pattern's matches sorted (`glob`: hidden
  files only when asked for; a pattern that matches nothing but names a file, that file),
  directories left out, de-duplicated in order. A pattern that
  matches no file, or no pattern at all, raises `error` naming it."""
  files = []
  for pattern in [p.strip() for p in (patterns or "").split(",") if p.strip()]:
    matches = glob(pattern) if _glob.has_magic(pattern) else [pattern]
    matches = [m for m in matches if is_file(m)] or (
        [pattern] if is_file(pattern) else [])  # "data[1].txt": a name, as a glob none
    if not matches:
      raise error(f"input file not found: {pattern!r} matches no file")
    files.extend(m for m in matches if m not in files)
  if not files:
    raise error(f"no input files given ({patterns!r})")
  return files


def is_file(path):
  """`os.path.isfile` for any tf.io.gfile path."""
  fs = gfile()
  return fs.exists(path) and not fs.isdir(path)


def absolute(path):
  """`os.path.abspath` for local paths; URLs (gs://...) are already absolute."""
  return path if "://" in path else os.path.abspath(path)


def temporary_path(path):
  """Where `path` is written until complete: a hidden name next to it."""
  head, tail = os.path.split(path)
  return os.path.join(head, f".{tail}.tmp-{os.getpid()}")


def _process_alive(pid):
  """Whether process `pid` exists here; True for what is no process id (keep the file)."""
  if pid <= 0:  # 0 and negative ids name process groups
    return True
  try:
    os.kill(pid, 0)  # signal 0: only asks whether the process exists
  except ProcessLookupError:
    return False
  except (PermissionError, OverflowError):  # another user's; too large for a pid_t
    return True
  return True


def remove_stale_temporaries(paths):
  """Deletes the temporary files or folders (`temporary_path`: `.NAME.tmp-PID`) of `paths`
  that earlier writers left when they died without cleaning up (kill -9, a crash, a reboot);
  returns those removed. Every `AtomicFile` does this first.

  Only local paths, on POSIX: the name holds the writer's process id, which means something
  only on the host that wrote it. One whose process is alive (a zombie counts) is kept: a run
  writing the same output now, or an unrelated process that reuses the id. The one case it
  gets wrong: a disk shared by several hosts, with a writer of the same output running on
  another host now; two runs writing one output at once clash anyway (the last rename wins).
  """
  if os.name != "posix":  # os.kill(pid, 0) is no probe elsewhere (on Windows, CTRL_C_EVENT)
    return []
  own, fs, removed = str(os.getpid()), gfile(), []
  for path in paths:
    ours = temporary_path(path)
    if "://" in path or not ours.endswith(own):
      continue
    directory, prefix = os.path.split(ours[:-len(own)])  # ".NAME.tmp-"
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
          if fs.isdir(stale):  # a folder built beside and swapped in (best/)
            fs.rmtree(stale)
          else:
            fs.remove(stale)
        except Exception:  # pylint: disable=broad-except  (another rerun removed it first)
          if fs.exists(stale):
            raise
          continue
        removed.append(stale)
  return removed


def make_dirs(directory, what="an output directory"):
  """Creates `directory` (and parents); a ValueError naming the path if a file is in the way
  (where the file system would say only "File exists" or "Not a directory")."""
  fs = gfile()
  if not directory:
    return
  probe = directory.rstrip("/")
  while probe and not fs.exists(probe):
    parent = os.path.dirname(probe)
    if parent == probe:
      break
    probe = parent
  if probe and fs.exists(probe) and not fs.isdir(probe):
    raise ValueError(f"cannot create {directory} ({what}): {probe} is a file")
  fs.makedirs(directory)


class AtomicFile:
  """A file written under `temporary_path(path)`; `commit` renames it to `path`, `abort`
  deletes it. As a context manager: commit when the block completes, abort if it raises.
  Opening it removes what killed writers of `path` left (`remove_stale_temporaries`).

  mode "wb" takes bytes, "w" str (UTF-8, no newline translation).
  """

  def __init__(self, path, mode="wb"):
    fs = gfile()
    if fs.isdir(path):  # the rename at the end would fail, after the work
      raise ValueError(f"{path} is a folder: an output file cannot replace it")
    make_dirs(os.path.dirname(path), what=f"the directory of {path}")
    remove_stale_temporaries([path])
    self.path = path
    self.tmp_path = temporary_path(path)
    self._file = fs.GFile(self.tmp_path, mode)
    # GFile creates the file at its first write: an empty output must still exist after
    # `commit`, and a temporary file shows a run in progress.
    self._file.write(b"" if "b" in mode else "")

  def write(self, data):
    self._file.write(data)

  def close(self):
    self._file.close()

  def commit(self):
    self.close()
    gfile().rename(self.tmp_path, self.path, overwrite=True)

  def abort(self):
    try:
      self.close()
    except Exception:  # pylint: disable=broad-except  (a failed flush: the file goes anyway)
      pass
    if gfile().exists(self.tmp_path):
      gfile().remove(self.tmp_path)

  def __enter__(self):
    return self

  def __exit__(self, exc_type, exc, tb):
    if exc_type is None:
      try:
        self.commit()
      except BaseException:
        self.abort()  # (a folder made at `path` meanwhile): no temporary file left
        raise
    else:
      self.abort()


def write_text(path, text):
  """Writes a whole text file atomically."""
  with AtomicFile(path, "w") as f:
    f.write(text)


def copy_file(source, path):
  """`path` as a byte-for-byte copy of `source`, written atomically (as `AtomicFile`)."""
  with AtomicFile(path, "wb") as f:
    f.close()
    gfile().copy(source, f.tmp_path, overwrite=True)


class RecordFile(AtomicFile):
  """An atomic TFRecord file, optionally in one gzip stream (bytes equal TFRecordWriter's)."""

  def __init__(self, path, gzip_compress=False):
    super().__init__(path, "wb")
    self._raw = self._file
    if gzip_compress:
      self._file = gzip.GzipFile(filename="", mode="wb", fileobj=self._raw, compresslevel=6,
                                 mtime=0)

  def write_framed(self, framed_bytes):
    """Appends already framed records (`frame`), e.g. a worker's batch joined."""
    self._file.write(framed_bytes)

  def write(self, data):
    """Appends one serialized record."""
    self._file.write(frame(data))

  def close(self):
    if self._file is not self._raw:
      self._file.close()  # the gzip trailer; GzipFile leaves a given fileobj open
    self._raw.close()


def write_examples(path, features, columns, batch=4096):
  """Writes one `tf.train.Example` per row of `columns` (name -> [n, length] array) of the
  schema `features`, atomically. Returns the number of rows."""
  encoder = example_encoder.ExampleEncoder(features)
  n = len(next(iter(columns.values())))
  with RecordFile(path) as f:
    for start in range(0, n, batch):
      rows = encoder.encode({k: v[start:start + batch] for k, v in columns.items()})
      f.write_framed(b"".join(frame(r) for r in rows))
  return n

