r"""Distillation (issue 41): a MiniLM teacher -> a 2-layer student, against the same student
trained on the labels alone; dev score and serving speed. SST-2 sentences (run_classifier,
accuracy) or CoNLL-2003 NER (run_ner, entity F1). Resumable.

  python bench/bench_distillation.py --work_dir=/tmp/distill_bench [--seeds=1,2,3]
  python bench/bench_distillation.py --task=conll2003 --work_dir=/tmp/distill_ner_bench

Data (seeded with RandomState(0), disjoint): --num_train (3,000) labeled sentences of the
training file, up to --num_unlabeled (20,000) other training sentences whose labels are
dropped (the transfer set, a .txt; CoNLL-2003's training file holds 14,041 sentences, so
11,041 there), and the task's dev file (SST-2 dev.tsv, 872; CoNLL-2003 valid.txt, 3,250).

Runs, each a command in a fresh process of our venv (TF_NUM_INTRAOP_THREADS=--threads):
  teacher       run_classifier (run_ner) on the packaged MiniLM (6 layers, H384),
                --num_train_epochs=2, seq 64, batch 32, the default recipe; one teacher
                (--teacher_seed)
  distilled     run_distillation --teacher --student_num_layers=2 --unlabeled_file, the
                default temperature (2) and weight (0.5), --student_epochs (2) over the
                labeled and unlabeled sentences together
  labels_only   the same student with --distill_weight=0 and no unlabeled file,
                --labels_only_epochs (2)
Serving: `export --checkpoint=DIR` (no other flag) of the teacher and of a student, then the
serving signature on the dev sentences (NER: their words joined by spaces) in batches of 32,
--threads TF threads, the median of --passes passes over the dev set after a warm-up pass;
sentences/s.
Results: one JSON line per run in --work_dir/results.jsonl (a finished run is not redone);
the table (median and each seed) is printed and, with --out, appended there.
"""

import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import time

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, _REPO)
from bench import machine  # noqa: E402  pylint: disable=wrong-import-position

SEQ, BATCH = 64, 32
# task -> (command, the dev metric in eval_results.txt)
TASKS = {
    "sst2": ("official_bert.run_classifier", "accuracy"),
    "conll2003": ("official_bert.run_ner", "entity_f1"),
}


def parse_args():
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--work_dir", required=True)
  p.add_argument("--task", choices=sorted(TASKS), default="sst2")
  p.add_argument("--data_dir", default=os.path.join(os.path.dirname(_REPO), "shared", "data"))
  p.add_argument("--seeds", default="1,2,3")
  p.add_argument("--teacher_seed", type=int, default=1)
  p.add_argument("--num_train", type=int, default=3000)
  p.add_argument("--num_unlabeled", type=int, default=20000)
  p.add_argument("--student_num_layers", type=int, default=2)
  p.add_argument("--student_epochs", type=float, default=2.0)
  p.add_argument("--labels_only_epochs", type=float, default=2.0)
  p.add_argument("--threads", type=int, default=2)
  p.add_argument("--passes", type=int, default=5)
  p.add_argument("--python", default=os.path.join(_REPO, ".venv", "bin", "python"))
  p.add_argument("--out", default=None, help="append the markdown table to this file")
  p.add_argument("--child_serve", nargs=2, default=None, help=argparse.SUPPRESS)
  return p.parse_args()


def _read_conll(path):
  """[[line, ...] a sentence] of a CoNLL column file, -DOCSTART- skipped."""
  sentences, current = [], []
  with open(path, encoding="utf-8") as f:
    for line in f:
      line = line.rstrip("\n")
      if not line.strip() or line.startswith("-DOCSTART-"):
        if current:
          sentences.append(current)
        current = []
      else:
        current.append(line)
  if current:
    sentences.append(current)
  return sentences


def write_conll_data(args):
  import numpy as np
  work = os.path.join(args.work_dir, "data")
  os.makedirs(work, exist_ok=True)
  paths = {name: os.path.join(work, name) for name in ("train.txt", "unlabeled.txt", "dev.txt")}
  if all(os.path.exists(p) for p in paths.values()):
    return paths
  conll = os.path.join(args.data_dir, "conll2003")
  rows = _read_conll(os.path.join(conll, "train.txt"))
  order = np.random.RandomState(0).permutation(len(rows))
  train = [rows[i] for i in order[:args.num_train]]
  unlabeled = [rows[i] for i in order[args.num_train:args.num_train + args.num_unlabeled]]

  def words(sentence):
    return " ".join(line.split()[0] for line in sentence)

  with open(paths["train.txt"], "w", encoding="utf-8") as f:
    f.write("".join("\n".join(s) + "\n\n" for s in train))
  with open(paths["unlabeled.txt"], "w", encoding="utf-8") as f:
    f.write("".join(words(s) + "\n" for s in unlabeled))
  with open(paths["dev.txt"], "w", encoding="utf-8") as f:
    f.write("".join("\n".join(s) + "\n\n" for s in _read_conll(os.path.join(conll, "valid.txt"))))
  return paths


