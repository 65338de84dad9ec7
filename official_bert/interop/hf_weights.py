"""Hugging Face BERT files (`config.json` + `.safetensors`): names, layouts and configs.

Purely local: files are read and written through `tf.io.gfile` (so `gs://` works) with
`safetensors.numpy`; nothing touches the network or the HF hub. HF names are translated to
canonical TF1 names by `weight_names`; loading into a model is `weights_io.load_weights`,
which reads HF files like every other format.
"""

import json

from absl import logging
import numpy as np
import safetensors
import safetensors.numpy
import tensorflow as tf

from data_prep import tfrecord_io
from official_bert.interop import weight_loading
from official_bert.interop import weight_names
from official_bert.modeling import activation_names
from official_bert.modeling.bert_config import LAYER_NORM_EPSILON
from official_bert.modeling.bert_config import BertConfig

# transformers' `BertConfig` defaults (type_vocab_size 2, not the original's 16). Not for
# vocab_size: a config.json without it is not a model's config.
HF_DEFAULTS = {
    "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
    "intermediate_size": 3072, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 512, "type_vocab_size": 2,
    "initializer_range": 0.02,
}


def bert_config_from_hf_dict(d, source="<dict>"):
  """Converts an HF BERT `config.json` dict to a `BertConfig`."""
  if not isinstance(d, dict):
    raise ValueError(f"{source}: expected a JSON object.")
  if d.get("model_type", "bert") != "bert":
    logging.warning("%s: model_type is %r, not 'bert'.", source, d.get("model_type"))
  if d.get("position_embedding_type", "absolute") != "absolute":
    raise ValueError(f"{source}: only position_embedding_type='absolute' is "
                     f"supported, got {d['position_embedding_type']!r}.")
  eps = d.get("layer_norm_eps", LAYER_NORM_EPSILON)
  if not np.isclose(eps, LAYER_NORM_EPSILON, rtol=0, atol=1e-15):
    raise ValueError(f"{source}: layer_norm_eps={eps!r} is not supported "
                     f"(the model uses {LAYER_NORM_EPSILON}).")
  act = d.get("hidden_act", "gelu")
  if act not in activation_names.HF_TO_OURS:
    raise ValueError(f"{source}: unsupported hidden_act {act!r}; expected one "
                     f"of {sorted(activation_names.HF_TO_OURS)}.")
  # HF configs carry many unrelated keys; keep only BertConfig's fields.
  # HF's `BertConfig` has a default for every key, so a config.json may leave any out.
  ours = {name: d.get(name, default) for name, default in HF_DEFAULTS.items()}
  if "vocab_size" in d:
    ours["vocab_size"] = d["vocab_size"]
  ours["hidden_act"] = activation_names.HF_TO_OURS[act]
  return BertConfig.from_dict(ours, source=source)


def hf_config_dict(bert_config, architecture):
  """Our config as an HF `config.json` dict (`architecture` e.g. "BertModel")."""
  d = bert_config.to_dict()
  d["hidden_act"] = activation_names.OURS_TO_HF[bert_config.hidden_act]
  d.update(architectures=[architecture], model_type="bert", layer_norm_eps=LAYER_NORM_EPSILON,
           pad_token_id=0, position_embedding_type="absolute")
  return d


def load_hf_config(path):
  """Reads an HF `config.json` into a `BertConfig`."""
  with tf.io.gfile.GFile(str(path), "r") as f:
    text = f.read()
  try:
    d = json.loads(text)
  except json.JSONDecodeError as e:
    raise ValueError(f"{path}: not valid JSON: {e}") from e
  return bert_config_from_hf_dict(d, source=str(path))


def read_safetensors(path):
  """{HF name: np.ndarray} of a `.safetensors` file; a damaged file is a ValueError naming it."""
  with tf.io.gfile.GFile(path, "rb") as f:
    data = f.read()
  try:
    return safetensors.numpy.load(data)
  except KeyError:  # a dtype numpy lacks: bfloat16, HF's common half precision
    return _load_with_bfloat16(data, path)
  except (safetensors.SafetensorError, ValueError) as e:
    raise ValueError(f"{path}: not a readable safetensors file (truncated or corrupt?): "
                     f"{e}") from None


