"""An independent numpy BERT (float64): the original google-research math, written out here
so that tests can check our Keras model, exports and features against it without using any
of our model code.

Weights are addressed by the original's TF1 names (`bert/encoder/layer_0/...`);
`from_hf_state_dict` renames a Hugging Face `BertModel` safetensors file's tensors to them.
"""

import math

import numpy as np

_erf = np.vectorize(math.erf)


def gelu_tanh(x):
  """The original's "gelu" (tanh approximation; HF "gelu_new")."""
  return 0.5 * x * (1.0 + np.tanh(
      math.sqrt(2.0 / math.pi) * (x + 0.044715 * np.power(x, 3))))


def gelu_erf(x):
  """The exact GELU (HF "gelu", our "gelu_exact")."""
  return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def layer_norm(x, gamma, beta, eps=1e-12):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean)**2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + eps) * gamma + beta


def softmax(x):
  x = x - x.max(-1, keepdims=True)
  e = np.exp(x)
  return e / e.sum(-1, keepdims=True)


def numpy_bert(w, word_ids, mask, type_ids, heads, gelu=gelu_tanh):
  """(sequence_output [b, s, h], pooled_output [b, h]) of TF1-named weights `w`."""
  w = {k: v.astype(np.float64) for k, v in w.items()}
  batch, seq = word_ids.shape
  x = (w["bert/embeddings/word_embeddings"][word_ids] +
       w["bert/embeddings/position_embeddings"][:seq][None] +
       w["bert/embeddings/token_type_embeddings"][type_ids])
  x = layer_norm(x, w["bert/embeddings/LayerNorm/gamma"],
                 w["bert/embeddings/LayerNorm/beta"])
  hidden = x.shape[-1]
  size = hidden // heads
  # create_attention_mask_from_input_mask + the -10000 adder.
  adder = (1.0 - mask[:, None, None, :].astype(np.float64)) * -10000.0
  layer = 0
  while f"bert/encoder/layer_{layer}/output/dense/bias" in w:
    p = f"bert/encoder/layer_{layer}/"

    def dense(t, name, p=p):
      return t @ w[p + name + "/kernel"] + w[p + name + "/bias"]

    def split(t):
      return t.reshape(batch, seq, heads, size).transpose(0, 2, 1, 3)

    q = split(dense(x, "attention/self/query"))
    k = split(dense(x, "attention/self/key"))
    v = split(dense(x, "attention/self/value"))
    probs = softmax(q @ k.transpose(0, 1, 3, 2) / math.sqrt(size) + adder)
    context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, hidden)
    x = layer_norm(x + dense(context, "attention/output/dense"),
                   w[p + "attention/output/LayerNorm/gamma"],
                   w[p + "attention/output/LayerNorm/beta"])
    inner = gelu(dense(x, "intermediate/dense"))
    x = layer_norm(x + dense(inner, "output/dense"),
                   w[p + "output/LayerNorm/gamma"],
                   w[p + "output/LayerNorm/beta"])
    layer += 1
  pooled = np.tanh(x[:, 0] @ w["bert/pooler/dense/kernel"] +
                   w["bert/pooler/dense/bias"])
  return x, pooled


def numpy_heads(w, sequence_output, pooled, positions, gelu=gelu_tanh):
  """(masked-LM logits at `positions`, next-sentence logits), as the original heads."""
  w = {k: v.astype(np.float64) for k, v in w.items()}
  gathered = np.take_along_axis(sequence_output, positions[..., None], axis=1)
  t = gelu(gathered @ w["cls/predictions/transform/dense/kernel"] +
           w["cls/predictions/transform/dense/bias"])
  t = layer_norm(t, w["cls/predictions/transform/LayerNorm/gamma"],
                 w["cls/predictions/transform/LayerNorm/beta"])
  mlm = (t @ w["bert/embeddings/word_embeddings"].T +
         w["cls/predictions/output_bias"])
  nsp = (pooled @ w["cls/seq_relationship/output_weights"].T +
         w["cls/seq_relationship/output_bias"])
  return mlm, nsp


def mean_pool(sequence_output, mask, normalize=False):
  """sentence-transformers' Pooling(mean) (+ Normalize): the mean over input_mask == 1."""
  m = mask[..., None].astype(np.float64)
  pooled = (sequence_output * m).sum(1) / np.maximum(m.sum(1), 1e-9)
  if normalize:
    pooled /= np.maximum(np.linalg.norm(pooled, axis=-1, keepdims=True), 1e-12)
  return pooled


def from_hf_state_dict(state):
  """TF1-named weights of a Hugging Face `BertModel` state dict (names with or without the
  "bert." prefix). torch Linear weights are [out, in]: TF1 kernels are their transpose."""
  out = {}
  for name, value in state.items():
    name = name.removeprefix("bert.")
    if name.endswith("position_ids"):
      continue  # a constant buffer, not a weight
    parts = name.split(".")
    leaf = parts.pop()
    if parts[-1] == "LayerNorm":
      leaf = {"weight": "gamma", "bias": "beta"}.get(leaf, leaf)
    elif parts[-1].endswith("_embeddings"):
      leaf = None  # TF1: bert/embeddings/word_embeddings, no /weight
    elif leaf == "weight":
      leaf, value = "kernel", value.T
    if parts[0] == "encoder":  # encoder.layer.3.x -> encoder/layer_3/x
      parts[1:3] = [f"layer_{parts[2]}"]
    out["/".join(["bert"] + parts + ([leaf] if leaf else []))] = value
  return out
