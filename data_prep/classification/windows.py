"""Overlapping windows of texts longer than max_seq_length (`run_classifier --doc_stride`).

Truncation drops the end of a long text; a review's verdict is often there. With a stride,
the first text is cut into windows of the room left in `max_seq_length`, starting every
`doc_stride` tokens (the last window ends at the text's end), each packed as its own row with
the example's label; the reader averages the windows' probabilities (`average_windows`). A
second text (pairs) is kept in every window, cut to half the length if both do not fit.
"""

import numpy as np

from data_prep.classification import features as classifier_features


def window_starts(length, size, stride):
  """Starts of `size`-token windows every `stride` tokens that cover `length` tokens."""
  if length <= size:
    return [0]
  return list(range(0, length - size, stride)) + [length - size]


def windowed_columns(examples, columns, max_seq_length, doc_stride, tokenizer):
  """Columns of one row per example (`features.convert_examples`) -> one row per window.

  Returns (columns, owner): owner[i] is the example index of row i, in example order.
  """
  cls_id, sep_id = tokenizer.vocab["[CLS]"], tokenizer.vocab["[SEP]"]
  ids_a = classifier_features.ragged_rows(tokenizer, [e.text_a for e in examples])
  with_b = [i for i, e in enumerate(examples) if e.text_b is not None]
  ids_b = dict(zip(with_b, classifier_features.ragged_rows(
      tokenizer, [examples[i].text_b for i in with_b])))
  rows, owner = [], []
  for i, a in enumerate(ids_a):
    b = ids_b.get(i)
    if b is not None and not len(b):
      b = None  # a second text of no tokens is none (the original's `if tokens_b`)
    if b is None:
      room = max_seq_length - 2  # [CLS] a [SEP]
    else:
      if len(a) + len(b) > max_seq_length - 3:
        b = b[:(max_seq_length - 3) // 2]
      room = max_seq_length - 3 - len(b)  # [CLS] a [SEP] b [SEP]
    for start in window_starts(len(a), room, min(doc_stride, room)):
      rows.append(classifier_features.pack_pair(a[start:start + room], b, cls_id, sep_id,
                                                max_seq_length)[:3])
      owner.append(i)
  out = {name: np.stack([r[k] for r in rows])
         for k, name in enumerate(("input_ids", "input_mask", "segment_ids"))}
  for name in ("label_ids", "is_real_example"):  # each window: its example's
    out[name] = columns[name][owner]
  return out, owner


def average_windows(values, owner):
  """[windows, ...] -> [examples, ...]: the mean over each example's windows (owner as
  above), in float64."""
  owner = np.asarray(owner)
  n = int(owner.max()) + 1 if owner.size else 0
  sums = np.zeros((n,) + values.shape[1:], np.float64)
  np.add.at(sums, owner, values)
  return sums / np.bincount(owner, minlength=n).reshape((n,) + (1,) * (values.ndim - 1))


def first_windows(owner):
  """Row index of each example's first window."""
  return np.unique(np.asarray(owner), return_index=True)[1]
