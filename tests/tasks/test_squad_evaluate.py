"""Official SQuAD v1.1 / v2.0 scores on hand-worked cases, and the scripts' interface."""

import json
import subprocess
import sys

from conftest import REPO
from conftest import run_command
import numpy as np
import pytest

from official_bert.tasks import squad_scorer as ev


def _data(qas, version):
  return {"version": version, "data": [{"title": "t", "paragraphs": [
      {"context": "c", "qas": [{"id": qid, "question": "?",
                                "answers": [{"text": t, "answer_start": 0} for t in golds]}
                               for qid, golds in qas]}]}]}


V1 = _data([("q1", ["Eiffel Tower", "the tower"]), ("q2", ["Paris"]), ("q3", ["1889"])], "1.1")
V1_PREDS = {"q1": "The Eiffel Tower", "q2": "in Paris, France"}  # q3 unanswered

V2 = _data([("q1", ["Paris", "paris!"]), ("q2", []), ("q3", ["blue whale"]), ("q4", [])],
           "v2.0")
V2_PREDS = {"q1": "Paris", "q2": "", "q3": "whale", "q4": "something"}
V2_NA = {"q1": 0.1, "q2": 0.9, "q3": 0.3, "q4": 0.8}


def test_normalization():
  assert ev.normalize_answer("The  Cat's, a hat!") == "cats hat"
  assert ev.normalize_answer("An apple\tthe\nend.") == "apple end"
  assert ev.normalize_answer("theater") == "theater"  # articles only as whole words


def test_v1_hand_worked():
  # q1: "eiffel tower" == "eiffel tower": EM 1, F1 1. q2: "in paris france" vs "paris": one
  # common token, precision 1/3, recall 1 -> F1 0.5, EM 0. q3: no prediction -> 0.
  assert ev.f1_v1("the cat sat", "cat sat on mat") == pytest.approx(2 / 3)
  result = ev.evaluate_v1(V1["data"], V1_PREDS)
  assert result == {"exact_match": pytest.approx(100 / 3), "f1": pytest.approx(50.0)}


def test_v1_equals_the_official_script_copy():
  from official.nlp.tools import squad_evaluate_v1_1  # pylint: disable=g-import-not-at-top
  preds = dict(V1_PREDS, q3="in 1889")
  theirs = squad_evaluate_v1_1.evaluate(V1["data"], preds)  # fractions, "final_f1"
  ours = ev.evaluate_v1(V1["data"], preds)
  assert ours == pytest.approx({"exact_match": 100 * theirs["exact_match"],
                                "f1": 100 * theirs["final_f1"]})


def test_v2_hand_worked_without_and_with_threshold():
  # Raw: q1 EM 1 F1 1; q2 "" vs no answer: 1, 1; q3 "whale" vs "blue whale": EM 0, F1 2/3;
  # q4 "something" vs no answer: 0, 0.
  result = ev.evaluate_v2(V2["data"], V2_PREDS)
  assert result == pytest.approx({
      "exact": 50.0, "f1": 100 * (8 / 3) / 4, "total": 4,
      "HasAns_exact": 50.0, "HasAns_f1": 100 * (5 / 3) / 2, "HasAns_total": 2,
      "NoAns_exact": 50.0, "NoAns_f1": 50.0, "NoAns_total": 2})
  # na_prob > 0.5 means "no answer": q2 and q4 -> both NoAns right.
  result = ev.evaluate_v2(V2["data"], V2_PREDS, V2_NA, na_prob_thresh=0.5)
  assert result["exact"] == pytest.approx(75.0)
  assert result["f1"] == pytest.approx(100 * (11 / 3) / 4)
  # Best threshold, answering in na_prob order from "all no answer" (2 of 4 right):
  # EM: q1 (0.1) +1 -> 3; q3 (0.3) +0; q4 (0.8) -1; q2 (0.9) 0 -> best 3/4 at 0.1.
  # F1: q1 +1 -> 3; q3 +2/3 -> 3.67 (best, at 0.3); q4 -1; q2 0.
  assert (result["best_exact"], result["best_exact_thresh"]) == (pytest.approx(75.0), 0.1)
  assert (result["best_f1"], result["best_f1_thresh"]) == (pytest.approx(100 * (11 / 3) / 4),
                                                           0.3)


