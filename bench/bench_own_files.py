r"""Fine-tuning on your own files gives the built-in paths' scores (MiniLM, CPU).

  python bench/bench_own_files.py [--rows=all] [--out=bench/RESULTS_own_files.md]

Rows, each one `python -m official_bert.run_*` subprocess with the same budget and seed as its
built-in counterpart, so the two differ only in how the data is read:
  sst2_glue    run_classifier --task_name=SST-2 (glue_data TSV, labels 0/1)
  sst2_jsonl   run_classifier --train_file=train.jsonl --dev_file=dev.jsonl: SST-2 re-read as
               JSON lines with string labels ("negative"/"positive")
  ner_conll    run_ner --data_dir (CoNLL-2003, IOB1 -> IOB2)
  ner_iob2     run_ner --train_file/--dev_file: CoNLL-2003 as IOB2 TSV files, tag in column 2
               (the same tags as ner_conll; only the label ids' order differs: sorted)
  ner_bioes    the same re-tagged as BIOES (17 labels instead of 9: a harder head to learn
               in a short budget, though the entities are the same)
The seeded subset (--max_train_examples) picks the same examples in both spellings (same
order, same seed). Entity F1 is scheme-independent (the same chunks), so the NER rows compare.
"""

import argparse
import datetime
import json
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

from data_prep.tagging import conll  # noqa: E402


def parse_args():
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--data", default=_DATA)
  p.add_argument("--rows", default="all")
  p.add_argument("--work_dir", default=None)
  p.add_argument("--out", default=os.path.join(_REPO, "bench", "RESULTS_own_files.md"))
  return p.parse_args()


def sst2_jsonl(glue_dir, work):
  names = {"0": "negative", "1": "positive"}
  paths = {}
  for split in ("train", "dev"):
    path = os.path.join(work, f"sst2_{split}.jsonl")
    with open(os.path.join(glue_dir, f"{split}.tsv"), encoding="utf-8") as f, open(
        path, "w", encoding="utf-8") as out:
      next(f)
      for line in f:
        text, label = line.rstrip("\n").split("\t")
        out.write(json.dumps({"text": text, "label": names[label]}) + "\n")
    paths[split] = path
  return paths


def conll_files(conll_dir, work, scheme):
  paths = {}
  for split, name in (("train", "eng.train"), ("dev", "eng.testa")):
    path = os.path.join(work, f"ner_{scheme}_{split}.tsv")
    with open(path, "w", encoding="utf-8") as out:
      for s in conll.read_conll(os.path.join(conll_dir, name)):
        tags = conll.iob2_to_bioes(s.tags) if scheme == "bioes" else s.tags
        out.write("".join(f"{w}\tX\t{t}\n" for w, t in zip(s.words, tags)) + "\n")
    paths[split] = path
  return paths


def main():
  args = parse_args()
  work = args.work_dir or tempfile.mkdtemp(prefix="own_files_")
  os.makedirs(work, exist_ok=True)
  model = machine.minilm_dir()
  glue, conll_dir = os.path.join(args.data, "glue", "SST-2"), os.path.join(args.data,
                                                                           "conll2003")
  sst = sst2_jsonl(glue, work)
  ner = conll_files(conll_dir, work, "bioes")
  iob2 = conll_files(conll_dir, work, "iob2")
  sst_common = ["--do_train", "--do_eval", "--max_train_examples=3000", "--max_seq_length=48",
                "--num_train_epochs=1", "--train_batch_size=32", "--learning_rate=5e-5",
                "--eval_batch_size=64"]
  ner_common = ["--do_train", "--do_eval", "--max_train_examples=4000", "--max_seq_length=64",
                "--num_train_epochs=1", "--train_batch_size=32", "--learning_rate=1e-4",
                "--eval_batch_size=64", "--steps_per_loop=25"]
  rows = {
      "sst2_glue": ("official_bert.run_classifier", ["--task_name=SST-2", f"--data_dir={glue}"]
                    + sst_common, "eval_accuracy"),
      "sst2_jsonl": ("official_bert.run_classifier", [f"--train_file={sst['train']}",
                                                      f"--dev_file={sst['dev']}"]
                     + sst_common, "eval_accuracy"),
      "ner_conll": ("official_bert.run_ner", [f"--data_dir={conll_dir}"] + ner_common,
                    "entity_f1"),
      "ner_iob2": ("official_bert.run_ner", [f"--train_file={iob2['train']}",
                                             f"--dev_file={iob2['dev']}", "--tag_column=2"]
                   + ner_common, "entity_f1"),
      "ner_bioes": ("official_bert.run_ner", [f"--train_file={ner['train']}",
                                              f"--dev_file={ner['dev']}", "--tag_column=2"]
                    + ner_common, "entity_f1"),
  }
  names = list(rows) if args.rows == "all" else args.rows.split(",")
  lines = []
  for name in names:
    module, flags, metric = rows[name]
    out_dir = os.path.join(work, name)
    cmd = [sys.executable, "-m", module, f"--init_checkpoint={model}",
           f"--output_dir={out_dir}"] + flags
    shown = " ".join(shlex.quote(c) for c in cmd[1:]).replace(model, "$M").replace(
        args.data, "$DATA").replace(work, "$W")
    print(f"== {name}: python {shown}", flush=True)
    start = time.time()
    proc = subprocess.run(cmd, cwd=_REPO, capture_output=True, text=True)
    seconds = time.time() - start
    if proc.returncode:
      print(proc.stderr[-3000:])
      raise SystemExit(f"{name} failed")
    results = {}
    with open(os.path.join(out_dir, "eval_results.txt"), encoding="utf-8") as f:
      for line in f:
        key, _, value = line.strip().partition(" = ")
        results[key] = value
    value = results.get(metric) or results.get(metric.replace("eval_", ""))
    label = metric.replace("eval_", "")
    row = f"| {name} | {label} | **{100 * float(value):.2f}** | {seconds:.0f} s |"
    print(row, flush=True)
    lines.append((shown, row))
  report = [f"Run {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC on "
            f"{machine.cpu_model()} ({os.cpu_count()} cores), CPU, float32, MiniLM-L6-H384.",
            "", "| row | metric | dev score | wall time |", "|---|---|---|---|"]
  report += [row for _, row in lines] + ["", "```sh"] + [f"python {s}" for s, _ in lines]
  report += ["```", ""]
  text = "\n".join(report)
  print(text)
  with open(args.out + ".part", "w", encoding="utf-8") as f:
    f.write(text)
  os.replace(args.out + ".part", args.out)


if __name__ == "__main__":
  main()
