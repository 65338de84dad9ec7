"""Pure-Python helpers the pretraining-step benches share (no Keras, TensorFlow or PyTorch)."""


def per_config(spec, name):
  """The int for config `name` in a spec like "20,base=5" (5 for base, 20 otherwise)."""
  value = None
  for item in str(spec).split(","):
    key, _, val = item.strip().rpartition("=")
    if key in ("", name):
      value = int(val) if key or value is None else value
  if value is None:
    raise ValueError(f"no default in {spec!r}")
  return value


def train_flops_per_sequence(cfg, seq, preds):
  """Matmul FLOPs of one training sequence: 3 x forward (forward + 2x backward).

  cfg: a `BertConfig` or a bert_config.json dict. Per layer: q/k/v/output projections 4*H*H
  and the feed-forward 2*H*I per token, plus scores and context 2*S*H per token; MLM
  transform H*H and decoder H*V per prediction; pooler and NSP. Embedding lookups, softmax
  and LayerNorm are not counted (as in MFU usage). A side that computes the MLM logits at
  every position (Hugging Face) does more work than this count: it is the same for every
  side, so the MFU column compares the work of one step as our model defines it.
  """
  get = cfg.get if isinstance(cfg, dict) else lambda key: getattr(cfg, key)
  h, inner, layers = get("hidden_size"), get("intermediate_size"), get("num_hidden_layers")
  per_layer = 2 * seq * (4 * h * h + 2 * h * inner) + 2 * 2 * seq * seq * h
  heads = 2 * preds * (h * h + h * get("vocab_size")) + 2 * (h * h + 2 * h)
  return 3 * (layers * per_layer + heads)
