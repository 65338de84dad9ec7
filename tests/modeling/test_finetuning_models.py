"""Fine-tuning heads: values against numpy, TF1 names, config round trips, warm start."""

import json

import keras
import numpy as np
import pytest

from official_bert.interop import checkpointing
from official_bert.interop import weight_names
from official_bert.modeling import finetuning_models as fm
from official_bert.modeling.bert_config import BertConfig
from official_bert.modeling.encoder import BertEncoder
from official_bert.modeling.pretraining_model import BertPretrainingModel

CONFIG = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=32, max_position_embeddings=16, type_vocab_size=2)


def _encoder():
  keras.utils.set_random_seed(0)
  return BertEncoder.from_bert_config(CONFIG)


def _inputs(batch=3, seq=7, rng=np.random.default_rng(0)):
  mask = (np.arange(seq)[None, :] < rng.integers(2, seq + 1, (batch, 1))).astype("int32")
  return {"input_word_ids": rng.integers(1, 50, (batch, seq)).astype("int32") * mask,
          "input_mask": mask, "input_type_ids": np.zeros((batch, seq), "int32")}


MODELS = [
    (lambda e: fm.BertClassifier(e, num_labels=3), "logits", (3, 3),
     ["output_weights", "output_bias"]),
    (lambda e: fm.BertSpanLabeler(e), "start_logits", (3, 7),
     ["cls/squad/output_weights", "cls/squad/output_bias"]),
    (lambda e: fm.BertTokenClassifier(e, num_labels=5), "logits", (3, 7, 5),
     ["cls/token_classifier/output_weights", "cls/token_classifier/output_bias"]),
]


@pytest.mark.parametrize("make,key,shape,head_names", MODELS)
def test_heads_values_names_and_round_trip(make, key, shape, head_names):
  model = make(_encoder())
  model.build()
  inputs = _inputs()
  out = model(inputs)
  assert tuple(out[key].shape) == shape
  names = [n for n, _ in weight_names.model_weight_pairs(model)]
  assert names[-2:] == head_names and len(names) == len(set(names))
  # The head is x @ W^T + b on the encoder output the head reads.
  enc = model.encoder(inputs)
  w, b = (v.numpy() for _, v in weight_names.model_weight_pairs(model)[-2:])
  if isinstance(model, fm.BertClassifier):
    np.testing.assert_allclose(out["logits"], enc["pooled_output"] @ w.T + b, atol=1e-5)
  elif isinstance(model, fm.BertSpanLabeler):
    expected = np.asarray(enc["sequence_output"]) @ w.T + b
    np.testing.assert_allclose(out["start_logits"], expected[..., 0], atol=1e-5)
    np.testing.assert_allclose(out["end_logits"], expected[..., 1], atol=1e-5)
  else:
    np.testing.assert_allclose(out["logits"], np.asarray(enc["sequence_output"]) @ w.T + b,
                               atol=1e-5)
  config = json.loads(json.dumps(keras.saving.serialize_keras_object(model)))
  clone = keras.saving.deserialize_keras_object(config)
  clone.build()
  clone.set_weights(model.get_weights())
  for k in out:
    np.testing.assert_allclose(clone(inputs)[k], out[k], atol=1e-6)


def test_multiple_choice_scores_each_choice_from_cls():
  model = fm.BertMultipleChoice(_encoder())
  model.build()
  single = _inputs(batch=6)
  grouped = {k: v.reshape(2, 3, -1) for k, v in single.items()}
  logits = np.asarray(model(grouped)["logits"])
  assert logits.shape == (2, 3)
  w, b = model.projection.output_weights.numpy(), model.projection.output_bias.numpy()
  pooled = np.asarray(model.encoder(single)["pooled_output"])
  np.testing.assert_allclose(logits.reshape(-1), (pooled @ w.T + b)[:, 0], atol=1e-5)
  clone = keras.saving.deserialize_keras_object(
      json.loads(json.dumps(keras.saving.serialize_keras_object(model))))
  assert isinstance(clone, fm.BertMultipleChoice)


def test_classifier_warm_starts_from_a_pretraining_checkpoint(tmp_path):
  pretrain = BertPretrainingModel(_encoder())
  pretrain.build()
  path = checkpointing.model_checkpoint(pretrain).write(str(tmp_path / "ckpt"))
  keras.utils.set_random_seed(1)
  classifier = fm.BertClassifier(BertEncoder.from_bert_config(CONFIG), num_labels=2)
  classifier.build()
  head_before = classifier.projection.output_weights.numpy().copy()
  checkpointing.warm_start(classifier, path)
  source = dict(weight_names.model_weight_pairs(pretrain))
  for name, variable in weight_names.model_weight_pairs(classifier):
    if name.startswith("bert/"):
      np.testing.assert_array_equal(variable.numpy(), source[name].numpy())
  np.testing.assert_array_equal(classifier.projection.output_weights.numpy(), head_before)
