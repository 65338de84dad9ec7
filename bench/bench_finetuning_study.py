r"""Fine-tuning study (issue 37): ours, transformers and keras-hub on six tasks, resumable.

The packaged MiniLM folder (all-MiniLM-L6-v2, Hugging Face layout) fine-tuned on SST-2, MRPC,
RTE, CoLA, STS-B and CoNLL-2003 NER for 1 and 3 epochs, several seeds, every implementation
with the same budget in a cell: learning rate --learning_rate (5e-5), batch 32, the same
training subset, the same dev set, the same sequence length per task (SST-2, CoLA, STS-B and
NER 64; MRPC and RTE 128), 2 threads each.

Data (written once under --work_dir/data, seeded with RandomState(0), the same for every
seed and implementation):
  SST-2   the issue-21 slice, `bench_finetuning_parity.write_split`: 2,000 training sentences
          and 600 others as dev, both from SST-2's train.tsv (--sst2_num_train/--sst2_num_dev)
  others  a random --num_train (1,000; at most 2,500) examples of the task's train file (NER:
          sentences of train.txt) and its dev file (NER: valid.txt) capped at --max_dev (500;
          MRPC's 408 and RTE's 277 are taken whole)

Implementations (--impls):
  ours_original           python -m official_bert.run_classifier (run_ner for NER), our venv,
                          no recipe flag (the default, the original's recipe): own .jsonl
                          files (--train_file/--test_file, --label_names; STS-B
                          --problem_type=regression); NER a CoNLL --data_dir (train.txt,
                          valid.txt, test.txt = the dev subset). --do_predict on the dev
                          subset gives the predictions (test_predictions.*), no --do_eval.
  ours_huggingface        the same with --recipe=huggingface
  ours_original_restarts  the same as ours_original with --num_restarts=3 --do_eval
                          --best_metric=...: seeds seed, seed+1, seed+2 (overlapping the next
                          seeds' runs), the best restart on the dev subset predicts, chosen by
                          the table's metric (accuracy, MRPC f1_1, STS-B spearman, NER
                          entity_f1) except CoLA's, macro-F1 (own files score no Matthews
                          correlation). It is selected on the very dev set it is scored on, so
                          it reads optimistic; it trains 3 times.
  ours_original_restarts_heldout
                          the same restarts, chosen on a choice set apart from the scored
                          one: --max_dev other examples of the task's train file (NER:
                          train.txt's sentences), outside the training subset (the next ones
                          of the same seeded permutation; `choice_files`). Its dev scores are
                          then what restarts give on unseen data. Not for SST-2.
  transformers            PyTorch BertForSequenceClassification (num_labels=1 for STS-B: MSE)
                          or BertForTokenClassification, Hugging Face's recipe as in
                          bench_finetuning_parity.run_transformers: torch AdamW (eps 1e-6,
                          weight decay 0.01 not on LayerNorm/bias), 10% warmup then
                          get_linear_schedule_with_warmup, clipping at 1.0, the last partial
                          batch kept, padding to the task's length.
  keras_hub               keras-hub 0.32, as bench_finetuning_parity.run_keras_hub: keras
                          AdamW(PolynomialDecay(lr -> 0 over ceil(n / 32) * epochs steps),
                          weight_decay=0.01, global_clipnorm=1.0), fit(batch_size=32).
                          Classification: BertTextClassifier.from_preset(num_classes=labels),
                          preprocessor.sequence_length set, pairs given as (a, b);
                          STS-B: the same with num_classes=1 and MeanSquaredError. NER:
                          BertBackbone.from_preset -> sequence_output -> Dropout(0.1) ->
                          Dense(9 tags, TruncatedNormal(0.02)), a cross-entropy averaged over
                          the first WordPiece of each word (the other positions masked), the
                          words tokenized one by one with keras-hub's BertTokenizer.
                          Unlike the others: no warmup, weight decay on every weight
                          (LayerNorm and biases too), and its tokenizer from the Hugging Face
                          folder lower-cases without stripping accents ("Müller" -> [UNK],
                          "muller" for ours and transformers).

NER for the peers follows run_ner's features: a word's tag on its first WordPiece, a sentence
longer than seq - 2 pieces cut into whole-word windows ([CLS] words [SEP] each), so every dev
word gets a prediction. keras-hub and transformers each run in a fresh process of the
benchmark's own environment (--peer_python; see bench_finetuning_parity.py for how it is made).

Scores, one set of formulas for every implementation, computed here from each run's dev
predictions: accuracy (SST-2, RTE), F1 of label 1 and accuracy (MRPC), Matthews correlation
(CoLA), Spearman and Pearson (STS-B), entity F1 by conlleval's chunk rules (NER). A run
"stayed at the majority class" if >= 95% of its dev predictions are one class
(classification), its predictions' sd is < 0.05 * the labels' sd or Spearman is NaN (STS-B),
or it predicts no entity or entity F1 < 0.05 (NER).

Throughput: training examples per second over the whole training, the first step's graph
building included: ours from its progress lines (steps * 32 / the loops' seconds; with
restarts all three trainings; ours trims each batch's padding, the peers pad to the task's
length), the peers from their training loop / fit. `seconds` is the whole run's wall time
(process start, loading, features, training, prediction).

Resumable: one JSON line per finished run in --results, key (task, epochs, impl, seed,
learning_rate, num_train); a rerun skips the keys there (--retry_errors reruns failed ones).
Runs go epochs (outermost), seed, task, implementation, so an interrupted study has the most
complete table. --table_only writes the table from --results without running anything; the
dev majority-class rates in its header are those of the command's own dev sets.

  .venv/bin/python bench/bench_finetuning_study.py --table=bench/finetuning_study.md

(--ours_repo runs another checkout's official_bert, e.g. a `git archive` of a commit, with
the same venv.)
"""

