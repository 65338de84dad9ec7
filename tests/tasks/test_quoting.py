"""--quoting (issue 37): the user's own .tsv/.csv files read with CSV quoting (the default) or
with quotes as plain characters (`none`, as the GLUE files are read), in the one reader
(`own_files`) that run_classifier and run_embeddings share. A GLUE-style TSV whose sentences
hold literal quotes (STS-B's: one opening a field) trains with --quoting=none; without it the
error names the file, the line and the flag. run_ner's own files are CoNLL columns (split on
whitespace, no quotes to read): it has no --quoting.

The commands run in this process through their own launcher (`conftest.run_command`) on a
tiny random model."""

import json

from conftest import run_command
from conftest import tiny_model_folder
import pytest

from data_prep.classification import own_files
from official_bert.tasks import classifier_job
from official_bert.tasks import embedding_job
from official_bert.tasks import ner_job

pytestmark = pytest.mark.large  # trains or runs commands: `make test`, not `make test-fast`

# STS-B's train.tsv as GLUE writes it (no quoting): line 3 opens a field with a quote that
# CSV quoting reads on across lines, to the stray quote of line 5 ("'\t' expected after '"'",
# as STS-B's train.tsv:2006 after its line 2003).
GLUE_STYLE_ROWS = [
    ["index", "sentence1", "sentence2", "score"],
    ["0", "A man plays a guitar.", "A man plays music.", "4.2"],
    ["1", '"Then the captain was gone.', "Then the captain came back.", "0.8"],
    ["2", "The problem is simpler than that.", "The problem is simple.", "3.8"],
    ["3", 'So I ask you: " Where is the beef " ?', 'I ask: " Where is the cake " ?', "0.4"],
    ["4", 'Testimonies from "real" health experts.', "Real experts testify.", "2.5"],
    ["5", "A dog runs in the park.", "A cat sleeps on a sofa.", "0.2"],
    ["6", "The film was good.", "The movie was good.", "5"],
    ["7", "He said \"no\".", "He refused.", "3.6"],
]
STRAY_QUOTE_LINE, QUOTE_OPENED_LINE = 5, 3


def _glue_style_tsv(path):
  path.write_text("".join("\t".join(row) + "\n" for row in GLUE_STYLE_ROWS), encoding="utf-8")
  return str(path)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
  return tiny_model_folder(tmp_path_factory.mktemp("quoting") / "tiny")


def test_reader_quoting_csv_and_none(tmp_path):
  columns = own_files.Columns("text")
  quoted_csv = tmp_path / "a.csv"  # as pandas / csv.writer write: quoted, doubled quotes
  quoted_csv.write_text('text,label\n"a, b",x\n"say ""hi""",y\n', encoding="utf-8")
  texts = [e.text_a for e in own_files.read_examples(str(quoted_csv), columns).examples]
  assert texts == ["a, b", 'say "hi"']
  with pytest.raises(ValueError, match=r"a\.csv:2: 3 comma-separated fields, expected 2 .*"
                     r"with --quoting=none no field can hold the delimiter"):
    own_files.read_examples(str(quoted_csv), columns, quoting="none")

  glue = _glue_style_tsv(tmp_path / "train.tsv")
  pair = own_files.Columns("sentence1", "sentence2", "score")
  data = own_files.read_examples(glue, pair, "regression", quoting="none")
  assert [e.text_a for e in data.examples] == [row[1] for row in GLUE_STYLE_ROWS[1:]]
  assert [e.text_b for e in data.examples] == [row[2] for row in GLUE_STYLE_ROWS[1:]]
  assert data.lines == list(range(2, len(GLUE_STYLE_ROWS) + 1))
  message = (f"{glue}:{STRAY_QUOTE_LINE}: malformed line ('\t' expected after '\"'), in the "
             f"record that starts at line {QUOTE_OPENED_LINE} (a quoted field runs across "
             "lines): if quotes in this file are plain characters (GLUE-style TSV), pass "
             "--quoting=none")
  for quoting in ({}, {"quoting": "csv"}):
    with pytest.raises(ValueError) as error:
      own_files.read_examples(glue, pair, "regression", **quoting)
    assert str(error.value) == message

  # A plain quote that CSV quoting closes later on the line: one field where two were meant.
  merged = tmp_path / "b.tsv"
  merged.write_text('text\tlabel\n"a\tb" c\tx\n"d\te\n', encoding="utf-8")
  with pytest.raises(ValueError, match=r"b\.tsv:2: malformed line"):
    own_files.read_examples(str(merged), columns)
  merged.write_text('text\tlabel\n"a\tb"\n', encoding="utf-8")
  with pytest.raises(ValueError, match=r"b\.tsv:2: 1 tab-separated fields, expected 2 .*quote "
                     r"a field that holds the delimiter; or, if quotes in this file are plain "
                     r"characters \(GLUE-style TSV\), pass --quoting=none"):
    own_files.read_examples(str(merged), columns)
  assert own_files.read_examples(str(merged), columns, need_labels=False,
                                 quoting="none").examples[0].text_a == '"a'
  jsonl = tmp_path / "c.jsonl"  # JSON has its own quoting: either value reads it the same
  jsonl.write_text('{"text": "\\"q", "label": "x"}\n', encoding="utf-8")
  assert own_files.read_examples(str(jsonl), columns, quoting="none").examples[0].text_a == '"q'
  with pytest.raises(ValueError, match="quoting='single': not one of csv, none"):
    own_files.read_examples(str(jsonl), columns, quoting="single")


def test_one_flag_for_the_commands_that_read_own_delimited_files():
  for settings in (classifier_job.ClassifierSettings, embedding_job.EmbeddingSettings):
    assert settings().quoting == "csv"
  assert not hasattr(ner_job.NerSettings(), "quoting")  # CoNLL columns: no quotes


COMMANDS = {
    "official_bert.run_classifier": ["--text_column=sentence1", "--text_b_column=sentence2",
                                     "--label_column=score", "--problem_type=regression"],
    "official_bert.run_embeddings": ["--text_column=sentence1", "--text_b_column=sentence2",
                                     "--score_column=score", "--loss=cosine"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_glue_style_tsv_trains_with_quoting_none(command, model, tmp_path):
  train = _glue_style_tsv(tmp_path / "train.tsv")
  args = [f"--init_checkpoint={model}", f"--train_file={train}", "--do_train",
          "--max_seq_length=16", "--train_batch_size=4", "--num_train_steps=1",
          *COMMANDS[command]]
  out = tmp_path / "out"
  proc = run_command(command, *args, f"--output_dir={out}")
  assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
  assert (f"{train}:{STRAY_QUOTE_LINE}: malformed line ('\t' expected after '\"'), in the record "
          f"that starts at line {QUOTE_OPENED_LINE}") in proc.stderr, proc.stderr[-3000:]
  assert "pass --quoting=none" in proc.stderr
  assert not (out / "train.tf_record").exists()

  proc = run_command(command, *args, "--quoting=none", f"--output_dir={out}")
  assert proc.returncode == 0, proc.stderr[-3000:]
  meta = json.loads((out / "train.tf_record.json").read_text())
  assert meta["num_examples"] == len(GLUE_STYLE_ROWS) - 1
  assert meta["key"]["quoting"] == "none"  # the cached records are read again on a change
