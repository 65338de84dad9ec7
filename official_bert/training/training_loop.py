"""One custom training loop for every `tf.distribute` strategy, task and precision.

A step, per replica:
  1. all-reduce the task's loss normalizers (e.g. the number of masked tokens) over replicas;
  2. split the replica batch into `num_accumulation_steps` micro-batches; for each, the
     gradient of sum(loss)/global normalizer, summed;
  3. all-reduce the gradients, clip them by their global norm (the norm of the whole step's
     gradient, as one device would see it), apply.
The loss, the gradients and step 3 are `train_step`'s, the math `fit` takes too.
`steps_per_loop` steps run inside one tf.function call to keep the host out of the way.
"""

import os
import signal
import threading
import time

from absl import logging
import keras
import numpy as np
import tensorflow as tf

from official_bert.training import train_step

SUM = tf.distribute.ReduceOp.SUM
# Marks the assertion `Trainer.checked` raises: "[ID_RANGE] [feature] [id] [key] [limit]".
ID_RANGE_ERROR = "ID_RANGE"


class Trainer:
  """Builds the model and optimizer under a strategy and runs train/eval loops.

  Args:
    strategy: a tf.distribute.Strategy.
    task: a `tasks.base.Task`.
    optimizer_fn: () -> Keras optimizer (built here, inside the strategy scope).
    global_batch_size: examples per step over all replicas and micro-batches.
    num_accumulation_steps: micro-batches per step and replica.
    clip_norm: global gradient norm clip (the original: 1.0); None or 0 to disable.
    dtype: "float32", "bfloat16" or "float16" (float16 gets dynamic loss scaling).
    enable_xla: compile the forward/backward pass with XLA.
    prepare_model: optional model -> model, applied before the optimizer is built (e.g.
      `freezing.freeze`, so frozen weights get no optimizer state).
  """

  def __init__(self, strategy, task, optimizer_fn, global_batch_size, num_accumulation_steps=1,
               clip_norm=1.0, dtype="float32", enable_xla=False, prepare_model=None):
    replicas = strategy.num_replicas_in_sync
    if global_batch_size % (replicas * num_accumulation_steps):
      raise ValueError(f"batch size {global_batch_size} is not divisible by replicas ({replicas}) "
                       f"x accumulation steps ({num_accumulation_steps})")
    self.strategy = strategy
    self.task = task
    self.global_batch_size = global_batch_size
    self.num_accumulation_steps = num_accumulation_steps
    self.clip_norm = clip_norm
    self.float16 = dtype == "float16"
    self.enable_xla = enable_xla
    with strategy.scope():
      self.model = task.build_model()
      if prepare_model is not None:
        self.model = prepare_model(self.model)
      inner = optimizer_fn()
      self.optimizer = train_step.takes_summed_gradients(
          keras.optimizers.LossScaleOptimizer(inner) if self.float16 else inner)
      self.optimizer.build(self.model.trainable_variables)
      self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step",
                              aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
    self._functions = {}

  def cached_function(self, key, build):
    """`build()` (a tf.function) made once per trainer and `key`, so that a loop run again
    (the train loop each `steps_per_loop`, an evaluation every N steps) reuses its trace
    instead of tracing the model anew."""
    if key not in self._functions:
      self._functions[key] = build()
    return self._functions[key]

  # ---- per-replica math -------------------------------------------------------------------

  def checked(self, features):
    """`features` once their ids are inside the task's tables (`Task.input_id_limits`).

    Runs before the model (control dependencies, outside any XLA region), so a record with
    an out-of-range id always fails here, with the feature, the id and the limit, rather
    than in whichever gather or gradient op happens to run first.
    """
    checks = []
    for name, (key, limit) in self.task.input_id_limits().items():
      if name in features:
        ids = features[name]
        high, low = tf.reduce_max(ids), tf.reduce_min(ids)
        worst = tf.where(high >= limit, high, low)
        checks.append(tf.debugging.Assert((high < limit) & (low >= 0),
                                          [ID_RANGE_ERROR, name, worst, key, limit]))
    if not checks:
      return features
    with tf.control_dependencies(checks):
      return {name: tf.identity(value) for name, value in features.items()}

  def _scores(self, features, normalizers, training):
    """Loss (normalized by the global normalizers), its parts and metric sums."""
    outputs = self.model(features, training=training)
    loss, parts = train_step.task_loss(self.task, features, outputs, normalizers)
    return loss, (parts, self.task.metric_sums(features, outputs))

  def _micro_gradients(self, features, normalizers):
    grads, _, (parts, metrics) = train_step.replica_gradients(
        lambda: self._scores(features, normalizers, training=True),
        self.model.trainable_variables, self.optimizer)
    return grads, parts, metrics

  def _replica_train_step(self, features):
    features = self.checked(features)
    ctx = tf.distribute.get_replica_context()
    normalizers = train_step.global_normalizers(self.task, features)
    grad_fn = self._micro_gradients
    if self.enable_xla:
      grad_fn = tf.function(grad_fn, jit_compile=True)
    k = self.num_accumulation_steps
    if k == 1:
      grads, parts, metrics = grad_fn(features, normalizers)
    else:
      micro = tf.shape(features["input_mask"])[0] // k
      grads = parts = metrics = None
      for i in range(k):  # unrolled: k is small, and a Python loop keeps shapes static
        piece = {name: t[i * micro:(i + 1) * micro] for name, t in features.items()}
        g, p, m = grad_fn(piece, normalizers)
        if grads is None:
          grads, parts, metrics = g, p, m
        else:
          grads = [a + b for a, b in zip(grads, g)]
          parts = {n: parts[n] + p[n] for n in parts}
          metrics = {n: (metrics[n][0] + m[n][0], metrics[n][1] + m[n][1]) for n in metrics}
    parts = ctx.all_reduce(SUM, parts)
    metrics = ctx.all_reduce(SUM, metrics) if metrics else {}  # a task may have none
    norm = train_step.apply(self.optimizer, grads, self.model.trainable_variables,
                            self.clip_norm)
    out = dict(parts)
    out["loss"] = tf.add_n(list(parts.values()))
    out["gradient_norm"] = norm
    # The batch's real tokens (input_mask 1), for a throughput that padding does not inflate.
    out[REAL_TOKENS] = ctx.all_reduce(SUM, tf.reduce_sum(tf.cast(features["input_mask"],
                                                                 tf.float32)))
    for name, (num, den) in metrics.items():
      out[name + "_num"], out[name + "_den"] = num, den
    return out

  # ---- host-side loops --------------------------------------------------------------------

  def _first(self, per_replica):
    """All replicas hold the same all-reduced values: take the first's."""
    return tf.nest.map_structure(
        lambda v: self.strategy.experimental_local_results(v)[0], per_replica)

  def _build_train_loop(self):
    # The replica step is traced once and called twice in the graph: totals that started as
    # None inside the loop would make autograph trace the whole step again to learn their
    # structure (seconds per run, each run).
    replica_step = tf.function(self._replica_train_step)

    def one_step(iterator):
      out = self._first(self.strategy.run(replica_step, args=(next(iterator),)))
      self.step.assign_add(1)
      return out

    @tf.function
    def train_loop(iterator, num_steps):
      totals = one_step(iterator)
      for _ in tf.range(num_steps - 1):
        totals = tf.nest.map_structure(tf.add, totals, one_step(iterator))
      return totals
    return train_loop

  def train_steps(self, iterator, num_steps):
    """Runs `num_steps` (>= 1) steps; returns the averaged losses and metrics as floats."""
    if num_steps < 1:
      raise ValueError(f"num_steps must be at least 1, got {num_steps}")
    train_loop = self.cached_function("train", self._build_train_loop)
    totals = train_loop(iterator, tf.constant(num_steps, tf.int32))
    return summarize(totals, num_steps)


