"""Validates and assigns canonically named arrays into a BERT model.

`weights_io.read_weights` translates every format (ours, TF1, HF safetensors)
to canonical TF1 names and layouts (see `weight_names`); `weights_io.load_weights`
hands them here, so that checking and assignment are implemented once.

A warm start may also adapt two tables to a larger config, here where names meet variables
so that every format (ours, TF1, HF) gets it (`Adaptation`): more vocabulary rows
(--resize_vocab) and more positions (--extend_positions).
"""

import collections

from absl import logging
import keras
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


# What a warm start may change in a checkpoint's tables to fit a larger config; both off by
# default, so that a config that does not match its checkpoint stays an error.
Adaptation = collections.namedtuple("Adaptation", ["resize_vocab", "extend_positions"],
                                    defaults=[False, False])

WORD_EMBEDDINGS = "bert/embeddings/word_embeddings"
POSITION_EMBEDDINGS = "bert/embeddings/position_embeddings"
# Tables with one row per vocabulary entry (the MLM output is tied to the word embeddings).
_VOCAB_TABLES = (WORD_EMBEDDINGS, weight_names.MLM_SCOPE + "output_bias")


def grow_vocab_rows(value, rows):
  """`value` [old_vocab, ...] -> [rows, ...]: old rows kept, new rows = the old rows' mean.

  The mean rather than random rows: a new token then starts as an "average" word, whose
  logits in the tied MLM output are neither favoured nor pushed to zero.
  """
  mean = value.mean(axis=0, keepdims=True, dtype=np.float64).astype(value.dtype)
  return np.concatenate([value, np.repeat(mean, rows - value.shape[0], axis=0)], axis=0)


def extend_position_rows(value, rows):
  """`value` [old_len, hidden] -> [rows, hidden], row i = old row i % old_len (Longformer's
  initialization: every new position starts as a trained one, so attention patterns that
  depend on relative offsets within old_len carry over)."""
  return value[np.arange(rows) % value.shape[0]]


def _adapt(name, value, expected, adaptation):
  """(value fitted to `expected`, None) or (None, the reason it cannot be) for a mis-shaped
  tensor; only the vocabulary tables and the position table can be fitted, by growing."""
  if (name not in _VOCAB_TABLES + (POSITION_EMBEDDINGS,) or value.ndim != len(expected)
      or tuple(value.shape[1:]) != tuple(expected[1:])):
    return None, ""
  old, new = value.shape[0], expected[0]
  if name in _VOCAB_TABLES:
    if new < old:
      return None, (f" (the config's vocab_size={new} is smaller than the checkpoint's "
                    f"{old}: a vocabulary cannot shrink"
                    + (", not even with --resize_vocab)" if adaptation.resize_vocab else ")"))
    if not adaptation.resize_vocab:
      return None, (f" (the config's vocab_size={new} is larger than the checkpoint's {old}; "
                    "--resize_vocab keeps the trained rows and adds new ones)")
    logging.info("%s: %d vocabulary rows, config has %d: kept the %d trained rows, new rows "
                 "initialized to their mean (--resize_vocab).", name, old, new, old)
    return grow_vocab_rows(value, new), None
  if new < old:  # the position table
    return None, (f" (the config's max_position_embeddings={new} is smaller than the "
                  f"checkpoint's {old}: the position table cannot shrink"
                  + (", not even with --extend_positions)" if adaptation.extend_positions
                     else ")"))
  if not adaptation.extend_positions:
    return None, (f" (the config's max_position_embeddings={new} is larger than the "
                  f"checkpoint's {old}; --extend_positions fills the new rows with copies "
                  "of the trained ones)")
  logging.info("%s: %d trained positions, config has %d: row i is a copy of row i %% %d "
               "(--extend_positions).", name, old, new, old)
  return extend_position_rows(value, new), None


def _file_layout(shape, transposed):
  return tuple(reversed(shape)) if transposed else tuple(shape)


