"""`ob.TokenTagger` for a newcomer (issue 36): entity scores from `evaluate` (run_ner's
scorer), CoNLL-2003-style raw-text words, pre-split word lists in `predict_entities`, clear
errors for other inputs, and labels that come back as they went in. A tiny random model."""

import shutil

from conftest import tiny_model_folder
import keras
import numpy as np
import pandas as pd
import pytest

import official_bert as ob
from official_bert.api import token_tagger
from official_bert.interop import model_files
from official_bert.interop import run_record
from official_bert.tasks import metrics

pytestmark = pytest.mark.large  # trains or runs commands: `make test`, not `make test-fast`

LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
X = [["John", "Smith", "lives", "in", "Paris"], ["Mary", "went", "to", "Rome"],
     ["we", "met", "Anna", "in", "New", "York"], ["Paris", "is", "big"]] * 2
Y = [["B-PER", "I-PER", "O", "O", "B-LOC"], ["B-PER", "O", "O", "B-LOC"],
     ["O", "O", "B-PER", "O", "B-LOC", "I-LOC"], ["B-LOC", "O", "O"]] * 2


def _words(text):
  words = token_tagger.words_with_offsets(text)
  assert all(text[start:end] == word for word, start, end in words), words
  return [word for word, _, _ in words]


@pytest.mark.parametrize("text, words", [
    ("Mr. O'Neil's firm, Acme Inc., paid US$1,000.5 to the U.S. on Aug. 5.",
     ["Mr.", "O'Neil", "'s", "firm", ",", "Acme", "Inc.", ",", "paid", "US$", "1,000.5", "to",
      "the", "U.S.", "on", "Aug.", "5", "."]),
    ("\"Don't,\" D'Alema told the U.N. (at 10:30 a.m.) in St. Louis...",
     ['"', "Do", "n't", ",", '"', "D'Alema", "told", "the", "U.N.", "(", "at", "10:30", "a.m.",
      ")", "in", "St.", "Louis", "..."]),
    ("The U.S.-led talks -- then-U.S. envoy J. Smith -- won't start; they're 6-4, 1/2.",
     ["The", "U.S.-led", "talks", "--", "then-U.S.", "envoy", "J.", "Smith", "--", "wo", "n't",
      "start", ";", "they", "'re", "6-4", ",", "1/2", "."]),
    ("Germany's Bundesbank (AT&T, C$100, .500, +44) said: I'm fine.",
     ["Germany", "'s", "Bundesbank", "(", "AT&T", ",", "C$", "100", ",", ".500", ",", "+44",
      ")", "said", ":", "I", "'m", "fine", "."]),
    ("1. Michael Schumacher ( Germany ) Ferrari\n2. Jean Alesi finished 2.",
     ["1.", "Michael", "Schumacher", "(", "Germany", ")", "Ferrari", "2.", "Jean", "Alesi",
      "finished", "2", "."]),
    ("Ms. Ana-María Ruiz visited Köln, 東京 today. rock'n'roll, players' don\u2019t co\u00adop",
     ["Ms.", "Ana-María", "Ruiz", "visited", "Köln", ",", "東", "京", "today", ".",
      "rock'n'roll", ",", "players", "'", "do", "n\u2019t", "co\u00adop"]),
])
def test_raw_text_words_are_conll_tokens(text, words):
  assert _words(text) == words


def test_entities_keep_conll_words_whole():
  text = "Mr. O'Neil met Brian O'Brien of the U.S. Army in St. Louis."
  words = token_tagger.words_with_offsets(text)
  tags = {"O'Neil": "B-PER", "Brian": "B-PER", "O'Brien": "I-PER", "U.S.": "B-ORG",
          "Army": "I-ORG", "St.": "B-LOC", "Louis": "I-LOC"}
  found = token_tagger.entities_in_text(text, words, [tags.get(w, "O") for w, _, _ in words])
  assert [(e["type"], e["text"]) for e in found] == [
      ("PER", "O'Neil"), ("PER", "Brian O'Brien"), ("ORG", "U.S. Army"), ("LOC", "St. Louis")]
  assert all(text[e["start"]:e["end"]] == e["text"] for e in found)
  assert found[0]["start"] == 4 and found[0]["end"] == 10


def test_entities_in_words():
  words = ["Brian", "O'Brien", "flew", "to", "New", "York"]
  found = token_tagger.entities_in_words(words, ["B-PER", "I-PER", "O", "O", "B-LOC", "I-LOC"])
  assert found == [
      {"type": "PER", "text": "Brian O'Brien", "start": 0, "end": 13, "words": words[:2],
       "word_start": 0, "word_end": 2},
      {"type": "LOC", "text": "New York", "start": 22, "end": 30, "words": words[4:],
       "word_start": 4, "word_end": 6}]
  assert " ".join(words)[22:30] == "New York"