import argparse
import datetime
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

_BENCH = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.dirname(_BENCH)
_DATA = os.path.join(os.path.dirname(_REPO), "shared", "data")
sys.path.insert(0, _BENCH)

import machine  # noqa: E402  # bench/machine.py, beside this script

BATCH, THREADS, PREDICT_BATCH = 32, 2, 64
MAX_NUM_TRAIN = 2500
IMPLS = ("ours_original", "ours_huggingface", "ours_original_restarts",
         "ours_original_restarts_heldout", "transformers", "keras_hub")
OURS_FLAGS = {"ours_original": [], "ours_huggingface": ["--recipe=huggingface"],
              "ours_original_restarts": ["--num_restarts=3", "--do_eval",
                                         f"--eval_batch_size={PREDICT_BATCH}"]}
OURS_FLAGS["ours_original_restarts_heldout"] = OURS_FLAGS["ours_original_restarts"]
CONLL_TAGS = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]
# kind: single / pair (classification), regression (pair), tagging. metric: the table's.
# best: the restarts' --best_metric, among the scores our own-files / NER evaluation writes
# (own files have no Matthews correlation: CoLA selects on macro-F1).
TASKS = {
    "SST-2": dict(kind="single", seq=64, labels=["0", "1"], metric="accuracy", best="accuracy"),
    "MRPC": dict(kind="pair", seq=128, labels=["0", "1"], metric="f1", best="f1_1"),
    "RTE": dict(kind="pair", seq=128, labels=["entailment", "not_entailment"],
                metric="accuracy", best="accuracy"),
    "CoLA": dict(kind="single", seq=64, labels=["0", "1"], metric="matthews_corr",
                 best="macro_f1"),
    "STS-B": dict(kind="regression", seq=64, labels=None, metric="spearman", best="spearman"),
    "NER": dict(kind="tagging", seq=64, labels=CONLL_TAGS, metric="entity_f1",
                best="entity_f1"),
}
KEY_FIELDS = ("task", "epochs", "impl", "seed", "learning_rate", "num_train")


