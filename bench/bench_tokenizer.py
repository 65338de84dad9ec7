r"""Tokenizer throughput on pinned cores: ours (batched, TF graph ops) vs the peer (pure Python).

  python bench/bench_tokenizer.py [--mb=20] [--repeats=3] [--peer_mb=2] [--cores=1]
                                  [--corpus=...] [--vocab=...]

Reads the first --mb MB of the corpus (cut at a line boundary), split into lines, and measures
MB/s = UTF-8 bytes of the text (newlines included) / seconds, for:
  ours      data_prep.tokenization.FullTokenizer(vocab, do_lower_case=True).encode_batch(lines)
  peer      official.nlp.tools.tokenization.FullTokenizer(vocab, do_lower_case=True),
            convert_tokens_to_ids(tokenize(line)) per line, on the first --peer_mb MB only
  fastbert  tensorflow_text.FastBertTokenizer(vocab, lower_case_nfd_strip_accents=True)
            (reference only: its normalization differs from BERT's), same batches as ours
Parity: ours' ids == peer ids for every line of the peer subset (mismatching lines must be 0).
The process is pinned to --cores cores (before TF is imported) and TF uses that many threads.
"""

import os
import sys

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _early_cores():
  """Pin before TF is imported (TF sizes its thread pools from the affinity mask)."""
  cores = 1
  for i, arg in enumerate(sys.argv):
    if arg.startswith("--cores="):
      cores = int(arg.split("=", 1)[1])
    elif arg == "--cores" and i + 1 < len(sys.argv):
      cores = int(sys.argv[i + 1])
  avail = sorted(os.sched_getaffinity(0))
  os.sched_setaffinity(0, set(avail[:max(1, cores)]))
  return len(os.sched_getaffinity(0))


_CORES = _early_cores()
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, _REPO)

import datetime  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

from absl import app  # noqa: E402
from absl import flags  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf.config.threading.set_intra_op_parallelism_threads(_CORES)
tf.config.threading.set_inter_op_parallelism_threads(_CORES)

import machine  # noqa: E402  # bench/machine.py, beside this script
from official.nlp.tools import tokenization as peer_tok  # noqa: E402
import tensorflow_text as tf_text  # noqa: E402

from data_prep import tokenization as ours_tok  # noqa: E402

flags.DEFINE_float("mb", 20, "MB of corpus text for ours and FastBert.")
flags.DEFINE_float("peer_mb", 2, "MB of corpus text for the (slow) peer, and for the parity check.")
flags.DEFINE_integer("repeats", 3, "Timed runs of ours and FastBert (median reported).")
flags.DEFINE_integer("peer_repeats", 1, "Timed runs of the peer (median reported).")
flags.DEFINE_integer("cores", 1, "Cores to pin the process to (read before TF is imported).")
flags.DEFINE_string("corpus", os.path.join(_REPO, "../shared/data/corpus/gutenberg_books.txt"),
                    "Corpus text file (UTF-8).")
flags.DEFINE_string("vocab",
                    os.path.join(_REPO, "../shared/data/vocab/bert-base-uncased/vocab.txt"),
                    "WordPiece vocab.")
FLAGS = flags.FLAGS
_BATCH = ours_tok._BATCH  # pylint: disable=protected-access


def read_head(path, mb):
  """First `mb` MB of `path`, cut at the last newline; (lines, n_bytes)."""
  with open(path, "rb") as f:
    data = f.read(int(mb * 1e6))
  cut = data.rfind(b"\n")
  if cut >= 0 and len(data) == int(mb * 1e6):
    data = data[:cut + 1]
  return data.decode("utf-8").splitlines(), len(data)


def timed(fn, repeats):
  times = []
  for _ in range(repeats):
    t0 = time.perf_counter()
    fn()
    times.append(time.perf_counter() - t0)
  return statistics.median(times), times


