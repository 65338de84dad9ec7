"""`ConfigLayer`: a layer whose constructor arguments are its config, stored once.

keras-hub's rule, without writing each argument three times (signature, attribute,
`get_config`): a layer calls `self.store_config(locals())` right after `super().__init__`,
which sets every argument as an attribute and makes `get_config` return them.
"""

import keras

from official_bert.modeling.layers import initialization


def truncated_normal(stddev):
  """BERT's initializer: a normal with `stddev` (initializer_range), cut at 2 stddev (its
  draws deferrable: `initialization.draws_deferred`)."""
  return initialization.TruncatedNormal(stddev=stddev)


class ConfigLayer(keras.layers.Layer):
  """Base of our layers: constructor arguments -> attributes -> `get_config`."""

  def store_config(self, arguments):
    """Stores `arguments` (the constructor's `locals()`), except `self` and `kwargs`."""
    self._config = {name: value for name, value in arguments.items()
                    if name not in ("self", "kwargs", "__class__")}
    for name, value in self._config.items():
      setattr(self, name, value)

  def add_weight(self, *args, **kwargs):
    """Keras' `add_weight`, which also records the weight's initializer (for
    `initialization.initializers_of`)."""
    variable = super().add_weight(*args, **kwargs)
    initializer = kwargs.get("initializer", args[1] if len(args) > 1 else None)
    if not hasattr(self, "_weight_initializers"):
      self._weight_initializers = {}
    self._weight_initializers[id(variable)] = initializer
    return variable

  def get_config(self):
    config = super().get_config()
    config.update(self._config)
    return config
