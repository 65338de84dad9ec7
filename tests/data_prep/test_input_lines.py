"""How inputs are read and packed around the tokenizer: lines end at "\\n" only (not at the
other breaks of str.splitlines), a second text of no tokens is none (one segment, the
original's `if tokens_b`), and bytes are read as UTF-8."""

import json

from conftest import UNCASED_VOCAB
import numpy as np

from data_prep import tokenization
from data_prep.classification import features as classifier_features
from data_prep.classification import own_files
from data_prep.classification import windows
from data_prep.classification.glue_processors import InputExample
from official_bert.api.preprocessor import as_string_tensor
from official_bert.serving import feature_extraction

TOKENIZER = tokenization.FullTokenizer(UNCASED_VOCAB, do_lower_case=True)


def test_extract_features_reads_one_example_per_line_and_packs_an_empty_b_alone(tmp_path):
  path = tmp_path / "in.txt"
  path.write_text("first\nsecond\u2028still second\nthird\x0cline\nfour ||| \x01\n",
                  encoding="utf-8")
  examples = feature_extraction.read_examples(str(path))
  assert [a for a, _ in examples] == ["first", "second\u2028still second", "third\x0cline",
                                      "four"]
  ids, mask, segments = feature_extraction.encode(examples[3:], TOKENIZER, 8)
  want = TOKENIZER.convert_tokens_to_ids(["[CLS]", "four", "[SEP]"])
  assert ids[0][:4].tolist() == want + [0] and segments[0].sum() == 0 and mask[0].sum() == 3


def test_windows_of_a_text_with_an_empty_second_text_are_single_texts():
  text = " ".join(["word"] * 30)
  examples = [InputExample("0", text, text_b, "x")
              for text_b in ("", None)]
  columns = classifier_features.convert_examples(examples, ["x"], 16, TOKENIZER)
  out, owner = windows.windowed_columns(examples, columns, 16, 4, TOKENIZER)
  first, second = (np.asarray(owner) == 0), (np.asarray(owner) == 1)
  assert first.sum() == second.sum()  # the same windows as no second text
  np.testing.assert_array_equal(out["input_ids"][first], out["input_ids"][second])
  assert out["segment_ids"][first].sum() == 0


def test_a_jsonl_string_may_hold_u2028(tmp_path):
  path = tmp_path / "t.jsonl"
  path.write_text(json.dumps({"text": "a\u2028b", "label": "x"}, ensure_ascii=False) + "\n",
                  encoding="utf-8")
  data = own_files.read_examples(str(path), own_files.Columns("text"))
  assert [e.text_a for e in data.examples] == ["a\u2028b"]


def test_preprocessor_inputs_take_utf8_bytes():
  tensor = as_string_tensor(["café".encode(), "x", np.bytes_(b"caf\xc3\xa9")])
  assert tensor.numpy().tolist() == ["café".encode(), b"x", "café".encode()]
  assert as_string_tensor([b"caf\xe9"]).numpy().tolist() == [b"caf"]  # bad bytes dropped
