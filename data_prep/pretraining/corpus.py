"""Pretraining corpora: one sentence per line, a blank line between documents.

Streaming in two passes so memory does not grow with the corpus:
  1. `index_documents` scans each file once, validates UTF-8 (reporting file and line), and
     keeps only each document's byte range (24 bytes per document);
  2. `read_documents` seeks to and reads just the documents of one chunk (`chunking`).
A document is a maximal run of non-blank lines (blank: whitespace-only once decoded); its
identity is its file number and the byte offset of its first line, as in the Beam pipeline's
byte ranges (`byte_ranges`), which must find the same documents with the same lines.
A file boundary also ends a document (the original would glue the last document of one file
to the first of the next when a file lacks a trailing blank line).
"""

import array

from data_prep import tfrecord_io


class CorpusError(ValueError):
  """Bad input, with the file (and line) in the message."""


def expand_input_patterns(patterns):
  """Comma-separated paths/globs -> files (`tfrecord_io.expand_patterns`); CorpusError."""
  return tfrecord_io.expand_patterns(patterns, CorpusError)


class DocumentIndex:
  """Where each document is: file number, byte range, first line number."""

  def __init__(self, files):
    self.files = list(files)
    self.file_id = array.array("i")
    self.start = array.array("q")
    self.end = array.array("q")
    self.first_line = array.array("q")
    self.total_bytes = 0

  def __len__(self):
    return len(self.start)

  def add(self, file_id, start, end, first_line):
    self.file_id.append(file_id)
    self.start.append(start)
    self.end.append(end)
    self.first_line.append(first_line)

  def size(self, doc):
    return self.end[doc] - self.start[doc]


def _decode(line, path, line_no, errors):
  try:
    return line.decode("utf-8", errors=errors)
  except UnicodeDecodeError as e:
    raise CorpusError(
        f"{path}:{line_no}: invalid UTF-8 at byte {e.start} of the line ({e.reason}); "
        "fix the file or pass --errors=replace") from None


def index_documents(files, errors="strict"):
  """Pass 1: document byte ranges of every file. Blank (whitespace-only) lines separate."""
  index = DocumentIndex(files)
  for file_id, path in enumerate(files):
    with tfrecord_io.open_file(path) as f:
      offset = 0
      doc_start = doc_end = doc_line = None
      for line_no, line in enumerate(f, start=1):
        text = _decode(line, path, line_no, errors)
        if text.strip():
          if doc_start is None:
            doc_start, doc_line = offset, line_no
          doc_end = offset + len(line)
        elif doc_start is not None:
          index.add(file_id, doc_start, doc_end, doc_line)
          doc_start = None
        offset += len(line)
      if doc_start is not None:
        index.add(file_id, doc_start, doc_end, doc_line)
      index.total_bytes += offset
  return index


def read_documents(index, docs, errors="strict"):
  """Pass 2: the non-blank lines of the given documents, in the given order."""
  by_file = {}
  for doc in docs:
    by_file.setdefault(index.file_id[doc], []).append(doc)
  text = {}
  for file_id, file_docs in by_file.items():
    path = index.files[file_id]
    with tfrecord_io.open_file(path) as f:
      for doc in sorted(file_docs, key=lambda d: index.start[d]):  # sequential reads
        f.seek(index.start[doc])
        raw = f.read(index.end[doc] - index.start[doc])
        lines = raw.split(b"\n")
        text[doc] = [t for t in (_decode(l, path, index.first_line[doc] + k, errors)
                                 for k, l in enumerate(lines)) if t.strip()]
  return [text[doc] for doc in docs]
