"""google-research/bert TF1 checkpoints (`bert_model.ckpt`) and "read any checkpoint" helpers.

A TF1 checkpoint is name-based: every variable is stored under its graph name, e.g.
`bert/encoder/layer_0/attention/self/query/kernel`, exactly our canonical names
(`weight_names`). Reading is `tf.train.load_checkpoint`; writing builds a throwaway TF1 graph
with `tf.compat.v1` variables of those names and saves it with `tf.compat.v1.train.Saver`, so
the files (`.index`, `.data-*`, `.meta`, `checkpoint`) are what the original code writes and
reads: `init_from_checkpoint`, `Saver.restore`, `tf.train.list_variables` all work on them.

`read_canonical_tensors` reads either a TF1 checkpoint or one of ours (`checkpointing`), so
every tool takes both; `load_weights` puts them into a model with strict checking.
"""

import os

from absl import logging
import numpy as np
import tensorflow as tf

from official_bert.training import checkpointing
from official_bert.interop import weight_loading

# Training state that google-research/bert (and TF1 optimizers in general) save next to the
# weights; none of it is a model weight.
_OPTIMIZER_SUFFIXES = ("/adam_m", "/adam_v", "/Adam", "/Adam_1", "/Momentum",
                       "/lamb_m", "/lamb_v")
_TRAINING_STATE_NAMES = frozenset({"global_step", "beta1_power", "beta2_power",
                                   "good_steps", "loss_scale"})


def is_training_state(name):
  """Whether a TF1 variable is optimizer or step state (ignored on import)."""
  return name in _TRAINING_STATE_NAMES or name.endswith(_OPTIMIZER_SUFFIXES)


def resolve_checkpoint(path):
  """A checkpoint prefix from a prefix or a directory (its latest checkpoint)."""
  if tf.io.gfile.isdir(path):
    latest = tf.train.latest_checkpoint(path)
    if latest is None:
      raise FileNotFoundError(f"no checkpoint in directory {path}")
    return latest
  if not tf.io.gfile.exists(path + ".index"):
    raise FileNotFoundError(f"no checkpoint at {path} (expected {path}.index)")
  return path


def read_tf1_checkpoint(path):
  """{name: np.ndarray} of the model variables of a TF1 checkpoint.

  Optimizer slots (`adam_m`, `adam_v`) and `global_step` are dropped (logged).
  """
  path = resolve_checkpoint(path)
  reader = tf.train.load_checkpoint(path)
  tensors, skipped = {}, []
  for name, _ in tf.train.list_variables(path):
    if is_training_state(name):
      skipped.append(name)
    else:
      tensors[name] = reader.get_tensor(name)
  if skipped:
    logging.info("%s: ignoring %d optimizer/step variables (adam_m, adam_v, global_step...)",
                 path, len(skipped))
  return tensors


def read_canonical_tensors(path):
  """{canonical TF1 name: array} from a google-research TF1 checkpoint or one of ours."""
  path = resolve_checkpoint(path)
  if checkpointing.is_tf1_bert_checkpoint(path):
    return read_tf1_checkpoint(path)
  return checkpointing.read_model_tensors(path)


def load_weights(model, path, require_heads=True):
  """Loads a TF1 checkpoint or ours into `model`, checking every name and shape.

  Unlike `checkpointing.warm_start` (which lets a new fine-tuning head keep its random
  initialization), every variable of the model must be in the file when `require_heads`:
  an exported or converted model must not silently contain a random head.

  Returns:
    The resolved checkpoint prefix.
  """
  path = resolve_checkpoint(path)
  tensors = read_canonical_tensors(path)
  weight_loading.assign_canonical_weights(model, tensors, source=path,
                                          require_heads=require_heads)
  return path


def write_tf1_checkpoint(tensors, prefix, global_step=None):
  """Writes {name: array} as a TF1 name-based checkpoint at `prefix` (e.g. DIR/bert_model.ckpt).

  Also writes `DIR/checkpoint`, so `tf.train.latest_checkpoint(DIR)` finds it, and the
  `.meta` graph the original's Saver writes. Values are fed through placeholders rather than
  baked into the graph as constants, so BERT-large stays far below the 2 GB GraphDef limit.

  Returns:
    The prefix written (with `-global_step` appended if given, like `Saver.save`).
  """
  directory = os.path.dirname(prefix)
  if directory:
    tf.io.gfile.makedirs(directory)
  graph = tf.Graph()
  with graph.as_default():
    assigns, feeds = [], {}
    for name in sorted(tensors):
      value = np.asarray(tensors[name])
      variable = tf.compat.v1.get_variable(
          name, shape=value.shape, dtype=tf.as_dtype(value.dtype),
          initializer=tf.compat.v1.zeros_initializer(), use_resource=False)
      placeholder = tf.compat.v1.placeholder(variable.dtype.base_dtype, value.shape)
      assigns.append(tf.compat.v1.assign(variable, placeholder))
      feeds[placeholder] = value
    step = None
    if global_step is not None:
      step = tf.compat.v1.train.get_or_create_global_step()
      assigns.append(tf.compat.v1.assign(step, global_step))
    saver = tf.compat.v1.train.Saver(sharded=False)
    with tf.compat.v1.Session(graph=graph) as session:
      session.run(tf.compat.v1.global_variables_initializer())
      session.run(assigns, feed_dict=feeds)
      written = saver.save(session, prefix, global_step=step, write_state=False)
  write_checkpoint_state(written)
  return written


def write_checkpoint_state(prefix):
  """Writes `DIR/checkpoint` naming `prefix` relative to DIR, so the directory can be moved.

  `tf.train.latest_checkpoint(DIR)` (and so `--init_checkpoint=DIR`) then finds `prefix`.
  """
  directory, base = os.path.split(prefix)
  with tf.io.gfile.GFile(os.path.join(directory or ".", "checkpoint"), "w") as f:
    f.write(f'model_checkpoint_path: "{base}"\nall_model_checkpoint_paths: "{base}"\n')
