"""Canonical (TF1 `bert_model.ckpt`) names of our variables, and HF names.

Every converter goes through the canonical names of google-research BERT's
TF1 checkpoints, e.g. `bert/encoder/layer_0/attention/self/query/kernel`:

  our variable  <->  canonical TF1 name  <->  Hugging Face name (+ transpose)

Our variables have exactly the TF1 shapes (kernels are [in, out], the NSP
weights are [2, hidden]), so TF1 <-> ours is a plain copy. PyTorch `Linear`
weights are [out, in], so every TF1 `kernel` is transposed for HF.
"""

import re

# (TF1 suffix, attribute path in TransformerBlock) for one encoder layer.
_LAYER_WEIGHTS = (
    ("attention/self/query/kernel", ("attention", "query", "kernel")),
    ("attention/self/query/bias", ("attention", "query", "bias")),
    ("attention/self/key/kernel", ("attention", "key", "kernel")),
    ("attention/self/key/bias", ("attention", "key", "bias")),
    ("attention/self/value/kernel", ("attention", "value", "kernel")),
    ("attention/self/value/bias", ("attention", "value", "bias")),
    ("attention/output/dense/kernel", ("attention_output_dense", "kernel")),
    ("attention/output/dense/bias", ("attention_output_dense", "bias")),
    ("attention/output/LayerNorm/gamma", ("attention_layer_norm", "gamma")),
    ("attention/output/LayerNorm/beta", ("attention_layer_norm", "beta")),
    ("intermediate/dense/kernel", ("intermediate_dense", "kernel")),
    ("intermediate/dense/bias", ("intermediate_dense", "bias")),
    ("output/dense/kernel", ("output_dense", "kernel")),
    ("output/dense/bias", ("output_dense", "bias")),
    ("output/LayerNorm/gamma", ("output_layer_norm", "gamma")),
    ("output/LayerNorm/beta", ("output_layer_norm", "beta")),
)

MLM_SCOPE = "cls/predictions/"
NSP_SCOPE = "cls/seq_relationship/"


def is_masked_lm_only(tensor_names):
  """A checkpoint of `run_pretraining --next_sentence=False`: the masked-LM head, no
  next-sentence head."""
  names = list(tensor_names)
  return (any(n.startswith(MLM_SCOPE) for n in names)
          and not any(n.startswith(NSP_SCOPE) for n in names))

# Names whose HF spelling does not follow the generic rules below.
_SPECIAL_TF1_TO_HF = {
    "cls/predictions/output_bias": "cls.predictions.bias",
    "cls/seq_relationship/output_weights": "cls.seq_relationship.weight",
    "cls/seq_relationship/output_bias": "cls.seq_relationship.bias",
}
_SPECIAL_HF_TO_TF1 = {v: k for k, v in _SPECIAL_TF1_TO_HF.items()}

# HF tensors that carry no information of their own: a position-id buffer
# and the MLM decoder, which is tied to the word embeddings and to
# `cls.predictions.bias`.
HF_IGNORED_NAMES = frozenset({
    "embeddings.position_ids",
    "cls.predictions.decoder.weight",
    "cls.predictions.decoder.bias",
})


def _attr(obj, path):
  for name in path:
    obj = getattr(obj, name)
  return obj


def encoder_weight_pairs(encoder):
  """Yields (canonical_tf1_name, variable) for every encoder variable."""
  emb = encoder.embeddings
  yield "bert/embeddings/word_embeddings", emb.word_embeddings.embeddings
  yield ("bert/embeddings/token_type_embeddings",
         emb.token_type_embeddings.embeddings)
  yield ("bert/embeddings/position_embeddings",
         emb.position_embeddings.embeddings)
  yield "bert/embeddings/LayerNorm/gamma", emb.layer_norm.gamma
  yield "bert/embeddings/LayerNorm/beta", emb.layer_norm.beta
  for i, layer in enumerate(encoder.transformer_layers):
    for suffix, path in _LAYER_WEIGHTS:
      yield f"bert/encoder/layer_{i}/{suffix}", _attr(layer, path)
  yield "bert/pooler/dense/kernel", encoder.pooler_dense.kernel
  yield "bert/pooler/dense/bias", encoder.pooler_dense.bias


def masked_lm_head_weight_pairs(head):
  """Yields (canonical_tf1_name, variable) for a `MaskedLMHead`."""
  yield MLM_SCOPE + "transform/dense/kernel", head.transform_dense.kernel
  yield MLM_SCOPE + "transform/dense/bias", head.transform_dense.bias
  yield MLM_SCOPE + "transform/LayerNorm/gamma", head.transform_layer_norm.gamma
  yield MLM_SCOPE + "transform/LayerNorm/beta", head.transform_layer_norm.beta
  yield MLM_SCOPE + "output_bias", head.output_bias


def next_sentence_head_weight_pairs(head):
  """Yields (canonical_tf1_name, variable) for a `NextSentenceHead`."""
  yield NSP_SCOPE + "output_weights", head.output_weights
  yield NSP_SCOPE + "output_bias", head.output_bias


