"""HF <-> canonical name mapping and the safetensors loader on tiny models."""

import json
import logging

import keras
import numpy as np
import pytest
from safetensors.numpy import load_file
from safetensors.numpy import save_file

from official_bert.interop import hf_weights
from official_bert.interop import weight_names
from official_bert.interop import weights_io
from official_bert.modeling import model_types
from official_bert.modeling.bert_config import BertConfig
from official_bert.modeling.encoder import BertEncoder
from official_bert.modeling.pretraining_model import BertPretrainingModel

TINY = dict(vocab_size=30, hidden_size=8, num_hidden_layers=2,
            num_attention_heads=2, intermediate_size=12,
            max_position_embeddings=10, type_vocab_size=2)


SEED = 99  # conftest's autouse fixture seeds every test of this file with it


def _inputs():
  return {"input_word_ids": np.array([[2, 5, 9, 3, 0]], np.int32),
          "input_mask": np.array([[1, 1, 1, 1, 0]], np.int32),
          "input_type_ids": np.array([[0, 0, 1, 1, 0]], np.int32)}


def test_canonical_names_cover_every_variable_once():
  model = BertPretrainingModel(BertEncoder(**TINY))
  pairs = weight_names.model_weight_pairs(model)
  assert len({n for n, _ in pairs}) == len(pairs) == len(model.weights)
  assert {id(v) for _, v in pairs} == {id(v) for v in model.weights}
  assert all(weight_names.is_canonical_name(n) for n, _ in pairs)


@pytest.mark.parametrize("model_type", model_types.MODEL_TYPES)
def test_every_model_type_is_named_here_and_recognized_from_its_names(model_type):
  """The names are mapped onto each model from this side: every variable once, the head under
  its scope, and the names alone give back the model type and its number of labels."""
  head_config = {"layers": [-1], "combine": "last", "lstm_units": 4, "lstm_layers": 1}
  model = model_types.build_model(model_type, BertConfig(**TINY), 3, head_config)
  assert model_types.model_type_of(model) == model_type
  pairs = weight_names.model_weight_pairs(model)
  assert len({n for n, _ in pairs}) == len(pairs)
  assert {id(v) for _, v in pairs} == {id(v) for v in model.weights}
  names = [n for n, _ in pairs]
  scope = weight_names.HEAD_SCOPES.get(model_type)
  if scope:
    assert names[-1] == scope + "output_bias"
  assert weight_names.infer_model_type(names) == model_type
  tensors = {n: v.numpy() for n, v in pairs}
  expected = 3 if model_type in model_types.NEEDS_NUM_LABELS else None
  assert weight_names.num_labels_in(tensors, model_type) == expected


def test_a_model_wrapping_an_encoder_gets_its_encoders_names():
  class Wrapper(keras.Model):  # e.g. a sentence embedder: no head of its own
    def __init__(self, encoder):
      super().__init__()
      self.encoder = encoder

    def build(self, input_shape=None):
      self.encoder.build()
      self.built = True

  encoder = BertEncoder(**TINY)
  expected = [(n, id(v)) for n, v in weight_names.model_weight_pairs(encoder)]
  assert [(n, id(v)) for n, v in weight_names.model_weight_pairs(Wrapper(encoder))] == expected


def test_hf_and_tf1_names_round_trip():
  model = BertPretrainingModel(BertEncoder(**TINY))
  for tf1_name, variable in weight_names.model_weight_pairs(model):
    for prefix in ("", "bert."):
      hf_name, transpose = weight_names.tf1_to_hf_name(tf1_name, prefix)
      assert weight_names.hf_to_tf1_name(hf_name) == (tf1_name, transpose)
      assert transpose == tf1_name.endswith("/kernel")
      if tf1_name.startswith("cls/"):
        assert hf_name.startswith("cls.")


@pytest.mark.parametrize("hf_name, expected", [
    ("encoder.layer.11.attention.self.query.weight",
     ("bert/encoder/layer_11/attention/self/query/kernel", True)),
    ("bert.encoder.layer.0.output.LayerNorm.gamma",
     ("bert/encoder/layer_0/output/LayerNorm/gamma", False)),
    ("embeddings.LayerNorm.beta", ("bert/embeddings/LayerNorm/beta", False)),
    ("embeddings.word_embeddings.weight",
     ("bert/embeddings/word_embeddings", False)),
    ("pooler.dense.weight", ("bert/pooler/dense/kernel", True)),
    ("cls.predictions.bias", ("cls/predictions/output_bias", False)),
    ("cls.predictions.transform.dense.weight",
     ("cls/predictions/transform/dense/kernel", True)),
    ("cls.seq_relationship.weight",
     ("cls/seq_relationship/output_weights", False)),
    ("cls.predictions.decoder.weight", None),
    ("embeddings.position_ids", None),
    ("classifier.weight", None),
    ("encoder.layer.0.attention.self.rotary.weight", None),
])
def test_hf_to_tf1_name_examples(hf_name, expected):
  assert weight_names.hf_to_tf1_name(hf_name) == expected


