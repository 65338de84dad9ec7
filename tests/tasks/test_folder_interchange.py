"""A folder a command trained and a folder the Python API saved are one kind of folder (issue
38): each loads in `from_preset` and exports by CLI with nothing but `--checkpoint` and
`--export_dir` (the run record names the model type and its settings), and the export serves
what `predict` gives (1e-5).

For each task: the command trains a tiny model (random init, 3 steps); `from_preset(OUTPUT_DIR)`
predicts what `export --checkpoint=OUTPUT_DIR` serves; the API model saved with `save(DIR)`
exports by CLI and serves the same again. (The masked LM's: tests/api/test_masked_lm.py.)"""

import csv
import json

from conftest import run_command
from conftest import tiny_model_folder
import harness
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the exported tokenizer's ops)
from test_glue_run_classifier import run_script

import official_bert as ob

pytestmark = pytest.mark.large  # trains or runs commands: `make test`, not `make test-fast`

WORDS = ["good", "bad", "great", "awful", "fine", "poor", "nice", "dull"]


def _texts(n, seed):
  rng = np.random.default_rng(seed)
  return [" ".join(rng.choice(WORDS, 3 + i % 4)) for i in range(n)]


def _write_tsv(path, header, rows):
  with open(path, "w", encoding="utf-8", newline="") as f:
    csv.writer(f, delimiter="\t").writerows([header] + rows)
  return str(path)


CLASSIFIER_KINDS = {
    "single": ([], lambda a, b: a, lambda a, b: {"text": a}),
    "pair": (["--text_b_column=text_b"], lambda a, b: (a, b),
             lambda a, b: {"text": a, "text_b": b}),
    # Texts of up to 6 pieces in windows of 4, every 2: the record's problem type and
    # doc_stride travel (to the API, the export and a later --do_predict).
    "multi_label": (["--problem_type=multi_label", "--doc_stride=2", "--max_seq_length=6"],
                    lambda a, b: a, lambda a, b: {"text": a}),
}


@pytest.mark.parametrize("kind", sorted(CLASSIFIER_KINDS))
def test_classifier_folders_load_export_and_serve_alike(kind, tmp_path):
  flags, api_input, served_input = CLASSIFIER_KINDS[kind]
  first, second = _texts(16, 0), _texts(16, 1)
  labels = (["pos", "neg,pos", "neg", ""] if kind == "multi_label"
            else ["pos", "neg", "neg", "neutral"]) * 4
  train = _write_tsv(tmp_path / "train.tsv", ["text", "text_b", "label"],
                     [list(row) for row in zip(first, second, labels)])
  out = tmp_path / "out"
  run_script("official_bert.run_classifier", tmp_path, f"--train_file={train}",
             f"--output_dir={out}", "--do_train", *flags)
  record = json.loads((out / "run_settings.json").read_text())
  assert record["classifier"]["text_pairs"] is (kind == "pair")

  clf = ob.TextClassifier.from_preset(str(out))  # labels, problem type, pairs: the record's
  assert clf.untrained_weights == [] and clf.text_pairs is (kind == "pair")
  x = api_input(first[:6], second[:6])
  expected = clf.predict(x)
  signature = "serving_pair" if kind == "pair" else "serving_default"
  served = harness.serve(out, tmp_path / "export_cli")[signature](
      **{k: tf.constant(v) for k, v in served_input(first[:6], second[:6]).items()})
  np.testing.assert_allclose(served["probabilities"].numpy(), expected, atol=1e-5)
  if kind == "multi_label":
    assert clf.doc_stride == 2 and served["num_windows"].numpy().max() == 2
    _predict_without_the_window_flags(tmp_path, out, first[:6], expected)

  clf.save(str(tmp_path / "api"))
  served = harness.serve(tmp_path / "api", tmp_path / "export_api")[signature](
      **{k: tf.constant(v) for k, v in served_input(first[:6], second[:6]).items()})
  np.testing.assert_allclose(served["probabilities"].numpy(), expected, atol=1e-5)


