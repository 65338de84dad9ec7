"""`ob.TextEmbedder.fit`: sentence-embedding training in the Python API (run_embeddings'
task and losses) on a tiny random model folder: training moves retrieval the right way,
scored pairs train with the cosine loss, bad input is refused with the index at fault, and
the trained embedder round-trips through `.keras`, a model folder and the export."""

from conftest import tiny_model_folder
import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  # registers the exported tokenizer's ops

import official_bert as ob

pytestmark = pytest.mark.large  # trains or runs commands: `make test`, not `make test-fast`

WORDS = "cat dog bird fish horse cow sheep goat lion tiger bear wolf".split()
PARTNER = dict(zip(WORDS, WORDS[6:] + WORDS[:6]))


@pytest.fixture(scope="module")
def data(tmp_path_factory):
  path = tiny_model_folder(tmp_path_factory.mktemp("tiny") / "model")
  rng = np.random.default_rng(0)
  first = [" ".join(rng.choice(WORDS, 3)) for _ in range(64)]
  # No word in common: an untrained model cannot match the pairs, a trained one learns to.
  second = [" ".join(PARTNER[w] for w in reversed(t.split())) for t in first]
  scores = rng.integers(0, 6, 64).astype(np.float32)
  return path, first, second, scores


def test_multiple_negatives_fit_improves_retrieval(data):
  path, first, second, _ = data
  keras.utils.set_random_seed(1)
  embedder = ob.TextEmbedder.from_preset(path, sequence_length=16)
  before = embedder.evaluate_retrieval((first[:24], second[:24]))
  embedder.compile(learning_rate=1e-3, warmup_fraction=0.0)
  history = embedder.fit((first, second), batch_size=8, epochs=3, seed=1, verbose=0)
  after = embedder.evaluate_retrieval((first[:24], second[:24]))
  assert set(after) == {"recall@1", "recall@10", "mrr@10"}
  assert after["recall@1"] > before["recall@1"] + 0.2  # 0.125 -> 0.58 here
  assert history.history["loss"][-1] < history.history["loss"][0]
  assert set(history.history) == {"loss", "in_batch_accuracy"}


def test_cosine_fit_validation_and_files(data, tmp_path):
  path, first, second, scores = data
  keras.utils.set_random_seed(2)
  embedder = ob.TextEmbedder.from_preset(path, pooling="cls", sequence_length=16)
  embedder.compile(loss="cosine", learning_rate=1e-3)
  history = embedder.fit((first, second), scores, batch_size=8, epochs=2, verbose=0,
                         validation_data=((first[:16], second[:16]), scores[:16]))
  assert "val_loss" in history.history
  assert embedder.task.score_range == (0.0, 5.0)  # the highest score of y, as the command
  sts = embedder.evaluate_similarity((first[:16], second[:16]), scores[:16])
  assert set(sts) == {"pearson", "spearman"} and -1.0 <= sts["spearman"] <= 1.0

  vectors = embedder.encode(first[:4])
  np.testing.assert_allclose(np.linalg.norm(vectors, axis=-1), 1.0, rtol=1e-5)
  embedder.save(str(tmp_path / "e.keras"))
  loaded = keras.saving.load_model(str(tmp_path / "e.keras"))
  np.testing.assert_allclose(loaded.encode(first[:4]), vectors, atol=1e-6)
  assert loaded._loss_options["loss"] == "cosine"  # compile's loss travels with the file
  embedder.save(str(tmp_path / "folder"))
  again = ob.TextEmbedder.from_preset(str(tmp_path / "folder"))  # cls, 16 from the folder
  assert (again.pooling, again.preprocessor.sequence_length) == ("cls", 16)
  np.testing.assert_allclose(again.encode(first[:4]), vectors, atol=1e-6)
  embedder.export(str(tmp_path / "export"))
  served = tf.saved_model.load(str(tmp_path / "export")).signatures["serving_default"](
      text=tf.constant(first[:4]))
  np.testing.assert_allclose(served["sentence_embedding"].numpy(), vectors, atol=1e-5)


def test_bad_input_names_the_problem(data):
  path, first, second, scores = data
  embedder = ob.TextEmbedder.from_preset(path, sequence_length=16)
  with pytest.raises(ValueError, match=r"x must be a \(first_texts, second_texts\) pair"):
    embedder.fit(first, epochs=1, verbose=0)
  with pytest.raises(ValueError, match="x: 64 first texts but 3 second texts"):
    embedder.fit((first, second[:3]), epochs=1, verbose=0)
  embedder.compile(loss="cosine")
  with pytest.raises(ValueError, match=r"loss='cosine' needs a score per pair"):
    embedder.fit((first, second), epochs=1, verbose=0)
  embedder.compile(loss="contrastive")
  with pytest.raises(ValueError, match=r"y\[0\] = 2: the contrastive loss takes 1"):
    embedder.fit((first[:2], second[:2]), np.array([2.0, 1.0]), epochs=1, verbose=0)
  with pytest.raises(ValueError, match="y has 2 scores for 3 pairs"):
    embedder.fit((first[:3], second[:3]), [1.0, 0.0], epochs=1, verbose=0)
