r"""Raw text -> BERT pretraining TFRecords (masked LM + next sentence), streaming and parallel.

Same flags, defaults and output schema as google-research/bert's `create_pretraining_data.py`:

  python -m data_prep.create_pretraining_data \
    --input_file=corpus/*.txt --output_file=out/pretrain.tfrecord \
    --vocab_file=vocab.txt --do_lower_case=True --max_seq_length=128 \
    --max_predictions_per_seq=20 --masked_lm_prob=0.15 --random_seed=12345 --dupe_factor=5

Newer recipes, each a flag (the original's behaviour and output stay the default):
  - `--next_sentence=False`: masked LM only; contiguous sentences packed into one segment
    (`pretraining.packing`), `--cross_document=True` across documents with a [SEP] between;
  - `--masking=none`: unmasked records with `word_starts` (`schema.unmasked_pretraining_features`)
    for `run_pretraining --dynamic_masking`;
  - `--chinese_word_segmenter=jieba`: whole-word masking groups the characters of each
    Chinese word (`pretraining.chinese_words`).

How it differs from the original (which holds the whole corpus and all instances in memory):
  - documents are indexed (pass 1) and processed in chunks of about `--chunk_size_mb` of text;
    memory depends on the chunk size, not the corpus size;
  - a "random next sentence" comes from another document of the same chunk; a chunk is a
    uniform random sample of the whole corpus, drawn by a seeded hash of each document's
    position (file, byte offset; `pretraining.chunking`), so, as in the original, the random
    document is uniform over the corpus;
  - instances are shuffled within a chunk (the original shuffles all of them);
  - `--num_workers` processes build instances; the output is byte-identical for any number of
    workers (each chunk has its own seeded random streams);
  - files are written under a temporary name and renamed only when complete.

With `--runner=NAME` (DirectRunner, DataflowRunner, FlinkRunner, SparkRunner, ...) the same
algorithm runs as an Apache Beam pipeline (`pretraining.beam_pipeline`) and writes the same
multiset of records; every argument that is not one of this program's flags is a Beam
pipeline option (--direct_num_workers, --temp_location, --project, --region, ...).
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
from data_prep.pretraining import chinese_words
from data_prep.pretraining import chunking
from data_prep.pretraining import corpus
from data_prep.pretraining import instances as instances_lib

FLAGS = flags.FLAGS

Settings = collections.namedtuple("Settings", [
    "input_file", "output_file", "vocab_file", "do_lower_case", "do_whole_word_mask",
    "max_seq_length", "max_predictions_per_seq", "random_seed", "dupe_factor",
    "masked_lm_prob", "short_seq_prob", "num_workers", "num_output_shards", "gzip_compress",
    "use_v2_feature_names", "errors", "chunk_size_mb", "min_docs_per_chunk", "read_range_mb",
    "next_sentence", "cross_document", "masking", "chinese_word_segmenter"])
Settings.__new__.__defaults__ = (  # everything after vocab_file, as the flags below
    True, False, 128, 20, 12345, 10, 0.15, 0.1, 1, 1, False, False, "strict", 1.0, 32, 64.0,
    True, False, "offline", "none")
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
  flags.DEFINE_integer("num_workers", None, "Worker processes (default: all cores); with "
                       "--runner, passed to Beam (Dataflow's initial number of workers).")
  flags.DEFINE_integer("num_output_shards", 1,
                       "With one --output_file, write OUTPUT-00000-of-0000N ... shards.")
  flags.DEFINE_bool("gzip_compress", False, "Write GZIP-compressed TFRecord files.")
  flags.DEFINE_bool("use_v2_feature_names", False,
                    "Name features input_word_ids/input_type_ids (Model Garden v2 names).")
  flags.DEFINE_enum("errors", "strict", ["strict", "replace"],
                    "Non-UTF-8 input: stop with the file and line (strict), or use U+FFFD.")
  flags.DEFINE_float("chunk_size_mb", 1.0, "Text per chunk; bounds memory per worker.")
  flags.DEFINE_integer("min_docs_per_chunk", 32,
                       "Documents per chunk on average at least, so random next sentences "
                       "have a choice.")
  flags.DEFINE_float("read_range_mb", 64.0,
                     "With --runner: input files are read in byte ranges of this size, in "
                     "parallel (a range owns the documents that start in it).")
  flags.DEFINE_bool("next_sentence", True,
                    "Sentence pairs for next-sentence prediction (the original). False: "
                    "contiguous sentences packed into one segment, labels written as 0.")
  flags.DEFINE_bool("cross_document", False,
                    "With --next_sentence=False: a sequence may run on into the next "
                    "document, with a [SEP] between the two (RoBERTa's FULL-SENTENCES).")
  flags.DEFINE_enum("masking", "offline", list(instances_lib.MASKING),
                    "offline: mask now (the original); none: write the unmasked ids and "
                    "word_starts, for run_pretraining --dynamic_masking.")
  flags.DEFINE_enum("chinese_word_segmenter", "none", list(chinese_words.SEGMENTERS),
                    "jieba: whole-word masking (and word_starts) group the characters of "
                    "each Chinese word (Chinese-BERT-wwm).")


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


def make_tokenizer(settings):
  """The run's tokenizer (main process, or once per Beam worker); checks the special tokens."""
  from data_prep import tokenization  # pylint: disable=g-import-not-at-top  (TF: not workers)
  tokenizer = tokenization.FullTokenizer(settings.vocab_file, settings.do_lower_case)
  tokenization.check_special_tokens(tokenizer.vocab, settings.vocab_file,
                                    ("[UNK]", "[CLS]", "[SEP]", "[MASK]"))
  return tokenizer


