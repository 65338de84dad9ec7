"""run_distillation end to end on tiny models: a teacher trained by run_classifier (run_ner)
-> a student folder that beats its labels-only twin, exports with no flag but
--checkpoint, loads in `from_preset` and says where it came from."""

import csv
import dataclasses
import json
import os
import subprocess
import sys
import types

from conftest import CONLL_DATA
from conftest import REPO
from conftest import UNCASED_VOCAB
from conftest import run_command
from conftest import tiny_model_folder
from harness import TINY
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the exported tokenizer's ops)

from data_prep import tokenization
from data_prep.classification.glue_processors import InputExample
import official_bert as ob
from official_bert.interop import model_files
from official_bert.interop import run_record
from official_bert.interop import weights_io
from official_bert.tasks import distillation_job

pytestmark = pytest.mark.large  # trains or runs commands: `make test`, not `make test-fast`

POSITIVE, NEGATIVE = ["good", "great", "nice", "fine"], ["bad", "awful", "poor", "dull"]


def _rows(n, seed):
  """Three words each; the label is the majority's polarity."""
  rng = np.random.default_rng(seed)
  rows = []
  for _ in range(n):
    words = list(rng.choice(POSITIVE + NEGATIVE, 3))
    rows.append((" ".join(words), "pos" if sum(w in POSITIVE for w in words) >= 2 else "neg"))
  return rows


def _write(path, rows):
  with open(path, "w", encoding="utf-8", newline="") as f:
    csv.writer(f).writerows([("text", "label")] + rows)
  return str(path)


def _train(module, *args):
  proc = run_command(module, "--do_train", "--train_batch_size=16", "--learning_rate=1e-3", *args)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return proc


def _accuracy(out):
  results = dict(line.strip().split(" = ") for line in open(out / "eval_results.txt"))
  return float(results["accuracy"])


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
  """A 2-layer classifier that solves the toy task, and the task's files."""
  root = tmp_path_factory.mktemp("distill")
  files = {
      "teacher_train": _write(root / "teacher_train.csv", _rows(400, 0)),
      "train": _write(root / "train.csv", _rows(12, 1)),
      "dev": _write(root / "dev.csv", _rows(100, 2)),
      "test": _write(root / "test.csv", _rows(10, 4))
  }
  (root / "unlabeled.txt").write_text("".join(t + "\n" for t, _ in _rows(400, 3)))
  files["unlabeled"] = str(root / "unlabeled.txt")
  out = root / "teacher"
  _train("official_bert.run_classifier", f"--init_checkpoint={tiny_model_folder(root / 'pre')}",
         f"--train_file={files['teacher_train']}", f"--dev_file={files['dev']}", "--do_eval",
         "--max_seq_length=16", "--num_train_epochs=4", f"--output_dir={out}")
  assert _accuracy(out) > 0.95
  return root, out, files


def test_student_beats_its_labels_only_twin(teacher):
  root, teacher_dir, files = teacher
  small = root / "small.json"
  small.write_text(dataclasses.replace(TINY, num_hidden_layers=1).to_json_string())
  common = [
      f"--teacher={teacher_dir}", f"--train_file={files['train']}", f"--dev_file={files['dev']}",
      "--do_eval", "--num_train_epochs=4", f"--student_config={small}"
  ]
  _train("official_bert.run_distillation", *common, f"--unlabeled_file={files['unlabeled']}",
         f"--output_dir={root / 'student'}")
  _train("official_bert.run_distillation", *common, "--distill_weight=0",
         f"--output_dir={root / 'labels_only'}")
  distilled, labels_only = _accuracy(root / "student"), _accuracy(root / "labels_only")
  assert distilled >= labels_only + 0.2, (distilled, labels_only)
  assert distilled > 0.9, distilled
  record = json.loads((root / "student" / model_files.RUN_SETTINGS_FILE).read_text())
  assert record["model_type"] == "classifier"
  assert record["labels"] == ["neg", "pos"]
  assert record["distillation"]["teacher"] == str(teacher_dir)
  assert record["distillation"]["student_init"] == "random"
  assert record["distillation"]["unlabeled_examples"] == 400


