r"""One GPU, side by side: our pretraining step (JAX, PyTorch) and the peers, in about 5 minutes.

  python3 bench/bench_gpu_pretraining.py [--configs=base,large] [--batch=256,large=128]
      [--seq=128] [--preds=20] [--steps=20] [--repeats=3] [--sides=ours-jax,hf-eager,...]
      [--budget_s=330]

For the GPU machines, whose python3 has PyTorch, JAX and transformers but no TensorFlow: bring
keras (and keras-hub for its side) as wheels. Each side runs in its own process, one after the
other (one GPU), on random ids, bf16, seq 128 with 20 masked positions:
  ours-jax     `bench_pretraining_step.py --backend=jax` (Keras fit, jit/XLA): BertPretrainingModel,
               MLM head on the masked positions only, NSP, AdamW, global-norm clip 1.0
  ours-torch   the same on Keras' torch backend, `torch.compile` (jit_compile=True)
  hf-eager     transformers BertForPreTraining (MLM logits at every position, NSP), PyTorch
               eager, SDPA attention, bf16 autocast, fused AdamW, clip 1.0
  hf-compile   the same under `torch.compile`
  keras-hub    keras_hub.models.BertMaskedLM on JAX, fit, jit (MLM only, on masked positions)
A side may name variants and its own configs, SIDE[+OPTION...][:CONFIG/CONFIG]: ours-jax's
options (the ablations of what a step costs) are attn0 (no dropout on the attention
probabilities: attention runs fused through keras.ops.dot_product_attention), nodrop (no
dropout at all), threefry (Keras' own dropout, masks from threefry, not our encoder's
counter hash: `official_bert/modeling/layers/hashed_dropout.py`), rbg (Keras' dropout with
masks from XLA's RngBitGenerator), notriton (XLA_FLAGS --xla_gpu_enable_triton_gemm=false),
nocmdbuf (no CUDA graphs: each kernel's HLO op is seen), devdata (fit on batches
already on the GPU), scan (a jitted lax.scan of 4 steps per call over batches on the GPU:
`pretraining_step_keras.jax_scan_run`) and profile (after the timing, the device time of 4
steps by kernel and by model scope). Every side takes bN: batch N.
E.g. --sides=ours-jax+notriton+scan:base/large,hf-compile,ours-jax+profile+nocmdbuf:base.
seq/s: batch x steps / wall seconds, median of --repeats timed calls after a warm-up call.
MFU: model FLOPs (3 x forward matmuls, `pretraining_flops.train_flops_per_sequence`, the
same count for every side) per second over an 8192^3 bf16 matmul measured here with PyTorch.
A side that would start past --budget_s is skipped (printed).
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

_BENCH = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.dirname(_BENCH)
sys.path.insert(0, _BENCH)
sys.path.insert(0, _REPO)
# pylint: disable=wrong-import-position
from pretraining_flops import per_config  # noqa: E402
from pretraining_flops import train_flops_per_sequence  # noqa: E402

SIDES = ("ours-jax", "hf-eager", "hf-compile", "keras-hub", "ours-torch")
OUR_OPTIONS = {"attn0", "nodrop", "rbg", "notriton", "nocmdbuf", "profile", "scan",
               "devdata", "threefry"}


def load_config(name):
  with open(os.path.join(_REPO, "configs", name + ".json"), encoding="utf-8") as f:
    return json.load(f)


def random_batch(cfg, batch, seq, preds, seed=0):
  import numpy as np  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(seed)
  positions = np.sort(np.stack([rng.choice(np.arange(1, seq), preds, replace=False)
                                for _ in range(batch)]), axis=1)
  return {
      "ids": rng.integers(1, cfg["vocab_size"], (batch, seq)),
      "types": (np.arange(seq)[None] >= seq // 2).repeat(batch, 0),
      "positions": positions,
      "labels": rng.integers(1, cfg["vocab_size"], (batch, preds)),
      "nsp": rng.integers(0, 2, (batch,)),
  }


def timed_calls(run, warmup, steps, repeats):
  """(first call seconds, [seconds per timed call], last loss)."""
  start = time.perf_counter()
  run(warmup)
  first = time.perf_counter() - start
  times, loss = [], None
  for _ in range(repeats):
    start = time.perf_counter()
    loss = run(steps)
    times.append(time.perf_counter() - start)
  return first, times, loss


# ---- sides, each in its own process -----------------------------------------------------------

def batch_of(args, name, options):
  """The side's bN option, else --batch's for the config."""
  sizes = [int(o[1:]) for o in options if re.fullmatch(r"b\d+", o)]
  return sizes[0] if sizes else per_config(args.batch, name)


def side_hf(args, name, compiled, options):
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  cfg = load_config(name)
  batch = batch_of(args, name, options)
  hf_config = transformers.BertConfig(
      vocab_size=cfg["vocab_size"], hidden_size=cfg["hidden_size"],
      num_hidden_layers=cfg["num_hidden_layers"],
      num_attention_heads=cfg["num_attention_heads"],
      intermediate_size=cfg["intermediate_size"], hidden_act="gelu_new",
      max_position_embeddings=cfg["max_position_embeddings"],
      type_vocab_size=cfg["type_vocab_size"], attn_implementation="sdpa")
  torch.manual_seed(0)
  model = transformers.BertForPreTraining(hf_config).to(args.device).train()
  forward = torch.compile(model) if compiled else model
  optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, eps=1e-6,
                                fused=args.device == "cuda")
  b = random_batch(cfg, batch, args.seq, args.preds)
  ids = torch.tensor(b["ids"], device=args.device)
  types = torch.tensor(b["types"], device=args.device, dtype=torch.long)
  labels = torch.full_like(ids, -100)
  labels.scatter_(1, torch.tensor(b["positions"], device=args.device),
                  torch.tensor(b["labels"], device=args.device))
  nsp = torch.tensor(b["nsp"], device=args.device)
  mask = torch.ones_like(ids)

  def run(steps):
    for _ in range(steps):
      with torch.autocast(args.device, dtype=torch.bfloat16):
        loss = forward(input_ids=ids, token_type_ids=types, attention_mask=mask,
                       labels=labels, next_sentence_label=nsp).loss
      loss.backward()
      torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
      optimizer.step()
      optimizer.zero_grad(set_to_none=True)
    return loss.item()  # waits for the GPU

  params = sum(p.numel() for p in model.parameters() if p.requires_grad)
  return params, batch, timed_calls(run, args.warmup, args.steps, args.repeats)


def side_keras_hub(args, name, options):
  import keras  # pylint: disable=g-import-not-at-top
  import keras_hub  # pylint: disable=g-import-not-at-top
  cfg = load_config(name)
  batch = batch_of(args, name, options)
  keras.mixed_precision.set_dtype_policy("mixed_bfloat16")
  keras.utils.set_random_seed(0)
  backbone = keras_hub.models.BertBackbone(
      vocabulary_size=cfg["vocab_size"], num_layers=cfg["num_hidden_layers"],
      num_heads=cfg["num_attention_heads"], hidden_dim=cfg["hidden_size"],
      intermediate_dim=cfg["intermediate_size"],
      max_sequence_length=cfg["max_position_embeddings"],
      num_segments=cfg["type_vocab_size"])
  model = keras_hub.models.BertMaskedLM(backbone, preprocessor=None)
  optimizer = keras.optimizers.AdamW(1e-4, weight_decay=0.01, epsilon=1e-6,
                                     global_clipnorm=1.0)
  model.compile(optimizer=optimizer, jit_compile=True, weighted_metrics=[],
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  b = random_batch(cfg, batch, args.seq, args.preds)
  x = {"token_ids": b["ids"].astype("int32"), "segment_ids": b["types"].astype("int32"),
       "padding_mask": b["ids"] > 0, "mask_positions": b["positions"].astype("int32")}
  y, w = b["labels"].astype("int32"), (b["labels"] > 0).astype("float32")

  def forever():
    while True:
      yield x, y, w

  data = forever()

  def run(steps):
    # keras.Model's fit: keras-hub's own wraps the data in tf.data for its preprocessor
    # (None here), and this machine has no TensorFlow. The train step is the same.
    history = keras.Model.fit(model, data, steps_per_epoch=steps, epochs=1, verbose=0,
                              shuffle=False)
    keras.ops.convert_to_numpy(model.trainable_weights[0])
    return float(history.history["loss"][-1])

  params = int(sum(int(keras.ops.size(v)) for v in model.trainable_weights))
  return params, batch, timed_calls(run, args.warmup, args.steps, args.repeats)


def side_ours(args, name, options):
  import keras  # pylint: disable=g-import-not-at-top
  import pretraining_step_keras  # pylint: disable=g-import-not-at-top

  from official_bert.modeling.layers import hashed_dropout  # pylint: disable=g-import-not-at-top
  batch = batch_of(args, name, options)
  keras.mixed_precision.set_dtype_policy("mixed_bfloat16")
  if options & {"threefry", "rbg"}:
    hashed_dropout.HASHED_BACKENDS = ()  # the encoder's dropouts through Keras'
  if "rbg" in options:
    pretraining_step_keras.use_bit_generator_dropout()
  cfg = pretraining_step_keras.config(name, _REPO)
  run, params = pretraining_step_keras.build_step(
      cfg, batch, args.seq, args.preds, jit=True,
      attention_dropout=0.0 if options & {"attn0", "nodrop"} else None,
      hidden_dropout=0.0 if "nodrop" in options else None,
      loop="scan" if "scan" in options else "fit_device" if "devdata" in options else "fit")
  result = timed_calls(run, args.warmup, args.steps, args.repeats)
  if "profile" in options:
    try:
      for line in pretraining_step_keras.kernel_profile(run, 4):
        print("PROFILE " + line, flush=True)
    except Exception as e:  # pylint: disable=broad-except
      print(f"PROFILE failed: {e!r}", flush=True)
  keras.backend.clear_session()
  return params, batch, result


def parse_side(spec, configs):
  """"ours-jax+rbg+profile:base/large" -> ("ours-jax", {"rbg", "profile"}, "base,large")."""
  spec, _, own_configs = spec.partition(":")
  name, *options = spec.split("+")
  if name not in SIDES:
    raise SystemExit(f"--sides: unknown side {name!r} (one of {', '.join(SIDES)})")
  ours = [o for o in options if not re.fullmatch(r"b\d+", o)]
  if set(ours) - OUR_OPTIONS or (ours and name != "ours-jax"):
    raise SystemExit(f"--sides: {spec!r}: options {sorted(OUR_OPTIONS)} are for ours-jax only"
                     " (bN, batch N, for every side)")
  return name, set(options), own_configs.replace("/", ",") or configs


def run_side(args):
  """In a child process: one side, every config; prints one JSON line per config."""
  side, options, _ = parse_side(args.side, args.configs)
  for name in args.configs.split(","):
    if side in ("hf-eager", "hf-compile"):
      params, batch, result = side_hf(args, name, side == "hf-compile", options)
    elif side == "keras-hub":
      params, batch, result = side_keras_hub(args, name, options)
    else:
      params, batch, result = side_ours(args, name, options)
    first, times, loss = result
    print("RESULT " + json.dumps({"side": args.side, "config": name, "params": params,
                                  "batch": batch, "first_s": first, "times": times,
                                  "loss": loss}), flush=True)


# ---- driver -----------------------------------------------------------------------------------

def matmul_ceiling():
  import torch  # pylint: disable=g-import-not-at-top
  a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
  b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
  for _ in range(3):
    a @ b
  torch.cuda.synchronize()
  times = []
  for _ in range(10):
    start = time.perf_counter()
    for _ in range(10):
      a @ b
    torch.cuda.synchronize()
    times.append(time.perf_counter() - start)
  return 10 * 2 * 8192 ** 3 / statistics.median(times) / 1e12


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--configs", default="base,large")
  parser.add_argument("--batch", default="256,large=128")
  for flag, default in (("seq", 128), ("preds", 20), ("steps", 20), ("warmup", 4),
                        ("repeats", 3)):
    parser.add_argument("--" + flag, type=int, default=default)
  parser.add_argument("--sides", default=",".join(SIDES))
  parser.add_argument("--budget_s", type=float, default=330)
  parser.add_argument("--side", help=argparse.SUPPRESS)  # a child process's side
  parser.add_argument("--device", default="cuda", help=argparse.SUPPRESS)  # cpu: a smoke test
  args = parser.parse_args()
  if args.side:
    if args.side.startswith("ours-jax"):
      os.environ["KERAS_BACKEND"] = "jax"
    run_side(args)
    return
  for spec in args.sides.split(","):
    parse_side(spec, args.configs)  # a typo fails before the GPU work
  import torch  # pylint: disable=g-import-not-at-top
  print(f"command : python3 {' '.join(sys.argv)}\n"
        f"date    : {time.strftime('%Y-%m-%dT%H:%M:%S')}\n"
        f"device  : {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
  ceiling = matmul_ceiling()
  print(f"ceiling : 8192^3 bf16 matmul {ceiling:.0f} TFLOP/s (measured, torch)", flush=True)
  start, rows = time.perf_counter(), []
  for side in args.sides.split(","):
    left = args.budget_s - (time.perf_counter() - start)
    if left < 30:
      print(f"  skipped {side}: the time budget is spent", flush=True)
      continue
    name, options, configs = parse_side(side, args.configs)
    env = dict(os.environ, KERAS_BACKEND="torch" if name == "ours-torch" else "jax",
               XLA_PYTHON_CLIENT_PREALLOCATE="false", TF_CPP_MIN_LOG_LEVEL="2")
    flags = [env.get("XLA_FLAGS", "")]
    if "notriton" in options:
      flags.append("--xla_gpu_enable_triton_gemm=false")
    if "nocmdbuf" in options:  # each kernel its own launch: the profile sees its HLO op
      flags.append("--xla_gpu_enable_command_buffer=")
    if "profile" in options:  # the optimized HLO, for the op scopes of the kernels
      flags.append(f"--xla_dump_to=/tmp/hlo_{os.getpid()}_{len(rows)}_{name} "
                   "--xla_dump_hlo_module_re=train_step|scan")
    env["XLA_FLAGS"] = " ".join(f for f in flags if f)
    child = [sys.executable, __file__, "--side", side, f"--configs={configs}"] + [
        f"--{k}={getattr(args, k)}" for k in
        ("batch", "seq", "preds", "steps", "warmup", "repeats")]
    try:
      out = subprocess.run(child, env=env, capture_output=True, text=True, timeout=left,
                           check=False)
      text = out.stdout
      if out.returncode:
        print(f"  {side} failed (exit {out.returncode}):\n{out.stderr[-3000:]}", flush=True)
    except subprocess.TimeoutExpired as e:
      text = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
      print(f"  {side} stopped at the time budget", flush=True)
    for line in text.splitlines():
      if line.startswith("PROFILE "):
        print("  " + line, flush=True)
      if line.startswith("RESULT "):
        row = dict(json.loads(line[len("RESULT "):]), side=side)
        rows.append(row)
        sps = [row["batch"] * args.steps / t for t in row["times"]]
        print(f"  done {side} {row['config']}: {' '.join(f'{s:.0f}' for s in sps)} seq/s, "
              f"first call {row['first_s']:.0f}s, loss {row['loss']:.3f}", flush=True)
  header = (f"{'side':<23}{'config':<7}{'batch':>6}{'params':>13}{'seq/s':>9}{'TFLOP/s':>9}"
            f"{'MFU':>7}{'first s':>9}")
  print("\n" + header + "\n" + "-" * len(header))
  for row in rows:
    cfg = load_config(row["config"])
    sps = row["batch"] * args.steps / statistics.median(row["times"])
    tflops = sps * train_flops_per_sequence(cfg, args.seq, args.preds) / 1e12
    side = row["side"].partition(":")[0]
    print(f"{side:<22} {row['config']:<7}{row['batch']:>6}{row['params']:>13,}"
          f"{sps:>9.0f}{tflops:>9.0f}{tflops / ceiling:>7.1%}{row['first_s']:>9.0f}")
  print(f"total {time.perf_counter() - start:.0f}s")


if __name__ == "__main__":
  main()
