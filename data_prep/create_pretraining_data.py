r"""Raw text -> BERT pretraining TFRecords (masked LM + next sentence), streaming and parallel.

Same flags, defaults and output schema as google-research/bert's `create_pretraining_data.py`:

  python -m data_prep.create_pretraining_data \
    --input_file=corpus/*.txt --output_file=out/pretrain.tfrecord \
    --vocab_file=vocab.txt --do_lower_case=True --max_seq_length=128 \
    --max_predictions_per_seq=20 --masked_lm_prob=0.15 --random_seed=12345 --dupe_factor=5

How it differs from the original (which holds the whole corpus and all instances in memory):
  - documents are indexed (pass 1), put in one seeded random order, and processed in chunks of
    about `--chunk_size_mb` of text; memory depends on the chunk size, not the corpus size;
  - a "random next sentence" comes from another document of the same chunk; a chunk is a
    uniform random sample of the whole corpus, so, as in the original, the random document is
    uniform over the corpus;
  - instances are shuffled within a chunk (the original shuffles all of them);
  - `--num_workers` processes build instances; the output is byte-identical for any number of
    workers (each chunk has its own seeded random streams);
  - files are written under a temporary name and renamed only when complete.
"""

import collections
import os
import time

from absl import flags
from absl import logging
import numpy as np

from data_prep import cli
from data_prep import tfrecord_io
from data_prep import workers
from data_prep.pretraining import corpus
from data_prep.pretraining import instances as instances_lib

FLAGS = flags.FLAGS

Settings = collections.namedtuple("Settings", [
    "input_file", "output_file", "vocab_file", "do_lower_case", "do_whole_word_mask",
    "max_seq_length", "max_predictions_per_seq", "random_seed", "dupe_factor",
    "masked_lm_prob", "short_seq_prob", "num_workers", "num_output_shards", "gzip_compress",
    "use_v2_feature_names", "errors", "chunk_size_mb", "min_docs_per_chunk"])
Settings.__new__.__defaults__ = (  # everything after vocab_file, as the flags below
    True, False, 128, 20, 12345, 10, 0.15, 0.1, 1, 1, False, False, "strict", 1.0, 32)
REQUIRED_FLAGS = ("input_file", "output_file", "vocab_file")


def define_flags():
  """Called only when run as a program (see `data_prep.cli`)."""
  flags.DEFINE_string("input_file", None, "Input raw text file(s): comma-separated, globs allowed.")
  flags.DEFINE_string("output_file", None, "Output TFRecord file(s), comma-separated.")
  cli.define_tokenizer_flags(max_seq_length=128)
  flags.DEFINE_bool("do_whole_word_mask", False, "Mask whole words instead of word pieces.")
  flags.DEFINE_integer("max_predictions_per_seq", 20, "Maximum masked LM predictions per sequence.")
  flags.DEFINE_integer("random_seed", 12345, "Random seed for data generation.")
  flags.DEFINE_integer("dupe_factor", 10, "Passes over the data (with different masks).")
  flags.DEFINE_float("masked_lm_prob", 0.15, "Masked LM probability.")
  flags.DEFINE_float("short_seq_prob", 0.1, "Probability of a shorter than maximum target length.")
  flags.DEFINE_integer("num_workers", None, "Worker processes (default: all cores).")
  flags.DEFINE_integer("num_output_shards", 1,
                       "With one --output_file, write OUTPUT-00000-of-0000N ... shards.")
  flags.DEFINE_bool("gzip_compress", False, "Write GZIP-compressed TFRecord files.")
  flags.DEFINE_bool("use_v2_feature_names", False,
                    "Name features input_word_ids/input_type_ids (Model Garden v2 names).")
  flags.DEFINE_enum("errors", "strict", ["strict", "replace"],
                    "Non-UTF-8 input: stop with the file and line (strict), or use U+FFFD.")
  flags.DEFINE_float("chunk_size_mb", 1.0, "Text per chunk; bounds memory per worker.")
  flags.DEFINE_integer("min_docs_per_chunk", 32,
                       "Documents per chunk at least, so random next sentences have a choice.")


