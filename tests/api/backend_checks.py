"""The Python API on one Keras backend, run by `test_backends.py` as
`KERAS_BACKEND=jax|torch python backend_checks.py MINILM WORK_DIR`.

WORK_DIR holds what TensorFlow computed (`tensorflow_reference.npz`: the backbone's sequence
output on `IDS`, a classifier's probabilities on `TEXTS`) and that classifier's `.keras` file.
Writes `results.json`: the differences and losses the test asserts on.
"""

import json
import os
import sys

import keras
import numpy as np

import official_bert as ob

TEXTS = ["a good film", "a dreadful film", "wonderful acting and a fine plot",
         "boring, slow and far too long"]
LABELS = [1, 0, 1, 0]


def ids_batch():
  """Two sequences, the second padded: the same ids on every backend."""
  mask = np.ones((2, 12), "int32")
  mask[1, 7:] = 0
  ids = (np.arange(24, dtype="int32").reshape(2, 12) * 37 + 101) % 30000 * mask
  return {"input_word_ids": ids, "input_mask": mask,
          "input_type_ids": np.zeros((2, 12), "int32")}


def main(minilm, work):
  reference = np.load(os.path.join(work, "tensorflow_reference.npz"))
  results = {"backend": keras.backend.backend()}

  backbone = ob.Backbone.from_preset(minilm)
  batch = ids_batch()
  sequence = keras.ops.convert_to_numpy(backbone(batch)["sequence_output"])
  real = batch["input_mask"].astype(bool)
  results["backbone_max_diff"] = float(np.abs(sequence - reference["sequence_output"])[real]
                                       .max())

  assert ob.TextClassifier  # imports (registers) the class, which the .keras file names
  loaded = keras.saving.load_model(os.path.join(work, "tensorflow_classifier.keras"))
  probs = loaded.predict(TEXTS)
  results["keras_file_max_diff"] = float(np.abs(probs - reference["probabilities"]).max())

  classifier = ob.TextClassifier.from_preset(minilm, num_classes=2, sequence_length=16)
  classifier.compile(learning_rate=1e-4, warmup_fraction=0.0)
  before = classifier.evaluate(TEXTS * 2, LABELS * 2, return_dict=True, verbose=0)["loss"]
  history = classifier.fit(TEXTS * 2, LABELS * 2, epochs=4, batch_size=4, seed=1, verbose=0)
  after = classifier.evaluate(TEXTS * 2, LABELS * 2, return_dict=True, verbose=0)["loss"]
  results.update(fit_losses=history.history["loss"], loss_before=before, loss_after=after)
  probs = classifier.predict(TEXTS)
  results["predict_shape"] = list(probs.shape)
  results["predict_row_sums"] = probs.sum(axis=1).tolist()

  # Round trips on this backend: the `.keras` file and a model folder.
  path = os.path.join(work, keras.backend.backend() + "_classifier.keras")
  classifier.save(path)
  again = keras.saving.load_model(path).predict(TEXTS)
  results["keras_round_trip_max_diff"] = float(np.abs(again - probs).max())
  folder = os.path.join(work, keras.backend.backend() + "_folder")
  classifier.save(folder)
  again = ob.TextClassifier.from_preset(folder).predict(TEXTS)
  results["folder_round_trip_max_diff"] = float(np.abs(again - probs).max())
  np.save(os.path.join(work, keras.backend.backend() + "_probabilities.npy"), probs)

  with open(os.path.join(work, "results.json"), "w", encoding="utf-8") as f:
    json.dump(results, f)


if __name__ == "__main__":
  main(sys.argv[1], sys.argv[2])
