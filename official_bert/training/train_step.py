"""One training step's math, for the commands' loop and the Python API's `fit`.

`training_loop.Trainer` (every command) and `api.task_model.TaskModel.train_step` (`fit`
with `compile()`'s default optimizer) both take a step as:
  1. the task's loss: each loss part's sum over its GLOBAL normalizer (`task_loss`), so the
     replicas' gradients, summed, are the gradient of the whole batch's mean;
  2. dense gradients of the (loss-scaled) loss (`replica_gradients`);
  3. the gradients summed over the replicas, clipped at the global norm of the unscaled sum
     (the norm one device would see), applied (`apply`).
Keras' own step would clip each replica's part before its all-reduce and measure an
embedding's sparse gradient with its repeated rows apart; so the optimizer is told the
gradients it gets are already summed (`takes_summed_gradients`).
`task_loss` and `global_normalizers` also serve `fit` on JAX and PyTorch (Keras' own step).
"""

import keras
from keras import ops
import tensorflow as tf

from official_bert.training import optimization

SUM = tf.distribute.ReduceOp.SUM


def _already_summed(grads_and_vars):
  return list(grads_and_vars)


def takes_summed_gradients(optimizer):
  """`optimizer` (or the one a LossScaleOptimizer wraps) applies the gradients `apply` gives
  it as they are, without summing them over the replicas again. Returns it. (For good: an
  optimizer patched so belongs to these steps, not to Keras' own step under a strategy.)"""
  inner = getattr(optimizer, "inner_optimizer", optimizer)
  inner._all_reduce_sum_gradients = _already_summed  # pylint: disable=protected-access
  return optimizer


def task_loss(task, features, outputs, normalizers):
  """(loss, {part: loss}): each of the task's loss sums over its normalizer (already summed
  over the replicas) plus the task's epsilon for that part."""
  sums = task.loss_sums(features, outputs)
  parts = {}
  for name, value in sums.items():
    normalizer = ops.cast(normalizers[name], "float32") + task.loss_epsilons.get(name, 0.0)
    # Floored: a batch with nothing to score (no labeled token) adds 0, not NaN.
    parts[name] = value / ops.maximum(normalizer, 1e-12)
  values = list(parts.values())
  return (sum(values[1:], values[0]) if values else ops.zeros(())), parts


def global_normalizers(task, features):
  """The task's loss normalizers (e.g. labeled tokens) summed over the replicas."""
  normalizers = task.loss_normalizers(features)
  if keras.backend.backend() != "tensorflow":  # one device: Keras' own step
    return normalizers
  context = tf.distribute.get_replica_context()
  if context is None or context.num_replicas_in_sync == 1:
    return normalizers
  return context.all_reduce(SUM, normalizers)


def replica_gradients(loss_fn, variables, optimizer):
  """(dense gradients, loss, aux) of `loss_fn() -> (loss, aux)` on this replica; the loss
  scaled by a LossScaleOptimizer's scale (mixed float16), the gradients not yet unscaled."""
  with tf.GradientTape() as tape:
    loss, aux = loss_fn()
    scaled = optimizer.scale_loss(loss)
  return optimization.dense_gradients(tape.gradient(scaled, variables), variables), loss, aux


def apply(optimizer, grads, variables, clip_norm):
  """Sums this replica's `grads` over the replicas, clips them at `clip_norm` (None or 0: no
  clipping) by the global norm of the unscaled sum, and applies them (a LossScaleOptimizer
  unscales them, and skips a step whose gradients are not finite). Returns that norm."""
  context = tf.distribute.get_replica_context()
  if context is not None and context.num_replicas_in_sync > 1:
    grads = context.all_reduce(SUM, grads)
  scale = getattr(optimizer, "dynamic_scale", None)
  if scale is not None:
    scale = tf.cast(scale, tf.float32)
    grads = [g / scale for g in grads]
  if clip_norm:
    grads, norm = optimization.clip_by_global_norm(grads, clip_norm)
  else:
    norm = tf.linalg.global_norm(grads)
  if scale is not None:
    grads = [g * scale for g in grads]
  optimizer.apply(grads, variables)
  return norm