def pretraining_weight_pairs(model):
  """Yields (canonical_tf1_name, variable) for a `BertPretrainingModel`."""
  yield from encoder_weight_pairs(model.encoder)
  yield from masked_lm_head_weight_pairs(model.masked_lm_head)
  if model.next_sentence_head is not None:  # None: masked-LM-only pretraining
    yield from next_sentence_head_weight_pairs(model.next_sentence_head)


def model_weight_pairs(model):
  """Dispatches on the model type; builds it first so variables exist.

  A fine-tuning model declares its own names with a `tf1_weight_pairs()` method (its encoder's
  pairs plus its head's, e.g. `cls/squad/output_weights`).
  """
  model.build()
  if hasattr(model, "tf1_weight_pairs"):
    return list(model.tf1_weight_pairs())
  if hasattr(model, "masked_lm_head"):
    return list(pretraining_weight_pairs(model))
  return list(encoder_weight_pairs(model))


def tf1_to_hf_name(tf1_name, prefix=""):
  """Maps a canonical TF1 name to (hf_name, transpose).

  `prefix` is prepended to `bert/...` names only, e.g. "bert." for
  `BertForPreTraining` files; `cls.*` names are never prefixed in HF.
  `transpose` is True when the HF tensor is the transpose of the TF1 one.
  """
  if tf1_name in _SPECIAL_TF1_TO_HF:
    return _SPECIAL_TF1_TO_HF[tf1_name], False
  parts = tf1_name.split("/")
  is_bert = parts[0] == "bert"
  if is_bert:
    parts = parts[1:]
  out = []
  for part in parts:
    m = re.fullmatch(r"layer_(\d+)", part)
    out.extend(["layer", m.group(1)] if m else [part])
  last = out[-1]
  transpose = False
  if last == "kernel":
    out[-1], transpose = "weight", True
  elif last == "gamma":
    out[-1] = "weight"
  elif last == "beta":
    out[-1] = "bias"
  elif last.endswith("_embeddings"):
    out.append("weight")
  elif last != "bias":
    raise ValueError(f"Not a canonical BERT variable name: {tf1_name!r}.")
  return (prefix if is_bert else "") + ".".join(out), transpose


def hf_to_tf1_name(hf_name):
  """Maps an HF BERT tensor name to (canonical_tf1_name, transpose).

  Accepts the `bert.` prefix and the legacy `LayerNorm.gamma/beta` spelling.
  Returns None for tensors that are not BERT variables (e.g. a task
  classifier) or that carry no information (`HF_IGNORED_NAMES`).
  """
  name = hf_name[len("bert."):] if hf_name.startswith("bert.") else hf_name
  name = re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", name)
  name = re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", name)
  if name in HF_IGNORED_NAMES:
    return None
  if name in _SPECIAL_HF_TO_TF1:
    return _SPECIAL_HF_TO_TF1[name], False
  parts = name.split(".")
  if len(parts) < 2 or parts[-1] not in ("weight", "bias"):
    return None
  out = []
  i = 0
  while i < len(parts) - 1:
    if parts[i] == "layer" and parts[i + 1].isdigit():
      out.append(f"layer_{parts[i + 1]}")
      i += 2
    else:
      out.append(parts[i])
      i += 1
  owner, kind = out[-1], parts[-1]
  if owner.endswith("_embeddings"):
    if kind != "weight":
      return None
  elif owner == "LayerNorm":
    out.append("gamma" if kind == "weight" else "beta")
  else:
    out.append("kernel" if kind == "weight" else "bias")
  tf1_name = "/".join(out)
  if out[0] != "cls":
    tf1_name = "bert/" + tf1_name
  if not is_canonical_name(tf1_name):
    return None
  return tf1_name, tf1_to_hf_name(tf1_name)[1]


_NON_LAYER_NAMES = frozenset({
    "bert/embeddings/word_embeddings",
    "bert/embeddings/token_type_embeddings",
    "bert/embeddings/position_embeddings",
    "bert/embeddings/LayerNorm/gamma",
    "bert/embeddings/LayerNorm/beta",
    "bert/pooler/dense/kernel",
    "bert/pooler/dense/bias",
    MLM_SCOPE + "transform/dense/kernel",
    MLM_SCOPE + "transform/dense/bias",
    MLM_SCOPE + "transform/LayerNorm/gamma",
    MLM_SCOPE + "transform/LayerNorm/beta",
    MLM_SCOPE + "output_bias",
    NSP_SCOPE + "output_weights",
    NSP_SCOPE + "output_bias",
})


def is_canonical_name(tf1_name):
  """Whether `tf1_name` names a BERT variable (any layer index)."""
  m = re.fullmatch(r"bert/encoder/layer_\d+/(.+)", tf1_name)
  if m:
    return m.group(1) in _LAYER_SUFFIXES
  return tf1_name in _NON_LAYER_NAMES


_LAYER_SUFFIXES = frozenset(suffix for suffix, _ in _LAYER_WEIGHTS)
