"""The Python API's default recipe on small data: does `fit(epochs=1)` learn?

MiniLM (`ob.packaged_model_path()`) on N SST-2 training sentences (a seeded sample of
../shared/data/glue/SST-2/train.tsv), scored on the whole dev set, `TextClassifier` at
sequence length 64 and batch size 32 (the API's default), one epoch, for each learning rate
and seed given; prints dev accuracy and the share of dev predictions in the most frequent
class (1.0: a majority-class model). Resumable: each finished run is a line of --out.

  python bench/bench_api_small_data.py --learning_rates=5e-5,1e-4,2e-4 --seeds=0,1,2
"""

import argparse
import csv
import datetime
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from bench import machine  # noqa: E402

SST2 = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..",
                    "shared", "data", "glue", "SST-2")


def read_tsv(path):
  with open(path, encoding="utf-8") as f:
    rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
  return [r[0] for r in rows[1:]], [r[1] for r in rows[1:]]


def run_one(texts, labels, dev, learning_rate, seed, epochs, batch_size):
  import keras  # pylint: disable=import-outside-toplevel

  import official_bert as ob  # pylint: disable=import-outside-toplevel
  keras.utils.set_random_seed(seed)
  clf = ob.TextClassifier.from_preset(ob.packaged_model_path(), labels=["0", "1"],
                                      sequence_length=64)
  if learning_rate:
    clf.compile(learning_rate=learning_rate)
  start = time.time()
  clf.fit(texts, labels, batch_size=batch_size, epochs=epochs, seed=seed, verbose=0)
  seconds = time.time() - start
  predicted = clf.predict_labels(dev[0])
  accuracy = float(np.mean([p == y for p, y in zip(predicted, dev[1])]))
  majority = max(predicted.count(c) for c in set(predicted)) / len(predicted)
  return dict(accuracy=accuracy, majority_share=majority, fit_seconds=seconds)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--num_train", type=int, default=1000)
  parser.add_argument("--learning_rates", default="5e-5,1e-4,2e-4",
                      help="comma-separated; 0 = the API's default compile()")
  parser.add_argument("--seeds", default="0,1,2")
  parser.add_argument("--epochs", type=int, default=1)
  parser.add_argument("--batch_size", type=int, default=32)
  parser.add_argument("--out", default="build/bench_api_small_data.jsonl")
  args = parser.parse_args()
  texts, labels = read_tsv(os.path.join(SST2, "train.tsv"))
  pick = np.random.default_rng(0).permutation(len(texts))[:args.num_train]
  texts, labels = [texts[i] for i in pick], [labels[i] for i in pick]
  dev = read_tsv(os.path.join(SST2, "dev.tsv"))
  done = {}
  if os.path.exists(args.out):
    with open(args.out) as f:
      for line in f:
        row = json.loads(line)
        done[(row["learning_rate"], row["seed"], row["epochs"], row["batch_size"],
              row["num_train"])] = row
  os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
  for lr in [float(v) for v in args.learning_rates.split(",")]:
    for seed in [int(v) for v in args.seeds.split(",")]:
      key = (lr, seed, args.epochs, args.batch_size, args.num_train)
      if key in done:
        continue
      row = dict(learning_rate=lr, seed=seed, epochs=args.epochs, batch_size=args.batch_size,
                 num_train=args.num_train, cpu=machine.cpu_model(),
                 date=datetime.date.today().isoformat(),
                 **run_one(texts, labels, dev, lr, seed, args.epochs, args.batch_size))
      print(json.dumps(row), flush=True)
      with open(args.out, "a") as f:
        f.write(json.dumps(row) + "\n")
      done[key] = row
  print("\n| learning rate | epochs | mean dev accuracy (sd) | majority-class runs |")
  print("|---|---|---|---|")
  for lr in sorted({k[0] for k in done}):
    rows = [r for k, r in done.items() if k[0] == lr and k[2:] == (args.epochs,
                                                                   args.batch_size,
                                                                   args.num_train)]
    if not rows:
      continue
    accs = [r["accuracy"] for r in rows]
    sd = statistics.stdev(accs) if len(accs) > 1 else 0.0
    stuck = sum(r["majority_share"] > 0.95 for r in rows)
    print(f"| {lr:g} | {args.epochs} | {statistics.mean(accs):.3f} ({sd:.3f}) | "
          f"{stuck}/{len(rows)} |")


if __name__ == "__main__":
  main()
