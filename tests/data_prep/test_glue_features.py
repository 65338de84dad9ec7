"""Classifier features: truncation, packing, TFRecords written and read back, the task's loss."""

import json
import os

from conftest import GLUE_DATA
from conftest import UNCASED_VOCAB
from conftest import need
import numpy as np
import pytest
import tensorflow as tf

from data_prep import schema
from data_prep import tfrecord_io
from data_prep.classification import features as cf
from data_prep.classification import glue_processors as gp
from data_prep.classification import glue_records
from official_bert.modeling.bert_config import BertConfig
from official_bert.tasks.classification import ClassificationTask
from official_bert.training import input_pipeline
from official_bert.training import optimization
from official_bert.training import training_loop


@pytest.fixture(scope="module")
def tokenizer():
  return cf.cached_tokenizer(need(UNCASED_VOCAB), True)


def test_truncate_seq_pair_takes_from_the_longer_side():
  a, b = list(range(6)), list(range(10, 13))
  cf.truncate_seq_pair(a, b, 7)
  assert a == [0, 1, 2, 3] and b == [10, 11, 12]
  a, b = [1, 2, 3], [4, 5, 6]
  cf.truncate_seq_pair(a, b, 4)  # ties take from b first
  assert a == [1, 2] and b == [4, 5]


def test_pack_pair_layout():
  ids, mask, segments, cut = cf.pack_pair([5, 6, 7], [8, 9], 101, 102, 10)
  assert ids.tolist() == [101, 5, 6, 7, 102, 8, 9, 102, 0, 0]
  assert mask.tolist() == [1] * 8 + [0, 0]
  assert segments.tolist() == [0] * 5 + [1] * 3 + [0, 0]
  assert not cut
  ids, _, segments, cut = cf.pack_pair(list(range(1, 10)), None, 101, 102, 6)
  assert ids.tolist() == [101, 1, 2, 3, 4, 102] and cut and segments.sum() == 0
  ids, _, _, cut = cf.pack_pair([1] * 5, [2] * 3, 101, 102, 8)  # 5 + 3 -> 5 slots: 3 + 2
  assert ids.tolist() == [101, 1, 1, 1, 102, 2, 2, 102] and cut


def test_convert_examples_labels_and_errors(tokenizer):
  examples = [gp.InputExample("d-0", "Hello world!", "Unaffable.", "entailment"),
              gp.InputExample("d-1", "Short.", None, "not_entailment")]
  cols = cf.convert_examples(examples, ["entailment", "not_entailment"], 12, tokenizer)
  assert cols["label_ids"].ravel().tolist() == [0, 1]
  assert tokenizer.convert_ids_to_tokens(cols["input_ids"][0][:10].tolist()) == [
      "[CLS]", "hello", "world", "!", "[SEP]", "una", "##ffa", "##ble", ".", "[SEP]"]
  assert cols["is_real_example"].ravel().tolist() == [1, 1]
  with pytest.raises(ValueError, match=r"example d-0: unknown label 'entailment'; known "
                     r"labels: \['0', '1'\]"):
    cf.convert_examples(examples, ["0", "1"], 12, tokenizer)
  regression = cf.convert_examples([examples[0]._replace(label=3.25)], [None], 12, tokenizer)
  assert regression["label_ids"].dtype == np.float32 and regression["label_ids"][0, 0] == 3.25
  # An empty (or blank) second text is one segment, as the original writes it and the export
  # packs it: it was [CLS] a [SEP] [SEP], where the export served [CLS] a [SEP].
  empty = cf.convert_examples([examples[1]._replace(text_b=b) for b in ("", "  ", None)],
                              ["entailment", "not_entailment"], 12, tokenizer)
  for name in ("input_ids", "input_mask", "segment_ids"):
    assert (empty[name] == empty[name][2]).all(), (name, empty[name])


