"""BERT's random initializer, and building a model whose weights are assigned next without
drawing them first.

`from_preset` and `save` build a model and then assign every weight of its encoder from a
file: drawing those weights first is wasted work (half of loading MiniLM on TensorFlow; on
JAX a compilation per weight shape). Inside `draws_deferred()`, `TruncatedNormal` gives
zeros instead and records that it did; `Deferred.draw(model, assigned)` then gives every
weight that was not assigned the values its initializer would have drawn. Those are the same
values: an initializer without a seed draws one when it is made (Keras' rule), and its draws
are stateless in that seed, so when it runs does not change what it gives.
"""

import contextlib
import contextvars

import keras

# The `Deferred` of the `draws_deferred()` this thread (or task) is in, if any.
_ACTIVE = contextvars.ContextVar("official_bert_draws_deferred", default=None)


@keras.saving.register_keras_serializable(package="official_bert")
class TruncatedNormal(keras.initializers.TruncatedNormal):
  """BERT's initializer: a normal with `stddev` (initializer_range), cut at 2 stddev; zeros
  inside `draws_deferred()`, drawn later by `Deferred.draw`. (Only with an int seed, the one
  Keras draws when none is given: a `SeedGenerator` seed would advance with each draw.)"""

  def __call__(self, shape, dtype=None):
    deferred = _ACTIVE.get()
    if deferred is not None and isinstance(self.seed, int):
      deferred.skipped.add(id(self))
      return keras.ops.zeros(shape, dtype=dtype)
    return super().__call__(shape, dtype=dtype)


def initializers_of(model):
  """{id(variable): initializer} for the weights of `model`'s layers whose initializer is
  known: a Keras layer's `<name>_initializer` for its variable `_<name>` (Dense's kernel,
  Embedding's embeddings, ...) and what our layers' `add_weight` recorded."""
  found = {}
  for layer in model._flatten_layers(include_self=True, recursive=True):  # pylint: disable=protected-access
    for attribute, initializer in list(vars(layer).items()):
      if not attribute.endswith("_initializer") or not isinstance(
          initializer, keras.initializers.Initializer):
        continue
      base = attribute[:-len("_initializer")]
      variable = vars(layer).get("_" + base, vars(layer).get(base))
      if isinstance(variable, keras.Variable):
        found[id(variable)] = initializer
    found.update(getattr(layer, "_weight_initializers", {}))
  return found


class Deferred:
  """The draws `TruncatedNormal` skipped inside one `draws_deferred()`."""

  def __init__(self):
    self.skipped = set()  # id() of each initializer that gave zeros

  def draw(self, model, assigned):
    """Gives each weight of `model` whose draw was skipped and that is not in `assigned` (the
    variables the caller assigned) its initializer's values. Raises RuntimeError when a
    skipped draw's weight is not found in `model`: it would stay zeros."""
    assigned = {id(v) for v in assigned}
    initializers = initializers_of(model)
    found = set()
    for variable in model.variables:
      initializer = initializers.get(id(variable))
      if initializer is None or id(initializer) not in self.skipped:
        continue
      found.add(id(initializer))
      if id(variable) not in assigned:
        variable.assign(initializer(variable.shape, dtype=variable.dtype))
    if found != self.skipped:
      raise RuntimeError(f"{len(self.skipped - found)} of {len(self.skipped)} deferred initial "
                         "weights are not in the model: they would stay zeros")


@contextlib.contextmanager
def draws_deferred():
  """Inside, `TruncatedNormal` gives zeros; call the yielded `Deferred`'s `draw` once the
  model built inside is assigned. Not nested: an inner model's zeros would be left to an
  outer `draw` that does not know it."""
  if _ACTIVE.get() is not None:
    raise RuntimeError("draws_deferred() is already active")
  deferred = Deferred()
  token = _ACTIVE.set(deferred)
  try:
    yield deferred
  finally:
    _ACTIVE.reset(token)
