"""Training-path smoke tests: gradients, graph mode, `.keras` files."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from official_bert.modeling.encoder import BertEncoder
from official_bert.modeling.pretraining_model import BertPretrainingModel
from official_bert.tasks import losses

TINY = dict(vocab_size=40, hidden_size=16, num_hidden_layers=2,
            num_attention_heads=2, intermediate_size=24,
            max_position_embeddings=12, type_vocab_size=2)


def _batch():
  return {
      "input_word_ids": np.array([[2, 5, 9, 3, 0], [4, 4, 8, 1, 7]],
                                 np.int32),
      "input_mask": np.array([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], np.int32),
      "input_type_ids": np.array([[0, 0, 1, 1, 0], [0, 0, 0, 1, 1]],
                                 np.int32),
      "masked_lm_positions": np.array([[1, 2], [3, 0]], np.int32),
  }


def test_every_variable_gets_a_gradient_in_graph_mode():
  keras.utils.set_random_seed(3)
  model = BertPretrainingModel(BertEncoder(**TINY))
  batch = _batch()
  none_grads = []

  # Unknown batch and sequence sizes, as in a real input pipeline.
  @tf.function(input_signature=[
      {k: tf.TensorSpec([None, None], tf.int32) for k in batch}])
  def step(features):
    with tf.GradientTape() as tape:
      out = model(features, training=True)
      weights = tf.constant([[1.0, 1.0], [1.0, 0.0]])
      mlm_nll = losses.sparse_nll(tf.constant([[5, 9], [1, 0]]), out["masked_lm_logits"])
      nsp_nll = losses.sparse_nll(tf.constant([0, 1]), out["next_sentence_logits"])
      loss = (losses.weighted_sum(mlm_nll, weights) / losses.count(mlm_nll, weights)
              + losses.weighted_sum(nsp_nll) / losses.count(nsp_nll))
    grads = tape.gradient(loss, model.trainable_variables)
    none_grads.extend(v.path for g, v in zip(grads, model.trainable_variables)
                      if g is None)
    return loss

  loss = float(step(batch))
  assert np.isfinite(loss) and loss > 0
  assert not none_grads
  assert len(model.trainable_variables) == len(model.weights)


# Keras' own weight writer trips a numpy-2 `__array__(copy=...)` notice.
@pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")
def test_keras_file_round_trip(tmp_path):
  keras.utils.set_random_seed(4)
  model = BertPretrainingModel(BertEncoder(**TINY))
  batch = _batch()
  expected = model(batch)
  path = str(tmp_path / "bert.keras")
  model.save(path)
  restored = keras.models.load_model(path)
  assert isinstance(restored, BertPretrainingModel)
  for key, value in restored(batch).items():
    np.testing.assert_array_equal(np.asarray(value),
                                  np.asarray(expected[key]))
