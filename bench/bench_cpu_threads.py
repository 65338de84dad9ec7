r"""What TensorFlow's CPU thread pools cost when they are larger than the CPUs a run may use
(issue 40: the commands size them, `official_bert/training/cpu_threads.py`).

  python bench/bench_cpu_threads.py [--threads=2,16] [--rounds=2] [--work_dir=/tmp/bench_threads]

A container with a CPU limit of N (a cgroup quota) on a host of M > N CPUs lets a process be
scheduled on all M, and TensorFlow sizes both pools to M; the kernel then throttles it to N
CPUs' time. On this machine the same oversubscription is had by asking for M threads on its
own CPUs: `TF_NUM_INTRAOP_THREADS=M TF_NUM_INTEROP_THREADS=M`. Each setting runs
`run_classifier` with its default flags on the packaged MiniLM folder: the first
--max_train_examples SST-2 training sentences, seq 64, batch 32, 1 epoch, seed 1, a fresh
process each, the settings interleaved over --rounds rounds. Reported: training examples/s
(the median of the log's per-loop rates after the first loop) per round and their median.
Settings: `default` (no variable: what the command chooses here), and `intra=I,inter=J` for
each pair of --pools (default: this machine's CPU count, and 8x it, with inter 1 beside).
"""

import argparse
import datetime
import os
import re
import shutil
import statistics
import subprocess
import sys

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_DATA = os.path.join(os.path.dirname(_REPO), "shared", "data")
sys.path.insert(0, _REPO)

import machine  # noqa: E402  # bench/machine.py, beside this script


def parse_args():
  cpus = len(os.sched_getaffinity(0))
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--pools",
                 default=f"{cpus}:1,{8 * cpus}:{8 * cpus}",
                 help="intra:inter pairs run beside `default`")
  p.add_argument("--rounds", type=int, default=2)
  p.add_argument("--max_train_examples", type=int, default=2000)
  p.add_argument("--work_dir", default="/tmp/bench_threads")
  p.add_argument("--data", default=os.path.join(_DATA, "glue", "SST-2"))
  return p.parse_args()


def run(args, model_dir, name, env_threads):
  out = os.path.join(args.work_dir, name)
  cmd = [
      sys.executable, "-m", "official_bert.run_classifier", "--task_name=SST-2",
      f"--data_dir={args.data}", f"--init_checkpoint={model_dir}", "--do_train",
      f"--max_train_examples={args.max_train_examples}", "--max_seq_length=64",
      "--num_train_epochs=1", "--train_batch_size=32", "--learning_rate=5e-5", "--random_seed=1",
      "--steps_per_loop=5", f"--output_dir={out}"
  ]
  shutil.rmtree(out, ignore_errors=True)  # else the run would resume the last one
  env = {k: v for k, v in os.environ.items() if not k.startswith("TF_NUM_")}
  env.update(TF_CPP_MIN_LOG_LEVEL="2", **env_threads)
  proc = subprocess.run(cmd, cwd=_REPO, env=env, capture_output=True, text=True, check=False)
  if proc.returncode:
    raise SystemExit(f"{' '.join(cmd)}\n{proc.stderr[-3000:]}")
  rates = [float(r) for r in re.findall(r"([\d.]+) examples/s", proc.stderr)]
  return statistics.median(rates[1:] or rates)


def main():
  args = parse_args()
  model_dir = machine.minilm_dir()
  os.makedirs(args.work_dir, exist_ok=True)
  settings = {"default": {}}
  for pair in args.pools.split(","):
    intra, inter = pair.split(":")
    settings[f"intra={intra},inter={inter}"] = {
        "TF_NUM_INTRAOP_THREADS": intra,
        "TF_NUM_INTEROP_THREADS": inter
    }
  rates = {name: [] for name in settings}
  for round_ in range(args.rounds):
    for name, env_threads in settings.items():
      rates[name].append(run(args, model_dir, name.replace("=", "").replace(",", "_"), env_threads))
      print(f"round {round_ + 1} {name}: {rates[name][-1]:.1f} examples/s", flush=True)
  base = statistics.median(rates["default"])
  print(f"\nRun {datetime.datetime.now():%Y-%m-%d %H:%M} on {machine.cpu_model()}, "
        f"{len(os.sched_getaffinity(0))} CPUs, {args.max_train_examples} SST-2 sentences, "
        f"seq 64, batch 32\n")
  print("| threads | train examples/s, per round | median | vs default |")
  print("|---|---|---|---|")
  for name, values in rates.items():
    median = statistics.median(values)
    print(f"| {name} | {', '.join(f'{v:.1f}' for v in values)} | {median:.1f} | "
          f"{median / base:.2f}x |")


if __name__ == "__main__":
  main()
