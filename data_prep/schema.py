"""The TFRecord feature contract between our writers (`data_prep`) and readers (`official_bert`).

Every record schema lives here, once: pretraining, SQuAD, classifier (GLUE; multi-label for
own files), NER, SWAG and sentence-embedding pairs.
Names, shapes and dtypes are those of google-research/bert's writers where one exists, so
files are interchangeable with the original `run_pretraining.py`/`run_squad.py`/
`run_classifier.py` and the TF Model Garden loaders. This module imports no TensorFlow at
module level: worker processes that only serialize examples use it too.
"""

import collections
import errno

INT64 = "int64"
FLOAT32 = "float32"

Feature = collections.namedtuple("Feature", ["name", "dtype", "length"])

# The Model Garden's `use_v2_feature_names` spelling, which is also the model's input names;
# readers accept either spelling in files.
V2_NAMES = {"input_ids": "input_word_ids", "segment_ids": "input_type_ids"}

GZIP_MAGIC = b"\x1f\x8b"
SWAG_NUM_CHOICES = 4


def with_v2_names(features, v2_names=True):
  """`features` renamed to the v2 (model) names where they differ; as given if not v2_names."""
  if not v2_names:
    return tuple(features)
  return tuple(f._replace(name=V2_NAMES.get(f.name, f.name)) for f in features)


def _inputs(length):
  """The three model inputs every schema starts with (zero-padded, 1 = real token)."""
  return (Feature("input_ids", INT64, length), Feature("input_mask", INT64, length),
          Feature("segment_ids", INT64, length))


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
  return with_v2_names(features, v2_names)


def unmasked_pretraining_features(max_seq_length, v2_names=False):
  """Pretraining records written with `--masking=none`, for masking in the input pipeline
  (`run_pretraining --dynamic_masking`): the token ids as they are, no `masked_lm_*`."""
  L = max_seq_length  # pylint: disable=invalid-name
  features = (
      Feature("input_ids", INT64, L),  # zero-padded token ids, nothing masked
      Feature("input_mask", INT64, L),  # 1 for real tokens
      Feature("segment_ids", INT64, L),  # 0: [CLS] A [SEP], 1: B [SEP]
      Feature("next_sentence_labels", INT64, 1),  # 1 = random next sentence (0 without NSP)
      # 1 where a whole word starts (a token that is not a "##" piece, or the first character
      # of a segmented Chinese word); 0 for continuations, [CLS], [SEP] and padding.
      Feature("word_starts", INT64, L),
  )
  return with_v2_names(features, v2_names)


def squad_features(max_seq_length, is_training):
  """The original run_squad.py `FeatureWriter` features, in its writing order (all int64).

  `is_impossible` is the EXAMPLE's flag, as the original run_squad.py writes it (the Model
  Garden writes "this window does not contain the answer" instead). Impossible questions and
  windows without the answer have start_positions = end_positions = 0 ([CLS]) either way.
  The metadata file written next to prediction records is `data_prep.squad.records`.
  """
  features = (Feature("unique_ids", INT64, 1),) + _inputs(max_seq_length)
  if is_training:
    features += (
        Feature("start_positions", INT64, 1),  # token index in the window's sequence
        Feature("end_positions", INT64, 1),
        Feature("is_impossible", INT64, 1),
    )
  return features


def classifier_features(max_seq_length, regression=False):
  """The original run_classifier.py features; label_ids is float32 for regression (STS-B)."""
  return _inputs(max_seq_length) + (
      Feature("label_ids", FLOAT32 if regression else INT64, 1),
      Feature("is_real_example", INT64, 1))  # 0 only for padding examples


def multi_label_classifier_features(max_seq_length, num_labels):
  """Multi-label classification: label_ids is a multi-hot float32 vector, one per label."""
  return _inputs(max_seq_length) + (
      Feature("label_ids", FLOAT32, num_labels),  # 1.0 where the example has the label
      Feature("is_real_example", INT64, 1))


def ner_features(max_seq_length):
  """Token classification: a label and a weight (1.0 on a word's first piece) per position."""
  L = max_seq_length  # pylint: disable=invalid-name
  return _inputs(L) + (Feature("label_ids", INT64, L), Feature("label_weights", FLOAT32, L))


def swag_features(max_seq_length, num_choices=SWAG_NUM_CHOICES):
  """Multiple choice: inputs of num_choices * L, choice-major (reshape to [choices, L])."""
  return _inputs(num_choices * max_seq_length) + (Feature("label_ids", INT64, 1),)


def embedding_pair_features(max_seq_length):
  """Sentence-embedding training (run_embeddings): two texts, each packed on its own as
  `[CLS] text [SEP]` ([2 * L], text-major: reshape to [2, L]), and their gold similarity.

  `scores` is NaN where the file has no score (pairs of a query and its positive): a loss that
  needs scores skips those pairs.
  """
  return _inputs(2 * max_seq_length) + (Feature("scores", FLOAT32, 1),
                                         Feature("is_real_example", INT64, 1))


def tf_feature_spec(features, v2_names=False):
  """`tf.io.parse_example` spec for a tuple of `Feature`s (under the v2 names if asked)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  dtypes = {INT64: tf.int64, FLOAT32: tf.float32}
  return {f.name: tf.io.FixedLenFeature([f.length], dtypes[f.dtype])
          for f in with_v2_names(features, v2_names)}


def compression_of(path):
  """"GZIP" if the file starts with the gzip magic bytes, else "" (TFRecordDataset's names).

  Reads through `tf.io.gfile`, so gs:// and other remote paths work. A missing file raises
  FileNotFoundError, as `open()` would.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top  (workers import schema)
  try:
    with tf.io.gfile.GFile(path, "rb") as f:
      return "GZIP" if f.read(2) == GZIP_MAGIC else ""
  except tf.errors.NotFoundError:
    raise FileNotFoundError(errno.ENOENT, "No such file or directory", path) from None
