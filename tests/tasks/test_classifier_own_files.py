"""run_classifier on the user's own files (--train_file/--dev_file/--test_file): TSV, CSV with
quotes, JSONL; string, multi-label and regression labels; class weights; ids carried into the
predictions; a file to predict without labels; export's label strings from labels.txt; bad
files. CLI runs are few and combine checks (each costs ~20 s on CPU)."""

import csv
import json
import os

from conftest import UNCASED_VOCAB
from conftest import need
from conftest import run_command
from conftest import tiny_model_folder
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the exported tokenizer's ops)
from test_glue_run_classifier import read_results
from test_glue_run_classifier import run_script

from data_prep.classification import features as classifier_features
from data_prep.classification import own_files
from data_prep.classification import windows
from official_bert.interop import model_files
from official_bert.tasks import classifier_job
from official_bert.tasks import metrics
from official_bert.tasks.classification import ClassificationTask

pytestmark = pytest.mark.large  # trains or runs commands: `make test`, not `make test-fast`

WORDS = ["good", "bad", "great", "awful", "fine", "poor", "nice", "dull"]


def _rows(n, seed=0):
  rng = np.random.default_rng(seed)
  return [" ".join(rng.choice(WORDS, 4)) for _ in range(n)]


def _write_csv(path, header, rows, delimiter=","):
  with open(path, "w", encoding="utf-8", newline="") as f:
    csv.writer(f, delimiter=delimiter).writerows([header] + rows)
  return str(path)


def _write_jsonl(path, records):
  path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
  return str(path)


def _predictions(path):
  with open(path, encoding="utf-8", newline="") as f:
    return list(csv.reader(f, delimiter="\t"))


def _export_cli(checkpoint, export_dir, signature="serving_default"):
  """`export` with nothing but the fine-tuning OUTPUT_DIR: the rest comes from the files there;
  returns the loaded SavedModel's `signature`."""
  proc = run_command("official_bert.export", f"--checkpoint={checkpoint}",
                     f"--export_dir={export_dir}")
  assert proc.returncode == 0, proc.stderr[-3000:]
  return tf.saved_model.load(str(export_dir)).signatures[signature]


def _probabilities(rows):
  return np.array([[float(v) for v in r[-(len(rows[0]) - 2):]] for r in rows[1:]])