def _predict_without_the_window_flags(tmp_path, out, texts, expected):
  """A later `--do_predict` into the same OUTPUT_DIR, no --problem_type or --doc_stride: the
  run record's (the probabilities of test_predictions.tsv, written to 6 places, are
  predict's: sigmoids, each text's windows' mean)."""
  test = _write_tsv(tmp_path / "test.tsv", ["text"], [[t] for t in texts])
  run_script("official_bert.run_classifier", tmp_path, f"--test_file={test}",
             f"--output_dir={out}", "--do_predict", "--max_seq_length=6")
  with open(out / "test_predictions.tsv", encoding="utf-8") as f:
    rows = list(csv.reader(f, delimiter="\t"))
  probabilities = np.array([[float(v) for v in row[1:]] for row in rows[1:]])
  np.testing.assert_allclose(probabilities, expected, atol=2e-6)


def _read_tsv(path):
  with open(path, encoding="utf-8") as f:
    return list(csv.reader(f, delimiter="\t"))


def test_a_folder_the_api_saved_reopens_in_the_commands(tmp_path):
  """An API-saved classifier and tagger as a command's --output_dir (a later --do_predict)
  and as --init_checkpoint of a new one: the labels come from the run record (there is no
  labels.txt; labels with commas, which --label_names could not give), and run_classifier
  predicts what `predict` gives."""
  tiny = tiny_model_folder(tmp_path / "tiny")
  texts = _texts(8, 5)
  names = ["bad, really", "très bon"]
  clf = ob.TextClassifier.from_preset(tiny, labels=names, sequence_length=16)
  clf.fit(texts, names * 4, batch_size=4, seed=1, verbose=0)
  clf.save(str(tmp_path / "clf"))
  expected = clf.predict(texts)
  test = _write_tsv(tmp_path / "test.tsv", ["text"], [[t] for t in texts])
  for flags in ([f"--output_dir={tmp_path / 'clf'}"],
                [f"--init_checkpoint={tmp_path / 'clf'}", f"--output_dir={tmp_path / 'new'}"]):
    proc = run_command("official_bert.run_classifier", f"--test_file={test}", "--do_predict",
                       *flags)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = _read_tsv(f"{flags[-1].split('=', 1)[1]}/test_predictions.tsv")
    assert rows[0] == ["prediction"] + [f"prob_{name}" for name in names]
    np.testing.assert_allclose([[float(v) for v in row[1:]] for row in rows[1:]], expected,
                               atol=2e-6)
  sentences = [text.split() for text in texts]
  tagger = ob.TokenTagger.from_preset(tiny, labels=["O", "B-X,Y"], sequence_length=16)
  tagger.save(str(tmp_path / "tagger"))
  test = tmp_path / "test.conll"
  test.write_text("\n\n".join("\n".join(words) for words in sentences) + "\n")
  proc = run_command("official_bert.run_ner", f"--test_file={test}", "--do_predict",
                     f"--output_dir={tmp_path / 'tagger'}")
  assert proc.returncode == 0, proc.stderr[-3000:]
  expected_tags = tagger.predict_tags(sentences)
  predicted = (tmp_path / "tagger" / "test_predictions.txt").read_text().strip().split("\n\n")
  assert [[line.split()[-1] for line in block.splitlines()] for block in predicted] == \
      expected_tags


def test_tagger_folders_load_export_and_serve_alike(tmp_path):
  sentences = [text.split() for text in _texts(12, 2)]
  tags = [["B-PER" if w in ("good", "great") else "O" for w in words] for words in sentences]
  train = tmp_path / "train.conll"
  train.write_text("\n\n".join("\n".join(f"{w} {t}" for w, t in zip(words, sentence_tags))
                               for words, sentence_tags in zip(sentences, tags)) + "\n")
  out = tmp_path / "out"
  run_script("official_bert.run_ner", tmp_path, f"--train_file={train}", f"--output_dir={out}",
             "--do_train")
  tagger = ob.TokenTagger.from_preset(str(out))
  assert tagger.untrained_weights == [] and set(tagger.labels) == {"O", "B-PER"}
  texts = [" ".join(words) for words in sentences[:4]]
  expected = tagger.predict(sentences[:4])
  for folder, export_dir in ((out, "export_cli"), (None, "export_api")):
    if folder is None:
      tagger.save(str(tmp_path / "api"))
      folder = tmp_path / "api"
    served = harness.serve(folder, tmp_path / export_dir)["serving_default"](
        text=tf.constant(texts))
    # Served at the request's longest text (rounded up to 8), the tagger's width otherwise;
    # equal at the real tokens (the export skips padding: docs/export.md).
    real = served["input_mask"].numpy() == 1
    width = served["probabilities"].shape[1]
    assert width % 8 == 0 and width <= expected.shape[1]
    np.testing.assert_allclose(served["probabilities"].numpy()[real],
                               expected[:, :width][real], atol=1e-5)


