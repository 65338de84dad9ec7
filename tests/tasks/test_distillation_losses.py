"""The distillation task's losses against NumPy: temperature, weights, unlabeled examples and
tokens, masked padding; the student's layers taken from the teacher's."""

from harness import TINY
import numpy as np
import pytest

from official_bert.interop import student_init
from official_bert.tasks import distillation
from official_bert.tasks.classification import ClassificationTask
from official_bert.tasks.tagging import TaggingTask


def _log_softmax(x):
  x = x - x.max(-1, keepdims=True)
  return x - np.log(np.exp(x).sum(-1, keepdims=True))


def _kl(student, teacher, t):
  p_log, q_log = _log_softmax(teacher / t), _log_softmax(student / t)
  return (np.exp(p_log) * (p_log - q_log)).sum(-1) * t * t


def _task(student_task, teacher_logits, **kwargs):
  task = distillation.DistillationTask(student_task, student_task, lambda model: None, **kwargs)
  task.teacher = lambda features, training=False: {"logits": teacher_logits}
  return task


def _total(task, features, outputs):
  sums = {k: float(v) for k, v in task.loss_sums(features, outputs).items()}
  norms = {k: float(v) for k, v in task.loss_normalizers(features).items()}
  return {k: sums[k] / norms[k] for k in sums}


@pytest.mark.parametrize("temperature,weight", [(1.0, 0.5), (3.0, 0.8), (2.0, 1.0)])
def test_classifier_loss_equals_numpy(temperature, weight):
  rng = np.random.default_rng(0)
  student, teacher = rng.normal(size=(6, 3)), rng.normal(size=(6, 3)) * 3
  labels = np.array([0, 2, distillation.UNLABELED, 1, distillation.UNLABELED, 2])
  real = np.array([1, 1, 1, 1, 1, 0])  # the last: the original's padding example
  features = {"label_ids": labels, "is_real_example": real}
  task = _task(ClassificationTask(TINY, 3, 8),
               teacher.astype(np.float32),
               temperature=temperature,
               distill_weight=weight)
  got = _total(task, features, {"logits": student.astype(np.float32)})

  labeled = (labels >= 0) & (real > 0)
  nll = -_log_softmax(student)[np.arange(6), np.maximum(labels, 0)]
  np.testing.assert_allclose(got["classification_loss"], (1 - weight) * nll[labeled].mean(),
                             rtol=1e-5,
                             atol=1e-6)
  soft = _kl(student, teacher, temperature)
  np.testing.assert_allclose(got["distillation_loss"], weight * soft[real > 0].mean(), rtol=1e-5)
  # Accuracy counts the labeled examples only.
  hits, count = (float(v) for v in task.metric_sums(features, {"logits": student})["accuracy"])
  assert count == labeled.sum()
  assert hits == (student.argmax(-1) == labels)[labeled].sum()


def test_tagger_loss_weighs_labeled_tokens_and_skips_padding():
  rng = np.random.default_rng(1)
  student, teacher = rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 4))
  weights = np.array([[0, 1, 1, 0, 0], [0, 1, 0, 1, 0]], np.float32)  # first pieces; padding 0
  labels = np.array([[0, 3, 1, 0, 0], [0, distillation.UNLABELED, 0, distillation.UNLABELED, 0]])
  features = {"label_ids": labels, "label_weights": weights}
  task = _task(TaggingTask(TINY, 4, 5),
               teacher.astype(np.float32),
               temperature=2.0,
               distill_weight=0.25)
  got = _total(task, features, {"logits": student.astype(np.float32)})
  labeled = (weights > 0) & (labels >= 0)
  nll = -np.take_along_axis(_log_softmax(student), np.maximum(labels, 0)[..., None], -1)[..., 0]
  np.testing.assert_allclose(got["tagging_loss"], 0.75 * nll[labeled].mean(), rtol=1e-5)
  np.testing.assert_allclose(got["distillation_loss"],
                             0.25 * _kl(student, teacher, 2.0)[weights > 0].mean(),
                             rtol=1e-5)


