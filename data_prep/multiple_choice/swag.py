"""SWAG multiple choice: the CSV reader and the features (one `[CLS] a [SEP] b [SEP]` per choice).

The SWAG files (rowanz/swagaf `data/{train,val,test}.csv`) have the header
`video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label`
(pandas-written copies add a leading unnamed index column; test.csv has no label). Columns are
found by name, so both spellings read. As in the BERT paper and the original PyTorch port
(`run_swag.py`), choice i is `[CLS] sent1 [SEP] sent2 ending_i [SEP]`, truncated from the
longer side, and one score per choice is taken from `[CLS]`.

Features (`schema.swag_features`): input_ids, input_mask, segment_ids [num_choices * L] int64
(choice-major: reshape to [num_choices, L]); label_ids [1] int64.
"""

import collections
import csv
import io

import numpy as np

from data_prep import schema
from data_prep import tfrecord_io
from data_prep.classification import features as classifier_features

SwagExample = collections.namedtuple("SwagExample",
                                     ["swag_id", "context", "start_ending", "endings", "label"])

NUM_CHOICES = schema.SWAG_NUM_CHOICES
_REQUIRED = ("sent1", "sent2") + tuple(f"ending{i}" for i in range(NUM_CHOICES))


def read_swag(path, require_label=True):
  """SwagExamples of a SWAG CSV. Raises ValueError naming file and line for a missing column,
  a row with the wrong number of fields, or a label that is not a choice index."""
  examples = []
  with io.StringIO(tfrecord_io.read_text(path), newline="") as f:
    reader = csv.reader(f)
    header = next(reader, None)
    if header is None:
      raise ValueError(f"{path}: empty file")
    columns = {name: i for i, name in enumerate(header)}
    needed = _REQUIRED + (("label",) if require_label else ())
    missing = [name for name in needed if name not in columns]
    if missing:
      raise ValueError(f"{path}:1: missing column(s) {missing}; header is {header}")
    for row in reader:
      where = f"{path}:{reader.line_num}"
      if len(row) != len(header):
        raise ValueError(f"{where}: {len(row)} fields, expected {len(header)} (as the header)")
      label = None
      if "label" in columns and row[columns["label"]] != "":
        label = row[columns["label"]]
        if label not in {str(i) for i in range(NUM_CHOICES)}:
          raise ValueError(f"{where}: label {label!r} is not one of the choices "
                           f"{list(range(NUM_CHOICES))}")
        label = int(label)
      elif require_label:
        raise ValueError(f"{where}: no label")
      swag_id = "-".join(row[columns[c]] for c in ("video-id", "fold-ind") if c in columns)
      examples.append(SwagExample(
          swag_id or str(len(examples)), row[columns["sent1"]], row[columns["sent2"]],
          [row[columns[f"ending{i}"]] for i in range(NUM_CHOICES)], label))
  return examples


def convert_examples(examples, max_seq_length, tokenizer):
  """SwagExamples -> columns of `schema.swag_features` (label 0 where an example has none)."""
  cls_id, sep_id = tokenizer.vocab["[CLS]"], tokenizer.vocab["[SEP]"]
  contexts = classifier_features.ragged_rows(tokenizer, [e.context for e in examples])
  endings = classifier_features.ragged_rows(
      tokenizer, [f"{e.start_ending} {ending}" for e in examples for ending in e.endings])
  n, size = len(examples), NUM_CHOICES * max_seq_length
  cols = {name: np.zeros([n, NUM_CHOICES, max_seq_length], np.int64)
          for name in ("input_ids", "input_mask", "segment_ids")}
  for i in range(n):
    for c in range(NUM_CHOICES):
      packed = classifier_features.pack_pair(contexts[i], endings[i * NUM_CHOICES + c],
                                             cls_id, sep_id, max_seq_length)
      cols["input_ids"][i, c], cols["input_mask"][i, c], cols["segment_ids"][i, c] = packed[:3]
  out = {name: value.reshape(n, size) for name, value in cols.items()}  # choice-major
  out["label_ids"] = np.array([[e.label or 0] for e in examples], np.int64)
  return out
