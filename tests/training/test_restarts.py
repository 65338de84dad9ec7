"""--num_restarts: K seeds trained, the best on dev kept in OUTPUT_DIR/best and used for
--do_predict, every restart's scores with mean / sd / best in restarts.json. In-process, a
tiny classifier on own CSV files."""

import csv
import json
import os
import statistics

from conftest import UNCASED_VOCAB
import numpy as np
import pytest

from official_bert.interop import weights_io
from official_bert.tasks import classifier_job
from official_bert.training import finetuning_runner
from official_bert.training import restarts

pytestmark = pytest.mark.large  # trains or runs commands: `make test`, not `make test-fast`

TINY = {"vocab_size": 30522, "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
        "intermediate_size": 32, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 32,
        "type_vocab_size": 2, "initializer_range": 0.02}
WORDS = ["good", "bad", "great", "awful", "fine", "poor", "nice", "dull"]


def _files(tmp_path):
  rng = np.random.default_rng(0)
  paths = {}
  for name, n in (("train", 32), ("dev", 16), ("test", 8)):
    rows = [[" ".join(rng.choice(WORDS, 4)), str(rng.choice(["pos", "neg"]))] for _ in range(n)]
    paths[name] = str(tmp_path / f"{name}.csv")
    with open(paths[name], "w", encoding="utf-8", newline="") as f:
      csv.writer(f).writerows([["text", "label"]] + rows)
  (tmp_path / "bert_config.json").write_text(json.dumps(TINY))
  return paths


def _settings(tmp_path, out, **overrides):
  paths = _files(tmp_path)
  values = dict(train_file=paths["train"], dev_file=paths["dev"], test_file=paths["test"],
                vocab_file=UNCASED_VOCAB, bert_config_file=str(tmp_path / "bert_config.json"),
                max_seq_length=16, train_batch_size=8, eval_batch_size=8, predict_batch_size=8,
                num_train_steps=4, steps_per_loop=4, learning_rate=1e-3, do_train=True,
                do_eval=True, output_dir=str(out), random_seed=5)
  values.update(overrides)
  return classifier_job.ClassifierSettings(**values)


def _run(settings, job):
  return finetuning_runner.run(settings, job)


def _scores(path):
  with open(path, encoding="utf-8") as f:
    return {k: float(v) for k, v in (line.strip().split(" = ") for line in f)}


def test_restarts_keep_the_best_and_predict_with_it(tmp_path):
  out = tmp_path / "out"
  settings = _settings(tmp_path, out, num_restarts=3, do_predict=True)
  results = restarts.run(settings, classifier_job.make_job, _run)

  summary = json.loads((out / restarts.RESTARTS_FILE).read_text())
  assert summary == results["restarts"]
  # The task's main metric (own files: macro-F1), higher is better.
  assert summary["metric"] == "macro_f1" and summary["higher_is_better"] is True
  assert [r["seed"] for r in summary["restarts"]] == [5, 6, 7]
  values = []
  for k, r in enumerate(summary["restarts"]):
    own = _scores(out / f"restart_{k}" / "eval_results.txt")  # what the restart wrote
    assert r["scores"]["macro_f1"] == pytest.approx(own["macro_f1"])
    values.append(own["macro_f1"])
  assert summary["mean"] == pytest.approx(statistics.mean(values))
  assert summary["std"] == pytest.approx(statistics.stdev(values))
  best = summary["best"]["restart"]
  assert summary["best"]["value"] == max(values) == values[best]
  assert best == values.index(max(values))  # the first of equals

  # Seeds differ: the restarts' weights do.
  weights = [weights_io.read_weights(str(out / f"restart_{k}")).tensors for k in range(3)]
  name = "output_weights"
  assert not np.allclose(weights[0][name], weights[1][name])
  # best/ holds the best restart's weights and files; OUTPUT_DIR its scores.
  kept = weights_io.read_weights(str(out / "best")).tensors
  for key, value in weights[best].items():
    np.testing.assert_array_equal(kept[key], value, err_msg=key)
  for name in ("bert_config.json", "vocab.txt", "labels.txt", "run_settings.json"):
    assert (out / "best" / name).exists(), name
  assert _scores(out / "eval_results.txt")["macro_f1"] == pytest.approx(values[best])
  assert not list(out.glob(".best.*"))  # built beside, swapped in

  # --do_predict used the best restart: the same probabilities as predicting with its dir.
  again = _settings(tmp_path, out / f"restart_{best}", do_train=False, do_eval=False,
                    do_predict=True, bert_config_file=None, vocab_file=None)
  _run(again, classifier_job.make_job(again))
  with open(out / "test_predictions.tsv", encoding="utf-8") as f:
    ours = f.read()
  with open(out / f"restart_{best}" / "test_predictions.tsv", encoding="utf-8") as f:
    assert ours == f.read()
  assert len(ours.splitlines()) == 9


def test_restarts_need_dev_data(tmp_path):
  with pytest.raises(ValueError, match="--do_train and --do_eval"):
    restarts.run(_settings(tmp_path, tmp_path / "out", num_restarts=2, do_eval=False),
                 classifier_job.make_job, _run)
  assert not os.path.exists(tmp_path / "out" / "restart_0")


def test_summary_lower_is_better_and_unknown_metric():
  runs = [{"seed": s, "scores": {"loss": v}} for s, v in ((1, 0.5), (2, 0.3), (3, 0.4))]
  summary = restarts.summarize("loss", runs)
  assert summary["best"] == {"restart": 1, "seed": 2, "value": 0.3}
  assert summary["mean"] == pytest.approx(0.4) and summary["std"] == pytest.approx(0.1)
  with pytest.raises(ValueError, match="--best_metric=f1"):
    restarts.summarize("f1", runs)
