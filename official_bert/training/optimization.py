"""Learning-rate schedule, AdamW/LAMB optimizers and gradient clipping for BERT.

Mirrors google-research/bert `optimization.create_optimizer`:
  * warmup then linear decay of the learning rate (`warmup_linear_decay`);
  * decoupled weight decay, except on variables whose path matches
    "LayerNorm", "layer_norm" or "bias";
  * gradient clipping to global norm 1.0 -- done by the training loop with
    `clip_by_global_norm` (it also logs the norm), never inside the optimizer.

Layer-wise learning-rate decay (`layerwise_lr_decay`, ELECTRA's recipe): the learning rate
of a variable at depth d is multiplied by decay ** (L - d), where d is 0 for the embeddings,
i + 1 for Transformer layer i and L (factor 1) for the pooler and every head
(`layerwise_lr_scale`). The decoupled weight decay, which is `lr * weight_decay * var`,
follows the same per-layer rate, and the weight-decay exclusions are unchanged.

AdamW (`BertAdamW`) comes in the two forms users compare with, by `adam_bias_correction`:
True (the default) is PyTorch's `torch.optim.AdamW` (bias-corrected moments, epsilon added to
sqrt(v_hat)), what Hugging Face and keras-hub users fine-tune with; False is the original's
`AdamWeightDecayOptimizer` exactly (no bias correction).
LAMB (`BertLamb`) is the paper's, as the Model Garden and NVIDIA implement it: the decay
inside the update that the trust ratio scales, no ratio for excluded variables.
"""

import re

import keras
from keras import ops
import numpy as np
import tensorflow as tf

OPTIMIZERS = ("adamw", "lamb")
DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")


SCHEDULES = ("bert", "linear")


def warmup_linear_decay(step, peak_lr, num_warmup_steps, num_train_steps,
                        end_lr=0.0, schedule="bert"):
  """The original BERT learning rate at (0-based) global `step` (`schedule="bert"`).

  Exactly google-research/bert `create_optimizer`:
    decayed = (peak_lr - end_lr) * (1 - min(step, num_train_steps)
                                     / num_train_steps) + end_lr
      (`polynomial_decay`, power 1, of the GLOBAL step, not step - warmup);
    warmup  = peak_lr * step / num_warmup_steps;
    lr      = warmup if step < num_warmup_steps else decayed.
  So lr(0) = 0, it climbs by peak_lr / num_warmup_steps per step, and at
  step == num_warmup_steps it jumps onto the decay line at
  peak_lr * (1 - num_warmup_steps / num_train_steps): peak_lr itself is never
  used when num_warmup_steps > 0. It reaches end_lr at num_train_steps and
  stays there. num_warmup_steps == 0 means no warmup (as `if
  num_warmup_steps:` in the original), not a division by zero.

  `schedule="linear"` is Hugging Face's `get_linear_schedule_with_warmup` instead: the same
  warmup, then from peak_lr at num_warmup_steps linearly to end_lr at num_train_steps
  (no jump; a larger learning rate throughout the decay, by num_train_steps /
  (num_train_steps - num_warmup_steps) at its start).

  Args:
    step: python/numpy number or array, or a tf tensor / Keras variable
      (e.g. `optimizer.iterations`).
    peak_lr, end_lr: python floats.
    num_warmup_steps, num_train_steps: python ints, 0 <= warmup, 0 < train.

  Returns:
    a python float for a scalar python/numpy step, a float64 numpy array for
    an array, a float32 tensor for a tensor step.
  """
  if num_train_steps <= 0:
    raise ValueError(f"num_train_steps must be > 0, got {num_train_steps}.")
  if num_warmup_steps < 0:
    raise ValueError(f"num_warmup_steps must be >= 0, got {num_warmup_steps}.")
  if schedule not in SCHEDULES:
    raise ValueError(f"Unknown schedule {schedule!r}; valid: {', '.join(SCHEDULES)}.")
  symbolic = ops.is_tensor(step) or isinstance(step, (keras.Variable,
                                                      tf.Variable))
  if symbolic:
    # float32 counts integers exactly up to 2**24 steps, plenty for BERT.
    step = ops.cast(step, "float32")
    minimum, where = ops.minimum, ops.where
  else:
    step = np.asarray(step, dtype=np.float64)
    minimum, where = np.minimum, np.where
  decay_step = minimum(step, float(num_train_steps))
  if schedule == "linear":
    span = float(max(1, num_train_steps - num_warmup_steps))
    lr = (peak_lr - end_lr) * (num_train_steps - decay_step) / span + end_lr
  else:
    lr = (peak_lr - end_lr) * (1.0 - decay_step / num_train_steps) + end_lr
  if num_warmup_steps > 0:
    warmup_lr = peak_lr * step / num_warmup_steps
    lr = where(step < num_warmup_steps, warmup_lr, lr)
  if symbolic:
    return ops.cast(lr, "float32")
  return float(lr) if np.ndim(lr) == 0 else np.asarray(lr, np.float64)