def assign_canonical_weights(model, tensors, source, require_heads=True,
                             source_names=None, adaptation=None):
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
    adaptation: an `Adaptation`: a checkpoint with fewer vocabulary rows or positions than
      the model grows to fit it (a warm start only; default: none, a mismatch is an error).

  Returns:
    Sorted list of the canonical names that were assigned.

  Raises:
    ValueError: a tensor is missing or has the wrong shape; the message lists
      every offending name with the file shape and the expected shape.
  """
  source_names = source_names or {}
  adaptation = adaptation or Adaptation()

  def show(name):
    return source_names.get(name, (name, False))[0]

  pairs = weight_names.model_weight_pairs(model)
  skipped_scopes = set()
  if not require_heads:
    file_scopes = {_head_scope(n) for n in tensors}
    for scope in sorted({_head_scope(n) for n, _ in pairs} - {None}):
      if scope not in file_scopes:
        skipped_scopes.add(scope)
        # A classifier's head is top-level (the original's output_weights, output_bias).
        shown = (f"{scope}*" if scope != "<top-level>" else
                 ", ".join(n for n, _ in pairs if _head_scope(n) == scope))
        logging.warning("%s has no weights for the model's head (%s): the head starts "
                        "from random values and must be trained (fit, or a run_* command) "
                        "before its predictions mean anything.", source, shown)

  missing, misshaped, todo = [], [], []
  misshaped_heads = set()
  for name, variable in pairs:
    if _head_scope(name) in skipped_scopes:
      continue
    if name not in tensors:
      missing.append(show(name))
      continue
    value = np.asarray(tensors[name])
    expected = tuple(variable.shape)
    if tuple(value.shape) != expected:
      value, why = _adapt(name, value, expected, adaptation)
      if value is None:
        transposed = source_names.get(name, (name, False))[1]
        misshaped.append(
            f"{show(name)}: file has {_file_layout(np.shape(tensors[name]), transposed)}, "
            f"model expects {_file_layout(expected, transposed)}{why}")
        misshaped_heads.add(_head_scope(name))
        continue
    todo.append((name, variable, value))

  if missing or misshaped:
    lines = [f"{source}: cannot load BERT weights."]
    if missing:
      lines.append(f"Missing tensors ({len(missing)}): {sorted(missing)}")
    if misshaped:
      lines.append(f"Mis-shaped tensors ({len(misshaped)}):")
      lines.extend("  " + m for m in misshaped)
    if misshaped and not missing and None not in misshaped_heads:
      # Only a head differs: a model fine-tuned for another label set.
      lines.append(
          "Its head was trained for another set of labels. To fine-tune a new head from its "
          "encoder, write the encoder alone first: python -m official_bert.convert_checkpoint "
          f"--input={source} --input_format=FORMAT --output=ENCODER_DIR/ --output_format=ours "
          "--model_type=encoder (FORMAT: ours, tf1 or hf, the input's), then start from "
          "ENCODER_DIR")
    raise ValueError("\n".join(lines))

  wanted = {n for n, _ in pairs}
  extra = sorted(show(n) for n in tensors if n not in wanted)
  if extra:
    logging.warning("%s: ignoring %d tensor(s) the model does not use: %s",
                   source, len(extra), extra)

  _log_untrained_pooler(tensors, wanted, source)
  for _, variable, value in todo:
    variable.assign(value.astype(variable.dtype))
  return sorted(n for n, _, _ in todo)


def _log_untrained_pooler(tensors, wanted, source):
  """A masked-LM-only pretraining checkpoint (MLM head, no NSP head) holds the pooler as it
  was initialized (`run_pretraining --next_sentence=False` does not train it): say so."""
  if (weight_names.is_masked_lm_only(tensors)
      and any(n.startswith("bert/pooler/") for n in tensors)
      and any(n.startswith("bert/pooler/") for n in wanted)):
    logging.info("%s: masked-LM-only pretraining checkpoint (no %s* weights): its pooler "
                 "(bert/pooler/*) was never trained by next-sentence prediction and loads "
                 "as initialized.", source, weight_names.NSP_SCOPE)


def export_canonical_weights(model):
  """Returns {canonical TF1 name: np.ndarray} for every model variable. (With LoRA on, a
  kernel is the merged value the layer computes, a backend tensor: JAX's and PyTorch's have no
  `.numpy()`, a PyTorch one that requires grad refuses it.)"""
  return {name: np.asarray(keras.ops.convert_to_numpy(variable))
          for name, variable in weight_names.model_weight_pairs(model)}
