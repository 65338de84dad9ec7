r"""Pretraining-step throughput: ours (official_bert Trainer) vs the peer (Model Garden).

  python bench/bench_pretraining_step.py [--backend=tensorflow|jax|torch] [--device=cpu|gpu]
      [--configs=tiny,mini,small,base] [--batch=32]
      [--seq=128] [--preds=20] [--steps=20,base=5] [--warmup=3,base=1] [--xla=both|on|off]
      [--repeats=3] [--peer_xla_scope=step|grads] [--device=cpu|gpu] [--dtype=float32|bfloat16]
      [--peak_tflops=N]
  GPU (one H200, bf16 + XLA): python bench/bench_pretraining_step.py --device=gpu
      --dtype=bfloat16 --xla=on --configs=base,large --batch=256 --steps=20 --warmup=3
      (seq 512: --seq=512 --preds=80 --batch=64)

One step = forward + backward + global-norm clip 1.0 + AdamW (wd 0.01, eps 1e-6, BERT warmup /
linear decay), MLM (weighted mean over masked slots) + NSP loss, float32, TF default threads,
the same synthetic batches (`input_pipeline.synthetic_pretraining_dataset`) on both sides.
  ours  training_loop.Trainer(OneDeviceStrategy("/cpu:0"), PretrainingTask, create_optimizer(
        "adamw")).train_steps(iterator, steps), the real training path; XLA on = enable_xla.
  peer  tf_keras networks.BertEncoder + models.BertPretrainer (V1: NSP = Dense(2) on the pooled
        output, as ours), Model Garden's "adamw" (legacy_adamw.AdamWeightDecay, own clip off),
        tape.gradient -> tf.clip_by_global_norm -> apply_gradients, a tf.range loop in one
        tf.function; XLA on = jit_compile on the whole step (or only forward/backward, as ours
        does, with --peer_xla_scope=grads).
--backend=jax|torch: our step alone on that Keras backend, no TensorFlow imported
(`pretraining_step_keras.py`: Keras' fit step, the same model, loss, optimizer and clipping;
--jit=on|off for jit/torch.compile; MFU against the backend's measured matmul rate). The GPU
peers side by side: `bench_gpu_pretraining.py`.
seq/s = batch * steps / wall seconds of one call, median over --repeats (sides alternate), after
a --warmup call (trace/compile). CPU ms/step = process CPU time (all threads), median: skewed
less than wall time by other busy processes. --steps/--warmup: default + per-config overrides.
--dtype=bfloat16: Keras "mixed_bfloat16" on both sides (float32 variables and loss).
MFU = model FLOP/s / --peak_tflops (default 989.4 on gpu, the H100/H200 SXM dense bf16 peak;
none on CPU), with model FLOPs = 3 x the forward matmuls (`train_flops_per_sequence`).
"""

import argparse
import datetime
import gc
import os
import platform
import statistics
import sys
import time

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, _REPO)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _backend_flag(argv):
  """--backend's value, read before Keras is imported (Keras fixes its backend at import)."""
  for i, arg in enumerate(argv):
    if arg.startswith("--backend="):
      return arg.split("=", 1)[1]
    if arg == "--backend" and i + 1 < len(argv):
      return argv[i + 1]
  return "tensorflow"


BACKEND = _backend_flag(sys.argv[1:])
os.environ["KERAS_BACKEND"] = BACKEND
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# pylint: disable=wrong-import-position
from pretraining_flops import per_config  # noqa: E402
from pretraining_flops import train_flops_per_sequence  # noqa: E402
import pretraining_step_keras  # noqa: E402

if BACKEND != "tensorflow" and __name__ == "__main__":
  # Before the TensorFlow imports below: jax/torch runs on machines without TensorFlow.
  sys.exit(pretraining_step_keras.main(_REPO))

# pylint: disable=wrong-import-position
import keras  # noqa: E402
import numpy as np  # noqa: E402
from official.modeling.optimization import legacy_adamw  # noqa: E402
from official.nlp.modeling import models as peer_models  # noqa: E402
from official.nlp.modeling import networks as peer_networks  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras  # noqa: E402

