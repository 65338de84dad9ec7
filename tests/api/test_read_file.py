"""`ob.read_file`: a user's own file as fit's x and y, with run_classifier's reader and its
`quoting` (issue 37: GLUE-style TSVs hold literal quotes)."""

import json

import pytest

import official_bert as ob


def test_glue_style_quotes_read_with_quoting_none(tmp_path):
  path = tmp_path / "train.tsv"
  path.write_text('sentence\tlabel\na fine film\t1\n"quoted" opening\t0\nhe said "no\t1\n')
  with pytest.raises(ValueError, match=r'train.tsv:3: malformed line .*pass quoting="none"'):
    ob.read_file(path, text_column="sentence")
  x, y = ob.read_file(path, text_column="sentence", quoting="none")
  assert x == ["a fine film", '"quoted" opening', 'he said "no'] and y == ["1", "0", "1"]
  with pytest.raises(ValueError, match="quoting='single'"):
    ob.read_file(path, text_column="sentence", quoting="single")


def test_pairs_multi_label_and_texts_without_labels(tmp_path):
  path = tmp_path / "pairs.csv"
  path.write_text('first,second,tags\n"a, b",c,"x,y"\nd,e,y\n')
  x, y = ob.read_file(path, text_column="first", text_b_column="second", label_column="tags",
                      problem_type="multi_label")
  assert x == (["a, b", "d"], ["c", "e"]) and y == [["x", "y"], ["y"]]
  path = tmp_path / "predict.jsonl"
  path.write_text("".join(json.dumps({"text": t}) + "\n" for t in ("one", "two")))
  assert ob.read_file(path) == (["one", "two"], None)
  with pytest.raises(ValueError, match="no column 'sentence'|'sentence'"):
    ob.read_file(path, text_column="sentence")
