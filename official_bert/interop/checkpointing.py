"""Training checkpoints: resume everything, or warm-start weights only, and say which.

Users of the original were unsure whether `--init_checkpoint` resumed a run or only loaded
weights (google-research/bert #888). Here the rule is explicit and logged:
  - a checkpoint in `--output_dir` resumes the model, optimizer (slots, step, so the learning
    rate schedule) and the input position; `--init_checkpoint` is then ignored;
  - otherwise `--init_checkpoint` loads model weights only (ours, a google-research TF1
    checkpoint by its variable names, or a Hugging Face model: `weights_io`); the optimizer
    and the step start from zero.
"""

import contextlib
import os
import tempfile

from absl import logging
import keras
import tensorflow as tf

from official_bert.interop import model_files
from official_bert.interop import weight_names
from official_bert.interop import weights_io


def trackable_variables(variables, names=None):
  """{name: tf.Variable}, for `tf.train.Checkpoint`.

  TensorFlow's object tracking does not see Keras 3 sublayers held in lists or created in
  `build()`, so `tf.train.Checkpoint(model=model)` would silently save only some variables.
  Naming every variable explicitly (model weights, dropout seed states, optimizer slots)
  saves all of them. `names` maps id(variable) -> a preferred name; others use their path.

  On JAX and PyTorch a Keras variable holds no tf.Variable: it is copied into one, so the
  checkpoint can be written (`api.presets.save`); reading one back goes through `weights_io`.
  """
  names = names or {}
  out = {}
  for v in variables:
    key = names.get(id(v)) or (v.path if isinstance(v, keras.Variable) else v.name)
    if id(v) not in names and key in out:
      raise ValueError(f"two variables share the path {key!r}: name the layers uniquely")
    out[key] = _tensorflow_variable(v)
  return out


def _tensorflow_variable(v):
  """The tf.Variable behind `v` (a Keras variable or a tf.Variable), or a copy of its value
  on a backend other than TensorFlow."""
  if not isinstance(v, keras.Variable):
    return v
  if keras.backend.backend() == "tensorflow":
    return v.value
  return tf.Variable(keras.ops.convert_to_numpy(v.value), trainable=False)


def model_checkpoint(model, **extra):
  """A `tf.train.Checkpoint` holding every variable of `model` under "model".

  BERT weights are keyed by their canonical google-research names (`bert/encoder/layer_0/...`,
  `cls/predictions/...`), which every model type shares, so a classifier can warm-start from a
  pretraining checkpoint; other variables (dropout seed states) by their Keras path.
  """
  names = {id(v): name for name, v in weight_names.model_weight_pairs(model)}
  return tf.train.Checkpoint(model=trackable_variables(model.variables, names), **extra)


def _readable(key):
  """"model/bert.Sembeddings.Sword_embeddings/.ATTRIBUTES/VARIABLE_VALUE" -> the name."""
  return weights_io.model_variable_name(key) or key


def _shape_report(path, model):
  """Variables whose checkpoint shape differs from the model's, one line each."""
  with tempfile.TemporaryDirectory() as tmp:
    fresh = model_checkpoint(model).write(os.path.join(tmp, "fresh"))
    ours = dict(tf.train.list_variables(fresh))
  theirs = dict(tf.train.list_variables(path))
  lines = [f"  {_readable(name)}: checkpoint {list(theirs[name])} vs model {list(shape)}"
           for name, shape in sorted(ours.items())
           if name in theirs and list(theirs[name]) != list(shape)]
  missing = [_readable(name) for name in ours if name not in theirs and "ATTRIBUTES" in name]
  if missing:
    lines.append(f"  missing from the checkpoint: {', '.join(sorted(missing)[:10])}"
                 + (" ..." if len(missing) > 10 else ""))
  return lines


