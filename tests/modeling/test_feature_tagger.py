"""The feature-based tagger: layer choice and combination, masking, names, config."""

import numpy as np
import pytest

from official_bert.interop import weight_names
from official_bert.modeling import layer_selection
from official_bert.modeling import model_types
from official_bert.modeling.bert_config import BertConfig
from official_bert.modeling.encoder import BertEncoder
from official_bert.modeling.feature_tagger import BertFeatureTagger

CONFIG = BertConfig(vocab_size=60, hidden_size=8, num_hidden_layers=3, num_attention_heads=2,
                    intermediate_size=16, hidden_act="gelu", hidden_dropout_prob=0.1,
                    attention_probs_dropout_prob=0.1, max_position_embeddings=32,
                    type_vocab_size=2, initializer_range=0.02)


def _inputs(lengths, seq):
  rng = np.random.default_rng(0)
  ids = rng.integers(1, 60, size=(len(lengths), seq)).astype(np.int32)
  mask = (np.arange(seq)[None] < np.array(lengths)[:, None]).astype(np.int32)
  return {"input_word_ids": ids * mask, "input_mask": mask,
          "input_type_ids": np.zeros_like(ids)}


def _tagger(layers, combine, units=5, num_layers=2):
  return BertFeatureTagger(BertEncoder.from_bert_config(CONFIG), 4, layers=layers,
                           combine=combine, lstm_units=units, lstm_layers=num_layers)


def test_parse_layers_names_and_errors():
  assert layer_selection.parse_layers(["-1", "-2", "-3", "-4"], 12) == [12, 11, 10, 9]
  assert layer_selection.parse_layers("embeddings,0,-1", 3) == [0, 1, 3]
  assert layer_selection.parse_layers(["all"], 3) == [1, 2, 3]
  for bad, words in ((["x"], "not a layer"), (["3"], "out of range"), (["-4"], "out of range"),
                     (["-1", "2"], "-1 and 2 name the same layer"), ([], "names no layer")):
    with pytest.raises(ValueError, match=words):
      layer_selection.parse_layers(bad, 3)


def test_embedding_output_is_the_embeddings_layer():
  encoder = BertEncoder.from_bert_config(CONFIG)
  x = _inputs([5, 3], 6)
  out = encoder(x, training=False)
  want = encoder.embeddings(x["input_word_ids"], x["input_type_ids"], training=False)
  np.testing.assert_array_equal(out["embedding_output"], want)
  assert len(layer_selection.hidden_states(out)) == CONFIG.num_hidden_layers + 1


@pytest.mark.parametrize("combine", layer_selection.COMBINE_MODES)
def test_features_combine_the_chosen_layers(combine):
  model = _tagger([-1, -3, 0], combine)  # last, first Transformer layer, embeddings
  model.build()
  x = _inputs([6, 2], 6)
  states = layer_selection.hidden_states(model.encoder(x, training=False))
  chosen = [np.asarray(states[i]) for i in (0, 1, 3)]  # sorted hidden-state indices
  want = {"concat": np.concatenate(chosen, -1), "sum": sum(chosen),
          "weighted": sum(chosen) / 3,  # softmax of zero weights, scale 1
          "last": chosen[-1]}[combine]
  got = np.asarray(model.features(x))
  assert got.shape == (2, 6, model.feature_width)
  np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
  assert model({**x}, training=False)["logits"].shape == (2, 6, 4)


def test_weighted_mix_uses_softmax_weights_and_scale():
  model = _tagger([-1, -2], "weighted")
  model.build()
  model.mix.layer_weights.assign([0.0, np.log(3.0)])
  model.mix.layer_scale.assign(2.0)
  x = _inputs([4], 4)
  states = layer_selection.hidden_states(model.encoder(x, training=False))
  want = 2.0 * (0.25 * np.asarray(states[2]) + 0.75 * np.asarray(states[3]))
  np.testing.assert_allclose(model.features(x), want, rtol=1e-5, atol=1e-6)


def test_padding_does_not_change_real_positions():
  """The BiLSTM's mask: the backward direction starts at each sentence's last real token."""
  model = _tagger([-1], "last")
  model.build()
  short, long = _inputs([4], 4), _inputs([4], 9)
  for k in short:
    long[k][:, :4] = short[k]
  a = np.asarray(model(short, training=False)["logits"])
  b = np.asarray(model(long, training=False)["logits"])[:, :4]
  np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_encoder_is_frozen_and_names_cover_every_weight():
  model = _tagger([-1, -2], "weighted")
  model.build()
  encoder_ids = {id(v) for v in model.encoder.weights}
  assert not encoder_ids & {id(v) for v in model.trainable_weights}
  pairs = weight_names.model_weight_pairs(model)
  names = [n for n, _ in pairs]
  assert len(names) == len(set(names))
  assert {id(v) for _, v in pairs} == {id(v) for v in model.weights}
  assert "cls/feature_tagger/lstm_1/bw/recurrent_kernel" in names
  assert weight_names.infer_model_type(names) == "feature_tagger"
  assert model_types.model_type_of(model) == "feature_tagger"


def test_config_round_trip_and_build_model():
  model = _tagger([-1, -2, -3], "concat", units=6, num_layers=1)
  clone = BertFeatureTagger.from_config(model.get_config())
  assert clone.head_config() == model.head_config() == {
      "layers": [1, 2, 3], "combine": "concat", "lstm_units": 6, "lstm_layers": 1}
  built = model_types.build_model("feature_tagger", CONFIG, 4, model.head_config())
  clone.build()
  assert [(n, tuple(v.shape)) for n, v in weight_names.model_weight_pairs(built)] == [
      (n, tuple(v.shape)) for n, v in weight_names.model_weight_pairs(clone)]
  first_head_weight = next(weight_names.feature_tagger_head_pairs(built))[1]
  assert first_head_weight.shape == (CONFIG.hidden_size * 3, 4 * 6)
  with pytest.raises(ValueError, match="head's configuration"):
    model_types.build_model("feature_tagger", CONFIG, 4)
  with pytest.raises(ValueError, match="more than once"):
    _tagger([-1, 3], "concat")
