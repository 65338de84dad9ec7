"""The model and the Python API on JAX and PyTorch, against TensorFlow (issue 39).

Keras fixes its backend when imported, so each backend runs in its own process
(`backend_checks.py`); this process (TensorFlow) computes the reference and writes the
`.keras` file the others load.
"""

import importlib.util
import json
import os
import subprocess
import sys

from conftest import dev_environment
from conftest import minilm_dir
from conftest import tiny_model_folder
from conftest import tiny_pretraining_folder
import keras
import numpy as np
import pytest

import official_bert as ob

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import backend_checks  # noqa: E402  pylint: disable=wrong-import-position

pytestmark = pytest.mark.large  # fits and compiles in fresh JAX / PyTorch processes (minutes)

BACKENDS = [pytest.param(name, marks=pytest.mark.skipif(
    importlib.util.find_spec(module) is None, reason=f"{module} is not installed"))
            for name, module in (("jax", "jax"), ("torch", "torch"))]


# JAX compiles every step with XLA, which on the tests' tiny batches costs more than running
# it: LLVM's optimizations off (the same in every run a check compares), and a compilation
# cache, so that a model loaded again (round trips) reuses the steps compiled for the first
# (only programs that took 0.2 s or more to compile: writing and looking up each of the ~400
# one-op programs of eager calls cost more than they saved).
# One thread for XLA's CPU kernels, as TensorFlow's and PyTorch's pools in the test processes
# (conftest.py): the JAX check took 20% more CPU with a pool per core beside the other worker.
FAST_XLA_FLAGS = ("--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true "
                  "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")


