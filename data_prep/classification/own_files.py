"""The user's own classification files: .tsv, .csv or .jsonl, columns found by header name.

  .csv    Python's csv module (commas; fields may be quoted, holding commas, tabs, quotes
          doubled, line breaks); the first row names the columns.
  .tsv    the same reader with a tab delimiter: quoted fields work as in .csv (unlike the GLUE
          files, read with `quotechar=None`), so a text holding a tab must be quoted.
  .jsonl  one JSON object a line (blank lines skipped); a multi-label label may be a list.

`quoting` (the commands' --quoting) says how a .tsv or .csv reads quotes: "csv" (the default:
as above, what pandas and the csv module write) or "none" (csv.QUOTE_NONE: a quote is a plain
character and every delimiter and line break ends a field, as the GLUE files are read; STS-B's
sentences hold literal quotes, one opening a field, that CSV quoting cannot read). A
malformed quote under "csv" is an error that suggests --quoting=none.

Every problem is named by file and line (and column for bad UTF-8, `tfrecord_io.read_text`):
a row with another number of fields than the header, a malformed quote or JSON line, a missing
column (with the columns there are), a label that is not a number (regression) or not in the
label set (dev/test), an empty file. Lines are physical lines where the record starts.
"""

import collections
import csv
import io
import json
import math
import os
import sys

import numpy as np

from data_prep import tfrecord_io
from data_prep.classification.glue_processors import InputExample

PROBLEM_TYPES = ("single_label", "multi_label", "regression")
EXTENSIONS = (".tsv", ".csv", ".jsonl")
# How a .tsv/.csv reads quotes: CSV quoting (quoted fields) or none (plain characters).
QUOTINGS = ("csv", "none")
QUOTING_HINT = ("if quotes in this file are plain characters (GLUE-style TSV), pass "
                "--quoting=none")

# Which columns hold what; text_b None for single texts.
Columns = collections.namedtuple("Columns", ["text", "text_b", "label", "id"])
Columns.__new__.__defaults__ = (None, "label", "id")

# A file's examples: `labels` None for a file to predict (no label column); `ids` the id
# column's values (None without one); `lines` where each example starts.
Examples = collections.namedtuple("Examples", ["examples", "has_labels", "ids", "lines"])


def _field_count_error(path, line, row, header, delimiter, quoting):
  kind = "tab-separated" if delimiter == "\t" else "comma-separated"
  message = (f"{path}:{line}: {len(row)} {kind} fields, expected {len(header)} (as the header: "
             f"{', '.join(header)}); ")
  if quoting == "none":
    return ValueError(message + "with --quoting=none no field can hold the delimiter (quote "
                      "it, and read the file with the default --quoting=csv)")
  # A field holding the delimiter or a line break was quoted: perhaps by a plain quote.
  quoted = any(delimiter in field or "\n" in field or "\r" in field for field in row)
  return ValueError(message + "quote a field that holds the delimiter" +
                    (f"; or, {QUOTING_HINT}" if quoted else ""))


def _csv_records(path, text, delimiter, quoting="csv"):
  """(header, [(line, row dict)]) of a CSV/TSV text; rows must have the header's length.

  quoting: "csv" (quoted fields) or "none" (quotes are plain characters, csv.QUOTE_NONE).
  """
  csv.field_size_limit(sys.maxsize)
  mode = csv.QUOTE_NONE if quoting == "none" else csv.QUOTE_MINIMAL
  reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, quoting=mode, strict=True)
  header, records, line = None, [], 1
  try:
    for row in reader:
      start, line = line, reader.line_num + 1  # a quoted field may span lines
      if not row:
        continue
      if header is None:
        header = [name.strip() for name in row]
        continue
      if len(row) != len(header):
        raise _field_count_error(path, start, row, header, delimiter, quoting)
      records.append((start, dict(zip(header, row))))
  except csv.Error as e:
    where = (f", in the record that starts at line {line} (a quoted field runs across lines)"
             if line < reader.line_num else "")
    hint = f": {QUOTING_HINT}" if quoting == "csv" else ""
    raise ValueError(f"{path}:{reader.line_num}: malformed line ({e}){where}{hint}") from None
  return header, records


def _jsonl_records(path, text):
  """(keys of the first object, [(line, object)])."""
  header, records = None, []
  # Lines end at "\n" only: JSON strings may hold U+2028 and other line breaks of
  # str.splitlines raw (json.dumps(..., ensure_ascii=False) writes them so).
  for line, raw in enumerate(text.split("\n"), start=1):
    if not raw.strip():
      continue
    try:
      record = json.loads(raw)
    except ValueError as e:
      raise ValueError(f"{path}:{line}: malformed JSON ({e})") from None
    if not isinstance(record, dict):
      raise ValueError(f"{path}:{line}: expected a JSON object, got {type(record).__name__}")
    header = header if header is not None else list(record)
    records.append((line, record))
  return header, records