def parse_args(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--data", default=_DATA, help="shared/data (glue/, conll2003/)")
  p.add_argument("--tasks", default=",".join(TASKS))
  p.add_argument("--epochs", default="1,3")
  p.add_argument("--seeds", default="1,2,3")
  p.add_argument("--impls", default=",".join(IMPLS))
  p.add_argument("--num_train", type=int, default=1000,
                 help=f"training examples (NER: sentences) of every task but SST-2; at most "
                 f"{MAX_NUM_TRAIN}")
  p.add_argument("--max_dev", type=int, default=500, help="dev examples at most (seeded)")
  p.add_argument("--sst2_num_train", type=int, default=2000, help="the issue-21 slice's")
  p.add_argument("--sst2_num_dev", type=int, default=600, help="the issue-21 slice's")
  p.add_argument("--learning_rate", type=float, default=5e-5)
  p.add_argument("--work_dir", default="/tmp/bench_finetuning_study",
                 help="data subsets, run folders (deleted after scoring), predictions")
  p.add_argument("--results", default=os.path.join(_BENCH, "finetuning_study.jsonl"))
  p.add_argument("--table", default=None, help="also write the markdown table here")
  p.add_argument("--table_only", action="store_true",
                 help="print (and --table: write) the table of --results; run nothing")
  p.add_argument("--retry_errors", action="store_true", help="rerun keys recorded as failed")
  p.add_argument("--keep_run_dirs", action="store_true",
                 help="keep each run's output folder (checkpoints: hundreds of MB)")
  p.add_argument("--ours_python", default=os.path.join(_REPO, ".venv", "bin", "python"))
  p.add_argument("--ours_repo", default=_REPO,
                 help="the checkout whose official_bert runs (its root is the cwd)")
  p.add_argument("--peer_python", default="/tmp/peer/bin/python",
                 help="the environment with torch, transformers and keras-hub")
  p.add_argument("--model_dir", default=None, help="default: the packaged MiniLM folder")
  p.add_argument("--run_timeout", type=int, default=4 * 3600,
                 help="seconds one run may take before it is stopped and recorded as failed")
  p.add_argument("--child", default=None, help=argparse.SUPPRESS)
  args = p.parse_args(argv)
  if not 0 < args.num_train <= MAX_NUM_TRAIN:
    p.error(f"--num_train must be in 1..{MAX_NUM_TRAIN}")
  for name in args.tasks.split(","):
    if name not in TASKS:
      p.error(f"--tasks: {name} is not one of {', '.join(TASKS)}")
  for name in args.impls.split(","):
    if name not in IMPLS:
      p.error(f"--impls: {name} is not one of {', '.join(IMPLS)}")
  return args


# ---------------------------------------------------------------------------------------------
# Data


def _read_tsv(path, header=True):
  with open(path, encoding="utf-8") as f:
    rows = [line.rstrip("\n").split("\t") for line in f]
  return rows[1:] if header else rows


def _read_conll(path):
  """[(words, tags)] of a CoNLL column file, -DOCSTART- skipped."""
  sentences, words, tags = [], [], []
  with open(path, encoding="utf-8") as f:
    for line in list(f) + [""]:
      parts = line.split()
      if not parts or parts[0] == "-DOCSTART-":
        if words:
          sentences.append((words, tags))
        words, tags = [], []
        continue
      words.append(parts[0])
      tags.append(parts[-1])
  return sentences


def _subset(rows, n, seed=0, skip=0):
  """n rows of a seeded permutation, after its first `skip` (those of another subset)."""
  import numpy as np
  if n >= len(rows) and not skip:
    return list(rows)
  return [rows[i] for i in np.random.RandomState(seed).permutation(len(rows))[skip:skip + n]]


def _write_jsonl(path, rows):
  with open(path, "w", encoding="utf-8") as f:
    for a, b, label in rows:
      record = {"text": a, "label": label}
      if b is not None:
        record["text_b"] = b
      f.write(json.dumps(record, ensure_ascii=False) + "\n")


def _write_conll(path, sentences):
  with open(path, "w", encoding="utf-8") as f:
    f.write("".join("".join(f"{w} {t}\n" for w, t in zip(words, tags)) + "\n"
                    for words, tags in sentences))


def choice_files(args, data):
  """`ours_original_restarts_heldout`'s choice set, written once beside the task's data:
  --max_dev training examples after the training subset in the same permutation (disjoint
  from it and from the dev set). Returns choice.jsonl, or for NER a CoNLL folder whose
  valid.txt is the choice set and test.txt the dev subset."""
  task = data["task"]
  if task == "SST-2":
    raise ValueError("ours_original_restarts_heldout: not for SST-2 (its slice is fixed)")
  if task == "NER":
    folder = os.path.join(data["dir"], "conll_choice")
    if not os.path.exists(os.path.join(folder, "test.txt")):
      train = _read_conll(os.path.join(args.data, "conll2003", "train.txt"))
      choice = _subset(train, args.max_dev, skip=data["num_train"])
      os.makedirs(folder, exist_ok=True)
      for name, sentences in (("train.txt", [tuple(s) for s in data["train"]]),
                              ("valid.txt", choice), ("test.txt", data["dev"])):
        _write_conll(os.path.join(folder, name + ".tmp"), sentences)
        os.replace(os.path.join(folder, name + ".tmp"), os.path.join(folder, name))
    return folder
  path = os.path.join(data["dir"], "choice.jsonl")
  if not os.path.exists(path):
    train = _glue_examples(args.data, task, "train")
    _write_jsonl(path + ".tmp", _subset(train, args.max_dev, skip=data["num_train"]))
    os.replace(path + ".tmp", path)
  return path


def _glue_examples(data_dir, task, split):
  """[(text_a, text_b or None, label)] of a GLUE file."""
  path = os.path.join(data_dir, "glue", task, f"{split}.tsv")
  if task == "CoLA":
    return [(r[3], None, r[1]) for r in _read_tsv(path, header=False)]
  rows = _read_tsv(path)
  if task == "MRPC":
    return [(r[3], r[4], r[0]) for r in rows]
  if task == "RTE":
    return [(r[1], r[2], r[3]) for r in rows]
  if task == "STS-B":
    return [(r[7], r[8], float(r[9])) for r in rows]
  raise ValueError(task)


def prepare_task(args, task):
  """The task's subsets, written once: {"dir", "train", "dev", "num_train", ...}; files for
  ours (train.jsonl/dev.jsonl, NER conll/) and data.json for the peers and the scoring."""
  import bench_finetuning_parity  # SST-2's issue-21 slice, `write_split`
  spec = TASKS[task]
  if task == "SST-2":
    num_train, num_dev = args.sst2_num_train, args.sst2_num_dev
  else:
    num_train, num_dev = args.num_train, args.max_dev
  folder = os.path.join(args.work_dir, "data", f"{task}_n{num_train}_d{num_dev}")
  data_file = os.path.join(folder, "data.json")
  if os.path.exists(data_file):
    with open(data_file, encoding="utf-8") as f:
      return json.load(f)
  os.makedirs(folder, exist_ok=True)
  if task == "SST-2":
    _, splits = bench_finetuning_parity.write_split(args.data, folder, num_train, num_dev)
    train = [(s, None, label) for s, label in splits["train"]]
    dev = [(s, None, label) for s, label in splits["dev"]]
  elif task == "NER":
    conll = os.path.join(args.data, "conll2003")
    train = _subset(_read_conll(os.path.join(conll, "train.txt")), num_train)
    dev = _subset(_read_conll(os.path.join(conll, "valid.txt")), num_dev)
  else:
    train = _subset(_glue_examples(args.data, task, "train"), num_train)
    dev = _subset(_glue_examples(args.data, task, "dev"), num_dev)
  if len(train) < num_train:
    raise SystemExit(f"{task}: {len(train)} training examples, fewer than {num_train}")
  data = {"task": task, "dir": folder, "train": train, "dev": dev, "num_train": len(train),
          "num_dev": len(dev), "labels": spec["labels"], "kind": spec["kind"],
          "seq": spec["seq"]}
  if task == "NER":
    conll_dir = os.path.join(folder, "conll")
    os.makedirs(conll_dir, exist_ok=True)
    for name, sentences in (("train.txt", train), ("valid.txt", dev), ("test.txt", dev)):
      _write_conll(os.path.join(conll_dir, name), sentences)
  else:
    for name, rows in (("train", train), ("dev", dev)):
      _write_jsonl(os.path.join(folder, f"{name}.jsonl"), rows)
  with open(data_file, "w", encoding="utf-8") as f:
    json.dump(data, f)
  with open(data_file, encoding="utf-8") as f:  # the same types (lists) as a later load
    return json.load(f)


# ---------------------------------------------------------------------------------------------
# Scores (numpy only: the same formulas as official_bert/tasks/metrics.py)


def _average_ranks(x):
  import numpy as np
  x = np.asarray(x, np.float64)
  order = np.argsort(x, kind="mergesort")
  ranks = np.empty(len(x))
  ranks[order] = np.arange(len(x), dtype=np.float64)
  _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
  sums = np.bincount(inverse, weights=ranks)
  return (sums / counts)[inverse]


def _pearson(x, y):
  import numpy as np
  x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
  if len(x) < 2 or x.std() == 0 or y.std() == 0:
    return float("nan")
  return float(np.corrcoef(x, y)[0, 1])


def entities(tags):
  """{(type, start, end)} by conlleval's chunk rules (a chunk starts at B-X, or at I-X after
  O or another type; it ends where the next tag is not I- of its type)."""
  chunks, start, kind = set(), None, None
  for i, tag in enumerate(list(tags) + ["O"]):
    prefix, _, tag_type = tag.partition("-") if tag != "O" else ("O", "", "")
    if start is not None and (prefix != "I" or tag_type != kind):
      chunks.add((kind, start, i))
      start = None
    if prefix in ("B", "I") and start is None:
      start, kind = i, tag_type
  return chunks


def score(data, predictions):
  """(scores, stayed at the majority class) of dev predictions: class labels, scores (STS-B)
  or per sentence tag lists (NER)."""
  import numpy as np
  kind, task = data["kind"], data["task"]
  if kind == "tagging":
    gold = [tags for _, tags in data["dev"]]
    true = pred = hit = 0
    for g, p in zip(gold, predictions):
      g, p = entities(g), entities(p)
      true, pred, hit = true + len(g), pred + len(p), hit + len(g & p)
    precision = hit / pred if pred else 0.0
    recall = hit / true if true else 0.0
    f1 = 2 * precision * recall / (precision + recall) if hit else 0.0
    return ({"entity_f1": f1, "entity_precision": precision, "entity_recall": recall,
             "predicted_entities": pred}, pred == 0 or f1 < 0.05)
  gold = [label for _, _, label in data["dev"]]
  if kind == "regression":
    p, t = np.asarray(predictions, np.float64), np.asarray(gold, np.float64)
    spearman = _pearson(_average_ranks(p), _average_ranks(t))
    scores = {"spearman": spearman, "pearson": _pearson(p, t),
              "prediction_sd": float(p.std())}
    return scores, bool(math.isnan(spearman) or p.std() < 0.05 * t.std())
  p, t = np.asarray(predictions), np.asarray(gold)
  scores = {"accuracy": float(np.mean(p == t))}
  positive = data["labels"][1]
  if task == "MRPC":
    tp = np.sum((p == positive) & (t == positive))
    fp, fn = np.sum((p == positive) & (t != positive)), np.sum((p != positive) & (t == positive))
    scores["f1"] = float(2 * tp / (2 * tp + fp + fn)) if tp else 0.0
  if task == "CoLA":
    pb, tb = p == positive, t == positive
    tp, tn = np.sum(pb & tb), np.sum(~pb & ~tb)
    fp, fn = np.sum(pb & ~tb), np.sum(~pb & tb)
    denominator = math.sqrt(float((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn)))
    scores["matthews_corr"] = float(tp * tn - fp * fn) / denominator if denominator else 0.0
  _, counts = np.unique(p, return_counts=True)
  top = counts.max() / len(p)
  scores["top_class_share"] = float(top)
  return scores, bool(top >= 0.95)


def majority_rate(data):
  """The dev majority-class rate (NER: the share of O words; STS-B: None)."""
  import collections
  if data["kind"] == "regression":
    return None
  if data["kind"] == "tagging":
    tags = [t for _, tags in data["dev"] for t in tags]
    return tags.count("O") / len(tags)
  counts = collections.Counter(label for _, _, label in data["dev"])
  return max(counts.values()) / len(data["dev"])


# ---------------------------------------------------------------------------------------------
# Runs


def _ours_rate(stderr):
  """Training examples/s over all of a run's progress loops (restarts: every training)."""
  examples = seconds = 0.0
  previous = 0
  for step, rate in re.findall(r"step (\d+)/\d+ \|.*?\| ([\d.]+) examples/s", stderr):
    step = int(step)
    done = step - previous if step > previous else step  # a restart starts again
    previous = step
    examples += done * BATCH
    seconds += done * BATCH / float(rate) if float(rate) else 0.0
  return examples / seconds if seconds else None


def run_ours(args, data, impl, seed, epochs, out):
  task = data["task"]
  common = [f"--init_checkpoint={args.model_dir}", "--do_lower_case=True",
            f"--max_seq_length={data['seq']}", f"--train_batch_size={BATCH}",
            f"--learning_rate={args.learning_rate}", f"--num_train_epochs={epochs}",
            f"--random_seed={seed}", "--do_train", "--do_predict",
            f"--predict_batch_size={PREDICT_BATCH}", f"--output_dir={out}"]
  heldout = impl == "ours_original_restarts_heldout"
  if task == "NER":
    conll = choice_files(args, data) if heldout else os.path.join(data["dir"], "conll")
    cmd = ["-m", "official_bert.run_ner", f"--data_dir={conll}"]
  else:
    dev = os.path.join(data["dir"], "dev.jsonl")
    choice = choice_files(args, data) if heldout else dev
    cmd = ["-m", "official_bert.run_classifier",
           f"--train_file={os.path.join(data['dir'], 'train.jsonl')}", f"--dev_file={choice}",
           f"--test_file={dev}", "--text_column=text", "--label_column=label"]
    if data["kind"] != "single":
      cmd.append("--text_b_column=text_b")
    if data["kind"] == "regression":
      cmd.append("--problem_type=regression")
    else:
      cmd.append(f"--label_names={','.join(data['labels'])}")
  cmd = [args.ours_python] + cmd + common + OURS_FLAGS[impl]
  if "--do_eval" in cmd:
    cmd.append(f"--best_metric={TASKS[task]['best']}")
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_NUM_INTRAOP_THREADS=str(THREADS),
             TF_NUM_INTEROP_THREADS=str(THREADS), PYTHONPATH=args.ours_repo)
  proc = _subprocess(args, cmd, args.ours_repo, env)
  if task == "NER":
    blocks = [[line.split() for line in block.splitlines()]  # `word gold predicted`
              for block in _read(os.path.join(out, "test_predictions.txt")).split("\n\n")
              if block.strip()]
    predictions = [[parts[-1] for parts in block] for block in blocks]
    words = [[parts[0] for parts in block] for block in blocks]
    if words != [w for w, _ in data["dev"]]:
      raise RunError(" ".join(cmd), "test_predictions.txt: not the dev subset's words")
  else:
    lines = _read(os.path.join(out, "test_predictions.tsv")).splitlines()
    column = lines[0].split("\t").index("prediction")
    values = [line.split("\t")[column] for line in lines[1:]]
    predictions = [float(v) for v in values] if data["kind"] == "regression" else values
  extra = {}
  eval_file = os.path.join(out, "eval_results.txt")
  if os.path.exists(eval_file):  # restarts: the best restart's own dev scores, to compare
    extra["own_eval"] = {k: _number(v) for k, v in (line.strip().split(" = ", 1)
                                                    for line in _read(eval_file).splitlines()
                                                    if " = " in line)}
  return predictions, _ours_rate(proc.stderr), extra


