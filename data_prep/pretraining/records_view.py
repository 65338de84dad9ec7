"""Pretraining TFRecords read back and described: counts, statistics and a few decoded
instances (`show_pretraining_data`; `official_bert.demo` reads the masked labels here too).

Masked records and unmasked ones (`--masking=none`, whose words are grouped by `word_starts`)
alike; the kind is read from the files.
"""

import numpy as np
import tensorflow as tf

from data_prep import record_checks
from data_prep import schema
from data_prep import tfrecord_io
from data_prep import tokenization


def report(input_file, vocab_file, max_seq_length, max_predictions_per_seq, num_examples):
  """The lines `show_pretraining_data` prints: the files, then `describe`'s lines.

  Args:
    input_file: TFRecord file(s): comma-separated, globs allowed.
  """
  # The training input's files, in its order (a writer's hidden temporary one never).
  paths = sorted(tfrecord_io.expand_patterns(input_file))
  inv_vocab = {i: t for i, t in enumerate(tokenization.load_vocab_tokens(vocab_file))}
  f = read_instances(paths, max_seq_length, max_predictions_per_seq)
  return [f"files: {', '.join(paths)}"] + describe(f, inv_vocab, num_examples)


def _is_unmasked(path):
  """Whether the file's first record is an unmasked one (word_starts, no masked_lm_*)."""
  names = record_checks.first_example(path, schema.compression_of(path)).features.feature
  return "word_starts" in names and "masked_lm_positions" not in names


def read_instances(paths, max_seq_length, max_predictions_per_seq):
  """All instances of the files as numpy arrays (either feature naming; gzip detected;
  masked or unmasked records, as the first file holds). ValueError naming the file (and the
  flag) for a file that is not such records, or is damaged."""
  if _is_unmasked(paths[0]):
    features = schema.unmasked_pretraining_features(max_seq_length)
  else:
    features = schema.pretraining_features(max_seq_length, max_predictions_per_seq)
  _, v2_names = record_checks.check_files(paths, features)
  spec = schema.tf_feature_spec(features, v2_names=v2_names)
  # Each column (the writer's v1 name) and its key in these files' records.
  keys = {name: schema.V2_NAMES.get(name, name) if v2_names else name
          for name in schema.tf_feature_spec(features)}
  columns = {name: [] for name in keys}
  for path in paths:
    ds = tf.data.TFRecordDataset(path, compression_type=schema.compression_of(path))
    count = 0
    try:
      for record in ds:
        parsed = tf.io.parse_single_example(record, spec)
        for name, key in keys.items():
          columns[name].append(parsed[key].numpy())
        count += 1
    except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as e:
      raise ValueError(f"{path}: damaged after record {count} (truncated, corrupt, or records "
                       f"of other lengths): {record_checks.op_error_text(e)}") from None
  return {k: np.stack(v) for k, v in columns.items()}


def _describe_unmasked(f, inv_vocab, num_examples):
  """Unmasked records: words (tokens joined, split where word_starts says) per instance."""
  lengths = f["input_mask"].sum(1)
  starts = f["word_starts"]
  lines = [
      f"instances: {len(lengths)} (unmasked: --masking=none)",
      f"tokens per instance: mean {lengths.mean():.1f}, min {lengths.min()}, "
      f"max {lengths.max()}",
      f"word starts: {starts.sum()} ({100 * starts.sum() / lengths.sum():.2f}% of tokens)",
      f"random next sentence (label 1): {100 * f['next_sentence_labels'].mean():.1f}%",
  ]
  for i in range(min(num_examples, len(lengths))):
    out = []
    for k, t in enumerate(f["input_ids"][i, :lengths[i]]):
      token = inv_vocab[int(t)]
      if starts[i, k] or not out or {token, out[-1]} & {"[CLS]", "[SEP]"}:
        out.append(token)
      else:
        out[-1] += token  # continues the word
    lines.append(f"--- instance {i} (one word per space):")
    lines.append(" ".join(out))
  return lines


def describe(f, inv_vocab, num_examples):
  """Human-readable lines: totals, statistics, decoded examples."""
  if "masked_lm_weights" not in f:
    return _describe_unmasked(f, inv_vocab, num_examples)
  lengths = f["input_mask"].sum(1)
  valid = f["masked_lm_weights"] > 0
  lines = [
      f"instances: {len(lengths)}",
      f"tokens per instance: mean {lengths.mean():.1f}, min {lengths.min()}, "
      f"max {lengths.max()}",
      f"masked: {valid.sum()} ({100 * valid.sum() / lengths.sum():.2f}% of tokens)",
      f"random next sentence (label 1): {100 * f['next_sentence_labels'].mean():.1f}%",
  ]
  for i in range(min(num_examples, len(lengths))):
    tokens = [inv_vocab[t] for t in f["input_ids"][i, :lengths[i]]]
    count = int(valid[i].sum())
    answers = {int(p): inv_vocab[int(t)] for p, t in
               zip(f["masked_lm_positions"][i, :count], f["masked_lm_ids"][i, :count])}
    shown = [f"{t}<{answers[k]}>" if k in answers else t for k, t in enumerate(tokens)]
    label = "random next" if f["next_sentence_labels"][i, 0] else "actual next"
    lines.append(f"--- instance {i} ({label}; masked token<original>):")
    lines.append(" ".join(shown))
  return lines
