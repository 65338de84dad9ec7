"""Examples -> fixed-length features -> TFRecords, as the original run_classifier.py.

Each example becomes `[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]`, zero-padded to
max_seq_length, with the original's feature names (`schema.classifier_features`):

  input_ids, input_mask, segment_ids  [L] int64
  label_ids                           [1] int64 (float32 for regression, e.g. STS-B)
  is_real_example                     [1] int64 (0 only for padding examples)

Texts are tokenized in batches (`FullTokenizer.encode_batch`); the per-example work is list
slicing. `pack_pair` and `cached_tfrecord` are shared with the NER and SWAG writers.
"""

import functools
import json
import random

from absl import logging
import numpy as np

from data_prep import tfrecord_io


def truncate_seq_pair(tokens_a, tokens_b, max_length):
  """Truncates in place, one token at a time from the end of the longer sequence.

  The original's `_truncate_seq_pair`: a longer sequence holds less information per token,
  so it loses more (ties take from b).
  """
  while len(tokens_a) + len(tokens_b) > max_length:
    longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
    longer.pop()


def pack_pair(ids_a, ids_b, cls_id, sep_id, max_seq_length):
  """(input_ids, input_mask, segment_ids), each [max_seq_length] int64, and whether it was cut.

  ids_b None: a single sentence, truncated to max_seq_length - 2. Lists are not modified.
  """
  ids_a = list(ids_a)
  ids_b = list(ids_b) if ids_b is not None else None
  before = len(ids_a) + len(ids_b or ())
  if ids_b is None:
    del ids_a[max_seq_length - 2:]
  else:
    truncate_seq_pair(ids_a, ids_b, max_seq_length - 3)  # [CLS] a [SEP] b [SEP]
  ids = [cls_id] + ids_a + [sep_id]
  segments = [0] * len(ids)
  if ids_b is not None:
    ids += ids_b + [sep_id]
    segments += [1] * (len(ids_b) + 1)
  row = np.zeros([3, max_seq_length], np.int64)
  row[0, :len(ids)] = ids
  row[1, :len(ids)] = 1
  row[2, :len(ids)] = segments
  return row[0], row[1], row[2], before > len(ids_a) + len(ids_b or ())


@functools.lru_cache(maxsize=4)
def cached_tokenizer(vocab_file, do_lower_case):
  """One FullTokenizer per vocabulary, built only when some split needs writing."""
  from data_prep.tokenization import FullTokenizer  # pylint: disable=g-import-not-at-top
  return FullTokenizer(vocab_file, do_lower_case=do_lower_case)


def subsample(examples, max_examples, seed):
  """A seeded random subset of `max_examples` (0: all), kept in file order."""
  if not max_examples or max_examples >= len(examples):
    return examples
  keep = sorted(random.Random(seed).sample(range(len(examples)), max_examples))
  return [examples[i] for i in keep]


def ragged_rows(tokenizer, texts):
  """Token ids of each text, tokenized in batches: list of int lists."""
  ids, splits = tokenizer.encode_batch(texts)
  return [ids[splits[i]:splits[i + 1]] for i in range(len(texts))]


def convert_examples(examples, label_list, max_seq_length, tokenizer):
  """InputExamples -> dict feature name -> [n, length] array (the classifier schema).

  label_list [None] means regression: labels are floats. An example whose label is not in
  label_list raises ValueError naming its guid and the known labels.
  """
  regression = label_list == [None]
  label_map = {label: i for i, label in enumerate(label_list)}
  cls_id, sep_id = tokenizer.vocab["[CLS]"], tokenizer.vocab["[SEP]"]
  ids_a = ragged_rows(tokenizer, [e.text_a for e in examples])
  with_b = [i for i, e in enumerate(examples) if e.text_b is not None]
  ids_b = dict(zip(with_b, ragged_rows(tokenizer, [examples[i].text_b for i in with_b])))
  n = len(examples)
  cols = {name: np.zeros([n, max_seq_length], np.int64)
          for name in ("input_ids", "input_mask", "segment_ids")}
  labels = np.zeros([n, 1], np.float32 if regression else np.int64)
  truncated = 0
  for i, example in enumerate(examples):
    if regression:
      labels[i] = float(example.label)
    elif example.label not in label_map:
      raise ValueError(f"example {example.guid}: unknown label {example.label!r}; known "
                       f"labels: {label_list}")
    else:
      labels[i] = label_map[example.label]
    second = ids_b.get(i)
    if second is not None and len(second) == 0:
      second = None  # an empty text_b: one segment, as the original (`if tokens_b:`), export
    packed = pack_pair(ids_a[i], second, cls_id, sep_id, max_seq_length)
    cols["input_ids"][i], cols["input_mask"][i], cols["segment_ids"][i], cut = packed
    truncated += cut
  if truncated:
    logging.info("%d of %d examples truncated to max_seq_length=%d", truncated, n,
                max_seq_length)
  cols["label_ids"] = labels
  cols["is_real_example"] = np.ones([n, 1], np.int64)
  return cols


def source_key(source, vocab_file, do_lower_case, max_seq_length, num_examples, seed,
               **settings):
  """`cached_tfrecord`'s key for records written from the file `source`: the file (path,
  size, modification time), the tokenization and sampling, and the writer's own `settings`."""
  stat = tfrecord_io.gfile().stat(source)
  return dict(source=tfrecord_io.absolute(source), length=stat.length,
              mtime_nsec=stat.mtime_nsec, vocab_file=tfrecord_io.absolute(vocab_file),
              do_lower_case=do_lower_case, max_seq_length=max_seq_length,
              num_examples=num_examples, seed=seed, **settings)


def cached_tfrecord(path, key, build):
  """Writes `path` (+ `path.json`) with `build()` unless both exist for the same `key`.

  Args:
    key: JSON-able dict of everything the records depend on (task, split, vocab, lengths...).
    build: () -> (features, columns, meta): the schema, the columns to write and a JSON-able
      dict stored next to the records (e.g. guids for submissions).
  Returns:
    The meta dict, with "key" and "num_examples" added.
  """
  meta_path = path + ".json"
  fs = tfrecord_io.gfile()
  if fs.exists(path) and fs.exists(meta_path):
    try:
      meta = json.loads(tfrecord_io.read_text(meta_path))
    except ValueError:
      meta = {}
    if meta.get("key") == json.loads(json.dumps(key)):
      found = tfrecord_io.count_records(path)
      if found == meta.get("num_examples"):
        logging.info("Reusing %s (%d examples)", path, found)
        return meta
      state = "is truncated" if found is None else f"holds {found} records"
      logging.warning("%s %s but %s says %s: writing it again", path, state, meta_path,
                      meta.get("num_examples"))
  features, columns, meta = build()
  meta = dict(meta, key=key,
              num_examples=tfrecord_io.write_examples(path, features, columns))
  tfrecord_io.write_text(meta_path, json.dumps(meta))
  logging.info("Wrote %s (%d examples)", path, meta["num_examples"])
  return meta
