"""GLUE tasks: examples from the standard `glue_data/<TASK>/*.tsv` files or from TFDS `glue/*`.

The TSV processors read what google-research/bert's `run_classifier.py` reads (its CoLA, MRPC
and MNLI processors; the others follow the same `glue_data` layout, as in the GLUE baselines):
the same column indices, header handling and label lists, and a dummy first label on test
rows. Guids are `"{split}-{row}"` (rows counted from 0 after any header; MNLI uses its index
column, as the original); test guids end with the file's `index` column, the GLUE submission
index. TSVs are read as the original reads them: tab-separated, no quote character (a `"` is
text; MRPC and QNLI have stray ones).

Two checks the original lacks, because a silently shifted column trains on garbage:
  - every row must have the first row's column count: the error names the file and line;
  - a label outside the task's label list is an error that names the file, the line and the
    known labels.
"""

import collections
import csv
import io
import math
import os
import sys

from data_prep import tfrecord_io

InputExample = collections.namedtuple("InputExample", ["guid", "text_a", "text_b", "label"])

# Where a split's text and label are: column indices (None: absent); `header` skips line 1.
Columns = collections.namedtuple("Columns", ["text_a", "text_b", "label", "header"])
Columns.__new__.__defaults__ = (None, None, True)


def read_tsv(path):
  """Rows of a tab-separated file, read like the original (`quotechar=None`).

  Raises ValueError naming the file and line when a row's column count differs from the
  first row's.
  """
  csv.field_size_limit(sys.maxsize)  # RTE/QNLI test rows exceed csv's default 128 KiB limit
  text = tfrecord_io.read_text(path)
  rows = list(csv.reader(io.StringIO(text, newline=""), delimiter="\t", quotechar=None))
  for line_no, row in enumerate(rows, start=1):
    if len(row) != len(rows[0]):
      raise ValueError(f"{path}:{line_no}: {len(row)} tab-separated columns, expected "
                       f"{len(rows[0])} (as line 1)")
  return rows


def check_label(label, labels, where):
  """Raises ValueError naming `where` and the known labels if `label` is not one of them."""
  if labels is not None and label not in labels:
    raise ValueError(f"{where}: unknown label {label!r}; known labels: {list(labels)}")


class GlueProcessor:
  """One GLUE task: where its files and columns are, its labels, its TFDS and GLUE names."""

  name = None  # GLUE's spelling ("MRPC"): also the `glue_data` folder
  labels = ("0", "1")  # None: regression (float labels)
  train_columns = None  # a Columns; dev uses the same
  test_columns = None
  eval_splits = ("dev",)
  predict_splits = ("test",)
  tfds_name = None
  tfds_text_keys = (None, None)  # TFDS features holding text_a, text_b
  guid_column = None  # MNLI: guids use the index column, as in the original

  @property
  def is_regression(self):
    return self.labels is None

  def get_labels(self):
    return list(self.labels) if self.labels is not None else [None]

  def submission_name(self, split):
    """The file the GLUE server expects for a test split, without `.tsv`."""
    return {"test_matched": "MNLI-m", "test_mismatched": "MNLI-mm"}.get(split, self.name)

  def get_examples(self, data_dir, split):
    """Examples of `split` ("train", "dev", "test", "dev_matched", ...) from `split.tsv`."""
    path = os.path.join(data_dir, split + ".tsv")
    if not tfrecord_io.is_file(path):
      raise FileNotFoundError(f"{self.name}: no {split}.tsv in {data_dir}")
    is_test = split.startswith("test")
    cols = self.test_columns if is_test else self.train_columns
    rows = read_tsv(path)
    start = 1 if cols.header else 0
    examples = []
    for line_no, row in enumerate(rows[start:], start=start + 1):
      if is_test:
        label = self.get_labels()[0] if self.labels else 0.0  # dummy, as the original
        guid = f"{split}-{row[0]}"
      else:
        label = row[cols.label]
        if self.is_regression:
          label = _float(label, f"{path}:{line_no}")
        check_label(label, self.labels, f"{path}:{line_no}")
        key = row[self.guid_column] if self.guid_column is not None else line_no - start - 1
        guid = f"{split}-{key}"
      text_b = row[cols.text_b] if cols.text_b is not None else None
      examples.append(InputExample(guid, row[cols.text_a], text_b, label))
    return examples

  def get_tfds_examples(self, data_dir, split):
    """Examples of `split` from TFDS `glue/<config>` prepared in `data_dir` (may be None)."""
    import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
    tfds_split = split.replace("dev", "validation")
    builder = tfds.builder(self.tfds_name, data_dir=data_dir)
    names = None if self.is_regression else builder.info.features["label"].names
    key_a, key_b = self.tfds_text_keys
    examples = []
    for i, ex in enumerate(tfds.as_numpy(tfds.load(self.tfds_name, split=tfds_split,
                                                   data_dir=data_dir))):
      text_b = ex[key_b].decode("utf-8") if key_b else None
      where = f"tfds {self.tfds_name} {tfds_split} example {i}"
      if split.startswith("test"):  # TFDS test labels are -1
        label = self.get_labels()[0] if self.labels else 0.0
      elif self.is_regression:
        label = float(ex["label"])
      else:
        # TFDS names NLI labels as GLUE does, but binary ones in words ("equivalent"), where
        # GLUE's files say "1": then the class id is the label.
        index = int(ex["label"])
        label = names[index] if 0 <= index < len(names) and names[index] in self.labels else str(
            index)
        check_label(label, self.labels, where)
      guid = f"{split}-{int(ex['idx'])}"
      examples.append(InputExample(guid, ex[key_a].decode("utf-8"), text_b, label))
    return examples