from official_bert.interop import model_files  # noqa: E402
from official_bert.tasks.pretraining import PretrainingTask  # noqa: E402
from official_bert.training import distribution  # noqa: E402
from official_bert.training import input_pipeline  # noqa: E402
from official_bert.training import optimization  # noqa: E402
from official_bert.training import training_loop  # noqa: E402

PEAK_LR, WARMUP_STEPS, TRAIN_STEPS = 1e-4, 10000, 1000000


def load():
  return " ".join(open("/proc/loadavg").read().split()[:3])


def machine_info():
  model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), platform.processor() or "?")
  return (f"command : python {' '.join(sys.argv)}\n"
          f"date    : {datetime.datetime.now().isoformat(timespec='seconds')}\n"
          f"machine : nproc={len(os.sched_getaffinity(0))} (cpu_count={os.cpu_count()}), "
          f"CPU: {model}, {platform.platform()}, loadavg {load()}\n"
          f"versions: python {platform.python_version()}, tensorflow {tf.__version__}, "
          f"keras {keras.__version__}, tf_keras {tf_keras.__version__}, numpy {np.__version__}")


def dataset(args, cfg):
  return input_pipeline.synthetic_pretraining_dataset(args.seq, args.preds, cfg.vocab_size,
                                                      args.batch, seed=0)


def n_params(variables):
  return int(sum(np.prod(v.shape) for v in variables))


# ---- ours -------------------------------------------------------------------------------------

def build_ours(args, cfg, xla):
  strategy = tf.distribute.OneDeviceStrategy(f"/{args.device}:0")
  task = PretrainingTask(cfg, args.seq, args.preds)
  trainer = training_loop.Trainer(
      strategy, task,
      lambda: optimization.create_optimizer(
          "adamw", optimization.WarmupLinearDecay(PEAK_LR, WARMUP_STEPS, TRAIN_STEPS),
          weight_decay=0.01),
      global_batch_size=args.batch, clip_norm=1.0, dtype=args.dtype, enable_xla=xla)
  iterator = iter(strategy.distribute_datasets_from_function(lambda ctx: dataset(args, cfg)))

  def run(steps):
    return trainer.train_steps(iterator, steps)["loss"]
  return run, n_params(trainer.model.trainable_variables), trainer


# ---- peer -------------------------------------------------------------------------------------

class PeerWarmupLinearDecay(tf_keras.optimizers.schedules.LearningRateSchedule):
  """The original BERT schedule (same as ours), for a tf_keras optimizer."""

  def __call__(self, step):
    step = tf.cast(step, tf.float32)
    decayed = PEAK_LR * (1.0 - tf.minimum(step, TRAIN_STEPS) / TRAIN_STEPS)
    return tf.where(step < WARMUP_STEPS, PEAK_LR * step / WARMUP_STEPS, decayed)


