"""Our Keras BERT against an independent numpy forward pass of the original
google-research math (tests/numpy_bert.py), with random weights addressed by canonical TF1
names."""

import keras
import numpy as np
from numpy_bert import numpy_bert
from numpy_bert import numpy_heads
import pytest

from official_bert.interop import weight_loading
from official_bert.interop import weight_names
from official_bert.modeling.encoder import BertEncoder
from official_bert.modeling.pretraining_model import BertPretrainingModel

CONFIG = dict(vocab_size=50, hidden_size=32, num_hidden_layers=2,
              num_attention_heads=2, intermediate_size=48,
              max_position_embeddings=16, type_vocab_size=2,
              hidden_act="gelu")


def _random_canonical_weights(model, seed):
  """Random values of a realistic scale for every canonical variable.

  The default 0.02-stddev init makes LayerNorm dominate; larger weights and
  non-trivial gamma/beta make the comparison sensitive to real mistakes.
  """
  rng = np.random.default_rng(seed)
  out = {}
  for name, variable in weight_names.model_weight_pairs(model):
    shape = tuple(variable.shape)
    if name.endswith("/gamma"):
      value = rng.uniform(0.5, 1.5, shape)
    elif "embeddings" in name and "LayerNorm" not in name:
      value = rng.normal(0.0, 1.0, shape)
    else:
      value = rng.normal(0.0, 0.3, shape)
    out[name] = value.astype(np.float32)
  return out


@pytest.fixture(name="inputs")
def _inputs_fixture():
  rng = np.random.default_rng(7)
  batch, seq = 3, 9
  lengths = np.array([9, 5, 2])
  mask = (np.arange(seq)[None, :] < lengths[:, None]).astype(np.int32)
  word_ids = rng.integers(1, CONFIG["vocab_size"], (batch, seq))
  type_ids = (np.arange(seq)[None, :] >= 4).astype(np.int32).repeat(batch, 0)
  return {"input_word_ids": (word_ids * mask).astype(np.int32),
          "input_mask": mask, "input_type_ids": type_ids * mask}


def test_encoder_matches_numpy_reference(inputs):
  keras.utils.set_random_seed(0)
  encoder = BertEncoder(**CONFIG)
  weights = _random_canonical_weights(encoder, seed=1)
  weight_loading.assign_canonical_weights(encoder, weights, "<random>")
  out = encoder(inputs, training=False)
  seq_ref, pooled_ref = numpy_bert(
      weights, inputs["input_word_ids"], inputs["input_mask"],
      inputs["input_type_ids"], heads=CONFIG["num_attention_heads"])
  real = inputs["input_mask"].astype(bool)
  np.testing.assert_allclose(np.asarray(out["sequence_output"])[real],
                             seq_ref[real], atol=1e-5, rtol=0)
  np.testing.assert_allclose(np.asarray(out["pooled_output"]), pooled_ref,
                             atol=1e-5, rtol=0)


def test_pretraining_heads_match_numpy_reference(inputs):
  keras.utils.set_random_seed(0)
  model = BertPretrainingModel(BertEncoder(**CONFIG))
  weights = _random_canonical_weights(model, seed=2)
  weight_loading.assign_canonical_weights(model, weights, "<random>")
  positions = np.array([[0, 3, 8], [1, 4, 0], [1, 0, 0]], np.int32)
  out = model(dict(inputs, masked_lm_positions=positions), training=False)
  seq_ref, pooled_ref = numpy_bert(
      weights, inputs["input_word_ids"], inputs["input_mask"],
      inputs["input_type_ids"], heads=CONFIG["num_attention_heads"])
  mlm_ref, nsp_ref = numpy_heads(weights, seq_ref, pooled_ref, positions)
  # Logits scale with the embedding norm, so compare relative to it.
  np.testing.assert_allclose(np.asarray(out["masked_lm_logits"]), mlm_ref,
                             atol=1e-4, rtol=1e-5)
  np.testing.assert_allclose(np.asarray(out["next_sentence_logits"]),
                             nsp_ref, atol=1e-5, rtol=0)


def test_export_then_assign_is_identity(inputs):
  keras.utils.set_random_seed(0)
  a = BertEncoder(**CONFIG)
  b = BertEncoder(**CONFIG)
  names = weight_loading.assign_canonical_weights(
      b, weight_loading.export_canonical_weights(a), "<a>")
  assert len(names) == len(a.weights)
  np.testing.assert_array_equal(a(inputs)["sequence_output"],
                                b(inputs)["sequence_output"])
