"""The Python API (`import official_bert as ob`) on a tiny random model folder.

Each task model is checked for: training lowers its loss, `save` -> `from_preset` (in a new
process for the classifier) gives identical outputs, and the exported SavedModel (the `export`
command's) serves what `predict` / `answer` / `encode` / `fill_mask` return.
"""

import json
import os
import subprocess
import sys

from conftest import TINY_CONFIG
from conftest import child_pythonpath
from conftest import graph_optimizer_on
from conftest import tiny_model_folder
import harness
import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  # registers the exported tokenizer's ops

import official_bert as ob
from official_bert.api import presets
from official_bert.api import question_answerer
from official_bert.api import token_tagger
from official_bert.interop import run_record
from official_bert.modeling.bert_config import BertConfig
from official_bert.modeling.encoder import BertEncoder
from official_bert.modeling.tensorflow_only import token_packing

pytestmark = pytest.mark.large  # trains or runs commands: `make test`, not `make test-fast`

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(REPO, "tests", "data")
VOCAB = os.path.join(DATA, "vocab", "uncased_vocab.txt")
TINY = BertConfig(**TINY_CONFIG)
TEXTS = ["a great and moving film", "dull , boring and far too long", "i loved every minute",
         "the worst movie of the year", "brilliant acting and a clever story",
         "a mess from start to finish", "warm , funny and smart", "painfully bad dialogue"]
LABELS = ["pos", "neg"] * 4


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
  """A model folder like a pretrained one: random encoder weights, config and vocabulary."""
  return tiny_model_folder(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="module")
def trained_classifier(tiny_dir):
  keras.utils.set_random_seed(1)
  clf = ob.TextClassifier.from_preset(tiny_dir, labels=["neg", "pos"], sequence_length=16)
  # A random tiny encoder gives every text nearly the same [CLS] vector: it takes a large
  # learning rate to pull them apart in a few steps. With fit's seed (the example order,
  # dropout and the new head's draw), 1e-2 and 16 epochs reach a loss of 0.01-0.12 for seeds
  # 2-4 (seed 3: 0.011); seeds 1 and 5 stay near ln 2 or halfway.
  clf.compile(learning_rate=1e-2, warmup_fraction=0.0)
  history = clf.fit(TEXTS, LABELS, batch_size=4, epochs=16, seed=3, verbose=0)
  return clf, history.history["loss"]


# One fresh process for both checks that need one: what `import official_bert` imports and
# registers, then the saved classifier's predictions there (`_FRESH_CODE`).
_FRESH_CODE = """
import json, sys
import official_bert as ob
imported_tensorflow = 'tensorflow' in sys.modules
names = sorted(ob.__all__)
import tensorflow, keras
registered = sorted(keras.saving.get_custom_objects())
m = ob.TextClassifier.from_preset(sys.argv[1])
print(json.dumps([imported_tensorflow, names, registered, m.labels,
                  m.predict(json.loads(sys.argv[2])).tolist()]))
"""


@pytest.fixture(scope="module")
def fresh_process(trained_classifier, tmp_path_factory):
  """The trained classifier saved, and a new process's `_FRESH_CODE` on it: (folder,
  {imported_tensorflow, names, registered, labels, probabilities})."""
  saved = str(tmp_path_factory.mktemp("fresh") / "saved")
  trained_classifier[0].save(saved)
  out = subprocess.run([sys.executable, "-c", _FRESH_CODE, saved, json.dumps(TEXTS)], cwd=REPO,
                       capture_output=True, text=True, check=True,
                       env=dict(os.environ, PYTHONPATH=child_pythonpath(REPO))).stdout
  values = json.loads(out.strip().splitlines()[-1])
  return saved, dict(zip(("imported_tensorflow", "names", "registered", "labels",
                          "probabilities"), values))


def test_import_is_cheap_and_names_resolve(fresh_process):
  """Importing the package imports no TensorFlow; Keras, imported later (after TensorFlow,
  which looks keras up first with importlib.util.find_spec), knows the API's classes at once
  (`keras.saving.load_model` of a `.keras` file needs them registered)."""
  fresh = fresh_process[1]
  assert not fresh["imported_tensorflow"]
  assert "TextClassifier" in fresh["names"] and "TokenTagger" in fresh["names"]
  for name in ("TextClassifier", "TokenTagger", "QuestionAnswerer", "TextEmbedder", "MaskedLM",
               "Backbone", "Preprocessor"):
    assert f"official_bert>{name}" in fresh["registered"], fresh["registered"]
  assert ob.Backbone.__name__ == "Backbone"
  with pytest.raises(AttributeError):
    _ = ob.NoSuchModel


