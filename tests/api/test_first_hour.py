"""A newcomer's first hour with the Python API (issue 36), on a tiny random model folder.

Nothing deleted: every writer of a model folder (`save`, `export`, the export command's
library, a command's OUTPUT_DIR) keeps the files it did not write. Nothing silent: scores
without a scored loss, an untrained head, labels of another type, a majority-class model, an
empty or file-name `x`, each stop or warn at the call. A seed repeats a run.
"""

import dataclasses
import json
import logging
import os
import shutil

from conftest import GLUE_DATA
from conftest import run_command
from conftest import tiny_model_folder
from conftest import tiny_pretraining_folder
import numpy as np
import pytest
import tensorflow as tf

import official_bert as ob
from official_bert.interop import model_folder
from official_bert.interop import weights_io
from official_bert.serving import exporter

pytestmark = pytest.mark.large  # trains or runs commands: `make test`, not `make test-fast`

TEXTS = ["a great and moving film", "dull , boring and far too long", "i loved every minute",
         "the worst movie of the year"] * 2
LABELS = ["pos", "neg"] * 4


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
  return tiny_model_folder(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="module")
def classifier(tiny_dir):
  return ob.TextClassifier.from_preset(tiny_dir, labels=["neg", "pos"], sequence_length=16)


def _user_files(folder):
  """A folder of the user's own: data, notes and a subfolder of logs."""
  os.makedirs(folder / "logs", exist_ok=True)
  (folder / "train.csv").write_text("text,label\nfine,pos\n")
  (folder / "notes.txt").write_text("my notes")
  (folder / "logs" / "events.out").write_text("curves")
  return {"train.csv": "text,label\nfine,pos\n", "notes.txt": "my notes",
          "logs/events.out": "curves"}


def _assert_kept(folder, files):
  for name, content in files.items():
    assert (folder / name).read_text() == content, name


def test_save_refuses_a_non_empty_folder_and_keeps_its_files(classifier, tmp_path):
  files = _user_files(tmp_path / "data")
  with pytest.raises(ValueError, match=r"is not empty .*nothing was written.*overwrite=True"):
    classifier.save(str(tmp_path / "data"))
  assert sorted(os.listdir(tmp_path / "data")) == ["logs", "notes.txt", "train.csv"]
  _assert_kept(tmp_path / "data", files)
  with pytest.raises(ValueError, match="is a file"):
    classifier.save(str(tmp_path / "data" / "notes.txt"))


def test_save_with_overwrite_replaces_only_the_model(classifier, tiny_dir, tmp_path):
  folder = tmp_path / "run"
  classifier.save(str(folder))  # a fine-tuning folder, with its checkpoint and model files
  files = _user_files(folder)
  (folder / "eval_results.txt").write_text("eval_accuracy = 0.9\n")
  files["eval_results.txt"] = "eval_accuracy = 0.9\n"
  other = ob.TextClassifier.from_preset(tiny_dir, labels=["a", "b", "c"], sequence_length=16)
  other.save(str(folder), overwrite=True)
  _assert_kept(folder, files)
  assert not [n for n in os.listdir(folder) if n.startswith(".")]  # no temporaries left
  reloaded = ob.TextClassifier.from_preset(str(folder))
  assert reloaded.labels == ["a", "b", "c"]
  _assert_same_weights(reloaded, other)


def _assert_same_weights(reloaded, saved):
  """The model a folder reads back is the one saved there (not a previous one's weights)."""
  assert len(reloaded.network.weights) == len(saved.network.weights)
  for got, want in zip(reloaded.network.weights, saved.network.weights):
    np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=got.path)


def test_save_over_a_hugging_face_folder_replaces_its_weights(classifier, tmp_path):
  folder = tmp_path / "hf"
  folder.mkdir()
  (folder / "model.safetensors").write_bytes(b"old weights")  # read before a checkpoint
  (folder / "README.md").write_text("model card")
  classifier.save(str(folder), overwrite=True)
  assert not (folder / "model.safetensors").exists()
  assert (folder / "README.md").read_text() == "model card"
  _assert_same_weights(ob.TextClassifier.from_preset(str(folder)), classifier)
  # A name the save writes, held by the user's file: refused, not replaced.
  other = tmp_path / "app2"
  other.mkdir()
  (other / "vocab.txt").write_text("my words\n")
  with pytest.raises(ValueError, match=r"holds vocab.txt, which the new files would replace .*"
                                       r"nothing was written"):
    classifier.save(str(other), overwrite=True)
  assert sorted(os.listdir(other)) == ["vocab.txt"]
  assert (other / "vocab.txt").read_text() == "my words\n"