def test_exact_search_thresholds_give_the_scores_they_report():
  """run_squad's search over null score differences (any sign, ties): answering at the
  threshold it returns (odds <= threshold) scores what it reports; the official search
  would give 0.0 (not "answer nothing" for negative odds) and stop inside a tie."""
  rng = np.random.default_rng(0)
  for trial in range(300):
    n = int(rng.integers(1, 7))
    golds = [[] if rng.random() < 0.5 else ["red fox"] for _ in range(n)]
    data = _data([(f"q{i}", g) for i, g in enumerate(golds)], "v2.0")["data"]
    answers = {f"q{i}": str(rng.choice(["red fox", "fox", "blue"])) for i in range(n)}
    odds = {f"q{i}": float(rng.choice([-2.5, -0.75, -0.75, 0.5, 1.5, 3.0])) for i in range(n)}
    search = ev.evaluate_v2(data, answers, odds, exact_search=True)
    for metric in ("exact", "f1"):
      thresh = search[f"best_{metric}_thresh"]
      answered = {q: a if odds[q] <= thresh else "" for q, a in answers.items()}
      got = ev.evaluate_v2(data, answered)[metric]
      assert got == pytest.approx(search[f"best_{metric}"]), (trial, metric, odds, thresh)
  # All negative odds and answering nothing best: a threshold below them all.
  data = _data([("q0", []), ("q1", [])], "v2.0")["data"]
  search = ev.evaluate_v2(data, {"q0": "x", "q1": "y"}, {"q0": -0.05, "q1": -0.04},
                          exact_search=True)
  assert search["best_f1"] == 100.0 and search["best_f1_thresh"] < -0.05
  official = ev.evaluate_v2(data, {"q0": "x", "q1": "y"}, {"q0": -0.05, "q1": -0.04})
  assert official["best_f1_thresh"] == 0.0  # the official script's, kept by squad_evaluate


def test_run_squad_scores_its_predictions_as_written(tmp_path):
  """A span kept at null odds over 1 (a --null_score_diff_threshold of 3) is scored as the
  answer it is, not as "no answer" (the official na_prob_thresh of a probability)."""
  from official_bert.tasks import squad_job  # pylint: disable=g-import-not-at-top
  gold = tmp_path / "gold.json"
  gold.write_text(json.dumps(_data([("q1", ["Denver Broncos"]), ("q2", [])], "v2.0")))
  preds = {"q1": "Denver Broncos", "q2": ""}
  nbest = {"q1": [{"text": "Denver Broncos"}], "q2": [{"text": ""}, {"text": "Carolina"}]}
  _, scores = squad_job._score(str(gold), preds, nbest, {"q1": 2.0, "q2": 5.0})  # pylint: disable=protected-access
  assert (scores["exact"], scores["f1"], scores["HasAns_f1"]) == (100.0, 100.0, 100.0)
  search = scores[squad_job.THRESHOLD_SEARCH]
  assert search["best_f1"] == 100.0 and 2.0 <= search["best_f1_thresh"] < 5.0
  # The standalone command scores the same with --na-prob-thresh=inf (docs/squad.md).
  (tmp_path / "preds.json").write_text(json.dumps(preds))
  (tmp_path / "odds.json").write_text(json.dumps({"q1": 2.0, "q2": 5.0}))
  out = run_command("official_bert.squad_evaluate", gold, tmp_path / "preds.json",
                    "--na-prob-file", tmp_path / "odds.json", "--na-prob-thresh=inf")
  assert out.returncode == 0, out.stderr
  assert json.loads(out.stdout)["f1"] == 100.0


def test_v2_empty_normalized_gold_is_no_answer():
  data = _data([("q", ["The", "a"])], "v2.0")["data"]
  assert ev.evaluate_v2(data, {"q": ""})["exact"] == 100.0
  assert ev.evaluate_v2(data, {"q": "the"})["exact"] == 100.0  # normalizes to ""
  assert ev.evaluate_v2(data, {"q": "x"})["f1"] == 0.0


def test_v2_equals_the_official_script_copy():
  from official.nlp.tools import squad_evaluate_v2_0  # pylint: disable=g-import-not-at-top
  theirs = squad_evaluate_v2_0.evaluate(V2["data"], V2_PREDS, V2_NA)
  ours = ev.evaluate_v2(V2["data"], V2_PREDS, V2_NA)
  for key in ("exact", "f1", "total", "HasAns_exact", "HasAns_f1", "NoAns_exact", "NoAns_f1"):
    assert ours[key] == pytest.approx(theirs[key])
  # tf-models-official renamed best_* to final_*.
  for key in ("exact", "exact_thresh", "f1", "f1_thresh"):
    assert ours[f"best_{key}"] == pytest.approx(theirs[f"final_{key}"])


def _files(tmp_path, data, preds, na=None):
  paths = []
  for name, obj in (("data.json", data), ("pred.json", preds), ("na.json", na)):
    if obj is not None:
      (tmp_path / name).write_text(json.dumps(obj), encoding="utf-8")
      paths.append(str(tmp_path / name))
  return paths


def _cli(*args):
  """The command in this process, through its launcher (`test_module_runs_as_a_script`: as a
  process)."""
  return run_command("official_bert.squad_evaluate", *args)