def build_peer(args, cfg, xla, scope):
  init = tf_keras.initializers.TruncatedNormal(stddev=cfg.initializer_range)
  gelu = lambda x: tf_keras.activations.gelu(x, approximate=True)  # noqa: E731 (BERT "gelu")
  encoder = peer_networks.BertEncoder(
      vocab_size=cfg.vocab_size, hidden_size=cfg.hidden_size,
      num_layers=cfg.num_hidden_layers, num_attention_heads=cfg.num_attention_heads,
      inner_dim=cfg.intermediate_size, inner_activation=gelu,
      max_sequence_length=cfg.max_position_embeddings, type_vocab_size=cfg.type_vocab_size,
      output_dropout=cfg.hidden_dropout_prob, attention_dropout=cfg.attention_probs_dropout_prob,
      initializer=init)
  model = peer_models.BertPretrainer(encoder, num_classes=2, num_token_predictions=args.preds,
                                     activation=gelu, initializer=init, output="logits")
  optimizer = legacy_adamw.AdamWeightDecay(
      learning_rate=PeerWarmupLinearDecay(), weight_decay_rate=0.01, epsilon=1e-6,
      exclude_from_weight_decay=["LayerNorm", "layer_norm", "bias"], gradient_clip_norm=0.0)
  variables = model.trainable_variables

  def grads_fn(f):
    with tf.GradientTape() as tape:
      out = model([f["input_word_ids"], f["input_mask"], f["input_type_ids"],
                   f["masked_lm_positions"]], training=True)
      mlm_logits = tf.cast(out["masked_lm"], tf.float32)
      nll = tf_keras.losses.sparse_categorical_crossentropy(f["masked_lm_ids"], mlm_logits,
                                                            from_logits=True)
      w = f["masked_lm_weights"]
      mlm = tf.reduce_sum(nll * w) / (tf.reduce_sum(w) + 1e-5)
      nsp = tf.reduce_mean(tf_keras.losses.sparse_categorical_crossentropy(
          f["next_sentence_labels"], tf.cast(out["classification"], tf.float32),
          from_logits=True))
      loss = mlm + nsp
    mlm_hit = tf.cast(tf.equal(tf.argmax(mlm_logits, -1, output_type=tf.int32),
                               f["masked_lm_ids"]), tf.float32)
    nsp_hit = tf.cast(tf.equal(tf.argmax(out["classification"], -1, output_type=tf.int32),
                               f["next_sentence_labels"]), tf.float32)
    acc = tf.reduce_sum(mlm_hit * w) / tf.reduce_sum(w) + tf.reduce_mean(nsp_hit)
    return tape.gradient(loss, variables), loss, acc

  def step_fn(f):
    grads, loss, acc = grads_fn(f)
    grads, _ = tf.clip_by_global_norm(grads, 1.0)
    optimizer.apply_gradients(zip(grads, variables))
    return loss, acc

  if xla and scope == "grads":
    grads_fn = tf.function(grads_fn, jit_compile=True)
  elif xla:
    step_fn = tf.function(step_fn, jit_compile=True)
  iterator = iter(dataset(args, cfg))

  @tf.function
  def loop(num_steps):
    total, acc_total = tf.constant(0.0), tf.constant(0.0)
    for _ in tf.range(num_steps):
      loss, acc = step_fn(next(iterator))
      total, acc_total = total + loss, acc_total + acc
    return total / tf.cast(num_steps, tf.float32), acc_total

  def run(steps):
    return float(loop(tf.constant(steps, tf.int32))[0].numpy())
  return run, n_params(variables), model


# ---- driver -----------------------------------------------------------------------------------

def timed(run, steps):
  """(wall seconds, process CPU seconds, loss) of one call."""
  start, cpu = time.perf_counter(), time.process_time()
  loss = run(steps)
  return time.perf_counter() - start, time.process_time() - cpu, loss


