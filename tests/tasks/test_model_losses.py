"""The pretraining losses and metrics against hand-computed numpy values."""

import numpy as np

from official_bert.tasks import losses


def _log_softmax(x):
  x = x - x.max(axis=-1, keepdims=True)
  return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def test_masked_lm_loss_matches_hand_computation():
  logits = np.array([[[2.0, 0.5, -1.0], [0.0, 0.0, 0.0]],
                     [[-1.0, 3.0, 0.2], [9.0, -9.0, 0.0]]], np.float32)
  labels = np.array([[0, 2], [1, 1]], np.int32)
  weights = np.array([[1.0, 1.0], [1.0, 0.0]], np.float32)
  logp = _log_softmax(logits.astype(np.float64))
  nll = -np.take_along_axis(logp, labels[..., None], axis=-1)[..., 0]
  expected = (nll * weights).sum() / (weights.sum() + 1e-5)
  # The zero-weighted slot has a huge loss; it must not leak in.
  assert nll[1, 1] > 15
  np.testing.assert_allclose(
      float(losses.masked_lm_loss(labels, logits, weights)), expected,
      rtol=1e-6)
  # No real predictions at all: 0 / 1e-5 = 0, not NaN.
  assert float(losses.masked_lm_loss(labels, logits, np.zeros_like(
      weights))) == 0.0


def test_next_sentence_loss_matches_hand_computation():
  logits = np.array([[1.0, -1.0], [0.3, 0.7], [-2.0, 2.0]], np.float32)
  labels = np.array([0, 0, 1], np.int32)
  logp = _log_softmax(logits.astype(np.float64))
  expected = -logp[np.arange(3), labels].mean()
  np.testing.assert_allclose(
      float(losses.next_sentence_loss(labels, logits)), expected, rtol=1e-6)
  np.testing.assert_allclose(
      float(losses.next_sentence_loss(labels[:, None], logits)), expected,
      rtol=1e-6)


def test_accuracy_helpers():
  logits = np.array([[[2.0, 0.5, -1.0], [0.0, 1.0, 0.0]],
                     [[-1.0, 3.0, 0.2], [9.0, -9.0, 0.0]]], np.float32)
  labels = np.array([[0, 2], [1, 1]], np.int32)  # Correct: yes, no, yes, no.
  weights = np.array([[1.0, 1.0], [1.0, 0.0]], np.float32)
  np.testing.assert_allclose(
      float(losses.masked_lm_accuracy(labels, logits, weights)), 2 / 3,
      rtol=1e-6)
  assert float(losses.masked_lm_accuracy(
      labels, logits, np.zeros_like(weights))) == 0.0
  nsp_logits = np.array([[1.0, -1.0], [0.3, 0.7], [-2.0, 2.0]], np.float32)
  np.testing.assert_allclose(
      float(losses.next_sentence_accuracy(np.array([0, 0, 1]), nsp_logits)),
      2 / 3, rtol=1e-6)
