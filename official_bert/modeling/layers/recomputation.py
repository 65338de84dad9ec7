"""Gradient checkpointing of a Transformer layer, exact with dropout.

`keras.remat` (tf.recompute_grad, jax.checkpoint, torch.utils.checkpoint) runs a layer's
forward pass again in the backward pass instead of keeping its activations: at seq 512 most
of a step's memory. A recomputed pass must drop the same units as the first, but a Keras
`Dropout` draws a new seed from its generator on every call (on TensorFlow the recomputation
would train against other masks). So a layer draws its seeds once per call, outside the
recomputed function (`layer_seeds`), and its dropouts take those (`dropout`): the same masks
with and without recomputation, hence the same loss and gradients.
"""

import keras
from keras import ops

from official_bert.modeling.layers import hashed_dropout


class FixedSeed(keras.random.SeedGenerator):
  """A seed for `keras.random` ops that is a given [2] tensor, not a state variable.

  `initial_seed`: the generator's it comes from. On PyTorch an unseeded generator's dropout
  draws from torch's global RNG, whose state `torch.utils.checkpoint` restores for the
  recomputation; Keras reads this attribute to choose that path.
  """

  def __init__(self, seed, initial_seed=None):  # pylint: disable=super-init-not-called
    self._seed = seed  # no state variable: nothing to track or checkpoint
    self._initial_seed = initial_seed

  def next(self, ordered=True):
    del ordered
    return self._seed


def layer_seeds(dropouts, count):
  """`count` seeds for one call of a layer, from one draw of the first of its `dropouts`
  (keras Dropout layers) that has a seed generator; (None, ...) where none has (every rate
  0: Keras makes no generator then, and no dropout draws)."""
  generators = (getattr(d, "seed_generator", None) for d in dropouts)
  generator = next((g for g in generators if g is not None), None)
  if generator is None:
    return [None] * count
  seed = generator.next()  # [2]
  initial = getattr(generator, "_initial_seed", None)
  return [FixedSeed(seed + ops.cast(ops.convert_to_tensor([0, k]), seed.dtype), initial)
          for k in range(count)]


def dropout(layer, x, training, seed):
  """`layer` (a keras Dropout: its rate and noise shape) on `x` through `hashed_dropout`,
  drawing from `seed` (a FixedSeed), or from the layer's own generator where `seed` is None."""
  if not training or layer.rate == 0:
    return x
  seed = layer.seed_generator if seed is None else seed
  return hashed_dropout.dropout(x, layer.rate, layer.noise_shape, seed)