def summarize(totals, steps):
  """Mean of per-step losses; metric numerators over denominators."""
  totals = {k: float(np.asarray(v)) for k, v in totals.items()}
  out = {}
  for key, value in totals.items():
    if key.endswith("_num"):
      name = key[:-4]
      out[name] = value / max(totals[name + "_den"], 1e-12)
    elif not key.endswith("_den"):
      out[key] = value / steps
  return out


class StopRequest:
  """SIGTERM or SIGINT (Ctrl-C) sets a flag; the loop saves a checkpoint at the next loop
  boundary and stops (`runner.run_training` then raises `cli.Interrupted`). A second SIGINT
  stops at once, without that checkpoint (the last saved one stays).

  Python runs a signal's handler only between bytecodes: not while a loop's steps run inside
  TensorFlow, which may take minutes. So a thread woken by the signal itself (Python's wakeup
  fd) says at once that it was heard, and ends the process at a second Ctrl-C."""

  SIGNALS = (signal.SIGTERM, signal.SIGINT)

  def __init__(self):
    self.requested = False
    self.signum = None
    self._lock = threading.Lock()
    # The watcher before the handlers (signals are set from the main thread only).
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    self._pipe = (read_fd, write_fd)
    self._previous_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    self._watcher = threading.Thread(target=self._watch, args=(read_fd,), daemon=True,
                                     name="stop-request")
    self._watcher.start()
    self._previous = {s: signal.signal(s, self._handle) for s in self.SIGNALS}

  def _request(self, signum):
    """The first signal: note it; a second SIGINT: True (stop at once)."""
    with self._lock:
      if self.requested:
        return signum == signal.SIGINT
      self.requested, self.signum = True, signum
    logging.warning("Signal %s: saving a checkpoint at the end of this loop, then stopping "
                    "(Ctrl-C again to stop at once)", signal.Signals(signum).name)
    return False

  def _watch(self, read_fd):
    while True:
      try:
        data = os.read(read_fd, 64)
      except OSError:
        return  # closed by `restore`
      if not data:
        return
      for signum in data:
        if signum in self.SIGNALS and self._request(signum):
          logging.error("Signal SIGINT again: stopping at once, without this loop's "
                        "checkpoint (the last saved one stays)")
          logging.flush()
          os._exit(128 + signal.SIGINT)  # pylint: disable=protected-access  (now, from a thread)

  def _handle(self, signum, frame):
    del signum, frame  # the watcher has it (this runs only when TensorFlow returns)

  def restore(self):
    signal.set_wakeup_fd(self._previous_fd)
    for s, previous in self._previous.items():
      signal.signal(s, previous)
    read_fd, write_fd = self._pipe
    os.close(write_fd)  # the watcher reads the end of the pipe and returns
    self._watcher.join(timeout=5)
    os.close(read_fd)


