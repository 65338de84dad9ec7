"""SQuAD v1.1 / v2.0 JSON -> the original run_squad.py's TFRecords, plus prediction metadata
(`FILE.meta.jsonl`, `records`): `run(Settings(...))`, for `create_squad_data`,
`official_bert.tasks.squad_job`'s feature cache and `official_bert.api.question_answerer`.

Paragraphs are read and tokenized here, then cut into windows by worker processes in chunks of
whole paragraphs (`features.build_chunk`); every file is written under a temporary name and
renamed when complete (`tfrecord_io`).
"""

import collections
import gc
import json
import os
import time

from absl import logging

from data_prep import tfrecord_io
from data_prep import workers
from data_prep.squad import features as features_lib
from data_prep.squad import reader as squad_reader
from data_prep.squad import records as squad_schema

# The one declaration of the defaults: the command's flags take theirs from here.
_DEFAULTS = {
    "do_lower_case": True, "max_seq_length": 384, "doc_stride": 128, "max_query_length": 64,
    "version_2_with_negative": False, "is_training": True,
    "num_workers": None,  # `_start_pool`: all cores for big inputs, else this process
    "articles": "", "output_json_file": None, "examples_per_chunk": 256}
Settings = collections.namedtuple("Settings", ["input_file", "output_file", "vocab_file",
                                               *_DEFAULTS], defaults=tuple(_DEFAULTS.values()))
REQUIRED_FLAGS = ("input_file", "output_file", "vocab_file")


def _plan(paragraphs, examples, tokenized, query_ids, answer_ids, settings, examples_per_chunk):
  """Chunks of whole paragraphs with their questions, each with its first unique_id."""
  chunks, para_data, ex_data, base, n_features = [], [], [], squad_schema.UNIQUE_ID_BASE, 0
  by_paragraph = collections.defaultdict(list)
  for i, ex in enumerate(examples):
    by_paragraph[ex.paragraph_index].append(i)
  order = sorted(by_paragraph)
  for k in order:
    sub_ids, tok_to_orig, orig_to_tok = tokenized[k]
    para_data.append(features_lib.ParagraphData(
        k, sub_ids, tok_to_orig, orig_to_tok,
        None if settings.is_training else paragraphs[k].doc_tokens))
    for i in by_paragraph[k]:
      ex = examples[i]
      ex_data.append(features_lib.ExampleData(
          i, ex.qas_id, ex.question_text, k, query_ids[i],
          answer_ids[i] if answer_ids else None, ex.start_position, ex.end_position,
          ex.is_impossible))
      n_features += features_lib.num_windows(len(sub_ids), len(query_ids[i]), settings)
    if len(ex_data) >= examples_per_chunk or k == order[-1]:
      chunks.append(features_lib.Chunk(base, para_data, ex_data))
      base = squad_schema.UNIQUE_ID_BASE + n_features
      para_data, ex_data = [], []
  return chunks, n_features


def run(settings, input_name=None):
  """Writes the TFRecord and its metadata; returns a summary dict. ValueError on bad input.
  `input_name`: how messages name the input (the Python API's examples: "x", not the
  temporary file they were written to); default its path."""
  # Hundreds of thousands of small long-lived objects (words, tokens) and no reference cycles:
  # the cyclic collector would rescan them again and again (a third of the run time).
  enabled = gc.isenabled()
  gc.disable()
  try:
    return _run(settings, input_name)
  finally:
    if enabled:
      gc.enable()