def test_multi_label_and_regression_soft_losses():
  rng = np.random.default_rng(2)
  student, teacher = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
  labels = np.array([[1, 0, 0, 1], [-100] * 4, [0, 1, 0, 0]], np.float32)
  task = _task(ClassificationTask(TINY, 4, 8, problem_type="multi_label"),
               teacher.astype(np.float32),
               temperature=2.0,
               distill_weight=0.5)
  got = _total(task, {
      "label_ids": labels,
      "is_real_example": np.ones(3)
  }, {"logits": student.astype(np.float32)})
  p, q = 1 / (1 + np.exp(-teacher / 2)), 1 / (1 + np.exp(-student / 2))
  kl = (p * np.log(p / q) + (1 - p) * np.log((1 - p) / (1 - q))).mean(-1) * 4
  np.testing.assert_allclose(got["distillation_loss"], 0.5 * kl.mean(), rtol=1e-5)
  bce = -(labels * np.log(1 / (1 + np.exp(-student))) +
          (1 - labels) * np.log(1 - 1 / (1 + np.exp(-student)))).mean(-1)
  np.testing.assert_allclose(got["classification_loss"], 0.5 * bce[[0, 2]].mean(), rtol=1e-5)

  scores = np.array([0.5, np.nan, 2.0], np.float32)
  task = _task(ClassificationTask(TINY, 1, 8, is_regression=True),
               teacher[:, :1].astype(np.float32),
               distill_weight=0.3)
  got = _total(task, {
      "label_ids": scores,
      "is_real_example": np.ones(3)
  }, {"logits": student[:, :1].astype(np.float32)})
  np.testing.assert_allclose(got["regression_loss"],
                             0.7 * ((student[[0, 2], 0] - scores[[0, 2]])**2).mean(),
                             rtol=1e-5)
  np.testing.assert_allclose(got["distillation_loss"],
                             0.3 * ((student[:, 0] - teacher[:, 0])**2).mean(),
                             rtol=1e-5)


def test_labels_only_never_runs_the_teacher():
  task = distillation.DistillationTask(ClassificationTask(TINY, 2, 8),
                                       ClassificationTask(TINY, 2, 8),
                                       None,
                                       distill_weight=0.0)
  task.teacher = None  # would fail if called
  logits = np.array([[2.0, -1.0], [0.5, 0.5]], np.float32)
  got = _total(task, {
      "label_ids": np.array([0, 1]),
      "is_real_example": np.ones(2)
  }, {"logits": logits})
  assert set(got) == {"classification_loss"}
  np.testing.assert_allclose(got["classification_loss"],
                             -_log_softmax(logits)[[0, 1], [0, 1]].mean(),
                             rtol=1e-6)


def test_bad_weights_are_refused():
  task = ClassificationTask(TINY, 2, 8)
  for kwargs, flag in (({
      "temperature": 0.0
  }, "--temperature"), ({
      "distill_weight": 1.5
  }, "--distill_weight"), ({
      "hidden_weight": -1.0
  }, "--hidden_weight")):
    with pytest.raises(ValueError, match=flag):
      distillation.DistillationTask(task, task, None, **kwargs)


def test_student_layers_are_distilberts_and_renamed():
  assert student_init.teacher_layers(12, 6) == [0, 2, 4, 7, 9, 11]  # DistilBERT's choice
  assert student_init.teacher_layers(6, 2) == [0, 5]
  assert student_init.teacher_layers(6, 1) == [5]
  with pytest.raises(ValueError, match="--student_num_layers=7"):
    student_init.teacher_layers(6, 7)
  tensors = {f"bert/encoder/layer_{i}/attention/self/query/kernel": np.full(2, i) for i in range(4)}
  tensors["bert/embeddings/word_embeddings"] = np.zeros(3)
  tensors["output_weights"] = np.ones(2)
  out = student_init.student_tensors(tensors, [0, 3])
  assert sorted(out) == sorted([
      "bert/encoder/layer_0/attention/self/query/kernel",
      "bert/encoder/layer_1/attention/self/query/kernel", "bert/embeddings/word_embeddings",
      "output_weights"
  ])
  assert out["bert/encoder/layer_1/attention/self/query/kernel"][0] == 3
  # Hidden states: the student's layer i against the teacher layer it came from.
  assert student_init.uniform_hidden_pairs(6, 2, [0, 5]) == [0, 1, 6]
  assert student_init.uniform_hidden_pairs(12, 4) == [0, 3, 6, 9, 12]  # TinyBERT's map
