"""run_classifier end to end on a slice of MRPC with a tiny random BERT (and helpers that the
NER and SWAG end-to-end tests share)."""

import json
import os
import subprocess
import sys

from conftest import GLUE_DATA
from conftest import REPO
from conftest import UNCASED_VOCAB
from conftest import need
from conftest import run_command
import pytest

pytestmark = pytest.mark.large  # trains or runs commands: `make test`, not `make test-fast`

TINY = {"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
        "intermediate_size": 64, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 64,
        "type_vocab_size": 2, "initializer_range": 0.02}


def tiny_config(tmp_path):
  path = tmp_path / "bert_config.json"
  path.write_text(json.dumps(TINY))
  return str(path)


def run_script(module, tmp_path, *args, check=True, process=False):
  """Runs the command `module` with a tiny model; returns its exit status and output (a
  CompletedProcess or `conftest.CommandResult`). In this process through the command's own
  launcher (`conftest.run_command`), or with `process` as `python -m module` (one test per
  command: the exit status and stderr a shell sees)."""
  args = [f"--vocab_file={need(UNCASED_VOCAB)}", f"--bert_config_file={tiny_config(tmp_path)}",
          "--max_seq_length=32", "--train_batch_size=8", "--eval_batch_size=8",
          "--predict_batch_size=8", "--num_train_steps=3", "--steps_per_loop=3"] + list(args)
  if process:
    proc = subprocess.run([sys.executable, "-m", module] + args, cwd=REPO, capture_output=True,
                          text=True, timeout=300,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES=""))
  else:
    proc = run_command(module, *args)
  if check:
    assert proc.returncode == 0, proc.stderr[-3000:]
  return proc


def read_results(path):
  with open(path, encoding="utf-8") as f:
    return dict(line.strip().split(" = ") for line in f)


def _glue_slice(tmp_path, train=40, dev=12, test=10):
  """The first rows of MRPC's files (header included; tests/data's excerpts) in a
  glue_data-style folder."""
  folder = tmp_path / "MRPC"
  folder.mkdir()
  for name, rows in (("train", train), ("dev", dev), ("test", test)):
    with open(os.path.join(GLUE_DATA, "MRPC", name + ".tsv"),
              encoding="utf-8") as f:
      (folder / f"{name}.tsv").write_text("".join(f.readlines()[:rows + 1]), encoding="utf-8")
  return str(folder)


def test_run_classifier_trains_evaluates_and_writes_submissions(tmp_path):
  data = _glue_slice(tmp_path)
  out = tmp_path / "out"
  run_script("official_bert.run_classifier", tmp_path, "--task_name=MRPC",
             f"--data_dir={data}", f"--output_dir={out}", "--do_train", "--do_eval",
             "--do_predict")
  results = read_results(out / "eval_results.txt")
  assert {"accuracy", "f1", "acc_and_f1", "loss", "classification_loss"} <= set(results)
  assert results["global_step"] == "3" and 0 <= float(results["f1"]) <= 1
  for name in ("train", "dev", "test"):  # features went through TFRecords
    assert (out / f"{name}.tf_record").exists()
  submission = (out / "MRPC.tsv").read_text().splitlines()
  assert submission[0] == "index\tprediction" and len(submission) == 11
  assert [line.split("\t")[0] for line in submission[1:]] == [str(i) for i in range(10)]
  assert {line.split("\t")[1] for line in submission[1:]} <= {"0", "1"}
  probabilities = [list(map(float, line.split("\t")))
                   for line in (out / "test_results.tsv").read_text().splitlines()]
  assert len(probabilities) == 10 and all(abs(sum(p) - 1) < 1e-4 for p in probabilities)


def test_run_classifier_bad_tsv_names_file_and_line(tmp_path):
  data = _glue_slice(tmp_path, train=3, dev=3, test=1)
  with open(os.path.join(data, "dev.tsv"), "a", encoding="utf-8") as f:
    f.write("1\t2\tonly three columns\n")
  proc = run_script("official_bert.run_classifier", tmp_path, "--task_name=MRPC",
                    f"--data_dir={data}", f"--output_dir={tmp_path / 'out'}", "--do_eval",
                    check=False, process=True)
  assert proc.returncode == 1
  assert "dev.tsv:5: 3 tab-separated columns, expected 5" in proc.stderr