@keras.saving.register_keras_serializable(package="official_bert")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
  """`warmup_linear_decay` as a Keras schedule (called with `iterations`)."""

  def __init__(self, peak_lr, num_warmup_steps, num_train_steps, end_lr=0.0,
               schedule="bert"):
    self.peak_lr = float(peak_lr)
    self.num_warmup_steps = int(num_warmup_steps)
    self.num_train_steps = int(num_train_steps)
    self.end_lr = float(end_lr)
    self.schedule = schedule
    # Validate now rather than at the first optimizer step.
    warmup_linear_decay(0, self.peak_lr, self.num_warmup_steps,
                        self.num_train_steps, self.end_lr, self.schedule)

  def __call__(self, step):
    return warmup_linear_decay(ops.convert_to_tensor(step), self.peak_lr,
                               self.num_warmup_steps, self.num_train_steps,
                               self.end_lr, self.schedule)

  def get_config(self):
    return {"peak_lr": self.peak_lr,
            "num_warmup_steps": self.num_warmup_steps,
            "num_train_steps": self.num_train_steps,
            "end_lr": self.end_lr,
            "schedule": self.schedule}


def _variable_path(variable):
  # Keras 3 `v.name` is only the leaf ("gamma", "kernel"); the layer part
  # ("…/layer_norm/gamma") is only in `v.path`. Plain tf.Variables have no path.
  return getattr(variable, "path", None) or variable.name


_EMBEDDINGS = re.compile(r"(^|/)embeddings/")
_LAYER = re.compile(r"(^|/)transformer_layer_(\d+)/")


def layer_depth(path, num_layers):
  """0 for the embeddings, i + 1 for `transformer_layer_i`, num_layers for everything else
  (pooler, heads), from a variable's path."""
  match = _LAYER.search(path)
  if match:
    return int(match.group(2)) + 1
  if _EMBEDDINGS.search(path):
    return 0
  return num_layers


def layerwise_lr_scale(path, num_layers, decay):
  """The learning-rate factor decay ** (num_layers - depth) of the variable at `path`."""
  return float(decay) ** (num_layers - layer_depth(path, num_layers))


def uses_weight_decay(variable,
                      exclude_from_weight_decay=DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY):
  """True unless some pattern `re.search`es the variable's path (as BERT)."""
  return not any(re.search(p, _variable_path(variable))
                 for p in exclude_from_weight_decay)


