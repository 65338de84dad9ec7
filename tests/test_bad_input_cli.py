"""Bad input through the command line, tool by tool: exit status 1, a message naming the flag,
file, line or key, no traceback, nothing half-written and nothing good destroyed.

The commands run in this process through their own launcher (`conftest.run_command`: the
command's flags, `data_prep.cli.launch`, its exit status); a few cases run as a real process
(`python -m`), for the exit status and the stderr a shell sees: run_pretraining's, and
run_swag's and run_ner's (their end-to-end runs are in-process)."""

import json
import os
import shutil
import subprocess
import sys

from conftest import CONLL_DATA
from conftest import GLUE_DATA
from conftest import REPO
from conftest import SQUAD_V1
from conftest import SQUAD_V2
from conftest import UNCASED_VOCAB
from conftest import run_command
import numpy as np
import pytest

TINY = {"vocab_size": 30522, "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
        "intermediate_size": 32, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 128,
        "type_vocab_size": 2, "initializer_range": 0.02}


def _run(module, *args, check_fails=True, process=False):
  """`module`'s exit status and output: in this process (`run_command`), or with `process`
  in a real one."""
  if process:
    proc = subprocess.run([sys.executable, "-m", module] + [str(a) for a in args], cwd=REPO,
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  else:
    proc = run_command(module, *args)
  if check_fails:
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
  return proc


def _config(tmp_path, **changes):
  path = tmp_path / "bert_config.json"
  config = dict(TINY, **changes)
  path.write_text(json.dumps({k: v for k, v in config.items() if v is not None}))
  return path


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
  """A tiny encoder checkpoint of ours (for export and extract_features)."""
  from official_bert.interop import checkpointing  # pylint: disable=g-import-not-at-top
  from official_bert.modeling.bert_config import BertConfig  # pylint: disable=g-import-not-at-top
  from official_bert.modeling.encoder import BertEncoder  # pylint: disable=g-import-not-at-top
  root = tmp_path_factory.mktemp("ckpt")
  encoder = BertEncoder.from_bert_config(BertConfig(**TINY))
  encoder.build()
  prefix = checkpointing.model_checkpoint(encoder).write(str(root / "ckpt"))
  (root / "bert_config.json").write_text(json.dumps(TINY))
  return {"prefix": prefix, "config": root / "bert_config.json"}


@pytest.mark.parametrize("flag,message", [
    ("--learning_rate=-0.01", "--learning_rate=-0.01: must be > 0.0"),
    ("--learning_rate=nan", "--learning_rate=nan: must be a finite number"),
    ("--train_batch_size=0", "--train_batch_size=0: must be >= 1"),
    ("--num_train_steps=0", "--num_train_steps=0: must be >= 1"),
    ("--max_predictions_per_seq=0", "--max_predictions_per_seq=0: must be >= 1"),
    ("--steps_per_loop=2 --iterations_per_loop=3",
     "--iterations_per_loop=3 and --steps_per_loop=2 differ (one is the other's original "
     "name)"),
])
def test_run_pretraining_rejects_nonsense_flags_before_any_work(tmp_path, flag, message):
  proc = _run("official_bert.run_pretraining", f"--bert_config_file={_config(tmp_path)}",
              "--input_file=/nonexistent/*.tfrecord", f"--output_dir={tmp_path / 'out'}",
              "--do_train", *flag.split(), process=flag == "--learning_rate=-0.01")
  assert message in proc.stderr
  assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("missing", ["hidden_size", "num_attention_heads"])
def test_a_config_without_a_key_names_that_key(tmp_path, missing):
  proc = _run("official_bert.run_pretraining",
              f"--bert_config_file={_config(tmp_path, **{missing: None})}",
              "--input_file=/nonexistent/*", f"--output_dir={tmp_path / 'out'}", "--do_train")
  assert f"missing required key(s) ['{missing}']" in proc.stderr, proc.stderr[-2000:]


def test_an_output_dir_that_is_a_file_is_named(tmp_path):
  blocker = tmp_path / "afile"
  blocker.write_text("keep me")
  proc = _run("official_bert.run_pretraining", f"--bert_config_file={_config(tmp_path)}",
              "--input_file=/nonexistent/*", f"--output_dir={blocker}", "--do_train")
  assert f"cannot create {blocker} (--output_dir): {blocker} is a file" in proc.stderr
  proc = _run("official_bert.run_classifier", f"--bert_config_file={_config(tmp_path)}",
              f"--vocab_file={UNCASED_VOCAB}", "--task_name=MRPC", "--data_dir=/nonexistent",
              f"--output_dir={blocker}/sub", "--do_train")
  assert f"{blocker} is a file" in proc.stderr
  assert blocker.read_text() == "keep me"


def test_a_writer_whose_output_parent_is_a_file_names_it(tmp_path):
  blocker = tmp_path / "afile"
  blocker.write_text("x")
  corpus = tmp_path / "c.txt"
  corpus.write_text("One sentence.\nAnother one.\n\nA second document.\nIts end.\n")
  proc = _run("data_prep.create_pretraining_data", f"--input_file={corpus}",
              f"--output_file={blocker}/o.tfrecord", f"--vocab_file={UNCASED_VOCAB}")
  assert f"{blocker} is a file" in proc.stderr, proc.stderr[-2000:]


def test_an_output_file_that_is_a_folder_or_an_input_is_refused_before_any_work(tmp_path):
  """Each writer: a folder at --output_file failed at the final rename, after the work, with
  a traceback and a temporary file left; the input as --output_file was replaced."""
  corpus = tmp_path / "c.txt"
  corpus.write_text("One sentence.\nAnother one.\n\nA second document.\nIts end.\n")
  folder = tmp_path / "out"
  folder.mkdir()
  (folder / "mine.txt").write_text("keep me")
  for module, flags in (
      ("data_prep.learn_vocab", ["--vocab_size=50", "--min_count=1"]),
      ("data_prep.create_pretraining_data", [f"--vocab_file={UNCASED_VOCAB}"]),
      ("data_prep.extend_vocab", [f"--vocab_file={UNCASED_VOCAB}", "--num_new_tokens=1"])):
    proc = _run(module, f"--input_file={corpus}", f"--output_file={folder}", *flags)
    assert f"--output_file={folder} is a folder: give a file's path" in proc.stderr, (
        module, proc.stderr[-2000:])
    proc = _run(module, f"--input_file={tmp_path}/*.txt", f"--output_file={corpus}", *flags)
    assert f"--output_file={corpus} is also the --input_file" in proc.stderr, (
        module, proc.stderr[-2000:])
  # A name that is also a glob ([1] a character class) is the file it names.
  bracketed = tmp_path / "c[1].txt"
  bracketed.write_text(corpus.read_text())
  proc = _run("data_prep.learn_vocab", f"--input_file={bracketed}", f"--output_file={bracketed}",
              "--vocab_size=50", "--min_count=1")
  assert f"--output_file={bracketed} is also the --input_file" in proc.stderr, proc.stderr[-2000:]
  assert bracketed.read_text() == corpus.read_text()
  bracketed.unlink()
  assert sorted(os.listdir(tmp_path)) == ["c.txt", "out"]
  assert os.listdir(folder) == ["mine.txt"]
  assert corpus.read_text().startswith("One sentence.")
  # extend_vocab may write over its --vocab_file: an edit in place, not a lost input.
  vocab = tmp_path / "vocab.txt"
  shutil.copy(UNCASED_VOCAB, vocab)
  proc = _run("data_prep.extend_vocab", f"--input_file={corpus}", f"--vocab_file={vocab}",
              f"--output_file={vocab}", "--num_new_tokens=1", check_fails=False)
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert len(vocab.read_text().splitlines()) == len(open(UNCASED_VOCAB).read().splitlines())
  # A file of the user's (not TFRecords) at a writer's output: refused, kept; the writer's
  # own records are replaced by a rerun.
  notes = tmp_path / "notes.tfrecord"
  notes.write_text("my notes")
  proc = _run("data_prep.create_pretraining_data", f"--input_file={corpus}",
              f"--output_file={notes}", f"--vocab_file={UNCASED_VOCAB}")
  assert f"{notes} holds a file that is not TFRecords" in proc.stderr, proc.stderr[-2000:]
  assert notes.read_text() == "my notes"
  records = tmp_path / "records.tfrecord"
  for _ in range(2):
    proc = _run("data_prep.create_pretraining_data", f"--input_file={corpus}",
                f"--output_file={records}", f"--vocab_file={UNCASED_VOCAB}", check_fails=False)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_the_data_tools_refuse_a_case_the_vocabulary_contradicts(tmp_path):
  """--do_lower_case=False with an uncased vocabulary (google-research users' habit): most
  upper-case words became [UNK] without a word. Refused as the fine-tuning commands refuse
  it, before any work; --allow_case_mismatch writes as asked, with a warning."""
  corpus = tmp_path / "c.txt"
  corpus.write_text("The Film was Moving.\nIt Ended well.\n\nA Second document.\nIts end.\n")
  said = f"--do_lower_case=False but the vocabulary {UNCASED_VOCAB} is uncased"
  for module, output, flags in (
      ("data_prep.create_pretraining_data", tmp_path / "p.tfrecord", []),
      ("data_prep.extend_vocab", tmp_path / "v.txt", ["--num_new_tokens=1"])):
    common = [f"--input_file={corpus}", f"--vocab_file={UNCASED_VOCAB}",
              f"--output_file={output}", *flags]
    proc = _run(module, *common, "--do_lower_case=False")
    assert said in proc.stderr and "--allow_case_mismatch if this is intended" in proc.stderr, (
        module, proc.stderr[-2000:])
    assert not output.exists()
    for more, warned in ((["--do_lower_case=False", "--allow_case_mismatch"], True),
                         (["--do_lower_case=True"], False)):
      proc = _run(module, *common, *more, check_fails=False)
      assert proc.returncode == 0, proc.stderr[-2000:]
      assert (said in proc.stderr) == warned, (module, more, proc.stderr[-2000:])
      assert output.exists()
      output.unlink()


def test_create_classifier_data_finds_a_missing_split_before_writing(tmp_path):
  """A data_dir without test.tsv: train and dev were written before the error."""
  data = tmp_path / "RTE"
  data.mkdir()
  for split in ("train", "dev"):
    shutil.copy(os.path.join(GLUE_DATA, "RTE", f"{split}.tsv"), data)
  out = tmp_path / "out"
  proc = _run("data_prep.create_classifier_data", "--task_name=RTE", f"--data_dir={data}",
              f"--vocab_file={UNCASED_VOCAB}", "--max_seq_length=32", f"--output_dir={out}")
  assert f"RTE: no test.tsv in {data} (the splits: train, dev, test)" in proc.stderr, proc.stderr
  assert not out.exists() or not os.listdir(out)


def test_a_fine_tuning_output_dir_of_another_model_is_refused(tmp_path, checkpoint):
  """A Hugging Face folder (or a user's vocab.txt or labels.txt) as --output_dir: the run wrote
  its files over them and its checkpoint beside the other model."""
  out = tmp_path / "hf"
  out.mkdir()
  (out / "model.safetensors").write_text("weights")
  (out / "vocab.txt").write_text("mine")
  (out / "labels.txt").write_text("yes\nno\n")

  def train_into(output_dir):
    return _run("official_bert.run_classifier", f"--bert_config_file={checkpoint['config']}",
                f"--vocab_file={UNCASED_VOCAB}", f"--init_checkpoint={checkpoint['prefix']}",
                "--task_name=MRPC", f"--data_dir={GLUE_DATA}/MRPC", f"--output_dir={output_dir}",
                "--do_train")

  proc = train_into(out)
  assert (f"--output_dir={out} holds labels.txt, model.safetensors, vocab.txt, not a run's (no "
          f"run_settings.json, no checkpoint)") in proc.stderr, proc.stderr[-2000:]
  assert sorted(os.listdir(out)) == ["labels.txt", "model.safetensors", "vocab.txt"]
  assert (out / "labels.txt").read_text() == "yes\nno\n"
  assert (out / "vocab.txt").read_text() == "mine"
  # A `checkpoint` file that names none, a `.tf_record` that is not records: the user's too.
  other = tmp_path / "notes"
  other.mkdir()
  (other / "checkpoint").write_text("mine")
  (other / "train.tf_record").write_text("x")
  proc = train_into(other)
  assert f"--output_dir={other} holds checkpoint, train.tf_record, not a run's" in proc.stderr
  assert (other / "checkpoint").read_text() == "mine"


def test_show_pretraining_data_names_the_file_and_flag(tmp_path):
  """Other lengths, a truncated file and a text file: TensorFlow's parse and read errors were
  tracebacks; the file and the flag to change (the training input's check, one copy)."""
  corpus = tmp_path / "c.txt"
  corpus.write_text("\n\n".join(f"Sentence {i} of a document. It has a second line {i}."
                                  for i in range(60)) + "\n")
  records = tmp_path / "p.tfrecord"
  proc = _run("data_prep.create_pretraining_data", f"--input_file={corpus}",
              f"--output_file={records}", f"--vocab_file={UNCASED_VOCAB}",
              "--max_seq_length=32", "--max_predictions_per_seq=5", "--dupe_factor=1",
              check_fails=False)
  assert proc.returncode == 0, proc.stderr[-2000:]
  truncated = tmp_path / "t.tfrecord"
  truncated.write_bytes(records.read_bytes()[:-7])
  show = ("data_prep.show_pretraining_data", f"--vocab_file={UNCASED_VOCAB}")
  for path, lengths, message in (
      (records, ("--max_seq_length=64", "--max_predictions_per_seq=5"),
       f"{records}: input_ids has length 32 but --max_seq_length=64"),
      (records, ("--max_seq_length=32", "--max_predictions_per_seq=20"),
       f"{records}: masked_lm_positions has length 5 but --max_predictions_per_seq=20"),
      (truncated, ("--max_seq_length=32", "--max_predictions_per_seq=5"),
       f"{truncated}: damaged after record "),
      (corpus, ("--max_seq_length=32", "--max_predictions_per_seq=5"),
       f"{corpus}: not a valid TFRecord file (corrupted record at 0")):
    proc = _run(*show, f"--input_file={path}", *lengths)
    assert message in proc.stderr, proc.stderr[-2000:]
    assert "function_node" not in proc.stderr, proc.stderr[-2000:]


def test_run_swag_negative_batch_size_stops_before_writing_features(tmp_path):
  proc = _run("official_bert.run_swag", f"--bert_config_file={_config(tmp_path)}",
              f"--vocab_file={UNCASED_VOCAB}", f"--data_dir={tmp_path}",
              f"--output_dir={tmp_path / 'out'}", "--do_train", "--train_batch_size=-2",
              process=True)
  assert "--train_batch_size=-2: must be >= 1" in proc.stderr
  assert not (tmp_path / "out").exists()


def test_run_ner_on_non_utf8_names_file_line_and_column(tmp_path):
  data = tmp_path / "conll"
  data.mkdir()
  text = open(os.path.join(CONLL_DATA, "eng.train"), "rb").read().split(b"\n")
  text[5] = text[5][:2] + b"\xff" + text[5][2:]
  (data / "eng.train").write_bytes(b"\n".join(text))
  proc = _run("official_bert.run_ner", f"--bert_config_file={_config(tmp_path)}",
              f"--vocab_file={UNCASED_VOCAB}", f"--data_dir={data}",
              f"--output_dir={tmp_path / 'out'}", "--do_train", "--num_train_steps=1",
              process=True)
  assert f"{data / 'eng.train'}:6:3: not valid UTF-8 (byte 0xff)" in proc.stderr


def test_extract_features_needs_weights_and_integer_layers(tmp_path, checkpoint):
  lines = tmp_path / "in.txt"
  lines.write_text("hello world\n")
  common = [f"--input_file={lines}", f"--output_file={tmp_path / 'out.jsonl'}",
            f"--vocab_file={UNCASED_VOCAB}", f"--bert_config_file={checkpoint['config']}"]
  proc = _run("official_bert.extract_features", *common)
  assert "--init_checkpoint is required" in proc.stderr
  proc = _run("official_bert.extract_features", *common,
              f"--init_checkpoint={checkpoint['prefix']}", "--layers=last")
  assert "--layers: 'last' is not a layer" in proc.stderr
  proc = _run("official_bert.extract_features", *common, f"--init_checkpoint={lines}",
              "--layers=-1")
  assert f"{lines} is not a checkpoint" in proc.stderr, proc.stderr[-2000:]
  # A vocabulary longer than the model's ids (another model's): named, not a gather error.
  big = tmp_path / "big.txt"
  tokens = open(UNCASED_VOCAB, encoding="utf-8").read().split()
  big.write_text("\n".join(tokens + [f"extra{i}" for i in range(30523 - len(tokens))]) + "\n",
                 encoding="utf-8")
  proc = _run("official_bert.extract_features", *common[:2], f"--vocab_file={big}",
              common[3], f"--init_checkpoint={checkpoint['prefix']}")
  assert f"{big} has 30523 tokens but the model's vocab_size is 30522" in proc.stderr, (
      proc.stderr[-2000:])
  assert "Traceback" not in proc.stderr
  assert not (tmp_path / "out.jsonl").exists()


def test_a_failing_export_overwrite_keeps_the_old_model(tmp_path, checkpoint):
  export_dir = tmp_path / "export"
  export_dir.mkdir()
  (export_dir / "saved_model.pb").write_bytes(b"the old model")
  bad = tmp_path / "not_a_checkpoint.txt"
  bad.write_text("hello")
  proc = _run("official_bert.export", f"--bert_config_file={checkpoint['config']}",
              f"--checkpoint={bad}", f"--vocab_file={UNCASED_VOCAB}", "--model_type=encoder",
              f"--export_dir={export_dir}", "--overwrite")
  assert "is not a checkpoint" in proc.stderr
  assert (export_dir / "saved_model.pb").read_bytes() == b"the old model"
  assert sorted(os.listdir(tmp_path)) == ["export", "not_a_checkpoint.txt"]  # no half-export
  proc = _run("official_bert.export", f"--bert_config_file={checkpoint['config']}",
              f"--checkpoint={checkpoint['prefix']}", f"--vocab_file={UNCASED_VOCAB}",
              "--model_type=encoder", f"--export_dir={export_dir}", "--overwrite",
              "--max_seq_length=16", check_fails=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert (export_dir / "saved_model.pb").read_bytes() != b"the old model"
  assert sorted(os.listdir(tmp_path)) == ["export", "not_a_checkpoint.txt"]


def test_squad_predictions_of_another_file_warn_and_fail_under_strict(tmp_path):
  other = {q: "x" for q in ("a", "b", "c")}
  pred = tmp_path / "pred.json"
  pred.write_text(json.dumps(other))
  proc = _run("official_bert.squad_evaluate", SQUAD_V1, pred, check_fails=False)
  assert proc.returncode == 0 and "answers only 0 of the" in proc.stderr
  proc = _run("official_bert.squad_evaluate", SQUAD_V1, pred, "--strict")
  assert f"{pred} answers only 0 of the" in proc.stderr and SQUAD_V1 in proc.stderr


def test_run_squad_refuses_features_of_another_predict_file(tmp_path, checkpoint):
  features = tmp_path / "predict.tf_record"
  proc = run_command("data_prep.create_squad_data", f"--input_file={SQUAD_V1}",
                     f"--output_file={features}", f"--vocab_file={UNCASED_VOCAB}",
                     "--max_seq_length=64", "--doc_stride=32", "--max_query_length=16",
                     "--is_training=false")
  assert proc.returncode == 0, proc.stderr[-3000:]
  proc = _run("official_bert.run_squad", f"--bert_config_file={_config(tmp_path)}",
              f"--vocab_file={UNCASED_VOCAB}", f"--output_dir={tmp_path / 'out'}",
              "--do_predict", f"--predict_feature_file={features}",
              f"--predict_file={SQUAD_V2}", "--max_seq_length=64", "--doc_stride=32",
              "--max_query_length=16", f"--init_checkpoint={checkpoint['prefix']}")
  assert f"was made from {SQUAD_V1}, not --predict_file={SQUAD_V2}" in proc.stderr, \
      proc.stderr[-2000:]


def test_a_truncated_cached_feature_file_is_written_again(tmp_path):
  from data_prep import schema  # pylint: disable=g-import-not-at-top
  from data_prep.classification import features  # pylint: disable=g-import-not-at-top
  path = str(tmp_path / "train.tf_record")
  columns = {f.name: np.ones((6, f.length), np.int64) for f in schema.classifier_features(8)}
  calls = []

  def build():
    calls.append(1)
    return schema.classifier_features(8), columns, {}

  assert features.cached_tfrecord(path, {"k": 1}, build)["num_examples"] == 6
  assert features.cached_tfrecord(path, {"k": 1}, build)["num_examples"] == 6
  assert len(calls) == 1  # reused
  data = open(path, "rb").read()
  open(path, "wb").write(data[:-10])  # an interrupted copy, say
  assert features.cached_tfrecord(path, {"k": 1}, build)["num_examples"] == 6
  assert len(calls) == 2 and open(path, "rb").read() == data


def test_run_ner_names_a_text_checkpoint_and_rewrites_a_truncated_cache(tmp_path):
  common = [f"--bert_config_file={_config(tmp_path)}", f"--vocab_file={UNCASED_VOCAB}",
            f"--data_dir={CONLL_DATA}", f"--output_dir={tmp_path / 'out'}", "--do_train",
            "--num_train_steps=1", "--train_batch_size=4", "--max_seq_length=32"]
  text = tmp_path / "weights.txt"
  text.write_text("not weights")
  proc = _run("official_bert.run_ner", *common, f"--init_checkpoint={text}")
  assert f"{text} is not a checkpoint" in proc.stderr, proc.stderr[-2000:]
  assert "corrupt input data" not in proc.stderr
  # The features were cached before the checkpoint was read; cut the file short (an
  # interrupted copy) and run again: the damage is noticed and the file written again.
  cached = tmp_path / "out" / "train.tf_record"
  data = cached.read_bytes()
  cached.write_bytes(data[:len(data) // 2])
  proc = _run("official_bert.run_ner", *common, check_fails=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert f"{cached} is truncated" in proc.stderr and "writing it again" in proc.stderr
  assert cached.read_bytes() == data