def test_single_label_csv_tsv_jsonl_weights_ids_and_export(tmp_path):
  texts = _rows(24)
  labels = ["pos", "neg", "neg", "neutral"] * 6  # imbalanced: balanced weights differ
  # Quoted fields holding the delimiter, a tab, quotes and a line break.
  train = _write_csv(tmp_path / "train.csv", ["id", "text", "label"],
                     [[f"t{i}", f'"{t}", she said,\tthen\nleft', label]
                      for i, (t, label) in enumerate(zip(texts, labels))])
  dev = _write_csv(tmp_path / "dev.tsv", ["label", "text"],
                   [[label, f"a\ttab, {t}"] for t, label in zip(texts[:10], labels)],
                   delimiter="\t")
  long_text = " ".join(WORDS * 8)  # 64 tokens: 4 windows of 30 (starts 0, 16, 32, 34)
  test = _write_jsonl(tmp_path / "test.jsonl",
                      [{"id": f"q{i}", "text": t}
                       for i, t in enumerate(_rows(6, seed=1) + [long_text])])
  out = tmp_path / "out"
  run_script("official_bert.run_classifier", tmp_path, f"--train_file={train}",
             f"--dev_file={dev}", f"--test_file={test}", f"--output_dir={out}", "--do_train",
             "--do_eval", "--do_predict", "--class_weights=balanced", "--doc_stride=16")
  assert (out / "labels.txt").read_text() == "neg\nneutral\npos\n"  # sorted
  results = read_results(out / "eval_results.txt")
  assert {"accuracy", "macro_f1", "precision_neg", "recall_neutral", "f1_pos",
          "classification_loss"} <= set(results)
  rows = _predictions(out / "test_predictions.tsv")
  assert rows[0] == ["id", "prediction", "prob_neg", "prob_neutral", "prob_pos"]
  # One row per input, in the input's order (the long text's windows averaged).
  assert [r[0] for r in rows[1:]] == [f"q{i}" for i in range(7)]
  assert all(r[1] in ("neg", "neutral", "pos") for r in rows[1:])
  assert all(abs(sum(map(float, r[2:])) - 1) < 1e-4 for r in rows[1:])
  assert not (out / "test_results.txt").exists()  # no labels: predicted, not scored

  # A later run without --train_file reads labels.txt; a dev label unseen in training is an
  # error naming the file, line and label.
  bad_dev = _write_jsonl(tmp_path / "bad_dev.jsonl",
                         [{"text": "good", "label": "pos"}, {"text": "x", "label": "mixed"}])
  proc = run_script("official_bert.run_classifier", tmp_path, f"--dev_file={bad_dev}",
                    f"--output_dir={out}", "--do_eval", check=False)
  assert proc.returncode == 1, proc.stderr[-2000:]
  assert ("bad_dev.jsonl:2: label 'mixed' is not in the label set ['neg', 'neutral', 'pos']"
          in proc.stderr)
  # Flags that contradict the trained head are refused before anything is written: labels in
  # another order read every prediction under another name, and another problem type read
  # the softmax head as sigmoids (both exited 0), another count failed in TensorFlow.
  record = (out / "run_settings.json").read_text()
  other = _write_csv(tmp_path / "other.csv", ["text", "label"], [["a", "x"], ["b", "y"]])
  for flags, message in (
      (["--label_names=pos,neutral,neg"], "holds a model trained with labels ['neg', "
       "'neutral', 'pos'] (in that order); --label_names gives ['pos', 'neutral', 'neg']"),
      ([f"--train_file={other}", "--do_train"], f"--train_file={other} gives ['x', 'y']"),
      (["--problem_type=multi_label"], "--problem_type=multi_label but --output_dir="
       f"{out} holds a model trained with problem_type=single_label")):
    proc = run_script("official_bert.run_classifier", tmp_path, f"--test_file={test}",
                      f"--output_dir={out}", "--do_predict", *flags, check=False)
    assert proc.returncode == 1 and message in proc.stderr, (flags, proc.stderr[-2000:])
  assert (out / "labels.txt").read_text() == "neg\nneutral\npos\n"
  assert (out / "run_settings.json").read_text() == record
  # The same from --init_checkpoint into a new --output_dir: its head fits and was loaded
  # under the reordered names (dev accuracy 0.91 -> 0.09 in a user's run, exit 0).
  proc = run_script("official_bert.run_classifier", tmp_path, f"--dev_file={dev}",
                    f"--init_checkpoint={out}", f"--output_dir={tmp_path / 'warm'}",
                    "--do_eval", "--label_names=pos,neutral,neg", check=False)
  assert proc.returncode == 1 and (
      f"--init_checkpoint={out} was trained with labels ['neg', 'neutral', 'pos'] (in that "
      "order); this run's are the same in another order, ['pos', 'neutral', 'neg']"
  ) in proc.stderr, proc.stderr[-2000:]
  assert not (tmp_path / "warm" / "labels.txt").exists()  # refused before its labels
  # An earlier labelled test file's scores do not stay beside an unlabelled one's predictions.
  (out / "test_results.txt").write_text("accuracy = 1.0\n")
  run_script("official_bert.run_classifier", tmp_path, f"--test_file={test}",
             f"--output_dir={out}", "--do_predict")
  assert not (out / "test_results.txt").exists()

  # From OUTPUT_DIR alone (no --label_names/--num_labels: the label strings of labels.txt):
  # the export windows long texts as --do_predict did (--doc_stride from run_settings.json)
  # and serves the same probabilities and labels.
  serve = _export_cli(out, tmp_path / "export_windows")
  test_texts = [json.loads(line)["text"] for line in open(test, encoding="utf-8")]
  served = serve(text=tf.constant(test_texts))
  np.testing.assert_allclose(served["probabilities"].numpy(), _probabilities(rows), atol=2e-6)
  assert [s.decode() for s in served["predicted_labels"].numpy()] == [r[1] for r in rows[1:]]
  assert served["num_windows"].numpy().tolist() == [1] * 6 + [4]
  assert served["input_word_ids"].shape == (7, 32)  # each text's first window


