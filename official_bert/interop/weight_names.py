"""Canonical (TF1 `bert_model.ckpt`) names of our variables, and HF names: the one owner of
foreign names. The models know none; the names are mapped onto them here.

Every converter goes through the canonical names of google-research BERT's
TF1 checkpoints, e.g. `bert/encoder/layer_0/attention/self/query/kernel`:

  our variable  <->  canonical TF1 name  <->  Hugging Face name (+ transpose)

Our variables have exactly the TF1 shapes (kernels are [in, out], the NSP
weights are [2, hidden]), so TF1 <-> ours is a plain copy. PyTorch `Linear`
weights are [out, in], so every TF1 `kernel` is transposed for HF.

  model type (`model_types`)  its weights
  encoder          bert/*
  pretraining      bert/*, cls/predictions/*, cls/seq_relationship/* (none: masked LM only)
  classifier       bert/*, output_weights, output_bias              (run_classifier.py)
  squad            bert/*, cls/squad/{output_weights,output_bias}   (run_squad.py)
  tagger           bert/*, cls/token_classifier/...                 (not in the original)
  multiple_choice  bert/*, cls/multiple_choice/...                  (not in the original)
  feature_tagger   bert/*, cls/feature_tagger/... (`feature_tagger_head_pairs`)
"""

import re

from official_bert.modeling import model_types

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
# The scope of each fine-tuning head, by model type, in the order `infer_model_type` tries
# them; run_classifier.py's head is unscoped.
HEAD_SCOPES = {
    "squad": "cls/squad/",
    "feature_tagger": "cls/feature_tagger/",
    "tagger": "cls/token_classifier/",
    "multiple_choice": "cls/multiple_choice/",
    "classifier": "",
}


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


def projection_head_pairs(model, scope):
  """(name, variable) of a fine-tuning head (`finetuning_models`): its `OutputProjection`,
  stored as the original's `output_weights` [num_outputs, hidden] and `output_bias`."""
  yield scope + "output_weights", model.projection.output_weights
  yield scope + "output_bias", model.projection.output_bias


def feature_tagger_head_pairs(model, scope=HEAD_SCOPES["feature_tagger"]):
  """(name, variable) of everything of a `BertFeatureTagger` but its encoder:
    layer_weights [k], layer_scale []           (combine="weighted" only)
    lstm_{i}/fw/{kernel,recurrent_kernel,bias}  forward LSTM of BiLSTM layer i
    lstm_{i}/bw/{kernel,recurrent_kernel,bias}  backward LSTM
    output_weights [num_labels, 2 * lstm_units], output_bias [num_labels]
  """
  if model.mix is not None:
    yield scope + "layer_weights", model.mix.layer_weights
    yield scope + "layer_scale", model.mix.layer_scale
  for i, bilstm in enumerate(model.bilstms):
    for direction, lstm in (("fw", bilstm.forward_layer), ("bw", bilstm.backward_layer)):
      cell = lstm.cell
      for name, variable in (("kernel", cell.kernel), ("recurrent_kernel",
                                                       cell.recurrent_kernel),
                             ("bias", cell.bias)):
        yield f"{scope}lstm_{i}/{direction}/{name}", variable
  yield from projection_head_pairs(model, scope)


def model_weight_pairs(model):
  """[(canonical TF1 name, variable)] of `model`, built first so variables exist.

  Every model type of `model_types` is named as the table above says; another model that
  wraps an encoder (`model.encoder`, e.g. a sentence embedder) gets its encoder's names, and
  its other variables none.
  """
  model.build()
  model_type = model_types.model_type_of(model)
  if model_type == "pretraining" or (model_type is None and hasattr(model, "masked_lm_head")):
    return list(pretraining_weight_pairs(model))
  if model_type in (None, "encoder"):
    return list(encoder_weight_pairs(getattr(model, "encoder", model)))
  pairs = list(encoder_weight_pairs(model.encoder))
  if model_type == "feature_tagger":
    return pairs + list(feature_tagger_head_pairs(model))
  return pairs + list(projection_head_pairs(model, HEAD_SCOPES[model_type]))


def infer_model_type(tensor_names):
  """The model type a checkpoint's tensor names fit best (for `--model_type` left unset)."""
  names = set(tensor_names)
  if any(n.startswith(MLM_SCOPE) for n in names):
    return "pretraining"
  for model_type, scope in HEAD_SCOPES.items():
    if scope and any(n.startswith(scope) for n in names):
      return model_type
  if "output_weights" in names:
    return "classifier"
  return "encoder"


def num_labels_in(tensors, model_type):
  """The number of labels of a classifier/tagger head stored in `tensors`, or None (another
  model type, or no such head)."""
  if model_type not in model_types.NEEDS_NUM_LABELS:
    return None
  name = HEAD_SCOPES[model_type] + "output_bias"
  return int(tensors[name].shape[0]) if name in tensors else None


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