def test_entity_results_by_hand():
  gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
  found = [["B-PER", "O", "O", "B-LOC"], ["B-ORG", "B-LOC"]]
  # gold PER(0,2) LOC(3,4) ORG(0,1); found PER(0,1) LOC(3,4) ORG(0,1) LOC(1,2): 2 right.
  scores = metrics.entity_results(gold, found)
  assert scores["entity_precision"] == 2 / 4 and scores["entity_recall"] == 2 / 3
  assert scores["entity_f1"] == pytest.approx(2 * 2 / (4 + 3))
  assert (scores["LOC_precision"], scores["LOC_recall"], scores["LOC_support"]) == (0.5, 1.0, 1)
  assert scores["PER_f1"] == 0.0 and scores["ORG_f1"] == 1.0


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
  return tiny_model_folder(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="module")
def trained(tiny_dir):
  """A tiny tagger that learned X -> Y (the settings of test_python_api's tagger test), fit
  with validation_data."""
  keras.utils.set_random_seed(2)
  tagger = ob.TokenTagger.from_preset(tiny_dir, labels=LABELS, sequence_length=16)
  tagger.compile(learning_rate=3e-3, warmup_fraction=0.0)
  stopper = keras.callbacks.EarlyStopping(monitor="val_entity_f1", mode="max", patience=20)
  history = tagger.fit(X, Y, batch_size=4, epochs=15, verbose=0, validation_data=(X[:4], Y[:4]),
                       callbacks=[stopper])
  assert stopper.best == max(history.history["val_entity_f1"])  # the callbacks see it
  return tagger, history.history


def test_evaluate_reports_run_ners_entity_scores(trained):
  tagger, history = trained
  assert tagger.predict_tags(X[:4]) == Y[:4]
  # Gold that differs from what the tagger predicts (Y): John Smith's PER ends early and the
  # last sentence's Paris is no entity. Predicted 7 entities, gold 6, 5 of them right.
  gold = [list(tags) for tags in Y[:4]]
  gold[0][1], gold[3][0] = "O", "O"
  scores = tagger.evaluate(X[:4], gold, return_dict=True, verbose=0)
  assert scores["entity_precision"] == pytest.approx(5 / 7)
  assert scores["entity_recall"] == pytest.approx(5 / 6)
  assert scores["entity_f1"] == pytest.approx(10 / 13)
  assert scores == pytest.approx(dict(
      keras.Model.evaluate(tagger, tagger.make_dataset(X[:4], gold), return_dict=True,
                           verbose=0), **metrics.entity_results(gold, tagger.predict_tags(X[:4]))))
  assert {"loss", "token_accuracy", "PER_f1", "LOC_support"} <= set(scores)
  assert scores["token_accuracy"] == pytest.approx(16 / 18)
  # The list form: Keras' (loss, token_accuracy), then the three entity scores.
  values = tagger.evaluate(X[:4], gold, verbose=0)
  assert values == pytest.approx([scores[k] for k in ("loss", "token_accuracy",
                                                       "entity_precision", "entity_recall",
                                                       "entity_f1")])
  # fit's validation logs them too; the last epoch's are evaluate's on the same weights.
  assert history["val_entity_f1"][-1] == pytest.approx(
      tagger.evaluate(X[:4], Y[:4], return_dict=True, verbose=0)["entity_f1"])
  assert {"val_loss", "val_token_accuracy", "val_entity_precision",
          "val_entity_recall"} <= set(history)
  # The corpus F1, not a mean over batches: one sentence per batch, each scored apart, would
  # average to 0.625 (sentence 0: 0.5, 1 and 2: 1, 3: 0).
  assert tagger.evaluate(X[:4], gold, batch_size=1, return_dict=True,
                         verbose=0)["entity_f1"] == pytest.approx(10 / 13)


def test_predict_entities_takes_word_lists(trained):
  tagger, _ = trained
  found = tagger.predict_entities([["John", "Smith", "lives", "in", "Paris"]])
  assert found == [[
      {"type": "PER", "text": "John Smith", "start": 0, "end": 10, "words": ["John", "Smith"],
       "word_start": 0, "word_end": 2},
      {"type": "LOC", "text": "Paris", "start": 20, "end": 25, "words": ["Paris"],
       "word_start": 4, "word_end": 5}]]
  # The same words as raw text: the same entities at the same offsets.
  texts = [" ".join(words) for words in X[:4]]
  keys = ("type", "text", "start", "end")
  assert [[{k: e[k] for k in keys} for e in found] for found in tagger.predict_entities(
      X[:4])] == tagger.predict_entities(texts)
  # Tuples, numpy arrays and pandas Series of word lists are word lists too.
  assert tagger.predict_entities((tuple(X[0]), np.array(X[1]))) == tagger.predict_entities(
      X[:2])
  assert tagger.predict_tags(pd.Series(X[:4])) == tagger.predict_tags(X[:4]) == Y[:4]
  assert tagger.predict_entities([]) == [] and tagger.predict_tags([]) == []
  assert tagger.predict_entities(["", " "]) == [[], []] and tagger.predict_entities([[]]) == [[]]


