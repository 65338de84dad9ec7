"""SQuAD features: window for window identical to tf-models-official's squad_lib."""

import collections
import json
import os

from conftest import SQUAD_V1
from conftest import SQUAD_V2
from conftest import UNCASED_VOCAB
from conftest import need
import numpy as np
import pytest
import tensorflow as tf

from data_prep import schema
from data_prep.squad import features as squad_features
from data_prep.squad import records as squad_schema
from data_prep.squad import writing as squad_writing

DEV_V1 = SQUAD_V1  # the first articles and paragraphs of the dev sets (tests/data)
DEV_V2 = SQUAD_V2


@pytest.fixture(scope="module")
def ref_tokenizer():
  from official.nlp.tools import tokenization  # pylint: disable=g-import-not-at-top
  return tokenization.FullTokenizer(need(UNCASED_VOCAB), do_lower_case=True)


def _slice(tmp_path, source, articles, paragraphs, first_answer_only):
  dataset = json.load(open(need(source), encoding="utf-8"))
  dataset["data"] = dataset["data"][articles]
  for article in dataset["data"]:
    article["paragraphs"] = article["paragraphs"][paragraphs]
    for p in article["paragraphs"]:
      for qa in p["qas"]:
        if first_answer_only:  # the original's training mode wants exactly one answer
          qa["answers"] = qa["answers"][:1]
  path = tmp_path / "slice.json"
  path.write_text(json.dumps(dataset), encoding="utf-8")
  return str(path)


def _ours(path, out, is_training, v2, seq, stride, query):
  squad_writing.run(squad_writing.Settings(
      input_file=path, output_file=str(out), vocab_file=need(UNCASED_VOCAB),
      max_seq_length=seq, doc_stride=stride, max_query_length=query,
      version_2_with_negative=v2, is_training=is_training, num_workers=1))
  spec = schema.tf_feature_spec(schema.squad_features(seq, is_training))
  records = [{k: v.numpy().tolist() for k, v in tf.io.parse_single_example(r, spec).items()}
             for r in tf.data.TFRecordDataset(str(out))]
  return records, squad_schema.read_metadata(squad_schema.metadata_path(str(out)))


def _theirs(path, tokenizer, is_training, v2, seq, stride, query):
  from official.nlp.data import squad_lib  # pylint: disable=g-import-not-at-top
  examples = squad_lib.read_squad_examples(path, is_training, v2)
  features = []
  output_fn = features.append if is_training else (
      lambda f, is_padding: None if is_padding else features.append(f))
  squad_lib.convert_examples_to_features(examples, tokenizer, seq, stride, query, is_training,
                                         output_fn, batch_size=1)
  return examples, features


CASES = [  # (name, file, articles, paragraphs, is_training, v2, seq, stride, query)
    ("predict_default_sizes", DEV_V1, slice(0, 1), slice(0, 12), False, False, 384, 128, 64),
    ("predict_many_windows", DEV_V1, slice(1, 2), slice(0, 6), False, False, 64, 16, 12),
    ("train_v1_windows", DEV_V1, slice(2, 3), slice(0, 6), True, False, 96, 32, 16),
    ("train_v2", DEV_V2, slice(0, 1), slice(0, 8), True, True, 128, 48, 20),
    ("predict_v2", DEV_V2, slice(1, 2), slice(0, 4), False, True, 80, 24, 16),
]


@pytest.mark.parametrize("name,source,articles,paragraphs,is_training,v2,seq,stride,query",
                         CASES, ids=[c[0] for c in CASES])
def test_parity_with_squad_lib(tmp_path, ref_tokenizer, name, source, articles, paragraphs,
                               is_training, v2, seq, stride, query):
  del name
  path = _slice(tmp_path, source, articles, paragraphs, is_training)
  examples, theirs = _theirs(path, ref_tokenizer, is_training, v2, seq, stride, query)
  records, meta = _ours(path, tmp_path / "out.tf_record", is_training, v2, seq, stride, query)
  assert len(records) == len(theirs) == meta.header["num_features"]
  assert len(theirs) > len(examples) or seq == 384  # the small windows do slide
  for ours, ref in zip(records, theirs):
    assert ours["unique_ids"] == [ref.unique_id]
    assert ours["input_ids"] == ref.input_ids
    assert ours["input_mask"] == ref.input_mask
    assert ours["segment_ids"] == ref.segment_ids
    if is_training:
      assert (ours["start_positions"], ours["end_positions"]) == (
          [ref.start_position], [ref.end_position])
      # The original writes the EXAMPLE's flag; squad_lib "window has no answer".
      assert ours["is_impossible"] == [int(examples[ref.example_index].is_impossible)]
  if is_training:
    assert any(r["start_positions"] == [0] for r in records)  # windows without the answer
    assert any(r["start_positions"] != [0] for r in records)
    return
  assert [e.qas_id for e in meta.examples] == [e.qas_id for e in examples]
  assert all(a.doc_tokens == b.doc_tokens for a, b in zip(meta.examples, examples))
  for ours, ref in zip(meta.features, theirs):
    assert (ours.unique_id, ours.example_index, ours.doc_span_index) == (
        ref.unique_id, ref.example_index, ref.doc_span_index)
    assert ours.tokens == ref.tokens
    assert ours.token_to_orig_map == ref.token_to_orig_map
    assert ours.token_is_max_context == ref.token_is_max_context


