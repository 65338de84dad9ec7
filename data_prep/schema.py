"""The TFRecord feature contract between our writers (`data_prep`) and readers (`official_bert`).

Names, shapes and dtypes are those of google-research/bert's writers, so files are
interchangeable with the original `run_pretraining.py`/`run_squad.py`/`run_classifier.py` and
the TF Model Garden loaders. This module imports no TensorFlow at module level: worker
processes that only serialize examples use it too.
"""

import collections

INT64 = "int64"
FLOAT32 = "float32"

Feature = collections.namedtuple("Feature", ["name", "dtype", "length"])

# The Model Garden's `use_v2_feature_names` spelling; readers accept either.
V2_NAMES = {"input_ids": "input_word_ids", "segment_ids": "input_type_ids"}

GZIP_MAGIC = b"\x1f\x8b"


def pretraining_features(max_seq_length, max_predictions_per_seq, v2_names=False):
  """The original `create_pretraining_data.py` features, in its writing order."""
  L, P = max_seq_length, max_predictions_per_seq  # pylint: disable=invalid-name
  features = (
      Feature("input_ids", INT64, L),  # zero-padded token ids
      Feature("input_mask", INT64, L),  # 1 for real tokens
      Feature("segment_ids", INT64, L),  # 0: [CLS] A [SEP], 1: B [SEP]
      Feature("masked_lm_positions", INT64, P),  # sorted, zero-padded
      Feature("masked_lm_ids", INT64, P),  # original ids at those positions
      Feature("masked_lm_weights", FLOAT32, P),  # 1.0 real, 0.0 padding
      Feature("next_sentence_labels", INT64, 1),  # 1 = random next sentence
  )
  if v2_names:
    features = tuple(f._replace(name=V2_NAMES.get(f.name, f.name)) for f in features)
  return features


def tf_feature_spec(features):
  """`tf.io.parse_single_example` spec for a tuple of `Feature`s."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  dtypes = {INT64: tf.int64, FLOAT32: tf.float32}
  return {f.name: tf.io.FixedLenFeature([f.length], dtypes[f.dtype]) for f in features}


def compression_of(path):
  """"GZIP" if the file starts with the gzip magic bytes, else "" (TFRecordDataset's names)."""
  with open(path, "rb") as f:
    return "GZIP" if f.read(2) == GZIP_MAGIC else ""