def test_command_line_v1_and_v2(tmp_path):
  data, pred = _files(tmp_path, V1, V1_PREDS)
  proc = _cli(data, pred)
  assert proc.returncode == 0, proc.stderr
  assert set(json.loads(proc.stdout)) == {"exact_match", "f1"}
  data, pred, na = _files(tmp_path, V2, V2_PREDS, V2_NA)
  proc = _cli(data, pred, "--na-prob-file", na, "--na-prob-thresh", "0.5")
  assert proc.returncode == 0, proc.stderr
  out = json.loads(proc.stdout)
  assert list(out) == ["exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total",
                       "NoAns_exact", "NoAns_f1", "NoAns_total", "best_exact",
                       "best_exact_thresh", "best_f1", "best_f1_thresh"]
  assert out["exact"] == pytest.approx(75.0)
  proc = _cli(data, pred, "-n", na, "-t", "0.5", "-o", str(tmp_path / "eval.json"))
  assert proc.returncode == 0 and json.loads((tmp_path / "eval.json").read_text()) == out


def test_command_line_errors_name_the_file(tmp_path):
  data, _ = _files(tmp_path, V1, {})
  (tmp_path / "bad.json").write_text("{oops", encoding="utf-8")
  for args in ([data, str(tmp_path / "bad.json")], [str(tmp_path / "bad.json"), data]):
    proc = _cli(*args)
    assert proc.returncode == 1 and "bad.json: malformed JSON" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
  # run_squad's other files given as these: a traceback (a list has no .lower()).
  nbest = tmp_path / "nbest.json"
  nbest.write_text(json.dumps({k: [{"text": v}] for k, v in V1_PREDS.items()}))
  proc = _cli(data, str(nbest))
  assert proc.returncode == 1 and "nbest.json: the value of " in proc.stderr, proc.stderr
  assert "not an answer text (predictions.json, not nbest_predictions.json)" in proc.stderr
  data2, pred2 = _files(tmp_path, V2, V2_PREDS)
  proc = _cli(data2, pred2, "--na-prob-file", pred2)
  assert proc.returncode == 1 and "not a probability (null_odds.json)" in proc.stderr, (
      proc.stderr)
  assert "Traceback" not in proc.stderr
  # A folder for either file: named.
  (tmp_path / "folder").mkdir()
  for args, message in (([data, str(tmp_path / "folder")], "is a folder, not a predictions"),
                        ([str(tmp_path / "folder"), data], "is a folder, not a SQuAD file")):
    proc = _cli(*args)
    assert proc.returncode == 1 and message in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


def test_ids_as_numbers_unlabeled_questions_and_an_out_file_over_an_input(tmp_path):
  """Integer question ids (which the reader takes) scored 0 (predictions.json's keys are
  strings); a file without gold answers (one to predict) was a traceback, also after
  run_squad --do_predict had written its predictions; --out-file over an input replaced it."""
  numbered = json.loads(json.dumps(V1))
  for i, qa in enumerate(numbered["data"][0]["paragraphs"][0]["qas"]):
    qa["id"] = 100 + i
  preds = {str(100 + i): V1_PREDS[q] for i, q in enumerate(("q1", "q2", "q3")) if q in V1_PREDS}
  assert ev.evaluate_v1(numbered["data"], preds) == ev.evaluate_v1(V1["data"], V1_PREDS)
  unlabeled = json.loads(json.dumps(V1))
  for qa in unlabeled["data"][0]["paragraphs"][0]["qas"]:
    del qa["answers"]
  # ... partly labelled: the labelled questions are scored.
  partly = json.loads(json.dumps(V1))
  del partly["data"][0]["paragraphs"][0]["qas"][2]["answers"]
  assert ev.evaluate_v1(partly["data"], V1_PREDS)["f1"] == pytest.approx(75.0)
  data, pred = _files(tmp_path, unlabeled, V1_PREDS)
  proc = _cli(data, pred)
  assert proc.returncode == 1 and "its questions have no gold answers: nothing to score" in (
      proc.stderr) and "Traceback" not in proc.stderr, proc.stderr
  data, pred = _files(tmp_path, V1, V1_PREDS)
  before = open(data, encoding="utf-8").read()
  proc = _cli(data, pred, "-o", data)
  assert proc.returncode == 1 and f"--out-file={data} is also the data file" in proc.stderr
  assert open(data, encoding="utf-8").read() == before


def test_module_runs_as_a_script(tmp_path):
  data, pred = _files(tmp_path, V1, V1_PREDS)
  proc = subprocess.run([sys.executable, "-m", "official_bert.squad_evaluate", data, pred],
                        cwd=REPO, capture_output=True, text=True, check=True)
  assert json.loads(proc.stdout)["f1"] == pytest.approx(50.0)
