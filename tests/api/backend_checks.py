"""The Python API on one Keras backend, run by `test_backends.py` as
`KERAS_BACKEND=jax|torch python backend_checks.py MINILM WORK_DIR TINY_DIR` (TINY_DIR: a tiny
random model folder, for the checks of a training mechanism; beside it, a folder of each task
model, `TASK_FOLDERS`).

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

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TEXTS = ["a good film", "a dreadful film", "wonderful acting and a fine plot",
         "boring, slow and far too long"]
LABELS = [1, 0, 1, 0]


# The task models' inference routes (`task_outputs`), each model from a folder with its head,
# written under TensorFlow with weights large enough that no answer or top token is a near-tie.
TAGGER_LABELS = ["O", "B-X", "I-X"]
MASKED_TEXTS = ["a [MASK] film", "[MASK] acting and a [MASK] plot"]
TASK_FOLDERS = ("tagger", "question_answerer", "masked_lm", "embedder")


def task_outputs(folders):
  """Each task model's own inference (`predict`, `answer`, `fill_mask`, `encode`, the tags of
  `predict_entities`) from `folders` [name -> model folder]: {name: list}, JSON's types."""
  tagger = ob.TokenTagger.from_preset(folders["tagger"])
  answerer = ob.QuestionAnswerer.from_preset(folders["question_answerer"])
  masked_lm = ob.MaskedLM.from_preset(folders["masked_lm"])
  embedder = ob.TextEmbedder.from_preset(folders["embedder"])
  answers = answerer.answer(["what was it like"] * 2, TEXTS[2:])
  filled = [pair for text in masked_lm.fill_mask(MASKED_TEXTS, top_k=3) for mask in text
            for pair in mask]
  # At the real pieces: TensorFlow skips the padding, whose rows are then not the model's.
  real = np.asarray(tagger.preprocessor(TEXTS)["input_mask"]).astype(bool)
  return {
      "tagger_probabilities": np.asarray(tagger.predict([t.split() for t in TEXTS]))[real]
                              .tolist(),
      "entities": tagger.predict_entities(TEXTS),
      "answer_texts": [a["text"] for a in answers],
      "answer_scores": [a["score"] for a in answers],
      "filled_tokens": [token for token, _ in filled],
      "filled_probabilities": [p for _, p in filled],
      "embeddings": np.asarray(embedder.encode(TEXTS)).tolist(),
  }


def newcomer_checks(tiny, work):
  """What a user meets first on this backend (a tiny classifier): an empty predict is a
  clear error and leaves the model working (Keras' JAX predict used to break it); a LoRA
  model saves as a folder; a seeded fit repeats; export and a string keras.Input say they
  need TensorFlow.
  {name: value}."""
  out = {}
  classifier = ob.TextClassifier.from_preset(tiny, num_classes=2, sequence_length=8)
  before = classifier.predict(TEXTS)
  try:
    classifier.predict([])
  except ValueError as e:
    out["empty_predict_error"] = str(e)
  out["after_empty_predict_max_diff"] = float(np.abs(classifier.predict(TEXTS) - before).max())
  try:
    classifier.export(os.path.join(work, "export"))
  except ValueError as e:
    out["export_error"] = str(e)
  classifier.backbone.enable_lora(2)
  lora = classifier.predict(TEXTS)
  classifier.save(os.path.join(work, "lora_folder"))
  again = ob.TextClassifier.from_preset(os.path.join(work, "lora_folder")).predict(TEXTS)
  out["lora_folder_round_trip_max_diff"] = float(np.abs(again - lora).max())
  # fit(seed=...) repeats a run, dropout included (torch's dropout draws from torch's own
  # global generator).
  out["seeded_fit_losses"] = [
      ob.TextClassifier.from_preset(tiny, num_classes=2, sequence_length=8).fit(
          TEXTS, LABELS, epochs=1, batch_size=2, seed=3, verbose=0).history["loss"]
      for _ in range(2)]
  preprocessor = ob.Preprocessor.from_preset(tiny, sequence_length=8)
  try:
    preprocessor(keras.Input(shape=(), dtype="string"))
  except ValueError as e:
    out["string_input_error"] = str(e)
  return out


def ids_batch():
  """Two sequences, the second padded: the same ids on every backend."""
  mask = np.ones((2, 12), "int32")
  mask[1, 7:] = 0
  ids = (np.arange(24, dtype="int32").reshape(2, 12) * 37 + 101) % 30000 * mask
  return {"input_word_ids": ids, "input_mask": mask,
          "input_type_ids": np.zeros((2, 12), "int32")}


