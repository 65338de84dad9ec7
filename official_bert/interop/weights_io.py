"""The one reader and the one loader of BERT weights, whatever the file format.

  read_weights(path)   -> Weights(tensors by canonical TF1 name, source, format, ...)
  load_weights(model, path, require_heads=True) -> the file or prefix read

`path` is any of, told apart by what is there (never by a flag):
  ours  a checkpoint written by `interop.checkpointing` (object-based), prefix or directory;
  tf1   a google-research/bert TF1 checkpoint (name-based), prefix or directory;
  hf    a Hugging Face model: a `.safetensors` file or a directory with `model.safetensors`.
Optimizer and step state is dropped (one list, `is_training_state`). Every file is read
through `tf.io.gfile`, so `gs://` and `ram://` paths work. Checking and assigning is
`weight_loading.assign_canonical_weights`. The files beside the weights (config, vocabulary,
settings) are `model_files`'.
"""

import collections
import os
import re

from absl import logging
import tensorflow as tf

from official_bert.interop import hf_weights
from official_bert.interop import model_files
from official_bert.interop import weight_loading
from official_bert.interop import weight_names
from official_bert.modeling.layers import initialization

# What a checkpoint holds besides model weights: TF1 optimizer slots and step state
# (google-research/bert saves Adam's `adam_m`/`adam_v`; other TF1 optimizers, loss scaling
# and LAMB add the rest), and the dropout seed states our checkpoints keep by Keras path.
_TRAINING_STATE_SUFFIXES = ("/adam_m", "/adam_v", "/Adam", "/Adam_1", "/Momentum",
                            "/lamb_m", "/lamb_v")
_TRAINING_STATE_NAMES = frozenset({"global_step", "beta1_power", "beta2_power",
                                   "good_steps", "loss_scale"})

# Present in every object-based (TF2, ours) checkpoint, never in a name-based TF1 one.
_OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
# The files of a checkpoint PREFIX: PREFIX.index and PREFIX.data-00000-of-00001...
_CHECKPOINT_FILE_SUFFIX = re.compile(r"\.(index|data-\d{5}-of-\d{5})$")

# tensors: canonical name -> np.ndarray (TF1 layout). source: the file or prefix read.
# format: "ours", "tf1" or "hf". source_names: canonical name -> (name in the file,
# transposed), for messages in the file's terms. hf_prefix: "bert." or "" (hf only, else None).
Weights = collections.namedtuple("Weights",
                                 ["tensors", "source", "format", "source_names", "hf_prefix"])

def is_training_state(name):
  """Whether a checkpoint variable is optimizer, step or seed state (never a weight)."""
  return (name in _TRAINING_STATE_NAMES or name.endswith(_TRAINING_STATE_SUFFIXES)
          or "seed_generator" in name)


def _unescape(key):
  """Object-graph key segment -> name (tf.train.Checkpoint writes "/" as ".S", "." as "..")."""
  out, i = [], 0
  while i < len(key):
    if key[i] == "." and i + 1 < len(key):
      out.append("/" if key[i + 1] == "S" else key[i + 1])
      i += 2
    else:
      out.append(key[i])
      i += 1
  return "".join(out)


def model_variable_name(key):
  """The variable name in one of our checkpoint keys, or None for a non-model key.

  `checkpointing.model_checkpoint` saves {name: variable} under "model", so a weight is
  "model/<escaped name>/.ATTRIBUTES/VARIABLE_VALUE".
  """
  parts = key.split("/")
  if len(parts) == 4 and parts[0] == "model" and parts[2] == ".ATTRIBUTES":
    return _unescape(parts[1])
  return None


