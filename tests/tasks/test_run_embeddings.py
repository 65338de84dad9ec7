"""run_embeddings (sentence-embedding training on text pairs): the losses against numpy
references, the STS and retrieval scores, the pair files, and a tiny run end to end whose
OUTPUT_DIR exports (no flag but --checkpoint) to a SavedModel that a process importing only
TensorFlow and tensorflow-text queries, and extract_features reads with the same vectors."""

import dataclasses
import json
import os
import subprocess
import sys

from conftest import REPO
from conftest import TINY_CONFIG
from conftest import UNCASED_VOCAB
from conftest import run_command
from conftest import tiny_model_folder
import numpy as np
import pytest
import tensorflow as tf

from data_prep.classification import features as classifier_features
from data_prep.embeddings import pairs
import official_bert as ob
from official_bert.modeling.bert_config import BertConfig
from official_bert.serving import feature_extraction
from official_bert.tasks import embedding_job
from official_bert.tasks import embedding_losses
from official_bert.tasks import metrics
from official_bert.tasks.embedding import EmbeddingTask
from official_bert.tasks.embedding import cosine_score_range
from official_bert.training import finetuning_runner

pytestmark = pytest.mark.large  # trains or runs commands: `make test`, not `make test-fast`

VOCAB = UNCASED_VOCAB
TINY = BertConfig(**TINY_CONFIG)
WORDS = "cat dog bird fish horse cow sheep goat lion tiger bear wolf".split()


def _unit(x):
  return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _log_softmax(z):
  z = z - z.max(-1, keepdims=True)
  return z - np.log(np.exp(z).sum(-1, keepdims=True))


# ------------------------------------------------------------------------------- losses

def test_losses_equal_numpy_references():
  rng = np.random.default_rng(0)
  a, b = rng.normal(size=[5, 8]).astype(np.float32), rng.normal(size=[5, 8]).astype(np.float32)
  real = np.array([1, 1, 1, 1, 0], np.float32)  # the last pair pads the batch
  cos = _unit(a) @ _unit(b).T  # [5, 5]
  masked = np.where(real[None, :] > 0, 20.0 * cos, -1e9)
  forward = -np.diag(_log_softmax(masked))
  np.testing.assert_allclose(embedding_losses.multiple_negatives(a, b, real, 20.0)[:4],
                             forward[:4], rtol=1e-5)
  backward = -np.diag(_log_softmax(np.where(real[None, :] > 0, 20.0 * cos.T, -1e9)))
  np.testing.assert_allclose(embedding_losses.multiple_negatives(a, b, real, 20.0, True)[:4],
                             (forward[:4] + backward[:4]) / 2, rtol=1e-5)
  target = np.array([0.0, 0.2, 0.5, 1.0, 0.7], np.float32)
  np.testing.assert_allclose(embedding_losses.cosine_similarity(a, b, target),
                             (np.diag(cos) - target)**2, rtol=1e-5, atol=1e-7)
  label = np.array([1, 0, 1, 0, 0], np.float32)
  distance = 1 - np.diag(cos)
  expected = 0.5 * (label * distance**2 + (1 - label) * np.maximum(0.5 - distance, 0)**2)
  np.testing.assert_allclose(embedding_losses.contrastive(a, b, label, 0.5), expected,
                             rtol=1e-5, atol=1e-7)
  hits = embedding_losses.in_batch_hits(a, a + 0.01 * b, real).numpy()
  np.testing.assert_array_equal(hits[:4], 1.0)