@pytest.mark.parametrize("hf_act, ours", [
    ("gelu", "gelu_exact"), ("gelu_new", "gelu"), ("relu", "relu")])
def test_hf_config_activation_mapping(hf_act, ours):
  config = hf_weights.bert_config_from_hf_dict(
      {"vocab_size": 10, "hidden_size": 8, "num_attention_heads": 2,
       "hidden_act": hf_act, "model_type": "bert", "pad_token_id": 0,
       "layer_norm_eps": 1e-12})
  assert config.hidden_act == ours


def test_hf_config_rejects_unsupported(tmp_path):
  path = tmp_path / "config.json"
  path.write_text(json.dumps({"vocab_size": 10, "hidden_act": "silu"}))
  with pytest.raises(ValueError, match="silu"):
    hf_weights.load_hf_config(path)
  path.write_text(json.dumps({"vocab_size": 10, "layer_norm_eps": 1e-5}))
  with pytest.raises(ValueError, match="layer_norm_eps"):
    hf_weights.load_hf_config(path)
  path.write_text(json.dumps({"hidden_size": 8}))
  with pytest.raises(ValueError, match="vocab_size"):
    hf_weights.load_hf_config(path)
  # Any other key may be left out, as transformers allows: its defaults, not the original's.
  path.write_text(json.dumps({"vocab_size": 10, "hidden_size": 8, "num_attention_heads": 2}))
  config = hf_weights.load_hf_config(path)
  assert (config.type_vocab_size, config.hidden_act, config.intermediate_size) == \
      (2, "gelu_exact", 3072)


@pytest.mark.parametrize("prefix", ["", "bert."])
def test_save_then_load_reproduces_outputs(tmp_path, prefix):
  source = BertPretrainingModel(BertEncoder(**TINY))
  path = str(tmp_path / "model.safetensors")
  hf_weights.save_hf_weights(source, path, prefix=prefix)
  state = load_file(path)
  assert state["cls.predictions.transform.dense.weight"].shape == (8, 8)
  assert (prefix + "encoder.layer.0.intermediate.dense.weight") in state
  assert state[prefix + "encoder.layer.0.intermediate.dense.weight"].shape == (
      12, 8)  # PyTorch Linear layout [out, in].

  target = BertPretrainingModel(BertEncoder(**TINY))
  weights_io.load_weights(target, path)
  x = dict(_inputs(), masked_lm_positions=np.array([[1, 2]], np.int32))
  for key, value in source(x).items():
    np.testing.assert_array_equal(value, target(x)[key])


def _bfloat16_safetensors(state, path):
  """`state` written as a bfloat16 safetensors file (what torch's save_file writes for a
  bfloat16 model), by hand: numpy has no bfloat16. Returns the float32 values it holds."""
  header, chunks, offset, held = {}, [], 0, {}
  for name, value in state.items():
    bits = (np.ascontiguousarray(value, np.float32).view(np.uint32) >> 16).astype("<u2")
    held[name] = (bits.astype(np.uint32) << 16).view(np.float32)
    chunks.append(bits.tobytes())
    header[name] = {"dtype": "BF16", "shape": list(value.shape),
                    "data_offsets": [offset, offset + len(chunks[-1])]}
    offset += len(chunks[-1])
  header["__metadata__"] = {"format": "pt"}
  text = json.dumps(header).encode()
  path.write_bytes(len(text).to_bytes(8, "little") + text + b"".join(chunks))
  return held


