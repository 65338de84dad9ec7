r"""Masked-LM-only records packed by sentences against by tokens (issue 40): how full the
records are, and run_pretraining's real tokens/s on each (the same model, batch and steps).

  python bench/bench_pretraining_packing.py [--train_mb=2] [--steps=60] [--rounds=1] [--seq=128]
                                            [--work_dir=/tmp/bench_packing]

Data: the first --train_mb MB of the books corpus (../shared/data/corpus/gutenberg_books.txt,
cut at a document boundary), written twice by create_pretraining_data --next_sentence=False
--masking=none --dupe_factor=1 at --seq:
  sentences  the default packing: whole sentences up to the length (RoBERTa's DOC-SENTENCES;
             --cross_document: FULL-SENTENCES), --short_seq_prob 0.1 as the original
  tokens     --packing=tokens: the text cut every --seq - 2 tokens (Hugging Face's group_texts)
Fill: the mean of input_mask over every record. Training: run_pretraining
--next_sentence=False --dynamic_masking, a MiniLM-shaped model (6 layers, H384, 12 heads)
from random weights, --batch sequences a step, --steps steps with --steps_per_loop=10; real
tokens/s is the median of the log's per-loop "real tokens/s" after the first loop (graph
building), in a fresh process each, one after the other (TF_NUM_INTRAOP_THREADS=--threads);
with --rounds, the two kinds alternate that many times and the table gives the median run.
"""

import argparse
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_DATA = os.path.join(os.path.dirname(_REPO), "shared", "data")
sys.path.insert(0, _REPO)
from bench import machine  # noqa: E402  pylint: disable=wrong-import-position

CONFIG = {
    "vocab_size": 30522,
    "hidden_size": 384,
    "num_hidden_layers": 6,
    "num_attention_heads": 12,
    "intermediate_size": 1536,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1,
    "max_position_embeddings": 512,
    "type_vocab_size": 2,
    "initializer_range": 0.02
}


def parse_args():
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--train_mb", type=float, default=2.0)
  p.add_argument("--steps", type=int, default=60)
  p.add_argument("--rounds",
                 type=int,
                 default=1,
                 help="training runs of each kind, interleaved; medians over them")
  p.add_argument("--batch", type=int, default=32)
  p.add_argument("--seq", type=int, default=128)
  p.add_argument("--threads", type=int, default=2)
  p.add_argument("--cross_document",
                 action="store_true",
                 help="sentences packed across documents (FULL-SENTENCES) for the baseline")
  p.add_argument("--work_dir", default="/tmp/bench_packing")
  p.add_argument("--corpus", default=os.path.join(_DATA, "corpus", "gutenberg_books.txt"))
  p.add_argument("--vocab", default=os.path.join(_DATA, "vocab", "bert-base-uncased", "vocab.txt"))
  p.add_argument("--python", default=os.path.join(_REPO, ".venv", "bin", "python"))
  p.add_argument("--out", default=None, help="append the markdown table to this file")
  return p.parse_args()


def run(args, module, flags):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_NUM_INTRAOP_THREADS=str(args.threads))
  proc = subprocess.run([args.python, "-m", module] + flags,
                        cwd=_REPO,
                        env=env,
                        capture_output=True,
                        text=True,
                        check=False)
  if proc.returncode:
    raise SystemExit(f"{module} {' '.join(flags)}\n{proc.stderr[-3000:]}")
  return proc.stderr


def fill(path, seq):
  import numpy as np  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  spec = {"input_mask": tf.io.FixedLenFeature([seq], tf.int64)}
  masks = [
      tf.io.parse_single_example(r, spec)["input_mask"].numpy()
      for r in tf.data.TFRecordDataset(path)
  ]
  return float(np.mean(masks)), len(masks)


def main():
  args = parse_args()
  w = args.work_dir
  os.makedirs(w, exist_ok=True)
  with open(args.corpus, "rb") as f:
    text = f.read()
  end = text.find(b"\n\n", int(args.train_mb * 2**20))
  with open(os.path.join(w, "train.txt"), "wb") as f:
    f.write(text[:len(text) if end < 0 else end + 2])
  config = os.path.join(w, "bert_config.json")
  with open(config, "w", encoding="utf-8") as f:
    json.dump(CONFIG, f)
  results = {}
  baseline = ["--cross_document=True"] if args.cross_document else []
  for name, flags in (("sentences", baseline), ("tokens", ["--packing=tokens"])):
    records = os.path.join(w, f"{name}.tfrecord")
    run(args, "data_prep.create_pretraining_data", [
        f"--input_file={w}/train.txt", f"--output_file={records}", f"--vocab_file={args.vocab}",
        "--do_lower_case=True", "--next_sentence=False", "--masking=none", "--dupe_factor=1",
        f"--max_seq_length={args.seq}", "--num_workers=2"
    ] + flags)
    mean_fill, count = fill(records, args.seq)
    results[name] = dict(fill=mean_fill, records=count, rounds=[], examples_rounds=[])
  for round_ in range(args.rounds):  # interleaved, so a slow spell of the machine hits both
    for name, r in results.items():
      out = f"{w}/out_{name}"
      shutil.rmtree(out, ignore_errors=True)  # else the run would resume the last one
      log = run(args, "official_bert.run_pretraining", [
          f"--input_file={w}/{name}.tfrecord", f"--bert_config_file={config}",
          f"--output_dir={out}", "--do_train", "--next_sentence=False", "--dynamic_masking",
          f"--vocab_file={args.vocab}", f"--max_seq_length={args.seq}",
          "--max_predictions_per_seq=20", f"--train_batch_size={args.batch}",
          f"--num_train_steps={args.steps}", "--steps_per_loop=10", "--learning_rate=1e-4",
          f"--save_checkpoints_steps={args.steps}"
      ])
      rates = [float(x) for x in re.findall(r"([\d.]+) real tokens/s", log)][1:]
      examples = [float(x) for x in re.findall(r"([\d.]+) examples/s", log)][1:]
      r["rounds"].append(statistics.median(rates))
      r["examples_rounds"].append(statistics.median(examples))
      print(f"round {round_ + 1}", name, json.dumps(r), flush=True)
  for r in results.values():
    r["tokens_per_s"] = statistics.median(r["rounds"])
    r["examples_per_s"] = statistics.median(r["examples_rounds"])
  ratio = results["tokens"]["tokens_per_s"] / results["sentences"]["tokens_per_s"]
  lines = [
      f"\n### MLM-only records by sentences and by tokens ({datetime.date.today()}, "
      f"{machine.cpu_model()}, {args.threads} threads)\n",
      f"`python bench/bench_pretraining_packing.py --train_mb={args.train_mb} "
      f"--steps={args.steps} --rounds={args.rounds} --seq={args.seq}"
      f"{' --cross_document' if args.cross_document else ''}`"
      f" (batch {args.batch}, a MiniLM-shaped model from random weights)\n",
      "| packing | records | fill (mean input_mask) | real tokens/s, median (per round) "
      "| examples/s |", "|---|---|---|---|---|"
  ]
  for name, r in results.items():
    lines.append(f"| {name} | {r['records']} | {r['fill']:.3f} | {r['tokens_per_s']:.0f} "
                 f"({', '.join(f'{x:.0f}' for x in r['rounds'])}) | {r['examples_per_s']:.1f} |")
  lines.append(f"\ntokens / sentences, real tokens/s: {ratio:.2f}x\n")
  table = "\n".join(lines) + "\n"
  print(table)
  if args.out:
    with open(args.out, "a", encoding="utf-8") as f:
      f.write(table)


if __name__ == "__main__":
  main()