def test_save_over_a_folder_without_a_model_keeps_files_named_like_model_files(
    classifier, tmp_path):
  """No weights there: a config.json or labels.txt is the user's, not a previous model's; so
  is a search index's docs.index (no docs.data-* beside it: not a checkpoint) and its
  docs.* files."""
  folder = tmp_path / "app"
  folder.mkdir()
  mine = {"config.json": '{"app_port": 8080}', "labels.txt": "mine\n", "docs.index": "faiss",
          "docs.txt": "a document\n", "docs.meta.json": "{}"}
  for name, text in mine.items():
    (folder / name).write_text(text)
  classifier.save(str(folder), overwrite=True)
  for name, text in mine.items():
    assert (folder / name).read_text() == text, name
  _assert_same_weights(ob.TextClassifier.from_preset(str(folder)), classifier)


def test_save_into_the_working_directory(classifier, tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  classifier.save(".")  # empty: no overwrite needed
  (tmp_path / "notes.txt").write_text("mine")
  classifier.save(".", overwrite=True)
  assert (tmp_path / "notes.txt").read_text() == "mine"
  assert not [n for n in os.listdir(tmp_path) if n.startswith(".")]
  assert ob.TextClassifier.from_preset(".").labels == ["neg", "pos"]


def test_export_command_overwrite_keeps_other_files(tiny_dir, tmp_path):
  folder = tmp_path / "export"
  model, options = model_folder.read(tiny_dir), exporter.ExportOptions("encoder", max_seq_length=8)
  # A previous export's files (each entry `exporter.SAVED_MODEL_ENTRIES` names), as
  # stand-ins: the overwrite must replace every one of them.
  previous = ("saved_model.pb", "fingerprint.pb", "variables/variables.index",
              "variables/variables.data-00000-of-00001", "assets/vocab.txt",
              "assets.extra/export_info.json")
  for name in previous:
    os.makedirs(os.path.dirname(folder / name), exist_ok=True)
    (folder / name).write_text("the previous export")
  files = _user_files(folder)
  # Names another export format writes, here the user's: not this export's to replace.
  for name in ("vocab.txt", "encoder/my_data.csv", "preprocessor/p.txt"):
    os.makedirs(os.path.dirname(folder / name), exist_ok=True)
    (folder / name).write_text(f"mine: {name}")
    files[name] = f"mine: {name}"
  with pytest.raises(ValueError, match="pass --overwrite"):
    exporter.export(model, str(folder), options)
  exporter.export(model, str(folder), dataclasses.replace(options, overwrite=True))
  _assert_kept(folder, files)
  for name in previous:  # replaced or gone, none left as it was
    assert not (folder / name).exists() or (folder / name).read_bytes() != b"the previous export"
  assert "serving_default" in tf.saved_model.load(str(folder)).signatures  # the new export


def test_export_into_the_model_folder_keeps_the_model(tiny_dir, tmp_path):
  """A model folder exported into itself: its vocab.txt and weights stay, so it reads again."""
  folder = tmp_path / "model"
  shutil.copytree(tiny_dir, folder)
  before = sorted(os.listdir(folder))
  options = exporter.ExportOptions("encoder", max_seq_length=8, overwrite=True)
  exporter.export(model_folder.read(str(folder)), str(folder), options)
  assert set(before) <= set(os.listdir(folder)), before
  with open(os.path.join(tiny_dir, "vocab.txt"), encoding="utf-8") as f:
    assert (folder / "vocab.txt").read_text() == f.read()
  again = model_folder.read(str(folder))  # it reads again, its weights too
  assert again.vocab_file == str(folder / "vocab.txt") and again.config is not None
  assert weights_io.read_weights(str(folder)).format == "ours"


def test_export_entries_are_those_of_an_export_there(tmp_path):
  """What `--overwrite` may replace of an old export: only what an export there owns."""
  def folder_of(*names):
    folder = tmp_path / f"f{len(list(tmp_path.iterdir()))}"
    for name in names:
      os.makedirs(os.path.dirname(folder / name), exist_ok=True)
      (folder / name).write_text("x")
    return str(folder)

  saved_model = ("saved_model.pb", "fingerprint.pb", "variables/v.index", "assets/vocab.txt")
  assert exporter.export_entries(folder_of(*saved_model, "vocab.txt", "notes.txt")) == [
      "assets", "fingerprint.pb", "saved_model.pb", "variables"]
  assert exporter.export_entries(folder_of("encoder/saved_model.pb", "preprocessor/p.txt",
                                           "vocab.txt")) == ["encoder"]
  assert exporter.export_entries(folder_of("model.tflite", "vocab.txt", "notes.txt")) == [
      "model.tflite", "vocab.txt"]
  # A TFLite file exported into a model folder: the vocabulary is the model's.
  assert exporter.export_entries(folder_of("model.onnx", "vocab.txt", "bert_config.json",
                                           "model.ckpt.index",
                                           "model.ckpt.data-00000-of-00001")) == ["model.onnx"]
  assert exporter.export_entries(folder_of("vocab.txt", "encoder/data.csv", "notes.txt")) == []


def test_a_command_output_dir_keeps_the_users_files(tiny_dir, tmp_path):
  out = tmp_path / "out"
  files = _user_files(out)
  result = run_command("official_bert.run_classifier", "--task_name=SST-2",
                       f"--data_dir={os.path.join(GLUE_DATA, 'SST-2')}",
                       f"--init_checkpoint={tiny_dir}", f"--output_dir={out}", "--do_train",
                       "--max_seq_length=16", "--train_batch_size=4", "--num_train_steps=2")
  assert result.returncode == 0, result.stderr[-3000:]
  _assert_kept(out, files)


def test_labels_come_back_as_the_type_they_went_in(tiny_dir, tmp_path):
  clf = ob.TextClassifier.from_preset(tiny_dir, labels=[0, 1], sequence_length=16)
  predicted = clf.predict_labels(TEXTS[:2])
  assert all(type(p) is int for p in predicted), predicted
  clf.fit(TEXTS, np.array([1, 0] * 4), batch_size=4, verbose=0)  # numpy ints are ids/labels
  clf.save(str(tmp_path / "ints"))
  again = ob.TextClassifier.from_preset(str(tmp_path / "ints"))
  assert again.predict_labels(TEXTS[:2]) == clf.predict_labels(TEXTS[:2])
  assert all(type(p) is int for p in again.predict_labels(TEXTS[:2]))


def test_an_untrained_head_says_so_at_predict(tiny_dir, caplog):
  clf = ob.TextClassifier.from_preset(tiny_dir, labels=["neg", "pos"], sequence_length=16)
  assert clf.untrained_weights
  with caplog.at_level(logging.WARNING):
    clf.predict(TEXTS[:2])
  assert "head was never trained" in caplog.text and "outputs are random" in caplog.text
  clf.fit(TEXTS, LABELS, batch_size=4, verbose=0)
  caplog.clear()
  fresh_warning = clf.untrained_weights
  with caplog.at_level(logging.WARNING):
    clf.predict(TEXTS[:2])
  assert not fresh_warning and "never trained" not in caplog.text


def test_scores_without_a_scored_loss_are_an_error(tiny_dir):
  embedder = ob.TextEmbedder.from_preset(tiny_dir, sequence_length=16)
  with pytest.raises(ValueError, match=r"compile\(loss='cosine'\)"):
    embedder.fit((TEXTS[:4], TEXTS[4:]), [0.5, 0.1, 0.9, 0.3], batch_size=2, verbose=0)


def test_inputs_keras_would_misreport(classifier, tiny_dir, tmp_path):
  with pytest.raises(ValueError, match="x has no examples"):
    classifier.fit([], [])
  with pytest.raises(ValueError, match=r"x is one string \('train.csv'\).*read_csv.*"
                     r"fit\(df\['text'\], df\['label'\]\)"):
    classifier.fit("train.csv")
  # predict takes no labels: the advice is the list, not a file's columns.
  with pytest.raises(ValueError, match=r"predict: x is one string \('hello world'\), not a "
                     r"list of texts: pass a list, predict\(\['hello world'\]\)$"):
    classifier.predict("hello world")
  masked_lm = ob.MaskedLM.from_preset(tiny_pretraining_folder(tmp_path / "pre"),
                                      sequence_length=16)
  with pytest.raises(ValueError, match=r"fit\(df\['text'\]\)$"):
    masked_lm.fit("corpus.txt")
  # y: missing, one string (which Python would iterate as characters), a batch size of 0.
  with pytest.raises(ValueError, match="fit: y is None: give the labels of x, one per example"):
    classifier.fit(TEXTS, None)
  with pytest.raises(ValueError, match=r"fit: y is one string \('pos'\), not a list"):
    classifier.fit(TEXTS[:3], "pos")
  for call in (lambda: classifier.fit(TEXTS, LABELS, batch_size=0),
               lambda: classifier.predict(TEXTS, batch_size=-1),
               lambda: masked_lm.fill_mask(["a [MASK] film"], batch_size=0)):
    with pytest.raises(ValueError, match=r"batch_size=-?\d: expected a whole number of "):
      call()
  tagger = ob.TokenTagger.from_preset(tiny_dir, labels=["O", "B-X"], sequence_length=16)
  with pytest.raises(ValueError, match="fit: y is None: give the tags of x, a list of tags"):
    tagger.fit([["a", "film"]])
  # A pair's two lists of different lengths: the Preprocessor says so, not a graph error.
  with pytest.raises(ValueError, match="Preprocessor: 2 first texts but 1 second texts"):
    classifier.preprocessor((["a", "b"], ["c"]))
  # A length of 0 was taken as "not given" (128); 2 failed at the first batch, in tf.data.
  for length in (0, 2):
    with pytest.raises(ValueError, match=rf"sequence_length={length}: expected a whole number "
                       r"of tokens, at least 3"):
      ob.TextClassifier.from_preset(tiny_dir, num_classes=2, sequence_length=length)
  # export's options are the command's; the model's own settings are not options.
  with pytest.raises(ValueError, match=r"export: \['label_names'\] come from the model"):
    classifier.export(tmp_path / "e1", label_names=["a", "b"])
  with pytest.raises(ValueError, match=r"export: unknown option\(s\) \['max_length'\]; it "
                     r"takes the export command's options .*max_seq_length"):
    classifier.export(tmp_path / "e2", max_length=8)
  assert not os.path.exists(tmp_path / "e1") and not os.path.exists(tmp_path / "e2")
  # A backbone has no vocabulary for a model folder: Keras' .keras file, else a message.
  with pytest.raises(ValueError, match=r"Backbone.save\('.*b'\): a backbone saves as a .keras "
                     r"file .*for a model folder, save the task model"):
    classifier.backbone.save(str(tmp_path / "b"))


def test_a_multi_label_threshold_comes_back_as_saved(tiny_dir, tmp_path):
  """A low threshold is kept by save and from_preset (it used to come back as 0.5, and the
  folder then disagreed with its export); outside (0, 1] it is refused, as run_classifier's
  --multi_label_threshold is."""
  clf = ob.TextClassifier.from_preset(tiny_dir, labels=["a", "b"], problem_type="multi_label",
                                      multi_label_threshold=0.01, sequence_length=16)
  clf.save(str(tmp_path / "m"))
  assert ob.TextClassifier.from_preset(str(tmp_path / "m")).multi_label_threshold == 0.01
  # evaluate's exact_match reads the labels at the model's threshold, as predict_labels and
  # the exports do (it read them at 0.5), and follows a new one.
  texts, labels = TEXTS[:4], [["a", "b"], ["a", "b"], ["a"], []]
  probabilities = clf.predict(texts)
  gold = np.array([[name in y for name in ("a", "b")] for y in labels])
  for threshold, want in ((float(probabilities.min()) * 0.99, 0.5),
                          (float(probabilities.max()) * 1.01, 0.25)):
    clf.multi_label_threshold = threshold
    assert np.mean(np.all((probabilities > threshold) == gold, -1)) == want
    got = clf.evaluate(texts, labels, return_dict=True, verbose=0)["exact_match"]
    assert got == pytest.approx(want), threshold
  for threshold in (0.0, 1.5):
    with pytest.raises(ValueError, match=f"multi_label_threshold={threshold}: expected a "
                       "probability above 0 and at most 1"):
      ob.TextClassifier.from_preset(tiny_dir, labels=["a", "b"], problem_type="multi_label",
                                    multi_label_threshold=threshold, sequence_length=16)


def test_what_a_folder_is_when_it_is_not_this_task(classifier, tiny_dir, tmp_path):
  """from_preset of another task's folder (or a pretrained one) without what a new head
  needs says what the folder is; a .keras file and an .h5 name are not model folders."""
  classifier.save(str(tmp_path / "clf"))
  with pytest.raises(ValueError, match=r"TokenTagger.from_preset: .*/clf is a classifier model "
                     r"\(its run_settings.json\), not a TokenTagger: pass labels=\[...\]"):
    ob.TokenTagger.from_preset(str(tmp_path / "clf"))
  with pytest.raises(ValueError, match=r"TextClassifier.from_preset: .* is a pretrained model "
                     r"\(no run record of a task\), not a TextClassifier: pass labels="):
    ob.TextClassifier.from_preset(tiny_dir)
  with pytest.raises(ValueError, match="names an HDF5 file"):
    classifier.save(str(tmp_path / "model.h5"))
  assert not (tmp_path / "model.h5").exists()
  classifier.save(str(tmp_path / "model.keras"))
  with pytest.raises(ValueError, match=r"a Keras file, not a model folder: load it with "
                     r"keras.saving.load_model"):
    ob.TextClassifier.from_preset(str(tmp_path / "model.keras"))
  with pytest.raises(ValueError, match=r"sequence_length=512 is more than the model's "
                     r"max_position_embeddings=128"):
    ob.Preprocessor.from_preset(tiny_dir, sequence_length=512)


def test_a_functional_model_longer_than_the_positions_is_refused_when_built(tiny_dir):
  """A Preprocessor made by hand, longer than the model: refused when the functional model is
  built, not by a failed position gather at the first batch."""
  import keras  # pylint: disable=g-import-not-at-top
  backbone = ob.Backbone.from_preset(tiny_dir)
  preprocessor = ob.Preprocessor(ob.Preprocessor.from_preset(tiny_dir).vocab_file,
                                 sequence_length=256)
  x = keras.Input(shape=(), dtype="string")
  with pytest.raises(ValueError, match=r"the inputs' length \(a Preprocessor's sequence_length\)"
                     r"=256 is more than the model's max_position_embeddings=128"):
    backbone(preprocessor(x))


def test_an_answer_with_no_valid_span_is_empty_text(tiny_dir):
  """SQuAD v1.1's "empty" placeholder (predictions.json's, which the exports keep) is not an
  answer: `answer` gives "" and -1 offsets, so text == context[start:end] holds."""
  answerer = ob.QuestionAnswerer.from_preset(tiny_dir, sequence_length=32)
  context = "John went home."
  answers = answerer.answer(["Who went home?"] * 2, [context, ""])
  for answer, text in zip(answers, [context, ""]):
    assert answer["text"] == text[answer["start"]:answer["end"]] if answer["start"] >= 0 else (
        answer == {"text": "", "start": -1, "end": -1, "score": 0.0})
  assert answers[1] == {"text": "", "start": -1, "end": -1, "score": 0.0}


def test_question_answerer_names_the_examples_whose_answer_is_not_there(tiny_dir, caplog):
  answerer = ob.QuestionAnswerer.from_preset(tiny_dir, sequence_length=32)
  bad = {"question": "q", "context": "abc def", "answers": [{"text": "xyz", "answer_start": 0}]}
  good = {"question": "what", "context": "abc def", "answers": [{"text": "def",
                                                                  "answer_start": 4}]}
  with pytest.raises(ValueError, match=r"^x: no usable questions: every answer text is not at "
                     r"its answer_start in its context \(questions 0\)$"):
    answerer.fit([bad], batch_size=1)
  with pytest.raises(ValueError, match=r"^x: article 0 paragraph 1: question 1 has no answer"):
    answerer.fit([good, {"question": "q", "context": "abc", "answers": []}], batch_size=1)
  # Every window trains, the last batch partial, as the other task models and Keras: 3
  # examples at batch_size 8 were refused, 5 at 4 trained on 4. The second fit's question 1
  # is skipped, with a warning naming it.
  for count, batch_size, steps in ((3, 8, 1), (5, 4, 2)):
    examples = [dict(good, id=f"q{i}") for i in range(count)]
    if count == 5:
      examples.insert(1, bad)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
      history = answerer.fit(examples, batch_size=batch_size, epochs=1, verbose=0)
    assert history.params["steps"] == steps, (count, batch_size, history.params)
    assert ("x: skipped 1 question(s) whose answer text is not at its offset (questions 1)"
            in caplog.text) is (count == 5)


def test_a_seed_repeats_a_fit(tiny_dir):
  def run():
    clf = ob.TextClassifier.from_preset(tiny_dir, labels=["neg", "pos"], sequence_length=16)
    clf.compile(learning_rate=1e-3)
    clf.fit(TEXTS, LABELS, batch_size=4, epochs=2, seed=7, verbose=0)
    return [v.numpy() for v in clf.network.weights]  # the same weights predict alike
  first = run()
  # Whatever TensorFlow's global seed was before (tf.data's shuffle pairs the two seeds), and
  # after the first run drew from it.
  tf.random.set_seed(99)
  for again, value in zip(run(), first):
    np.testing.assert_allclose(again, value, atol=1e-6)


def test_a_majority_class_model_is_named_at_evaluate(tiny_dir, caplog):
  clf = ob.TextClassifier.from_preset(tiny_dir, labels=["neg", "pos"], sequence_length=16)
  bias = clf.network.projection.output_bias
  bias.assign([0.0, 50.0])  # every text "pos"
  with caplog.at_level(logging.WARNING):
    results = clf.evaluate(TEXTS, LABELS, return_dict=True, verbose=0)
  assert results["accuracy"] == pytest.approx(0.5)
  assert "all 8 examples were predicted as 'pos'" in caplog.text
  bias.assign([0.0, 0.0])


def test_a_rare_label_is_named_at_fit(tiny_dir, caplog):
  clf = ob.TextClassifier.from_preset(tiny_dir, num_classes=3, sequence_length=16)
  y = [0, 1] * 15 + [2]
  with caplog.at_level(logging.WARNING):
    clf.fit(TEXTS[:1] * 31, y, batch_size=16, verbose=0)
  assert "y[30]: label 2 occurs 1 time in 31 labels in y" in caplog.text, caplog.text


def test_an_empty_predict_is_named_and_an_embedders_validation_takes_its_x(classifier,
                                                                           tiny_dir, tmp_path):
  before = classifier.predict(TEXTS)
  with pytest.raises(ValueError, match=r"^predict: x has no examples \(an empty list\)$"):
    classifier.predict([])
  with pytest.raises(ValueError, match="predict: x has no examples"):
    classifier.predict(([], []))
  np.testing.assert_array_equal(classifier.predict(TEXTS), before)
  # validation_data=(first, second), as fit's x: it was split as (x, y) and failed after an
  # epoch, in the graph.
  embedder = ob.TextEmbedder.from_preset(tiny_dir, sequence_length=8)
  # Every task model's predict takes a batch, as Keras': one string or none is named. The
  # embedder's encode and the masked LM's fill_mask take one string, as sentence-transformers'
  # encode and a fill-mask pipeline do, and no texts.
  masked_lm = ob.MaskedLM.from_preset(tiny_pretraining_folder(tmp_path / "mlm"),
                                      sequence_length=8)
  for model in (embedder, masked_lm):
    with pytest.raises(ValueError, match=r"^predict: x is one string \('a text'\), not a list"):
      model.predict("a text")
    with pytest.raises(ValueError, match=r"^predict: x has no examples \(an empty list\)$"):
      model.predict([])
  vectors = embedder.predict(TEXTS[:2])
  assert vectors.shape == (2, embedder.backbone.hidden_size)
  np.testing.assert_allclose(embedder.encode(TEXTS[0]), vectors[0], atol=1e-6)
  assert embedder.encode([]).shape == (0, embedder.backbone.hidden_size)
  # Scores of another count than the pairs: named, not numpy's broadcast error.
  with pytest.raises(ValueError, match=r"evaluate_similarity: 2 pairs but y holds 3 scores"):
    embedder.evaluate_similarity((TEXTS[:2], TEXTS[2:4]), [0.1, 0.5, 0.9])
  texts = tf.data.Dataset.from_tensor_slices(TEXTS[:2]).batch(1)  # as TextClassifier.predict
  np.testing.assert_allclose(embedder.predict(texts), vectors, atol=1e-6)
  masked = [TEXTS[0] + " [MASK]", "[MASK] " + TEXTS[1]]
  assert masked_lm.fill_mask(masked[1], top_k=2) == masked_lm.predict(masked, top_k=2)[1]
  assert masked_lm.fill_mask([]) == []
  assert not embedder.backbone.pooler_dense.trainable  # mean pooling never reads it
  history = embedder.fit((TEXTS, TEXTS[::-1]), batch_size=4, epochs=1, verbose=0,
                         validation_data=(TEXTS, TEXTS[::-1]))
  assert np.isfinite(history.history["val_loss"][-1])


def test_weights_labels_and_datasets_as_keras_users_give_them(tiny_dir, tmp_path):
  """sample_weight and class_weight (Keras refused them beside the dataset the raw inputs
  become), a tf.data.Dataset of label names or of single examples, int label names."""
  clf = ob.TextClassifier.from_preset(tiny_dir, labels=["neg", "pos"], sequence_length=16)
  clf.compile(learning_rate=1e-2, warmup_fraction=0.0)
  weights = np.array([1.0, 0.0] * 4)  # the "pos" examples only
  kept = [t for t, w in zip(TEXTS, weights) if w]
  kept_labels = [label for label, w in zip(LABELS, weights) if w]
  # A weight of 0 drops an example: the loss of the others (one batch).
  np.testing.assert_allclose(
      clf.evaluate(TEXTS, LABELS, sample_weight=weights, return_dict=True, verbose=0)["loss"],
      clf.evaluate(kept, kept_labels, return_dict=True, verbose=0)["loss"], rtol=1e-5)
  # class_weight by label name is the same as the sample weight of each example's label.
  histories, models = [], []
  for weighting in ({"sample_weight": weights}, {"class_weight": {"neg": 0.0, "pos": 1.0}}, {}):
    model = ob.TextClassifier.from_preset(tiny_dir, labels=["neg", "pos"], sequence_length=16)
    model.compile(learning_rate=1e-2, warmup_fraction=0.0)
    histories.append(model.fit(TEXTS, LABELS, batch_size=4, epochs=2, seed=5, verbose=0,
                               **weighting).history["loss"])
    models.append(model)
  np.testing.assert_allclose(histories[1], histories[0], rtol=1e-5)
  assert abs(histories[2][0] - histories[0][0]) > 1e-3, histories  # unweighted: another loss
  # ... and by label id: the same weight of each example as by name (what fit trains with).
  np.testing.assert_array_equal(
      clf.class_weights_of_examples({1: 1.0, 0: 0.0}, TEXTS, LABELS, None), weights)
  np.testing.assert_array_equal(
      clf.class_weights_of_examples({"neg": 0.0, "pos": 1.0}, TEXTS, LABELS, None), weights)
  assert models[1].task.class_weights is None  # for that fit only: not kept by the model
  for bad, message in (({"class_weight": {"maybe": 1.0}}, r"class_weight key 'maybe' is not "
                        r"a label \(\['neg', 'pos'\]\) nor a label id 0..1"),
                       ({"sample_weight": [1.0]}, r"sample_weight: expected 8 numbers")):
    with pytest.raises(ValueError, match=message):
      clf.fit(TEXTS, LABELS, verbose=0, **bad)
  tagger = ob.TokenTagger.from_preset(tiny_dir, labels=["O", "B-X"], sequence_length=16)
  with pytest.raises(ValueError, match="fit: TokenTagger takes no class_weight"):
    tagger.fit([["a", "film"]], [["O", "B-X"]], class_weight={0: 1.0, 1: 2.0})

  # A dataset of (texts, label names) batches: mapped to ids as a list of names is.
  names = tf.data.Dataset.from_tensor_slices((TEXTS, LABELS)).batch(8)
  ids = tf.data.Dataset.from_tensor_slices((TEXTS, [["neg", "pos"].index(v)
                                                    for v in LABELS])).batch(8)
  np.testing.assert_allclose(clf.evaluate(names, return_dict=True, verbose=0)["loss"],
                             clf.evaluate(ids, return_dict=True, verbose=0)["loss"], rtol=1e-6)
  with pytest.raises(ValueError, match=r"x is a tf.data.Dataset of single examples, not of "
                     r"batches: batch it first, e.g. fit\(dataset.batch\(32\)\)"):
    clf.fit(tf.data.Dataset.from_tensor_slices((TEXTS, LABELS)))

  # validation_split: the last fraction of the examples, as Keras splits arrays.
  history = clf.fit(TEXTS, LABELS, validation_split=0.25, epochs=1, verbose=0).history
  np.testing.assert_allclose(
      history["val_loss"][-1],
      clf.evaluate(TEXTS[6:], LABELS[6:], return_dict=True, verbose=0)["loss"], rtol=1e-5)
  with pytest.raises(ValueError, match=r"validation_split=0.1 of 8 examples leaves none to "
                     r"validate on"):
    clf.fit(TEXTS, LABELS, validation_split=0.1)
  # The weights are split with the examples; the validation examples keep theirs.
  history = clf.fit(TEXTS, LABELS, sample_weight=weights + 0.5, validation_split=0.5,
                    epochs=1, verbose=0).history
  np.testing.assert_allclose(
      history["val_loss"][-1],
      clf.evaluate(TEXTS[4:], LABELS[4:], sample_weight=weights[4:] + 0.5, return_dict=True,
                   verbose=0)["loss"], rtol=1e-5)

  # Star ratings 1..5: an int y that is no rating is an error, not the id of the first one.
  stars = ob.TextClassifier.from_preset(tiny_dir, labels=[1, 2, 3, 4, 5], sequence_length=16)
  with pytest.raises(ValueError, match=r"y\[0\]: label 0 is not in labels \['1', '2', '3', "
                     r"'4', '5'\] \(whole numbers are these labels' names, not ids\)"):
    stars.fit(TEXTS[:2], [0, 5])
  # In a dataset too: ratings 1 and 5 are the first and last labels, not ids 1 and 5.
  ratings = [1, 5, 2, 4]
  np.testing.assert_allclose(
      stars.evaluate(tf.data.Dataset.from_tensor_slices((TEXTS[:4], ratings)).batch(4),
                     return_dict=True, verbose=0)["loss"],
      stars.evaluate(TEXTS[:4], ratings, return_dict=True, verbose=0)["loss"], rtol=1e-6)


def test_a_multi_label_name_holding_the_separator_is_refused_at_export(tiny_dir, tmp_path):
  """The export joins the predicted labels with "," (it served 'sci fi,a,b,drama', four
  labels to a reader, where predict_labels gave three). The API's export names its Python
  argument and keeps a folder's other files."""
  labels = ["sci fi", "a,b", "drama"]
  clf = ob.TextClassifier.from_preset(tiny_dir, labels=labels, problem_type="multi_label",
                                      multi_label_threshold=1e-6, sequence_length=16)
  with pytest.raises(ValueError, match=r"label 'a,b' holds the --label_separator ',' .*pass "
                     r"another --label_separator"):
    clf.export(tmp_path / "comma")
  assert not os.path.exists(tmp_path / "comma")
  assert clf.predict_labels(TEXTS[:1]) == [labels]
  # Into a folder of the user's: the error names the Python argument; then the export keeps
  # the user's files.
  folder = tmp_path / "bar"
  files = _user_files(folder)
  with pytest.raises(ValueError, match="pass overwrite=True") as error:
    clf.export(str(folder), label_separator="|")
  assert "--overwrite" not in str(error.value)
  clf.export(folder, label_separator="|", overwrite=True)
  _assert_kept(folder, files)
  info = json.loads((folder / "assets.extra" / "export_info.json").read_text())
  assert info["checkpoint"] == "the Python API's TextClassifier"  # no deleted temporary path
  served = tf.saved_model.load(str(folder)).signatures["serving_default"](
      text=tf.constant(TEXTS[:1]))
  assert served["predicted_labels"].numpy().tolist() == [b"sci fi|a,b|drama"]
