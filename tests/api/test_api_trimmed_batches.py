"""The Python API does no work on padding: batches cut to their longest text, the Transformer
layers of evaluate and predict on the real tokens only, same outputs."""

from conftest import tiny_model_folder
import numpy as np
import pytest
import tensorflow as tf

import official_bert as ob
from official_bert.modeling.tensorflow_only import token_packing

pytestmark = pytest.mark.large  # trains or runs commands: `make test`, not `make test-fast`

TEXTS = ["a cat", "the dog sat on the mat", "who", "the man played the guitar on the mat"]


def test_classifier_and_embedder_batches_are_cut_and_give_the_fixed_length_outputs(
    tmp_path, monkeypatch):
  packings = []  # masks the encoder packed its real tokens for

  class CountedPacking(token_packing.TokenPacking):

    def __init__(self, mask):
      packings.append(mask)
      super().__init__(mask)

  monkeypatch.setattr(token_packing, "TokenPacking", CountedPacking)
  folder = tiny_model_folder(tmp_path / "model")
  classifier = ob.TextClassifier.from_preset(folder, num_classes=2, sequence_length=64)
  features, labels = next(iter(classifier.make_dataset(TEXTS[:2], [0, 1], batch_size=2)))
  # [CLS] the dog sat on the mat [SEP]: 8 tokens, the 8 bucket (`training.padding`).
  assert features["input_word_ids"].shape == (2, 8) and list(labels.numpy()) == [0, 1]
  full = classifier.preprocessor(TEXTS)  # [4, 64]
  logits = classifier.network(full, training=False)["logits"].numpy()
  want = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
  np.testing.assert_allclose(classifier.predict(TEXTS, batch_size=2), want, atol=1e-5)
  # predict ran the Transformer layers on the real tokens only, as the exports do; the
  # backbone keeps its own setting for other calls.
  assert packings and not classifier.backbone.skip_padding
  history = classifier.fit(TEXTS, [0, 1, 0, 1], batch_size=2, epochs=1, verbose=0)
  assert np.isfinite(history.history["loss"]).all()
  trained = classifier.predict(TEXTS, batch_size=2)
  classifier.compile(jit_compile=True)  # XLA takes static shapes only: the padded graph
  packings.clear()
  np.testing.assert_allclose(classifier.predict(TEXTS, batch_size=2), trained, atol=1e-5)
  assert not packings

  embedder = ob.TextEmbedder.from_preset(folder, sequence_length=64)
  pairs, _ = next(iter(embedder.make_dataset((TEXTS[:2], TEXTS[2:]), [1.0, 0.0], batch_size=2)))
  assert pairs["input_word_ids"].shape == (2, 2, 16)  # the longest text of either side: 10
  full = embedder.preprocessor(TEXTS)
  want = embedder.network(full, training=False)["embeddings"].numpy()
  np.testing.assert_allclose(embedder.encode(TEXTS, batch_size=4), want, atol=1e-5)
  assert tf.reduce_all(tf.shape(full["input_word_ids"]) == [4, 64])  # the layer keeps its length