def write_data(args):
  if args.task == "conll2003":
    return write_conll_data(args)
  import numpy as np
  work = os.path.join(args.work_dir, "data")
  os.makedirs(work, exist_ok=True)
  paths = {name: os.path.join(work, name) for name in ("train.tsv", "unlabeled.txt", "dev.tsv")}
  if all(os.path.exists(p) for p in paths.values()):
    return paths
  with open(os.path.join(args.data_dir, "glue", "SST-2", "train.tsv"), encoding="utf-8") as f:
    rows = [line.rstrip("\n").split("\t") for line in f][1:]
  order = np.random.RandomState(0).permutation(len(rows))
  train = [rows[i] for i in order[:args.num_train]]
  unlabeled = [rows[i][0] for i in order[args.num_train:args.num_train + args.num_unlabeled]]
  with open(paths["train.tsv"], "w", encoding="utf-8") as f:
    f.write("sentence\tlabel\n" + "".join(f"{s}\t{label}\n" for s, label in train))
  with open(paths["unlabeled.txt"], "w", encoding="utf-8") as f:
    f.write("".join(s + "\n" for s in unlabeled))
  with open(os.path.join(args.data_dir, "glue", "SST-2", "dev.tsv"), encoding="utf-8") as f:
    dev = f.read()
  with open(paths["dev.tsv"], "w", encoding="utf-8") as f:
    f.write(dev)
  return paths


