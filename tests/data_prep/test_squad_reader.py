"""SQuAD JSON reading: the original's words and answer positions, and clear errors."""

import json

from conftest import SQUAD_V1
from conftest import need
import pytest

from data_prep.squad import reader as squad_reader
from data_prep.squad.reader import SquadError

DEV_V1 = SQUAD_V1  # the first articles and paragraphs of the dev set (tests/data)


def _write(tmp_path, data, version="1.1", name="in.json"):
  path = tmp_path / name
  path.write_text(json.dumps({"version": version, "data": data}), encoding="utf-8")
  return str(path)


def _article(context, qas):
  return {"title": "t", "paragraphs": [{"context": context, "qas": qas}]}


def _qa(qid, question, answers=(), **extra):
  return dict({"id": qid, "question": question,
               "answers": [{"text": t, "answer_start": s} for t, s in answers]}, **extra)


def test_words_and_positions_match_squad_lib(tmp_path):
  from official.nlp.data import squad_lib  # pylint: disable=g-import-not-at-top
  dataset = json.load(open(need(DEV_V1), encoding="utf-8"))
  dataset["data"] = dataset["data"][:2]
  for article in dataset["data"]:  # the original's training mode wants exactly one answer
    for p in article["paragraphs"]:
      for qa in p["qas"]:
        qa["answers"] = qa["answers"][:1]
  path = _write(tmp_path, dataset["data"])
  theirs = squad_lib.read_squad_examples(path, is_training=True, version_2_with_negative=False)
  paragraphs, ours, stats = squad_reader.read_squad(path, True, False)
  assert len(ours) == len(theirs) == stats["questions"]
  for a, b in zip(ours, theirs):
    assert (a.qas_id, a.question_text, a.orig_answer_text) == (b.qas_id, b.question_text,
                                                               b.orig_answer_text)
    assert paragraphs[a.paragraph_index].doc_tokens == b.doc_tokens
    assert (a.start_position, a.end_position) == (b.start_position, b.end_position)


def test_whitespace_is_the_originals():
  # U+202F splits words in the original; U+00A0 does not (BasicTokenizer splits it later).
  assert squad_reader.split_words(" a\tb\u202fc\u00a0d\n") == ["a", "b", "c\u00a0d"]
  p = squad_reader.Paragraph("ab  cd", ["ab", "cd"])
  assert [p.char_to_word(i) for i in range(6)] == [0, 0, 0, 0, 1, 1]


def test_answer_mismatch_and_bad_offsets_are_skipped_and_counted(tmp_path):
  context = "The cat sat on the mat."
  path = _write(tmp_path, [_article(context, [
      _qa("ok", "Who sat?", [("cat", 4), ("The cat", 0)]),
      _qa("moved", "Where?", [("mat", 2)]),  # text not at its offset
      _qa("outside", "Where?", [("mat", 400)]),
      _qa("negative", "Where?", [("mat", -3)]),
  ])])
  _, examples, stats = squad_reader.read_squad(path, True, False)
  assert [e.qas_id for e in examples] == ["ok"]
  assert (examples[0].start_position, examples[0].end_position) == (1, 1)
  assert stats["skipped_answer_mismatch"] == 3
  assert stats["multiple_answers"] == 1
  # Prediction does not look at answers: nothing is skipped.
  _, examples, stats = squad_reader.read_squad(path, False, False)
  assert len(examples) == 4 and not stats["skipped_answer_mismatch"]


def test_empty_context_and_v2_impossible(tmp_path):
  path = _write(tmp_path, [_article("   ", [_qa("e", "Anything?", [("x", 0)])]),
                           _article("Paris is in France.", [
                               _qa("no", "Capital of Mars?", [], is_impossible=True),
                               _qa("yes", "Where is Paris?", [("France", 12)],
                                   is_impossible=False)])], version="v2.0")
  _, train, stats = squad_reader.read_squad(path, True, True)
  assert [e.qas_id for e in train] == ["no", "yes"] and stats["skipped_empty_context"] == 1
  assert (train[0].is_impossible, train[0].start_position, train[0].orig_answer_text) == (
      True, -1, "")
  assert (train[1].is_impossible, train[1].start_position, train[1].end_position) == (
      False, 3, 3)
  _, predict, _ = squad_reader.read_squad(path, False, True)
  assert [e.qas_id for e in predict] == ["e", "no", "yes"]


