"""A large input file read in parallel: byte ranges that snap to document boundaries.

The Beam pipeline splits every input file into ranges [start, end) of `--read_range_mb`; each
range is read by whichever worker gets it. A range owns exactly the documents whose first line
starts at an offset in [start, end), reads each of them to its end (past `end` if need be),
and checks the UTF-8 of every line that starts in it; so every document is read once and
every line checked, whatever the range size. Documents are as `corpus.index_documents`
finds them: maximal runs of non-blank lines (blank: whitespace-only once decoded), a file
boundary ends one, and a document is named by (file number, byte offset of its first line).

Whether the first line at or after `start` opens a document depends on the line before it,
which is read backwards up to its own beginning. Line numbers, needed only to report bad
UTF-8, are counted from the file's start then.
"""

import glob
import os

from apache_beam.io.filesystem import BeamIOError
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from data_prep.pretraining import corpus

_BLOCK = 1 << 20


def _causes(error):
  """The exceptions inside a Beam error (BeamIOError nests them by path)."""
  details = getattr(error, "exception_details", None)
  if not isinstance(details, dict) or not details:
    return [error]
  return [cause for inner in details.values() for cause in _causes(inner)]


def _match(pattern):
  """Beam's matches of `pattern`; [] when nothing is there, but a file system's own error
  (credentials, permission, a scheme without its Beam extra) raised as what it is."""
  try:
    return FileSystems.match([pattern])[0].metadata_list
  except (BeamIOError, ValueError) as e:  # ValueError: no file system for the scheme
    causes = _causes(e)
    if all(isinstance(c, FileNotFoundError) for c in causes):
      return []
    raise OSError(f"cannot list the input {pattern!r}: "
                  f"{'; '.join(f'{type(c).__name__}: {c}' for c in causes)}") from e


def expand_inputs(patterns):
  """Comma-separated paths/globs on any Beam filesystem -> [(path, size in bytes)].

  The rules of `tfrecord_io.expand_patterns` (the local writer's): a wildcard skips hidden
  files, directories are left out, matches are sorted per pattern and de-duplicated in order,
  and every pattern must match a file. A second copy of those rules, because it must list
  through Beam's FileSystems, which the workers read with: `tf.io.gfile` knows none of the
  `s3://`, `hdfs://` (with Beam's --hdfs_* options) or `azfs://` inputs a Beam run takes.
  """
  files, seen = [], set()
  for pattern in [p.strip() for p in patterns.split(",") if p.strip()]:
    is_glob = glob.has_magic(pattern)
    hidden_ok = not is_glob or os.path.basename(pattern).startswith(".")
    # Beam's local file system matches no bare relative glob ("books*.txt"): asked as
    # "./books*.txt", as the local writer expands it (and names its matches).
    bare = is_glob and "://" not in pattern and not os.path.dirname(pattern)
    found = _match(os.path.join(".", pattern) if bare else pattern)
    # Not a glob: that path only (Beam lists a directory given with a trailing "/").
    matches = sorted((m.path, m.size_in_bytes) for m in found
                     if (is_glob or m.path == pattern)
                     and (hidden_ok or not os.path.basename(m.path).startswith("."))
                     and not m.path.endswith("/")  # an object store's folder marker
                     and not ("://" not in m.path and os.path.isdir(m.path)))
    if not matches and is_glob:  # "data[1].txt": a name, as a glob none
      literal = glob.escape(pattern)
      matches = [(pattern, m.size_in_bytes) for m in _match(
          os.path.join(".", literal) if bare else literal)
                 if not m.path.endswith("/") and not os.path.isdir(m.path)][:1]
    if not matches:
      raise corpus.CorpusError(f"input file not found: {pattern!r} matches no file")
    for path, size in matches:
      if path not in seen:
        seen.add(path)
        files.append((path, size))
  if not files:
    raise corpus.CorpusError(f"no input files given ({patterns!r})")
  return files


def split(size, range_bytes):
  """[start, end) ranges of at most `range_bytes` covering a file of `size` bytes."""
  range_bytes = max(1, int(range_bytes))
  return [(s, min(s + range_bytes, size)) for s in range(0, size, range_bytes)]


def open_file(path):
  """Raw bytes (never decompressed by extension: offsets are byte offsets of the file)."""
  return FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)


def _lines(f, pos):
  """(offset, line with its "\\n") from `pos` on, reading blocks (not a call per line)."""
  f.seek(pos)
  pending = []
  while True:
    data = f.read(_BLOCK)
    if not data:
      if pending:
        yield pos, b"".join(pending)
      return
    start = 0
    while True:
      nl = data.find(b"\n", start)
      if nl < 0:
        break
      line = b"".join(pending + [data[start:nl + 1]]) if pending else data[start:nl + 1]
      pending = []
      yield pos, line
      pos += len(line)
      start = nl + 1
    if start < len(data):
      pending.append(data[start:])


def _line_head(f, pos):
  """The bytes from the beginning of the line that contains `pos` up to `pos`."""
  parts = []
  while pos > 0:
    lo = max(0, pos - _BLOCK)
    f.seek(lo)
    data = f.read(pos - lo)
    nl = data.rfind(b"\n")
    if nl >= 0:
      parts.append(data[nl + 1:])
      break
    parts.append(data)
    pos = lo
  return b"".join(reversed(parts))


def _line_number(f, offset):
  """1-based number of the line starting at `offset` (only for an error message)."""
  f.seek(0)
  count, done = 0, 0
  while done < offset:
    data = f.read(min(_BLOCK, offset - done))
    if not data:
      break
    count += data.count(b"\n")
    done += len(data)
  return count + 1


def _is_blank(line):
  # A line with bad bytes is not blank under any --errors (U+FFFD is not whitespace).
  return not line.decode("utf-8", "replace").strip()


def read_range(f, path, start, end, errors="strict"):
  """The documents a range owns: (offset of the first line, [non-blank lines]) each.

  Args:
    f: the file, open for binary reading and seekable (`open_file`).
    path: its name, for error messages.
  Lines are decoded as `corpus.read_documents` decodes them (without the "\\n"); a line that
  is not UTF-8 is a `corpus.CorpusError` naming file and line with --errors=strict.
  """
  if start > 0:
    head = _line_head(f, start - 1)
    lines = _lines(f, start - 1)
    first = next(lines, None)  # the rest of the line holding byte start-1: not ours
    if first is None or not first[1].endswith(b"\n"):
      return
    in_document = not _is_blank(head + first[1])
  else:
    lines = _lines(f, 0)
    in_document = False
  offset, texts = None, None  # the document being read, if it is ours
  for at, line in lines:
    if at >= end and texts is None:
      return
    raw = line[:-1] if line.endswith(b"\n") else line
    try:
      text = raw.decode("utf-8", errors)
    except UnicodeDecodeError:
      # As `corpus.index_documents` reports it (the line with its "\n"): raises.
      corpus._decode(line, path, _line_number(f, at), errors)  # pylint: disable=protected-access
      raise
    if text.strip():
      if not in_document:
        offset, texts = at, []
      in_document = True
      if texts is not None:
        texts.append(text)
    else:
      in_document = False
      if texts is not None:
        yield offset, texts
        offset, texts = None, None
  if texts is not None:
    yield offset, texts