def test_student_of_teacher_layers_exports_and_loads(teacher):
  root, teacher_dir, files = teacher
  out = root / "layers_student"
  proc = _train("official_bert.run_distillation", f"--teacher={teacher_dir}",
                f"--train_file={files['train']}", f"--dev_file={files['dev']}",
                f"--test_file={files['test']}", "--do_eval", "--do_predict", "--num_train_steps=6",
                f"--unlabeled_file={files['unlabeled']}", "--student_num_layers=1",
                "--hidden_weight=0.5", f"--output_dir={out}")
  # The training steps' log; the attention loss follows --hidden_weight (the same heads).
  assert "hidden_loss" in proc.stderr and "attention_loss" in proc.stderr
  results = dict(line.strip().split(" = ") for line in open(out / "eval_results.txt"))
  assert "distillation_loss" in results and "hidden_loss" not in results  # training only
  # The student started from the teacher's last layer, embeddings and head.
  start = weights_io.read_weights(str(out / "student_init")).tensors
  teacher_weights = weights_io.read_weights(str(teacher_dir)).tensors
  for name, value in start.items():
    source = name.replace("layer_0/", "layer_1/")
    np.testing.assert_array_equal(value, teacher_weights[source], err_msg=name)
  assert not any("layer_1/" in name for name in start)
  record = json.loads((out / model_files.RUN_SETTINGS_FILE).read_text())["distillation"]
  assert record["teacher_layers"] == [1] and record["hidden_weight"] == 0.5
  assert record["attention_weight"] == 0.5
  assert json.loads((out / "bert_config.json").read_text())["num_hidden_layers"] == 1

  # The student folder exports with no other flag and serves what --do_predict wrote.
  with open(out / "test_predictions.tsv", encoding="utf-8") as f:
    rows = list(csv.reader(f, delimiter="\t"))
  texts = [t for t, _ in _rows(10, 4)]
  proc = run_command("official_bert.export", f"--checkpoint={out}",
                     f"--export_dir={root / 'export'}")
  assert proc.returncode == 0, proc.stderr[-3000:]
  served = tf.saved_model.load(str(root /
                                   "export")).signatures["serving_default"](text=tf.constant(texts))
  expected = np.array([[float(v) for v in r[1:]] for r in rows[1:]])
  np.testing.assert_allclose(served["probabilities"].numpy(), expected, atol=2e-6)
  # A later --do_eval run on the student folder needs no student flag: the plain classifier.
  evaluated = dict(line.strip().split(" = ") for line in open(out / "eval_results.txt"))
  proc = run_command("official_bert.run_distillation", f"--teacher={teacher_dir}", "--do_eval",
                     f"--dev_file={files['dev']}", f"--output_dir={out}")
  assert proc.returncode == 0, proc.stderr[-3000:]
  again = dict(line.strip().split(" = ") for line in open(out / "eval_results.txt"))
  assert again["accuracy"] == evaluated["accuracy"] and "distillation_loss" not in again
  # ... and loads in the Python API like any classifier folder.
  model = ob.TextClassifier.from_preset(str(out))
  np.testing.assert_allclose(model.predict(texts), expected, atol=2e-6)
  # A rerun with another --student_num_layers would resume the trained student with part of
  # its layers (or none of a third): refused before its start or its files are rewritten.
  before = {p.name: p.read_bytes() for p in (out / "student_init").iterdir()}
  proc = run_command("official_bert.run_distillation", f"--teacher={teacher_dir}", "--do_train",
                     f"--train_file={files['train']}", "--student_num_layers=2",
                     f"--unlabeled_file={files['unlabeled']}", f"--output_dir={out}")
  assert proc.returncode == 1
  assert ("holds a model trained with another config than --student_num_layers=2 "
          "(num_hidden_layers 1 vs 2)") in proc.stderr, proc.stderr[-2000:]
  assert {p.name: p.read_bytes() for p in (out / "student_init").iterdir()} == before
  assert json.loads((out / "bert_config.json").read_text())["num_hidden_layers"] == 1