class _ExcludeByPathMixin:
  """Excludes variables from weight decay by regex on their full PATH.

  Keras' own `exclude_from_weight_decay(var_names=...)` searches
  `variable.name` of whatever reaches `_use_weight_decay`. For a Keras 3
  variable that is only the leaf ("gamma", "kernel"), so "LayerNorm" /
  "layer_norm" would not match a LayerNorm's gamma/beta; it happens to work
  on the TF backend only because there the raw tf.Variable, named
  "<path>:0", is what gets checked. Those patterns are also not saved by
  `get_config`. So at build time, while we hold the Keras variables, we
  resolve the patterns on `v.path` to an explicit list and hand it to
  Keras' id-based `exclude_from_weight_decay(var_list=...)`, and we keep the
  patterns in the config.
  """

  def __init__(self, *args, exclude_from_weight_decay_patterns=
               DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY, layerwise_lr_decay=None,
               num_layers=None, **kwargs):
    super().__init__(*args, **kwargs)
    self.exclude_from_weight_decay_patterns = tuple(
        exclude_from_weight_decay_patterns or ())
    if layerwise_lr_decay is not None and not num_layers:
      raise ValueError("layerwise_lr_decay needs num_layers (the encoder's layers)")
    self.layerwise_lr_decay = layerwise_lr_decay
    self.num_layers = num_layers
    self._lr_scales = None

  def build(self, var_list):
    if not self.built:
      excluded = [v for v in var_list if not uses_weight_decay(
          v, self.exclude_from_weight_decay_patterns)]
      self.exclude_from_weight_decay(var_list=excluded)
      if self.layerwise_lr_decay is not None:
        # In var_list order, which is the optimizer's variable index.
        self._lr_scales = [layerwise_lr_scale(_variable_path(v), self.num_layers,
                                              self.layerwise_lr_decay) for v in var_list]
    super().build(var_list)

  def scaled_learning_rate(self, learning_rate, variable):
    """The step's learning rate times the variable's layer-wise factor (if any)."""
    if not self._lr_scales:
      return learning_rate
    scale = self._lr_scales[self._get_variable_index(variable)]
    return learning_rate if scale == 1.0 else learning_rate * scale

  def get_config(self):
    config = super().get_config()
    config["exclude_from_weight_decay_patterns"] = list(
        self.exclude_from_weight_decay_patterns)
    config["layerwise_lr_decay"] = self.layerwise_lr_decay
    config["num_layers"] = self.num_layers
    return config


class _StepTerms:
  """`BertAdamW`'s terms of the step being applied (None between steps), in a plain object:
  a dict attribute of the optimizer would become a tracked checkpoint dependency."""

  terms = None


