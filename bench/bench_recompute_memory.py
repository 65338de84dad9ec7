r"""Peak memory of a pretraining step with and without --recompute_grad (gradient checkpointing).

  python bench/bench_recompute_memory.py [--backend=tensorflow|jax|torch] [--config=base]
      [--batch=8] [--seq=512] [--preds=80] [--steps=2]

Each mode runs in its own process (`pretraining_step_keras.build_step`: our model, loss,
AdamW and clipping, Keras' fit step, no jit so that the backend's own memory is measured; on
CPU); the process's peak resident memory (VmHWM) after `--steps` steps, the time per step and
the last loss are printed side by side: the loss must be the same (dropout included).
"""

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time

_BENCH = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.dirname(_BENCH)


def peak_rss_mib():
  with open("/proc/self/status", encoding="utf-8") as f:
    for line in f:
      if line.startswith("VmHWM:"):
        return int(line.split()[1]) / 1024
  return float("nan")


def child(args):
  sys.path[:0] = [_BENCH, _REPO]
  import pretraining_step_keras  # pylint: disable=g-import-not-at-top
  cfg = pretraining_step_keras.config(args.config, _REPO)
  run, _ = pretraining_step_keras.build_step(cfg, args.batch, args.seq, args.preds, jit=False,
                                             recompute_grad=args.recompute_grad)
  before = peak_rss_mib()
  start = time.perf_counter()
  loss = run(args.steps)
  seconds = (time.perf_counter() - start) / args.steps
  print("RESULT " + json.dumps({"peak_mib": peak_rss_mib(), "built_mib": before,
                                "s_per_step": seconds, "loss": loss}), flush=True)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--backend", default="tensorflow", choices=("tensorflow", "jax", "torch"))
  parser.add_argument("--config", default="base")
  for flag, default in (("batch", 8), ("seq", 512), ("preds", 80), ("steps", 2)):
    parser.add_argument("--" + flag, type=int, default=default)
  parser.add_argument("--recompute_grad", action="store_true", help=argparse.SUPPRESS)
  parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.child:
    child(args)
    return
  print(f"command : python {' '.join(sys.argv)}\n"
        f"date    : {datetime.datetime.now().isoformat(timespec='seconds')}\n"
        f"machine : nproc={len(os.sched_getaffinity(0))}, {platform.platform()}", flush=True)
  rows = {}
  for recompute in (False, True):
    command = [sys.executable, __file__, "--child"] + [
        f"--{k}={getattr(args, k)}" for k in ("config", "batch", "seq", "preds", "steps")]
    env = dict(os.environ, KERAS_BACKEND=args.backend, TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run(command + (["--recompute_grad"] if recompute else []), env=env,
                          capture_output=True, text=True, check=False)
    line = next((l for l in done.stdout.splitlines() if l.startswith("RESULT ")), None)
    if line is None:
      sys.exit(f"recompute_grad={recompute} failed:\n{done.stderr[-3000:]}")
    rows[recompute] = json.loads(line[len("RESULT "):])
  print(f"\n{args.backend}, {args.config}, batch {args.batch}, seq {args.seq}, "
        f"{args.preds} predictions, {args.steps} steps")
  print(f"{'recompute_grad':<16}{'peak RSS MiB':>14}{'after build':>13}{'s/step':>9}"
        f"{'last loss':>12}")
  for recompute, r in rows.items():
    print(f"{str(recompute):<16}{r['peak_mib']:>14.0f}{r['built_mib']:>13.0f}"
          f"{r['s_per_step']:>9.1f}{r['loss']:>12.6f}")
  plain, recomputed = rows[False], rows[True]
  print(f"step memory (peak - after build): {plain['peak_mib'] - plain['built_mib']:.0f} -> "
        f"{recomputed['peak_mib'] - recomputed['built_mib']:.0f} MiB; time x"
        f"{recomputed['s_per_step'] / plain['s_per_step']:.2f}; loss difference "
        f"{abs(plain['loss'] - recomputed['loss']):.2e}")


if __name__ == "__main__":
  main()