def loss_and_gradients(recompute_grad):
  """A tiny pretraining model's loss and gradients, dropout on, on this backend."""
  # pylint: disable=g-import-not-at-top
  from official_bert.modeling.bert_config import BertConfig
  from official_bert.modeling.encoder import BertEncoder
  from official_bert.modeling.pretraining_model import BertPretrainingModel
  keras.utils.set_random_seed(3)
  config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=4, intermediate_size=64)
  model = BertPretrainingModel(BertEncoder.from_bert_config(config))
  model.build()
  model.encoder.recompute_grad = recompute_grad
  rng = np.random.default_rng(0)
  x = dict(ids_batch(), masked_lm_positions=rng.integers(0, 7, (2, 4)).astype("int32"))
  x["input_word_ids"] = x["input_word_ids"] % 100
  if keras.backend.backend() == "jax":
    import jax
    trainable = [v.value for v in model.trainable_variables]
    others = [v.value for v in model.non_trainable_variables]

    def loss_fn(trainable):
      out, _ = model.stateless_call(trainable, others, x, training=True)
      return (out["masked_lm_logits"].astype("float32") ** 2).mean()
    loss, grads = jax.jit(jax.value_and_grad(loss_fn))(trainable)
    return float(loss), [np.asarray(g) for g in grads]
  loss = (model(x, training=True)["masked_lm_logits"] ** 2).mean()
  loss.backward()
  return float(loss), [np.zeros(1) if v.value.grad is None else v.value.grad.cpu().numpy()
                       for v in model.trainable_variables]


def hashed_dropout_checks():
  """JAX: the encoder's dropout (`modeling/layers/hashed_dropout`): its keep rate, scaling,
  determinism for a seed, noise shape, and how many of a tiny encoder's dropouts use it."""
  # pylint: disable=g-import-not-at-top
  from official_bert.modeling.bert_config import BertConfig
  from official_bert.modeling.encoder import BertEncoder
  from official_bert.modeling.layers import hashed_dropout
  ones = np.ones((64, 4, 64, 64), "float32")  # 1,048,576 elements
  first = np.asarray(hashed_dropout.dropout(ones, 0.1, None, keras.random.SeedGenerator(7)))
  again = np.asarray(hashed_dropout.dropout(ones, 0.1, None, keras.random.SeedGenerator(7)))
  generator = keras.random.SeedGenerator(7)
  draws = [np.asarray(hashed_dropout.dropout(ones, 0.1, None, generator)) > 0
           for _ in range(2)]
  broadcast = np.asarray(hashed_dropout.dropout(ones, 0.5, (64, 1, 64, 64),
                                                keras.random.SeedGenerator(8)))
  calls = []
  original = hashed_dropout._hashed_dropout_jax  # pylint: disable=protected-access
  hashed_dropout._hashed_dropout_jax = lambda *a: calls.append(1) or original(*a)  # pylint: disable=protected-access
  config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=4, intermediate_size=64)
  encoder = BertEncoder.from_bert_config(config)
  encoder({k: v % 100 for k, v in ids_batch().items()}, training=True)
  hashed_dropout._hashed_dropout_jax = original  # pylint: disable=protected-access
  return {"keep_rate": float((first > 0).mean()),
          "kept_values": sorted(set(np.unique(first).round(5).tolist())),
          "same_seed_same_mask": bool((first == again).all()),
          "next_draw_agreement": float((draws[0] == draws[1]).mean()),
          "broadcast_along_axis_1": bool((broadcast == broadcast[:, :1]).all()),
          "broadcast_keep_rate": float((broadcast > 0).mean()),
          "encoder_hashed_dropouts": len(calls)}


def steps_per_execution_weights(model_dir):
  """JAX: a classifier fitted with steps_per_execution=4 (one jitted scan per 4 steps,
  `api/jax_steps`) and with 1, dropout off (its masks' shapes follow the batches' cut length):
  the largest weight difference, and how many scans fit ran."""
  weights, scans = [], 0
  # Unshuffled batches of 4: two short texts' (bucket 8), two long ones' (16), then "fine"
  # and "bad": the first scan pads two batches, the last batch takes a step of its own.
  texts = [t for t in TEXTS for _ in range(4)] + ["fine", "bad"]
  labels = [label for label in LABELS for _ in range(4)] + [1, 0]
  for steps in (1, 4):
    classifier = ob.TextClassifier.from_preset(model_dir, num_classes=2, sequence_length=16)
    for layer in classifier._flatten_layers():  # pylint: disable=protected-access
      if isinstance(layer, keras.layers.Dropout):
        layer.rate = 0.0
    classifier.compile(learning_rate=1e-4, warmup_fraction=0.0, steps_per_execution=steps)
    classifier.fit(texts, labels, epochs=1, batch_size=4, seed=1, shuffle=False, verbose=0)
    weights.append([np.asarray(v.value) for v in classifier.trainable_variables])
    scans = getattr(classifier.train_function, "scans", 0)
  return max(float(np.abs(a - b).max()) for a, b in zip(*weights)), scans