def _float(text, where):
  try:
    score = float(text)
  except ValueError:
    raise ValueError(f"{where}: score {text!r} is not a number") from None
  if not math.isfinite(score):
    raise ValueError(f"{where}: score {text!r} is not a finite number")
  return score


def _processor(name, labels, train, test, tfds_name, keys, **extra):
  attrs = dict(name=name, labels=labels, train_columns=train, test_columns=test,
               tfds_name=tfds_name, tfds_text_keys=keys, **extra)
  return type(name.replace("-", "") + "Processor", (GlueProcessor,), attrs)


_NLI = ("entailment", "not_entailment")
# Column layouts of the glue_data files (the original's for CoLA, MRPC and MNLI).
PROCESSORS = {
    "cola": _processor("CoLA", ("0", "1"), Columns(3, None, 1, header=False), Columns(1),
                       "glue/cola", ("sentence", None)),
    "sst2": _processor("SST-2", ("0", "1"), Columns(0, None, 1), Columns(1),
                       "glue/sst2", ("sentence", None)),
    "mrpc": _processor("MRPC", ("0", "1"), Columns(3, 4, 0), Columns(3, 4),
                       "glue/mrpc", ("sentence1", "sentence2")),
    "stsb": _processor("STS-B", None, Columns(7, 8, -1), Columns(7, 8),
                       "glue/stsb", ("sentence1", "sentence2")),
    "qqp": _processor("QQP", ("0", "1"), Columns(3, 4, 5), Columns(1, 2),
                      "glue/qqp", ("question1", "question2")),
    "mnli": _processor("MNLI", ("contradiction", "entailment", "neutral"), Columns(8, 9, -1),
                       Columns(8, 9), "glue/mnli", ("premise", "hypothesis"),
                       eval_splits=("dev_matched", "dev_mismatched"),
                       predict_splits=("test_matched", "test_mismatched"), guid_column=0),
    "qnli": _processor("QNLI", _NLI, Columns(1, 2, -1), Columns(1, 2),
                       "glue/qnli", ("question", "sentence")),
    "rte": _processor("RTE", _NLI, Columns(1, 2, -1), Columns(1, 2),
                      "glue/rte", ("sentence1", "sentence2")),
    "wnli": _processor("WNLI", ("0", "1"), Columns(1, 2, -1), Columns(1, 2),
                       "glue/wnli", ("sentence1", "sentence2")),
}


def get_processor(task_name):
  """A processor by task name, as spelled by GLUE or the original ("SST-2", "sst2", "MNLI")."""
  key = task_name.lower().replace("-", "").replace("_", "")
  if key not in PROCESSORS:
    raise ValueError(f"unknown --task_name={task_name!r}; known tasks: "
                     f"{', '.join(p.name for p in PROCESSORS.values())}")
  return PROCESSORS[key]()


def has_tfds_data(processor, data_dir):
  """Whether `data_dir` is a TFDS data dir holding the task (`glue/<config>/<version>`)."""
  return bool(data_dir) and tfrecord_io.gfile().isdir(
      os.path.join(data_dir, processor.tfds_name))


def load_examples(processor, split, data_dir=None, tfds_data_dir=None):
  """Examples of one split from TFDS (if `tfds_data_dir` is set or `data_dir` is a TFDS data
  dir holding the task) or else from `data_dir/<split>.tsv`."""
  if tfds_data_dir or has_tfds_data(processor, data_dir):
    return processor.get_tfds_examples(tfds_data_dir or data_dir, split)
  if not data_dir:
    raise ValueError("--data_dir is required (the glue_data/<TASK> folder)")
  return processor.get_examples(data_dir, split)