def _subprocess(args, cmd, cwd, env):
  """The finished process; RunError with its stderr if it failed or ran past --run_timeout."""
  try:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False,
                          timeout=args.run_timeout)
  except subprocess.TimeoutExpired as e:
    stderr = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else e.stderr
    raise RunError(" ".join(cmd), f"{stderr or ''}\ntimed out after {args.run_timeout} s") from e
  if proc.returncode:
    raise RunError(" ".join(cmd), proc.stderr)
  return proc


def _number(text):
  try:
    return float(text)
  except ValueError:
    return text


def _read(path):
  with open(path, encoding="utf-8") as f:
    return f.read()


class RunError(Exception):

  def __init__(self, command, stderr):
    super().__init__(command)
    self.command, self.stderr = command, stderr


def run_peer(args, data, impl, seed, epochs, out):
  """keras-hub or transformers in a fresh process of --peer_python (this script, --child)."""
  os.makedirs(out, exist_ok=True)
  result = os.path.join(out, "result.json")
  spec = {"impl": impl, "data": os.path.join(data["dir"], "data.json"), "seed": seed,
          "epochs": epochs, "learning_rate": args.learning_rate, "model_dir": args.model_dir,
          "out": result}
  cmd = [args.peer_python, os.path.abspath(__file__), f"--child={json.dumps(spec)}"]
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_NUM_INTRAOP_THREADS=str(THREADS),
             TF_NUM_INTEROP_THREADS=str(THREADS), KERAS_BACKEND="tensorflow",
             TOKENIZERS_PARALLELISM="false")
  _subprocess(args, cmd, _REPO, env)
  with open(result, encoding="utf-8") as f:
    result = json.load(f)
  return result["predictions"], result["rate"], {}


