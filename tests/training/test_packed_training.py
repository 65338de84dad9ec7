"""--pack_tokens (`BertEncoder.pack_training`): a training step on the real tokens only gives
the padded step's loss, gradients and metrics for every task it is used for, and the runner
and the Python API use it exactly where `model_types.packs_training` says."""

import dataclasses

from conftest import ATTENTION_BLOCK_COUNTS
from harness import TINY
import keras
import numpy as np
import pytest
import tensorflow as tf

from official_bert.modeling import model_types
from official_bert.modeling.encoder import BertEncoder
from official_bert.modeling.sentence_embedding import SentenceEmbedder
from official_bert.modeling.tensorflow_only import token_packing
from official_bert.tasks.classification import ClassificationTask
from official_bert.tasks.embedding import EmbeddingTask
from official_bert.tasks.multiple_choice import MultipleChoiceTask
from official_bert.tasks.squad import SquadTask
from official_bert.tasks.tagging import TaggingTask
from official_bert.training import training_loop

# No dropout: the packed step lays its dropout masks out on the packed tokens.
CONFIG = dataclasses.replace(TINY, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
SEQ = 9


def _inputs(rng, shape):
  """Uneven lengths (1 to SEQ), one mask with a hole (padding need not be a suffix)."""
  lengths = rng.integers(1, SEQ + 1, shape)
  mask = (np.arange(SEQ) < lengths[..., None]).astype(np.int32)
  mask.reshape(-1, SEQ)[0, :] = 0
  mask.reshape(-1, SEQ)[0, [0, 1, 4]] = 1
  return {
      "input_word_ids": rng.integers(1, CONFIG.vocab_size, shape + (SEQ,)).astype(np.int32),
      "input_mask": mask,
      "input_type_ids": (np.arange(SEQ) >= SEQ // 2).astype(np.int32) * np.ones_like(mask)
  }


def _cases():
  rng = np.random.default_rng(0)
  batch = 11  # more sequences than attention blocks (8: some blocks of one)
  classifier = dict(_inputs(rng, (batch,)), label_ids=rng.integers(0, 3, batch),
                    is_real_example=np.ones(batch, np.float32))
  tagger_inputs = _inputs(rng, (batch,))
  tagger = dict(tagger_inputs, label_ids=rng.integers(0, 4, (batch, SEQ)),
                label_weights=tagger_inputs["input_mask"].astype(np.float32))
  choices = dict(_inputs(rng, (batch, 4)), label_ids=rng.integers(0, 4, batch))
  pairs = dict(_inputs(rng, (batch, 2)), scores=np.ones(batch, np.float32),
               is_real_example=np.ones(batch, np.float32))
  return [("classifier", ClassificationTask(CONFIG, 3, SEQ), classifier),
          ("tagger", TaggingTask(CONFIG, 4, SEQ), tagger),
          ("multiple_choice", MultipleChoiceTask(CONFIG, SEQ, num_choices=4), choices),
          ("embeddings", EmbeddingTask(CONFIG, SEQ), pairs)]


def _step(task, model, features, pack):
  model.encoder.pack_training = pack

  @tf.function
  def run():
    with tf.GradientTape() as tape:
      outputs = model(features, training=True)
      sums, norms = task.loss_sums(features, outputs), task.loss_normalizers(features)
      loss = tf.add_n([sums[k] / norms[k] for k in sums])
    grads = tape.gradient(loss, model.trainable_variables)
    return loss, grads, task.metric_sums(features, outputs)

  loss, grads, metrics = run()
  return float(loss), [None if g is None else tf.convert_to_tensor(g).numpy() for g in grads], {
      k: (float(a), float(b)) for k, (a, b) in metrics.items()
  }


@pytest.mark.parametrize("blocks", ATTENTION_BLOCK_COUNTS)
@pytest.mark.parametrize("name,task,features", _cases(), ids=[c[0] for c in _cases()])
def test_packed_step_equals_the_padded_step(name, task, features, blocks, monkeypatch):
  monkeypatch.setattr(token_packing, "ATTENTION_BLOCKS", blocks)
  keras.utils.set_random_seed(1)
  model = task.build_model()
  if hasattr(model, "dropout"):
    model.dropout.rate = 0.0  # the head's dropout, for the same reason
  assert model_types.packs_training(model, static_shapes=False), name
  padded = _step(task, model, features, False)
  packed = _step(task, model, features, True)
  # The packed step did run on the real tokens: its padded positions come back as 0.
  flat = {k: np.reshape(features[k], (-1, SEQ))
          for k in ("input_word_ids", "input_mask", "input_type_ids")}
  sequence = np.asarray(model.encoder(flat, training=True)["sequence_output"])
  assert (sequence[flat["input_mask"] == 0] == 0).all()
  model.encoder.pack_training = False
  sequence = np.asarray(model.encoder(flat, training=True)["sequence_output"])
  assert (sequence[flat["input_mask"] == 0] != 0).all()
  np.testing.assert_allclose(packed[0], padded[0], rtol=1e-5)
  assert packed[2] == padded[2]
  for variable, got, want in zip(model.trainable_variables, packed[1], padded[1]):
    if want is None:
      assert got is None, variable.path
      continue
    np.testing.assert_allclose(got, want, atol=1e-5 * max(1.0, np.abs(want).max()),
                               err_msg=variable.path)
  assert any(np.abs(g).max() > 0 for g in padded[1] if g is not None)


def test_packing_is_used_where_every_loss_reads_real_positions_only():
  squad = SquadTask(CONFIG, SEQ).build_model()
  assert not model_types.packs_training(squad, static_shapes=False)  # spans over the padding
  classifier = ClassificationTask(CONFIG, 2, SEQ).build_model()
  assert not model_types.packs_training(classifier, static_shapes=True)  # XLA, TPUs
  encoder = BertEncoder.from_bert_config(CONFIG)
  assert not model_types.packs_training(encoder, static_shapes=False)
  assert model_types.packs_training(SentenceEmbedder(encoder), static_shapes=False)


def test_progress_log_reports_real_tokens_per_second():
  """The loop's mean real tokens a step becomes real tokens/s beside examples/s."""
  log = training_loop.ProgressLog(global_batch_size=8, num_train_steps=10, start_step=0)
  metrics = {"loss": 1.0, training_loop.REAL_TOKENS: 96.0}
  examples_per_second = log.log(4, metrics, 1e-3)
  assert training_loop.REAL_TOKENS not in metrics
  np.testing.assert_allclose(metrics["real_tokens_per_second"] / examples_per_second, 96.0 / 8)