def test_tagger_student_with_unlabeled_sentences(tmp_path):
  teacher_dir = tmp_path / "ner_teacher"
  common = ["--max_seq_length=32", "--num_train_steps=4", "--train_batch_size=8"]
  proc = run_command("official_bert.run_ner",
                     f"--init_checkpoint={tiny_model_folder(tmp_path / 'pre')}",
                     f"--data_dir={CONLL_DATA}", "--do_train", *common,
                     f"--output_dir={teacher_dir}")
  assert proc.returncode == 0, proc.stderr[-3000:]
  unlabeled = tmp_path / "sentences.txt"
  unlabeled.write_text("EU rejects German call to boycott British lamb .\n"
                       "Peter Blackburn went to Brussels\n")
  out = tmp_path / "ner_student"
  proc = run_command("official_bert.run_distillation", f"--teacher={teacher_dir}",
                     f"--data_dir={CONLL_DATA}", "--do_train", "--do_eval", *common,
                     f"--unlabeled_file={unlabeled}", "--student_num_layers=1",
                     f"--output_dir={out}")
  assert proc.returncode == 0, proc.stderr[-3000:]
  results = dict(line.strip().split(" = ") for line in open(out / "eval_results.txt"))
  assert "entity_f1" in results and "distillation_loss" in results
  # The unlabeled sentences' scored positions (first word pieces) carry no label.
  records = [
      tf.train.Example.FromString(r.numpy())
      for r in tf.data.TFRecordDataset(str(out / "unlabeled.tf_record"))
  ]
  assert len(records) == 2
  for record in records:
    labels = np.array(record.features.feature["label_ids"].int64_list.value)
    weights = np.array(record.features.feature["label_weights"].float_list.value)
    assert (labels[weights > 0] == -100).all() and (labels[weights == 0] == 0).all()
    assert (weights > 0).sum() == 9 or (weights > 0).sum() == 5
  record = json.loads((out / model_files.RUN_SETTINGS_FILE).read_text())
  assert record["model_type"] == "tagger" and record["distillation"]["teacher_layers"] == [1]


def test_a_taggers_unlabeled_sentences_in_every_documented_form(tmp_path):
  """One sentence a line (.txt), by --text_column (.jsonl; a .tsv with that header) and CoNLL
  columns, also in a .txt as CoNLL-2003's own files are: a CoNLL .txt was read a line per
  sentence (each token line a "sentence" holding its tags), a .jsonl/.tsv as CoNLL columns."""
  sentences = [["EU", "rejects", "German", "call", "."], ["Peter", "Blackburn"]]
  settings = types.SimpleNamespace(text_column="sentence", quoting="csv", token_column=0,
                                   tag_column=-1)
  files = {
      "lines.txt": "".join(" ".join(words) + "\n" for words in sentences),
      "texts.jsonl": "".join(json.dumps({"sentence": " ".join(words), "id": i}) + "\n"
                             for i, words in enumerate(sentences)),
      "texts.tsv": "id\tsentence\n" + "".join(f"{i}\t{' '.join(words)}\n"
                                             for i, words in enumerate(sentences)),
  }
  conll_text = "-DOCSTART- -X- -X- O\n\n" + "\n".join(
      "".join(f"{word} NNP B-NP O\n" for word in words) for words in sentences)
  files.update({"conll.txt": conll_text, "conll.tsv": conll_text.replace(" ", "\t"),
                "spaced.txt": conll_text.replace("\n\n", "\n  \n") + "\n\n",
                "blank_first.tsv": "\n" + files["texts.tsv"],
                # One sentence without a blank line: its tag column says CoNLL.
                "one_sentence.txt": "".join(f"{word} B-X\n" for word in sentences[0]),
                # Sentences of one length without tags stay a sentence a line.
                "even.txt": "the cat sat\na dog ran\n"})
  for name, text in files.items():
    (tmp_path / name).write_text(text, encoding="utf-8")
    read = distillation_job.read_unlabeled_sentences(str(tmp_path / name), settings)
    want = {"one_sentence.txt": sentences[:1],
            "even.txt": [["the", "cat", "sat"], ["a", "dog", "ran"]]}.get(name, sentences)
    assert [s.words for s in read] == want, name
    assert all(s.tags is None for s in read)


def test_the_student_reads_its_inputs_as_the_teacher_did():
  """A teacher trained with --doc_stride (windows of long texts) gave a student that cut each
  text to its first window, and an export without windows; the multi-label threshold and
  separator stayed the defaults. Flags given win."""
  record = run_record.RunRecord.of(
      "classifier", labels=["a", "b"], num_labels=2, problem_type="multi_label", doc_stride=6,
      multi_label_threshold=0.3, label_separator="|", max_seq_length=16)
  teacher = types.SimpleNamespace(record=record, do_lower_case=False, model_type="classifier",
                                  labels=["a", "b"])
  settings = distillation_job.DistillationSettings(teacher="t", train_file="x.tsv",
                                                   output_dir="o")
  student = distillation_job.complete_from_teacher(settings, teacher, {"train_file"})
  assert (student.doc_stride, student.problem_type, student.multi_label_threshold,
          student.label_separator) == (6, "multi_label", 0.3, "|")
  assert (student.max_seq_length, student.do_lower_case, student.label_names) == (
      16, False, ("a", "b"))
  given = dataclasses.replace(settings, doc_stride=8, max_seq_length=32)
  student = distillation_job.complete_from_teacher(given, teacher,
                                                   {"train_file", "doc_stride", "max_seq_length"})
  assert (student.doc_stride, student.max_seq_length) == (8, 32)
  # A GLUE student (--task_name) takes no --doc_stride (own files' only), whatever the teacher.
  glue = distillation_job.DistillationSettings(teacher="t", task_name="SST-2", data_dir="d",
                                               output_dir="o")
  assert distillation_job.complete_from_teacher(glue, teacher, {"task_name"}).doc_stride is None