def test_record_schema_is_the_originals(tmp_path):
  path = _slice(tmp_path, DEV_V1, slice(0, 1), slice(0, 1), True)
  for is_training, names in [
      (True, {"unique_ids", "input_ids", "input_mask", "segment_ids", "start_positions",
              "end_positions", "is_impossible"}),
      (False, {"unique_ids", "input_ids", "input_mask", "segment_ids"})]:
    out = str(tmp_path / f"{is_training}.tf_record")
    _ours(path, out, is_training, False, 128, 64, 32)
    first = next(iter(tf.data.TFRecordDataset(out))).numpy()
    feature = tf.train.Example.FromString(first).features.feature
    assert set(feature) == names
    assert all(feature[n].WhichOneof("kind") == "int64_list" for n in names)
    assert feature["unique_ids"].int64_list.value[0] == 1000000000


def test_doc_spans_and_max_context_worked_examples():
  assert squad_features.doc_spans(10, 4, 3) == [(0, 4), (3, 4), (6, 4)]
  assert squad_features.doc_spans(3, 4, 3) == [(0, 3)]
  assert squad_features.doc_spans(0, 4, 3) == []
  # The original's example, "the man went to the store and bought a gallon of milk" in
  # windows (0,5) (3,5) (6,5): "to" (3) scores 1.05 in the first, 0.05 in the second;
  # "bought" (7) 0.05 in the second, 1.05 in the third.
  best = squad_features.max_context_span([(0, 5), (3, 5), (6, 5)], 11)
  assert best.tolist() == [0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 2]


def _original_is_max_context(spans, cur, position):
  best_score, best_index = None, None
  for i, (start, length) in enumerate(spans):
    end = start + length - 1
    if start <= position <= end:
      score = min(position - start, end - position) + 0.01 * length
      if best_score is None or score > best_score:
        best_score, best_index = score, i
  return cur == best_index


def test_max_context_matches_the_originals_rule_on_random_windows():
  rng = np.random.default_rng(0)
  for _ in range(200):
    n, window, stride = (int(x) for x in rng.integers(1, 40, 3))
    spans = squad_features.doc_spans(n, window, stride)
    best = squad_features.max_context_span(spans, n)
    for j, (start, length) in enumerate(spans):
      for pos in range(start, start + length):
        assert (best[pos] == j) == _original_is_max_context(spans, j, pos)


def test_improve_answer_span():
  # "(1895-1943)." -> ( 1895 - 1943 ) . ; answer "1895" is token 1.
  doc = np.array([5, 6, 7, 8, 9, 10])
  assert squad_features.improve_answer_span(doc, 0, 5, np.array([6])) == (1, 1)
  assert squad_features.improve_answer_span(doc, 0, 5, np.array([8, 9])) == (3, 4)
  assert squad_features.improve_answer_span(doc, 0, 5, np.array([42])) == (0, 5)
  assert squad_features.improve_answer_span(doc, 2, 3, np.array([])) == (2, 3)


def test_long_questions_empty_contexts_and_bad_settings(tmp_path):
  long_question = "why " * 100 + "?"
  path = tmp_path / "odd.json"
  path.write_text(json.dumps({"version": "1.1", "data": [
      {"title": "t", "paragraphs": [
          {"context": " \n ", "qas": [{"id": "empty", "question": "What?", "answers": []}]},
          {"context": "Rain falls in Spain.", "qas": [
              {"id": "long", "question": long_question,
               "answers": [{"text": "Spain", "answer_start": 14}]}]}]}]}), encoding="utf-8")
  records, meta = _ours(str(path), tmp_path / "p.tf_record", False, False, 32, 8, 10)
  assert [e.qas_id for e in meta.examples] == ["empty", "long"]  # kept, no window
  assert [f.example_index for f in meta.features] == [1]
  assert records[0]["input_ids"][11] == 102  # [CLS] + 10 query tokens, then [SEP]
  records, _ = _ours(str(path), tmp_path / "t.tf_record", True, False, 32, 8, 10)
  assert len(records) == 1 and records[0]["start_positions"] == [15]  # 12 + "spain" (3)
  with pytest.raises(ValueError, match="leaves no room"):
    _ours(str(path), tmp_path / "x.tf_record", True, False, 12, 8, 10)
  with pytest.raises(ValueError, match="doc_stride"):
    _ours(str(path), tmp_path / "x.tf_record", True, False, 64, 0, 10)


def test_workers_write_the_same_bytes(tmp_path):
  path = _slice(tmp_path, DEV_V1, slice(3, 4), slice(0, 6), False)
  outputs = collections.defaultdict(list)
  for workers in (1, 2):
    out = str(tmp_path / f"w{workers}.tf_record")
    squad_writing.run(squad_writing.Settings(
        input_file=path, output_file=out, vocab_file=need(UNCASED_VOCAB), max_seq_length=64,
        doc_stride=16, max_query_length=12, is_training=False, num_workers=workers,
        examples_per_chunk=8))
    for p in (out, squad_schema.metadata_path(out)):
      # Keyed by file name: the directory may hold "w1" too (xdist's popen-gw1).
      outputs[os.path.basename(p).replace(f"w{workers}", "w")].append(open(p, "rb").read())
  for blobs in outputs.values():
    assert blobs[0] == blobs[1]
