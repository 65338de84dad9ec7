"""The distillation task's losses against NumPy: temperature, weights, unlabeled examples and
tokens, masked padding; the student's layers taken from the teacher's."""

import dataclasses

from harness import TINY
import numpy as np
import pytest

from official_bert.interop import student_init
from official_bert.modeling.encoder import BertEncoder
from official_bert.modeling.finetuning_models import BertClassifier
from official_bert.modeling.layers.attention import BertSelfAttention
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
  }, "--hidden_weight"), ({
      "attention_weight": -1.0
  }, "--attention_weight")):
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


def _attention_reference(student, teacher, mask):
  """TinyBERT's attention loss per query token: mean over heads and real keys of (s - t)^2,
  averaged over the layer pairs."""
  per_pair = [((s - t)**2 * mask[:, None, None, :]).sum(-1).mean(1) / mask.sum(-1)[:, None]
              for s, t in zip(student, teacher)]
  return np.mean(per_pair, axis=0)  # [b, s]


def test_hidden_and_attention_losses_equal_numpy():
  rng = np.random.default_rng(4)
  b, s, heads, width = 2, 5, 2, 4
  mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.float32)
  student_states = [rng.normal(size=(b, s, width)).astype(np.float32) for _ in range(3)]
  teacher_states = [rng.normal(size=(b, s, width)).astype(np.float32) for _ in range(5)]
  student_scores = [rng.normal(size=(b, heads, s, s)).astype(np.float32) for _ in range(2)]
  teacher_scores = [rng.normal(size=(b, heads, s, s)).astype(np.float32) * 4 for _ in range(2)]
  config = dataclasses.replace(TINY, hidden_size=width, num_attention_heads=heads)
  teacher_config = dataclasses.replace(config, num_hidden_layers=4)
  task = distillation.DistillationTask(ClassificationTask(config, 2, s),
                                       ClassificationTask(teacher_config, 2, s),
                                       None,
                                       distill_weight=0.0,
                                       hidden_weight=0.5,
                                       attention_weight=2.0,
                                       hidden_pairs=[0, 2, 4])
  task.teacher = lambda features, training=False: {
      "logits": np.zeros((b, 2), np.float32),
      "hidden_states": teacher_states,
      "attention_scores": teacher_scores
  }
  features = {"label_ids": np.array([0, 1]), "is_real_example": np.ones(2), "input_mask": mask}
  outputs = {
      "logits": np.zeros((b, 2), np.float32),
      "hidden_states": student_states,
      "attention_scores": student_scores
  }
  got = _total(task, features, outputs)
  hidden = np.mean(
      [((x - teacher_states[i])**2).mean(-1) for x, i in zip(student_states, [0, 2, 4])], axis=0)
  np.testing.assert_allclose(got["hidden_loss"], 0.5 * hidden[mask > 0].mean(), rtol=1e-5)
  attention = _attention_reference(student_scores, teacher_scores, mask)
  np.testing.assert_allclose(got["attention_loss"], 2.0 * attention[mask > 0].mean(), rtol=1e-5)
  # Padded keys count for nothing: changing their scores changes no loss.
  moved = [x.copy() for x in student_scores]
  for x in moved:
    x[0, :, :, 3:] += 100.0
  outputs["attention_scores"] = moved
  np.testing.assert_allclose(_total(task, features, outputs)["attention_loss"],
                             got["attention_loss"],
                             rtol=1e-6)
  # Different numbers of heads cannot be matched head by head.
  with pytest.raises(ValueError, match="num_attention_heads"):
    distillation.DistillationTask(ClassificationTask(config, 2, s),
                                  ClassificationTask(
                                      dataclasses.replace(config, num_attention_heads=1), 2, s),
                                  None,
                                  attention_weight=1.0,
                                  hidden_pairs=[0, 1, 2])
  # By default the attention loss follows --hidden_weight where the heads match.
  assert distillation.default_attention_weight(None, 0.5, config, config) == 0.5
  one_head = dataclasses.replace(config, num_attention_heads=1)
  assert distillation.default_attention_weight(None, 0.5, config, one_head) == 0.0
  assert distillation.default_attention_weight(0.0, 0.5, config, config) == 0.0


def test_attention_scores_are_those_the_layers_attend_with(monkeypatch):
  """A model's "attention_scores" for layer n are q k^T / sqrt(d) of the q and k that layer
  n's attention computed (before its padding bias) in the same call."""
  seen = []
  attend = BertSelfAttention._attend

  def recording(self, q, k, v, key_bias, *args, **kwargs):
    seen.append((np.matmul(q, np.swapaxes(k, -1, -2)) / np.sqrt(self.head_size)))
    return attend(self, q, k, v, key_bias, *args, **kwargs)

  monkeypatch.setattr(BertSelfAttention, "_attend", recording)
  model = BertClassifier(BertEncoder.from_bert_config(TINY), 2)
  model.hidden_states_output = "always"
  model.attention_scores_layers = [2, 1]
  rng = np.random.default_rng(0)
  inputs = {
      "input_word_ids": rng.integers(1, TINY.vocab_size, (2, 6)).astype(np.int32),
      "input_mask": np.array([[1] * 6, [1, 1, 1, 0, 0, 0]], np.int32),
      "input_type_ids": np.zeros((2, 6), np.int32)
  }
  outputs = model(inputs, training=False)
  got = [np.asarray(x) for x in outputs["attention_scores"]]
  assert len(seen) == TINY.num_hidden_layers == 2 and got[0].shape == (2, TINY.num_attention_heads,
                                                                       6, 6)
  np.testing.assert_allclose(got[0], seen[1], atol=1e-5)
  np.testing.assert_allclose(got[1], seen[0], atol=1e-5)
  model.hidden_states_output = None  # a plain model returns its logits only
  assert set(model(inputs, training=False)) == {"logits"}
