"""`python -m data_prep.create_classifier_data` end to end, against tf-models-official's
`classifier_data_lib.convert_single_example` + `FullTokenizer` as the oracle, fed by a plain
reading of the GLUE TSV (Model Garden's own GLUE processors read only TFDS now)."""

import csv
import json
import os
import subprocess
import sys

from conftest import GLUE_DATA
from conftest import REPO
from conftest import UNCASED_VOCAB
from conftest import need
from conftest import run_command
import numpy as np
import pytest
import tensorflow as tf

pytestmark = pytest.mark.large  # trains or runs commands: `make test`, not `make test-fast`

SEQ = 64  # short enough that many pairs are truncated


def _cli(*args):
  proc = subprocess.run([sys.executable, "-m", "data_prep.create_classifier_data", *args],
                        cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
  return proc


def _read(path, regression):
  label = tf.io.FixedLenFeature([1], tf.float32 if regression else tf.int64)
  spec = {"input_ids": tf.io.FixedLenFeature([SEQ], tf.int64),
          "input_mask": tf.io.FixedLenFeature([SEQ], tf.int64),
          "segment_ids": tf.io.FixedLenFeature([SEQ], tf.int64),
          "label_ids": label,
          "is_real_example": tf.io.FixedLenFeature([1], tf.int64)}
  return [{k: v.numpy() for k, v in tf.io.parse_single_example(r, spec).items()}
          for r in tf.data.TFRecordDataset(path)]


# task -> (text_a column, text_b column, label column, labels); None labels: regression.
_COLUMNS = {"MRPC": (3, 4, 0, ["0", "1"]),
            "RTE": (1, 2, 3, ["entailment", "not_entailment"]),
            "STS-B": (7, 8, -1, None)}


def _tsv_examples(path, task, classifier_data_lib):
  a, b, label, labels = _COLUMNS[task]
  with open(path, encoding="utf-8") as f:
    rows = list(csv.reader(f, delimiter="\t", quotechar=None))[1:]
  return [classifier_data_lib.InputExample(
      guid=f"dev-{i}", text_a=row[a], text_b=row[b],
      label=float(row[label]) if labels is None else row[label]) for i, row in enumerate(rows)]


@pytest.mark.parametrize("task,regression", [("MRPC", False), ("RTE", False), ("STS-B", True)])
def test_dev_records_equal_model_garden_features(tmp_path, task, regression):
  data_dir = os.path.join(GLUE_DATA, task)  # first and 10 longest dev rows (tests/data)
  need(os.path.join(data_dir, "dev.tsv"))
  need(UNCASED_VOCAB)
  from official.nlp.data import classifier_data_lib  # pylint: disable=import-outside-toplevel
  from official.nlp.tools import tokenization  # pylint: disable=import-outside-toplevel

  out = tmp_path / "out"
  proc = run_command("data_prep.create_classifier_data", f"--task_name={task}",
                     f"--data_dir={data_dir}", f"--vocab_file={UNCASED_VOCAB}",
                     "--do_lower_case=True", f"--max_seq_length={SEQ}", f"--output_dir={out}",
                     "--splits=dev")
  assert proc.returncode == 0, proc.stderr[-2000:]
  path = out / "dev.tf_record"
  ours = _read(str(path), regression)
  meta = json.loads(open(str(path) + ".json").read())
  assert f"{path}: {len(ours)} examples" in proc.stdout
  assert not [p for p in os.listdir(out) if ".tmp" in p]  # no partial files left behind

  examples = _tsv_examples(os.path.join(data_dir, "dev.tsv"), task, classifier_data_lib)
  tokenizer = tokenization.FullTokenizer(UNCASED_VOCAB, do_lower_case=True)
  labels = _COLUMNS[task][3]
  if labels:
    assert meta["labels"] == labels
  assert len(ours) == len(examples) == {"MRPC": 50, "RTE": 40, "STS-B": 50}[task]
  assert meta["num_examples"] == len(examples)
  truncated = 0
  for i, (mine, example) in enumerate(zip(ours, examples)):
    want = classifier_data_lib.convert_single_example(i, example, labels, SEQ, tokenizer)
    for name in ("input_ids", "input_mask", "segment_ids"):
      np.testing.assert_array_equal(mine[name], getattr(want, name), err_msg=f"{i} {name}")
    if regression:
      assert mine["label_ids"][0] == pytest.approx(want.label_id, rel=1e-6), i
    else:
      assert mine["label_ids"][0] == want.label_id, i
    assert mine["is_real_example"][0] == 1
    truncated += int(mine["input_mask"][-1] == 1)
  assert truncated >= 5  # the truncation rule was exercised


def test_a_missing_data_dir_is_a_clear_error(tmp_path):
  need(UNCASED_VOCAB)
  proc = _cli("--task_name=MRPC", f"--data_dir={tmp_path / 'nowhere'}",
              f"--vocab_file={UNCASED_VOCAB}", f"--output_dir={tmp_path / 'out'}", "--splits=dev")
  assert proc.returncode != 0
  assert "nowhere" in proc.stderr


@pytest.mark.parametrize("flag, message", [
    # A pair's budget below 0 emptied both texts and crashed (pop from empty list).
    ("--max_seq_length=2", "flag --max_seq_length=2: 2 is not integer >= 3"),
    ("--max_train_examples=-3", "flag --max_train_examples=-3: -3 is not a non-negative"),
])
def test_out_of_range_flags_are_named(tmp_path, flag, message):
  proc = run_command("data_prep.create_classifier_data", "--task_name=MRPC",
                     f"--data_dir={tmp_path}", f"--vocab_file={UNCASED_VOCAB}",
                     f"--output_dir={tmp_path / 'out'}", flag)
  assert proc.returncode == 1 and message in proc.stderr, proc.stderr[-2000:]
  assert not (tmp_path / "out").exists()
