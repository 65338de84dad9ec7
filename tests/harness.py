"""The one test harness of models and tasks (as keras-hub's `TestCase`): one tiny config, and
the round trips every model and task test runs, each asserting its values.

  model = ob.TextClassifier.from_preset(tiny_folder(tmp_path / "m"), ...)
  run_fit_test(model, x, y)                          # fit lowers the loss
  run_save_load_test(model, tmp_path, outputs)       # save -> from_preset, .keras: same outputs
  run_export_test(folder, tmp_path, signature, inputs, expected)  # the CLI export serves them

`outputs(model)` is the test's own function of a model (e.g. `lambda m: m.predict(TEXTS)`);
outputs are compared to 1e-5. Exports go through the `export` command (in this process, its
own launcher) with no flag but --checkpoint and --export_dir: a folder's run record must
say the rest.
"""

import os

from conftest import TINY_CONFIG
from conftest import run_command
from conftest import tiny_model_folder
from conftest import tiny_pretraining_folder
import keras
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  # registers the exported tokenizer's ops

from official_bert.modeling.bert_config import BertConfig

TINY = BertConfig(**TINY_CONFIG)  # the tiny model of every in-process test
tiny_folder = tiny_model_folder  # a pretrained-like folder of TINY: path -> path
tiny_pretraining = tiny_pretraining_folder  # the same with the pretraining heads


def assert_outputs_close(got, want, atol=1e-5, what="outputs"):
  """Equal structures of arrays (or of floats, strings, lists) to `atol`."""
  got_flat, want_flat = tf.nest.flatten(got), tf.nest.flatten(want)
  assert len(got_flat) == len(want_flat), (what, got, want)
  for a, b in zip(got_flat, want_flat):
    if isinstance(b, (str, bytes)):
      assert a == b, (what, got, want)
    else:
      np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64),
                                 atol=atol, err_msg=what)


def run_fit_test(model, x, y=None, epochs=4, batch_size=4, learning_rate=1e-2, seed=3,
                 factor=1.0):
  """`fit` (compiled with the default recipe at `learning_rate`) lowers the loss from its
  first epoch to its last (below `factor` times the first); returns the history dict."""
  model.compile(learning_rate=learning_rate, warmup_fraction=0.0)
  history = model.fit(x, y, batch_size=batch_size, epochs=epochs, seed=seed, verbose=0).history
  losses = history["loss"]
  assert losses[-1] < losses[0] * factor, losses
  return history


def run_save_load_test(model, tmp_path, outputs, keras_format=True):
  """`save(folder)` -> `from_preset(folder)` gives the same `outputs(model)`; so does the
  `.keras` file (`keras.saving.load_model`) when `keras_format`. Returns the folder."""
  expected = outputs(model)
  folder = os.path.join(str(tmp_path), "saved")
  model.save(folder)
  assert_outputs_close(outputs(type(model).from_preset(folder)), expected,
                       what="from_preset(save(...))")
  if keras_format:
    path = os.path.join(str(tmp_path), "saved.keras")
    model.save(path)
    assert_outputs_close(outputs(keras.saving.load_model(path)), expected,
                         what="keras.saving.load_model")
  return folder


def serve(folder, export_dir, *flags):
  """`export --checkpoint=folder --export_dir=export_dir [flags]` (the command); the loaded
  SavedModel's signatures."""
  proc = run_command("official_bert.export", f"--checkpoint={folder}",
                     f"--export_dir={export_dir}", *flags)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return tf.saved_model.load(str(export_dir)).signatures


def run_export_test(folder, export_dir, signature, inputs, expected, *flags, atol=1e-5):
  """The CLI export of `folder` serves `expected` ({output: values}) for `inputs` ({input:
  strings}) through `signature`; returns all the served outputs (numpy)."""
  served = serve(folder, export_dir, *flags)[signature](
      **{name: tf.constant(value) for name, value in inputs.items()})
  served = {name: value.numpy() for name, value in served.items()}
  for name, value in expected.items():
    if np.asarray(value).dtype.kind in "OSU":
      got = [v.decode() if isinstance(v, bytes) else v for v in served[name].ravel().tolist()]
      assert got == np.asarray(value).ravel().tolist(), (name, got, value)
    else:
      np.testing.assert_allclose(served[name], value, atol=atol, err_msg=name)
  return served