def test_multi_label_and_regression(tmp_path):
  texts = _rows(16)
  sets = [["sports"], ["politics", "sports"], [], ["tech"]] * 4
  train = _write_jsonl(tmp_path / "train.jsonl",
                       [{"text": t, "label": s} for t, s in zip(texts, sets)])
  dev = _write_csv(tmp_path / "dev.tsv", ["id", "text", "label"],
                   [[f"d{i}", t, "|".join(s)] for i, (t, s) in enumerate(zip(texts, sets))],
                   delimiter="\t")
  out = tmp_path / "multi"
  run_script("official_bert.run_classifier", tmp_path, f"--train_file={train}",
             f"--dev_file={dev}", f"--test_file={dev}", f"--output_dir={out}",
             "--problem_type=multi_label", "--label_separator=|", "--do_train", "--do_eval",
             "--do_predict")
  assert (out / "labels.txt").read_text() == "politics\nsports\ntech\n"
  results = read_results(out / "eval_results.txt")
  assert {"micro_f1", "macro_f1", "exact_match", "classification_loss"} <= set(results)
  rows = _predictions(out / "test_predictions.tsv")
  assert rows[0] == ["id", "prediction", "prob_politics", "prob_sports", "prob_tech"]
  assert len(rows) == 17 and rows[1][0] == "d0"
  for row in rows[1:]:  # sigmoids, not a distribution; the labels above the threshold
    probs = dict(zip(["politics", "sports", "tech"], map(float, row[2:])))
    chosen = set(filter(None, row[1].split("|")))
    assert chosen >= {k for k, p in probs.items() if p > 0.5}  # 0.500000 may be rounded
    assert chosen <= {k for k, p in probs.items() if p >= 0.5}
  assert (out / "test_results.txt").exists()  # labelled test file: scored too
  # The export serves sigmoids and the labels above training's threshold, joined by "|".
  served = _export_cli(out, tmp_path / "export_multi")(text=tf.constant(texts))
  np.testing.assert_allclose(served["probabilities"].numpy(), _probabilities(rows), atol=2e-6)
  assert [s.decode() for s in served["predicted_labels"].numpy()] == [r[1] for r in rows[1:]]
  assert served["predicted"].shape == (16, 3)

  # Regression on sentence pairs (float labels, MSE; Pearson/Spearman/MSE).
  pairs = [[a, b, f"{i / 4:.2f}"] for i, (a, b) in enumerate(zip(texts, _rows(16, seed=2)))]
  reg = _write_csv(tmp_path / "sts.csv", ["s1", "s2", "score"], pairs)
  out = tmp_path / "reg"
  run_script("official_bert.run_classifier", tmp_path, f"--train_file={reg}",
             f"--dev_file={reg}", f"--test_file={reg}", f"--output_dir={out}",
             "--problem_type=regression", "--text_column=s1", "--text_b_column=s2",
             "--label_column=score", "--do_train", "--do_eval", "--do_predict")
  results = read_results(out / "eval_results.txt")
  assert {"pearson", "spearman", "mse", "regression_loss"} <= set(results)
  rows = _predictions(out / "test_predictions.tsv")
  assert rows[0] == ["prediction"] and len(rows) == 17
  float(rows[1][0])
  assert not (out / "labels.txt").exists()
  served = _export_cli(out, tmp_path / "export_reg", "serving_pair")(
      text=tf.constant([p[0] for p in pairs]), text_b=tf.constant([p[1] for p in pairs]))
  np.testing.assert_allclose(served["score"].numpy(), [float(r[0]) for r in rows[1:]],
                             atol=2e-6)
  assert "probabilities" not in served


def test_missing_column_is_exit_1_naming_file_column_and_columns(tmp_path):
  train = _write_csv(tmp_path / "train.csv", ["sentence", "label"], [["a b", "x"], ["c", "y"]])
  proc = run_script("official_bert.run_classifier", tmp_path, f"--train_file={train}",
                    f"--output_dir={tmp_path / 'out'}", "--do_train", check=False)
  assert proc.returncode == 1
  assert "train.csv: no column 'text'; columns: sentence, label" in proc.stderr
  assert "Traceback" not in proc.stderr