def test_task_skips_padding_and_pairs_without_scores():
  task = EmbeddingTask(None, 4, "cosine", score_range=(0.0, 5.0))
  rng = np.random.default_rng(1)
  pairs_ = rng.normal(size=[3, 2, 8]).astype(np.float32)
  features = {"scores": tf.constant([[5.0], [np.nan], [2.5]]),
              "is_real_example": tf.constant([[1], [1], [0]])}
  outputs = {"embeddings": tf.constant(pairs_)}
  cos = np.sum(_unit(pairs_[:, 0]) * _unit(pairs_[:, 1]), -1)
  assert float(task.loss_normalizers(features)["cosine_loss"]) == 1.0  # only pair 0 counts
  np.testing.assert_allclose(float(task.loss_sums(features, outputs)["cosine_loss"]),
                             (cos[0] - 1.0)**2, rtol=1e-5)
  with pytest.raises(ValueError, match="loss='hinge' must be one of"):
    EmbeddingTask(None, 4, "hinge")


def test_cosine_score_range_is_one_rule(tmp_path):
  """run_embeddings, TextEmbedder.fit (tests/api) and EmbeddingTask share one rule."""
  assert cosine_score_range([1.0, 4.0, 2.5]) == (0.0, 4.0)  # 0 to the highest score
  assert cosine_score_range(None) == (0.0, 1.0) and cosine_score_range([3], 1, 5) == (1.0, 5.0)
  with pytest.raises(ValueError, match=r"range \(2, 2\): the highest score must be above the "
                     r"lowest \(--min_score"):
    cosine_score_range([2.0], 2.0, hint=" (--min_score, --max_score)")
  with pytest.raises(ValueError, match=r"range \(3, 3\): the highest score must be above"):
    EmbeddingTask(None, 4, "cosine", score_range=(3.0, 3.0))
  graded = _jsonl(tmp_path / "g.jsonl", [{"a": "x", "b": "y", "s": 1}, {"a": "z", "b": "w",
                                                                         "s": 3.5}])
  settings = embedding_job.EmbeddingSettings(
      train_file=graded, text_column="a", text_b_column="b", score_column="s", loss="cosine",
      output_dir=str(tmp_path / "out"), do_train=True)
  job = embedding_job.EmbeddingJob(settings)
  job.data["train"] = job._read("train")
  assert job._score_range() == (0.0, 3.5)
  job.settings = dataclasses.replace(settings, min_score=4.0)
  with pytest.raises(ValueError, match=r"range \(4, 3.5\).*\(--min_score, --max_score\)"):
    job._score_range()


# ------------------------------------------------------------------------------- scores

def test_retrieval_and_similarity_scores():
  queries = np.array([[1, 0], [0, 1], [1, 1], [1, -1]], np.float32)
  candidates = np.array([[1, 0.1], [0.1, 1], [-1, 1]], np.float32)
  # Ranks of the right candidate: query 0 -> 0 (1st), 1 -> 1 (1st), 2 -> 2 (3rd), 3 -> 0 (1st).
  scores = metrics.retrieval_scores(queries, candidates, [0, 1, 2, 0], ks=(1, 2))
  assert scores == {"recall@1": 0.75, "recall@2": 0.75, "mrr@2": 0.75}
  scores = metrics.retrieval_scores(queries, candidates, [0, 1, 2, 0], ks=(1, 10))
  assert scores["recall@10"] == 1.0 and scores["mrr@10"] == pytest.approx((3 + 1 / 3) / 4)
  # A second text repeated across pairs is one candidate: both queries find it first.
  repeated = metrics.pair_retrieval_scores(queries[:2], np.array([[1, 0], [1, 0]]), ["x", "x"])
  assert repeated["recall@1"] == 1.0
  first = np.array([[1, 0], [1, 0], [1, 0]], np.float32)
  second = np.array([[1, 0], [1, 1], [0, 1]], np.float32)
  sts = metrics.similarity_scores(first, second, [5.0, 2.0, 0.0])
  assert sts["spearman"] == pytest.approx(1.0)
  assert sts["pearson"] == pytest.approx(np.corrcoef([1, 2**-0.5, 0], [5, 2, 0])[0, 1])


# ------------------------------------------------------------------------------- files

def _jsonl(path, records):
  path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
  return str(path)


