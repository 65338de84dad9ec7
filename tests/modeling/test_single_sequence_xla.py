"""`BertEncoder.xla_single_sequence`: a batch of one runs XLA-compiled, with the same outputs."""

import numpy as np
import pytest
import tensorflow as tf

from official_bert.modeling.encoder import BertEncoder

TINY = dict(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=24, max_position_embeddings=12, type_vocab_size=2)
SPEC = {name: tf.TensorSpec([None, None], tf.int32)
        for name in ("input_word_ids", "input_mask", "input_type_ids")}


def _inputs(lengths, seq, seed=0):
  rng = np.random.default_rng(seed)
  batch = len(lengths)
  return {"input_word_ids": rng.integers(1, 40, (batch, seq)).astype(np.int32),
          "input_mask": (np.arange(seq)[None] < np.array(lengths)[:, None]).astype(np.int32),
          "input_type_ids": (np.arange(seq)[None] >= seq // 2).astype(np.int32).repeat(batch, 0)}


def _compiled_calls(concrete):
  """Function calls the traced graph marks for XLA (in any nested function)."""
  graph = concrete.graph.as_graph_def()
  nodes = list(graph.node) + [n for f in graph.library.function for n in f.node_def]
  return [n.name for n in nodes if n.attr["_XlaMustCompile"].b]


@pytest.mark.parametrize("skip_padding", [True, False])
def test_a_batch_of_one_is_compiled_with_the_usual_outputs(skip_padding):
  encoder = BertEncoder(**TINY)
  encoder.skip_padding = skip_padding
  usual = tf.function(lambda x: encoder(x, training=False), input_signature=[SPEC])
  # Widths 5 and 9 are padded to 8 and 12 (not 16: max_position_embeddings) in the compiled
  # call, and cut back; 12 is the longest; a batch of one may carry padding (serve_ids).
  cases = [([5], 5), ([6], 9), ([12], 12), ([3, 7, 2], 9), ([], 6)]
  want = {i: usual(_inputs(lengths, seq, i)) for i, (lengths, seq) in enumerate(cases)}
  assert not _compiled_calls(usual.get_concrete_function())
  encoder.xla_single_sequence = True
  compiled = tf.function(lambda x: encoder(x, training=False), input_signature=[SPEC])
  assert _compiled_calls(compiled.get_concrete_function())
  for i, (lengths, seq) in enumerate(cases):
    x = _inputs(lengths, seq, i)
    got = compiled(x)
    real = x["input_mask"] == 1
    for key in ("sequence_output", "embedding_output", "pooled_output"):
      assert got[key].shape == want[i][key].shape, (key, lengths, seq)
    for g, w in zip(got["encoder_outputs"] + [got["sequence_output"]],
                    want[i]["encoder_outputs"] + [want[i]["sequence_output"]]):
      # Padded positions: 0 when the usual path skips them, else its padded values.
      np.testing.assert_allclose(g.numpy(), w.numpy(), atol=1e-5, rtol=0)
      if skip_padding:
        assert (g.numpy()[~real] == 0).all()
    np.testing.assert_allclose(got["pooled_output"], want[i]["pooled_output"], atol=1e-5, rtol=0)
    np.testing.assert_allclose(got["embedding_output"], want[i]["embedding_output"], atol=1e-6,
                               rtol=0)
  # Eagerly too (the Python API's models), and training keeps the usual path (dropout).
  x = _inputs([4], 4)
  np.testing.assert_allclose(encoder(x, training=False)["sequence_output"],
                             usual(x)["sequence_output"], atol=1e-5, rtol=0)
  training = tf.function(lambda x: encoder(x, training=True), input_signature=[SPEC])
  assert not _compiled_calls(training.get_concrete_function())