def _resolve(path):
  """(format, file or prefix): "hf" and the .safetensors file, or "checkpoint" and a prefix."""
  path = str(path)
  if path.endswith(".safetensors"):
    if not tf.io.gfile.exists(path):
      raise FileNotFoundError(f"no safetensors file at {path}")
    return "hf", path
  # Before isdir: on ram:// a checkpoint prefix also reads as a directory.
  if tf.io.gfile.exists(path + ".index"):
    return "checkpoint", path
  if tf.io.gfile.isdir(path):
    hf_file = os.path.join(path, model_files.HF_WEIGHTS_FILE)
    if tf.io.gfile.exists(hf_file):
      return "hf", hf_file
    latest = model_files.latest_checkpoint(path)
    if latest is not None:
      return "checkpoint", latest
    state_file = os.path.join(path, "checkpoint")
    if tf.io.gfile.exists(state_file):
      # A folder copied from where it was trained: google-research's run_* write the absolute
      # --output_dir (/tmp/mrpc_output/model.ckpt-N, gs://...) into `checkpoint`. The prefix
      # it names, moved here with the folder, is the one; a prefix that is gone is not
      # replaced by another.
      state = tf.train.get_checkpoint_state(path)
      named = state.model_checkpoint_path if state is not None else ""
      moved = os.path.join(path, os.path.basename(named)) if named else ""
      if moved and tf.io.gfile.exists(moved + ".index"):
        logging.info("%s names %s; reading %s, the checkpoint of that name here", state_file,
                     named, moved)
        return "checkpoint", moved
      raise FileNotFoundError(f"{state_file} names a checkpoint ({named or 'none'}) that is "
                              f"not in {path}: give the prefix of the one to read")
    # google-research's released folders (uncased_L-12_H-768_A-12/) have no `checkpoint`
    # file: their one checkpoint is bert_model.ckpt.
    prefixes = sorted(name[:-len(".index")] for name in tf.io.gfile.listdir(path)
                      if name.endswith(".index"))
    if len(prefixes) == 1:
      return "checkpoint", os.path.join(path, prefixes[0])
    if prefixes:
      raise ValueError(f"{path} holds {len(prefixes)} checkpoints ({', '.join(prefixes)}) and "
                       f"no `checkpoint` file naming the latest: give the prefix of one, "
                       f"e.g. {os.path.join(path, prefixes[-1])}")
    best = os.path.join(path, "best")
    hint = (f"; its best/ holds the model (a run with --num_restarts keeps the best one "
            f"there): read {best}" if tf.io.gfile.isdir(best) else "")
    others = sorted(name for name in tf.io.gfile.listdir(path)
                    if name.endswith((".bin", ".safetensors", ".h5", ".msgpack", ".pt")))
    if others:  # weights in a format or layout this reader does not take
      hint += (f"; it holds {', '.join(others[:3])}{', ...' if len(others) > 3 else ''}, "
               f"which are not read: one {model_files.HF_WEIGHTS_FILE} is (with transformers: "
               f"model.save_pretrained(DIR, safe_serialization=True, max_shard_size='10GB'))")
    raise FileNotFoundError(f"no checkpoint in directory {path} (no `checkpoint` file "
                            f"naming one, no PREFIX.index, no {model_files.HF_WEIGHTS_FILE})"
                            f"{hint}")
  # One file of a checkpoint given for the checkpoint: its prefix.
  prefix = _CHECKPOINT_FILE_SUFFIX.sub("", path)
  if prefix != path and tf.io.gfile.exists(prefix + ".index"):
    return "checkpoint", prefix
  if tf.io.gfile.exists(path):
    raise ValueError(f"{path} is not a checkpoint: expected a checkpoint prefix (with "
                     f"PREFIX.index), a directory holding one, or a .safetensors file")
  raise FileNotFoundError(f"no checkpoint at {path} (expected {path}.index, a directory or "
                          f"a .safetensors file)")


def damaged_checkpoint_error(prefix, files, error, hint=""):
  """The ValueError for a checkpoint whose files cannot be read (TensorFlow's own message,
  e.g. "Read less bytes than requested", names no file)."""
  detail = (str(error).strip().splitlines() or [type(error).__name__])[0]
  return ValueError(f"{files}: cannot read checkpoint {prefix} (truncated or corrupt?): "
                    f"{detail}{hint}")


