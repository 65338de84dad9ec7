"""Loads Hugging Face BERT checkpoints (`config.json` + `.safetensors`).

Purely local: files are read with `safetensors.numpy`; nothing touches the
network or the HF hub. HF names are translated to canonical TF1 names by
`weight_names`, then checked and assigned by `weight_loading`.
"""

import json
import logging
import os

import numpy as np
from safetensors.numpy import load_file
from safetensors.numpy import save_file

from official_bert.interop import weight_loading
from official_bert.interop import weight_names
from official_bert.modeling.bert_config import BertConfig

logger = logging.getLogger(__name__)

# HF says "gelu" for the exact erf form; the tanh approximation (google-
# research's "gelu") goes by several HF names.
HF_TO_OUR_ACTIVATION = {
    "gelu": "gelu_exact",
    "gelu_new": "gelu",
    "gelu_pytorch_tanh": "gelu",
    "gelu_fast": "gelu",
    "relu": "relu",
    "tanh": "tanh",
}

_LAYER_NORM_EPSILON = 1e-12  # Fixed in our layers, as in the original.


def bert_config_from_hf_dict(d, source="<dict>"):
  """Converts an HF BERT `config.json` dict to a `BertConfig`."""
  if not isinstance(d, dict):
    raise ValueError(f"{source}: expected a JSON object.")
  if d.get("model_type", "bert") != "bert":
    logger.warning("%s: model_type is %r, not 'bert'.", source,
                   d.get("model_type"))
  if d.get("position_embedding_type", "absolute") != "absolute":
    raise ValueError(f"{source}: only position_embedding_type='absolute' is "
                     f"supported, got {d['position_embedding_type']!r}.")
  eps = d.get("layer_norm_eps", _LAYER_NORM_EPSILON)
  if not np.isclose(eps, _LAYER_NORM_EPSILON, rtol=0, atol=1e-15):
    raise ValueError(f"{source}: layer_norm_eps={eps!r} is not supported "
                     f"(the model uses {_LAYER_NORM_EPSILON}).")
  act = d.get("hidden_act", "gelu")
  if act not in HF_TO_OUR_ACTIVATION:
    raise ValueError(f"{source}: unsupported hidden_act {act!r}; expected one "
                     f"of {sorted(HF_TO_OUR_ACTIVATION)}.")
  # HF configs carry many unrelated keys; keep only BertConfig's fields.
  fields = set(BertConfig.__dataclass_fields__)
  ours = {k: v for k, v in d.items() if k in fields}
  ours["hidden_act"] = HF_TO_OUR_ACTIVATION[act]
  return BertConfig.from_dict(ours, source=source)


def load_hf_config(path):
  """Reads an HF `config.json` into a `BertConfig`."""
  with open(path, "r", encoding="utf-8") as f:
    try:
      d = json.load(f)
    except json.JSONDecodeError as e:
      raise ValueError(f"{path}: not valid JSON: {e}") from e
  return bert_config_from_hf_dict(d, source=str(path))


def hf_state_dict_to_canonical(state_dict, source="<state_dict>"):
  """Translates HF tensors to canonical TF1 names and layouts.

  Returns:
    (tensors, source_names): canonical name -> np.ndarray (transposed to the
    TF1 layout where needed), and canonical name -> (hf_name, transposed).
    Tensors that are not BERT variables are logged as a warning and dropped.
  """
  tensors, source_names, unknown = {}, {}, []
  for hf_name in sorted(state_dict):
    mapped = weight_names.hf_to_tf1_name(hf_name)
    if mapped is None:
      bare = hf_name[len("bert."):] if hf_name.startswith("bert.") else hf_name
      if bare not in weight_names.HF_IGNORED_NAMES:
        unknown.append(hf_name)
      continue
    tf1_name, transpose = mapped
    if tf1_name in tensors:
      raise ValueError(f"{source}: both {source_names[tf1_name][0]!r} and "
                       f"{hf_name!r} map to {tf1_name!r}.")
    value = np.asarray(state_dict[hf_name])
    tensors[tf1_name] = value.T if transpose else value
    source_names[tf1_name] = (hf_name, transpose)
  if unknown:
    logger.warning("%s: ignoring %d non-BERT tensor(s): %s", source,
                   len(unknown), unknown)
  _warn_if_decoder_untied(state_dict, tensors, source)
  return tensors, source_names


def _warn_if_decoder_untied(state_dict, tensors, source):
  # Our MLM decoder is always tied to the word embeddings.
  decoder = state_dict.get("cls.predictions.decoder.weight")
  words = tensors.get("bert/embeddings/word_embeddings")
  if decoder is not None and words is not None and not np.array_equal(
      np.asarray(decoder), words):
    logger.warning("%s: cls.predictions.decoder.weight differs from the word "
                   "embeddings; using the word embeddings (tied decoder).",
                   source)


def canonical_to_hf_state_dict(tensors, prefix=""):
  """Canonical TF1 tensors -> HF names/layouts (`prefix` e.g. "bert.")."""
  out = {}
  for tf1_name, value in tensors.items():
    hf_name, transpose = weight_names.tf1_to_hf_name(tf1_name, prefix=prefix)
    value = np.asarray(value)
    out[hf_name] = np.ascontiguousarray(value.T if transpose else value)
  return out


def load_hf_weights(model, safetensors_path, require_heads=True):
  """Loads an HF `.safetensors` file into a `BertEncoder` or
  `BertPretrainingModel`.

  Args:
    model: the Keras model; built here if needed.
    safetensors_path: local path to the file.
    require_heads: see `weight_loading.assign_canonical_weights`; pass False
      to load a `BertModel` file (no `cls.*`) into a pretraining model.

  Returns:
    Sorted canonical names of the assigned variables.
  """
  source = str(safetensors_path)
  state_dict = load_file(safetensors_path)
  tensors, source_names = hf_state_dict_to_canonical(state_dict, source)
  # Name absent tensors the way this file would have named them.
  prefix = "bert." if any(k.startswith("bert.") for k in state_dict) else ""
  for tf1_name, _ in weight_names.model_weight_pairs(model):
    if tf1_name not in source_names:
      source_names[tf1_name] = weight_names.tf1_to_hf_name(tf1_name, prefix)
  return weight_loading.assign_canonical_weights(
      model, tensors, source, require_heads=require_heads,
      source_names=source_names)


def save_hf_weights(model, safetensors_path, prefix=""):
  """Writes the model's variables as an HF-layout `.safetensors` file."""
  tensors = weight_loading.export_canonical_weights(model)
  save_file(canonical_to_hf_state_dict(tensors, prefix=prefix),
            safetensors_path)


def load_hf_bert_encoder(model_dir, **encoder_kwargs):
  """Builds a `BertEncoder` from `model_dir/config.json` and loads
  `model_dir/model.safetensors` into it.

  Returns:
    (encoder, bert_config).
  """
  # Imported here so the name translation above stays usable without Keras.
  from official_bert.modeling.encoder import BertEncoder  # pylint: disable=g-import-not-at-top
  config = load_hf_config(os.path.join(model_dir, "config.json"))
  encoder = BertEncoder.from_bert_config(config, **encoder_kwargs)
  load_hf_weights(encoder, os.path.join(model_dir, "model.safetensors"))
  return encoder, config
