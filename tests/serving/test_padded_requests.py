"""Text signatures pad a request to its longest text, and give the fixed-length outputs.

Two `ServingModule`s around the same Keras model, one padding to `max_seq_length` (as the
original's features) and one to the batch's longest input rounded up to 8 (what exports do):
every output on the real tokens must agree, for every model type, pairs, SWAG choices and a
classifier's --doc_stride windows included.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from data_prep import tokenization
from official_bert.modeling import model_types
from official_bert.modeling.bert_config import BertConfig
from official_bert.serving import classifier_outputs
from official_bert.serving import signatures
from official_bert.serving import text_packing

SEQ = 40
VOCAB = ("[PAD] [UNK] [CLS] [SEP] [MASK] the a cat sat on mat dog who what where . , ? ! "
         "##s ##ing play guitar man one two three").split()
CONFIG = BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=2,
                    num_attention_heads=2, intermediate_size=32, max_position_embeddings=64)
HEAD_CONFIG = {"layers": [-1, -2], "combine": "concat", "lstm_units": 4, "lstm_layers": 1}
SHORT = ["the cat sat", "who [MASK] ?", "a dog", ""]
SHORT_B = ["a mat", "", "the man play guitar", "one"]
LONG = ["one two three " * 20, "the cat sat on the mat . " * 3]


def _modules(model_type, doc_stride=0):
  keras.utils.set_random_seed(3)
  head_config = HEAD_CONFIG if model_type == "feature_tagger" else None
  model = model_types.build_model(model_type, CONFIG, 3, head_config)
  rng = np.random.default_rng(0)
  for variable in model.variables:  # apart from the init's 0.02: outputs differ clearly
    variable.assign(rng.normal(scale=0.2, size=variable.shape).astype("float32"))
  tokenizer = tokenization.TextTokenizer(VOCAB, lower_case=True)
  options = classifier_outputs.Options(doc_stride=doc_stride)
  return [signatures.ServingModule(
      model, model_type, signatures.make_preprocessor(tokenizer, VOCAB, SEQ, multiple),
      VOCAB, top_k=3, classifier=options).signatures() for multiple in (None, 8)]


def _call(signature, *args):
  return {k: v.numpy() for k, v in signature.python_function(*args).items()}


def _same(padded, fixed, width):
  """Every output equal; a per-position one on the first `width` positions."""
  assert sorted(padded) == sorted(fixed)
  for key, value in padded.items():
    want = fixed[key]
    if key in ("input_word_ids", "input_mask", "input_type_ids", "tokens", "sequence_output",
               "logits", "probabilities", "predicted_ids", "predicted_labels") and (
                   want.ndim >= 2 and want.shape[1] == SEQ and value.shape[1] == width):
      assert (fixed["input_mask"][:, width:] == 0).all()  # only padding is cut
      want = want[:, :width]
    if value.dtype.kind == "f":
      np.testing.assert_allclose(value, want, atol=1e-5, rtol=0, err_msg=key)
    else:
      np.testing.assert_array_equal(value, want, err_msg=key)


@pytest.mark.parametrize("model_type", ["encoder", "pretraining", "classifier", "tagger",
                                        "feature_tagger"])
def test_text_signatures_pad_to_the_longest_text_and_agree(model_type):
  fixed, padded = _modules(model_type)
  text, text_b = tf.constant(SHORT), tf.constant(SHORT_B)
  got = _call(padded["serving_default"], text)
  # [CLS] who [MASK] ? [SEP] is the longest: 5 tokens, rounded up to 8.
  assert got["input_word_ids"].shape == (len(SHORT), 8)
  _same(got, _call(fixed["serving_default"], text), 8)
  got = _call(padded["serving_pair"], text, text_b)
  # [CLS] a dog [SEP] the man play guitar [SEP]: 9 tokens, rounded up to 16.
  assert got["input_word_ids"].shape == (len(SHORT), 16)
  _same(got, _call(fixed["serving_pair"], text, text_b), 16)
  # A long text is cut at max_seq_length, as before.
  got = _call(padded["serving_default"], tf.constant(SHORT + LONG))
  assert got["input_word_ids"].shape == (len(SHORT) + 2, SEQ)
  _same(got, _call(fixed["serving_default"], tf.constant(SHORT + LONG)), SEQ)


def test_serve_ids_take_any_length_up_to_the_maximum():
  _, padded = _modules("tagger")
  by_text = _call(padded["serving_default"], tf.constant(SHORT))
  ids = [tf.constant(by_text[name]) for name in signatures.INPUT_NAMES]  # [4, 8] each
  by_ids = _call(padded["serve_ids"], *ids)
  assert by_ids["logits"].shape[:2] == (len(SHORT), 8)
  np.testing.assert_allclose(by_ids["logits"], by_text["logits"], atol=1e-5, rtol=0)


def test_multiple_choice_pads_to_the_longest_pair():
  fixed, padded = _modules("multiple_choice")
  text = tf.constant(SHORT[:2])
  choices = tf.constant([["a mat", "the dog"], ["one two", "the man play guitar"]])
  got = _call(padded["serving_default"], text, choices)
  assert got["input_word_ids"].shape == (2, 2, 16)  # the longest pair: 10 tokens
  want = _call(fixed["serving_default"], text, choices)
  for key in ("logits", "probabilities", "predicted_ids"):
    np.testing.assert_allclose(got[key], want[key], atol=1e-5, rtol=0, err_msg=key)
  np.testing.assert_array_equal(got["input_word_ids"], want["input_word_ids"][..., :16])


def test_classifier_windows_pad_to_the_longest_window():
  fixed, padded = _modules("classifier", doc_stride=8)
  for texts in (SHORT, SHORT + LONG):
    got = _call(padded["serving_default"], tf.constant(texts))
    want = _call(fixed["serving_default"], tf.constant(texts))
    assert (got["num_windows"] == want["num_windows"]).all()
    for key in ("logits", "probabilities", "predicted_ids"):
      np.testing.assert_allclose(got[key], want[key], atol=1e-5, rtol=0, err_msg=key)
  assert got["num_windows"].max() > 1  # the long texts were windowed
  assert _call(padded["serving_default"], tf.constant(SHORT))["input_word_ids"].shape[1] == 8


def test_padded_width_rounds_up_and_stops_at_the_maximum():
  lengths = tf.constant([3, 9, 1], tf.int64)
  assert int(text_packing.padded_width(lengths, 128, 8)) == 16
  assert int(text_packing.padded_width(lengths, 12, 8)) == 12
  assert int(text_packing.padded_width(lengths, 128, None)) == 128
  assert int(text_packing.padded_width(tf.zeros([0], tf.int64), 128, 8)) == 0
