r"""The original pretraining recipe vs masked-LM only + dynamic masking, same budget.

  python bench/bench_pretraining_recipes.py [--train_mb=8] [--steps=3000] [--batch=32]
                                            [--work_dir=/tmp/bench_recipes]

Data: the books corpus (../shared/data/corpus/gutenberg_books.txt): the first --train_mb MB
to train on, the last --heldout_mb MB held out (cut at document boundaries), the
bert-base-uncased vocabulary. Model: configs/tiny.json (2 layers, hidden 128), seq 128,
20 predictions, the same optimizer, learning rate, warmup, batch and number of steps.
  original: create_pretraining_data defaults (sentence pairs + next sentence, masked
            offline, --dupe_factor=5) -> run_pretraining (masked LM + next sentence)
  modern:   create_pretraining_data --next_sentence=False --masking=none --dupe_factor=1
            (single segments packed up to 128 tokens) -> run_pretraining
            --next_sentence=False --dynamic_masking (new masks every epoch)
Held-out: the held-out text written twice with fixed offline masks, as sentence pairs (the
original format) and as packed single segments; each model's masked-LM accuracy and loss on
both (run_pretraining --do_eval). Runs one after the other, never in parallel.
"""

import argparse
import datetime
import os
import shlex
import subprocess
import sys
import time

import machine  # beside this script

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_DATA = os.path.join(os.path.dirname(_REPO), "shared", "data")
_SEQ = ["--max_seq_length=128", "--max_predictions_per_seq=20"]


def parse_args():
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--train_mb", type=float, default=8.0)
  p.add_argument("--heldout_mb", type=float, default=0.5)
  p.add_argument("--steps", type=int, default=3000)
  p.add_argument("--batch", type=int, default=32)
  p.add_argument("--learning_rate", type=float, default=1e-3)
  p.add_argument("--warmup", type=int, default=200)
  p.add_argument("--eval_steps", type=int, default=200)
  p.add_argument("--work_dir", default="/tmp/bench_recipes")
  p.add_argument("--corpus", default=os.path.join(_DATA, "corpus", "gutenberg_books.txt"))
  p.add_argument("--vocab", default=os.path.join(_DATA, "vocab", "bert-base-uncased",
                                                 "vocab.txt"))
  return p.parse_args()


def cut_at_documents(text, start, num_bytes):
  """text[start:...] of about num_bytes, starting and ending at a blank line."""
  if start:
    start = text.index(b"\n\n", start) + 2
  end = text.find(b"\n\n", start + num_bytes)
  return text[start:len(text) if end < 0 else end + 2]


def run(cmd, log):
  print("$ " + " ".join(shlex.quote(c) for c in cmd), flush=True)
  t0 = time.time()
  with open(log, "wb") as f:
    proc = subprocess.run(cmd, cwd=_REPO, stdout=f, stderr=subprocess.STDOUT)
  if proc.returncode:
    with open(log, encoding="utf-8", errors="replace") as f:
      print(f.read()[-3000:])
    raise SystemExit(f"failed (exit {proc.returncode}): see {log}")
  return time.time() - t0


def read_results(path):
  with open(path, encoding="utf-8") as f:
    return {k: float(v) for k, v in (line.strip().split(" = ") for line in f if " = " in line)}


def main():
  args = parse_args()
  w = args.work_dir
  os.makedirs(w, exist_ok=True)
  with open(args.corpus, "rb") as f:
    text = f.read()
  train = cut_at_documents(text, 0, int(args.train_mb * 2**20))
  heldout = cut_at_documents(text, len(text) - int(args.heldout_mb * 2**20) - 1000,
                             int(args.heldout_mb * 2**20))
  for name, data in (("train.txt", train), ("heldout.txt", heldout)):
    with open(os.path.join(w, name), "wb") as f:
      f.write(data)
  py = sys.executable
  writer = [py, "-m", "data_prep.create_pretraining_data", f"--vocab_file={args.vocab}",
            "--do_lower_case=True", "--random_seed=12345", "--num_workers=2"] + _SEQ
  recipes = {
      "original": ([], ["--dupe_factor=5"], []),
      "modern": (["--next_sentence=False"], ["--masking=none", "--dupe_factor=1"],
                 ["--next_sentence=False", "--dynamic_masking", f"--vocab_file={args.vocab}"]),
  }
  heldout_sets = {"pairs": [], "single_segments": ["--next_sentence=False"]}
  print(f"# {datetime.datetime.now():%Y-%m-%d %H:%M}  nproc={os.cpu_count()} "
        f"cpu='{machine.cpu_model()}' load average {os.getloadavg()[0]:.1f}", flush=True)
  for name, extra in heldout_sets.items():
    run(writer + [f"--input_file={w}/heldout.txt", f"--output_file={w}/heldout_{name}.tfrecord",
                  "--dupe_factor=1"] + extra, os.path.join(w, f"log_heldout_{name}.txt"))
  config = os.path.join(_REPO, "configs", "tiny.json")
  results = {}
  for recipe, (shape, masking, train_flags) in recipes.items():
    records = f"{w}/train_{recipe}.tfrecord"
    prep_s = run(writer + [f"--input_file={w}/train.txt", f"--output_file={records}"] + shape
                 + masking, os.path.join(w, f"log_data_{recipe}.txt"))
    out = os.path.join(w, f"model_{recipe}")
    common = [py, "-m", "official_bert.run_pretraining", f"--bert_config_file={config}",
              f"--output_dir={out}"] + _SEQ
    train_s = run(common + [f"--input_file={records}", "--do_train",
                            f"--train_batch_size={args.batch}",
                            f"--num_train_steps={args.steps}",
                            f"--num_warmup_steps={args.warmup}",
                            f"--learning_rate={args.learning_rate}", "--steps_per_loop=100",
                            f"--save_checkpoints_steps={args.steps}"] + train_flags,
                  os.path.join(w, f"log_train_{recipe}.txt"))
    evals = {}
    eval_flags = [f for f in train_flags if f.startswith("--next_sentence")]
    for name in heldout_sets:
      run(common + [f"--input_file={w}/heldout_{name}.tfrecord", "--do_eval",
                    f"--eval_input_file={w}/heldout_{name}.tfrecord",
                    f"--eval_batch_size={args.batch}", f"--max_eval_steps={args.eval_steps}"]
          + eval_flags, os.path.join(w, f"log_eval_{recipe}_{name}.txt"))
      evals[name] = read_results(os.path.join(out, "eval_results.txt"))
    results[recipe] = (prep_s, train_s, evals)

  print(f"\nbudget: {args.steps} steps x batch {args.batch}, lr {args.learning_rate}, warmup "
        f"{args.warmup}; train text {len(train) / 2**20:.1f} MB, held-out "
        f"{len(heldout) / 2**20:.2f} MB")
  print("| recipe | data s | train s | held-out pairs: MLM acc / loss | held-out single "
        "segments: MLM acc / loss |")
  print("|---|---|---|---|---|")
  for recipe, (prep_s, train_s, evals) in results.items():
    cells = [f"{e['masked_lm_accuracy']:.4f} / {e['masked_lm_loss']:.3f}"
             for e in (evals["pairs"], evals["single_segments"])]
    print(f"| {recipe} | {prep_s:.0f} | {train_s:.0f} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
  main()