def test_pair_files_and_their_errors(tmp_path):
  scored = _jsonl(tmp_path / "s.jsonl", [{"a": "x y", "b": "y", "s": 1}, {"a": "z", "b": "w",
                                                                          "s": 0}])
  data = pairs.read_pairs(scored, "a", "b", "s", need_scores=True)
  assert data.has_labels and [e.label for e in data.examples] == [1.0, 0.0]
  pairs.check_binary(data.examples, scored, data.lines)
  positive = pairs.read_pairs(scored, "a", "b")  # no --score_column: positive pairs
  assert not positive.has_labels
  with pytest.raises(ValueError, match="needs a gold score per pair: set --score_column"):
    pairs.read_pairs(scored, "a", "b", None, need_scores=True)
  with pytest.raises(ValueError, match=r"s.jsonl: no column 'c'; columns: a, b, s"):
    pairs.read_pairs(scored, "a", "c")
  graded = _jsonl(tmp_path / "g.jsonl", [{"a": "x", "b": "y", "s": 1}, {"a": "z", "b": "w",
                                                                         "s": 3.5}])
  data = pairs.read_pairs(graded, "a", "b", "s", need_scores=True)
  with pytest.raises(ValueError, match=r"g.jsonl:2: score 3.5: the contrastive loss takes 1"):
    pairs.check_binary(data.examples, graded, data.lines)
  tokenizer = classifier_features.cached_tokenizer(VOCAB, True)
  columns = pairs.convert_pairs(data.examples, True, 6, tokenizer)
  ids = columns["input_ids"].reshape([2, 2, 6])
  cls, sep = tokenizer.vocab["[CLS]"], tokenizer.vocab["[SEP]"]
  assert ids[0, 0, :3].tolist() == [cls, tokenizer.vocab["x"], sep]  # each text on its own
  assert ids[0, 1, :3].tolist() == [cls, tokenizer.vocab["y"], sep]
  assert columns["scores"].ravel().tolist() == [1.0, 3.5]
  unscored = pairs.convert_pairs(data.examples, False, 6, tokenizer)
  assert np.isnan(unscored["scores"]).all()


# ------------------------------------------------------------------------------- a run

@pytest.fixture(scope="module")
def trained(tmp_path_factory):
  """run_embeddings in-process: multiple negatives, [CLS] pooling, retrieval dev file."""
  root = tmp_path_factory.mktemp("embeddings")
  model = tiny_model_folder(root / "tiny")
  rng = np.random.default_rng(0)
  queries = [" ".join(rng.choice(WORDS, 3)) for _ in range(48)]
  rows = [{"id": f"p{i}", "query": q, "answer": q + " " + str(rng.choice(WORDS))}
          for i, q in enumerate(queries)]
  train, dev = _jsonl(root / "train.jsonl", rows), _jsonl(root / "dev.jsonl", rows[:16])
  settings = embedding_job.EmbeddingSettings(
      init_checkpoint=model, train_file=train, dev_file=dev, test_file=dev,
      text_column="query", text_b_column="answer", pooling="cls", output_dir=str(root / "out"),
      do_train=True, do_eval=True, do_predict=True, max_seq_length=16, train_batch_size=8,
      learning_rate=1e-3, num_train_epochs=2, eval_every_steps=6, steps_per_loop=6)
  untrained = ob.TextEmbedder.from_preset(model, pooling="cls", sequence_length=16)
  before = untrained.evaluate_retrieval(([r["query"] for r in rows[:16]],
                                         [r["answer"] for r in rows[:16]]))
  results = finetuning_runner.run(settings, embedding_job.EmbeddingJob(settings))
  return {"root": root, "out": root / "out", "results": results, "before": before,
          "texts": [r["query"] for r in rows[:6]], "dev": dev}