REAL_TOKENS = "real_tokens"  # a train loop's mean real tokens per step (`ProgressLog` reads it)


class ProgressLog:
  """Step, loss, examples/s, real tokens/s and ETA, to the log and to TensorBoard."""

  def __init__(self, global_batch_size, num_train_steps, start_step, writer=None):
    self.global_batch_size = global_batch_size
    self.num_train_steps = num_train_steps
    self.writer = writer
    self.last_time = time.time()
    self.last_step = start_step

  def log(self, step, metrics, learning_rate):
    now = time.time()
    steps = max(step - self.last_step, 1)
    seconds = max(now - self.last_time, 1e-9)
    examples_per_second = steps * self.global_batch_size / seconds
    # Popped: the loop's mean real tokens a step becomes metrics' real_tokens_per_second.
    tokens_per_second = metrics.pop(REAL_TOKENS, 0.0) * steps / seconds
    eta = (self.num_train_steps - step) * seconds / steps
    self.last_time, self.last_step = now, step
    logging.info(
        "step %d/%d | loss %.4f | %s | lr %.3g | %.1f examples/s | %.0f real tokens/s | "
        "ETA %.0fs", step, self.num_train_steps, metrics["loss"],
        " ".join(f"{k} {v:.4f}" for k, v in sorted(metrics.items()) if k != "loss"),
        learning_rate, examples_per_second, tokens_per_second, eta)
    metrics["real_tokens_per_second"] = tokens_per_second
    if self.writer is not None:
      with self.writer.as_default(step=step):
        for name, value in metrics.items():
          tf.summary.scalar(name, value)
        tf.summary.scalar("learning_rate", learning_rate)
        tf.summary.scalar("examples_per_second", examples_per_second)
    return examples_per_second


def current_learning_rate(optimizer):
  inner = getattr(optimizer, "inner_optimizer", optimizer)
  return float(np.asarray(inner.learning_rate))

