"""run_ner end to end on a slice of CoNLL-2003 with a tiny random BERT."""

import json
import os

from conftest import CONLL_DATA
from conftest import need
import pytest
from test_glue_run_classifier import read_results
from test_glue_run_classifier import run_script

pytestmark = pytest.mark.large  # trains or runs commands: `make test`, not `make test-fast`


def test_run_ner_trains_evaluates_and_predicts(tmp_path):
  data = tmp_path / "conll"
  data.mkdir()
  for name, lines in (("eng.train", 200), ("eng.testa", 120), ("eng.testb", 80)):
    with open(need(os.path.join(CONLL_DATA, name)), encoding="utf-8") as f:
      (data / name).write_text("".join(f.readlines()[:lines]), encoding="utf-8")
  out = tmp_path / "out"
  run_script("official_bert.run_ner", tmp_path, f"--data_dir={data}", f"--output_dir={out}",
             "--do_train", "--do_eval", "--do_predict", "--eval_every_steps=2")
  results = read_results(out / "eval_results.txt")
  assert {"entity_f1", "entity_precision", "entity_recall", "token_accuracy",
          "tagging_loss"} <= set(results)
  assert 0 <= float(results["entity_f1"]) <= 1
  # Evaluated at steps 2 and 3; the best by NER's main metric kept with its tag set.
  state = json.loads((out / "best" / "state.json").read_text())
  assert state["metric"] == "entity_f1" and state["last_evaluated_step"] == 3
  settings = json.loads((out / "best" / "run_settings.json").read_text())
  assert settings["model_type"] == "tagger" and settings["labels"][0] == "O"
  # One `word gold predicted` line per word of eng.testb's slice, sentences apart.
  gold = [line.split() for line in (data / "eng.testb").read_text().splitlines()]
  words = [g for g in gold if g and g[0] != "-DOCSTART-"]
  predicted = [line.split() for line in (out / "test_predictions.txt").read_text().splitlines()]
  rows = [p for p in predicted if p]
  assert len(rows) == len(words) and all(len(r) == 3 for r in rows)
  assert [r[0] for r in rows] == [w[0] for w in words]
  assert "entity_f1" in read_results(out / "test_results.txt")