def output_paths(output_file, num_output_shards):
  paths = [p.strip() for p in output_file.split(",") if p.strip()]
  if not paths:
    raise ValueError("--output_file is empty")
  if num_output_shards < 1:
    raise ValueError(f"num_output_shards={num_output_shards} must be >= 1")
  if num_output_shards > 1:
    if len(paths) != 1:
      raise ValueError("--num_output_shards needs a single --output_file to number")
    paths = [f"{paths[0]}-{i:05d}-of-{num_output_shards:05d}" for i in range(num_output_shards)]
  return paths


class ShardedWriter:
  """Round-robin TFRecord shards (`tfrecord_io.RecordFile`s: written under temporary names);
  `commit` renames them all, `abort` deletes them all."""

  def __init__(self, paths, gzip_compress):
    self.paths = paths
    self._files = []
    try:
      for path in paths:
        self._files.append(tfrecord_io.RecordFile(path, gzip_compress))
    except BaseException:
      self.abort()
      raise
    self.written = 0

  def write(self, framed):
    """framed: TFRecord-framed records; record i of the run goes to shard i % num_shards."""
    n = len(self._files)
    for shard, f in enumerate(self._files):
      f.write_framed(b"".join(framed[(shard - self.written) % n::n]))
    self.written += len(framed)

  def commit(self):
    for f in self._files:
      f.commit()

  def abort(self):
    for f in self._files:
      f.abort()


class Progress:
  """Logs documents/s, instances written and ETA at most every `every` seconds."""

  def __init__(self, total_bytes, every=5.0):
    self.total_bytes = max(total_bytes, 1)
    self.every = every
    self.start = self.last = time.time()

  def update(self, docs, done_bytes, written, force=False):
    now = time.time()
    if not force and now - self.last < self.every:
      return
    self.last = now
    elapsed = max(now - self.start, 1e-9)
    frac = min(done_bytes / self.total_bytes, 1.0)
    eta = elapsed * (1 - frac) / frac if frac > 0 else float("nan")
    logging.info("%5.1f%% | %d docs (%.0f docs/s) | %d instances written (%.0f/s) | "
                 "elapsed %.0fs | ETA %.0fs", 100 * frac, docs, docs / elapsed, written,
                 written / elapsed, elapsed, eta)


def _tokenize_chunk(tokenizer, index, docs, chunk_index, errors):
  """Read and tokenize the documents of one chunk; drop lines/documents without tokens."""
  texts = corpus.read_documents(index, docs, errors=errors)
  lines = [line for doc in texts for line in doc]
  ids, splits = tokenizer.encode_batch(lines)
  line_len = np.diff(splits)
  keep = line_len > 0
  doc_of_line = np.repeat(np.arange(len(texts)), [len(doc) for doc in texts])[keep]
  line_splits = np.zeros(int(keep.sum()) + 1, np.int64)
  np.cumsum(line_len[keep], out=line_splits[1:])
  lines_per_doc = np.bincount(doc_of_line, minlength=len(texts))
  lines_per_doc = lines_per_doc[lines_per_doc > 0]
  doc_splits = np.zeros(len(lines_per_doc) + 1, np.int64)
  np.cumsum(lines_per_doc, out=doc_splits[1:])
  return instances_lib.Chunk(chunk_index, ids, line_splits, doc_splits)


def instance_options(settings, tokenizer):
  """The instance algorithm's options from the run's settings (local writer and Beam alike)."""
  opts = instances_lib.InstanceOptions(
      max_seq_length=settings.max_seq_length,
      max_predictions_per_seq=settings.max_predictions_per_seq,
      masked_lm_prob=settings.masked_lm_prob, short_seq_prob=settings.short_seq_prob,
      dupe_factor=settings.dupe_factor, do_whole_word_mask=settings.do_whole_word_mask,
      random_seed=settings.random_seed, vocab_size=len(tokenizer.inv_vocab),
      cls_id=tokenizer.vocab["[CLS]"], sep_id=tokenizer.vocab["[SEP]"],
      mask_id=tokenizer.vocab["[MASK]"],
      continuation_ids=tuple(i for t, i in tokenizer.vocab.items() if t.startswith("##")),
      use_v2_feature_names=settings.use_v2_feature_names)
  opts.validate()
  return opts


def _check_ranges(settings):
  """The run's own sizes (the instance options check theirs): named before any work."""
  if settings.num_workers is not None and settings.num_workers < 0:
    raise ValueError(f"--num_workers={settings.num_workers} must be >= 1 (unset: all cores)")
  if not settings.chunk_size_mb > 0:
    raise ValueError(f"--chunk_size_mb={settings.chunk_size_mb} must be > 0")
  if settings.min_docs_per_chunk < 1:
    raise ValueError(f"--min_docs_per_chunk={settings.min_docs_per_chunk} must be >= 1")