def test_unlabeled_long_texts_are_windowed_as_the_labeled_ones():
  """With the teacher's --doc_stride, the transfer set was still cut to each text's first
  window while the labeled texts were windowed."""
  tokenizer = tokenization.FullTokenizer(UNCASED_VOCAB)
  texts = [InputExample("u0", "the film was good " * 12, None, None),
           InputExample("u1", "short", None, None)]
  _, plain, _ = distillation_job.unlabeled_classifier_columns(
      texts, ["neg", "pos"], "single_label", 16, tokenizer)
  _, windowed, _ = distillation_job.unlabeled_classifier_columns(
      texts, ["neg", "pos"], "single_label", 16, tokenizer, doc_stride=8)
  assert len(plain["input_ids"]) == 2 and len(windowed["input_ids"]) > 3
  assert (windowed["label_ids"] == distillation_job.UNLABELED).all()
  np.testing.assert_array_equal(windowed["input_ids"][0], plain["input_ids"][0])


def test_bad_teacher_and_student_flags_are_named(tmp_path):
  pretrained = tiny_model_folder(tmp_path / "pre")
  proc = run_command("official_bert.run_distillation", f"--teacher={pretrained}",
                     "--student_num_layers=1", "--do_train", f"--output_dir={tmp_path / 'o'}")
  assert proc.returncode == 1
  assert (f"--teacher={pretrained}: a model with no run record of its training (a pretrained "
          "model?): a teacher is a trained classifier or tagger folder") in proc.stderr
  proc = run_command("official_bert.run_distillation", f"--teacher={tmp_path / 'missing'}",
                     "--do_train", f"--output_dir={tmp_path / 'o'}")
  assert proc.returncode == 1 and "--teacher" in proc.stderr
  # A data file as --teacher: not "--bert_config_file is required" (a flag this command
  # refuses), but what a teacher is.
  (tmp_path / "train.tsv").write_text("text\tlabel\na\t0\n")
  proc = run_command("official_bert.run_distillation", f"--teacher={tmp_path / 'train.tsv'}",
                     "--student_num_layers=1", "--do_train", f"--output_dir={tmp_path / 'o'}")
  assert proc.returncode == 1 and (
      f"--teacher={tmp_path / 'train.tsv'}: no model folder (no bert_config.json or "
      "config.json, or no vocab.txt, beside it)") in proc.stderr, proc.stderr[-2000:]


def test_python_api_distills_a_classifier(teacher, tmp_path):
  root, teacher_dir, files = teacher
  train, dev = _rows(12, 1), _rows(100, 2)
  unlabeled = [t for t, _ in _rows(400, 3)]
  small = dataclasses.replace(TINY, num_hidden_layers=1)
  preprocessor = ob.TextClassifier.from_preset(str(teacher_dir)).preprocessor

  def accuracy(model):
    return np.mean(np.array(model.predict_labels([t for t, _ in dev])) == [y for _, y in dev])

  def random_student():
    return ob.TextClassifier(ob.Backbone.from_bert_config(small),
                             preprocessor,
                             labels=["neg", "pos"])

  swapped = ob.TextClassifier(ob.Backbone.from_bert_config(small),
                              preprocessor,
                              labels=["pos", "neg"])
  with pytest.raises(ValueError, match="labels differs from the teacher's"):
    ob.TextClassifier.distill(str(teacher_dir), ["good"], ["pos"], student=swapped)
  kwargs = dict(epochs=4, batch_size=16, learning_rate=1e-3, seed=1, verbose=0)
  x, y = [t for t, _ in train], [label for _, label in train]
  distilled = ob.TextClassifier.distill(str(teacher_dir),
                                        x,
                                        y,
                                        unlabeled=unlabeled,
                                        student=random_student(),
                                        **kwargs)
  labels_only = ob.TextClassifier.distill(str(teacher_dir),
                                          x,
                                          y,
                                          student=random_student(),
                                          distill_weight=0.0,
                                          **kwargs)
  assert accuracy(distilled) >= accuracy(labels_only) + 0.2, (accuracy(distilled),
                                                              accuracy(labels_only))
  # From the teacher's layers; saved, it loads as any classifier and names its teacher.
  student = ob.TextClassifier.distill(str(teacher_dir),
                                      x,
                                      y,
                                      unlabeled=unlabeled[:64],
                                      num_layers=1,
                                      epochs=1,
                                      batch_size=16,
                                      verbose=0)
  assert len(student.backbone.transformer_layers) == 1
  student.save(tmp_path / "student")
  loaded = ob.TextClassifier.from_preset(str(tmp_path / "student"))
  np.testing.assert_allclose(loaded.predict(x), student.predict(x), atol=1e-5)
  record = json.loads((tmp_path / "student" / model_files.RUN_SETTINGS_FILE).read_text())
  assert record["distillation"]["teacher"] == str(teacher_dir)
  assert record["distillation"]["teacher_layers"] == [1]
  assert record["distillation"]["unlabeled_examples"] == 64