def test_embedder_folders_load_export_and_serve_alike(tmp_path):
  first, second = _texts(16, 3), _texts(16, 4)
  train = _write_tsv(tmp_path / "pairs.tsv", ["text", "text_b"],
                     [list(row) for row in zip(first, second)])
  out = tmp_path / "out"
  run_script("official_bert.run_embeddings", tmp_path, f"--train_file={train}",
             f"--output_dir={out}", "--do_train", "--pooling=cls")
  embedder = ob.TextEmbedder.from_preset(str(out))
  assert embedder.pooling == "cls"
  expected = embedder.encode(first[:5])
  embedder.save(str(tmp_path / "api"))
  for folder, export_dir in ((out, "export_cli"), (tmp_path / "api", "export_api")):
    served = harness.serve(folder, tmp_path / export_dir)["serving_default"](
        text=tf.constant(first[:5]))
    np.testing.assert_allclose(served["sentence_embedding"].numpy(), expected, atol=1e-5)


CONTEXT = ("The Normans were the people who in the 10th and 11th centuries gave their name to "
           "Normandy, a region in France. They were descended from Norse raiders. ")
QUESTIONS = [("Who gave their name to Normandy?", "The Normans"),
             ("Where is Normandy?", "France"), ("Who were they descended from?", "Norse raiders")]


def test_question_answerer_folders_load_export_and_serve_alike(tmp_path):
  squad = {"version": "1.1", "data": [{"title": "Normans", "paragraphs": [{
      "context": CONTEXT, "qas": [
          {"id": str(i), "question": question,
           "answers": [{"text": answer, "answer_start": CONTEXT.index(answer)}]}
          for i, (question, answer) in enumerate(QUESTIONS)]}]}]}
  train = tmp_path / "train.json"
  train.write_text(json.dumps(squad), encoding="utf-8")
  out = tmp_path / "out"
  run_script("official_bert.run_squad", tmp_path, f"--train_file={train}", f"--output_dir={out}",
             "--do_train", "--doc_stride=16", "--max_query_length=12")
  qa = ob.QuestionAnswerer.from_preset(str(out))  # window settings: the record's
  assert qa.untrained_weights == [] and qa.options["doc_stride"] == 16
  questions = [q for q, _ in QUESTIONS]
  expected = [qa.answer(question, CONTEXT) for question in questions]
  qa.save(str(tmp_path / "api"))
  for folder, export_dir in ((out, "export_cli"), (tmp_path / "api", "export_api")):
    served = harness.serve(folder, tmp_path / export_dir)["serving_default"](
        question=tf.constant(questions), context=tf.constant([CONTEXT] * len(questions)))
    for row, answer in enumerate(expected):
      assert served["answer_text"].numpy()[row].decode() == answer["text"]
      assert int(served["answer_start"][row]) == answer["start"]
      np.testing.assert_allclose(float(served["score"][row]), answer["score"], atol=1e-5)
  # run_squad on the API's folder (a later --do_predict in it) answers as trained: the
  # record's --doc_stride and --max_query_length, not the flags' defaults.
  proc = run_command("official_bert.run_squad", f"--predict_file={train}", "--do_predict",
                     f"--output_dir={tmp_path / 'api'}")
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "--doc_stride=16" in proc.stderr and "--max_query_length=12" in proc.stderr
  predictions = json.loads((tmp_path / "api" / "predictions.json").read_text())
  assert [predictions[str(i)] for i in range(len(questions))] == [a["text"] for a in expected]