@keras.saving.register_keras_serializable(package="official_bert")
class BertAdamW(_ExcludeByPathMixin, keras.optimizers.AdamW):
  """AdamW as PyTorch (`adam_bias_correction=True`) or as the original BERT (`False`).

  For a variable with decay (not excluded), learning rate `lr` (times its layer-wise factor)
  and step t:
    m = beta_1 * m + (1 - beta_1) * g;  v = beta_2 * v + (1 - beta_2) * g^2
    True:  var -= lr * wd * var;  var -= lr * m_hat / (sqrt(v_hat) + eps)
           with m_hat = m / (1 - beta_1^t), v_hat = v / (1 - beta_2^t)   (torch.optim.AdamW)
    False: var -= lr * (m / (sqrt(v) + eps) + wd * var)        (AdamWeightDecayOptimizer)
  Both decay the old value, so they differ only in the bias correction. Keras' own Adam is
  neither: it adds epsilon to the uncorrected sqrt(v) ("epsilon hat"), which early in
  training acts like an epsilon up to 1 / sqrt(1 - beta_2) = 32 times larger, and at
  fine-tuning's small gradients makes each step several times too short.

  Each variable's Adam step is one fused `ResourceApplyAdam` kernel, which computes
  `var -= lr * sqrt(1 - b2p) / (1 - b1p) * m / (sqrt(v) + eps')`: with the bias powers
  `b1p = beta_1^t`, `b2p = beta_2^t` and `eps' = eps * sqrt(1 - beta_2^t)` that is exactly
  PyTorch's form; with `b1p = b2p = 0` and `eps' = eps`, the original's. Sparse gradients
  take the same formulas in plain ops.
  """

  def __init__(self, *args, adam_bias_correction=True, **kwargs):
    if kwargs.get("amsgrad"):
      raise ValueError("amsgrad is not supported by BertAdamW")
    super().__init__(*args, **kwargs)
    self.adam_bias_correction = bool(adam_bias_correction)
    self._this_step = _StepTerms()

  def _apply_weight_decay(self, variables):
    del variables  # Applied in `update_step`, with the variable's learning rate.

  def _distributed_tf_update_step(self, distribution, grads_and_vars, learning_rate):
    # The terms every variable's update shares (the bias powers of the step, the betas) are
    # built once per step, not once per variable: about ten ops each, a tenth of a small
    # model's training graph.
    self._this_step.terms = {}
    try:
      return super()._distributed_tf_update_step(distribution, grads_and_vars, learning_rate)
    finally:
      self._this_step.terms = None

  def _shared_terms(self, dtype, device):
    """(beta_1^t, beta_2^t, epsilon', beta_1, beta_2) in `dtype` (see the class doc), once per
    step and device (a strategy's replicas each update their own copy)."""
    cache, key = self._this_step.terms, (dtype, device)
    if cache is not None and key in cache:
      return cache[key]
    beta_1 = tf.cast(self.beta_1, dtype)
    beta_2 = tf.cast(self.beta_2, dtype)
    epsilon = tf.cast(self.epsilon, dtype)
    if not self.adam_bias_correction:
      zero = tf.zeros([], dtype)
      terms = (zero, zero, epsilon, beta_1, beta_2)
    else:
      step = tf.cast(self.iterations + 1, dtype)
      beta_2_power = tf.pow(beta_2, step)
      terms = (tf.pow(beta_1, step), beta_2_power, epsilon * tf.sqrt(1.0 - beta_2_power),
               beta_1, beta_2)
    if cache is not None:
      cache[key] = terms
    return terms

  def update_step(self, gradient, variable, learning_rate):
    dtype = variable.dtype
    if keras.backend.backend() != "tensorflow":
      return self._portable_update(gradient, variable, learning_rate)
    lr = tf.cast(self.scaled_learning_rate(learning_rate, variable), dtype)
    if self.weight_decay and self._use_weight_decay(variable):
      variable.assign_sub(variable * (lr * tf.cast(self.weight_decay, dtype)))
    index = self._get_variable_index(variable)
    # Under a strategy these are per-device components inside `extended.update`.
    m = self._momentums[index]
    v = self._velocities[index]
    beta_1_power, beta_2_power, epsilon, beta_1, beta_2 = self._shared_terms(
        dtype, getattr(variable, "device", None))
    if isinstance(gradient, tf.IndexedSlices) or not hasattr(variable, "handle"):
      gradient = tf.convert_to_tensor(gradient)
      m.assign(beta_1 * m + (1.0 - beta_1) * tf.cast(gradient, dtype))
      v.assign(beta_2 * v + (1.0 - beta_2) * tf.square(tf.cast(gradient, dtype)))
      alpha = lr * tf.sqrt(1.0 - beta_2_power) / (1.0 - beta_1_power)
      variable.assign_sub(alpha * m / (tf.sqrt(v) + epsilon))
      return None
    return tf.raw_ops.ResourceApplyAdam(
        var=variable.handle, m=m.value.handle, v=v.value.handle, beta1_power=beta_1_power,
        beta2_power=beta_2_power, lr=lr, beta1=beta_1, beta2=beta_2, epsilon=epsilon,
        grad=tf.cast(gradient, dtype), use_locking=False)

  def _portable_update(self, gradient, variable, learning_rate):
    """The same step in `keras.ops` (JAX, PyTorch): the class doc's formulas."""
    dtype = variable.dtype
    lr = ops.cast(self.scaled_learning_rate(learning_rate, variable), dtype)
    if self.weight_decay and self._use_weight_decay(variable):
      self.assign_sub(variable, variable * (lr * ops.cast(self.weight_decay, dtype)))
    index = self._get_variable_index(variable)
    m, v = self._momentums[index], self._velocities[index]
    beta_1, beta_2 = ops.cast(self.beta_1, dtype), ops.cast(self.beta_2, dtype)
    epsilon = ops.cast(self.epsilon, dtype)
    gradient = ops.cast(gradient, dtype)
    self.assign(m, beta_1 * m + (1.0 - beta_1) * gradient)
    self.assign(v, beta_2 * v + (1.0 - beta_2) * ops.square(gradient))
    if self.adam_bias_correction:
      step = ops.cast(self.iterations + 1, dtype)
      beta_1_power, beta_2_power = ops.power(beta_1, step), ops.power(beta_2, step)
      # m_hat / (sqrt(v_hat) + eps), as torch.optim.AdamW
      update = (m / (1.0 - beta_1_power)) / (ops.sqrt(v / (1.0 - beta_2_power)) + epsilon)
    else:
      update = m / (ops.sqrt(v) + epsilon)
    self.assign_sub(variable, lr * update)

  def get_config(self):
    config = super().get_config()
    config["adam_bias_correction"] = self.adam_bias_correction
    return config