# safetensors' dtype names as numpy dtypes (little-endian, as the format stores them).
_SAFETENSORS_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4",
                       "I16": "<i2", "I8": "i1", "U8": "u1", "BOOL": "?"}


def _load_with_bfloat16(data, path):
  """`safetensors.numpy.load` for a file holding bfloat16 tensors, read as float32 (exact: a
  bfloat16 is a float32's upper 16 bits). The format: an 8-byte little-endian header length,
  the JSON header ({name: {dtype, shape, data_offsets}}), then the tensors' bytes."""
  try:
    length = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + length])
    body = memoryview(data)[8 + length:]
    tensors, unsupported = {}, []
    for name, entry in header.items():
      if name == "__metadata__":
        continue
      begin, end = entry["data_offsets"]
      raw = body[begin:end]
      if entry["dtype"] == "BF16":
        bits = np.frombuffer(raw, "<u2").astype(np.uint32) << 16
        array = bits.view(np.float32)
      elif entry["dtype"] in _SAFETENSORS_DTYPES:
        array = np.frombuffer(raw, _SAFETENSORS_DTYPES[entry["dtype"]])
      else:
        unsupported.append(f"{name} ({entry['dtype']})")
        continue
      tensors[name] = array.reshape(entry["shape"]).copy()
  except (ValueError, KeyError, TypeError) as e:
    raise ValueError(f"{path}: not a readable safetensors file (truncated or corrupt?): "
                     f"{e}") from None
  if unsupported:
    raise ValueError(f"{path}: tensors of a dtype this reader does not take (float32, "
                     f"float16, bfloat16 and integers are read): {', '.join(unsupported[:3])}"
                     f"{', ...' if len(unsupported) > 3 else ''}; save the model in float32")
  return tensors


def write_safetensors(state_dict, path):
  """Writes {HF name: array} to `path` (creating its directory), atomically."""
  # "format": "pt" is what HF's loader expects of a safetensors file.
  data = safetensors.numpy.save(state_dict, metadata={"format": "pt"})
  with tfrecord_io.AtomicFile(str(path), "wb") as f:
    f.write(data)


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
    logging.warning("%s: ignoring %d non-BERT tensor(s): %s", source, len(unknown), unknown)
  _warn_if_decoder_untied(state_dict, tensors, source)
  return tensors, source_names


def hf_prefix_of(state_dict):
  """"bert." when the file's encoder tensors are prefixed (BertForPreTraining), else ""."""
  return "bert." if any(k.startswith("bert.") for k in state_dict) else ""


def _warn_if_decoder_untied(state_dict, tensors, source):
  # Our MLM decoder is always tied to the word embeddings.
  decoder = state_dict.get("cls.predictions.decoder.weight")
  words = tensors.get("bert/embeddings/word_embeddings")
  if decoder is not None and words is not None and not np.array_equal(
      np.asarray(decoder), words):
    logging.warning("%s: cls.predictions.decoder.weight differs from the word embeddings; "
                    "using the word embeddings (tied decoder).", source)


def canonical_to_hf_state_dict(tensors, prefix=""):
  """Canonical TF1 tensors -> HF names/layouts (`prefix` e.g. "bert.")."""
  out = {}
  for tf1_name, value in tensors.items():
    hf_name, transpose = weight_names.tf1_to_hf_name(tf1_name, prefix=prefix)
    value = np.asarray(value)
    out[hf_name] = np.ascontiguousarray(value.T if transpose else value)
  return out


def save_hf_weights(model, safetensors_path, prefix=""):
  """Writes the model's variables as an HF-layout `.safetensors` file."""
  tensors = weight_loading.export_canonical_weights(model)
  write_safetensors(canonical_to_hf_state_dict(tensors, prefix=prefix), str(safetensors_path))
