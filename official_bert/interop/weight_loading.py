"""Validates and assigns canonically named arrays into a BERT model.

`weights_io.read_weights` translates every format (ours, TF1, HF safetensors)
to canonical TF1 names and layouts (see `weight_names`); `weights_io.load_weights`
hands them here, so that checking and assignment are implemented once.
"""

from absl import logging
import numpy as np

from official_bert.interop import weight_names

_HEAD_SCOPES = (weight_names.MLM_SCOPE, weight_names.NSP_SCOPE)


def _head_scope(tf1_name):
  """The head a variable belongs to (None for the encoder): heads load all or nothing."""
  for scope in _HEAD_SCOPES:
    if tf1_name.startswith(scope):
      return scope
  if tf1_name.startswith("bert/"):
    return None
  if tf1_name.startswith("cls/"):  # cls/<head>/...: one scope per head, however deep
    return "/".join(tf1_name.split("/")[:2]) + "/"
  return tf1_name.rsplit("/", 1)[0] + "/" if "/" in tf1_name else "<top-level>"


def _file_layout(shape, transposed):
  return tuple(reversed(shape)) if transposed else tuple(shape)


def assign_canonical_weights(model, tensors, source, require_heads=True,
                             source_names=None):
  """Assigns `tensors` (canonical TF1 name -> array) into `model`.

  Nothing is assigned unless every check passes.

  Args:
    model: a `BertEncoder`, `BertPretrainingModel` or fine-tuning model (built if needed).
    tensors: mapping canonical TF1 name -> np.ndarray in TF1 layout.
    source: file name used in messages.
    require_heads: for a pretraining model, when False a head (`cls/
      predictions` or `cls/seq_relationship`) with *no* tensor in `tensors`
      keeps its initialization, with a warning. A partly present head is
      always an error.
    source_names: optional mapping canonical name -> (name in the file,
      transposed), used so messages speak the file's names and layouts.

  Returns:
    Sorted list of the canonical names that were assigned.

  Raises:
    ValueError: a tensor is missing or has the wrong shape; the message lists
      every offending name with the file shape and the expected shape.
  """
  source_names = source_names or {}

  def show(name):
    return source_names.get(name, (name, False))[0]

  pairs = weight_names.model_weight_pairs(model)
  skipped_scopes = set()
  if not require_heads:
    file_scopes = {_head_scope(n) for n in tensors}
    for scope in sorted({_head_scope(n) for n, _ in pairs} - {None}):
      if scope not in file_scopes:
        skipped_scopes.add(scope)
        logging.warning("%s: no %s* tensors; that head keeps its random "
                       "initialization.", source, scope)

  missing, misshaped, todo = [], [], []
  for name, variable in pairs:
    if _head_scope(name) in skipped_scopes:
      continue
    if name not in tensors:
      missing.append(show(name))
      continue
    value = np.asarray(tensors[name])
    expected = tuple(variable.shape)
    if tuple(value.shape) != expected:
      transposed = source_names.get(name, (name, False))[1]
      misshaped.append(
          f"{show(name)}: file has {_file_layout(value.shape, transposed)}, "
          f"model expects {_file_layout(expected, transposed)}")
      continue
    todo.append((name, variable, value))

  if missing or misshaped:
    lines = [f"{source}: cannot load BERT weights."]
    if missing:
      lines.append(f"Missing tensors ({len(missing)}): {sorted(missing)}")
    if misshaped:
      lines.append(f"Mis-shaped tensors ({len(misshaped)}):")
      lines.extend("  " + m for m in misshaped)
    raise ValueError("\n".join(lines))

  wanted = {n for n, _ in pairs}
  extra = sorted(show(n) for n in tensors if n not in wanted)
  if extra:
    logging.warning("%s: ignoring %d tensor(s) the model does not use: %s",
                   source, len(extra), extra)

  for _, variable, value in todo:
    variable.assign(value.astype(variable.dtype))
  return sorted(n for n, _, _ in todo)


def export_canonical_weights(model):
  """Returns {canonical TF1 name: np.ndarray} for every model variable."""
  return {name: np.asarray(variable.numpy())
          for name, variable in weight_names.model_weight_pairs(model)}