def raise_mismatch(path, model, error):
  """The ValueError of a checkpoint that does not fit `model`: its shapes, or what it is."""
  if not any("ATTRIBUTES" in name for name, _ in tf.train.list_variables(path)):
    # Its variables are named as google-research's (bert/embeddings/...), not as a run's.
    raise ValueError(f"checkpoint {path} is a TF1 (name-based) checkpoint, as google-research "
                     f"writes, not one of a run in this OUTPUT_DIR: to start from its weights, "
                     f"pass --init_checkpoint={path} with a new --output_dir") from None
  lines = _shape_report(path, model)
  detail = "\n".join(lines) if lines else f"  {error}"
  raise ValueError(f"checkpoint {path} does not fit the model (check --bert_config_file):\n"
                   f"{detail}") from None


@contextlib.contextmanager
def damaged_checkpoint_errors(path):
  """Turns a read failure of a truncated or corrupt checkpoint (TensorFlow says only "Read
  less bytes than requested" or "corrupted", without the file) into a ValueError naming it."""
  try:
    yield
  except (tf.errors.DataLossError, tf.errors.OutOfRangeError, tf.errors.NotFoundError,
          tf.errors.InternalError, IndexError) as e:
    hint = "; delete these files to resume from an earlier one"
    raise weights_io.damaged_checkpoint_error(path, f"{path}.*", e, hint) from None


def warm_start(model, path, adaptation=None):
  """Loads model weights only, from ours, a google-research TF1 checkpoint or an HF model.

  A head absent from the file (a new fine-tuning head) keeps its initialization.
  `adaptation` (a `weight_loading.Adaptation`, from --resize_vocab/--extend_positions) lets a
  checkpoint with fewer vocabulary rows or positions than the config grow to fit it.
  """
  path = weights_io.load_weights(model, path, require_heads=False, adaptation=adaptation)
  logging.info("Warm-started model WEIGHTS ONLY from %s; optimizer, step and learning rate "
               "schedule start from zero.", path)
  return path


class CheckpointKeeper:
  """A `tf.train.CheckpointManager` over model, optimizer, step (and an iterator, if given).

  On multi-worker runs every worker saves (saving is collective); only the chief keeps its
  files in `output_dir`.
  """

  def __init__(self, output_dir, model, optimizer, step, iterator=None, max_to_keep=5,
               chief=True, worker_id=0):
    objects = {"optimizer": trackable_variables(optimizer.variables), "step": step}
    if iterator is not None:
      objects["iterator"] = iterator
    self.model = model
    self.step = step
    self.checkpoint = model_checkpoint(model, **objects)
    directory = output_dir if chief else os.path.join(output_dir, f".worker_{worker_id}_tmp")
    self.chief = chief
    self.output_dir = output_dir  # every worker restores the chief's checkpoints
    self.manager = tf.train.CheckpointManager(self.checkpoint, directory, max_to_keep)

  def restore_or_initialize(self, init_checkpoint=None, adaptation=None):
    """Returns what happened: "resumed", "warm_started" or "fresh".

    `adaptation` applies to the warm start only: a resumed run's checkpoint is its own model's.
    """
    latest = model_files.latest_checkpoint(self.output_dir)
    if latest:
      with damaged_checkpoint_errors(latest):
        try:
          self.checkpoint.restore(latest).assert_existing_objects_matched()
        except (ValueError, tf.errors.InvalidArgumentError, AssertionError) as e:
          raise_mismatch(latest, self.model, e)
      logging.info("RESUMED from %s at step %d (model, optimizer, step, learning rate "
                   "schedule; the input skips what was consumed)%s.", latest,
                   int(self.step.numpy()),
                   f"; --init_checkpoint={init_checkpoint} is ignored" if init_checkpoint else "")
      return "resumed"
    if init_checkpoint:
      warm_start(self.model, init_checkpoint, adaptation)
      return "warm_started"
    logging.info("No checkpoint in the output directory and no --init_checkpoint: training "
                 "from random initialization.")
    return "fresh"

  def save(self, reason=""):
    path = self.manager.save(checkpoint_number=int(self.step.numpy()))
    if self.chief:
      logging.info("Saved checkpoint %s%s", path, f" ({reason})" if reason else "")
    else:
      tf.io.gfile.rmtree(self.manager.directory)
    return path