@pytest.mark.parametrize("call, args, match", [
    ("predict_entities", (5,), r"texts must be a string, a list of strings \(raw text\) or a "
     r"list of word lists .* got 5 \(int\)"),
    ("predict_entities", ([1, 2],), r"texts must be a list of word lists.*texts\[0\] is 1 \(int\)"),
    ("predict_entities", (["a b", ["c"]],), "not a mix of strings and word lists"),
    ("predict_entities", ({"text": "a"},), r"got \{'text': 'a'\} \(dict\)"),
    ("predict_entities", ([["a", 1]],), r"texts\[0\]\[1\] is 1 \(int\): words are strings"),
    ("predict_tags", ("John Smith",), r"x must be a list of word lists.* got 'John Smith' \(str\)"),
    ("predict_tags", (["John", "Smith"],), r"x\[0\] is the string 'John': put one sentence's "
     r"words in a list \(\[words\]\); raw text goes to predict_entities"),
    ("predict", ([None],), r"x\[0\] is None \(NoneType\)"),
    ("fit", ("John Smith", [["O", "O"]]), r"x must be a list of word lists.* got 'John Smith'"),
    ("predict", ("John Smith",), r"x must be a list of word lists.* got 'John Smith' \(str\)"),
    ("fit", ([["a"]], "O"), r"y must be a list of tag lists.* got 'O' \(str\)"),
    ("fit", ([["a"]], [["O"], ["O"]]), "y has 2 tag lists for 1 sentences"),
    ("fit", ([["a"]], ["O"]), r"y\[0\] must be a list of tags, one per word of x\[0\]"),
    ("fit", ([["a", "b"]], [["O"]]), "sentence 0: 2 words but 1 tags"),
    ("fit", ([["a"]], [["B-ORG"]]), r"tag\(s\) \['B-ORG'\] not in labels"),
    ("fit", ([["a"]], [[7]]), r"tag\(s\) \[7\] not in labels .* \(nor a label id 0..4\)"),
    ("fit", ([["a"]], [["O"]]), None),  # validation_data: below
    ("evaluate", ([["a"]],), "evaluate needs y"),
    ("evaluate", ("a b", [["O"]]), "x must be a list of word lists"),
])
def test_wrong_inputs_say_what_is_expected(trained, call, args, match):
  tagger, _ = trained
  if match is None:
    with pytest.raises(ValueError, match=r"validation_data must be \(word lists, tag lists\)"):
      tagger.fit(*args, validation_data=[["a"]], verbose=0)
    return
  with pytest.raises(ValueError, match=match):
    getattr(tagger, call)(*args)


def test_labels_come_back_as_they_went_in(tiny_dir, tmp_path):
  ids = list(range(len(LABELS)))
  keras.utils.set_random_seed(3)
  tagger = ob.TokenTagger.from_preset(tiny_dir, labels=ids, sequence_length=16)
  assert tagger.label_values == ids and tagger.labels == ["0", "1", "2", "3", "4"]
  tagger.compile(learning_rate=3e-3, warmup_fraction=0.0)
  y_ids = [[LABELS.index(tag) for tag in tags] for tags in Y]
  tagger.fit(X, [np.array(tags) for tags in y_ids], batch_size=4, epochs=1, verbose=0)
  tags = tagger.predict_tags(X[:2])
  assert all(type(tag) is int and tag in ids for sentence in tags for tag in sentence)
  assert tagger.get_config()["labels"] == ids
  assert tagger.run_settings()["labels"] == ["0", "1", "2", "3", "4"]
  assert tagger.run_settings()["label_values"] == ids
  tagger.save(str(tmp_path / "ids"))  # from_preset gives them back as ints
  loaded = ob.TokenTagger.from_preset(str(tmp_path / "ids"))
  assert loaded.label_values == ids and loaded.predict_tags(X[:2]) == tags
  # numpy labels: numpy's strings (a str) come back; ids name labels where no label is
  # named so (a tagger of tag names fit on a data set's tag ids, as Hugging Face's conll2003).
  names = ob.TokenTagger.from_preset(tiny_dir, labels=np.array(LABELS), sequence_length=16)
  assert names.labels == LABELS and all(isinstance(t, str) for t in names.predict_tags(X)[0])
  assert names._sentences(X[:2], [[1, 2, 0, 0, 3], np.array([1, 0, 0, 3])]) == names._sentences(
      X[:2], Y[:2])
  assert names.get_config()["labels"] == LABELS and type(names.get_config()["labels"][0]) is str


def test_a_feature_based_taggers_folder_is_named_not_given_a_random_head(tiny_dir, tmp_path):
  """run_ner --feature_based's OUTPUT_DIR (model_type feature_tagger): its head is not the
  TokenTagger's; loading it with a new random head in its place used to pass silently."""
  folder = tmp_path / "ner_feature_based"
  shutil.copytree(tiny_dir, folder)
  (folder / model_files.RUN_SETTINGS_FILE).write_text(run_record.RunRecord.of(
      "feature_tagger", task="NER", labels=["O", "B-LOC", "B-PER"]).to_json())
  with pytest.raises(ValueError, match=r"run_ner --feature_based tagger .*export "
                                       r"--checkpoint=.*, or pass labels="):
    ob.TokenTagger.from_preset(str(folder))
  tagger = ob.TokenTagger.from_preset(str(folder), labels=LABELS, sequence_length=8)
  assert tagger.labels == LABELS  # a new head on its encoder, as asked