def test_malformed_json_names_the_file(tmp_path):
  path = tmp_path / "broken.json"
  path.write_text('{"version": "1.1", "data": [', encoding="utf-8")
  with pytest.raises(SquadError, match=r"broken\.json: malformed JSON at line 1"):
    squad_reader.read_squad(str(path), True, False)
  with pytest.raises(SquadError, match="not found"):
    squad_reader.read_squad(str(tmp_path / "missing.json"), True, False)
  (tmp_path / "list.json").write_text("[1, 2]", encoding="utf-8")
  with pytest.raises(SquadError, match=r"list\.json: not a SQuAD file"):
    squad_reader.read_squad(str(tmp_path / "list.json"), True, False)


def test_wrong_version_and_missing_fields_are_errors(tmp_path):
  v1 = _write(tmp_path, [_article("a b", [_qa("q", "?", [("a", 0)])])], name="v1.json")
  with pytest.raises(SquadError, match=r"v1\.json: is SQuAD v1\.1, but "
                     "--version_2_with_negative is set"):
    squad_reader.read_squad(v1, True, True)
  v2 = _write(tmp_path, [_article("a b", [_qa("q", "?", [], is_impossible=True)])],
              version="v2.0", name="v2.json")
  with pytest.raises(SquadError, match="pass --version_2_with_negative"):
    squad_reader.read_squad(v2, False, False)
  bad = _write(tmp_path, [{"paragraphs": [{"qas": []}]}], name="bad.json")
  with pytest.raises(SquadError, match=r"bad\.json: article 0 paragraph 0: missing or "
                     r"malformed \"context\""):
    squad_reader.read_squad(bad, False, False)
  no_answer = _write(tmp_path, [_article("a b", [_qa("q", "?")])], name="na.json")
  with pytest.raises(SquadError, match="question q has no answer"):
    squad_reader.read_squad(no_answer, True, False)
  # Marked is_impossible in a v1.1 training file: that, not "not marked is_impossible".
  marked = _write(tmp_path, [_article("a b", [_qa("q", "?", is_impossible=True)])],
                  name="marked.json")
  with pytest.raises(SquadError, match="question q is marked is_impossible, which SQuAD 1.1 "
                     "training has not: pass --version_2_with_negative"):
    squad_reader.read_squad(marked, True, False)
  # An offset written as a string: named, not counted as an answer that is not at its offset.
  text_offset = _write(tmp_path, [_article("a b", [
      {"id": "q", "question": "?", "answers": [{"text": "b", "answer_start": "2"}]}])],
                       name="text_offset.json")
  with pytest.raises(SquadError, match=r"text_offset\.json: .*malformed \"answer_start\""):
    squad_reader.read_squad(text_offset, True, False)


def test_bom_folder_string_is_impossible_and_duplicate_ids(tmp_path):
  context = "Denver won the game."
  data = [_article(context, [_qa("q1", "who won?", [("Denver", 0)], is_impossible=False)])]
  path = _write(tmp_path, data, "v2.0")
  bom = tmp_path / "bom.json"
  bom.write_bytes(b"\xef\xbb\xbf" + open(path, "rb").read())  # a BOM: read as UTF-8
  _, examples, _ = squad_reader.read_squad(str(bom), True, True)
  assert [e.qas_id for e in examples] == ["q1"] and not examples[0].is_impossible
  with pytest.raises(SquadError, match=f"{tmp_path}: is a folder, not a SQuAD file"):
    squad_reader.read_squad(str(tmp_path), True, True)
  # "false" (a string) read as true made an answered question impossible.
  data = [_article(context, [_qa("q1", "who won?", [("Denver", 0)], is_impossible="false")])]
  with pytest.raises(SquadError, match=r"question q1: is_impossible is 'false', expected true "
                     r"or false \(a JSON bool\)"):
    squad_reader.read_squad(_write(tmp_path, data, "v2.0"), True, True)
  # Two questions with one id: predictions.json would keep one of them.
  data = [_article(context, [_qa("q1", "who won?", [("Denver", 0)])]),
          _article(context, [_qa("q1", "what game?", [("the game", 11)])])]
  with pytest.raises(SquadError, match=r"article 1 paragraph 0: question id q1 is also the id "
                     r"of a question in article 0 paragraph 0: ids must be unique"):
    squad_reader.read_squad(_write(tmp_path, data), False, False)


def test_select_articles():
  items = list(range(10))
  assert squad_reader.select_articles(items, "") == items
  assert squad_reader.select_articles(items, "8:") == [8, 9]
  assert squad_reader.select_articles(items, ":2") == [0, 1]
  with pytest.raises(ValueError, match="START:END"):
    squad_reader.select_articles(items, "3")
