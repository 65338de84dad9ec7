"""GLUE and CoNLL scores: hand-worked cases, then scipy/sklearn on random data."""

import numpy as np
import pytest
from scipy import stats

from official_bert.tasks import metrics


def test_binary_scores_hand_worked():
  labels = [1, 1, 1, 0, 0, 0, 0, 1]
  preds = [1, 1, 0, 0, 0, 1, 0, 1]  # TP 3, FN 1, FP 1, TN 3
  assert metrics.accuracy(preds, labels) == 6 / 8
  assert metrics.f1_score(preds, labels) == pytest.approx(2 * 3 / (2 * 3 + 1 + 1))
  # (3*3 - 1*1) / sqrt(4*4*4*4) = 8 / 16
  assert metrics.matthews_corrcoef(preds, labels) == pytest.approx(0.5)
  assert metrics.matthews_corrcoef([1] * 4, [1, 0, 1, 0]) == 0.0  # a margin is empty
  assert metrics.f1_score([0, 0], [0, 0]) == 0.0


def test_correlations_hand_worked():
  assert metrics.pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
  assert metrics.pearson([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
  # Ties share their mean rank: [10, 20, 20, 30] -> [1, 2.5, 2.5, 4].
  np.testing.assert_allclose(metrics.average_ranks([10, 20, 20, 30]), [1, 2.5, 2.5, 4])
  np.testing.assert_allclose(metrics.average_ranks([3, 1, 3, 3]), [3, 1, 3, 3])
  # Monotone but not linear: Spearman 1, Pearson below 1.
  x = [1, 2, 3, 4]
  y = [1, 4, 9, 100]
  assert metrics.spearman(x, y) == pytest.approx(1.0)
  assert metrics.pearson(x, y) < 0.9


def test_against_scipy_and_sklearn():
  rng = np.random.default_rng(0)
  x = rng.normal(size=500)
  y = x + rng.normal(size=500)
  yq = np.round(y)  # many ties
  assert metrics.pearson(x, y) == pytest.approx(stats.pearsonr(x, y)[0], abs=1e-12)
  assert metrics.spearman(x, yq) == pytest.approx(stats.spearmanr(x, yq)[0], abs=1e-12)
  sklearn_metrics = pytest.importorskip("sklearn.metrics")
  labels = rng.integers(0, 2, 300)
  preds = np.where(rng.random(300) < 0.7, labels, 1 - labels)
  assert metrics.matthews_corrcoef(preds, labels) == pytest.approx(
      sklearn_metrics.matthews_corrcoef(labels, preds), abs=1e-12)
  assert metrics.f1_score(preds, labels) == pytest.approx(
      sklearn_metrics.f1_score(labels, preds), abs=1e-12)


def test_glue_scores_per_task():
  assert set(metrics.glue_scores("CoLA", [1, 0], [1, 0])) == {"accuracy", "matthews_corr"}
  assert set(metrics.glue_scores("MRPC", [1, 0], [1, 0])) == {"accuracy", "f1", "acc_and_f1"}
  assert set(metrics.glue_scores("STS-B", [1., 2., 3.], [1., 2., 4.])) == {
      "pearson", "spearman", "corr"}
  assert set(metrics.glue_scores("RTE", [1], [1])) == {"accuracy"}


def test_entities_follow_conlleval_chunks():
  tags = ["B-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-ORG", "B-MISC", "I-MISC", "I-MISC"]
  assert metrics.entities(tags) == {("PER", 0, 2), ("LOC", 3, 4), ("LOC", 4, 5),
                                    ("ORG", 5, 6), ("MISC", 6, 9)}
  assert metrics.entities(["O", "O"]) == set()
  assert metrics.entities(["B-PER", "I-LOC"]) == {("PER", 0, 1), ("LOC", 1, 2)}


def test_entity_scores_hand_worked():
  gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O", "B-MISC"]]
  pred = [["B-PER", "I-PER", "O", "B-ORG"],   # PER right; LOC typed wrong
          ["B-ORG", "I-ORG", "B-MISC"]]        # ORG boundary wrong; MISC right
  scores = metrics.entity_scores(gold, pred)
  # Gold: PER, LOC, ORG, MISC (4); found: PER, ORG, ORG(0-2), MISC (4); correct: PER, MISC.
  assert scores["precision"] == pytest.approx(2 / 4)
  assert scores["recall"] == pytest.approx(2 / 4)
  assert scores["f1"] == pytest.approx(0.5)
  assert scores["per_type"]["PER"] == {"precision": 1.0, "recall": 1.0, "f1": 1.0, "support": 1}
  assert scores["per_type"]["LOC"]["recall"] == 0.0
  assert scores["per_type"]["ORG"]["precision"] == pytest.approx(0.0)
  assert metrics.entity_scores(gold, gold)["f1"] == 1.0
  with pytest.raises(ValueError, match="sentence 1"):
    metrics.entity_scores(gold, [pred[0], pred[1][:2]])


def test_a_type_named_entity_keeps_the_overall_scores():
  """Tags B-entity / I-entity: that type's keys are type_entity_*, not the overall ones."""
  results = metrics.entity_results([["B-entity", "O", "B-PER", "I-PER"]],
                                   [["B-entity", "O", "O", "O"]])
  assert results["entity_f1"] == pytest.approx(2 / 3)  # 1 of 2 found, the 1 predicted right
  assert (results["entity_precision"], results["entity_recall"]) == (1.0, 0.5)
  assert results["type_entity_f1"] == 1.0 and results["type_entity_support"] == 1
  assert results["PER_f1"] == 0.0 and results["PER_support"] == 1


def test_warn_if_one_class_names_the_class_only_when_all_predictions_are_one():
  assert metrics.warn_if_one_class([0, 5], ["neg", "pos"], "dev", "Train longer.") == (
      "dev: all 5 examples were predicted as 'pos': the model has not learned to tell the "
      "classes apart (a majority-class model). Train longer.")
  assert metrics.warn_if_one_class([1, 4], ["neg", "pos"], "dev", "") is None
  assert metrics.warn_if_one_class([1, 0], ["neg", "pos"], "dev", "") is None  # one example
