"""Activation functions used by BERT, looked up by name.

Layers store the activation *name* in their config (never the function), so a
serialized model always refers to one of the names in ``ACTIVATIONS``.

Naming follows the original google-research BERT, where ``"gelu"`` is the tanh
approximation. Hugging Face uses ``"gelu"`` for the exact erf form; the HF
converter (``official_bert.interop.hf_weights``) translates names with the one
table in ``activation_names``, so this module never has to guess which
convention a string follows.
"""

import math

import keras
from keras import ops

from official_bert.modeling import activation_names

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def gelu_tanh(x):
  """GELU, tanh approximation (google-research BERT's `gelu`)."""
  x = ops.convert_to_tensor(x)
  cube = ops.multiply(ops.multiply(x, x), x)
  inner = _SQRT_2_OVER_PI * (x + 0.044715 * cube)
  return 0.5 * x * (1.0 + ops.tanh(inner))


def gelu_exact(x):
  """GELU, exact erf form: 0.5 * x * (1 + erf(x / sqrt(2)))."""
  x = ops.convert_to_tensor(x)
  return 0.5 * x * (1.0 + ops.erf(x / math.sqrt(2.0)))


def relu(x):
  return ops.relu(x)


def tanh(x):
  return ops.tanh(x)


def linear(x):
  return ops.convert_to_tensor(x)


_FUNCTIONS = {f.__name__: f for f in (gelu_tanh, gelu_exact, relu, tanh, linear)}
# Name -> function, from the one name table (a name without a function fails at import).
ACTIVATIONS = {name: _FUNCTIONS[fn] for name, fn in activation_names.FUNCTION_OF.items()}


def get_activation(name):
  """Returns the activation function registered under `name`.

  Raises:
    ValueError: `name` is not a string or not a known activation.
  """
  if not isinstance(name, str):
    raise ValueError(
        f"Activation must be given by name (one of {sorted(ACTIVATIONS)}), "
        f"got {name!r}.")
  try:
    return ACTIVATIONS[name]
  except KeyError:
    raise ValueError(
        f"Unknown activation {name!r}; expected one of "
        f"{sorted(ACTIVATIONS)}.") from None


# Registered so the functions also survive Keras serialization if someone
# passes them directly as a `keras.layers.Dense(activation=...)`.
for _fn in (gelu_tanh, gelu_exact):
  keras.saving.register_keras_serializable(package="official_bert")(_fn)
del _fn