def command(args, module, flags, out):
  """Runs `python -m module flags --output_dir=out`; -> (eval results, last examples/s,
  seconds)."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_NUM_INTRAOP_THREADS=str(args.threads))
  cmd = [args.python, "-m", module] + flags + [f"--output_dir={out}"]
  start = time.time()
  proc = subprocess.run(cmd, cwd=_REPO, env=env, capture_output=True, text=True, check=False)
  seconds = time.time() - start
  if proc.returncode:
    raise SystemExit(f"{' '.join(cmd)}\n{proc.stderr[-3000:]}")
  rates = re.findall(r"([\d.]+) examples/s", proc.stderr)
  results = {}
  path = os.path.join(out, "eval_results.txt")
  if os.path.exists(path):
    with open(path) as f:
      results = dict(line.strip().split(" = ") for line in f if " = " in line)
  return results, float(rates[-1]) if rates else None, seconds


def serve_rate(args, model_dir, dev):
  """Exports `model_dir` (no flag but --checkpoint/--export_dir); sentences/s served."""
  export_dir = model_dir.rstrip("/") + "_export"
  if not os.path.exists(export_dir):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run([
        args.python, "-m", "official_bert.export", f"--checkpoint={model_dir}",
        f"--export_dir={export_dir}"
    ],
                          cwd=_REPO,
                          env=env,
                          capture_output=True,
                          text=True,
                          check=False)
    if proc.returncode:
      raise SystemExit(proc.stderr[-3000:])
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=_REPO)
  proc = subprocess.run([
      args.python,
      os.path.abspath(__file__), f"--work_dir={args.work_dir}", f"--threads={args.threads}",
      f"--passes={args.passes}", "--child_serve", export_dir, dev
  ],
                        cwd=_REPO,
                        env=env,
                        capture_output=True,
                        text=True,
                        check=False)
  if proc.returncode:
    raise SystemExit(proc.stderr[-3000:])
  return json.loads(proc.stdout.strip().splitlines()[-1])["sentences_per_second"]


def child_serve(args):
  import tensorflow as tf
  import tensorflow_text  # noqa: F401  pylint: disable=unused-import
  tf.config.threading.set_intra_op_parallelism_threads(args.threads)
  tf.config.threading.set_inter_op_parallelism_threads(1)
  export_dir, dev = args.child_serve
  if dev.endswith(".tsv"):
    with open(dev, encoding="utf-8") as f:
      texts = [line.rstrip("\n").split("\t")[0] for line in f][1:]
  else:
    texts = [" ".join(line.split()[0] for line in s) for s in _read_conll(dev)]
  serve = tf.saved_model.load(export_dir).signatures["serving_default"]
  batches = [tf.constant(texts[i:i + BATCH]) for i in range(0, len(texts), BATCH)]

  def one_pass():
    start = time.perf_counter()
    for batch in batches:
      serve(text=batch)
    return time.perf_counter() - start

  one_pass()  # warm-up
  seconds = statistics.median(one_pass() for _ in range(args.passes))
  print(json.dumps({"sentences_per_second": len(texts) / seconds}))


def done(results_file):
  runs = {}
  if os.path.exists(results_file):
    with open(results_file) as f:
      for line in f:
        run = json.loads(line)
        runs[(run["run"], run["seed"])] = run
  return runs


def main():
  args = parse_args()
  if args.child_serve:
    return child_serve(args)
  os.makedirs(args.work_dir, exist_ok=True)
  paths = write_data(args)
  results_file = os.path.join(args.work_dir, "results.jsonl")
  runs = done(results_file)
  module, metric = TASKS[args.task]
  train, dev = (paths["train.txt"],
                paths["dev.txt"]) if args.task == "conll2003" else (paths["train.tsv"],
                                                                    paths["dev.tsv"])
  data_flags = [
      f"--train_file={train}", f"--dev_file={dev}", "--do_train", "--do_eval",
      f"--train_batch_size={BATCH}", "--eval_batch_size=64"
  ]
  if args.task == "sst2":
    data_flags += ["--text_column=sentence", "--quoting=none"]

  def record(run, seed, out, results, rate, seconds, **extra):
    entry = dict(run=run,
                 seed=seed,
                 output_dir=out,
                 **{metric: float(results[metric])},
                 train_examples_per_second=rate,
                 seconds=round(seconds, 1),
                 **extra)
    runs[(run, seed)] = entry
    with open(results_file, "a") as f:
      f.write(json.dumps(entry) + "\n")
    print(json.dumps(entry), flush=True)

  teacher = os.path.join(args.work_dir, "teacher")
  if ("teacher", args.teacher_seed) not in runs:
    results, rate, seconds = command(
        args, module, data_flags + [
            f"--init_checkpoint={machine.minilm_dir()}", "--num_train_epochs=2",
            f"--max_seq_length={SEQ}", f"--random_seed={args.teacher_seed}"
        ], teacher)
    record("teacher", args.teacher_seed, teacher, results, rate, seconds)
  for seed in [int(s) for s in args.seeds.split(",")]:
    student_flags = data_flags + [
        f"--teacher={teacher}", f"--student_num_layers={args.student_num_layers}",
        f"--random_seed={seed}"
    ]
    for run, extra in (("distilled", [
        f"--unlabeled_file={paths['unlabeled.txt']}", f"--num_train_epochs={args.student_epochs}"
    ]), ("labels_only", ["--distill_weight=0", f"--num_train_epochs={args.labels_only_epochs}"])):
      if (run, seed) in runs:
        continue
      out = os.path.join(args.work_dir, f"{run}_{seed}")
      results, rate, seconds = command(args, "official_bert.run_distillation",
                                       student_flags + extra, out)
      record(run, seed, out, results, rate, seconds)
  serving = {}
  first = min(int(s) for s in args.seeds.split(","))
  for name, directory in (("teacher", teacher), ("student",
                                                 os.path.join(args.work_dir,
                                                              f"distilled_{first}"))):
    serving[name] = serve_rate(args, directory, dev)
  with open(paths["unlabeled.txt"], encoding="utf-8") as f:
    num_unlabeled = sum(1 for _ in f)
  table = render(args, runs, serving, metric, num_unlabeled)
  print(table)
  if args.out:
    with open(args.out, "a") as f:
      f.write(table)


def render(args, runs, serving, metric, num_unlabeled):
  seeds = [int(s) for s in args.seeds.split(",")]
  teacher = runs[("teacher", args.teacher_seed)][metric]
  name, dev = {
      "sst2": ("SST-2", "SST-2 dev, 872"),
      "conll2003": ("CoNLL-2003 NER", "CoNLL-2003 valid.txt, 3,250")
  }[args.task]
  lines = [
      f"\n### Distillation, {name} ({datetime.date.today()}, {machine.cpu_model()}, "
      f"{args.threads} threads)\n",
      f"`python bench/bench_distillation.py --task={args.task} --work_dir={args.work_dir} "
      f"--seeds={args.seeds} --student_epochs={args.student_epochs:g} "
      f"--labels_only_epochs={args.labels_only_epochs:g}` (teacher MiniLM-L6, {args.num_train} "
      f"labeled sentences, 2 epochs; students {args.student_num_layers} layers; dev = {dev})\n",
      f"| run | dev {metric}, median | per seed | train examples/s |", "|---|---|---|---|",
      f"| teacher (6 layers) | {teacher:.4f} | {teacher:.4f} | "
      f"{runs[('teacher', args.teacher_seed)]['train_examples_per_second']:.1f} |"
  ]
  for run, label in (("distilled", f"distilled, +{num_unlabeled:,} unlabeled"),
                     ("labels_only", "labels only (--distill_weight=0)")):
    scores = [runs[(run, s)][metric] for s in seeds if (run, s) in runs]
    rates = [runs[(run, s)]["train_examples_per_second"] or 0 for s in seeds if (run, s) in runs]
    if scores:
      lines.append(f"| {label} | {statistics.median(scores):.4f} | "
                   f"{', '.join(f'{x:.4f}' for x in scores)} | {statistics.median(rates):.1f} |")
  lines += ["", "| export (batch 32) | sentences/s |", "|---|---|"]
  lines += [f"| {name} | {rate:.1f} |" for name, rate in serving.items()]
  lines.append(f"\nstudent / teacher serving: {serving['student'] / serving['teacher']:.2f}x\n")
  return "\n".join(lines) + "\n"


if __name__ == "__main__":
  main()
