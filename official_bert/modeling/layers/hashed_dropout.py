"""Dropout whose keep mask comes from a counter hash on JAX: the encoder's dropouts.

Keras' JAX dropout draws its mask with threefry (`jax.random.bernoulli`: 20 rounds of
add-rotate-xor per pair of words), and BERT drops on every activation and attention
probability. Here each element's index, mixed with the call's seed, goes through two rounds
of an integer hash (lowbias32, C. Wellons: a bijection of uint32 with low-bias avalanche),
a few times less integer work, which XLA fuses into the select that applies the mask (what
it is worth on a GPU pretraining step: bench/RESULTS.md). A mask is a
function of (seed, index) alone, so a recomputed layer (`recomputation`) drops the same
units; deterministic for a seed, like Keras' dropout, with other masks. TensorFlow and
PyTorch keep Keras' dropout (their exports and parity tests rest on it).
"""

import keras
import numpy as np

# The backends whose encoder dropout is hashed; the GPU bench's `threefry` ablation empties it.
HASHED_BACKENDS = ("jax",)

_GOLDEN = np.uint32(0x9E3779B9)


def dropout(x, rate, noise_shape, seed):
  """`x` with each element (or each of `noise_shape`'s, broadcast) zeroed with probability
  `rate` and the rest scaled by 1 / (1 - rate); `seed` a keras SeedGenerator (or
  `recomputation.FixedSeed`) that gives a [2] seed per call."""
  if keras.backend.backend() not in HASHED_BACKENDS:
    return keras.random.dropout(x, rate, noise_shape=noise_shape, seed=seed)
  return _hashed_dropout_jax(x, rate, noise_shape, seed.next())


def _mix(x):
  """lowbias32: uint32 -> uint32 (wrapping arithmetic)."""
  x = x ^ (x >> 16)
  x = x * np.uint32(0x7FEB352D)
  x = x ^ (x >> 15)
  x = x * np.uint32(0x846CA68B)
  return x ^ (x >> 16)


def keep_mask_jax(shape, keep_prob, seed):
  """bool `shape`, True with probability `keep_prob` (to 2^-32), from a [2] integer seed."""
  import jax  # pylint: disable=g-import-not-at-top
  jnp = jax.numpy
  seed = jax.lax.convert_element_type(seed, "uint32")  # [2]
  key0 = _mix(seed[0] ^ _mix(seed[1] ^ _GOLDEN))  # scalar: both seed words reach every bit
  key1 = _mix(key0 + seed[1])
  # Each element's row-major position, mod 2^32: masks would repeat only in a tensor of
  # over 4 billion elements.
  index = jnp.zeros(shape, "uint32")
  stride = 1
  for axis in reversed(range(len(shape))):
    index = index + jax.lax.broadcasted_iota("uint32", shape, axis) * np.uint32(stride)
    stride *= shape[axis]
  bits = _mix(_mix(index ^ key0) + key1)  # [*shape]
  threshold = np.uint32(min(round(keep_prob * 2.0**32), 2**32 - 1))
  return bits < threshold


def _hashed_dropout_jax(x, rate, noise_shape, seed):
  import jax  # pylint: disable=g-import-not-at-top
  jnp = jax.numpy
  shape = tuple(x.shape) if noise_shape is None else tuple(
      x.shape[i] if s is None else s for i, s in enumerate(noise_shape))
  keep = jnp.broadcast_to(keep_mask_jax(shape, 1.0 - rate, seed), x.shape)
  return jnp.where(keep, x / jnp.asarray(1.0 - rate, x.dtype), jnp.zeros_like(x))
