"""SQuAD postprocessing: a constructed example, and squad_lib's output on real windows."""

import collections
import json

from conftest import SQUAD_V1
from conftest import SQUAD_V2
from conftest import UNCASED_VOCAB
from conftest import need
import numpy as np
import pytest

from data_prep.squad import records as squad_schema
from data_prep.squad import writing as squad_writing
from official_bert.tasks import squad_postprocess as pp

DEV_V1 = SQUAD_V1  # the first articles and paragraphs of the dev sets (tests/data)
DEV_V2 = SQUAD_V2


@pytest.fixture(scope="module")
def basic_tokenize():
  from data_prep import tokenization  # pylint: disable=g-import-not-at-top
  return tokenization.FullTokenizer(need(UNCASED_VOCAB), True).split_words_batch


def test_get_final_text():
  # The original's example: the prediction loses the "'s" but keeps the original casing.
  assert pp.get_final_text("steve smith", "Steve Smith's", "steve smith ' s") == "Steve Smith"
  assert pp.get_final_text("cafe", "(Café)", "( cafe )") == "Café"
  assert pp.get_final_text("nowhere", "Steve", "steve") == "Steve"  # not found: original
  assert pp.get_final_text("ab", "a-b", "ab") == "a-b"  # lengths differ: original


EXAMPLE = squad_schema.Example(0, "q0", "Whose house?",
                               ["Steve", "Smith's", "house", "is", "in", "Paris."])
#          0      1     2    3      4       5       6    7    8       9     10    11      12
TOKENS = ["[CLS]", "who", "?", "[SEP]", "steve", "smith", "'", "s", "house", "is", "in",
          "paris", ".", "[SEP]"]
WINDOW = squad_schema.InputFeatures(
    unique_id=1000000000, example_index=0, doc_span_index=0, tokens=TOKENS,
    token_to_orig_map={4: 0, 5: 1, 6: 1, 7: 1, 8: 2, 9: 3, 10: 4, 11: 5, 12: 5},
    token_is_max_context={i: True for i in range(4, 13)})


def _logits(start, end, seq=16):
  s, e = np.full(seq, -10.0, np.float32), np.full(seq, -10.0, np.float32)
  for i, v in start.items():
    s[i] = v
  for i, v in end.items():
    e[i] = v
  return s, e


def test_nbest_filters_and_null_answer(basic_tokenize):
  # Top 3 starts 1 (9), 4 (5), 11 (3); top 3 ends 5 (5), 12 (4), 0 (-10, the first tie).
  # Valid: (4, 5) "steve smith" -> "Steve Smith" (10) and (11, 12) "paris." (7). Dropped:
  # starts in the question (1), ends on [CLS] (0), ends before its start (11, 5), and
  # (4, 12) with 9 tokens > max_answer_length 5.
  start, end = _logits({4: 5.0, 11: 3.0, 1: 9.0}, {5: 5.0, 12: 4.0})
  results = {1000000000: (start, end)}
  preds, nbest, null_odds = pp.postprocess([EXAMPLE], [WINDOW], results, basic_tokenize,
                                           n_best_size=3, max_answer_length=5)
  assert preds == {"q0": "Steve Smith"} and null_odds == {}
  assert [e["text"] for e in nbest["q0"]] == ["Steve Smith", "Paris."]
  assert [e["probability"] for e in nbest["q0"]] == pytest.approx(
      [1 / (1 + np.exp(-3)), 1 / (1 + np.exp(3))])
  assert nbest["q0"][0]["start_logit"] == 5.0 and nbest["q0"][0]["end_logit"] == 5.0
  _, nbest, _ = pp.postprocess([EXAMPLE], [WINDOW], results, basic_tokenize, n_best_size=3,
                               max_answer_length=9)
  assert [e["text"] for e in nbest["q0"]] == ["Steve Smith", "Steve Smith's house is in Paris.",
                                              "Paris."]  # (4, 12) scores 9

  # v2.0: [CLS] scores 8 + 8 = 16 > 10 (the best span): no answer, null odds 16 - 10 = 6.
  start[0], end[0] = 8.0, 8.0
  preds, nbest, null_odds = pp.postprocess(
      [EXAMPLE], [WINDOW], {1000000000: (start, end)}, basic_tokenize, n_best_size=3,
      max_answer_length=5, version_2_with_negative=True)
  assert preds == {"q0": ""} and null_odds == {"q0": pytest.approx(6.0)}
  assert nbest["q0"][0]["text"] == ""
  # ... unless the threshold allows a difference of 6.
  preds, _, _ = pp.postprocess(
      [EXAMPLE], [WINDOW], {1000000000: (start, end)}, basic_tokenize, n_best_size=3,
      max_answer_length=5, version_2_with_negative=True, null_score_diff_threshold=6.5)
  assert preds == {"q0": "Steve Smith"}


