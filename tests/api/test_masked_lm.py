"""`ob.MaskedLM` as a whole task model: fit on raw texts (dynamic masking, the commands'
loss and step), evaluate, save -> from_preset, and its folder exported by the `export`
command with no flag but --checkpoint/--export_dir serves what `fill_mask` gives."""


import harness
import numpy as np
import pytest
import tensorflow_text  # noqa: F401  # registers the exported tokenizer's ops

import official_bert as ob
from official_bert.interop import model_files

pytestmark = pytest.mark.large  # trains and exports

TEXTS = ["the cat sat on the mat", "a dog ran in the park", "the bird sang a song",
         "we went to the sea", "the sun is hot today", "she read a good book"]


@pytest.fixture(name="pretrained", scope="module")
def fixture_pretrained(tmp_path_factory):
  """A random pretraining folder (masked LM + next sentence heads)."""
  return harness.tiny_pretraining(tmp_path_factory.mktemp("pretrained") / "model")


@pytest.fixture(name="fitted", scope="module")
def fixture_fitted(pretrained):
  """A masked LM of `pretrained` fitted on TEXTS: (model, its weights as loaded, evaluate's
  results before and after, fit's history)."""
  mlm = ob.MaskedLM.from_preset(pretrained, sequence_length=16)
  loaded = [w.numpy() for w in mlm.network.weights]
  mlm.compile(learning_rate=2e-3, warmup_fraction=0.0)
  before = mlm.evaluate(TEXTS * 4, batch_size=8, return_dict=True, verbose=0)
  history = mlm.fit(TEXTS * 8, epochs=6, batch_size=8, seed=1, verbose=0,
                    validation_data=TEXTS * 2)
  after = mlm.evaluate(TEXTS * 4, batch_size=8, return_dict=True, verbose=0)
  return mlm, loaded, before, after, history


def test_fit_masks_as_the_writer_and_learns(pretrained, fitted):
  mlm = ob.MaskedLM.from_preset(pretrained, sequence_length=16)
  assert mlm.next_sentence and mlm.max_predictions_per_seq == 3  # ceil(0.15 * 16)
  # The batches: the masked tokens' labels are the text's own ids, inside the real tokens.
  plain = mlm.preprocessor(TEXTS)
  batch = next(iter(mlm.make_dataset(TEXTS, batch_size=6, seed=3)))[0]
  again = next(iter(mlm.make_dataset(TEXTS, batch_size=6, seed=3)))[0]
  np.testing.assert_array_equal(batch["input_word_ids"], again["input_word_ids"])  # the seed
  weights = batch["masked_lm_weights"].numpy()
  assert weights.sum(axis=1).min() >= 1
  positions = batch["masked_lm_positions"].numpy()
  real = plain["input_mask"].numpy().sum(axis=1)
  for row in range(6):
    for slot in np.flatnonzero(weights[row]):
      position = positions[row, slot]
      assert 0 < position < real[row] - 1  # never [CLS] or [SEP]
      assert batch["masked_lm_ids"][row, slot] == plain["input_word_ids"][row, position]
  # fit's batches: a second pass over the data (an epoch) draws new masks; evaluation's
  # (make_dataset, validation data) are the same on every pass.
  training = mlm._dataset(TEXTS * 4, None, 24, seed=3, training=True)  # noqa: SLF001
  first, second = (next(iter(training))[0]["masked_lm_positions"] for _ in range(2))
  assert not np.array_equal(first, second)
  evaluation = mlm.make_dataset(TEXTS * 4, batch_size=24)
  first, second = (next(iter(evaluation))[0]["masked_lm_positions"] for _ in range(2))
  np.testing.assert_array_equal(first, second)

  mlm, loaded, before, after, history = fitted
  assert after == mlm.evaluate(TEXTS * 4, batch_size=8, return_dict=True, verbose=0)
  assert set(history.history) == {"loss", "masked_lm_accuracy", "val_loss",
                                  "val_masked_lm_accuracy"}
  assert after["loss"] < before["loss"] - 1.0, (before, after)
  assert after["masked_lm_accuracy"] > before["masked_lm_accuracy"]
  # The next-sentence head and the pooler it reads are kept as loaded (no pairs to train
  # them on; not even weight decay).
  kept = {id(w) for layer in (mlm.network.next_sentence_head, mlm.backbone.pooler_dense)
          for w in layer.weights}
  assert len(kept) == 4  # each layer's kernel and bias
  for got, start in zip(mlm.network.weights, loaded, strict=True):
    if id(got) in kept:
      np.testing.assert_array_equal(got.numpy(), start)
  with pytest.raises(ValueError, match="y must be None"):
    mlm.fit(TEXTS, ["a"] * len(TEXTS))


def test_fitted_model_saves_loads_and_exports_by_the_command(fitted, tmp_path):
  mlm = fitted[0]
  texts = ["the cat sat on the [MASK]", "a [MASK] ran in the [MASK]"]
  filled = mlm.fill_mask(texts, top_k=3)
  assert mlm.predict(texts, top_k=3) == filled
  saved = harness.run_save_load_test(mlm, tmp_path, lambda m: m.fill_mask(texts, top_k=3))
  assert model_files.read_run_settings(saved).model_type == "pretraining"
  # fill_mask's [MASK]s in order: the export's [text, mask, k] outputs, the absent mask empty.
  tokens = [[[t for t, _ in pairs] for pairs in masks] for masks in filled]
  probabilities = [[[p for _, p in pairs] for pairs in masks] for masks in filled]
  served = harness.run_export_test(saved, tmp_path / "export", "serving_default",
                                   {"text": texts}, {}, "--top_k=3")
  for row, masks in enumerate(filled):
    assert [[t.decode() for t in served["masked_lm_top_tokens"][row, slot]]
            for slot in range(len(masks))] == tokens[row]
    np.testing.assert_allclose(served["masked_lm_top_probabilities"][row, :len(masks)],
                               probabilities[row], atol=1e-5)