def test_a_pretrained_models_folder_as_output_dir_is_refused_untouched(tmp_path):
  """--output_dir = --init_checkpoint's folder (a pretrained model): refused before the run
  writes labels, records or a run record there, which made it read as a fine-tuned model
  without its head."""
  folder = tiny_model_folder(tmp_path / "pretrained")
  before = sorted(os.listdir(folder))
  train = _write_csv(tmp_path / "train.csv", ["text", "label"], [["a b", "x"], ["c", "y"]])
  proc = run_command("official_bert.run_classifier", f"--train_file={train}", "--do_train",
                     f"--init_checkpoint={folder}", f"--output_dir={folder}")
  assert proc.returncode == 1, proc.stderr[-2000:]
  assert f"--output_dir={folder} is the folder of --init_checkpoint" in proc.stderr
  assert sorted(os.listdir(folder)) == before


@pytest.mark.parametrize("name, content, message", [
    ("a.jsonl", '{"text": "a", "label": "x"}\n{"text": "b", "label": \n',
     "a.jsonl:2: malformed JSON"),
    ("a.csv", 'text,label\n"a",x\n"b"c,y\n', "a.csv:3: malformed line"),
    ("a.csv", "text,label\na,x\nb,y,z\n", "a.csv:3: 3 comma-separated fields, expected 2"),
    ("a.tsv", "", "a.tsv: empty file"),
    ("a.tsv", "text\tlabel\n", "a.tsv: empty file (no examples after the header)"),
    ("a.jsonl", '{"text": "a", "label": "x"}\n{"txt": "b", "label": "y"}\n',
     "a.jsonl:2: no column 'text'; columns: txt, label"),
    ("a.txt", "x", "unknown file type '.txt'"),
    ("a.csv", "text,label\na,\n", "a.csv:2: empty label"),
])
def test_bad_files_name_file_and_line(tmp_path, name, content, message):
  path = tmp_path / name
  path.write_text(content, encoding="utf-8")
  with pytest.raises(ValueError, match=None) as e:
    own_files.read_examples(str(path), own_files.Columns("text"))
  assert message in str(e.value)


def test_bad_utf8_names_line_and_column(tmp_path):
  path = tmp_path / "a.csv"
  path.write_bytes(b"text,label\nok,x\nb\xffd,y\n")
  with pytest.raises(ValueError, match=r"a.csv:3:2: not valid UTF-8"):
    own_files.read_examples(str(path), own_files.Columns("text"))


def test_readers_quotes_labels_and_ids(tmp_path):
  path = _write_csv(tmp_path / "a.tsv", ["id", "text", "label"],
                    [["7", 'say "hi",\tthen', "a, b"], ["8", "x", ""]], delimiter="\t")
  data = own_files.read_examples(path, own_files.Columns("text"), "multi_label", ",")
  assert [e.text_a for e in data.examples] == ['say "hi",\tthen', "x"]
  assert [e.label for e in data.examples] == [["a", "b"], []]
  assert data.ids == ["7", "8"] and data.has_labels
  test = own_files.read_examples(path, own_files.Columns("text", label="gold"),
                                 need_labels=False)
  assert not test.has_labels and test.examples[0].label is None
  with pytest.raises(ValueError, match="a.tsv:2: label 'a, b' is not a number"):
    own_files.read_examples(path, own_files.Columns("text"), "regression")
  for score in ("nan", "inf", "-Infinity"):  # a NaN score read as "no label"; inf as a loss
    scores = _write_csv(tmp_path / "s.csv", ["text", "label"], [["a", "0.5"], ["b", score]])
    with pytest.raises(ValueError, match=f"s.csv:3: label '{score}' is not a finite number"):
      own_files.read_examples(scores, own_files.Columns("text"), "regression")
  bom = tmp_path / "bom.csv"  # as spreadsheets export it
  bom.write_bytes(b"\xef\xbb\xbftext,label\nhi,x\n")
  assert own_files.read_examples(str(bom), own_files.Columns("text")).examples[0].label == "x"
  # JSON nulls: a null label or text was read as the class "null" or the text "None".
  jsonl = tmp_path / "n.jsonl"
  for record, message in (({"text": "bad", "label": None}, r"n.jsonl:1: label null is not a "
                           r"label"),
                          ({"text": None, "label": "neg"}, r"n.jsonl:1: text is null, not a "
                           r"text"),
                          ({"text": ["a", "b"], "label": "neg"}, r"text is \["),):
    jsonl.write_text(json.dumps(record) + "\n")
    with pytest.raises(ValueError, match=message):
      own_files.read_examples(str(jsonl), own_files.Columns("text"))
  jsonl.write_text(json.dumps({"text": "a", "text_b": None, "label": "neg"}) + "\n")
  pair = own_files.read_examples(str(jsonl), own_files.Columns("text", "text_b"))
  assert pair.examples[0].text_b == ""  # no second text: one segment