def child(spec):
  with open(spec["data"], encoding="utf-8") as f:
    data = json.load(f)
  run = {"transformers": child_transformers, "keras_hub": child_keras_hub}[spec["impl"]]
  predictions, rate = run(spec, data)
  with open(spec["out"], "w", encoding="utf-8") as f:
    json.dump({"predictions": predictions, "rate": rate}, f)


def tag_rows(sentences, pieces, seq, cls_id, sep_id, pad_id, labels):
  """NER rows as run_ner builds them: (ids, mask, label ids with -100 off first pieces,
  spans (sentence, first word, end word)); `pieces`: per sentence, per word, its ids."""
  import numpy as np
  if _REPO not in sys.path:
    sys.path.insert(0, _REPO)
  from data_prep.tagging import features as tagging_features  # run_ner's windows
  label_map = {label: i for i, label in enumerate(labels)}
  rows, spans = [], []
  for index, ((_, tags), words) in enumerate(zip(sentences, pieces)):
    for first, end in tagging_features.windows(words, seq - 2):
      ids, row_labels = [cls_id], [-100]
      for w in range(first, end):
        kept = words[w][:seq - 1 - len(ids)]
        ids += kept
        row_labels += [label_map[tags[w]]] + [-100] * (len(kept) - 1)
      ids.append(sep_id)
      row_labels.append(-100)
      rows.append((ids, row_labels))
      spans.append((index, first, end))
  ids = np.full([len(rows), seq], pad_id, np.int64)
  mask = np.zeros([len(rows), seq], np.int64)
  label_ids = np.full([len(rows), seq], -100, np.int64)
  for i, (row_ids, row_labels) in enumerate(rows):
    ids[i, :len(row_ids)], mask[i, :len(row_ids)] = row_ids, 1
    label_ids[i, :len(row_ids)] = row_labels
  return ids, mask, label_ids, spans


