"""The squad export's text signatures give run_squad --do_predict's answers.

A tiny BERT is trained a few steps by run_squad, which then writes predictions.json and
nbest_predictions.json for real SQuAD dev questions; the SavedModel exported from the same
checkpoint answers the same (question, context) pairs in the graph. Short windows
(max_seq_length 64, doc_stride 16) give every context several windows, so the windowing,
max-context rule and n-best merging across windows are all exercised.
"""

import json

from conftest import SQUAD_V1
from conftest import SQUAD_V2
from conftest import UNCASED_VOCAB
from conftest import need
import numpy as np
import pytest
import tensorflow as tf
from test_squad_run import _run_squad

from official_bert.interop import model_folder
from official_bert.serving import exporter

pytestmark = pytest.mark.large  # trains or runs commands: `make test`, not `make test-fast`

SCORE_ATOL = 1e-4
OPTIONS = {"doc_stride": 16, "max_query_length": 16, "n_best_size": 20, "max_answer_length": 30}


def _questions(path):
  data = json.load(open(path, encoding="utf-8"))["data"]
  return [(qa["id"], qa["question"], p["context"])
          for article in data
          for p in article["paragraphs"]
          for qa in p["qas"]]


def _near_tie(text, expected, entries):
  """Two answers may trade places only where their scores tie within float noise.

  The graph and run_squad compute the logits with different kernels, whose last bits depend
  on the CPU (AVX2 or AVX-512); a tiny model gives some spans scores that equal to ~1e-6.
  """
  score = {e["text"]: e["start_logit"] + e["end_logit"] for e in entries}
  return text in score and abs(score[text] - score[expected]) <= SCORE_ATOL


@pytest.mark.parametrize("version", ["v1.1", "v2.0"])
def test_exported_answers_equal_run_squad_predictions(tmp_path, version):
  v2 = version == "v2.0"
  data = need(SQUAD_V2 if v2 else SQUAD_V1)
  out = tmp_path / "out"
  flags = [
      "--max_seq_length=64", "--doc_stride=16", "--max_query_length=16", "--do_train",
      f"--train_file={data}", "--do_predict", f"--predict_file={data}"
  ]
  _run_squad(tmp_path, out, *flags, *(["--version_2_with_negative"] if v2 else []), process=False)
  predictions = json.loads((out / "predictions.json").read_text())
  nbest = json.loads((out / "nbest_predictions.json").read_text())

  export_dir = str(tmp_path / "export")
  exporter.export(
      model_folder.read(str(out), str(tmp_path / "tiny.json"), need(UNCASED_VOCAB), True),
      export_dir,
      exporter.ExportOptions("squad",
                             max_seq_length=64,
                             squad_options=dict(OPTIONS, version_2_with_negative=v2)))
  answer = tf.saved_model.load(export_dir).signatures["serving_default"]
  questions = _questions(data)
  got = {}
  for i in range(0, len(questions), 50):
    batch = questions[i:i + 50]
    result = answer(question=tf.constant([q for _, q, _ in batch]),
                    context=tf.constant([c for _, _, c in batch]))
    result = {k: v.numpy() for k, v in result.items()}
    for j, (qid, _, context) in enumerate(batch):
      got[qid] = {k: v[j] for k, v in result.items()}
      got[qid]["context"] = context

  wrong = [
      qid for qid, g in got.items() if g["answer_text"].decode() != predictions[qid] and
      not _near_tie(g["answer_text"].decode(), predictions[qid], nbest[qid])
  ]
  assert not wrong, [(q, got[q]["answer_text"], predictions[q]) for q in wrong[:5]]
  for qid, g in got.items():
    entries = nbest[qid]
    texts = [t.decode() for t in g["nbest_text"][:len(entries)]]
    assert len(texts) == len(entries), qid
    for i, (text, entry) in enumerate(zip(texts, entries)):
      assert text == entry["text"] or _near_tie(text, entry["text"], entries), (qid, i)
    np.testing.assert_allclose(g["nbest_probability"][:len(entries)],
                               [e["probability"] for e in entries],
                               atol=1e-5)
    np.testing.assert_allclose(g["nbest_score"][:len(entries)],
                               [e["start_logit"] + e["end_logit"] for e in entries],
                               atol=SCORE_ATOL)
    start, end = g["answer_start"], g["answer_end"]
    if start >= 0:  # the offsets point at the answer as written in the context
      assert " ".join(g["context"][start:end].split()) == g["answer_text"].decode()
  if v2:
    null_odds = json.loads((out / "null_odds.json").read_text())
    np.testing.assert_allclose([got[q]["null_score_diff"] for q in null_odds],
                               list(null_odds.values()),
                               atol=1e-4)
