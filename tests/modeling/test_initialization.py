"""Deferred initial draws (`modeling/layers/initialization.py`): a model built to be assigned
next skips BERT's random draws, and the weights it is not assigned get exactly the values a
plain build draws; `from_preset` and `save` build that way."""

import os

from conftest import minilm_dir
from harness import TINY
from harness import tiny_folder
import keras
import numpy as np
import pytest

import official_bert as ob
from official_bert.api import presets
from official_bert.interop import weight_loading
from official_bert.interop import weights_io
from official_bert.modeling.encoder import BertEncoder
from official_bert.modeling.finetuning_models import BertClassifier
from official_bert.modeling.layers import initialization
from official_bert.modeling.layers.config_layer import truncated_normal
from official_bert.modeling.pretraining_model import BertPretrainingModel


def _values(model):
  """{(position, name): value}: equal keys for two builds of a model (paths differ: their
  scopes' names count the models built)."""
  return {(i, v.name): keras.ops.convert_to_numpy(v)
          for i, v in enumerate(model.variables) if "seed_generator" not in v.path}


def _pretraining_model(seed):
  keras.utils.set_random_seed(seed)
  model = BertPretrainingModel(BertEncoder.from_bert_config(TINY))
  model.build()
  return model


def test_deferred_weights_are_zeros_then_drawn_as_a_plain_build_draws_them():
  plain = _values(_pretraining_model(7))
  with initialization.draws_deferred() as deferred:
    model = _pretraining_model(7)
  inside = _values(model)
  # BERT's truncated normals gave zeros (kernels, embeddings, the NSP head's weights); the
  # LayerNorms' ones and the biases' zeros are their own initializers'.
  drawn = ("kernel", "embeddings", "output_weights")
  skipped = [k for k in inside if any(n in k[1] for n in drawn)]
  assert len(skipped) >= 2 * 6 + 3 + 2, skipped
  for path in skipped:
    assert not inside[path].any(), path
    assert plain[path].any(), path
  assert len(deferred.skipped) == len(skipped)  # one initializer per weight
  # The caller assigned the encoder's weights; the heads' are drawn.
  for variable in model.encoder.variables:
    variable.assign(keras.ops.ones(variable.shape, variable.dtype))
  deferred.draw(model, model.encoder.variables)
  encoder = {id(v) for v in model.encoder.variables}
  after = _values(model)
  for (i, path), value in after.items():
    if id(model.variables[i]) in encoder:
      assert (value == 1).all(), path
    else:
      np.testing.assert_array_equal(value, plain[(i, path)], err_msg=path)


def test_a_deferred_weight_missing_from_the_model_is_an_error():
  with initialization.draws_deferred() as deferred:
    lost = keras.layers.Dense(4, kernel_initializer=truncated_normal(0.02))
    lost.build((None, 3))
    kept = keras.layers.Dense(4, kernel_initializer=truncated_normal(0.02))
    kept.build((None, 3))
  with pytest.raises(RuntimeError, match="1 of 2 deferred initial weights are not in the model"):
    deferred.draw(kept, [])
  # Outside the context the initializer draws again; a context is not nested, and one left
  # by an error is over.
  assert keras.ops.convert_to_numpy(truncated_normal(0.02)((3, 4))).any()
  with initialization.draws_deferred():
    with pytest.raises(RuntimeError, match="already active"):
      with initialization.draws_deferred():
        pass
  with pytest.raises(ValueError):
    with initialization.draws_deferred():
      raise ValueError("a bad file")
  assert keras.ops.convert_to_numpy(truncated_normal(0.02)((3, 4))).any()


def test_heads_a_file_lacks_are_drawn_as_a_plain_build_draws_them(tmp_path):
  """An encoder's file into a pretraining model (export --allow_random_head): the encoder
  loaded, both heads (deferred, then drawn) equal to a plain build's."""
  folder = tiny_folder(tmp_path / "tiny")
  weights = weights_io.read_weights(folder)
  plain = _pretraining_model(9)
  weights_io.assign_weights(plain, weights, require_heads=False)
  model, untrained = weights_io.built_and_assigned(
      lambda: _pretraining_model(9),
      lambda network: weights_io.assign_weights(network, weights, require_heads=False))
  loaded = [name for name in weights.tensors if name not in untrained]
  assert untrained and all(name.startswith("cls/") for name in untrained)
  assert loaded and not any(name.startswith("cls/") for name in loaded)
  expected, got = _values(plain), _values(model)
  assert sorted(got) == sorted(expected)
  for key in expected:
    np.testing.assert_array_equal(got[key], expected[key], err_msg=key[1])
  next_sentence = [k for k in got if k[1] == "output_weights"]  # drawn, not zeros
  assert next_sentence and all(got[k].any() for k in next_sentence)


def test_from_preset_and_save_give_the_weights_a_plain_build_and_assign_gives(tmp_path):
  folder = tiny_folder(tmp_path / "tiny")
  preset = presets.load(folder)

  def plain_build():  # without deferral: built (drawn), then assigned
    keras.utils.set_random_seed(3)
    model = BertClassifier(BertEncoder.from_bert_config(TINY, name="encoder"), num_labels=3)
    model.build()
    weight_loading.assign_canonical_weights(model, preset.weights.tensors, folder,
                                            require_heads=False)
    return model

  def build():
    keras.utils.set_random_seed(3)
    return BertClassifier(BertEncoder.from_bert_config(TINY, name="encoder"), num_labels=3)

  deferred, untrained = presets.built_and_assigned(build, preset, require_heads=False)
  assert sorted(untrained) == ["output_bias", "output_weights"]
  expected = _values(plain_build())
  got = _values(deferred)
  assert sorted(got) == sorted(expected)
  for key in expected:
    np.testing.assert_array_equal(got[key], expected[key], err_msg=key[1])

  # The API: a new head is drawn, the encoder loaded; `save` writes every weight.
  classifier = ob.TextClassifier.from_preset(folder, num_classes=2, sequence_length=16)
  assert sorted(classifier.untrained_weights) == ["output_bias", "output_weights"]
  head = [v for v in classifier.network.variables if v.path.endswith("output_weights")]
  assert keras.ops.convert_to_numpy(head[0]).std() > 0.01
  classifier.save(str(tmp_path / "saved"))
  again = ob.TextClassifier.from_preset(str(tmp_path / "saved"))
  want = weight_loading.export_canonical_weights(classifier.network)
  have = weight_loading.export_canonical_weights(again.network)
  assert sorted(want) == sorted(have)
  for name in want:
    np.testing.assert_array_equal(have[name], want[name], err_msg=name)


def test_a_real_model_loads_its_file_exactly():
  path = minilm_dir()
  if not os.path.exists(path):
    pytest.skip(f"needs {path}")
  backbone = ob.Backbone.from_preset(path)
  tensors = presets.load(path).weights.tensors
  loaded = weight_loading.export_canonical_weights(backbone)
  assert sorted(loaded) == sorted(tensors)
  for name, value in tensors.items():
    np.testing.assert_array_equal(loaded[name], value, err_msg=name)