def _read_checkpoint(prefix):
  """(tensors, format) of a TF checkpoint: ours (object-based) or TF1 (name-based)."""
  try:
    reader = tf.compat.v1.train.NewCheckpointReader(prefix)
    keys = sorted(reader.get_variable_to_shape_map())
  except tf.errors.OpError as e:
    raise damaged_checkpoint_error(prefix, prefix + ".index", e.message) from None
  fmt = "ours" if _OBJECT_GRAPH_KEY in keys else "tf1"
  names, skipped = {}, 0
  for key in keys:
    name = model_variable_name(key) if fmt == "ours" else key
    if name is None:
      continue  # ours: the optimizer, step and input position saved beside the model
    if is_training_state(name):
      skipped += 1
    else:
      names[name] = key
  if fmt == "tf1" and skipped:
    logging.info("%s: ignoring %d optimizer/step variables (adam_m, adam_v, global_step...)",
                 prefix, skipped)
  if not any(weight_names.is_canonical_name(n) for n in names):
    graph_keys = [key for key in keys if "layer_with_weights" in key]
    if graph_keys:
      # An object-based TF2 checkpoint of another library's model (the Model Garden's
      # BertEncoder, a Keras model): its keys follow that model's object graph.
      raise ValueError(f"{prefix} is a TF2 object-based checkpoint of another model (keys "
                       f"such as {graph_keys[0]!r}: the TF Model Garden's BertEncoder?), "
                       "which is not read. Read google-research/bert's TF1 release of the "
                       "same model (the Model Garden's BERT checkpoints are converted from "
                       "those), or a Hugging Face model.safetensors")
    raise ValueError(f"{prefix} holds no BERT weights under canonical names (found "
                     f"{sorted(names or keys)[:3]}); is it a BERT checkpoint?")
  tensors = {}
  for name, key in names.items():
    try:
      tensors[name] = reader.get_tensor(key)
    except (tf.errors.OpError, IndexError, ValueError) as e:
      data = ", ".join(tf.io.gfile.glob(prefix + ".data-*")) or prefix + ".data-*"
      raise damaged_checkpoint_error(prefix, data, e) from None
  return tensors, fmt


def weights_source(path):
  """The file or checkpoint prefix `read_weights(path)` would read, without reading it."""
  return _resolve(path)[1]


def read_weights(path):
  """Reads BERT weights from ours, a TF1 checkpoint or an HF model; returns `Weights`.

  Raises:
    FileNotFoundError: nothing at `path`.
    ValueError: `path` is not a checkpoint, or a file of it is truncated or corrupt (the
      message names the file).
  """
  kind, source = _resolve(path)
  if kind == "hf":
    state = hf_weights.read_safetensors(source)
    tensors, source_names = hf_weights.hf_state_dict_to_canonical(state, source)
    return Weights(tensors, source, "hf", source_names, hf_weights.hf_prefix_of(state))
  tensors, fmt = _read_checkpoint(source)
  return Weights(tensors, source, fmt, {}, None)


def load_weights(model, path, require_heads=True, adaptation=None):
  """Loads the weights at `path` (any format) into `model`, checking every name and shape.

  Args:
    model: a `BertEncoder`, `BertPretrainingModel` or fine-tuning model (built if needed).
    path: see the module doc.
    require_heads: every variable of the model must be in the file (an exported or
      converted model must not silently hold a random head). When False, a head with no
      tensor at all in the file (a new fine-tuning head, or the pretraining heads absent
      from an HF `BertModel` file) keeps its initialization, with a warning: a warm start.
    adaptation: a `weight_loading.Adaptation` (--resize_vocab, --extend_positions): grow the
      vocabulary or position table of a smaller checkpoint (a warm start only).

  Returns:
    The file or checkpoint prefix read.
  """
  weights = read_weights(path)
  assign_weights(model, weights, require_heads, adaptation)
  return weights.source


def built_and_assigned(build, assign, network_of=lambda model: model):
  """(model, untrained): `build()`'s model, its weights set by `assign(network_of(model))`
  (e.g. `assign_weights`; it returns the canonical names it assigned) and not drawn first
  (`initialization.draws_deferred`): only the ones `assign` left (a new head's) get their
  random values. `untrained`: their names."""
  with initialization.draws_deferred() as deferred:
    model = build()
    network = network_of(model)
    network.build()
  assigned = set(assign(network))
  pairs = weight_names.model_weight_pairs(network)
  deferred.draw(model, [variable for name, variable in pairs if name in assigned])
  return model, [name for name, _ in pairs if name not in assigned]


def assign_weights(model, weights, require_heads=True, adaptation=None):
  """Assigns what `read_weights` read into `model` (see `load_weights`); returns the names."""
  source_names = dict(weights.source_names)
  if weights.format == "hf":
    # Absent tensors are named the way this file would have named them.
    for name, _ in weight_names.model_weight_pairs(model):
      if name not in source_names and weight_names.is_canonical_name(name):
        source_names[name] = weight_names.tf1_to_hf_name(name, weights.hf_prefix)
  loaded = weight_loading.assign_canonical_weights(
      model, weights.tensors, weights.source, require_heads=require_heads,
      source_names=source_names, adaptation=adaptation)
  logging.info("Loaded %d weights from %s (%s).", len(loaded), weights.source, weights.format)
  return loaded