def test_preprocessor_matches_the_export_packing(tiny_dir, tmp_path):
  pre = ob.Preprocessor.from_preset(tiny_dir, sequence_length=12)
  single = pre(["Hello world", "a b"])
  pair = pre((["Hello world"], ["a [MASK] b"]))
  vocab = {t: i for i, t in enumerate(pre.vocabulary)}
  assert single["input_word_ids"].shape == (2, 12)
  ids = pair["input_word_ids"].numpy()[0].tolist()
  assert ids[:9] == [vocab[t] for t in ("[CLS]", "hello", "world", "[SEP]", "a", "[MASK]", "b",
                                        "[SEP]")] + [0]
  assert pair["input_type_ids"].numpy()[0].tolist()[:9] == [0, 0, 0, 0, 1, 1, 1, 1, 0]
  with pytest.raises(ValueError, match=r"x\[1\] is int"):
    pre(["ok", 3])
  # The layer saves as a SavedModel (its traced tokenizer graphs included) and packs the same.
  tf.saved_model.save(pre, str(tmp_path / "preprocessor"))
  loaded = tf.saved_model.load(str(tmp_path / "preprocessor"))
  again = loaded._traced_pair(tf.constant(["Hello world"]), tf.constant(["a [MASK] b"]))  # noqa: SLF001
  for name, value in pair.items():
    np.testing.assert_array_equal(again[name].numpy(), value.numpy(), err_msg=name)


def test_classifier_fits_saves_and_exports(trained_classifier, fresh_process, tmp_path):
  clf, losses = trained_classifier
  assert losses[-1] < losses[0] * 0.7, losses
  probabilities = clf.predict(TEXTS)
  assert probabilities.shape == (8, 2)
  np.testing.assert_allclose(probabilities.sum(-1), 1.0, rtol=1e-5)
  assert clf.predict_labels(TEXTS) == [["neg", "pos"][i] for i in probabilities.argmax(-1)]
  assert clf.backbone is clf.network.encoder and clf.preprocessor.sequence_length == 16
  results = clf.evaluate(TEXTS, LABELS, return_dict=True, verbose=0)  # run_classifier's metric
  assert results["accuracy"] == pytest.approx(np.mean(
      probabilities.argmax(-1) == [["neg", "pos"].index(label) for label in LABELS]))

  fresh = fresh_process[1]  # the folder `save` wrote, read by a new process
  assert fresh["labels"] == ["neg", "pos"]
  again = fresh["probabilities"]
  with graph_optimizer_on():  # as in that process
    clf.make_predict_function(force=True)  # traced inside, with that process's blocks
    probabilities = clf.predict(TEXTS)
  np.testing.assert_array_equal(np.float32(again), probabilities)

  clf.export(str(tmp_path / "export"))
  served = tf.saved_model.load(str(tmp_path / "export")).signatures["serving_default"](
      text=tf.constant(TEXTS))
  np.testing.assert_allclose(served["probabilities"].numpy(), probabilities, atol=1e-5)
  assert [s.decode() for s in served["predicted_labels"].numpy()] == clf.predict_labels(TEXTS)


def test_labels_are_read_as_meant(tiny_dir, tmp_path):
  clf = ob.TextClassifier.from_preset(tiny_dir, labels=[1, 0], sequence_length=8)
  assert clf.encode_labels([1, 0, "0"], 3).tolist() == [0, 1, 1]  # names, not ids
  with pytest.raises(ValueError, match=r"y\[0\] is 0.5"):
    ob.TextClassifier.from_preset(tiny_dir, num_classes=2, sequence_length=8).encode_labels(
        [0.5], 1)
  multi = ob.TextClassifier.from_preset(tiny_dir, labels=["a", "b", "c"],
                                        problem_type="multi_label", sequence_length=8)
  assert multi.encode_labels([[1, 0, 1], ["b"], [2]], 3).tolist() == [
      [1, 0, 1], [0, 1, 0], [0, 0, 1]]
  # run_classifier on STS-B records one unnamed output and no problem type: regression.
  stsb = str(tmp_path / "stsb")
  presets.save(stsb, ob.TextClassifier.from_preset(tiny_dir, problem_type="regression",
                                                   sequence_length=8).network,
               ob.Preprocessor(VOCAB), run_record.RunRecord.of("classifier", num_labels=1))
  assert ob.TextClassifier.from_preset(stsb).problem_type == "regression"
  with pytest.raises(ValueError, match="sequence_length=600 is more than the model's "
                     "max_position_embeddings=128"):
    ob.TextClassifier.from_preset(tiny_dir, num_classes=2, sequence_length=600)


