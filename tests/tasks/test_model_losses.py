"""The losses training runs (`tasks.losses` inside each task) against hand-computed numpy."""

import numpy as np
import tensorflow as tf

from official_bert.modeling.bert_config import BertConfig
from official_bert.tasks import losses
from official_bert.tasks.pretraining import PretrainingTask
from official_bert.training import evaluation


def _log_softmax(x):
  x = x - x.max(axis=-1, keepdims=True)
  return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


MLM_LOGITS = np.array([[[2.0, 0.5, -1.0], [0.0, 0.0, 0.0]],
                       [[-1.0, 3.0, 0.2], [9.0, -9.0, 0.0]]], np.float32)
MLM_LABELS = np.array([[0, 2], [1, 1]], np.int32)
MLM_WEIGHTS = np.array([[1.0, 1.0], [1.0, 0.0]], np.float32)
NSP_LOGITS = np.array([[1.0, -1.0], [0.3, 0.7]], np.float32)
NSP_LABELS = np.array([0, 1], np.int32)


def _pretraining_scores(weights):
  """The task's sums and normalizers, divided as the loop and `evaluation` divide them."""
  task = PretrainingTask(BertConfig(vocab_size=3), seq_length=4, max_predictions_per_seq=2)
  features = {"masked_lm_ids": tf.constant(MLM_LABELS),
              "masked_lm_weights": tf.constant(weights),
              "next_sentence_labels": tf.constant(NSP_LABELS)}
  outputs = {"masked_lm_logits": tf.constant(MLM_LOGITS),
             "next_sentence_logits": tf.constant(NSP_LOGITS)}
  totals = {f"loss/{k}": float(v) for k, v in task.loss_sums(features, outputs).items()}
  totals.update({f"norm/{k}": float(v)
                 for k, v in task.loss_normalizers(features).items()})
  for k, (num, den) in task.metric_sums(features, outputs).items():
    totals[f"num/{k}"], totals[f"den/{k}"] = float(num), float(den)
  return evaluation.ratios(totals, task.loss_epsilons)


def test_pretraining_losses_are_the_originals():
  scores = _pretraining_scores(MLM_WEIGHTS)
  logp = _log_softmax(MLM_LOGITS.astype(np.float64))
  nll = -np.take_along_axis(logp, MLM_LABELS[..., None], axis=-1)[..., 0]
  assert nll[1, 1] > 15  # the zero-weighted slot has a huge loss; it must not leak in
  # google-research/bert: sum(nll * w) / (sum(w) + 1e-5); NSP: the mean over examples.
  mlm = (nll * MLM_WEIGHTS).sum() / (MLM_WEIGHTS.sum() + 1e-5)
  nsp_logp = _log_softmax(NSP_LOGITS.astype(np.float64))
  nsp = -nsp_logp[np.arange(2), NSP_LABELS].mean()
  np.testing.assert_allclose(scores["masked_lm_loss"], mlm, rtol=1e-6)
  np.testing.assert_allclose(scores["next_sentence_loss"], nsp, rtol=1e-6)
  np.testing.assert_allclose(scores["loss"], mlm + nsp, rtol=1e-6)
  # Correct: yes, no, yes, (padding); NSP: yes, yes.
  np.testing.assert_allclose(scores["masked_lm_accuracy"], 2 / 3, rtol=1e-6)
  assert scores["next_sentence_accuracy"] == 1.0


def test_no_real_prediction_gives_zero_not_nan():
  scores = _pretraining_scores(np.zeros_like(MLM_WEIGHTS))
  assert scores["masked_lm_loss"] == 0.0 and scores["masked_lm_accuracy"] == 0.0


def test_building_blocks():
  labels = np.array([2, 0, 1], np.int32)
  logits = np.array([[0.1, 0.2, 3.0], [1.0, 0.0, 0.0], [0.0, 0.0, 5.0]], np.float32)
  expected = -_log_softmax(logits.astype(np.float64))[np.arange(3), labels]
  np.testing.assert_allclose(losses.sparse_nll(labels, logits).numpy(), expected, rtol=1e-6)
  np.testing.assert_array_equal(losses.argmax_hits(labels, logits).numpy(), [1, 1, 0])
  hits, count = losses.accuracy_sums(labels, logits, np.array([1.0, 0.0, 1.0]))
  assert (float(hits), float(count)) == (1.0, 2.0)
  assert float(losses.weighted_sum(np.array([1.0, 2.0]), np.array([0.5, 2.0]))) == 4.5
  assert float(losses.count(labels)) == 3.0