def bench_scan_weights():
  """JAX: `bench/pretraining_step_keras.jax_scan_run` (the GPU bench's loop without host work
  between steps) against Keras' fit step, 8 steps each from the same seed: how far fit moved
  the weights, and how far apart the two loops end."""
  sys.path.insert(0, os.path.join(REPO, "bench"))
  import pretraining_step_keras as p  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  cfg = p.config("tiny", REPO)
  weights = {}
  for loop in ("fit", "scan"):
    run, _ = p.build_step(cfg, 4, 32, 4, loop=loop)
    if loop == "fit":
      start = [np.asarray(v.value) for v in run.model.trainable_variables]
    run(8)  # two scans of the 4 synthetic batches; fit: 8 steps over the same batches
    weights[loop] = [np.asarray(v.value) for v in run.model.trainable_variables]
  moved = max(float(np.abs(a - b).max()) for a, b in zip(start, weights["fit"]))
  apart = max(float(np.abs(a - b).max()) for a, b in zip(weights["fit"], weights["scan"]))
  return moved, apart


def bench_script_output():
  """JAX: `python bench/bench_pretraining_step.py --backend=jax --configs=tiny ...` as a
  script (`runpy`, its `__main__` dispatch to the Keras-only step included), last in this
  process so that nothing it sets reaches another check: (exit status, what it printed)."""
  import contextlib  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  import io  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  import runpy  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  path = os.path.join(REPO, "bench", "bench_pretraining_step.py")
  saved, out, code = sys.argv, io.StringIO(), 0
  sys.argv = [path, "--backend=jax", "--configs=tiny", "--batch=4", "--seq=32", "--preds=4",
              "--steps=2", "--warmup=1", "--repeats=1", "--matmul_size=256"]
  try:
    with contextlib.redirect_stdout(out):
      runpy.run_path(path, run_name="__main__")
  except SystemExit as e:
    code = e.code or 0
  finally:
    sys.argv = saved
  return code, out.getvalue()


def main(minilm, work, tiny):
  reference = np.load(os.path.join(work, "tensorflow_reference.npz"))
  results = {"backend": keras.backend.backend()}

  backbone = ob.Backbone.from_preset(minilm)
  batch = ids_batch()
  sequence = keras.ops.convert_to_numpy(backbone(batch)["sequence_output"])
  real = batch["input_mask"].astype(bool)
  results["backbone_max_diff"] = float(np.abs(sequence - reference["sequence_output"])[real]
                                       .max())

  # No class touched first: `import official_bert` registered them with Keras.
  loaded = keras.saving.load_model(os.path.join(work, "tensorflow_classifier.keras"))
  probs = loaded.predict(TEXTS)
  results["keras_file_max_diff"] = float(np.abs(probs - reference["probabilities"]).max())

  classifier = ob.TextClassifier.from_preset(minilm, num_classes=2, sequence_length=16)
  # One step per epoch (the whole batch): MiniLM's AdamW update is most of a step's time.
  classifier.compile(learning_rate=2e-4, warmup_fraction=0.0)
  before = classifier.evaluate(TEXTS * 2, LABELS * 2, return_dict=True, verbose=0)["loss"]
  history = classifier.fit(TEXTS * 2, LABELS * 2, epochs=4, batch_size=8, seed=1, verbose=0)
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

  (plain_loss, plain), (recomputed_loss, recomputed) = (loss_and_gradients(False),
                                                         loss_and_gradients(True))
  results["recompute_loss_diff"] = abs(plain_loss - recomputed_loss)
  results["recompute_grad_max_diff"] = max(float(np.abs(a - b).max())
                                           for a, b in zip(plain, recomputed))

  results["task_outputs"] = task_outputs(
      {name: os.path.join(os.path.dirname(tiny), name) for name in TASK_FOLDERS})

  results["newcomer"] = newcomer_checks(tiny, work)

  if keras.backend.backend() == "jax":
    results["scan_weight_max_diff"], results["scans"] = steps_per_execution_weights(tiny)
    results["hashed_dropout"] = hashed_dropout_checks()
    results["bench_fit_moved"], results["bench_scan_apart"] = bench_scan_weights()
    results["bench_script_exit"], results["bench_script_output"] = bench_script_output()

  with open(os.path.join(work, "results.json"), "w", encoding="utf-8") as f:
    json.dump(results, f)


if __name__ == "__main__":
  main(*sys.argv[1:4])