def bench_one(args, name, xla):
  cfg = model_files.read_config(os.path.join(_REPO, "configs", name + ".json"))
  steps, warmup = per_config(args.steps, name), per_config(args.warmup, name)
  ours, ours_params, ours_keep = build_ours(args, cfg, xla)
  peer, peer_params, peer_keep = build_peer(args, cfg, xla, args.peer_xla_scope)
  row = {"config": name, "xla": "on" if xla else "off", "steps": steps,
         "ours_params": ours_params, "peer_params": peer_params}
  for side, run in (("ours", ours), ("peer", peer)):
    row[side + "_compile_s"] = timed(run, warmup)[0]
  times, cpus = {"ours": [], "peer": []}, {"ours": [], "peer": []}
  for _ in range(args.repeats):
    for side, run in (("ours", ours), ("peer", peer)):
      seconds, cpu, row[side + "_loss"] = timed(run, steps)
      times[side].append(seconds)
      cpus[side].append(cpu * 1000 / steps)
  for side in ("ours", "peer"):
    row[side + "_sps"] = args.batch * steps / statistics.median(times[side])
    row[side + "_cpu_ms"] = statistics.median(cpus[side])
    row[side + "_all"] = " ".join(f"{args.batch * steps / t:.1f}" for t in times[side])
  flops = train_flops_per_sequence(cfg, args.seq, args.preds)
  for side in ("ours", "peer"):
    row[side + "_tflops"] = row[side + "_sps"] * flops / 1e12
    row[side + "_mfu"] = row[side + "_tflops"] / args.peak_tflops if args.peak_tflops else None
  row["ratio"] = row["ours_sps"] / row["peer_sps"]
  row["cpu_ratio"] = row["peer_cpu_ms"] / row["ours_cpu_ms"]
  del ours, peer, ours_keep, peer_keep
  keras.backend.clear_session()
  tf_keras.backend.clear_session()
  gc.collect()
  return row


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--backend", choices=("tensorflow", "jax", "torch"), default="tensorflow")
  parser.add_argument("--configs", default="tiny,mini,small,base")
  for flag, default in (("batch", 32), ("seq", 128), ("preds", 20), ("repeats", 3)):
    parser.add_argument("--" + flag, type=int, default=default)
  parser.add_argument("--steps", default="20,base=5", help='timed steps per call: "20,base=5"')
  parser.add_argument("--warmup", default="3,base=1", help="steps of the first (compile) call")
  parser.add_argument("--xla", choices=("both", "on", "off"), default="both")
  parser.add_argument("--peer_xla_scope", choices=("step", "grads"), default="step",
                      help="peer XLA: jit the whole step, or only the forward/backward (ours)")
  parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
  parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
  parser.add_argument("--peak_tflops", type=float, default=None,
                      help="peak FLOP/s for MFU (default: 989.4 on gpu, none on cpu)")
  args = parser.parse_args()
  if args.peak_tflops is None and args.device == "gpu":
    args.peak_tflops = 989.4
  if args.device == "gpu" and not tf.config.list_physical_devices("GPU"):
    parser.error("--device=gpu but TensorFlow sees no GPU")
  distribution.set_precision(args.dtype)
  tf_keras.mixed_precision.set_global_policy(
      "mixed_bfloat16" if args.dtype == "bfloat16" else "float32")
  print(machine_info())
  print(f"setup   : batch={args.batch} seq={args.seq} preds={args.preds} steps={args.steps} "
        f"warmup={args.warmup} repeats={args.repeats} peer_xla_scope={args.peer_xla_scope} "
        f"device={args.device} dtype={args.dtype} "
        f"intra/inter threads={tf.config.threading.get_intra_op_parallelism_threads()}/"
        f"{tf.config.threading.get_inter_op_parallelism_threads()} (0 = TF default)", flush=True)
  modes = {"both": (False, True), "on": (True,), "off": (False,)}[args.xla]
  rows = []
  for name in [c.strip() for c in args.configs.split(",") if c.strip()]:
    for xla in modes:
      row = bench_one(args, name, xla)
      rows.append(row)
      print(f"  done {name} xla={row['xla']}: ours {row['ours_all']} | peer {row['peer_all']} "
            f"seq/s; compile(warmup) ours {row['ours_compile_s']:.1f}s peer "
            f"{row['peer_compile_s']:.1f}s; last loss ours {row['ours_loss']:.3f} "
            f"peer {row['peer_loss']:.3f}", flush=True)
  header = (f"{'config':<7}{'xla':<5}{'steps':>6}{'params ours':>13}{'params peer':>13}"
            f"{'ours seq/s':>12}{'peer seq/s':>12}{'ours/peer':>11}"
            f"{'CPU ms/step ours':>18}{'peer':>8}{'peer/ours':>11}")
  print("\n" + header + "\n" + "-" * len(header))
  for r in rows:
    print(f"{r['config']:<7}{r['xla']:<5}{r['steps']:>6}{r['ours_params']:>13,}"
          f"{r['peer_params']:>13,}{r['ours_sps']:>12.1f}{r['peer_sps']:>12.1f}"
          f"{r['ratio']:>11.2f}{r['ours_cpu_ms']:>18.0f}{r['peer_cpu_ms']:>8.0f}"
          f"{r['cpu_ratio']:>11.2f}")
  if args.peak_tflops:
    print(f"\nmodel TFLOP/s and MFU (peak {args.peak_tflops:g} TFLOP/s; "
          "train FLOPs = 3 x forward matmuls):")
    for r in rows:
      print(f"{r['config']:<7}{r['xla']:<5} ours {r['ours_tflops']:8.2f} TFLOP/s "
            f"MFU {r['ours_mfu']:6.1%} | peer {r['peer_tflops']:8.2f} TFLOP/s "
            f"MFU {r['peer_mfu']:6.1%}")
  print(f"loadavg at the end: {load()} (other busy processes on a {os.cpu_count()}-core machine "
        "skew both sides)")
  mismatched = [r["config"] for r in rows if r["ours_params"] != r["peer_params"]]
  if mismatched:
    print(f"WARNING: parameter counts differ for {sorted(set(mismatched))}")


if __name__ == "__main__":
  main()