def tags_of(logits, label_ids, spans, sentences, labels):
  """Per dev sentence, each word's predicted tag (at its first piece)."""
  import numpy as np
  tags = [[None] * len(words) for words, _ in sentences]
  best = np.argmax(logits, -1)
  for row, (index, first, end) in enumerate(spans):
    positions = np.nonzero(label_ids[row] != -100)[0]
    for word, position in zip(range(first, end), positions):
      tags[index][word] = labels[int(best[row, position])]
  if any(t is None for sentence in tags for t in sentence):
    raise ValueError("a word without a prediction")
  return tags


def _pieces(tokenize, sentences, unk_id):
  flat = tokenize([w for words, _ in sentences for w in words])
  out, start = [], 0
  for words, _ in sentences:
    out.append([list(p) or [unk_id] for p in flat[start:start + len(words)]])
    start += len(words)
  return out


def child_transformers(spec, data):
  import numpy as np
  import torch
  import transformers
  torch.set_num_threads(THREADS)
  seed, epochs, lr, seq = spec["seed"], spec["epochs"], spec["learning_rate"], data["seq"]
  transformers.set_seed(seed)
  model_dir, kind, labels = spec["model_dir"], data["kind"], data["labels"]
  tokenizer = transformers.BertTokenizerFast(os.path.join(model_dir, "vocab.txt"),
                                             do_lower_case=True)
  if kind == "tagging":
    model = transformers.BertForTokenClassification.from_pretrained(model_dir,
                                                                     num_labels=len(labels))

    def encode(sentences):
      pieces = _pieces(lambda words: tokenizer(words, add_special_tokens=False)["input_ids"],
                       sentences, tokenizer.unk_token_id)
      ids, mask, label_ids, spans = tag_rows(sentences, pieces, seq, tokenizer.cls_token_id,
                                             tokenizer.sep_token_id, tokenizer.pad_token_id,
                                             labels)
      return (torch.tensor(ids), torch.tensor(mask), torch.zeros_like(torch.tensor(ids)),
              torch.tensor(label_ids)), spans
  else:
    model = transformers.BertForSequenceClassification.from_pretrained(
        model_dir, num_labels=1 if kind == "regression" else len(labels))

    def encode(rows):
      texts_b = [b for _, b, _ in rows] if kind != "single" else None
      enc = tokenizer([a for a, _, _ in rows], texts_b, padding="max_length", truncation=True,
                      max_length=seq, return_tensors="pt")
      y = (torch.tensor([float(label) for _, _, label in rows]) if kind == "regression" else
           torch.tensor([labels.index(label) for _, _, label in rows]))
      return (enc["input_ids"], enc["attention_mask"], enc["token_type_ids"], y), None
  train, _ = encode(data["train"])
  dataset = torch.utils.data.TensorDataset(*train)
  loader = torch.utils.data.DataLoader(dataset, batch_size=BATCH, shuffle=True,
                                       generator=torch.Generator().manual_seed(seed))
  steps = len(loader) * epochs
  import bench_finetuning_parity  # the transformers side's optimizer and loop
  optimizer = bench_finetuning_parity.torch_adamw(model, lr)
  scheduler = transformers.get_linear_schedule_with_warmup(optimizer, int(0.1 * steps), steps)
  rate = len(dataset) * epochs / bench_finetuning_parity.train_torch(model, loader, epochs,
                                                                     optimizer, scheduler)
  model.eval()
  dev, spans = encode(data["dev"])
  logits = []
  with torch.no_grad():
    for i in range(0, len(dev[0]), PREDICT_BATCH):
      ids, mask, types = (t[i:i + PREDICT_BATCH] for t in dev[:3])
      logits.append(model(input_ids=ids, attention_mask=mask, token_type_ids=types)
                    .logits.numpy())
  logits = np.concatenate(logits)
  if kind == "tagging":
    return tags_of(logits, dev[3].numpy(), spans, data["dev"], labels), rate
  if kind == "regression":
    return [float(v) for v in logits[:, 0]], rate
  return [labels[i] for i in np.argmax(logits, -1)], rate


