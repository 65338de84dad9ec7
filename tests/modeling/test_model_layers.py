"""Unit tests of the Keras 3 BERT layers, config, activations and losses."""

import json
import logging
import math

from conftest import ATTENTION_BLOCK_COUNTS
import keras
import numpy as np
import pytest
import tensorflow as tf

from official_bert.interop import model_files
from official_bert.modeling import activations
from official_bert.modeling.bert_config import BertConfig
from official_bert.modeling.encoder import BertEncoder
from official_bert.modeling.layers import BertEmbeddings
from official_bert.modeling.layers import BertSelfAttention
from official_bert.modeling.layers import MaskedLMHead
from official_bert.modeling.layers import NextSentenceHead
from official_bert.modeling.layers import TransformerBlock
from official_bert.modeling.pretraining_model import BertPretrainingModel
from official_bert.modeling.tensorflow_only import token_packing

TINY = dict(vocab_size=40, hidden_size=16, num_hidden_layers=2,
            num_attention_heads=2, intermediate_size=24,
            max_position_embeddings=12, type_vocab_size=2)


SEED = 1234  # conftest's autouse fixture seeds every test of this file with it


def _inputs(batch=2, seq=6, vocab=40, seed=0):
  rng = np.random.default_rng(seed)
  mask = np.ones((batch, seq), np.int32)
  mask[0, 4:] = 0  # Padding on the first example only.
  return {
      "input_word_ids": rng.integers(1, vocab, (batch, seq)).astype(np.int32),
      "input_mask": mask,
      "input_type_ids": (np.arange(seq)[None, :] >= seq // 2).astype(
          np.int32).repeat(batch, axis=0),
  }


def _json_round_trip(obj):
  """Serializes through a JSON string, as `model.save` would."""
  blob = json.dumps(keras.saving.serialize_keras_object(obj))
  return keras.saving.deserialize_keras_object(json.loads(blob))


def _assert_round_trip(layer, call):
  """Rebuilt layer: same config and, after copying weights, same outputs."""
  expected = call(layer)
  rebuilt = _json_round_trip(layer)
  assert type(rebuilt) is type(layer)
  assert rebuilt.get_config() == layer.get_config()
  rebuilt.build()
  assert len(rebuilt.weights) == len(layer.weights)
  rebuilt.set_weights(layer.get_weights())
  actual = call(rebuilt)
  for a, e in zip(keras.tree.flatten(actual), keras.tree.flatten(expected)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(e))


# --- activations -----------------------------------------------------------


def test_gelu_variants_at_known_points():
  gelu_tanh = activations.get_activation("gelu")
  gelu_exact = activations.get_activation("gelu_exact")
  np.testing.assert_allclose(float(gelu_tanh(1.0)), 0.8411920, atol=1e-6)
  np.testing.assert_allclose(float(gelu_exact(1.0)), 0.8413447, atol=1e-6)
  x = np.array([-3.0, -1.0, -0.5, 0.0, 0.5, 2.0, 4.0], np.float32)
  tanh_ref = 0.5 * x * (1 + np.tanh(
      math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
  erf_ref = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x])
  np.testing.assert_allclose(np.asarray(gelu_tanh(x)), tanh_ref, atol=1e-6)
  np.testing.assert_allclose(np.asarray(gelu_exact(x)), erf_ref, atol=1e-6)
  # HF's "gelu_new" is the same tanh approximation as the original "gelu".
  assert activations.get_activation("gelu_new") is gelu_tanh


def test_other_activations_and_unknown_name():
  x = np.array([-2.0, 0.0, 3.0], np.float32)
  np.testing.assert_allclose(
      np.asarray(activations.get_activation("relu")(x)), [0, 0, 3])
  np.testing.assert_allclose(
      np.asarray(activations.get_activation("tanh")(x)), np.tanh(x),
      rtol=1e-6)
  with pytest.raises(ValueError, match="swish"):
    activations.get_activation("swish")
  with pytest.raises(ValueError, match="by name"):
    activations.get_activation(np.tanh)


# --- BertConfig --------------------------------------------------------------


def test_bert_config_defaults_match_original():
  config = BertConfig(vocab_size=30522)
  assert config.hidden_size == 768 and config.num_hidden_layers == 12
  assert config.intermediate_size == 3072 and config.hidden_act == "gelu"
  assert config.type_vocab_size == 16 and config.initializer_range == 0.02
  assert sorted(config.to_dict()) == sorted([
      "vocab_size", "hidden_size", "num_hidden_layers",
      "num_attention_heads", "intermediate_size", "hidden_act",
      "hidden_dropout_prob", "attention_probs_dropout_prob",
      "max_position_embeddings", "type_vocab_size", "initializer_range"])


def test_bert_config_json_round_trip(tmp_path):
  config = BertConfig(vocab_size=99, hidden_size=64, num_attention_heads=4,
                      type_vocab_size=2, hidden_act="gelu_exact")
  path = tmp_path / "bert_config.json"
  model_files.write_config_file(path, config)
  assert model_files.read_config(path) == config
  assert json.loads(config.to_json_string()) == config.to_dict()


