r"""Our pretraining step on any Keras backend: `bench_pretraining_step.py --backend=jax|torch`.

No TensorFlow is imported: this runs where only JAX or PyTorch is installed (the GPU machines).
The step is Keras' own `fit` train step on the backend's gradient machinery (jax.grad under
jit / torch autograd, `torch.compile` with --jit), with what the commands' step has:
  - the model: `BertPretrainingModel` (MLM head on the masked positions only, tied decoder,
    NSP), `mixed_bfloat16` with --dtype=bfloat16 (float32 variables and loss);
  - the loss: `PretrainingTask`'s (tasks/losses.py: masked-LM NLL summed over the real
    predictions / (their number + 1e-5), plus the mean NSP NLL);
  - AdamW (wd 0.01 off LayerNorm and biases, eps 1e-6), BERT's warmup / linear decay, the
    gradients clipped at global norm 1.0.
Data: random ids, the same batches every call (`synthetic_batches`), fed from the host.
MFU: model FLOPs (3 x the forward matmuls, `pretraining_flops.train_flops_per_sequence`) per
second over the backend's own measured matmul rate (`matmul_ceiling`), at the bench's dtype.
"""

import argparse
import datetime
import os
import platform
import statistics
import sys
import time

import keras
from keras import ops
import numpy as np
from pretraining_flops import per_config
from pretraining_flops import train_flops_per_sequence

from official_bert.modeling.bert_config import BertConfig
from official_bert.modeling.encoder import BertEncoder
from official_bert.modeling.pretraining_model import BertPretrainingModel
from official_bert.tasks import losses

PEAK_LR, WARMUP_STEPS, TRAIN_STEPS = 1e-4, 10000, 1000000
MLM_EPSILON = 1e-5  # PretrainingTask.loss_epsilons["masked_lm_loss"]
SYNTHETIC_BATCHES = 4  # the batches every call cycles through; --loop=scan: steps per scan


