"""Which encoder layers a feature-based model or `extract_features` reads, and how they are
combined (BERT paper, section 5.3, Table 7).

Hidden states are numbered as in Hugging Face's `hidden_states`: 0 is the embedding output,
1..L the outputs of the L Transformer layers. Users name them the original
`extract_features.py` way: -1 is the last layer, -2 the second-to-last, a non-negative i the
(i+1)-th Transformer layer (0-based, as `all_encoder_layers[i]`); plus `embeddings` for the
embedding output and `all` for every Transformer layer (the paper's "sum all 12 layers").

Combinations (`COMBINE_MODES`):
  concat    the chosen layers side by side: [b, s, k * hidden] (the paper's best, last four)
  sum       their plain sum: [b, s, hidden]
  weighted  a learned softmax-weighted sum times a learned scale (ELMo's scalar mix)
  last      only the topmost chosen layer (rows "last hidden", "second-to-last", "embeddings")
"""

COMBINE_MODES = ("concat", "sum", "weighted", "last")
EMBEDDINGS = "embeddings"


def parse_layers(values, num_layers, flag="layers"):
  """User layer names -> hidden-state indices (0 = embeddings, num_layers = last), in order.

  Raises:
    ValueError naming `--flag` for a value that is not a layer, is out of range or repeats.
  """
  if isinstance(values, str):
    values = [v for v in values.split(",") if v.strip()]
  indices, named = [], {}  # named: hidden-state index -> the values that chose it
  for value in values:
    text = str(value).strip().lower()
    if text in (EMBEDDINGS, "emb"):
      indices.append(0)
      named.setdefault(0, []).append(text)
      continue
    if text == "all":
      indices.extend(range(1, num_layers + 1))
      for i in range(1, num_layers + 1):
        named.setdefault(i, []).append("all")
      continue
    try:
      i = int(text)
    except ValueError:
      raise ValueError(f"--{flag}: {value!r} is not a layer (an integer, -1 = last, "
                       f"'{EMBEDDINGS}' or 'all'; e.g. --{flag}=-1,-2,-3,-4)") from None
    if not -num_layers <= i < num_layers:
      raise ValueError(f"--{flag}: layer {i} is out of range for a model with {num_layers} "
                       f"layers (use -{num_layers}..{num_layers - 1}, or '{EMBEDDINGS}')")
    indices.append(i + num_layers + 1 if i < 0 else i + 1)
    named.setdefault(indices[-1], []).append(text)
  if not indices:
    raise ValueError(f"--{flag} names no layer")
  repeated = [" and ".join(named[i]) for i in sorted(set(indices)) if indices.count(i) > 1]
  if repeated:
    raise ValueError(f"--{flag}: {'; '.join(repeated)} name the same layer (of a model with "
                     f"{num_layers} layers: 0..{num_layers - 1}, or -{num_layers}..-1 from the "
                     f"last): give each layer once")
  return indices


def hidden_states(encoder_outputs):
  """[embedding output, layer 1, ..., layer L] from a `BertEncoder`'s outputs dict."""
  return [encoder_outputs["embedding_output"]] + list(encoder_outputs["encoder_outputs"])


def output_width(combine, num_chosen, hidden_size):
  """The last dimension of the combined features."""
  return hidden_size * num_chosen if combine == "concat" else hidden_size


def check_combine(combine, flag="combine"):
  if combine not in COMBINE_MODES:
    raise ValueError(f"--{flag}={combine!r}: expected one of {', '.join(COMBINE_MODES)}")
  return combine


def describe(indices, num_layers):
  """A readable name for chosen hidden states, for logs and tables."""
  names = []
  for i in indices:
    names.append(EMBEDDINGS if i == 0 else f"layer {i}/{num_layers}")
  return ", ".join(names)
