"""JAX only: Keras' `steps_per_execution` as one jitted `lax.scan` over the steps' batches.

Keras' JAX trainer runs `compile(steps_per_execution=N)` as a Python loop of N jitted steps,
each dispatched on its own, with the host's work between them (`bench/RESULTS.md`: on an H200
the GPU sat idle about 9% of a BERT-base pretraining step under fit). Here the N batches (as
Keras' iterator delivers them, one by one) are padded to one shape and stacked, and the N
steps run as one compiled scan of Keras' own `train_step(state, data)`: the same step and
state, no host work between the steps. TensorFlow's trainer already runs the N steps in one
graph (`tf.while_loop`); PyTorch's keeps Keras' loop.

The cost: fit cuts each batch to the bucket length of its longest sentence
(`training.padding`); a scan's batches run at the longest of their N lengths, so on short
texts of mixed lengths a large N does more work per step than N=1.
"""

import functools

import jax


def scanned_train_function(train_step, steps, token_features=()):
  """Keras' JAX `train_function(state, iterator)` for `steps` steps per call: the next
  `steps` batches of `iterator` stacked and trained by one jitted scan; a shorter run (an
  epoch's end) or batches of differing shapes (a partial last batch) take one jitted step
  each, in order. Returns the logs of the last step, as Keras' loop does.

  token_features: the names of the inputs whose padding the API's batches are cut to
  (`training.padding`: [batch, ..., seq], cut on the last axis); the batches of one scan are
  padded back with zeros to their longest, as the preprocessor had padded them (attention
  masks the padding: the same losses, to float rounding)."""
  one_step = jax.jit(train_step, donate_argnums=0)

  def body(state, data):
    logs, state = train_step(state, data)
    return state, logs

  @functools.partial(jax.jit, donate_argnums=0)
  def scan(state, stacked):
    state, logs = jax.lax.scan(body, state, stacked)
    return jax.tree.map(lambda t: t[-1], logs), state

  def function(state, iterator):
    batches = [next(iterator)]  # StopIteration here ends the epoch, as in Keras' loop
    for _ in range(steps - 1):
      try:
        batches.append(next(iterator))
      except StopIteration:
        break
    if len(batches) == steps:
      if token_features:
        batches = _padded_to_longest(batches, token_features)
      if _same_shapes(batches):
        stacked = jax.tree.map(lambda *leaves: jax.numpy.stack(leaves), *batches)
        function.scans += 1
        return scan(state, stacked)
    for data in batches:
      logs, state = one_step(state, data)
    return logs, state

  function.scans = 0  # how many executions ran as a scan (tests read it)
  return function


def _padded_to_longest(batches, names):
  """Each batch's `names` inputs (in its x, a dict) zero-padded on the last axis to the
  longest among `batches`."""
  if not all(isinstance(b, tuple) and isinstance(b[0], dict) for b in batches):
    return batches
  longest = {name: max(b[0][name].shape[-1] for b in batches)
             for name in names if all(name in b[0] for b in batches)}

  def pad(value, length):
    if value.shape[-1] == length:
      return value
    widths = [(0, 0)] * (value.ndim - 1) + [(0, length - value.shape[-1])]
    return jax.numpy.pad(value, widths)

  return [(dict(b[0], **{name: pad(b[0][name], n) for name, n in longest.items()}),) + b[1:]
          for b in batches]


def _same_shapes(batches):
  structures = {jax.tree.structure(b) for b in batches}
  shapes = {tuple((tuple(leaf.shape), str(leaf.dtype)) for leaf in jax.tree.leaves(b))
            for b in batches}
  return len(structures) == 1 and len(shapes) == 1