def test_windows_cover_long_texts_and_average():
  assert windows.window_starts(10, 4, 3) == [0, 3, 6]
  assert windows.window_starts(3, 4, 2) == [0]
  tokenizer = classifier_features.cached_tokenizer(need(UNCASED_VOCAB), True)
  examples = [own_files.InputExample("0", " ".join(WORDS[:2]), None, "a"),
              own_files.InputExample("1", " ".join(WORDS * 2), "nice", "b")]
  columns = classifier_features.convert_examples(examples, ["a", "b"], 8, tokenizer)
  out, owner = windows.windowed_columns(examples, columns, 8, 3, tokenizer)
  # Pair: room 8 - 3 - 1 = 4 for the 16 tokens: starts 0, 3, 6, 9, 12.
  assert owner == [0, 1, 1, 1, 1, 1]
  assert out["label_ids"][:, 0].tolist() == [0, 1, 1, 1, 1, 1]
  ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(" ".join(WORDS * 2)))
  covered = {t for row in out["input_ids"][1:] for t in row[1:5]}
  assert set(ids) <= covered and out["input_ids"][1, 6] == tokenizer.vocab["nice"]
  values = np.array([[1.0, 0.0], [0.2, 0.8], [0.4, 0.6]])
  np.testing.assert_allclose(windows.average_windows(values, [0, 1, 1]),
                             [[1.0, 0.0], [0.3, 0.7]])
  assert windows.first_windows([0, 1, 1, 2]).tolist() == [0, 1, 3]


def test_label_set_from_flags_labels_txt_and_export_lookup(tmp_path):
  train = _write_jsonl(tmp_path / "train.jsonl", [{"text": "a", "label": "b"},
                                                  {"text": "c", "label": "a"}])
  out = tmp_path / "out"
  out.mkdir()

  def job(**flags):  # prepare() writes no records: no --do_* is set
    settings = classifier_job.ClassifierSettings(output_dir=str(out),
                                                 vocab_file=need(UNCASED_VOCAB), **flags)
    made = classifier_job.make_job(settings)
    made.prepare()
    return made

  assert job(train_file=train).labels == ["a", "b"]  # sorted
  assert job(train_file=train, label_names=("b", "a", "c")).labels == ["b", "a", "c"]
  assert (out / "labels.txt").read_text() == "b\na\nc\n"  # id order, as given
  assert job(dev_file=train).labels == ["b", "a", "c"]  # a later run: from labels.txt
  assert model_files.labels_beside(str(out)) == ["b", "a", "c"]  # export's default
  assert model_files.labels_beside(str(out / "ckpt-3")) == ["b", "a", "c"]
  with pytest.raises(ValueError, match=r"train.jsonl:1: label 'b' is not in the label set"):
    job(train_file=train, label_names=("a", "c"))
  assert job(train_file=train, class_weights="balanced").class_weights == [1.0, 1.0]
  with pytest.raises(ValueError, match="applies to --problem_type=single_label"):
    job(train_file=train, class_weights="1,2", problem_type="multi_label")
  with pytest.raises(ValueError, match="balanced needs --train_file"):
    job(dev_file=train, class_weights="balanced")
  with pytest.raises(ValueError, match="--task_name .* is required"):
    classifier_job.make_job(classifier_job.ClassifierSettings(output_dir=str(out)))