def test_a_tf1_folder_without_case_settings_reads_its_vocabulary(tmp_path):
  cased_vocab = os.path.join(DATA, "vocab", "cased_vocab.txt")
  encoder = BertEncoder.from_bert_config(TINY, name="encoder")
  encoder.build()
  path = str(tmp_path / "cased")
  presets.save(path, encoder, ob.Preprocessor(cased_vocab, lower_case=False))
  for name in ("tokenizer_config.json", "run_settings.json"):  # as google's TF1 folders
    os.remove(os.path.join(path, name))
  assert ob.Preprocessor.from_preset(path).lower_case is False


def test_classifier_errors_name_the_thing(tiny_dir):
  clf = ob.TextClassifier.from_preset(tiny_dir, labels=["neg", "pos"], sequence_length=16)
  with pytest.raises(ValueError, match=r"y\[1\]: label 'meh' is not in labels"):
    clf.fit(TEXTS[:2], ["pos", "meh"], verbose=0)
  with pytest.raises(ValueError, match="y has 1 labels for 2 texts"):
    clf.fit(TEXTS[:2], ["pos"], verbose=0)
  with pytest.raises(FileNotFoundError, match="no model at /no/such/model"):
    ob.TextClassifier.from_preset("/no/such/model", num_classes=2)
  with pytest.raises(ValueError, match=r"is a pretrained model .*pass labels=\[...\] or "
                     r"num_classes="):
    ob.TextClassifier.from_preset(tiny_dir)


def test_classifier_pairs_multi_label_and_regression(tiny_dir):
  pairs = (TEXTS[:4], TEXTS[4:])
  multi = ob.TextClassifier.from_preset(tiny_dir, labels=["a", "b", "c"],
                                        problem_type="multi_label", sequence_length=24)
  multi.fit(pairs, [["a"], ["b", "c"], [], ["a", "c"]], batch_size=2, verbose=0)
  probabilities = multi.predict(pairs)
  assert probabilities.shape == (4, 3) and not np.allclose(probabilities.sum(-1), 1.0)
  assert all(set(row) <= {"a", "b", "c"} for row in multi.predict_labels(pairs))
  regression = ob.TextClassifier.from_preset(tiny_dir, problem_type="regression",
                                             sequence_length=16)
  regression.compile(learning_rate=1e-3, warmup_fraction=0.0)
  history = regression.fit(TEXTS, np.linspace(0, 5, 8), batch_size=4, epochs=4, verbose=0)
  assert history.history["loss"][-1] < history.history["loss"][0]
  assert regression.predict(TEXTS).shape == (8,)


def test_classifier_long_texts_in_windows(tiny_dir, tmp_path):
  """doc_stride (run_classifier's --doc_stride): at sequence_length 6 a window holds 4 pieces;
  a 6-piece text is two windows, starting at pieces 0 and 2. fit trains each window with its
  text's label; predict gives each text's mean; the setting survives save and `.keras`."""
  clf = ob.TextClassifier.from_preset(tiny_dir, labels=["neg", "pos"], sequence_length=6,
                                      doc_stride=2)
  long, short = "i loved every minute of it", "dull film"
  features, labels = next(iter(clf.make_dataset([long, short], ["pos", "neg"], 3)))
  assert labels.numpy().tolist() == [1, 1, 0] and features["input_word_ids"].shape[0] == 3
  # batch_size counts windows, as run_classifier's batches of window records
  assert [int(y.shape[0]) for _, y in clf.make_dataset([long, short], ["pos", "neg"], 2)] == [
      2, 1]
  clf.fit(TEXTS, LABELS, batch_size=4, verbose=0)
  got, logits = clf.predict([long, short]), clf.predict_logits([long, short])
  clf.doc_stride = 0  # the same weights on each window's text
  windows = ["i loved every minute", "every minute of it", short]
  parts, part_logits = clf.predict(windows), clf.predict_logits(windows)
  clf.doc_stride = 2
  np.testing.assert_allclose(got, [parts[:2].mean(0), parts[2]], atol=1e-6)
  np.testing.assert_allclose(logits, [part_logits[:2].mean(0), part_logits[2]], atol=1e-6)
  harness.run_save_load_test(clf, tmp_path, lambda m: (m.doc_stride, m.predict([long, short])))