def read_records(path, quoting="csv"):
  """(column names, [(line, record dict)]) of a .tsv, .csv or .jsonl file (by extension);
  `quoting` ("csv" or "none", `QUOTINGS`) applies to .tsv and .csv."""
  if quoting not in QUOTINGS:
    raise ValueError(f"quoting={quoting!r}: not one of {', '.join(QUOTINGS)}")
  extension = os.path.splitext(path)[1].lower()
  if extension not in EXTENSIONS:
    raise ValueError(f"{path}: unknown file type {extension!r}; use {', '.join(EXTENSIONS)}")
  if not tfrecord_io.is_file(path):
    raise FileNotFoundError(f"{path}: no such file")
  text = tfrecord_io.read_text(path)
  if text.startswith("\ufeff"):  # a byte order mark (spreadsheet exports) is not a column name
    text = text[1:]
  if extension == ".jsonl":
    header, records = _jsonl_records(path, text)
  else:
    header, records = _csv_records(path, text, "\t" if extension == ".tsv" else ",", quoting)
  if not records:
    raise ValueError(f"{path}: empty file (no examples" + (" after the header)" if header
                                                            else ")"))
  return header, records


class MissingColumnError(ValueError):
  """A column (flag) that the file's header (or a JSON line) does not have."""


def _missing(path, line, column, header):
  where = path if line is None else f"{path}:{line}"
  return MissingColumnError(
      f"{where}: no column {column!r}; columns: {', '.join(map(str, header))}")


def parse_label(value, problem_type, separator, where):
  """A label as written -> str (single_label), [str] (multi_label) or float (regression)."""
  if problem_type == "regression":
    try:
      score = float(value)
    except (TypeError, ValueError):
      raise ValueError(f"{where}: label {value!r} is not a number") from None
    if not math.isfinite(score):  # a NaN score reads as "no label"; inf breaks the loss
      raise ValueError(f"{where}: label {value!r} is not a finite number")
    return score
  if problem_type == "multi_label":  # an empty field or list (or null): no label
    parts = value if isinstance(value, list) else str(value or "").split(separator)
    return sorted({str(p).strip() for p in parts if str(p).strip()})
  if value is None or isinstance(value, (list, dict)):
    raise ValueError(f"{where}: label {json.dumps(value)} is not a label (a name or number)")
  label = value if isinstance(value, str) else json.dumps(value)
  if not label.strip():
    raise ValueError(f"{where}: empty label")
  return label


def read_examples(path, columns, problem_type="single_label", separator=",", labels=None,
                  need_labels=True, quoting="csv"):
  """`Examples` of one file; labels checked against `labels` (None: any label).

  need_labels False (a test file) allows a file without the label column: predicted only.
  quoting: how a .tsv/.csv reads quotes, "csv" or "none" (`QUOTINGS`, `read_records`).
  """
  header, records = read_records(path, quoting)
  has_labels = columns.label in header
  if need_labels and not has_labels:
    raise _missing(path, None, columns.label, header)
  for column in (columns.text, columns.text_b):
    if column is not None and column not in header:
      raise _missing(path, None, column, header)
  has_ids = columns.id in header
  known = set(labels) if labels is not None else None
  examples, ids = [], []
  for line, record in records:
    where = f"{path}:{line}"
    values = []
    for column in (columns.text, columns.text_b, columns.label if has_labels else None):
      if column is not None and column not in record:  # JSON lines may differ in keys
        raise _missing(path, line, column, list(record))
      values.append(None if column is None else record[column])
    text, text_b, label = values
    for column, value in ((columns.text, text), (columns.text_b, text_b)):
      if isinstance(value, (list, dict)) or (value is None and column == columns.text):
        raise ValueError(f"{where}: {column} is {json.dumps(value)}, not a text")
    text_b = "" if columns.text_b is not None and text_b is None else text_b  # null: none
    if has_labels:
      label = parse_label(label, problem_type, separator, where)
      for one in (label if problem_type == "multi_label" else [label]):
        if known is not None and problem_type != "regression" and one not in known:
          raise ValueError(f"{where}: label {one!r} is not in the label set {list(labels)} "
                           "(the training file's, --label_names or OUTPUT_DIR/labels.txt)")
    ids.append(str(record.get(columns.id, "")))
    examples.append(InputExample(f"{os.path.basename(path)}-{line}", str(text),
                                 None if text_b is None else str(text_b), label))
  return Examples(examples, has_labels, ids if has_ids else None, [r[0] for r in records])


def label_set(examples, problem_type):
  """The sorted labels of training examples (multi-label: every label of every example)."""
  if problem_type == "multi_label":
    return sorted({one for e in examples for one in e.label})
  return sorted({e.label for e in examples})


def class_weights(spec, examples, labels):
  """Per-class loss weights: "balanced" (scikit-learn's n_samples / (n_classes * count)) or
  a comma list, one per label in label order."""
  if spec == "balanced":
    counts = collections.Counter(e.label for e in examples)
    absent = [label for label in labels if not counts[label]]
    if absent:
      raise ValueError(f"--class_weights=balanced: no training example of {absent}")
    return [len(examples) / (len(labels) * counts[label]) for label in labels]
  try:
    weights = [float(w) for w in spec.split(",")]
  except ValueError:
    raise ValueError(f"--class_weights={spec}: not 'balanced' or numbers") from None
  if len(weights) != len(labels) or min(weights) < 0:
    raise ValueError(f"--class_weights={spec}: need {len(labels)} weights >= 0, one per "
                     f"label {labels}")
  return weights


def multi_hot(examples, labels):
  """[n, len(labels)] float32: 1 where the example has the label."""
  index = {label: i for i, label in enumerate(labels)}
  out = np.zeros([len(examples), len(labels)], np.float32)
  for i, example in enumerate(examples):
    out[i, [index[one] for one in example.label]] = 1.0
  return out