def run_on(backend, *command, timeout=600, cache_dir=None):
  env = dict(dev_environment(), KERAS_BACKEND=backend, XLA_PYTHON_CLIENT_PREALLOCATE="false")
  env["XLA_FLAGS"] = " ".join(filter(None, [env.get("XLA_FLAGS"), FAST_XLA_FLAGS]))
  if cache_dir is not None:
    env.update(JAX_COMPILATION_CACHE_DIR=str(cache_dir),
               JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0.2",
               JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")
  env["PYTHONPATH"] = os.pathsep.join([REPO, env.get("PYTHONPATH", "")])
  done = subprocess.run([sys.executable, *command], env=env, capture_output=True, text=True,
                        timeout=timeout, check=False)
  assert done.returncode == 0, done.stderr[-4000:]
  return done.stdout


@pytest.fixture(scope="module")
def tensorflow_reference(tmp_path_factory):
  """A folder with TensorFlow's outputs and a classifier fitted and saved under TensorFlow,
  and a tiny model folder (the checks of a training mechanism that need no real weights)."""
  assert keras.backend.backend() == "tensorflow"
  minilm = minilm_dir()
  work = tmp_path_factory.mktemp("tensorflow_reference")
  tiny_model_folder(work / "tiny")
  backbone = ob.Backbone.from_preset(minilm)
  sequence = keras.ops.convert_to_numpy(backbone(backend_checks.ids_batch())["sequence_output"])
  classifier = ob.TextClassifier.from_preset(minilm, num_classes=2, sequence_length=16)
  classifier.fit(backend_checks.TEXTS, backend_checks.LABELS, epochs=1, batch_size=4, seed=1,
                 verbose=0)
  classifier.save(str(work / "tensorflow_classifier.keras"))
  np.savez(work / "tensorflow_reference.npz", sequence_output=sequence,
           probabilities=classifier.predict(backend_checks.TEXTS))
  _task_folders(work)
  (work / "task_outputs.json").write_text(json.dumps(backend_checks.task_outputs(
      {name: str(work / name) for name in backend_checks.TASK_FOLDERS})))
  return minilm, work


def _task_folders(work):
  """A folder of each other task model on the tiny encoder, every weight N(0, 0.2): larger
  than the init's, so that answers, tags and top tokens stand apart (a near-tie would flip on
  one backend's rounding)."""
  pretraining = tiny_pretraining_folder(work / "pretraining")
  rng = np.random.default_rng(3)
  for name, model in (
      ("tagger", ob.TokenTagger.from_preset(str(work / "tiny"), labels=backend_checks.TAGGER_LABELS,
                                            sequence_length=16)),
      ("question_answerer", ob.QuestionAnswerer.from_preset(str(work / "tiny"),
                                                            sequence_length=96)),
      ("masked_lm", ob.MaskedLM.from_preset(pretraining, sequence_length=16)),
      ("embedder", ob.TextEmbedder.from_preset(str(work / "tiny"), sequence_length=16))):
    for variable in model.weights:
      variable.assign(rng.normal(scale=0.2, size=variable.shape).astype("float32"))
    model.save(str(work / name))


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_api_on_another_backend_matches_tensorflow_and_trains(backend,
                                                                   tensorflow_reference,
                                                                   tmp_path):
  minilm, reference = tensorflow_reference
  work = tmp_path / backend
  work.mkdir()
  for name in ("tensorflow_reference.npz", "tensorflow_classifier.keras"):
    (work / name).write_bytes((reference / name).read_bytes())
  run_on(backend, os.path.join(HERE, "backend_checks.py"), minilm, str(work),
         str(reference / "tiny"), cache_dir=tmp_path / "compilation_cache")
  results = json.loads((work / "results.json").read_text())

  assert results["backend"] == backend
  # The same weights give the same outputs (MiniLM, ids with padding).
  assert results["backbone_max_diff"] < 1e-4
  # A classifier fitted and saved as .keras under TensorFlow predicts the same here.
  assert results["keras_file_max_diff"] < 1e-4
  # fit on raw strings with the default optimizer (clipped AdamW, the task's loss): the loss
  # falls, and predict gives probabilities.
  assert results["loss_after"] < results["loss_before"] - 0.05
  assert results["fit_losses"][-1] < results["fit_losses"][0]
  assert results["predict_shape"] == [4, 2]
  np.testing.assert_allclose(results["predict_row_sums"], 1.0, atol=1e-5)
  # A model saved on this backend (.keras, or a model folder) reads back the same.
  assert results["keras_round_trip_max_diff"] < 1e-6
  assert results["folder_round_trip_max_diff"] < 1e-6
  # Gradient checkpointing (recompute_grad), dropout on: the same loss and gradients.
  assert results["recompute_loss_diff"] < 1e-6
  assert results["recompute_grad_max_diff"] < 1e-5
  if backend == "jax":  # steps_per_execution=4 as one jitted scan: the same training
    assert results["scans"] == 1  # 4 batches of two lengths in one scan; the last alone
    assert results["scan_weight_max_diff"] < 1e-5
    # The encoder's dropout on JAX: masks from a counter hash (hashed_dropout.py). Keep rate
    # 0.9 over 2^20 elements (sd 0.0003), kept units scaled by 1 / 0.9; one mask per seed,
    # and the generator's next draw another (agreement 0.82 = 0.9^2 + 0.1^2 if independent).
    dropout = results["hashed_dropout"]
    assert abs(dropout["keep_rate"] - 0.9) < 0.002
    np.testing.assert_allclose(dropout["kept_values"], [0.0, 1 / 0.9], rtol=1e-5)
    assert dropout["same_seed_same_mask"]
    assert abs(dropout["next_draw_agreement"] - 0.82) < 0.003
    assert dropout["broadcast_along_axis_1"] and abs(dropout["broadcast_keep_rate"] - 0.5) < 0.01
    # Every dropout of the encoder: the embeddings' and 3 per layer (2 layers).
    assert dropout["encoder_hashed_dropouts"] == 7
    # The bench's scan loop (`pretraining_step_keras.jax_scan_run`, the GPU bench's loop with
    # no host work between steps) is Keras' fit step: after 8 steps from one seed, the same
    # weights.
    assert results["bench_fit_moved"] > 0
    assert results["bench_scan_apart"] <= 1e-6 * results["bench_fit_moved"]
    # `python bench/bench_pretraining_step.py --backend=jax --configs=tiny` (issue 39) prints
    # seq/s and MFU on CPU.
    out = results["bench_script_output"]
    assert results["bench_script_exit"] == 0 and "backend=jax" in out, out[-2000:]
    row = next(line.split() for line in out.splitlines() if line.startswith("tiny "))
    seq_per_s, mfu = float(row[2]), float(row[4].rstrip("%"))
    assert seq_per_s > 0 and 0 < mfu < 100
  # A newcomer's first calls: clear errors that leave the model as it was, a LoRA folder.
  newcomer = results["newcomer"]
  assert newcomer["empty_predict_error"] == "predict: x has no examples (an empty list)"
  assert newcomer["after_empty_predict_max_diff"] == 0.0
  assert "needs KERAS_BACKEND=tensorflow" in newcomer["export_error"]
  assert "python -m official_bert.export --checkpoint=FOLDER" in newcomer["export_error"]
  assert newcomer["lora_folder_round_trip_max_diff"] < 1e-6
  first, second = newcomer["seeded_fit_losses"]
  assert first == second, newcomer["seeded_fit_losses"]
  assert "needs the TensorFlow backend" in newcomer["string_input_error"]
  # Every task model's inference from the same folder: TensorFlow's outputs.
  _assert_same_task_outputs(results["task_outputs"],
                            json.loads((reference / "task_outputs.json").read_text()))
  # ... and a folder saved here is an ordinary model folder: TensorFlow reads it too.
  here = np.load(work / f"{backend}_probabilities.npy")
  there = ob.TextClassifier.from_preset(str(work / f"{backend}_folder")).predict(
      backend_checks.TEXTS)
  np.testing.assert_allclose(there, here, atol=1e-4)


def _assert_same_task_outputs(here, tensorflow):
  assert here.keys() == tensorflow.keys()
  for name, value in tensorflow.items():
    if name in ("entities", "answer_texts", "filled_tokens"):
      assert here[name] == value, name
    else:
      np.testing.assert_allclose(here[name], value, atol=1e-4, err_msg=name)