def tokenize_documents(tokenizer, texts, chunk_index, word_segmenter="none"):
  """A chunk's documents (each a list of non-blank lines), in chunk order -> its `Chunk`;
  lines and documents without tokens are dropped. Both writers build chunks only here.
  word_segmenter "jieba" (`--chinese_word_segmenter`) also marks the tokens that start a word
  (`Chunk.word_starts`, see `chinese_words`); it loads jieba in the calling process."""
  lines = [line for doc in texts for line in doc]
  word_starts = None
  if chinese_words.check_segmenter(word_segmenter) == "jieba":
    ids, splits, word_starts = chinese_words.encode_with_word_starts(tokenizer, lines)
  else:
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
  return instances_lib.Chunk(chunk_index, ids, line_splits, doc_splits, word_starts)


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
      use_v2_feature_names=settings.use_v2_feature_names,
      next_sentence=settings.next_sentence, cross_document=settings.cross_document,
      masking=settings.masking)
  try:
    opts.validate()
  except ValueError as e:  # name the flags, not the options
    raise ValueError(f"--{e}") from None
  _check_recipe(settings)
  return opts


def _check_recipe(settings):
  """The masked-LM-only / dynamic-masking / Chinese flags together; logs what goes unused."""
  segmenter = chinese_words.check_segmenter(settings.chinese_word_segmenter)
  if segmenter != "none" and not (settings.do_whole_word_mask or settings.masking == "none"):
    raise ValueError(f"--chinese_word_segmenter={segmenter} groups characters into words for "
                     "whole-word masking: add --do_whole_word_mask (or --masking=none, which "
                     "writes the word starts for the input pipeline)")
  if settings.masking == "none":
    logging.info("--masking=none: nothing is masked here; --max_predictions_per_seq, "
                 "--masked_lm_prob and --do_whole_word_mask are not used (run_pretraining "
                 "--dynamic_masking takes them)")
    if settings.dupe_factor > 1:
      logging.info("--masking=none with --dupe_factor=%d: the passes differ only in their "
                   "%s; the input pipeline draws new masks every epoch, so 1 is usually "
                   "enough", settings.dupe_factor,
                   "pairs" if settings.next_sentence else "short sequences")