def test_written_records_read_back_through_the_input_pipeline(tmp_path):
  data = os.path.join(GLUE_DATA, "STS-B")  # 50 rows of the dev set (tests/data)
  processor = gp.get_processor("STS-B")
  path, meta = glue_records.write_split(processor, "dev", str(tmp_path),
                                        UNCASED_VOCAB, True, 32, data_dir=data)
  assert meta["num_examples"] == 50 and meta["guids"][:2] == ["dev-0", "dev-1"]
  # Same settings: reused, not rewritten; other settings: rewritten.
  stamp = os.stat(path).st_mtime_ns
  assert glue_records.write_split(processor, "dev", str(tmp_path), UNCASED_VOCAB,
                                  True, 32, data_dir=data)[1] == meta
  assert os.stat(path).st_mtime_ns == stamp
  with open(path + ".json", encoding="utf-8") as f:
    assert json.load(f)["key"]["max_seq_length"] == 32
  ds = input_pipeline.dataset(path, schema.classifier_features(32, regression=True),
                                             batch_size=4, is_training=False)
  first = next(iter(ds))
  assert sorted(first) == ["input_mask", "input_type_ids", "input_word_ids", "is_real_example",
                           "label_ids"]
  assert first["input_word_ids"].dtype == tf.int32 and first["input_word_ids"].shape == (4, 32)
  assert first["label_ids"].dtype == tf.float32 and first["label_ids"].shape == (4,)
  labels = np.concatenate([b["label_ids"].numpy() for b in ds])
  expected = [e.label for e in processor.get_examples(data, "dev")]
  np.testing.assert_allclose(labels, expected, rtol=1e-6)  # all of them, in file order
  # A training stream skips exactly what a resumed run consumed.
  train = input_pipeline.dataset(
      path, schema.classifier_features(32, True), 4, is_training=True, seed=1)
  resumed = input_pipeline.dataset(
      path, schema.classifier_features(32, True), 4, is_training=True, seed=1, skip_examples=8)
  stream = [b["label_ids"].numpy() for b in train.take(3)]
  np.testing.assert_array_equal(next(iter(resumed))["label_ids"], stream[2])
  with pytest.raises(ValueError, match="lack feature"):
    next(iter(input_pipeline.dataset(
        path, schema.classifier_features(32) + (schema.Feature("x", "int64", 1),), 2, False)))


@pytest.mark.parametrize("regression", [False, True])
def test_classification_task_loss_and_accuracy(regression):
  config = BertConfig(vocab_size=30, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                      intermediate_size=32, max_position_embeddings=16, type_vocab_size=2)
  task = ClassificationTask(config, 1 if regression else 3, 8, is_regression=regression)
  logits = np.array([[2.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 5.0]], np.float32)
  if regression:
    logits = logits[:, :1]
  labels = np.array([0.5, 1.0, 2.0], np.float32) if regression else np.array([0, 1, 1])
  features = {"label_ids": labels, "is_real_example": np.array([1, 1, 0])}  # last is padding
  total = float(task.loss_sums(features, {"logits": logits})[task.loss_name])
  assert float(task.loss_normalizers(features)[task.loss_name]) == 2.0
  if regression:
    assert total == pytest.approx((2 - 0.5) ** 2 + (0 - 1) ** 2)
  else:
    log_softmax = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    assert total == pytest.approx(-log_softmax[0, 0] - log_softmax[1, 1], rel=1e-6)
    num, den = task.metric_sums(features, {"logits": logits})["accuracy"]
    assert (float(num), float(den)) == (2.0, 2.0)


def test_regression_task_trains_in_the_training_loop(tmp_path):
  """One step of STS-B-style regression through the shared Trainer (all-reduced metrics)."""
  config = BertConfig(vocab_size=30522, hidden_size=16, num_hidden_layers=1,
                      num_attention_heads=2, intermediate_size=32, max_position_embeddings=16,
                      type_vocab_size=2)
  rng = np.random.default_rng(0)
  columns = {"input_ids": rng.integers(1, 999, (8, 16)), "input_mask": np.ones((8, 16), int),
             "segment_ids": np.zeros((8, 16), int), "label_ids": rng.random((8, 1)) * 5,
             "is_real_example": np.ones((8, 1), int)}
  path = str(tmp_path / "train.tf_record")
  tfrecord_io.write_examples(path, schema.classifier_features(16, regression=True), columns)
  task = ClassificationTask(config, 1, 16, is_regression=True)
  strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
  trainer = training_loop.Trainer(strategy, task,
                                  lambda: optimization.create_optimizer("adamw", 1e-3), 4)
  iterator = iter(strategy.distribute_datasets_from_function(
      lambda ctx: task.build_dataset(path, 4, True, ctx, seed=0)))
  metrics = trainer.train_steps(iterator, 2)
  assert np.isfinite(metrics["regression_loss"]) and metrics["mean_absolute_error"] > 0
