"""The record contract: each schema once, with the original writers' names, order and dtypes."""

import tensorflow as tf

from data_prep import schema

INPUTS = ["input_ids", "input_mask", "segment_ids"]


def _layout(features):
  return [(f.name, f.dtype, f.length) for f in features]


def test_every_schema_in_the_original_writing_order():
  assert [f.name for f in schema.pretraining_features(8, 2)] == INPUTS + [
      "masked_lm_positions", "masked_lm_ids", "masked_lm_weights", "next_sentence_labels"]
  assert [f.name for f in schema.squad_features(8, False)] == ["unique_ids"] + INPUTS
  assert _layout(schema.squad_features(8, True))[4:] == [
      ("start_positions", "int64", 1), ("end_positions", "int64", 1),
      ("is_impossible", "int64", 1)]
  assert _layout(schema.classifier_features(8))[3:] == [
      ("label_ids", "int64", 1), ("is_real_example", "int64", 1)]
  assert schema.classifier_features(8, regression=True)[3].dtype == schema.FLOAT32
  assert _layout(schema.ner_features(8))[3:] == [("label_ids", "int64", 8),
                                                  ("label_weights", "float32", 8)]
  assert _layout(schema.swag_features(8)) == [(n, "int64", 32) for n in INPUTS] + [
      ("label_ids", "int64", 1)]


def test_v2_names_and_parse_spec():
  v2 = schema.tf_feature_spec(schema.ner_features(4), v2_names=True)
  assert sorted(v2) == ["input_mask", "input_type_ids", "input_word_ids", "label_ids",
                        "label_weights"]
  assert v2["label_weights"] == tf.io.FixedLenFeature([4], tf.float32)
  assert ([f.name for f in schema.with_v2_names(schema.squad_features(4, False))] ==
          ["unique_ids", "input_word_ids", "input_mask", "input_type_ids"])
  assert schema.with_v2_names(schema.ner_features(4), False) == schema.ner_features(4)