def _check_ranges(settings):
  """The run's own sizes (the instance options check theirs): named before any work."""
  if settings.num_workers is not None and settings.num_workers < 1:
    raise ValueError(f"--num_workers={settings.num_workers} must be >= 1 (unset: all cores)")
  if not settings.chunk_size_mb > 0:
    raise ValueError(f"--chunk_size_mb={settings.chunk_size_mb} must be > 0")
  if settings.min_docs_per_chunk < 1:
    raise ValueError(f"--min_docs_per_chunk={settings.min_docs_per_chunk} must be >= 1")


def run(settings):
  """Writes the TFRecords; returns a summary dict. Raises ValueError on bad input."""
  t0 = time.time()
  files = corpus.expand_input_patterns(settings.input_file or "")
  if not settings.vocab_file:
    raise ValueError("--vocab_file is required")
  _check_ranges(settings)
  paths = output_paths(settings.output_file or "", settings.num_output_shards)
  tokenizer = make_tokenizer(settings)
  opts = instance_options(settings, tokenizer)

  index = corpus.index_documents(files, errors=settings.errors)
  if not len(index):
    raise ValueError(f"empty corpus: no non-blank line in {', '.join(files)}")
  num_chunks = chunking.num_chunks(index.total_bytes, chunking.chunk_bytes(settings.chunk_size_mb),
                                   len(index), settings.min_docs_per_chunk)
  chunks = chunking.plan(index.file_id, index.start, settings.random_seed, num_chunks)
  logging.info("%d document(s) in %d file(s), %.1f MB; %d chunk(s)", len(index), len(files),
               index.total_bytes / 1e6, num_chunks)

  num_workers = max(1, settings.num_workers or os.cpu_count() or 1)
  pool = None
  if num_workers > 1 and num_chunks > 1:
    # spawn: the workers import numpy only, not the TensorFlow this process has loaded.
    pool = workers.start(min(num_workers, num_chunks), instances_lib.serialize_chunk, opts)
  writer = ShardedWriter(paths, settings.gzip_compress)
  progress = Progress(int((np.asarray(index.end) - np.asarray(index.start)).sum()))
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
      if not docs:  # possible with few documents per chunk; Beam never sees it either
        continue
      texts = corpus.read_documents(index, docs, errors=settings.errors)
      chunk = tokenize_documents(tokenizer, texts, k, settings.chinese_word_segmenter)
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
  return summarize(len(index), writer.written, totals, time.time() - t0, paths)


def summarize(documents, instances, totals, seconds, paths):
  """The run's summary (both writers): logged and returned as a dict."""
  summary = {
      "documents": documents, "instances": instances, "seconds": seconds,
      "instances_per_second": instances / max(seconds, 1e-9), "files": paths,
      "masked_fraction": totals["masked"] / max(totals["tokens"], 1),
      "random_next_fraction": totals["random_next"] / max(instances, 1),
  }
  logging.info("Wrote %d instances from %d documents to %d file(s) in %.1fs (%.0f instances/s); "
               "masked %.2f%% of tokens, %.1f%% random next sentences: %s",
               instances, documents, len(paths), seconds, summary["instances_per_second"],
               100 * summary["masked_fraction"], 100 * summary["random_next_fraction"],
               ", ".join(paths))
  return summary


def main(argv):
  """argv[1:]: the arguments that are not our flags, i.e. Beam's pipeline options."""
  settings = Settings(**{name: getattr(FLAGS, name) for name in Settings._fields})
  beam_args = argv[1:]
  if not beam_args:
    run(settings)
    return
  from data_prep.pretraining import beam_pipeline  # pylint: disable=g-import-not-at-top
  if not beam_pipeline.runner_of(beam_args):
    raise ValueError(f"unknown argument(s) {beam_args}: not flags of this program; Beam "
                     "pipeline options need --runner (e.g. --runner=DirectRunner)")
  beam_pipeline.run(settings, beam_args)


def console_main():
  """The `bert-create-pretraining-data` command (pyproject.toml's [project.scripts])."""
  define_flags()
  cli.launch(main, REQUIRED_FLAGS, pass_through_unknown=True)


if __name__ == "__main__":
  console_main()