def test_bert_config_reads_original_style_file(tmp_path, caplog):
  path = tmp_path / "bert_config.json"
  path.write_text(json.dumps({
      "attention_probs_dropout_prob": 0.1, "hidden_act": "gelu",
      "hidden_dropout_prob": 0, "hidden_size": 768,
      "initializer_range": 0.02, "intermediate_size": 3072,
      "max_position_embeddings": 512, "num_attention_heads": 12,
      "num_hidden_layers": 12, "type_vocab_size": 2, "vocab_size": 30522,
      "directionality": "bidi"}))
  with caplog.at_level(logging.WARNING):
    config = model_files.read_config(path)
  assert config.type_vocab_size == 2
  assert config.hidden_dropout_prob == 0.0
  assert isinstance(config.hidden_dropout_prob, float)
  assert "directionality" in caplog.text


@pytest.mark.parametrize("content, key", [
    ({"hidden_size": 768}, "vocab_size"),
    ({"vocab_size": "30522"}, "vocab_size"),
    ({"vocab_size": 10, "num_hidden_layers": 2.0}, "num_hidden_layers"),
    ({"vocab_size": 10, "num_hidden_layers": True}, "num_hidden_layers"),
    ({"vocab_size": 10, "hidden_act": "swish"}, "hidden_act"),
    ({"vocab_size": 10, "hidden_dropout_prob": "0.1"}, "hidden_dropout_prob"),
    ({"vocab_size": 10, "hidden_size": 100}, "hidden_size"),
    ({"vocab_size": 0}, "vocab_size"),
])
def test_bert_config_errors_name_file_and_key(tmp_path, content, key):
  path = tmp_path / "bad_config.json"
  path.write_text(json.dumps(content))
  with pytest.raises(ValueError) as e:
    model_files.read_config(path)
  assert str(path) in str(e.value) and key in str(e.value)


def test_bert_config_invalid_json(tmp_path):
  path = tmp_path / "broken.json"
  path.write_text("{not json")
  with pytest.raises(ValueError, match="broken.json"):
    model_files.read_config(path)


# --- layer / model serialization round trips --------------------------------


def test_embeddings_round_trip():
  x = _inputs()
  layer = BertEmbeddings(vocab_size=40, hidden_size=16,
                         max_position_embeddings=12, type_vocab_size=2)
  _assert_round_trip(
      layer, lambda l: l(x["input_word_ids"], x["input_type_ids"]))
  out = layer(x["input_word_ids"], x["input_type_ids"])
  assert tuple(out.shape) == (2, 6, 16)
  assert layer.embedding_table is layer.word_embeddings.embeddings


def test_self_attention_round_trip():
  x = np.random.default_rng(0).normal(size=(2, 5, 16)).astype(np.float32)
  mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.int32)
  layer = BertSelfAttention(hidden_size=16, num_attention_heads=4)
  _assert_round_trip(layer, lambda l: l(x, padding_mask=mask))


def test_transformer_block_round_trip():
  x = np.random.default_rng(0).normal(size=(2, 5, 16)).astype(np.float32)
  mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.int32)
  layer = TransformerBlock(hidden_size=16, num_attention_heads=2,
                           intermediate_size=24, hidden_act="gelu_exact")
  _assert_round_trip(layer, lambda l: l(x, padding_mask=mask))


def test_masked_lm_head_round_trip():
  rng = np.random.default_rng(0)
  seq = rng.normal(size=(2, 5, 16)).astype(np.float32)
  table = rng.normal(size=(40, 16)).astype(np.float32)
  positions = np.array([[0, 3, 3], [4, 1, 0]], np.int32)
  layer = MaskedLMHead(vocab_size=40, hidden_size=16)
  _assert_round_trip(layer, lambda l: l(seq, positions, table))
  assert tuple(layer(seq, positions, table).shape) == (2, 3, 40)
  # The head owns no [vocab, hidden] matrix: the decoder is the passed table.
  assert all(tuple(w.shape) != (40, 16) for w in layer.weights)


def test_next_sentence_head_round_trip():
  pooled = np.random.default_rng(0).normal(size=(3, 16)).astype(np.float32)
  layer = NextSentenceHead(hidden_size=16)
  _assert_round_trip(layer, lambda l: l(pooled))
  assert tuple(layer.output_weights.shape) == (2, 16)
  assert tuple(layer(pooled).shape) == (3, 2)


def test_encoder_round_trip_and_outputs():
  x = _inputs()
  encoder = BertEncoder(**TINY)
  _assert_round_trip(encoder, lambda m: m(x))
  out = encoder(x)
  assert tuple(out["sequence_output"].shape) == (2, 6, 16)
  assert tuple(out["pooled_output"].shape) == (2, 16)
  assert len(out["encoder_outputs"]) == 2
  np.testing.assert_array_equal(out["encoder_outputs"][-1],
                                out["sequence_output"])


