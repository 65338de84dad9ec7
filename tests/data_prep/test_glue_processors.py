"""GLUE processors on excerpts of the real glue_data files (tests/data; the full files when
../shared is present), bad input, and TFDS (mock data)."""

import os
import tempfile

from conftest import GLUE_DATA
from conftest import SHARED_DATA
from conftest import need
import pytest

from data_prep.classification import glue_processors as gp

GLUE = GLUE_DATA  # the fixture excerpts in tests/data/glue
REAL_GLUE = os.path.join(SHARED_DATA, "glue")

# (task, split, rows, labels seen, has text_b): counts from the data README (full files).
REAL = [
    ("CoLA", "train", 8551, {"0", "1"}, False),
    ("CoLA", "dev", 1043, {"0", "1"}, False),
    ("CoLA", "test", 1063, {"0"}, False),
    ("SST-2", "train", 67349, {"0", "1"}, False),
    ("SST-2", "dev", 872, {"0", "1"}, False),
    ("MRPC", "train", 3668, {"0", "1"}, True),
    ("MRPC", "dev", 408, {"0", "1"}, True),
    ("MRPC", "test", 1725, {"0"}, True),
    ("RTE", "train", 2490, {"entailment", "not_entailment"}, True),
    ("RTE", "test", 3000, {"entailment"}, True),
    ("QNLI", "dev", 5463, {"entailment", "not_entailment"}, True),
    ("WNLI", "train", 635, {"0", "1"}, True),
]


# Rows in the fixture excerpts (the first rows, plus the 10 longest of each dev file and RTE's
# last test row): see tests/data/README.md.
FIXTURE_ROWS = {("CoLA", "train"): 40, ("CoLA", "dev"): 50, ("CoLA", "test"): 20,
                ("SST-2", "train"): 40, ("SST-2", "dev"): 50, ("MRPC", "train"): 40,
                ("MRPC", "dev"): 50, ("MRPC", "test"): 20, ("RTE", "train"): 20,
                ("RTE", "test"): 21, ("QNLI", "dev"): 30, ("WNLI", "train"): 20}


@pytest.mark.parametrize("task,split,rows,labels,pair", REAL)
def test_real_glue_files(task, split, rows, labels, pair):
  del rows  # the full files' counts: test_full_glue_files_row_counts
  processor = gp.get_processor(task)
  examples = processor.get_examples(os.path.join(GLUE, task), split)
  assert len(examples) == FIXTURE_ROWS[task, split]
  assert {e.label for e in examples} == labels
  assert all((e.text_b is not None) == pair for e in examples)
  assert all(e.text_a for e in examples)


def test_full_glue_files_row_counts():
  """Real data: every full GLUE file in ../shared has its published number of rows."""
  for task, split, rows, labels, _ in REAL:
    examples = gp.get_processor(task).get_examples(need(os.path.join(REAL_GLUE, task)), split)
    assert (task, split, len(examples)) == (task, split, rows)
    assert {e.label for e in examples} == labels
  assert len(gp.get_processor("STS-B").get_examples(os.path.join(REAL_GLUE, "STS-B"),
                                                    "dev")) == 1500


def test_columns_and_guids_match_the_original():
  mrpc = gp.get_processor("mrpc").get_examples(os.path.join(GLUE, "MRPC"), "dev")
  assert mrpc[0] == gp.InputExample(
      "dev-0", "He said the foodservice pie business doesn 't fit the company 's long-term "
      "growth strategy .", '" The foodservice pie business does not fit our long-term growth '
      "strategy .", "1")
  cola = gp.get_processor("CoLA").get_examples(os.path.join(GLUE, "CoLA"), "test")
  assert cola[0] == gp.InputExample("test-0", "Bill whistled past the house.", None, "0")
  stsb = gp.get_processor("STS-B")
  dev = stsb.get_examples(os.path.join(GLUE, "STS-B"), "dev")
  assert len(dev) == 50 and dev[0].label == 5.0 and stsb.is_regression  # 1500 in the full file
  assert dev[0].text_a == "A man with a hard hat is dancing."
  assert stsb.get_labels() == [None]
  rte = gp.get_processor("RTE").get_examples(os.path.join(GLUE, "RTE"), "test")
  assert rte[-1].guid == "test-2999"  # the GLUE submission index


def test_names_and_submission_files():
  assert gp.get_processor("sst2").name == gp.get_processor("SST-2").name == "SST-2"
  mnli = gp.get_processor("MNLI")
  assert mnli.eval_splits == ("dev_matched", "dev_mismatched")
  assert [mnli.submission_name(s) for s in mnli.predict_splits] == ["MNLI-m", "MNLI-mm"]
  assert mnli.get_labels() == ["contradiction", "entailment", "neutral"]
  with pytest.raises(ValueError, match="known tasks: CoLA, SST-2"):
    gp.get_processor("squad")


def test_wrong_column_count_names_file_and_line(tmp_path):
  path = tmp_path / "dev.tsv"
  path.write_text("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
                  "1\t1\t2\ta\tb\n"
                  "0\t3\t4\tonly a\n", encoding="utf-8")
  with pytest.raises(ValueError, match=r"dev.tsv:3: 4 tab-separated columns, expected 5"):
    gp.get_processor("MRPC").get_examples(str(tmp_path), "dev")


def test_unknown_label_lists_the_labels(tmp_path):
  (tmp_path / "train.tsv").write_text("index\tsentence1\tsentence2\tlabel\n"
                                      "0\ta\tb\tentailment\n"
                                      "1\ta\tb\tneutral\n", encoding="utf-8")
  with pytest.raises(ValueError, match=r"train.tsv:3: unknown label 'neutral'; known labels: "
                     r"\['entailment', 'not_entailment'\]"):
    gp.get_processor("RTE").get_examples(str(tmp_path), "train")
  with pytest.raises(FileNotFoundError, match="no dev.tsv"):
    gp.get_processor("RTE").get_examples(str(tmp_path), "dev")


def test_quotes_are_text_as_in_the_original(tmp_path):
  (tmp_path / "dev.tsv").write_text('sentence\tlabel\n"a quoted\tstart\n', encoding="utf-8")
  with pytest.raises(ValueError, match="unknown label 'start'"):  # not one quoted field
    gp.get_processor("SST-2").get_examples(str(tmp_path), "dev")


def test_tfds_mock_data(tmp_path, monkeypatch):
  tfds = pytest.importorskip("tensorflow_datasets")
  # A builder without a prepared dataset_info.json (mock data) fetches it from GCS through a
  # fresh temporary folder that TFDS leaves behind: here, under the test's own.
  monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
  with tfds.testing.mock_data(num_examples=6, policy=tfds.testing.MockPolicy.USE_CODE):
    mrpc = gp.get_processor("MRPC")
    train = gp.load_examples(mrpc, "train", tfds_data_dir="/nonexistent/tfds")
    assert len(train) == 6
    assert all(e.label in ("0", "1") and e.text_b is not None for e in train)
    test = gp.load_examples(mrpc, "test", tfds_data_dir="/nonexistent/tfds")
    assert {e.label for e in test} == {"0"} and test[0].guid.startswith("test-")
    mnli = gp.load_examples(gp.get_processor("MNLI"), "dev_mismatched",
                            tfds_data_dir="/nonexistent/tfds")
    assert {e.label for e in mnli} <= {"contradiction", "entailment", "neutral"}
    stsb = gp.load_examples(gp.get_processor("STS-B"), "dev", tfds_data_dir="/nonexistent")
    assert all(isinstance(e.label, float) for e in stsb)