def synthetic_batches(cfg, batch, seq, preds, count=SYNTHETIC_BATCHES, seed=0):
  """`count` random pretraining batches (numpy), every sequence full length."""
  rng = np.random.default_rng(seed)
  out = []
  for _ in range(count):
    positions = np.sort(np.stack([rng.choice(np.arange(1, seq), preds, replace=False)
                                  for _ in range(batch)]), axis=1).astype("int32")
    out.append({
        "input_word_ids": rng.integers(1, cfg.vocab_size, (batch, seq), dtype="int32"),
        "input_mask": np.ones((batch, seq), "int32"),
        "input_type_ids": (np.arange(seq)[None] >= seq // 2).repeat(batch, 0).astype("int32"),
        "masked_lm_positions": positions,
        "masked_lm_ids": rng.integers(1, cfg.vocab_size, (batch, preds), dtype="int32"),
        "masked_lm_weights": np.ones((batch, preds), "float32"),
        "next_sentence_labels": rng.integers(0, 2, (batch,), dtype="int32"),
    })
  return out


class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
  """BERT's schedule: linear warmup to the peak, then linear decay to 0."""

  def __call__(self, step):
    step = ops.cast(step, "float32")
    decayed = PEAK_LR * (1.0 - ops.minimum(step, TRAIN_STEPS) / TRAIN_STEPS)
    return ops.where(step < WARMUP_STEPS, PEAK_LR * step / WARMUP_STEPS, decayed)


class PretrainingObjective(keras.Model):
  """`BertPretrainingModel` whose `compute_loss` is the pretraining loss (x holds the labels)."""

  def __init__(self, network, **kwargs):
    super().__init__(**kwargs)
    self.network = network

  def build(self, input_shape=None):
    self.network.build()
    self.built = True

  def call(self, inputs, training=None):
    return self.network(inputs, training=training)

  def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
    weights = x["masked_lm_weights"]
    mlm_sum = losses.weighted_sum(losses.sparse_nll(x["masked_lm_ids"],
                                                    y_pred["masked_lm_logits"]), weights)
    loss = mlm_sum / (losses.count(x["masked_lm_ids"], weights) + MLM_EPSILON)
    nsp = losses.sparse_nll(x["next_sentence_labels"], y_pred["next_sentence_logits"])
    return loss + ops.mean(nsp)


def use_bit_generator_dropout():
  """JAX only, an experiment of the GPU bench (`ours-jax+rbg`): Keras' dropout with its keep
  mask drawn from XLA's RngBitGenerator (Philox on GPU) instead of threefry. The uint32[2]
  seed Keras passes becomes an `unsafe_rbg` key: deterministic for a seed, other masks."""
  import jax  # pylint: disable=g-import-not-at-top
  from keras.src.backend.jax import random as jax_random  # pylint: disable=g-import-not-at-top

  def dropout(inputs, rate, noise_shape=None, seed=None):
    if rate == 0.0:
      return inputs
    seed = jax.lax.bitcast_convert_type(jax_random.jax_draw_seed(seed), "uint32")
    data = jax.numpy.concatenate([seed, seed ^ np.uint32(0x9E3779B9)])  # [4]
    key = jax.random.wrap_key_data(data, impl="unsafe_rbg")
    shape = jax_random._get_concrete_noise_shape(inputs, noise_shape)  # pylint: disable=protected-access
    threshold = np.uint32(min((1.0 - rate) * 2.0**32, 2.0**32 - 1))
    keep = jax.random.bits(key, tuple(shape), "uint32") < threshold
    return jax.numpy.where(keep, inputs / (1.0 - rate), jax.numpy.zeros_like(inputs))

  jax_random.dropout = dropout


def jax_scan_run(model, batches):
  """JAX only: `run(steps)` for a compiled `model` that trains len(batches) steps per call of
  one jitted `lax.scan` over the batches, kept on the device: no host work, transfer or
  dispatch between steps. The scan is the API's `steps_per_execution` on JAX
  (`official_bert/api/jax_steps.py`) over Keras' own train step. `run` takes whole scans
  only; the model's variables are written back after each call."""
  import jax  # pylint: disable=g-import-not-at-top

  from official_bert.api import jax_steps  # pylint: disable=g-import-not-at-top
  if not model.optimizer.built:
    model.optimizer.build(model.trainable_variables)
  train = jax_steps.scanned_train_function(model.train_step, len(batches))
  on_device = [(jax.device_put(b),) for b in batches]
  variables = (model.trainable_variables, model.non_trainable_variables,
               model.optimizer.variables, model.metrics_variables)
  holder = {"state": tuple([v.value for v in group] for group in variables)}

  def run(steps):
    if steps % len(batches):
      raise ValueError(f"--loop=scan trains {len(batches)} steps per scan: steps={steps} "
                       f"(--steps, --warmup) must be a multiple of {len(batches)}")
    trainable, non_trainable, optimizer_vars, metric_vars = holder["state"]
    # The loss of this call, as fit's: its mean metric starts from zero at each call.
    holder["state"] = (trainable, non_trainable, optimizer_vars,
                       [jax.numpy.zeros_like(v) for v in metric_vars])
    for _ in range(steps // len(batches)):
      logs, holder["state"] = train(holder["state"], iter(on_device))
    for group, values in zip(variables, holder["state"]):
      for variable, value in zip(group, values):
        variable.assign(value)
    return float(logs["loss"])  # waits for the device

  return run


def build_step(cfg, batch, seq, preds, jit=True, seed=0, recompute_grad=False,
               attention_dropout=None, hidden_dropout=None, loop="fit"):
  """(run(steps) -> last loss, trainable parameter count) for our step on this backend;
  `run.model` is the model trained (its variables hold the weights after each call).

  attention_dropout / hidden_dropout: override the config's rates (the GPU bench's
  ablations: 0 on the probabilities lets attention run fused).
  loop: "fit" (Keras' fit, fed from a Python generator of host batches), "fit_device" (the
  same, the batches already on the device) or "scan" (JAX: `jax_scan_run`)."""
  import dataclasses  # pylint: disable=g-import-not-at-top
  if attention_dropout is not None:
    cfg = dataclasses.replace(cfg, attention_probs_dropout_prob=attention_dropout)
  if hidden_dropout is not None:
    cfg = dataclasses.replace(cfg, hidden_dropout_prob=hidden_dropout)
  keras.utils.set_random_seed(seed)
  network = BertPretrainingModel(BertEncoder.from_bert_config(cfg))
  network.encoder.recompute_grad = recompute_grad
  model = PretrainingObjective(network)
  model.build()
  optimizer = keras.optimizers.AdamW(learning_rate=WarmupLinearDecay(), weight_decay=0.01,
                                     epsilon=1e-6, global_clipnorm=1.0)
  # By variable, not by name pattern: torch.compile (2.11) fails on Keras' per-step regex.
  optimizer.exclude_from_weight_decay(var_list=[
      v for v in model.trainable_weights if "layer_norm" in v.path or v.name == "bias"])
  model.compile(optimizer=optimizer, jit_compile=jit)
  batches = synthetic_batches(cfg, batch, seq, preds)
  params = int(sum(np.prod(v.shape) for v in model.trainable_weights))
  if loop == "scan":
    run = jax_scan_run(model, batches)
    run.model = model
    return run, params
  if loop == "fit_device":
    batches = [{k: ops.convert_to_tensor(v) for k, v in b.items()} for b in batches]

  def forever():
    while True:
      for features in batches:
        yield (features,)

  data = forever()

  def run(steps):
    history = model.fit(data, steps_per_epoch=steps, epochs=1, verbose=0, shuffle=False)
    # Reading a weight back waits for the device to finish the steps (async dispatch).
    ops.convert_to_numpy(model.trainable_weights[0])
    return float(history.history["loss"][-1])

  run.model = model
  return run, params


def kernel_profile(run, steps, top=30):
  """JAX only: where the device time of `steps` steps goes. Traces them with
  jax.profiler and sums the GPU kernels' durations by kernel name and by the model scope of
  their HLO op (the op's `op_name` metadata in the optimized HLO that XLA_FLAGS'
  --xla_dump_to wrote, digits dropped, so the 12 layers add up). Returns printable lines."""
  import collections  # pylint: disable=g-import-not-at-top
  import glob  # pylint: disable=g-import-not-at-top
  import re  # pylint: disable=g-import-not-at-top
  import tempfile  # pylint: disable=g-import-not-at-top

  import jax  # pylint: disable=g-import-not-at-top
  from jax._src.lib import _profile_data  # pylint: disable=g-import-not-at-top
  trace_dir = tempfile.mkdtemp()
  with jax.profiler.trace(trace_dir):
    run(steps)
  path = glob.glob(os.path.join(trace_dir, "**", "*.xplane.pb"), recursive=True)[0]
  data = _profile_data.ProfileData.from_file(path)
  op_scopes = {}
  dump = re.search(r"--xla_dump_to=(\S+)", os.environ.get("XLA_FLAGS", ""))
  for hlo in glob.glob(os.path.join(dump.group(1), "*after_optimizations.txt")) if dump else ():
    with open(hlo, encoding="utf-8") as f:
      for line in f:
        m = re.match(r"\s*(?:ROOT )?%?([\w.\-]+) = .*op_name=\"([^\"]+)\"", line)
        if m:
          op_scopes[m.group(1)] = m.group(2)
  by_kernel, by_scope, lines_seen = collections.Counter(), collections.Counter(), set()
  total = 0
  for plane in data.planes:
    if not plane.name.startswith("/device:GPU"):
      continue
    for line in plane.lines:
      lines_seen.add(line.name)
      if not line.name.startswith("Stream"):
        continue
      for event in line.events:
        ms = event.duration_ns / 1e6
        total += ms
        by_kernel[event.name[:90]] += ms
        stats = dict(event.stats)
        scope = op_scopes.get(str(stats.get("hlo_op", "")), str(stats.get("hlo_op", "?")))
        scope = re.sub(r"\d+", "#", scope)
        by_scope[scope[-110:]] += ms
  out = [f"device time of {steps} steps: {total:.1f} ms ({total / steps:.2f} ms/step); "
         f"GPU lines {sorted(lines_seen)}"]
  for title, counter in (("kernel", by_kernel), ("scope", by_scope)):
    out.append(f"top {top} by {title} (ms per step, share):")
    for name, ms in counter.most_common(top):
      out.append(f"  {ms / steps:8.3f} {ms / max(total, 1e-9):6.1%}  {name}")
  return out


def matmul_ceiling(dtype, size, repeats=10):
  """The backend's measured matmul rate (TFLOP/s): a [size, size] x [size, size] product in
  `dtype`, the median of `repeats` timed rounds of 10 products after a warm-up round."""
  backend = keras.backend.backend()
  rng = np.random.default_rng(0)
  a, b = (ops.cast(ops.convert_to_tensor(rng.standard_normal((size, size), "float32")), dtype)
          for _ in range(2))
  if backend == "jax":
    import jax  # pylint: disable=g-import-not-at-top

    @jax.jit
    def products(a, b):
      return sum(jax.numpy.matmul(a + i, b)[0, 0] for i in range(10))

    def sync(x):
      return x.block_until_ready()
  elif backend == "torch":
    import torch  # pylint: disable=g-import-not-at-top

    def products(a, b):
      return sum(torch.matmul(a + i, b)[0, 0] for i in range(10))

    def sync(x):
      return x.item()
  else:
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    products = tf.function(lambda a, b: tf.add_n([tf.matmul(a + i, b)[0, 0]
                                                  for i in range(10)]), jit_compile=True)

    def sync(x):
      return x.numpy()
  sync(products(a, b))
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    sync(products(a, b))
    times.append(time.perf_counter() - start)
  return 10 * 2 * size ** 3 / statistics.median(times) / 1e12


def config(name, repo):
  """configs/NAME.json (read as text: `interop.model_files` would import TensorFlow)."""
  path = os.path.join(repo, "configs", name + ".json")
  with open(path, encoding="utf-8") as f:
    return BertConfig.from_json_string(f.read(), source=path)


def timed(run, steps):
  start = time.perf_counter()
  loss = run(steps)
  return time.perf_counter() - start, loss


def bench(args, repo):
  """Prints one row per config: seq/s (median of --repeats), TFLOP/s and MFU."""
  if args.dtype == "bfloat16":
    keras.mixed_precision.set_dtype_policy("mixed_bfloat16")
  size = args.matmul_size or (8192 if args.device == "gpu" else 1024)
  ceiling = matmul_ceiling(args.dtype, size)
  print(f"setup   : backend={keras.backend.backend()} device={args.device} dtype={args.dtype} "
        f"batch={args.batch} seq={args.seq} preds={args.preds} steps={args.steps} "
        f"warmup={args.warmup} repeats={args.repeats} jit={args.jit} loop={args.loop}")
  print(f"ceiling : {size}^3 {args.dtype} matmul {ceiling:.2f} TFLOP/s (measured)", flush=True)
  rows = []
  for name in [c.strip() for c in args.configs.split(",") if c.strip()]:
    cfg = config(name, repo)
    steps, warmup = per_config(args.steps, name), per_config(args.warmup, name)
    run, params = build_step(cfg, args.batch, args.seq, args.preds, jit=args.jit == "on",
                             loop=args.loop)
    compile_s, _ = timed(run, warmup)
    times = []
    for _ in range(args.repeats):
      seconds, loss = timed(run, steps)
      times.append(seconds)
    sps = args.batch * steps / statistics.median(times)
    tflops = sps * train_flops_per_sequence(cfg, args.seq, args.preds) / 1e12
    rows.append((name, params, sps, tflops, tflops / ceiling, compile_s, loss))
    print(f"  done {name}: " + " ".join(f"{args.batch * steps / t:.1f}" for t in times)
          + f" seq/s; first call {compile_s:.1f}s; last loss {loss:.3f}", flush=True)
    keras.backend.clear_session()
  header = (f"{'config':<7}{'params':>13}{'seq/s':>10}{'TFLOP/s':>10}{'MFU':>8}"
            f"{'first call s':>14}{'loss':>8}")
  print("\n" + header + "\n" + "-" * len(header))
  for name, params, sps, tflops, mfu, compile_s, loss in rows:
    print(f"{name:<7}{params:>13,}{sps:>10.1f}{tflops:>10.2f}{mfu:>8.1%}{compile_s:>14.1f}"
          f"{loss:>8.3f}")
  return rows


def main(repo):
  parser = argparse.ArgumentParser(description="our pretraining step on a Keras backend")
  parser.add_argument("--backend", choices=("tensorflow", "jax", "torch"))
  parser.add_argument("--configs", default="tiny,mini,small,base")
  for flag, default in (("batch", 32), ("seq", 128), ("preds", 20), ("repeats", 3),
                        ("matmul_size", 0)):
    parser.add_argument("--" + flag, type=int, default=default)
  parser.add_argument("--steps", default="20,base=5,large=5", help='"20,base=5"')
  parser.add_argument("--warmup", default="2", help="steps of the first (compile) call")
  parser.add_argument("--jit", choices=("on", "off"), default="on")
  parser.add_argument("--loop", choices=("fit", "fit_device", "scan"), default="fit",
                      help="scan (JAX): a jitted lax.scan of 4 steps per call, batches on the "
                      "device (`jax_scan_run`)")
  parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
  parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
  args = parser.parse_args()
  if args.loop == "scan" and keras.backend.backend() != "jax":
    parser.error("--loop=scan is JAX's (--backend=jax)")
  if args.loop == "scan":
    for name in [c.strip() for c in args.configs.split(",") if c.strip()]:
      if (per_config(args.steps, name) % SYNTHETIC_BATCHES
          or per_config(args.warmup, name) % SYNTHETIC_BATCHES):
        parser.error(f"--loop=scan trains {SYNTHETIC_BATCHES} steps per scan: --steps and "
                     f"--warmup must be multiples of {SYNTHETIC_BATCHES} (config {name}: "
                     f"{per_config(args.steps, name)}, "
                     f"{per_config(args.warmup, name)})")
  print(f"command : python {' '.join(sys.argv)}\n"
        f"date    : {datetime.datetime.now().isoformat(timespec='seconds')}\n"
        f"machine : nproc={len(os.sched_getaffinity(0))}, {platform.platform()}, "
        f"python {platform.python_version()}, keras {keras.__version__}", flush=True)
  bench(args, repo)
  return 0
