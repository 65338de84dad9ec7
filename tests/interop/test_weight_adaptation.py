"""--resize_vocab / --extend_positions: a warm start grows a smaller checkpoint's vocabulary
and position tables, the same way from ours, TF1 and Hugging Face files."""

import dataclasses
import os

import keras
import numpy as np
import pytest

from official_bert.interop import checkpointing
from official_bert.interop import hf_weights
from official_bert.interop import tf1_checkpoint
from official_bert.interop import weight_loading
from official_bert.interop import weight_names
from official_bert.modeling import model_types
from official_bert.modeling.bert_config import BertConfig

TINY = BertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                  intermediate_size=12, max_position_embeddings=8, type_vocab_size=2)
WORDS, POSITIONS = weight_loading.WORD_EMBEDDINGS, weight_loading.POSITION_EMBEDDINGS
BIAS = weight_names.MLM_SCOPE + "output_bias"
BOTH = weight_loading.Adaptation(resize_vocab=True, extend_positions=True)


def _weights(model):
  return {n: v.numpy() for n, v in weight_names.model_weight_pairs(model)}


def _model(**overrides):
  return model_types.build_model("pretraining", dataclasses.replace(TINY, **overrides))


@pytest.fixture(scope="module", name="written")
def _written(tmp_path_factory):
  """Random (non-initializer) weights of TINY as ours, TF1 and HF: (weights, {fmt: dir})."""
  keras.utils.set_random_seed(0)
  model = _model()
  rng = np.random.default_rng(3)
  for _, variable in weight_names.model_weight_pairs(model):
    variable.assign(rng.standard_normal(variable.shape).astype(np.float32))
  root = str(tmp_path_factory.mktemp("formats"))
  ours = checkpointing.model_checkpoint(model).write(os.path.join(root, "ours", "ckpt-3"))
  tf1_checkpoint.write_checkpoint_state(ours)
  tf1_checkpoint.write_tf1_checkpoint(_weights(model),
                                      os.path.join(root, "tf1", "bert_model.ckpt"))
  hf_weights.save_hf_weights(model, os.path.join(root, "hf", "model.safetensors"),
                             prefix="bert.")
  return _weights(model), {fmt: os.path.join(root, fmt) for fmt in ("ours", "tf1", "hf")}


@pytest.mark.parametrize("fmt", ["ours", "tf1", "hf"])
def test_grows_vocab_rows_to_their_mean_and_tiles_positions(written, fmt):
  old, dirs = written
  model = _model(vocab_size=24, max_position_embeddings=20)
  checkpointing.warm_start(model, dirs[fmt], BOTH)
  new = _weights(model)
  np.testing.assert_array_equal(new[WORDS][:20], old[WORDS])
  np.testing.assert_allclose(new[WORDS][20:], np.tile(old[WORDS].mean(0), (4, 1)), atol=1e-6)
  np.testing.assert_array_equal(new[BIAS][:20], old[BIAS])
  np.testing.assert_allclose(new[BIAS][20:], np.full(4, old[BIAS].mean()), atol=1e-6)
  # Longformer: row i is trained row i % 8.
  np.testing.assert_array_equal(new[POSITIONS], old[POSITIONS][np.arange(20) % 8])
  for name in set(old) - {WORDS, BIAS, POSITIONS}:
    np.testing.assert_array_equal(new[name], old[name], err_msg=name)


@pytest.mark.parametrize("fmt", ["ours", "hf"])
def test_without_the_flags_a_larger_config_is_an_error_naming_the_flag(written, fmt):
  _, dirs = written
  with pytest.raises(ValueError) as error:
    checkpointing.warm_start(_model(vocab_size=24, max_position_embeddings=16), dirs[fmt])
  message = str(error.value)
  assert "cannot load BERT weights" in message
  assert "file has (20, 8), model expects (24, 8)" in message
  assert "vocab_size=24 is larger than the checkpoint's 20; --resize_vocab" in message
  assert ("max_position_embeddings=16 is larger than the checkpoint's 8; --extend_positions"
          in message)
  # Only one flag: the other table is still an error.
  with pytest.raises(ValueError, match="--extend_positions fills"):
    checkpointing.warm_start(_model(vocab_size=24, max_position_embeddings=16), dirs[fmt],
                             weight_loading.Adaptation(resize_vocab=True))


def test_shrinking_is_an_error_naming_both_sizes(written):
  _, dirs = written
  model = _model(vocab_size=16, max_position_embeddings=4)
  before = _weights(model)
  with pytest.raises(ValueError) as error:
    checkpointing.warm_start(model, dirs["tf1"], BOTH)
  message = str(error.value)
  assert ("vocab_size=16 is smaller than the checkpoint's 20: a vocabulary cannot shrink, not "
          "even with --resize_vocab" in message)
  assert ("max_position_embeddings=4 is smaller than the checkpoint's 8: the position table "
          "cannot shrink, not even with --extend_positions" in message)
  for name, value in _weights(model).items():  # nothing assigned
    np.testing.assert_array_equal(value, before[name])


def test_other_shape_mismatches_are_never_adapted(written):
  _, dirs = written
  with pytest.raises(ValueError, match=r"model expects \(24, 16\)\n") as error:
    checkpointing.warm_start(_model(vocab_size=24, hidden_size=16, intermediate_size=12),
                             dirs["ours"], BOTH)
  assert "--resize_vocab" not in str(error.value)