def test_class_weights_balanced_and_explicit():
  examples = [own_files.InputExample(str(i), "t", None, label)
              for i, label in enumerate("aaab")]
  assert own_files.class_weights("balanced", examples, ["a", "b"]) == [4 / 6, 4 / 2]
  assert own_files.class_weights("1,3.5", examples, ["a", "b"]) == [1.0, 3.5]
  with pytest.raises(ValueError, match="need 2 weights"):
    own_files.class_weights("1", examples, ["a", "b"])
  with pytest.raises(ValueError, match=r"no training example of \['c'\]"):
    own_files.class_weights("balanced", examples, ["a", "b", "c"])


def test_class_weighted_loss_is_the_weighted_mean():
  logits = np.array([[2.0, 0.0], [0.5, 1.0], [0.0, 0.0], [1.0, -1.0]], np.float32)
  labels = np.array([0, 1, 1, 0])
  real = np.array([1, 1, 1, 0])  # the last is a padding example
  weights = [0.5, 3.0]
  task = ClassificationTask(None, 2, 8, class_weights=weights)
  features = {"label_ids": tf.constant(labels), "is_real_example": tf.constant(real)}
  total = task.loss_sums(features, {"logits": tf.constant(logits)})["classification_loss"]
  normalizer = task.loss_normalizers(features)["classification_loss"]
  nll = -np.log(np.exp(logits) / np.exp(logits).sum(-1, keepdims=True))[range(4), labels]
  w = np.array(weights)[labels] * real
  np.testing.assert_allclose(float(total), np.sum(nll * w), rtol=1e-5)
  np.testing.assert_allclose(float(normalizer), 0.5 + 3.0 + 3.0)
  plain = ClassificationTask(None, 2, 8)  # unweighted: the old normalizer, the real count
  assert float(plain.loss_normalizers(features)["classification_loss"]) == 3.0
  multi = ClassificationTask(None, 2, 8, problem_type="multi_label")
  hot = {"label_ids": tf.constant([[1.0, 0.0], [1.0, 1.0], [0, 0], [0, 1]]),
         "is_real_example": tf.constant(real)}
  bce = np.mean(np.maximum(logits, 0) - logits * hot["label_ids"].numpy()
                + np.log1p(np.exp(-np.abs(logits))), -1)
  np.testing.assert_allclose(
      float(multi.loss_sums(hot, {"logits": tf.constant(logits)})["classification_loss"]),
      np.sum(bce * real), rtol=1e-5)


def test_classification_metrics():
  scores = metrics.per_class_scores([0, 1, 1, 2, 0], [0, 1, 2, 2, 1], ["a", "b", "c"])
  assert scores["accuracy"] == 0.6
  assert scores["precision_b"] == 0.5 and scores["recall_b"] == 0.5
  assert scores["precision_c"] == 1.0 and scores["recall_c"] == 0.5
  assert abs(scores["f1_c"] - 2 / 3) < 1e-9 and scores["f1_a"] == 2 / 3
  assert abs(scores["macro_f1"] - (2 / 3 + 0.5 + 2 / 3) / 3) < 1e-9
  multi = metrics.multi_label_scores([[1, 0], [1, 1], [0, 0]], [[1, 0], [0, 1], [0, 1]])
  # label 0: tp 1, fp 1 -> F1 2/3; label 1: tp 1, fn 1 -> 2/3; pooled: tp 2, fp 1, fn 1.
  assert multi == {"micro_f1": 2 / 3, "macro_f1": 2 / 3, "exact_match": 1 / 3}
  reg = metrics.regression_scores([1.0, 2.0, 3.0], [1.0, 2.0, 5.0])
  assert reg["spearman"] == 1.0 and reg["mse"] == 4 / 3 and 0.9 < reg["pearson"] < 1


def test_served_outputs_follow_the_problem_type_even_with_one_label():
  from official_bert.serving import classifier_outputs
  logits = tf.constant([[2.0], [-1.0]])
  multi = classifier_outputs.outputs_from_logits(logits, "multi_label", ["spam"], 0.5)
  np.testing.assert_allclose(multi["probabilities"].numpy(), 1 / (1 + np.exp(-logits.numpy())),
                             rtol=1e-6)
  assert multi["predicted"].numpy().tolist() == [[1], [0]]
  regression = classifier_outputs.outputs_from_logits(logits, "regression")
  assert regression["score"].numpy().tolist() == [2.0, -1.0]
  assert "probabilities" not in regression