def _run(settings, input_name):
  from data_prep import tokenization  # pylint: disable=g-import-not-at-top  (TF: main only)
  t0 = time.time()
  for name in REQUIRED_FLAGS:
    if not getattr(settings, name):
      raise ValueError(f"--{name} is required")
  feature_settings = features_lib.Settings(settings.max_seq_length, settings.doc_stride,
                                           settings.max_query_length, settings.is_training)
  features_lib.validate(feature_settings)
  vocab = tokenization.load_vocab(settings.vocab_file)
  tokenization.check_special_tokens(vocab, settings.vocab_file, ("[UNK]", "[CLS]", "[SEP]"))
  # id -> token as the original's inv_vocab (prediction metadata holds token strings).
  vocab_tokens = None if settings.is_training else {i: t for t, i in vocab.items()}
  worker_args = (feature_settings, vocab["[CLS]"], vocab["[SEP]"], vocab_tokens)
  pool = _start_pool(settings.num_workers, worker_args, settings.input_file)
  try:
    skipped = []
    paragraphs, examples, stats = squad_reader.read_squad(
        settings.input_file, settings.is_training, settings.version_2_with_negative,
        settings.articles, skipped)
    name = input_name or settings.input_file
    _log_reader_stats(name, stats, settings.is_training, skipped)
    if not examples:
      raise ValueError(f"{name}: no usable questions" + (
          f": every answer text is not at its answer_start in its context (questions "
          f"{_ids(skipped)})" if skipped and len(skipped) == stats["questions"] else ""))
    tokenizer = tokenization.FullTokenizer(settings.vocab_file, settings.do_lower_case)
    t_read = time.time()
    tokenized = features_lib.tokenize_paragraphs(paragraphs, tokenizer.encode_batch)
    query_ids = [q[:settings.max_query_length] for q in features_lib.tokenize_texts(
        [ex.question_text for ex in examples], tokenizer.encode_batch)]
    answer_ids = (features_lib.tokenize_texts([ex.orig_answer_text for ex in examples],
                                              tokenizer.encode_batch)
                  if settings.is_training else None)
    chunks, n_features = _plan(paragraphs, examples, tokenized, query_ids, answer_ids,
                               feature_settings, settings.examples_per_chunk)
    t_tok = time.time()
    source = tfrecord_io.gfile().stat(settings.input_file)
    header = {
        "format": squad_schema.FORMAT, "input_file": tfrecord_io.absolute(settings.input_file),
        # The input as read (a file replaced under the same name is another input) and the
        # vocabulary's content (run_squad refuses records of another vocabulary).
        "input_size": source.length, "input_mtime_nsec": source.mtime_nsec,
        "vocab_sha256": squad_schema.vocab_fingerprint(settings.vocab_file),
        "articles": settings.articles, "vocab_file": tfrecord_io.absolute(settings.vocab_file),
        # The slice's own SQuAD file (--output_json_file): run_squad scores against it.
        "slice_file": (tfrecord_io.absolute(settings.output_json_file)
                       if settings.output_json_file else None),
        "do_lower_case": settings.do_lower_case, "max_seq_length": settings.max_seq_length,
        "doc_stride": settings.doc_stride, "max_query_length": settings.max_query_length,
        "version_2_with_negative": settings.version_2_with_negative,
        "is_training": settings.is_training, "num_examples": len(examples),
        "num_features": n_features, "unique_id_base": squad_schema.UNIQUE_ID_BASE,
        "reader": dict(stats)}
    results = (pool.imap(workers.call, chunks) if pool and len(chunks) > 1 else
               (features_lib.build_chunk(c, *worker_args) for c in chunks))
    totals = _write(settings.output_file, results, header)
  finally:
    if pool:
      pool.terminate()
      pool.join()
  if settings.output_json_file:
    _write_json_slice(settings)
  seconds = time.time() - t0
  summary = dict(header, seconds=seconds, features_per_second=n_features / max(seconds, 1e-9),
                 read_seconds=t_read - t0, tokenize_seconds=t_tok - t_read,
                 build_seconds=time.time() - t_tok, counts=dict(totals),
                 metadata_file=squad_schema.metadata_path(settings.output_file))
  logging.info("Wrote %d features from %d questions to %s (+ %s) in %.1fs (%.0f features/s): "
               "%s", n_features, len(examples), settings.output_file,
               os.path.basename(summary["metadata_file"]), seconds,
               summary["features_per_second"], dict(totals))
  return summary


AUTO_WORKERS_MIN_BYTES = 10 * 2**20  # below, booting workers (~1 s) costs more than it saves


def _start_pool(num_workers, worker_args, input_file):
  """Worker processes, started first so that they boot while this process reads and
  tokenizes. spawn: they import numpy and data_prep.squad.features only, not TensorFlow.

  num_workers None: all cores for inputs of AUTO_WORKERS_MIN_BYTES or more (train-v1.1.json
  is 30 MB), else none (dev-v1.1.json, 5 MB, is done in about 2 s by this process alone).
  """
  if num_workers is None:
    fs = tfrecord_io.gfile()
    big = (fs.exists(input_file) and not fs.isdir(input_file) and
           fs.stat(input_file).length >= AUTO_WORKERS_MIN_BYTES)
    num_workers = (os.cpu_count() or 1) if big else 1
  if max(1, num_workers) == 1:
    return None
  return workers.start(num_workers, features_lib.build_chunk, *worker_args)


def _ids(ids, shown=3):
  return ", ".join(ids[:shown]) + (", ..." if len(ids) > shown else "")


def _log_reader_stats(path, stats, is_training, skipped=()):
  if stats["skipped_answer_mismatch"]:
    logging.warning("%s: skipped %d question(s) whose answer text is not at its offset%s",
                    path, stats["skipped_answer_mismatch"],
                    f" (questions {_ids(list(skipped))})" if skipped else "")
  if stats["skipped_empty_context"]:
    logging.warning("%s: %d question(s) with an empty context (%s)", path,
                    stats["skipped_empty_context"],
                    "skipped" if is_training else "they get the empty answer")
  if is_training and stats["multiple_answers"]:
    logging.info("%s: %d question(s) have several answers; training uses the first", path,
                 stats["multiple_answers"])


def _write(output_file, results, header):
  """Writes the header, then each chunk's records and metadata lines; renames when done."""
  totals = collections.Counter()
  files = [tfrecord_io.RecordFile(output_file)]
  try:
    files.append(tfrecord_io.AtomicFile(squad_schema.metadata_path(output_file), "w"))
    records_file, meta_file = files
    meta_file.write(json.dumps(header) + "\n")
    for records, lines, counts in results:
      records_file.write_framed(b"".join(tfrecord_io.frame(r) for r in records))
      if lines:
        meta_file.write("\n".join(lines) + "\n")
      totals.update(counts)
    if totals["features"] != header["num_features"]:
      raise AssertionError(f"planned {header['num_features']} features, built "
                           f"{totals['features']}")
  except BaseException:
    for f in files:
      f.abort()
    raise
  for f in files:
    f.commit()
  return totals


def _write_json_slice(settings):
  dataset = squad_reader.load_json(settings.input_file)
  dataset["data"] = squad_reader.select_articles(dataset["data"], settings.articles)
  tfrecord_io.write_text(settings.output_json_file, json.dumps(dataset))