def run(settings):
  """Writes the TFRecords; returns a summary dict. Raises ValueError on bad input."""
  from data_prep import tokenization  # pylint: disable=g-import-not-at-top  (TF: main only)
  t0 = time.time()
  files = corpus.expand_input_patterns(settings.input_file or "")
  if not settings.vocab_file:
    raise ValueError("--vocab_file is required")
  _check_ranges(settings)
  paths = output_paths(settings.output_file or "", settings.num_output_shards)
  tokenizer = tokenization.FullTokenizer(settings.vocab_file, settings.do_lower_case)
  tokenization.check_special_tokens(tokenizer.vocab, settings.vocab_file,
                                    ("[UNK]", "[CLS]", "[SEP]", "[MASK]"))
  opts = instance_options(settings, tokenizer)

  index = corpus.index_documents(files, errors=settings.errors)
  if not len(index):
    raise ValueError(f"empty corpus: no non-blank line in {', '.join(files)}")
  order = np.random.default_rng(settings.random_seed).permutation(len(index)).tolist()
  chunks = corpus.plan_chunks(index, order, int(settings.chunk_size_mb * 2**20),
                              settings.min_docs_per_chunk)
  logging.info("%d document(s) in %d file(s), %.1f MB; %d chunk(s)", len(index), len(files),
               index.total_bytes / 1e6, len(chunks))

  num_workers = max(1, settings.num_workers or os.cpu_count() or 1)
  pool = None
  if num_workers > 1 and len(chunks) > 1:
    # spawn: the workers import numpy only, not the TensorFlow this process has loaded.
    pool = workers.start(min(num_workers, len(chunks)), instances_lib.serialize_chunk, opts)
  writer = ShardedWriter(paths, settings.gzip_compress)
  progress = Progress(sum(index.size(d) for d in order))
  totals = collections.Counter()
  pending = collections.deque()  # (async result or value, docs, bytes)
  docs_done = bytes_done = 0

  def finish(item):
    nonlocal docs_done, bytes_done
    result, n_docs, n_bytes = item
    records, stats = result.get() if pool else result
    writer.write(records)
    totals.update(stats)
    docs_done += n_docs
    bytes_done += n_bytes
    progress.update(docs_done, bytes_done, writer.written)

  try:
    for k, docs in enumerate(chunks):
      chunk = _tokenize_chunk(tokenizer, index, docs, k, settings.errors)
      n_bytes = sum(index.size(d) for d in docs)
      if pool:
        pending.append((pool.apply_async(workers.call, (chunk,)), len(docs), n_bytes))
        while len(pending) > num_workers:  # bounded: at most one chunk queued per worker
          finish(pending.popleft())
      else:
        finish((instances_lib.serialize_chunk(chunk, opts), len(docs), n_bytes))
    while pending:
      finish(pending.popleft())
    if not writer.written:
      raise ValueError(f"no instances: the corpus {', '.join(files)} has no tokens")
    writer.commit()
  except BaseException:
    writer.abort()
    raise
  finally:
    if pool:
      pool.terminate()
      pool.join()
  progress.update(docs_done, bytes_done, writer.written, force=True)
  seconds = time.time() - t0
  summary = {
      "documents": len(index), "instances": writer.written, "seconds": seconds,
      "instances_per_second": writer.written / max(seconds, 1e-9), "files": paths,
      "masked_fraction": totals["masked"] / max(totals["tokens"], 1),
      "random_next_fraction": totals["random_next"] / max(writer.written, 1),
  }
  logging.info("Wrote %d instances from %d documents to %d file(s) in %.1fs (%.0f instances/s); "
               "masked %.2f%% of tokens, %.1f%% random next sentences: %s",
               summary["instances"], summary["documents"], len(paths), seconds,
               summary["instances_per_second"], 100 * summary["masked_fraction"],
               100 * summary["random_next_fraction"], ", ".join(paths))
  return summary


def main(argv):
  del argv  # no positional arguments (`cli.launch` checks)
  run(Settings(**{name: getattr(FLAGS, name) for name in Settings._fields}))


if __name__ == "__main__":
  define_flags()
  cli.launch(main, REQUIRED_FLAGS)
