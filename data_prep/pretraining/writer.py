"""Raw text -> pretraining TFRecords: `run(Settings(...))` on this machine, or with Beam
pipeline options on any Apache Beam runner (`beam_pipeline`); the same records either way.

This machine's writer streams: the corpus is indexed (`corpus`, pass 1), cut into chunks of
about `chunk_size_mb` that are uniform samples of it (`chunking`), and each chunk is read,
tokenized (`tokens`) and turned into instances (`instances.serialize_chunk`) by a pool of
worker processes (`workers`), at most one chunk queued per worker, so memory depends on the
chunk size, not the corpus. The output is byte-identical for any number of workers.
"""

import collections
import contextlib
import difflib
import functools
import logging as logging_lib
import os
import time

from absl import flags
from absl import logging
import numpy as np

from data_prep import workers
from data_prep.pretraining import chunking
from data_prep.pretraining import corpus
from data_prep.pretraining import instances as instances_lib
from data_prep.pretraining import outputs
from data_prep.pretraining import settings as settings_lib
from data_prep.pretraining import tokens

Settings = settings_lib.Settings


def run(settings, beam_args=()):
  """Writes the TFRecords; returns a summary dict. Raises ValueError on bad input.

  Args:
    beam_args: Apache Beam pipeline options (--runner=... among them), as the command line
      gave them; none: the run is this machine's.
  """
  if not beam_args:
    return _run_local(settings)
  with _without_beam_cloud_notices():
    from data_prep.pretraining import beam_pipeline  # pylint: disable=g-import-not-at-top
  if not beam_pipeline.runner_of(beam_args):
    raise ValueError(f"unknown argument(s) {beam_args}: not flags of this program"
                     f"{_did_you_mean(beam_args)}; Beam pipeline options need --runner (e.g. "
                     "--runner=DirectRunner)")
  return beam_pipeline.run(settings, beam_args)


# What Beam's import logs where its optional Google Cloud clients are not installed (a path on
# gs:// then fails with Beam's own clear error); on every run, they read as trouble.
_BEAM_CLOUD_NOTICES = {
    "": "apitools not found",
    "apache_beam.io.filesystems": "Failed to import GCSFileSystem",
    "apache_beam.io.gcp.bigquery": "bigquery_storage_v1",
}


def _not_containing(text, record):
  return text not in record.getMessage()


@contextlib.contextmanager
def _without_beam_cloud_notices():
  filters = []
  for name, text in _BEAM_CLOUD_NOTICES.items():
    logger = logging_lib.getLogger(name or None)
    notice = functools.partial(_not_containing, text)
    logger.addFilter(notice)
    filters.append((logger, notice))
  try:
    yield
  finally:
    for logger, notice in filters:
      logger.removeFilter(notice)


def _did_you_mean(arguments):
  """", did you mean --dupe_factor?" for misspelled flags of this program (absl's hint)."""
  names = list(flags.FLAGS)
  close = []
  for argument in arguments:
    name = argument.lstrip("-").split("=", 1)[0]
    if argument.startswith("-") and name:
      close += [f"--{m}" for m in difflib.get_close_matches(name, names, n=1) if m not in close]
  return f" (did you mean {', '.join(close)}?)" if close else ""


def _run_local(settings):
  t0 = time.time()
  files = corpus.expand_input_patterns(settings.input_file or "")
  if not settings.vocab_file:
    raise ValueError("--vocab_file is required")
  settings_lib.check_ranges(settings)
  paths = outputs.output_paths(settings.output_file or "", settings.num_output_shards)
  tokenizer = tokens.make_tokenizer(settings)
  opts = settings_lib.instance_options(settings, tokenizer)

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
  writer = outputs.ShardedWriter(paths, settings.gzip_compress)
  progress = outputs.Progress(int((np.asarray(index.end) - np.asarray(index.start)).sum()))
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
      chunk = tokens.tokenize_documents(tokenizer, texts, k, settings.chinese_word_segmenter)
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
  return outputs.summarize(len(index), writer.written, totals, time.time() - t0, paths)