def test_example_without_windows(basic_tokenize):
  empty = squad_schema.Example(0, "e", "What?", [])
  assert pp.postprocess([empty], [], {}, basic_tokenize)[0] == {"e": "empty"}  # original
  preds, _, null_odds = pp.postprocess([empty], [], {}, basic_tokenize,
                                       version_2_with_negative=True)
  assert preds == {"e": ""} and null_odds["e"] > 0


@pytest.mark.parametrize("source,v2,seq,stride,query", [
    (DEV_V1, False, 64, 16, 12), (DEV_V2, True, 96, 32, 16)])
def test_same_output_as_squad_lib(tmp_path, basic_tokenize, source, v2, seq, stride, query):
  from official.nlp.data import squad_lib  # pylint: disable=g-import-not-at-top
  from official.nlp.tools import tokenization  # pylint: disable=g-import-not-at-top
  dataset = json.load(open(need(source), encoding="utf-8"))
  dataset["data"] = dataset["data"][2:3]
  dataset["data"][0]["paragraphs"] = dataset["data"][0]["paragraphs"][:5]
  path = tmp_path / "slice.json"
  path.write_text(json.dumps(dataset), encoding="utf-8")
  examples = squad_lib.read_squad_examples(str(path), False, v2)
  windows = []
  squad_lib.convert_examples_to_features(
      examples, tokenization.FullTokenizer(need(UNCASED_VOCAB), True), seq, stride, query,
      False, lambda f, is_padding: None if is_padding else windows.append(f), batch_size=1)
  out = str(tmp_path / "p.tf_record")
  squad_writing.run(squad_writing.Settings(
      input_file=str(path), output_file=out, vocab_file=need(UNCASED_VOCAB),
      max_seq_length=seq, doc_stride=stride, max_query_length=query,
      version_2_with_negative=v2, is_training=False, num_workers=1))
  meta = squad_schema.read_metadata(squad_schema.metadata_path(out))
  # Random logits, larger on the paragraph so that many candidates are valid.
  rng = np.random.default_rng(0)
  raw_result = collections.namedtuple("RawResult", ["unique_id", "start_logits", "end_logits"])
  results, raw = {}, []
  for w in windows:
    s, e = (rng.normal(size=seq).astype(np.float32) * 3 for _ in range(2))
    results[w.unique_id] = (s, e)
    raw.append(raw_result(w.unique_id, s.tolist(), e.tolist()))
  theirs = squad_lib.postprocess_output(examples, windows, raw, 20, 30, True, v2, 0.0)
  ours = pp.postprocess(meta.examples, meta.features, results, basic_tokenize, 20, 30, v2,
                        0.0)
  assert ours[0] == dict(theirs[0])
  assert json.dumps(ours[1]) == json.dumps(theirs[1])  # texts, probabilities, logits, order
  assert ours[2] == dict(theirs[2])
  assert len(set(ours[0].values())) > 1
