"""SWAG: the CSV reader and features on a small file of our own, and run_swag end to end."""

import csv
import json

from conftest import UNCASED_VOCAB
from conftest import need
from conftest import run_command
import numpy as np
import pytest
from test_glue_run_classifier import read_results
from test_glue_run_classifier import run_script

from data_prep.classification import features as classifier_features
from data_prep.multiple_choice import swag

pytestmark = pytest.mark.large  # trains or runs commands: `make test`, not `make test-fast`

HEADER = ["", "video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source",
          "ending0", "ending1", "ending2", "ending3", "label"]


def write_swag(path, n, label=True, seed=0):
  """n SWAG-format rows (pandas-style leading index column; quoted fields with commas)."""
  rng = np.random.default_rng(seed)
  people = ["The man", "A woman", "Someone", "The dog"]
  acts = ["opens the door", "picks up a ball", "walks to the car, slowly", "sits down"]
  with open(path, "w", newline="", encoding="utf-8") as f:
    writer = csv.writer(f)
    writer.writerow(HEADER if label else HEADER[:-1])
    for i in range(n):
      sent1 = f"{people[i % 4]} {acts[(i + 1) % 4]}."
      sent2 = people[(i + 2) % 4]
      endings = [f"{acts[(i + k) % 4]}." for k in range(4)]
      row = [i, f"lsmdc{i}", i, f"{sent1} {sent2}", sent1, sent2, "gold"] + endings
      writer.writerow(row + ([int(rng.integers(4))] if label else []))


def test_reader_reads_our_csv(tmp_path):
  path = tmp_path / "val.csv"
  write_swag(path, 5)
  examples = swag.read_swag(str(path))
  assert len(examples) == 5
  first = examples[0]
  assert first.swag_id == "lsmdc0-0" and first.context == "The man picks up a ball."
  assert first.start_ending == "Someone"
  assert first.endings[2] == "walks to the car, slowly."  # a quoted comma stays in the field
  assert all(0 <= e.label < 4 for e in examples)
  write_swag(tmp_path / "test.csv", 3, label=False)
  assert [e.label for e in swag.read_swag(str(tmp_path / "test.csv"), False)] == [None] * 3


def test_reader_errors(tmp_path):
  path = tmp_path / "bad.csv"
  path.write_text(",video-id,sent1,sent2,ending0,ending1,ending2,label\n")
  with pytest.raises(ValueError, match=r"bad.csv:1: missing column\(s\) \['ending3'\]"):
    swag.read_swag(str(path))
  write_swag(path, 2)
  with open(path, "a", encoding="utf-8") as f:
    f.write("9,v,9,s,s1,s2,gold,e0,e1,e2,e3,7\n")
  with pytest.raises(ValueError, match=r"bad.csv:4: label '7' is not one of the choices"):
    swag.read_swag(str(path))


def test_features_one_sequence_per_choice(tmp_path):
  write_swag(tmp_path / "val.csv", 2)
  examples = swag.read_swag(str(tmp_path / "val.csv"))
  tokenizer = classifier_features.cached_tokenizer(need(UNCASED_VOCAB), True)
  cols = swag.convert_examples(examples, 20, tokenizer)
  assert cols["input_ids"].shape == (2, 4 * 20) and cols["label_ids"].shape == (2, 1)
  choice2 = cols["input_ids"][0].reshape(4, 20)[2]
  assert " ".join(tokenizer.convert_ids_to_tokens([i for i in choice2 if i])) == (
      "[CLS] the man picks up a ball . [SEP] someone walks to the car , slowly . [SEP]")
  segments = cols["segment_ids"][0].reshape(4, 20)[2]
  assert segments.tolist()[:9] == [0] * 9 and segments[9] == 1


def test_run_swag_trains_evaluates_and_predicts(tmp_path):
  data = tmp_path / "swag"
  data.mkdir()
  write_swag(data / "train.csv", 24)
  write_swag(data / "val.csv", 10, seed=1)
  write_swag(data / "test.csv", 6, label=False)
  out = tmp_path / "out"
  run_script("official_bert.run_swag", tmp_path, f"--data_dir={data}", f"--output_dir={out}",
             "--do_train", "--do_eval", "--do_predict", "--eval_every_steps=2")
  results = read_results(out / "eval_results.txt")
  assert {"accuracy", "multiple_choice_loss", "loss"} <= set(results)
  state = json.loads((out / "best" / "state.json").read_text())  # evaluated at steps 2, 3
  assert state["metric"] == "accuracy" and state["last_evaluated_step"] == 3
  assert float(results["accuracy"]) in {i / 10 for i in range(11)}
  lines = (out / "test_results.tsv").read_text().splitlines()
  assert lines[0].split("\t") == ["id", "ending0", "ending1", "ending2", "ending3",
                                  "prediction"]
  rows = [line.split("\t") for line in lines[1:]]
  assert len(rows) == 6 and rows[0][0] == "lsmdc0-0"
  assert all(abs(sum(map(float, r[1:5])) - 1) < 1e-4 and r[5] in "0123" for r in rows)
  # The trained folder as --init_checkpoint of an evaluation into a new --output_dir: read at
  # its recorded --max_seq_length (run_script's 32), not the default 128.
  proc = run_command("official_bert.run_swag", f"--data_dir={data}", f"--init_checkpoint={out}",
                     f"--output_dir={tmp_path / 'evaluated'}", "--do_eval")
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert f"From {out / 'run_settings.json'}: --max_seq_length=32" in proc.stderr