def test_run_scores_retrieval_and_keeps_the_embedder_settings(trained):
  out, dev = trained["out"], trained["results"]["dev"]
  assert {"recall@1", "recall@10", "mrr@10", "multiple_negatives_loss",
          "in_batch_accuracy"} <= set(dev)
  assert dev["mrr@10"] >= trained["before"]["mrr@10"]
  written = dict(line.strip().split(" = ") for line in open(out / "eval_results.txt"))
  assert float(written["recall@1"]) == pytest.approx(dev["recall@1"])
  assert (out / "best").is_dir()  # --best_metric's default: mrr@10
  stored = json.loads((out / "run_settings.json").read_text())
  assert stored["model_type"] == "encoder" and stored["embedder"]["pooling"] == "cls"
  assert stored["embedder"]["normalize_embeddings"] is True
  rows = [line.rstrip("\n").split("\t") for line in open(out / "test_predictions.tsv")]
  assert rows[0] == ["id", "cosine_similarity"] and [r[0] for r in rows[1:]] == [
      f"p{i}" for i in range(16)]
  assert all(-1.0 <= float(r[1]) <= 1.0 for r in rows[1:])


def test_export_and_extract_features_serve_the_trained_embedder(trained, tmp_path):
  out, texts = trained["out"], trained["texts"]
  expected = ob.TextEmbedder.from_preset(str(out)).encode(texts)  # cls, normalized, 16
  np.testing.assert_allclose(np.linalg.norm(expected, axis=-1), 1.0, rtol=1e-5)
  export_dir = tmp_path / "export"
  proc = run_command("official_bert.export", f"--checkpoint={out}",
                     f"--export_dir={export_dir}")  # the model type from the run record
  assert proc.returncode == 0, proc.stderr[-3000:]
  info = json.loads((export_dir / "assets.extra" / "export_info.json").read_text())
  assert (info["pooling"], info["normalize_embeddings"], info["max_seq_length"]) == (
      "cls", True, 16)
  # (That an export serves in a process that imports nothing of ours: test_export.py.)
  served = tf.saved_model.load(str(export_dir)).signatures["serving_default"](
      text=tf.constant(texts))
  np.testing.assert_allclose(served["sentence_embedding"].numpy(), expected, atol=1e-5)

  lines = tmp_path / "lines.txt"
  lines.write_text("\n".join(texts) + "\n", encoding="utf-8")
  settings = feature_extraction.ExtractSettings(
      input_file=str(lines), output_file=str(tmp_path / "vectors.npz"),
      init_checkpoint=str(out), max_seq_length=16)
  extracted = feature_extraction.run(feature_extraction.embedder_settings(settings, set()))
  np.testing.assert_allclose(extracted, expected, atol=1e-5)
  mean = feature_extraction.run(feature_extraction.embedder_settings(
      dataclasses.replace(settings, pooling="mean"), {"pooling"}))
  assert not np.allclose(mean, expected, atol=1e-3)  # a given --pooling wins


def test_command_errors_name_the_file_and_line(tmp_path):
  graded = _jsonl(tmp_path / "graded.jsonl", [{"a": "x", "b": "y", "s": 1},
                                              {"a": "z", "b": "w", "s": 4}])
  config = tmp_path / "bert_config.json"
  config.write_text(TINY.to_json_string(), encoding="utf-8")
  proc = subprocess.run(
      [sys.executable, "-m", "official_bert.run_embeddings", f"--train_file={graded}",
       f"--bert_config_file={config}",
       "--text_column=a", "--text_b_column=b", "--score_column=s", "--loss=contrastive",
       f"--vocab_file={VOCAB}", "--do_train", "--max_seq_length=16",
       f"--output_dir={tmp_path / 'out'}"],
      cwd=REPO, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES=""),
      capture_output=True, text=True, timeout=300, check=False)
  assert proc.returncode == 1, proc.stderr[-3000:]
  assert "graded.jsonl:2: score 4: the contrastive loss takes 1 (similar) or 0" in proc.stderr