def child_keras_hub(spec, data):
  import keras
  import keras_hub
  import numpy as np
  seed, epochs, lr, seq = spec["seed"], spec["epochs"], spec["learning_rate"], data["seq"]
  model_dir, kind, labels = spec["model_dir"], data["kind"], data["labels"]
  keras.utils.set_random_seed(seed)

  def optimizer(n):  # linear decay to 0 over the batches of n examples (NER: windows)
    schedule = keras.optimizers.schedules.PolynomialDecay(lr, math.ceil(n / BATCH) * epochs, 0.0)
    return keras.optimizers.AdamW(schedule, weight_decay=0.01, global_clipnorm=1.0)
  if kind == "tagging":
    tokenizer = keras_hub.models.BertTokenizer.from_preset(model_dir)
    ids_of = tokenizer.token_to_id

    def encode(sentences):
      def tokenize(words):  # keras-hub 0.32 gives a list of lists for a list of strings
        ids = tokenizer(words)
        return ids.to_list() if hasattr(ids, "to_list") else ids

      pieces = _pieces(tokenize, sentences, ids_of("[UNK]"))
      ids, mask, label_ids, spans = tag_rows(sentences, pieces, seq, ids_of("[CLS]"),
                                             ids_of("[SEP]"), ids_of("[PAD]"), labels)
      return {"token_ids": ids, "segment_ids": np.zeros_like(ids),
              "padding_mask": mask.astype(bool)}, label_ids, spans

    backbone = keras_hub.models.BertBackbone.from_preset(model_dir)
    inputs = {"token_ids": keras.Input((seq,), dtype="int32", name="token_ids"),
              "segment_ids": keras.Input((seq,), dtype="int32", name="segment_ids"),
              "padding_mask": keras.Input((seq,), dtype="bool", name="padding_mask")}
    hidden = keras.layers.Dropout(0.1)(backbone(inputs)["sequence_output"])
    logits = keras.layers.Dense(len(labels), kernel_initializer=keras.initializers.TruncatedNormal(
        stddev=0.02))(hidden)
    model = keras.Model(inputs, logits)

    def first_piece_loss(y_true, y_pred):
      y_true = keras.ops.cast(y_true, "int32")
      mask = keras.ops.cast(y_true >= 0, "float32")
      losses = keras.losses.sparse_categorical_crossentropy(keras.ops.maximum(y_true, 0),
                                                            y_pred, from_logits=True)
      return keras.ops.sum(losses * mask) / keras.ops.maximum(keras.ops.sum(mask), 1.0)

    x, y, _ = encode(data["train"])
    n = len(y)
    model.compile(optimizer=optimizer(n), loss=first_piece_loss)
  else:
    model = keras_hub.models.BertTextClassifier.from_preset(
        model_dir, num_classes=1 if kind == "regression" else len(labels))
    model.preprocessor.sequence_length = seq

    def encode(rows):
      a = np.array([r[0] for r in rows])
      return a if kind == "single" else (a, np.array([r[1] for r in rows]))

    loss = (keras.losses.MeanSquaredError() if kind == "regression" else
            keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x = encode(data["train"])
    y = (np.array([[float(r[2])] for r in data["train"]], np.float32) if kind == "regression"
         else np.array([labels.index(r[2]) for r in data["train"]]))
    n = len(y)
    model.compile(optimizer=optimizer(n), loss=loss)
  start = time.time()
  model.fit(x, y, batch_size=BATCH, epochs=epochs, verbose=0)
  rate = n * epochs / (time.time() - start)
  if kind == "tagging":
    dev_x, dev_labels, spans = encode(data["dev"])
    logits = model.predict(dev_x, batch_size=PREDICT_BATCH, verbose=0)
    return tags_of(logits, dev_labels, spans, data["dev"], labels), rate
  logits = model.predict(encode(data["dev"]), batch_size=PREDICT_BATCH, verbose=0)
  if kind == "regression":
    return [float(v) for v in np.asarray(logits)[:, 0]], rate
  return [labels[i] for i in np.argmax(logits, -1)], rate


# ---------------------------------------------------------------------------------------------
# Results and the table


def key_of(record):
  return tuple(record[k] for k in KEY_FIELDS)


def load_results(path):
  """{key: the last record of that key}."""
  records = {}
  if os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      for line in f:
        if line.strip():
          record = json.loads(line)
          records[key_of(record)] = record
  return records


def _fmt(value):
  return "nan" if value is None or math.isnan(value) else f"{value:.3f}"


def make_table(records, majority_rates):
  """The markdown table of every record in the results file."""
  records = list(records.values())
  seeds = sorted({r["seed"] for r in records})
  commands = sorted({r["command"] for r in records if "command" in r})
  machines = sorted({r["machine"] for r in records if "machine" in r})
  dates = sorted(r["date"] for r in records if "date" in r)
  lines = [f"Fine-tuning study (issue 37), `bench/bench_finetuning_study.py`: {len(records)} "
           f"runs" + (f", {dates[0]} to {dates[-1]}" if dates else "") + ".", ""]
  lines += [f"- command: `{c}`" for c in commands]
  lines += [f"- machine: {m}" for m in machines]
  if majority_rates:
    lines += ["- dev majority-class rate: " + ", ".join(
        f"{task} {rate:.3f}" if rate is not None else f"{task} n/a (regression)"
        for task, rate in majority_rates.items())
              + (" (NER: the share of `O` words)" if "NER" in majority_rates else "")]
  lines += ["", "| task | train n | lr | epochs | implementation | metric | "
            + " | ".join(f"seed {s}" for s in seeds)
            + " | mean (sd) | at majority class | train examples/s (median) | other metrics "
            "(mean) |", "|---" * (len(seeds) + 10) + "|"]
  groups = {}
  for r in records:
    groups.setdefault((r["task"], r["num_train"], r["learning_rate"], r["epochs"], r["impl"]),
                      {})[r["seed"]] = r
  task_order, impl_order = list(TASKS), list(IMPLS)
  for group in sorted(groups, key=lambda g: (task_order.index(g[0]), g[1], g[2], g[3],
                                             impl_order.index(g[4]))):
    task, num_train, lr, epochs, impl = group
    runs = groups[group]
    metric = TASKS[task]["metric"]
    ok = [r for r in runs.values() if "scores" in r]
    values = [r["scores"][metric] for r in ok]
    finite = [v for v in values if v is not None and not math.isnan(v)]
    cells = []
    for s in seeds:
      r = runs.get(s)
      cells.append("–" if r is None else "error" if "scores" not in r else
                   _fmt(r["scores"][metric]))
    mean = (f"{statistics.mean(finite):.3f} ({statistics.stdev(finite):.3f})"
            if len(finite) > 1 else _fmt(finite[0]) if finite else "–")
    majority = f"{sum(r['majority'] for r in ok)}/{len(ok)}" if ok else "–"
    rates = [r["train_examples_per_s"] for r in ok if r.get("train_examples_per_s")]
    rate = f"{statistics.median(rates):.1f}" if rates else "–"
    others = []
    for name in sorted({k for r in ok for k in r["scores"]} - {metric}):
      numbers = [r["scores"][name] for r in ok if r["scores"].get(name) is not None
                 and not math.isnan(r["scores"][name])]
      if numbers and name not in ("top_class_share", "prediction_sd", "predicted_entities"):
        others.append(f"{name} {statistics.mean(numbers):.3f}")
    lines.append(f"| {task} | {num_train} | {lr:g} | {epochs} | {impl} | {metric} | "
                 + " | ".join(cells) + f" | {mean} | {majority} | {rate} | "
                 + ", ".join(others) + " |")
  return "\n".join(lines) + "\n"


def write_table(args, records, majority_rates):
  table = make_table(records, majority_rates)
  if args.table:
    with open(args.table, "w", encoding="utf-8") as f:
      f.write(table)
  return table


def _majority_rates(args, records):
  """The dev majority-class rate of each task in `records`, on this command's dev sets."""
  rates = {}
  for task in (t for t in TASKS if any(r["task"] == t for r in records.values())):
    try:
      rates[task] = majority_rate(prepare_task(args, task))
    except (OSError, SystemExit, ValueError):
      pass
  return rates


def main():
  args = parse_args()
  if args.child:
    child(json.loads(args.child))
    return
  tasks = args.tasks.split(",")
  if args.table_only:
    records = load_results(args.results)
    print(write_table(args, records, _majority_rates(args, records)), end="")
    return
  if args.model_dir is None:
    sys.path.insert(0, args.ours_repo)
    args.model_dir = machine.minilm_dir()
  epochs_list = [int(e) for e in args.epochs.split(",")]
  seeds = [int(s) for s in args.seeds.split(",")]
  impls = args.impls.split(",")
  data = {task: prepare_task(args, task) for task in tasks}
  records = load_results(args.results)
  describe = f"{machine.cpu_model()}, {os.cpu_count()} cores"
  command = " ".join([os.path.relpath(sys.executable, _REPO)
                      if sys.executable.startswith(_REPO) else sys.executable]
                     + [os.path.relpath(sys.argv[0], _REPO)] + sys.argv[1:])
  os.makedirs(os.path.dirname(os.path.abspath(args.results)), exist_ok=True)
  for epochs in epochs_list:
    for seed in seeds:
      for task in tasks:
        d = data[task]
        for impl in impls:
          record = {"task": task, "epochs": epochs, "impl": impl, "seed": seed,
                    "learning_rate": args.learning_rate, "num_train": d["num_train"]}
          old = records.get(key_of(record))
          if old is not None and ("scores" in old or not args.retry_errors):
            continue
          out = os.path.join(args.work_dir, "runs",
                             f"{task}_n{d['num_train']}_lr{args.learning_rate:g}_e{epochs}_"
                             f"s{seed}_{impl}")
          shutil.rmtree(out, ignore_errors=True)
          start = time.time()
          run = run_peer if impl in ("transformers", "keras_hub") else run_ours
          try:
            predictions, rate, extra = run(args, d, impl, seed, epochs, out)
            scores, majority = score(d, predictions)
            record.update(scores=scores, majority=majority, train_examples_per_s=rate,
                          **extra)
            prediction_file = os.path.join(args.work_dir, "predictions",
                                           os.path.basename(out) + ".json")
            os.makedirs(os.path.dirname(prediction_file), exist_ok=True)
            with open(prediction_file, "w", encoding="utf-8") as f:
              json.dump(predictions, f)
            shown = f"{TASKS[task]['metric']} {_fmt(scores[TASKS[task]['metric']])}" + (
                " (majority class)" if majority else "")
          except (RunError, OSError, ValueError, KeyError, IndexError) as e:
            stderr = getattr(e, "stderr", None) or repr(e)
            record["error"] = "\n".join(stderr.strip().splitlines()[-25:])
            record["error_command"] = getattr(e, "command", None)
            shown = "ERROR: " + (stderr.strip().splitlines() or ["?"])[-1][:200]
          seconds = time.time() - start
          record.update(seconds=round(seconds, 1), num_dev=d["num_dev"],
                        date=f"{datetime.datetime.now():%Y-%m-%d %H:%M}", machine=describe,
                        command=command)
          with open(args.results, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
          records[key_of(record)] = record
          if not args.keep_run_dirs:
            shutil.rmtree(out, ignore_errors=True)
          print(f"{task} {impl} seed {seed} epochs {epochs}: {shown}, {seconds:.0f} s", flush=True)
          write_table(args, records, _majority_rates(args, records))
  print(write_table(args, records, _majority_rates(args, records)), end="")


if __name__ == "__main__":
  main()
