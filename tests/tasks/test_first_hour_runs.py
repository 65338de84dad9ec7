"""A newcomer's first fine-tuning runs (issue 36): a short run shows its progress (log lines
and TensorBoard points every ~10% of its steps), --do_predict names the files it wrote (every
job), a mistyped training label is named in a warning, or is an error with --label_names.

The commands run in this process through their own launcher (`conftest.run_command`) on a
tiny random model."""

import csv
import json
import os
import re

from conftest import CONLL_DATA
from conftest import SQUAD_V1
from conftest import UNCASED_VOCAB
from conftest import run_command
from conftest import tiny_model_folder
import pytest
import tensorflow as tf
from test_glue_run_classifier import _glue_slice
from test_glue_run_classifier import tiny_config
from test_swag_multiple_choice import write_swag

from official_bert.tasks import file_splits
from official_bert.training import settings as settings_lib

pytestmark = pytest.mark.large  # trains or runs commands: `make test`, not `make test-fast`

WORDS = ["good", "bad", "great", "awful", "fine", "poor", "nice", "dull"]


def _labelled_csv(path, labels):
  """A CSV of `labels` with short texts; returns its path."""
  with open(path, "w", encoding="utf-8", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(["text", "label"])
    writer.writerows([[f"{WORDS[i % 8]} {WORDS[(i * 3) % 8]} film", label]
                      for i, label in enumerate(labels)])
  return str(path)


def _summary_steps(folder, tag="loss"):
  """The steps at which the TensorBoard events in `folder` hold a `tag` scalar."""
  steps = set()
  for name in tf.io.gfile.listdir(folder):
    for event in tf.compat.v1.train.summary_iterator(os.path.join(folder, name)):
      steps.update(event.step for value in event.summary.value if value.tag == tag)
  return sorted(steps)


def test_loop_steps_default_is_a_tenth_of_a_short_run():
  assert settings_lib.loop_steps(None, 31) == 3
  assert settings_lib.loop_steps(None, 5) == 1
  assert settings_lib.loop_steps(None, 100000) == settings_lib.DEFAULT_STEPS_PER_LOOP == 100
  assert settings_lib.loop_steps(7, 31) == 7  # given: kept
  assert settings_lib.RunSettings().steps_per_loop is None


def test_a_short_run_shows_progress_names_predictions_and_a_rare_label(tmp_path):
  """248 rows, batch 8, one epoch: 31 steps. With the old fixed --steps_per_loop=100, one log
  line and one TensorBoard point at step 31; now one every 3 steps. The one mistyped label
  is warned of (file, line, count), the prediction file is named."""
  labels = ["pos", "neg"] * 124
  labels[55] = "psoitive"  # data row 56: line 57 of the file (the header is line 1)
  train = _labelled_csv(tmp_path / "train.csv", labels)
  test = _labelled_csv(tmp_path / "test.csv", ["pos", "neg"] * 3)
  out = tmp_path / "out"
  proc = run_command("official_bert.run_classifier", f"--train_file={train}",
                     f"--test_file={test}", f"--vocab_file={UNCASED_VOCAB}",
                     f"--bert_config_file={tiny_config(tmp_path)}", "--max_seq_length=16",
                     "--train_batch_size=8", "--predict_batch_size=8", "--num_train_epochs=1",
                     "--do_train", "--do_predict", f"--output_dir={out}")
  assert proc.returncode == 0, proc.stderr[-3000:]
  logged = [int(s) for s in re.findall(r"step (\d+)/31 \| loss", proc.stderr)]
  assert logged == [3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 31], proc.stderr[-3000:]
  assert _summary_steps(out / "train") == logged
  warning = (f"{train}:57: label 'psoitive' occurs 1 time in 248 training rows (the others at "
             "least 123 times): a typo? Fix the file, or pass --label_names=neg,pos (then any "
             "other label is an error)")
  assert re.search(r"^W.*" + re.escape(warning), proc.stderr, re.MULTILINE), proc.stderr[-3000:]
  assert f"Predictions (test) written to {out}/test_predictions.tsv, " \
         f"{out}/test_results.txt" in proc.stderr, proc.stderr[-3000:]


def test_a_training_label_outside_label_names_is_an_error_naming_file_and_line(tmp_path):
  labels = ["pos", "neg"] * 20
  labels[5] = "psoitive"  # line 7
  train = _labelled_csv(tmp_path / "train.csv", labels)
  out = tmp_path / "out"
  proc = run_command("official_bert.run_classifier", f"--train_file={train}",
                     "--label_names=neg,pos", f"--vocab_file={UNCASED_VOCAB}",
                     f"--bert_config_file={tiny_config(tmp_path)}", "--max_seq_length=16",
                     "--do_train", f"--output_dir={out}")
  assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
  assert f"{train}:7: label 'psoitive' is not in the label set ['neg', 'pos']" in proc.stderr
  assert not (out / "train.tf_record").exists()


def test_warn_rare_labels():
  rows = ["pos", "neg"] * 20 + ["psoitive"]
  where = [f"t.csv:{i + 2}" for i in range(len(rows))]
  assert file_splits.warn_rare_labels(rows, where, "--label_names") == [
      "t.csv:42: label 'psoitive' occurs 1 time in 41 training rows (the others at least 20 "
      "times): a typo? Fix the file, or pass --label_names=neg,pos (then any other label is "
      "an error)"]
  # A label seen 3 times is a class: c (2) is not far rarer than d (3).
  assert file_splits.warn_rare_labels(["a"] * 30 + ["b"] * 25 + ["c", "c"] + ["d"] * 3) == []
  # Twice, no location, no flag to suggest.
  rows = ["a"] * 30 + ["b"] * 25 + ["c", "c"]
  assert file_splits.warn_rare_labels(rows, unit="training tokens") == [
      "label 'c' occurs 2 times in 57 training tokens (the others at least 25 times): a typo? "
      "Fix the file"]
  # Small data: a label of 2 among labels of 5 is not "far rarer"; one label only: nothing.
  assert file_splits.warn_rare_labels(["a"] * 5 + ["b"] * 5 + ["c"] * 2) == []
  assert file_splits.warn_rare_labels(["a", "a"]) == []
  # Multi-label: each label of a row counts; the first row holding it is named.
  rows = [["x", "y"]] * 12 + [["x", "z"]]
  assert file_splits.warn_rare_labels(rows, [f"m.csv:{i}" for i in range(13)]) == [
      "m.csv:12: label 'z' occurs 1 time in 13 training rows (the others at least 12 times): "
      "a typo? Fix the file"]


def _squad_slice(path):
  dataset = json.load(open(SQUAD_V1, encoding="utf-8"))
  dataset["data"] = dataset["data"][:1]
  dataset["data"][0]["paragraphs"] = dataset["data"][0]["paragraphs"][:1]
  path.write_text(json.dumps(dataset), encoding="utf-8")
  return str(path)


def _swag_dir(tmp_path):
  folder = tmp_path / "swag"
  folder.mkdir()
  write_swag(folder / "test.csv", 4, label=False)
  return str(folder)


@pytest.mark.parametrize("module,data_args,written", [
    ("official_bert.run_classifier",
     lambda tmp: ["--task_name=MRPC", f"--data_dir={_glue_slice(tmp, test=6)}"],
     ["test_results.tsv", "MRPC.tsv"]),
    ("official_bert.run_ner", lambda tmp: [f"--data_dir={CONLL_DATA}"],
     ["test_predictions.txt", "test_results.txt"]),
    ("official_bert.run_swag", lambda tmp: [f"--data_dir={_swag_dir(tmp)}"],
     ["test_results.tsv"]),
    ("official_bert.run_squad",
     lambda tmp: [f"--predict_file={_squad_slice(tmp / 'dev.json')}", "--doc_stride=32",
                  "--max_query_length=16"],
     ["predictions.json", "nbest_predictions.json", "squad_eval_results.json"]),  # "predict"
])
def test_do_predict_names_the_files_it_wrote(tmp_path, module, data_args, written):
  model = tiny_model_folder(tmp_path / "model")
  out = tmp_path / "out"
  proc = run_command(module, f"--init_checkpoint={model}", "--do_predict", "--max_seq_length=64",
                     "--predict_batch_size=8", f"--output_dir={out}", *data_args(tmp_path))
  assert proc.returncode == 0, proc.stderr[-3000:]
  paths = [os.path.join(out, name) for name in written]
  assert all(os.path.isfile(path) for path in paths), os.listdir(out)
  split = "predict" if module.endswith("squad") else "test"
  assert (f"Predictions ({split}) written to {', '.join(paths)}\n"
          in proc.stderr), proc.stderr[-3000:]
