"""Text pairs for sentence-embedding training (run_embeddings) -> embedding pair records.

A file is .tsv, .csv or .jsonl with columns found by header name (`own_files`: the same
reader, quoting rules and errors as run_classifier's own files): the first text, the second
text and, optionally, a score. Two kinds of file:

  scored pairs       text, text_b, score: a gold similarity (STS-B's 0-5), or 1/0 for similar /
                     dissimilar (the contrastive loss).
  positive pairs     text, text_b without a score: a query and a text that answers it; the
                     other pairs' texts are its negatives (multiple negatives ranking loss,
                     recall@k on a dev file).

Each text is packed on its own as `[CLS] text [SEP]` (segment 0, cut to max_seq_length), as a
sentence encoder sees one text at serving time.
"""

import math

import numpy as np

from data_prep.classification import features as classifier_features
from data_prep.classification import own_files


def read_pairs(path, text_column, text_b_column, score_column=None, need_scores=False,
               quoting="csv"):
  """`own_files.Examples` of (text_a, text_b, score) examples; `has_labels` says whether the
  file has the score column (None: the file's scores are not read). `quoting`: how a .tsv/.csv
  reads quotes, "csv" or "none" (`own_files.QUOTINGS`)."""
  columns = own_files.Columns(text_column, text_b_column, score_column)
  if need_scores and not score_column:
    raise ValueError(f"{path}: this loss needs a gold score per pair: set --score_column")
  return own_files.read_examples(path, columns, "regression", labels=None,
                                 need_labels=need_scores, quoting=quoting)


def score_range(examples, path):
  """(lowest, highest) score of a file's examples; an error if every pair has one score."""
  scores = [e.label for e in examples]
  low, high = min(scores), max(scores)
  if low == high:
    raise ValueError(f"{path}: every pair has the score {low}: nothing to learn from")
  return low, high


def check_binary(examples, path, lines):
  """The contrastive loss's labels: 1 similar, 0 dissimilar; anything else names its line."""
  for example, line in zip(examples, lines):
    if example.label not in (0.0, 1.0):
      raise ValueError(f"{path}:{line}: score {example.label:g}: the contrastive loss takes "
                       "1 (similar) or 0 (dissimilar)")


def convert_pairs(examples, has_scores, max_seq_length, tokenizer):
  """Examples -> {feature: [n, ...] array} (`schema.embedding_pair_features`).

  Both texts are tokenized in batches; `scores` is NaN for a file without scores.
  """
  n = len(examples)
  cls_id, sep_id = tokenizer.vocab["[CLS]"], tokenizer.vocab["[SEP]"]
  texts = {0: classifier_features.ragged_rows(tokenizer, [e.text_a for e in examples]),
           1: classifier_features.ragged_rows(tokenizer, [e.text_b for e in examples])}
  columns = {name: np.zeros([n, 2, max_seq_length], np.int64)
             for name in ("input_ids", "input_mask", "segment_ids")}
  for i in range(n):
    for side in (0, 1):
      ids, mask, segments, _ = classifier_features.pack_pair(texts[side][i], None, cls_id,
                                                             sep_id, max_seq_length)
      columns["input_ids"][i, side] = ids
      columns["input_mask"][i, side] = mask
      columns["segment_ids"][i, side] = segments
  columns = {name: value.reshape([n, 2 * max_seq_length]) for name, value in columns.items()}
  columns["scores"] = np.array([[float(e.label) if has_scores else math.nan]
                                for e in examples], np.float32).reshape([n, 1])
  columns["is_real_example"] = np.ones([n, 1], np.int64)
  return columns