def test_a_bfloat16_checkpoint_loads_as_its_float32_values(tmp_path):
  """Hugging Face models are often saved in bfloat16, which numpy (and safetensors.numpy)
  cannot read: it was a KeyError traceback."""
  source = BertEncoder(**TINY)
  hf_weights.save_hf_weights(source, str(tmp_path / "f32.safetensors"))
  held = _bfloat16_safetensors(load_file(str(tmp_path / "f32.safetensors")),
                               tmp_path / "model.safetensors")
  read = hf_weights.read_safetensors(str(tmp_path / "model.safetensors"))
  assert sorted(read) == sorted(held)
  for name, value in held.items():
    assert read[name].dtype == np.float32
    np.testing.assert_array_equal(read[name], value)
  # The model reads it as it reads those values in float32.
  target, reference = BertEncoder(**TINY), BertEncoder(**TINY)
  weights_io.load_weights(target, str(tmp_path / "model.safetensors"))
  save_file(held, str(tmp_path / "held.safetensors"))
  weights_io.load_weights(reference, str(tmp_path / "held.safetensors"))
  for key, value in reference(_inputs()).items():
    np.testing.assert_array_equal(value, target(_inputs())[key])
  (tmp_path / "broken.safetensors").write_bytes(
      (tmp_path / "model.safetensors").read_bytes()[:-7])
  with pytest.raises(ValueError, match="broken.safetensors: not a readable safetensors file"):
    hf_weights.read_safetensors(str(tmp_path / "broken.safetensors"))
  # A dtype neither numpy nor this reader takes (float8): named as such, not as corruption.
  text = json.dumps({"w": {"dtype": "F8_E4M3", "shape": [2], "data_offsets": [0, 2]}}).encode()
  (tmp_path / "f8.safetensors").write_bytes(len(text).to_bytes(8, "little") + text + b"\0\0")
  with pytest.raises(ValueError, match=r"f8.safetensors: tensors of a dtype this reader does "
                     r"not take .*: w \(F8_E4M3\); save the model in float32"):
    hf_weights.read_safetensors(str(tmp_path / "f8.safetensors"))


def test_legacy_gamma_beta_names_and_extras(tmp_path, caplog):
  source = BertEncoder(**TINY)
  path = str(tmp_path / "model.safetensors")
  hf_weights.save_hf_weights(source, path)
  state = load_file(path)
  state = {k.replace("LayerNorm.weight", "LayerNorm.gamma").replace(
      "LayerNorm.bias", "LayerNorm.beta"): v for k, v in state.items()}
  state["classifier.weight"] = np.zeros((3, 8), np.float32)
  state["embeddings.position_ids"] = np.arange(10)[None]
  save_file(state, path)
  target = BertEncoder(**TINY)
  with caplog.at_level(logging.WARNING):
    weights_io.load_weights(target, path)
  assert "classifier.weight" in caplog.text
  assert "position_ids" not in caplog.text
  np.testing.assert_array_equal(source(_inputs())["pooled_output"],
                                target(_inputs())["pooled_output"])


def test_missing_and_misshaped_tensors_are_reported(tmp_path):
  path = str(tmp_path / "model.safetensors")
  hf_weights.save_hf_weights(BertEncoder(**TINY), path)
  state = load_file(path)
  del state["encoder.layer.1.output.dense.bias"]
  state["encoder.layer.0.attention.self.key.weight"] = np.zeros(
      (8, 6), np.float32)
  save_file(state, path)
  target = BertEncoder(**TINY)
  before = [w.numpy().copy() for w in target.weights]
  with pytest.raises(ValueError) as e:
    weights_io.load_weights(target, path)
  message = str(e.value)
  assert path in message
  assert "encoder.layer.1.output.dense.bias" in message
  assert "encoder.layer.0.attention.self.key.weight" in message
  assert "(8, 6)" in message and "(8, 8)" in message
  # Nothing was assigned.
  for old, w in zip(before, target.weights):
    np.testing.assert_array_equal(old, w.numpy())


def test_heads_optional_only_when_asked(tmp_path, caplog):
  path = str(tmp_path / "model.safetensors")
  hf_weights.save_hf_weights(BertEncoder(**TINY), path)  # No cls.* tensors.
  model = BertPretrainingModel(BertEncoder(**TINY))
  with pytest.raises(ValueError, match="cls.seq_relationship.weight"):
    weights_io.load_weights(model, path)
  with caplog.at_level(logging.WARNING):
    names = weights_io.assign_weights(model, weights_io.read_weights(path),
                                      require_heads=False)
  assert "cls/predictions/" in caplog.text
  assert not any(n.startswith("cls/") for n in names)
  # A classifier's head is the original's top-level output_weights and output_bias: named.
  classifier = model_types.build_model("classifier", BertConfig(**TINY), 3)
  caplog.clear()
  with caplog.at_level(logging.WARNING):
    weights_io.assign_weights(classifier, weights_io.read_weights(path), require_heads=False)
  assert "no weights for the model's head (output_bias, output_weights)" in caplog.text or (
      "no weights for the model's head (output_weights, output_bias)" in caplog.text), (
          caplog.text)