def test_compile_with_keras_arguments_and_a_dataset(tiny_dir):
  clf = ob.TextClassifier.from_preset(tiny_dir, num_classes=2, sequence_length=16)
  clf.compile(optimizer=keras.optimizers.SGD(0.1),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"])
  dataset = tf.data.Dataset.from_tensor_slices((TEXTS, [0, 1] * 4)).batch(4)
  head = clf.network.projection.output_weights.numpy()
  history = clf.fit(dataset, epochs=3, verbose=0)
  assert isinstance(clf.optimizer, keras.optimizers.SGD)
  assert int(clf.optimizer.iterations) == 6 and len(history.history["accuracy"]) == 3
  assert np.abs(clf.network.projection.output_weights.numpy() - head).max() > 0
  # Keras' loss on the same batch equals the task's cross-entropy (the compiled one here).
  features = clf.preprocessor(TEXTS[:4])
  logits = clf(features).numpy()
  expected = np.mean(np.log(np.exp(logits).sum(-1)) - logits[np.arange(4), [0, 1, 0, 1]])
  np.testing.assert_allclose(clf.evaluate(TEXTS[:4], [0, 1, 0, 1], verbose=0)[0], expected,
                             rtol=1e-5)


def test_a_second_fit_keeps_the_traced_evaluate_and_predict_and_trains_as_a_recompile(
    tiny_dir):
  """Each fit takes a fresh optimizer (its schedule spans that fit's steps), without
  dropping the evaluate and predict steps traced before, which do not use it; the weights
  are those of a model compiled again before its second fit, and so is the compile config
  Keras saves (a Keras argument, steps_per_execution, makes it Keras' own)."""
  settings = dict(learning_rate=1e-2, warmup_fraction=0.25, steps_per_execution=1)
  clf = ob.TextClassifier.from_preset(tiny_dir, labels=["neg", "pos"], sequence_length=16)
  clf.compile(**settings)
  clf.fit(TEXTS, LABELS, batch_size=4, epochs=2, seed=3, verbose=0)
  after_first_fit = [v.numpy() for v in clf.trainable_variables]
  weights = []
  for recompile in (False, True):  # the same model: after the first fit, again
    first = clf.optimizer
    if recompile:
      for variable, value in zip(clf.trainable_variables, after_first_fit):
        variable.assign(value)
      clf.compile(**settings)
    else:
      before = clf.evaluate(TEXTS, LABELS, return_dict=True, verbose=0)["loss"]
      probabilities = clf.predict(TEXTS)
      traced = (clf.test_function, clf.predict_function)
    clf.fit(TEXTS[:4], LABELS[:4], batch_size=2, epochs=1, seed=4, verbose=0)
    assert clf.optimizer is not first and int(clf.optimizer.iterations) == 2
    schedule = clf.optimizer._learning_rate  # pylint: disable=protected-access
    assert schedule.num_train_steps == 2  # this fit's steps
    saved = clf.get_compile_config()["optimizer"]["config"]["learning_rate"]["config"]
    assert saved["num_train_steps"] == 2 and saved["peak_lr"] == 1e-2, saved
    if not recompile:
      after = clf.evaluate(TEXTS, LABELS, return_dict=True, verbose=0)["loss"]
      assert after != before and not np.allclose(clf.predict(TEXTS), probabilities)
      assert (clf.test_function, clf.predict_function) == traced
    weights.append([v.numpy() for v in clf.trainable_variables])
  for kept, recompiled in zip(*weights):
    np.testing.assert_allclose(kept, recompiled, atol=1e-6)


def test_words_with_offsets_and_entities():
  text = "Ms. Ana-María Ruiz visited Köln, 東京 today."
  assert [w for w, _, _ in token_tagger.words_with_offsets("co\u00adop x")] == ["co\u00adop", "x"]
  words = token_tagger.words_with_offsets(text)
  assert [w for w, _, _ in words] == ["Ms.", "Ana-María", "Ruiz", "visited", "Köln", ",", "東",
                                      "京", "today", "."]  # CoNLL's words
  assert all(text[s:e] == w for w, s, e in words)
  tags = ["O", "B-PER", "I-PER", "O", "S-LOC", "O", "B-LOC", "E-LOC", "O", "O"]
  found = token_tagger.entities_in_text(text, words, tags)
  assert found == [{"type": "PER", "text": "Ana-María Ruiz", "start": 4, "end": 18},
                   {"type": "LOC", "text": "Köln", "start": 27, "end": 31},
                   {"type": "LOC", "text": "東京", "start": 33, "end": 35}]


def test_tagger_fits_predicts_entities_and_saves(tiny_dir, tmp_path):
  labels = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
  x = [["John", "Smith", "lives", "in", "Paris"], ["Mary", "went", "to", "Rome"],
       ["we", "met", "Anna", "in", "New", "York"], ["Paris", "is", "big"]] * 2
  y = [["B-PER", "I-PER", "O", "O", "B-LOC"], ["B-PER", "O", "O", "B-LOC"],
       ["O", "O", "B-PER", "O", "B-LOC", "I-LOC"], ["B-LOC", "O", "O"]] * 2
  keras.utils.set_random_seed(2)
  tagger = ob.TokenTagger.from_preset(tiny_dir, labels=labels, sequence_length=16)
  tagger.compile(learning_rate=3e-3, warmup_fraction=0.0)
  history = tagger.fit(x, y, batch_size=4, epochs=15, verbose=0)
  assert history.history["loss"][-1] < history.history["loss"][0] * 0.5
  assert tagger.predict_tags(x[:4]) == y[:4]
  texts = ["John Smith lives in Paris.", "  Mary went to Rome"]
  for text, found in zip(texts, tagger.predict_entities(texts)):
    assert found, text
    for entity in found:
      assert text[entity["start"]:entity["end"]] == entity["text"]
  with pytest.raises(ValueError, match=r"tag\(s\) \['B-ORG'\] not in labels"):
    tagger.fit([["a"]], [["B-ORG"]], verbose=0)

  saved = harness.run_save_load_test(tagger, tmp_path, lambda m: m.predict(x[:4]))
  assert ob.TokenTagger.from_preset(saved).labels == labels  # (a fresh process: the classifier's)
  with pytest.raises(ValueError, match="was trained with labels"):
    ob.TokenTagger.from_preset(saved, labels=labels[::-1])
  # Its CLI export serves what predict gives: test_folder_interchange.py.


def test_question_answerer_fits_answers_and_exports(tiny_dir, tmp_path, monkeypatch):
  context = ("The Normans were the people who in the 10th and 11th centuries gave their name "
             "to Normandy, a region in France. They were descended from Norse raiders. ") * 3
  examples = [{"question": "Who gave their name to Normandy?", "context": context,
               "answers": [{"text": "The Normans", "answer_start": 0}]},
              {"question": "Where is Normandy?", "context": context,
               "answers": [{"text": "France", "answer_start": context.index("France")}]}] * 4
  keras.utils.set_random_seed(3)
  qa = ob.QuestionAnswerer.from_preset(tiny_dir, sequence_length=48, doc_stride=16,
                                       max_query_length=12)
  qa.compile(learning_rate=1e-3, warmup_fraction=0.0)
  # validation_data as x: example dicts (two: not an (x, y) pair) or SQuAD JSON file(s).
  history = qa.fit(examples, batch_size=4, epochs=3, verbose=0, validation_data=examples[:2])
  assert history.history["loss"][-1] < history.history["loss"][0]
  assert len(history.history["val_loss"]) == 3
  assert 0.0 <= history.history["span_accuracy"][-1] <= 1.0  # run_squad's training metrics
  answer = qa.answer("Where is Normandy?", context)
  assert answer["text"] == context[answer["start"]:answer["end"]]
  with pytest.raises(ValueError, match=r"answer\(question, context\)"):
    qa.predict(["Where is Normandy?"])
  assert set(answer) == {"text", "start", "end", "score"}

  # The n-best ranks padded positions' logits too: squad's steps never pack the real tokens.
  monkeypatch.setattr(token_packing, "TokenPacking", None)
  from_dicts = qa.evaluate(examples[:4], batch_size=2, return_dict=True, verbose=0)
  # ... or a SQuAD JSON file, as the docs' `qa.fit("train-v1.1.json")`.
  squad_file = str(tmp_path / "train.json")
  question_answerer.examples_to_squad_json(examples[:4], squad_file)
  from_file = qa.evaluate(squad_file, batch_size=2, return_dict=True, verbose=0)
  assert from_file["loss"] == pytest.approx(from_dicts["loss"], rel=1e-6)
  monkeypatch.undo()
  saved = harness.run_save_load_test(qa, tmp_path,
                                     lambda m: m.answer("Where is Normandy?", context))
  assert ob.QuestionAnswerer.from_preset(saved).options["doc_stride"] == 16
  # The API's own export (the CLI export of a saved folder: tests/tasks/test_folder_interchange).
  qa.export(str(tmp_path / "api_export"))
  served = tf.saved_model.load(str(tmp_path / "api_export")).signatures["serving_default"](
      question=tf.constant(["Where is Normandy?"]), context=tf.constant([context]))
  assert served["answer_text"].numpy()[0].decode() == answer["text"]
  assert int(served["answer_start"][0]) == answer["start"]
  np.testing.assert_allclose(float(served["score"][0]), answer["score"], atol=1e-4)


def test_question_answerer_on_a_short_model_and_its_example_dicts(tmp_path):
  """A model of 64 positions answers with the defaults (the question gets half the sequence,
  not the original's 64 pieces, which leave no room for context); example dicts take SQuAD's
  answers or Hugging Face datasets' and name a key they do not read."""
  encoder = BertEncoder.from_bert_config(
      BertConfig(**dict(TINY_CONFIG, max_position_embeddings=64)), name="encoder")
  encoder.build()
  folder = str(tmp_path / "short")
  presets.save(folder, encoder, ob.Preprocessor(VOCAB))
  qa = ob.QuestionAnswerer.from_preset(folder)
  assert qa.preprocessor.sequence_length == 64 and qa.options["max_query_length"] == 32
  context = "The Normans gave their name to Normandy, a region in France. " * 8
  answer = qa.answer("Where is Normandy?", context)
  assert answer["text"] == context[answer["start"]:answer["end"]] and answer["text"]
  with pytest.raises(ValueError, match=r"sequence_length=64 must be more than "
                     r"max_query_length=64"):
    ob.QuestionAnswerer.from_preset(folder, max_query_length=64)

  path = str(tmp_path / "examples.json")
  question_answerer.examples_to_squad_json(
      [{"question": "Where?", "context": context,
        "answers": {"text": ["France"], "answer_start": [context.index("France")]}}], path)
  with open(path, encoding="utf-8") as f:
    qas = json.load(f)["data"][0]["paragraphs"][0]["qas"]
  assert qas[0]["answers"] == [{"text": "France", "answer_start": context.index("France")}]
  # Hugging Face squad_v2's rows: a title, and no answers for an unanswerable question.
  question_answerer.examples_to_squad_json(
      [{"id": "q", "title": "Normans", "question": "Who?", "context": context,
        "answers": {"text": [], "answer_start": []}}], path, version_2_with_negative=True)
  with open(path, encoding="utf-8") as f:
    qas = json.load(f)["data"][0]["paragraphs"][0]["qas"]
  assert qas[0]["is_impossible"] is True and qas[0]["answers"] == []
  with pytest.raises(ValueError, match=r"example 0 has key\(s\) \['answer_start', "
                     r"'answer_text'\]"):
    qa.fit([{"question": "Where?", "context": context, "answer_text": "France",
             "answer_start": 51}])


def test_text_embedder_equals_the_encoder_export(tiny_dir, tmp_path):
  embedder = ob.TextEmbedder.from_preset(tiny_dir, sequence_length=16)
  vectors = embedder.encode(TEXTS, batch_size=3)
  assert vectors.shape == (8, 32)
  np.testing.assert_array_equal(embedder.predict(TEXTS, batch_size=3), vectors)
  np.testing.assert_allclose(np.linalg.norm(vectors, axis=-1), 1.0, rtol=1e-5)
  # Its folder, read back and exported by the command with no flag but --checkpoint and
  # --export_dir (mean pooling, normalized: the run record's). (The .keras round trip of an
  # embedder: test_text_embedder.py's, with cls pooling.)
  saved = harness.run_save_load_test(embedder, tmp_path, lambda m: m.encode(TEXTS),
                                     keras_format=False)
  served = harness.run_export_test(saved, tmp_path / "export", "serving_default",
                                   {"text": TEXTS}, {"sentence_embedding": vectors})
  embedder.export(str(tmp_path / "api_export"))  # the API's own export
  api_served = tf.saved_model.load(str(tmp_path / "api_export")).signatures[
      "serving_default"](text=tf.constant(TEXTS))
  np.testing.assert_allclose(api_served["mean_pooled_output"].numpy(), vectors, atol=1e-5)
  cls = ob.TextEmbedder.from_preset(tiny_dir, pooling="cls", normalize=False,
                                    sequence_length=16).encode(TEXTS[:2])
  np.testing.assert_allclose(cls, served["sequence_output"][:2, 0], atol=1e-5)


def test_masked_lm_needs_a_masked_lm_head(tmp_path):
  # (fit, fill_mask, save and the export: tests/api/test_masked_lm.py)
  with pytest.raises(ValueError, match="no masked-LM head"):
    ob.MaskedLM.from_preset(_encoder_only(tmp_path))


def _encoder_only(tmp_path):
  encoder = BertEncoder.from_bert_config(TINY, name="encoder")
  encoder.build()
  path = str(tmp_path / "encoder_only")
  presets.save(path, encoder, ob.Preprocessor(VOCAB))
  return path


def test_own_model_on_backbone_and_lora(tiny_dir):
  keras.utils.set_random_seed(1)  # the new head's and the adapters' draws
  pre = ob.Preprocessor.from_preset(tiny_dir, sequence_length=16)
  backbone = ob.Backbone.from_preset(tiny_dir)
  inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name)
            for name in ("input_word_ids", "input_mask", "input_type_ids")}
  logits = keras.layers.Dense(2)(backbone(inputs)["pooled_output"])
  model = keras.Model(inputs, logits)
  model.compile(optimizer=keras.optimizers.Adam(1e-2),
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  data = tf.data.Dataset.from_tensor_slices((TEXTS, [0, 1] * 4)).batch(4).map(
      lambda x, y: (pre(x), y))
  original = [v.numpy().copy() for v in backbone.weights]
  backbone.enable_lora(rank=8)
  trainable = sum(int(np.prod(v.shape)) for v in model.trainable_weights)
  total = sum(int(np.prod(v.shape)) for v in model.weights)
  assert trainable / total < 0.02
  # The loss on the training texts without dropout (an epoch's mean with dropout, on two
  # batches of a random tiny encoder, is too noisy to compare): 0.693 -> 0.654 at this seed.
  before = model.evaluate(data, verbose=0)
  model.fit(data, epochs=10, verbose=0)
  assert model.evaluate(data, verbose=0) < before - 0.01
  lora = [v for v in backbone.weights if "lora" in v.path]
  assert lora and any(np.any(v.numpy() != 0) for v in lora)
  frozen = [v for v in backbone.weights if "lora" not in v.path]
  for before, variable in zip(original, frozen):
    np.testing.assert_array_equal(variable.numpy(), before)


def test_keras_callbacks_formats_and_strategies(tiny_dir, tmp_path):
  """EarlyStopping on validation data, ModelCheckpoint's .keras files (load_model), and
  BackupAndRestore work; fit runs in a strategy scope; a pair given to a model trained on
  single texts is refused before training."""
  strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
  with strategy.scope():
    clf = ob.TextClassifier.from_preset(tiny_dir, labels=["neg", "pos"], sequence_length=16)
  checkpoint = str(tmp_path / "best.keras")
  history = clf.fit(TEXTS, LABELS, batch_size=4, epochs=3, validation_data=(TEXTS, LABELS),
                    verbose=0, callbacks=[
                        keras.callbacks.EarlyStopping(monitor="val_loss", patience=1),
                        keras.callbacks.ModelCheckpoint(checkpoint, monitor="val_loss"),
                        keras.callbacks.BackupAndRestore(str(tmp_path / "backup"))])
  assert "val_accuracy" in history.history
  loaded = keras.saving.load_model(checkpoint)
  assert isinstance(loaded, ob.TextClassifier) and loaded.labels == ["neg", "pos"]
  assert loaded.compiled and loaded._optimizer_settings["learning_rate"] == 5e-5  # noqa: SLF001
  # The last epoch's file: the weights fit ended with.
  np.testing.assert_allclose(loaded.predict(TEXTS), clf.predict(TEXTS), atol=1e-6)
  with pytest.raises(ValueError, match="trained on single texts"):
    clf.predict((TEXTS, TEXTS))


def test_mixed_precision_fit(tiny_dir):
  keras.mixed_precision.set_global_policy("mixed_float16")
  try:
    clf = ob.TextClassifier.from_preset(tiny_dir, num_classes=2, sequence_length=16)
    history = clf.fit(TEXTS, [0, 1] * 4, batch_size=4, epochs=1, verbose=0)
  finally:
    keras.mixed_precision.set_global_policy("float32")
  assert clf.backbone.compute_dtype == "float16"
  assert np.isfinite(history.history["loss"][0])
  assert clf.predict(TEXTS).dtype == np.float32


def test_saved_folder_serves_the_commands(trained_classifier, fresh_process, tmp_path):
  """`save(path)` is a command's OUTPUT_DIR: `export --checkpoint=path` needs no other model
  flag, and `--init_checkpoint=path` (the commands' warm start) loads the same weights. (The
  folder `fresh_process` saved, which a new process's `from_preset` predicts from:
  test_classifier_fits_saves_and_exports; a `.keras` file of a fitted classifier:
  test_keras_callbacks_formats_and_strategies.)"""
  from official_bert.interop import checkpointing  # pylint: disable=import-outside-toplevel
  from official_bert.modeling.finetuning_models import BertClassifier  # pylint: disable=import-outside-toplevel
  clf, _ = trained_classifier
  saved = fresh_process[0]
  harness.run_export_test(saved, tmp_path / "export", "serving_default", {"text": TEXTS},
                          {"probabilities": clf.predict(TEXTS),
                           "predicted_labels": clf.predict_labels(TEXTS)})
  warm = BertClassifier(BertEncoder.from_bert_config(TINY), 2)
  warm.build()
  checkpointing.warm_start(warm, saved)
  np.testing.assert_array_equal(warm.projection.output_weights.numpy(),
                                clf.network.projection.output_weights.numpy())


def _fit_on(kind, strategy, texts, start=None):
  """A tiny classifier's or tagger's weights before and after `fit` under `strategy` (one
  layer: what the replicas share does not depend on the depth)."""
  config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1,
                      num_attention_heads=2, intermediate_size=64, max_position_embeddings=64,
                      hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
  words = [t.split() for t in texts]
  tags = [["B-X"] + ["O"] * (len(w) - 1) for w in words]
  with strategy.scope():
    backbone = ob.Backbone.from_bert_config(config)
    pre = ob.Preprocessor(VOCAB, True, 16)
    model = (ob.TextClassifier(backbone, pre, num_classes=2) if kind == "classifier"
             else ob.TokenTagger(backbone, pre, labels=["O", "B-X"]))
    model.network.dropout.rate = 0.0
    model.build()
  if start is not None:
    for v, value in zip(model.network.weights, start):
      v.assign(value)
  start = [v.numpy() for v in model.network.weights]
  # clip_norm 0.01: every step clips, so per-replica clipping would show.
  model.compile(learning_rate=1e-3, warmup_fraction=0.0,
                clip_norm=0.01 if kind == "classifier" else 0.0)
  x, y = (texts, [0, 1] * 4) if kind == "classifier" else (words, tags)
  model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
  return start, [v.numpy() for v in model.network.weights]


def test_two_replicas_take_the_one_device_step():
  """With 2 replicas (MirroredStrategy on the test process's 2 logical CPUs, conftest) `fit`
  takes the one-device step: the loss normalizer is global (a tagger's labeled tokens differ
  per replica) and the summed gradient is clipped, as in the commands' loop."""
  texts = TEXTS[:4] + ["a b c d e f g h i j", "x", "one two three", "the end of it all"]
  mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
  for kind in ("classifier", "tagger"):
    keras.utils.set_random_seed(0)
    start, one = _fit_on(kind, tf.distribute.get_strategy(), texts)
    _, two = _fit_on(kind, mirrored, texts, start)
    moved = max(float(np.abs(a - s).max()) for a, s in zip(one, start))
    difference = max(float(np.abs(a - b).max()) for a, b in zip(one, two))
    assert moved > 1e-4, kind
    assert difference < 1e-3 * moved, (kind, moved, difference)


def test_preprocessor_and_backbone_compose_in_a_functional_model_on_strings(tiny_dir):
  """keras-hub's way: string in, the preprocessor's three outputs into the backbone. Each
  output is its own tensor in the graph, so word ids reach input_word_ids (they once reached
  every input, and fit failed in the type-id embedding)."""
  keras.utils.set_random_seed(0)
  x = keras.Input(shape=(), dtype="string")
  preprocessor = ob.Preprocessor.from_preset(tiny_dir, sequence_length=16)
  backbone = ob.Backbone.from_preset(tiny_dir)
  logits = keras.layers.Dense(2)(backbone(preprocessor(x))["pooled_output"])
  model = keras.Model(x, logits)
  model.compile(keras.optimizers.Adam(1e-3),
                keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  texts, labels = tf.constant(TEXTS), np.array([1, 0] * 4)
  history = model.fit(texts, labels, batch_size=4, epochs=3, verbose=0)
  assert history.history["loss"][-1] < history.history["loss"][0]
  inputs = preprocessor(texts)
  expected = model.layers[-1](backbone(inputs)["pooled_output"])
  np.testing.assert_allclose(model.predict(texts, verbose=0), expected.numpy(), atol=1e-5)


def test_a_loaded_model_saved_as_keras_keeps_every_weight(tiny_dir, tmp_path):
  """`from_preset` builds the network without calling the model; its `.keras` file must still
  rebuild the head before loading, not draw a new one (as it did: a folder's trained head was
  lost between `from_preset` and `keras.saving.load_model`)."""
  from conftest import tiny_pretraining_folder  # pylint: disable=g-import-not-at-top
  pretraining = tiny_pretraining_folder(tmp_path / "pretraining")
  for cls, folder, kwargs in ((ob.TextClassifier, tiny_dir, {"num_classes": 3}),
                              (ob.TokenTagger, tiny_dir, {"labels": ["O", "B-X", "I-X"]}),
                              (ob.QuestionAnswerer, tiny_dir, {"sequence_length": 96}),
                              (ob.TextEmbedder, tiny_dir, {}),
                              (ob.MaskedLM, pretraining, {})):
    model = cls.from_preset(folder, **kwargs)
    path = str(tmp_path / f"{cls.__name__}.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.built and len(loaded.weights) == len(model.weights), cls.__name__
    for before, after in zip(model.weights, loaded.weights):
      np.testing.assert_array_equal(keras.ops.convert_to_numpy(after),
                                    keras.ops.convert_to_numpy(before), err_msg=before.path)