NAMES, CITIES = ["john", "mary", "paul", "anna"], ["paris", "rome", "berlin", "oslo"]
OTHER = ["went", "to", "saw", "the", "and", "city", "a", "man"]


def _tagged(n, seed):
  """Five words each; names are B-PER, cities B-LOC."""
  rng = np.random.default_rng(seed)
  x = [list(rng.choice(NAMES + CITIES + OTHER, 5)) for _ in range(n)]
  return x, [
      ["B-PER" if w in NAMES else "B-LOC" if w in CITIES else "O" for w in words] for words in x
  ]


def test_python_api_distills_a_tagger(tmp_path):
  labels = ["O", "B-PER", "B-LOC"]
  teacher = ob.TokenTagger.from_preset(tiny_model_folder(tmp_path / "pre"),
                                       labels=labels,
                                       sequence_length=16)
  teacher.compile(learning_rate=1e-3)
  teacher.fit(*_tagged(300, 0), epochs=4, batch_size=16, seed=1, verbose=0)
  dev_x, dev_y = _tagged(100, 2)

  def f1(model):
    return model.evaluate(dev_x, dev_y, return_dict=True, verbose=0)["entity_f1"]

  assert f1(teacher) > 0.95
  small = dataclasses.replace(TINY, num_hidden_layers=1)

  def random_student():
    return ob.TokenTagger(ob.Backbone.from_bert_config(small), teacher.preprocessor, labels=labels)

  x, y = _tagged(8, 1)
  raw_texts = [" ".join(words) for words in _tagged(300, 3)[0]]  # split as predict_entities
  kwargs = dict(epochs=4, batch_size=16, learning_rate=1e-3, seed=1, verbose=0)
  distilled = ob.TokenTagger.distill(teacher,
                                     x,
                                     y,
                                     unlabeled=raw_texts,
                                     student=random_student(),
                                     **kwargs)
  labels_only = ob.TokenTagger.distill(teacher,
                                       x,
                                       y,
                                       student=random_student(),
                                       distill_weight=0.0,
                                       **kwargs)
  assert f1(distilled) >= f1(labels_only) + 0.2, (f1(distilled), f1(labels_only))

  # From the teacher's layers, with TinyBERT's layer losses (they change what is learned);
  # saved, it loads as any tagger and names its teacher and recipe.
  teacher.save(tmp_path / "teacher")
  layer_kwargs = dict(unlabeled=_tagged(32, 4)[0],
                      num_layers=1,
                      epochs=1,
                      batch_size=16,
                      seed=2,
                      verbose=0)
  student = ob.TokenTagger.distill(str(tmp_path / "teacher"),
                                   x,
                                   y,
                                   hidden_weight=1.0,
                                   validation_data=(dev_x[:20], dev_y[:20]),
                                   **layer_kwargs)
  plain = ob.TokenTagger.distill(str(tmp_path / "teacher"), x, y, **layer_kwargs)
  assert len(student.backbone.transformer_layers) == 1
  assert not np.allclose(student.predict(dev_x[:4]), plain.predict(dev_x[:4]), atol=1e-6)
  student.save(tmp_path / "student")
  loaded = ob.TokenTagger.from_preset(str(tmp_path / "student"))
  np.testing.assert_allclose(loaded.predict(dev_x), student.predict(dev_x), atol=1e-5)
  assert loaded.predict_tags(dev_x) == student.predict_tags(dev_x)
  record = json.loads((tmp_path / "student" / model_files.RUN_SETTINGS_FILE).read_text())
  assert record["model_type"] == "tagger"
  part = record["distillation"]
  assert part["teacher"] == str(tmp_path / "teacher") and part["teacher_layers"] == [1]
  assert part["hidden_weight"] == 1.0 and part["attention_weight"] == 1.0
  assert part["unlabeled_examples"] == 32
  with pytest.raises(ValueError, match="unlabeled"):
    ob.TokenTagger.distill(teacher, x, y, unlabeled=[["a", 1]], num_layers=1)