@keras.saving.register_keras_serializable(package="official_bert")
class BertLamb(_ExcludeByPathMixin, keras.optimizers.Lamb):
  """The LAMB paper's optimizer as the Model Garden implements it
  (`official.modeling.optimization.lamb.LAMB`, NVIDIA's BERT alike).

    m_hat = m / (1 - beta_1^t);  v_hat = v / (1 - beta_2^t)
    update = m_hat / (sqrt(v_hat) + eps) + wd * var          (decay inside the update)
    ratio = ||var|| / ||update||  (1 where either norm is 0)
    var -= lr * ratio * update
  A variable excluded from weight decay (LayerNorm, biases) gets neither the decay nor the
  trust ratio (ratio 1), as the Model Garden's `exclude_from_layer_adaptation` defaults to the
  decay exclusions. Keras' own `Lamb` differs: it decays outside the ratio and scales every
  variable.
  """

  def _apply_weight_decay(self, variables):
    del variables  # Inside the update, in `update_step`.

  def update_step(self, gradient, variable, learning_rate):
    dtype = variable.dtype
    lr = tf.cast(self.scaled_learning_rate(learning_rate, variable), dtype)
    gradient = tf.cast(tf.convert_to_tensor(gradient), dtype)
    index = self._get_variable_index(variable)
    m = self._momentums[index]
    v = self._velocities[index]
    beta_1 = tf.cast(self.beta_1, dtype)
    beta_2 = tf.cast(self.beta_2, dtype)
    step = tf.cast(self.iterations + 1, dtype)
    m.assign(beta_1 * m + (1.0 - beta_1) * gradient)
    v.assign(beta_2 * v + (1.0 - beta_2) * tf.square(gradient))
    m_hat = m / (1.0 - tf.pow(beta_1, step))
    v_hat = v / (1.0 - tf.pow(beta_2, step))
    update = m_hat / (tf.sqrt(v_hat) + tf.cast(self.epsilon, dtype))
    if not self._use_weight_decay(variable):
      variable.assign_sub(lr * update)
      return
    if self.weight_decay:
      update += tf.cast(self.weight_decay, dtype) * variable
    w_norm = tf.norm(variable)
    u_norm = tf.norm(update)
    ratio = tf.where((w_norm > 0) & (u_norm > 0), w_norm / tf.maximum(u_norm, 1e-30),
                     tf.ones([], dtype))
    variable.assign_sub(lr * ratio * update)


_CLASSES = {"adamw": BertAdamW, "lamb": BertLamb}
_CLIP_ARGS = ("clipnorm", "clipvalue", "global_clipnorm")


