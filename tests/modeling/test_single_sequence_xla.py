"""`BertEncoder.xla_single_sequence`: a batch of one runs XLA-compiled, with the same outputs."""

from conftest import xla_compiled_calls
import numpy as np
import pytest
import tensorflow as tf

from official_bert.modeling.encoder import BertEncoder

TINY = dict(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=24, max_position_embeddings=12, type_vocab_size=2)
SPEC = {name: tf.TensorSpec([None, None], tf.int32)
        for name in ("input_word_ids", "input_mask", "input_type_ids")}
# Masks of batches of one: widths 5 and 9 are padded to 8 and 12 (not 16:
# max_position_embeddings) in the compiled call and cut back; 12 is the longest; trailing
# padding (serve_ids clients, TF-Hub's fixed length) is cut off before it (3 of 12 real: run
# at 8); a hole in the mask; all padding. Then batches of 3 and of 0 (the usual path).
MASKS = [[1] * 5, [1] * 6 + [0] * 3, [1] * 12, [1] * 3 + [0] * 9, [1, 1, 0, 1, 1, 0, 0, 0, 0, 0],
         [0] * 6, [[1] * 9, [1] * 4 + [0] * 5, [1] * 7 + [0] * 2], np.zeros([0, 6])]


def _inputs(mask, seed=0):
  mask = np.array(mask, np.int32).reshape([-1, np.shape(mask)[-1]])
  rng = np.random.default_rng(seed)
  batch, seq = mask.shape
  return {"input_word_ids": rng.integers(1, 40, (batch, seq)).astype(np.int32),
          "input_mask": mask,
          "input_type_ids": (np.arange(seq)[None] >= seq // 2).astype(np.int32).repeat(batch, 0)}


def _assert_same(got, want, what):
  for key in ("sequence_output", "embedding_output", "pooled_output"):
    assert got[key].shape == want[key].shape, (what, key)
    np.testing.assert_allclose(got[key], want[key], atol=1e-5, rtol=0, err_msg=f"{what} {key}")
  for g, w in zip(got["encoder_outputs"], want["encoder_outputs"], strict=True):
    np.testing.assert_allclose(g, w, atol=1e-5, rtol=0, err_msg=what)


@pytest.mark.parametrize("skip_padding", [True, False])
def test_a_batch_of_one_is_compiled_with_the_usual_outputs(skip_padding):
  encoder = BertEncoder(**TINY)
  encoder.skip_padding = skip_padding
  usual = tf.function(lambda x: encoder(x, training=False), input_signature=[SPEC])
  want = [usual(_inputs(mask, i)) for i, mask in enumerate(MASKS)]
  assert not xla_compiled_calls(usual.get_concrete_function().graph)
  encoder.xla_single_sequence = True
  compiled = tf.function(lambda x: encoder(x, training=False), input_signature=[SPEC])
  assert xla_compiled_calls(compiled.get_concrete_function().graph)
  for i, mask in enumerate(MASKS):
    if not skip_padding and i == 5:
      # All padding, computed: every key masked, attention averages over all positions,
      # and the compiled path's 2 more (width 8) change that meaningless average.
      continue
    x = _inputs(mask, i)
    got = compiled(x)
    # Padded positions: 0 where the usual path skips them (and the pooler reads a padded
    # first token as 0), else the padded computation's values; embeddings everywhere.
    _assert_same(got, want[i], f"mask {mask}")
    if skip_padding:
      assert (got["sequence_output"].numpy()[x["input_mask"] == 0] == 0).all()
  training = tf.function(lambda x: encoder(x, training=True), input_signature=[SPEC])
  assert not xla_compiled_calls(training.get_concrete_function().graph)


def test_only_a_batch_of_one_takes_the_compiled_path_eagerly():
  encoder = BertEncoder(**TINY)
  encoder.skip_padding = True
  inputs = [_inputs(MASKS[6]), _inputs(MASKS[1]), _inputs(MASKS[0])]
  want = [encoder(x, training=False) for x in inputs]
  encoder.xla_single_sequence = True
  compiled = encoder._single_sequence._compiled  # pylint: disable=protected-access
  _assert_same(encoder(inputs[0], training=False), want[0], "batch of 3")
  assert compiled.experimental_get_tracing_count() == 0
  for x, w in zip(inputs[1:], want[1:]):
    _assert_same(encoder(x, training=False), w, "batch of 1")
  # 6 real of 9 and 5 of 5 both run at width 8: one trace.
  assert compiled.experimental_get_tracing_count() == 1