def test_training_controls_restarts_and_two_replicas(teacher):
  root, teacher_dir, files = teacher
  common = [
      f"--teacher={teacher_dir}", f"--train_file={files['train']}", f"--dev_file={files['dev']}",
      "--do_eval", "--num_train_steps=4", f"--unlabeled_file={files['unlabeled']}",
      "--student_num_layers=1"
  ]
  out = root / "restarts"
  _train("official_bert.run_distillation", *common, "--num_restarts=2", "--eval_every_steps=2",
         "--best_metric=accuracy", f"--output_dir={out}")
  summary = json.loads((out / "restarts.json").read_text())
  assert len(summary["restarts"]) == 2
  best = json.loads((out / "best" / model_files.RUN_SETTINGS_FILE).read_text())
  assert best["distillation"]["teacher"] == str(teacher_dir)
  # Two replicas (MirroredStrategy on two CPU devices): the teacher is built in the
  # strategy's scope. A process of its own: TensorFlow keys each strategy's collective ops
  # from the same start, so a second multi-replica strategy in one process (another test's)
  # can meet the first's ("Shape mismatch in the collective instance 100").
  out = root / "mirrored"
  proc = subprocess.run([
      sys.executable, "-m", "official_bert.run_distillation", *common, "--do_train",
      "--train_batch_size=16", "--learning_rate=1e-3", "--distribution_strategy=mirrored",
      "--cpu_devices=2", f"--output_dir={out}"
  ],
                        cwd=REPO,
                        capture_output=True,
                        text=True,
                        timeout=600,
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "distillation_loss" in proc.stderr and _accuracy(out) > 0.5


def test_flags_that_contradict_the_teacher_are_refused(teacher, tmp_path):
  root, teacher_dir, files = teacher
  before = sorted(os.listdir(teacher_dir))
  common = [
      f"--teacher={teacher_dir}", f"--train_file={files['train']}", "--do_train",
      "--student_num_layers=1"
  ]
  for extra, message in (([f"--output_dir={teacher_dir}"], "overlap"), ([
      f"--output_dir={teacher_dir / 'student'}"
  ], "overlap"), (["--problem_type=multi_label", f"--output_dir={tmp_path / 'a'}"],
                  "--problem_type"), (["--text_b_column=text",
                                       f"--output_dir={tmp_path / 'b'}"], "--text_b_column"),
                         ([f"--init_checkpoint={teacher_dir}",
                           f"--output_dir={tmp_path / 'c'}"], "--init_checkpoint")):
    proc = run_command("official_bert.run_distillation", *common, *extra)
    assert proc.returncode == 1 and message in proc.stderr, (extra, proc.stderr[-2000:])
  assert sorted(os.listdir(teacher_dir)) == before  # nothing of the teacher's touched
  # A case the teacher contradicts: named against the teacher's file, before the student's
  # start is written.
  proc = run_command("official_bert.run_distillation", *common, "--do_lower_case=False",
                     f"--output_dir={tmp_path / 'd'}")
  assert proc.returncode == 1, proc.stderr[-2000:]
  assert (f"--do_lower_case=False but {teacher_dir / 'tokenizer_config.json'} says "
          "do_lower_case=True") in proc.stderr, proc.stderr[-2000:]
  assert not (tmp_path / "d" / "student_init").exists()
  proc = run_command("official_bert.run_distillation", f"--teacher={teacher_dir}", "--do_eval",
                     f"--dev_file={files['dev']}", f"--output_dir={tmp_path / 'empty'}")
  assert proc.returncode == 1 and "no trained student" in proc.stderr, proc.stderr[-2000:]
