"""`BertConfig`: the hyper-parameters of google-research `bert_config.json`."""

import dataclasses
import inspect
import json
from typing import Any, Mapping

from absl import logging

from official_bert.modeling import activation_names

# The epsilon of every LayerNorm, as in the original; not a config key (HF's
# `layer_norm_eps` must equal it).
LAYER_NORM_EPSILON = 1e-12


@dataclasses.dataclass
class BertConfig:
  """Configuration of a BERT model; field names match `bert_config.json`.

  `hidden_act="gelu"` is the ORIGINAL google-research tanh approximation;
  use `"gelu_exact"` for the erf form (what Hugging Face calls "gelu").
  """
  vocab_size: int
  hidden_size: int = 768
  num_hidden_layers: int = 12
  num_attention_heads: int = 12
  intermediate_size: int = 3072
  hidden_act: str = "gelu"
  hidden_dropout_prob: float = 0.1
  attention_probs_dropout_prob: float = 0.1
  max_position_embeddings: int = 512
  type_vocab_size: int = 16
  initializer_range: float = 0.02

  def __post_init__(self):
    self._coerce_floats()
    self.validate()

  def _coerce_floats(self):
    # JSON writers emit `0` for a zero dropout rate; store it as a float.
    for name, t in _field_types().items():
      value = getattr(self, name)
      if t is float and type(value) is int:  # pylint: disable=unidiomatic-typecheck
        setattr(self, name, float(value))

  def validate(self, source="BertConfig"):
    """Checks types and ranges; raises ValueError naming `source` and key."""
    for field in dataclasses.fields(self):
      value = getattr(self, field.name)
      expected = field.type
      # bool is an int subclass; `"num_hidden_layers": true` is a typo.
      if isinstance(value, bool) or not isinstance(value, expected):
        raise ValueError(
            f"{source}: key {field.name!r} must be of type "
            f"{expected.__name__}, got {value!r} ({type(value).__name__}).")
    for key in ("vocab_size", "hidden_size", "num_hidden_layers",
                "num_attention_heads", "intermediate_size",
                "max_position_embeddings", "type_vocab_size"):
      if getattr(self, key) <= 0:
        raise ValueError(f"{source}: key {key!r} must be positive, got "
                         f"{getattr(self, key)!r}.")
    for key in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
      if not 0.0 <= getattr(self, key) < 1.0:
        raise ValueError(f"{source}: key {key!r} must be in [0, 1), got "
                         f"{getattr(self, key)!r}.")
    if self.initializer_range <= 0:
      raise ValueError(f"{source}: key 'initializer_range' must be positive, "
                       f"got {self.initializer_range!r}.")
    if self.hidden_size % self.num_attention_heads:
      raise ValueError(
          f"{source}: key 'hidden_size' ({self.hidden_size}) must be a "
          f"multiple of 'num_attention_heads' ({self.num_attention_heads}).")
    if self.hidden_act not in activation_names.NAMES:
      raise ValueError(
          f"{source}: key 'hidden_act' is {self.hidden_act!r}; expected one "
          f"of {list(activation_names.NAMES)}.")

  @classmethod
  def from_dict(cls, d: Mapping[str, Any], source: str = "<dict>"):
    """Builds a config from a dict; unknown keys are ignored with a warning."""
    if not isinstance(d, Mapping):
      raise ValueError(f"{source}: expected a JSON object, got "
                       f"{type(d).__name__}.")
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(d) - set(names))
    if unknown:
      logging.warning("%s: ignoring unknown BERT config keys %s.", source,
                     unknown)
    # As the original's `BertConfig.from_json_file`, every key is given: a missing one would
    # silently train a model of another shape (e.g. 768 wide without "hidden_size").
    missing = [name for name in names if name not in d]
    if missing:
      raise ValueError(f"{source}: missing required key(s) {missing} (a bert_config.json "
                       f"has all of {names}).")
    # Bypass __init__/__post_init__ so that error messages name `source`.
    config = cls.__new__(cls)
    for f in dataclasses.fields(cls):
      setattr(config, f.name, d[f.name] if f.name in d else f.default)
    config._coerce_floats()  # pylint: disable=protected-access
    config.validate(source)
    return config

  @classmethod
  def from_json_string(cls, text, source="<json>"):
    try:
      d = json.loads(text)
    except json.JSONDecodeError as e:
      raise ValueError(f"{source}: not valid JSON: {e}") from e
    return cls.from_dict(d, source=source)

  def to_dict(self):
    return dataclasses.asdict(self)

  def to_json_string(self):
    return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

  def check_sequence_length(self, length, name, source=None):
    """A sequence length must fit the position table: the one check of every route (a
    command's --max_seq_length, export, the API's sequence_length, the encoder's inputs).
    `name`: the flag or argument; `source`: where this config was read, if from a file."""
    if length > self.max_position_embeddings:
      where = f" ({source})" if source else ""
      raise ValueError(f"{name}={length} is more than the model's max_position_embeddings="
                       f"{self.max_position_embeddings}{where}")

  def layer_arguments(self, layer_class):
    """The fields `layer_class`'s constructor takes, by name: a layer is built from the
    config without repeating its field list (`TransformerBlock(**c.layer_arguments(...))`)."""
    accepted = inspect.signature(layer_class.__init__).parameters
    return {name: value for name, value in self.to_dict().items() if name in accepted}


def _field_types():
  return {f.name: f.type for f in dataclasses.fields(BertConfig)}