def create_optimizer(name="adamw", learning_rate=1e-4, weight_decay=0.01,
                     beta_1=0.9, beta_2=0.999, epsilon=1e-6,
                     exclude_from_weight_decay=DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY,
                     adam_bias_correction=True, **kwargs):
  """A Keras 3 optimizer configured like the original BERT one.

  Args:
    name: "adamw" or "lamb" (case-insensitive).
    learning_rate: float or a `LearningRateSchedule` (e.g.
      `WarmupLinearDecay`); the decay term is `lr * weight_decay * var`, so
      it follows the schedule, as in the original.
    weight_decay: decoupled decay rate (original BERT: 0.01).
    beta_1, beta_2, epsilon: Adam moments (original BERT: 0.9, 0.999, 1e-6).
    exclude_from_weight_decay: regexes; a variable whose `path` matches any
      is not decayed. Defaults exclude LayerNorm gamma/beta and all biases.
    adam_bias_correction: AdamW only: True is PyTorch's AdamW, False the original BERT's
      `AdamWeightDecayOptimizer` (see `BertAdamW`).
    **kwargs: `layerwise_lr_decay` and `num_layers` (see the module doc), or other Keras
      optimizer args (e.g. `gradient_accumulation_steps`);
      `optimizer_name` becomes the Keras `name` (`name` is taken above).

  Raises:
    ValueError: unknown `name`, or clipping args (clip in the training loop
      with `clip_by_global_norm`, which also returns the norm to log).
  """
  key = str(name).lower()
  if key not in _CLASSES:
    raise ValueError(f"Unknown optimizer {name!r}; valid names: "
                     f"{', '.join(OPTIMIZERS)}.")
  clip = [k for k in _CLIP_ARGS if kwargs.get(k) is not None]
  if clip:
    raise ValueError(f"Do not pass {clip} to create_optimizer: the training "
                     "loop clips with clip_by_global_norm (and logs the norm).")
  if "optimizer_name" in kwargs:
    kwargs["name"] = kwargs.pop("optimizer_name")
  if key == "adamw":
    kwargs["adam_bias_correction"] = adam_bias_correction
  elif not adam_bias_correction:
    raise ValueError(f"adam_bias_correction=False applies to adamw, not {name!r}.")
  return _CLASSES[key](
      learning_rate=learning_rate, weight_decay=weight_decay, beta_1=beta_1,
      beta_2=beta_2, epsilon=epsilon,
      exclude_from_weight_decay_patterns=exclude_from_weight_decay, **kwargs)


def scheduled_optimizer(name, learning_rate, num_train_steps, num_warmup_steps,
                        weight_decay=0.01, lr_schedule="bert", adam_bias_correction=True,
                        **kwargs):
  """`create_optimizer` over `WarmupLinearDecay`: what the commands and the Python API's
  `compile` train with (the same optimizer, schedule and defaults)."""
  schedule = WarmupLinearDecay(learning_rate, num_warmup_steps, num_train_steps,
                               schedule=lr_schedule)
  if str(name).lower() == "adamw":
    kwargs["adam_bias_correction"] = adam_bias_correction
  return create_optimizer(name, schedule, weight_decay=weight_decay, **kwargs)


def dense_gradients(grads, variables):
  """Every gradient as a dense tensor (zeros for a variable the loss does not reach): what
  the training steps sum over replicas and micro-batches, and clip."""
  return [tf.convert_to_tensor(g) if g is not None else tf.zeros_like(v)
          for g, v in zip(grads, variables)]


def clip_by_global_norm(grads, clip_norm=1.0):
  """Scales grads so their joint L2 norm is <= clip_norm (as BERT's loop).

  Returns (clipped, global_norm): global_norm is the norm BEFORE clipping
  (float32 scalar tensor), for logging. None grads stay None (variables the
  loss does not touch); IndexedSlices (embedding gathers) are supported by
  `tf.clip_by_global_norm`. A non-finite norm makes every clipped grad NaN,
  as in TF, so a diverged step is visible rather than silently skipped.
  """
  grads = list(grads)
  if all(g is None for g in grads):
    return grads, tf.constant(0.0, tf.float32)
  clipped, global_norm = tf.clip_by_global_norm(grads, clip_norm)
  return list(clipped), tf.cast(global_norm, tf.float32)