def main(argv):
  del argv
  print(f"# bench_tokenizer  {datetime.datetime.now().isoformat(timespec='seconds')}")
  print(f"# machine: nproc={os.cpu_count()} cpu='{machine.cpu_model()}'  pinned to cores "
        f"{sorted(os.sched_getaffinity(0))} ({_CORES} core{'s' if _CORES > 1 else ''}), "
        f"TF intra/inter threads={_CORES}")
  print(f"# tensorflow {tf.__version__}, tensorflow-text {getattr(tf_text, '__version__', '?')}")
  print(f"# corpus {os.path.normpath(FLAGS.corpus)}; vocab {os.path.normpath(FLAGS.vocab)}")
  lines, n_bytes = read_head(FLAGS.corpus, FLAGS.mb)
  peer_lines, peer_bytes = read_head(FLAGS.corpus, min(FLAGS.peer_mb, FLAGS.mb))
  print(f"# ours/fastbert: {n_bytes / 1e6:.2f} MB, {len(lines)} lines; "
        f"peer: {peer_bytes / 1e6:.2f} MB, {len(peer_lines)} lines")

  t0 = time.perf_counter()
  ours = ours_tok.FullTokenizer(FLAGS.vocab, do_lower_case=True)
  ours.encode_batch(lines[:_BATCH])  # warm-up: first-call kernel/table set-up
  ours_setup = time.perf_counter() - t0
  t0 = time.perf_counter()
  peer = peer_tok.FullTokenizer(FLAGS.vocab, do_lower_case=True)
  peer_setup = time.perf_counter() - t0
  t0 = time.perf_counter()
  vocab_list = ours_tok.load_vocab_tokens(FLAGS.vocab)
  fast = tf_text.FastBertTokenizer(vocab=vocab_list, lower_case_nfd_strip_accents=True,
                                   token_out_type=tf.int64)

  def fast_run(texts):
    values, lengths = [], []
    for start in range(0, len(texts), _BATCH):
      ragged = fast.tokenize(tf.constant(texts[start:start + _BATCH], dtype=tf.string))
      values.append(ragged.flat_values.numpy().astype(np.int32))
      lengths.append(ragged.row_lengths().numpy())
    return values, lengths

  fast_run(lines[:_BATCH])
  fast_setup = time.perf_counter() - t0

  def peer_run(texts):
    return [peer.convert_tokens_to_ids(peer.tokenize(t)) for t in texts]

  ours_s, ours_all = timed(lambda: ours.encode_batch(lines), FLAGS.repeats)
  fast_s, fast_all = timed(lambda: fast_run(lines), FLAGS.repeats)
  peer_s, peer_all = timed(lambda: peer_run(peer_lines), FLAGS.peer_repeats)

  # Parity on the peer subset.
  peer_ids = peer_run(peer_lines)
  ids, splits = ours.encode_batch(peer_lines)
  ours_ids = [ids[splits[i]:splits[i + 1]].tolist() for i in range(len(peer_lines))]
  bad = [i for i, (a, b) in enumerate(zip(ours_ids, peer_ids)) if a != b]
  fv, fl = fast_run(peer_lines)
  fids, fsplits = np.concatenate(fv), np.concatenate([[0], np.cumsum(np.concatenate(fl))])
  fast_bad = sum(fids[fsplits[i]:fsplits[i + 1]].tolist() != peer_ids[i]
                 for i in range(len(peer_lines)))
  n_tokens = int(splits[-1])

  peer_rate = peer_bytes / 1e6 / peer_s
  rows = [("ours (encode_batch)", n_bytes, ours_s, ours_all, ours_setup),
          ("peer (FullTokenizer, per line)", peer_bytes, peer_s, peer_all, peer_setup),
          ("tf-text FastBertTokenizer (ref.)", n_bytes, fast_s, fast_all, fast_setup)]
  print()
  print(f"Tokenizer throughput on {'one core' if _CORES == 1 else f'{_CORES} cores'} "
        f"(process pinned, TF threads={_CORES}); MB/s = median over runs")
  print(f"{'name':34s} {'MB':>6s} {'MB/s':>8s} {'vs peer':>8s} {'setup s':>8s}  runs (s)")
  for name, nb, sec, all_s, setup in rows:
    rate = nb / 1e6 / sec
    print(f"{name:34s} {nb / 1e6:6.2f} {rate:8.2f} {rate / peer_rate:7.1f}x {setup:8.2f}  "
          + ", ".join(f"{t:.2f}" for t in all_s))
  print()
  print(f"parity on peer subset ({len(peer_lines)} lines, {n_tokens} tokens): "
        f"ours != peer on {len(bad)} lines"
        + (f" (first: line {bad[0]}: {peer_lines[bad[0]][:80]!r})" if bad else "")
        + f"; FastBert (ref.) != peer on {fast_bad} lines")
  if bad:
    sys.exit(1)


if __name__ == "__main__":
  app.run(main)