def test_encoder_from_bert_config():
  config = BertConfig(**TINY)
  for encoder in (BertEncoder.from_config(config),
                  BertEncoder.from_bert_config(config)):
    assert encoder.bert_config == config
  encoder = BertEncoder.from_config(BertEncoder(**TINY).get_config())
  assert encoder.bert_config == config
  with pytest.raises(ValueError, match="hidden_act"):
    BertEncoder(**dict(TINY, hidden_act="swish"))


def test_encoder_ignores_padded_tokens():
  x = _inputs()
  encoder = BertEncoder(**TINY)
  changed = dict(x, input_word_ids=x["input_word_ids"].copy())
  changed["input_word_ids"][0, 4:] = 7  # Only padded positions change.
  a, b = encoder(x), encoder(changed)
  np.testing.assert_allclose(a["sequence_output"][0, :4],
                             b["sequence_output"][0, :4], atol=1e-6)
  np.testing.assert_allclose(a["pooled_output"], b["pooled_output"],
                             atol=1e-6)


@pytest.mark.parametrize("blocks", ATTENTION_BLOCK_COUNTS)
def test_skip_padding_runs_the_real_tokens_only_with_the_padded_values(blocks, monkeypatch):
  # 19 sequences of uneven lengths: attention's 8 blocks of 3 (the last one empty), or 2 of
  # 10 and 9, each sized to its longest. One mask has a hole (padding need not be a suffix).
  monkeypatch.setattr(token_packing, "ATTENTION_BLOCKS", blocks)
  lengths = np.array([9, 2, 5, 1, 7, 3, 9, 4, 6, 1, 8, 2, 5, 5, 3, 7, 2, 6, 4])
  x = _inputs(batch=len(lengths), seq=9)
  x["input_mask"] = (np.arange(9)[None] < lengths[:, None]).astype(np.int32)
  x["input_mask"][4, 3] = 0
  encoder = BertEncoder(**TINY)
  padded = encoder(x, training=False)
  encoder.skip_padding = True
  packed = tf.function(lambda: encoder(x, training=False))()  # a graph, as exports run it
  real = x["input_mask"] == 1
  for key in ("sequence_output", "embedding_output"):
    np.testing.assert_allclose(np.asarray(packed[key])[real], np.asarray(padded[key])[real],
                               atol=1e-5)
  assert (np.asarray(packed["sequence_output"])[~real] == 0).all()
  for got, want in zip(packed["encoder_outputs"], padded["encoder_outputs"]):
    np.testing.assert_allclose(np.asarray(got)[real], np.asarray(want)[real], atol=1e-5)
  np.testing.assert_allclose(packed["pooled_output"], padded["pooled_output"], atol=1e-5)
  # Fewer sequences than blocks, and a batch with no real token at all (serve_ids takes any
  # mask): all-zero sequence outputs, the pooler's value at zeros.
  for mask in (x["input_mask"][:2], np.zeros((3, 9), np.int32)):
    few = {k: v[:len(mask)] for k, v in x.items()} | {"input_mask": mask}
    encoder.skip_padding = False
    want = np.asarray(encoder(few, training=False)["sequence_output"])
    encoder.skip_padding = True
    got = tf.function(lambda f=few: encoder(f, training=False))()["sequence_output"]
    np.testing.assert_allclose(np.asarray(got)[mask == 1], want[mask == 1], atol=1e-5)
    assert (np.asarray(got)[mask == 0] == 0).all()
  empty = encoder({k: v[:0] for k, v in x.items()}, training=False)  # eagerly, no sequence
  assert tuple(empty["sequence_output"].shape) == (0, 9, TINY["hidden_size"])
  # Training keeps the padded computation (its dropout and gradients are the original's).
  training = encoder(x, training=True)
  assert (np.asarray(training["sequence_output"])[~real] != 0).all()


def test_pretraining_model_round_trip_and_tying():
  x = dict(_inputs(), masked_lm_positions=np.array([[1, 2], [0, 5]],
                                                    np.int32))
  model = BertPretrainingModel(BertEncoder(**TINY))
  _assert_round_trip(model, lambda m: m(x))
  out = model(x)
  assert tuple(out["masked_lm_logits"].shape) == (2, 2, 40)
  assert tuple(out["next_sentence_logits"].shape) == (2, 2)
  # Exactly one [vocab, hidden] variable: the decoder reuses the embeddings.
  assert sum(tuple(w.shape) == (40, 16) for w in model.weights) == 1
  table = model.encoder.embeddings.embedding_table
  table.assign(table.numpy() * 2.0)
  assert not np.allclose(model(x)["masked_lm_logits"],
                         out["masked_lm_logits"])


def test_dropout_only_in_training():
  x = _inputs()
  encoder = BertEncoder(**TINY)
  a = encoder(x, training=False)["sequence_output"]
  b = encoder(x, training=False)["sequence_output"]
  c = encoder(x, training=True)["sequence_output"]
  np.testing.assert_array_equal(a, b)
  assert not np.allclose(a, c)
