"""create_pretraining_data as an Apache Beam pipeline: the same records, on any runner.

  python -m data_prep.create_pretraining_data --runner=DirectRunner --direct_num_workers=2 \
    --direct_running_mode=multi_processing --input_file=... --output_file=... --vocab_file=...

Steps (the local writer's, distributed):
  1. the inputs are matched on the driver (any Beam filesystem) and cut into byte ranges of
     `--read_range_mb` (`byte_ranges`), spread over the workers (Reshuffle);
  2. pass 1 counts the documents of every range (and checks the UTF-8): with the corpus size,
     this fixes the number of chunks (`chunking.num_chunks`);
  3. pass 2 reads the documents again, keys each by the seeded hash of its position, and
     groups them by chunk; a chunk is sorted by key, tokenized (`tokens.tokenize_documents`,
     one tokenizer per worker) and turned into instances (`instances.serialize_chunk`) with
     chunk k's own random streams: the chunks, and so the records, are the local writer's;
  4. Beam's TFRecord sink writes the shards under a temporary directory and renames them only
     when all are complete, so a failed pipeline leaves no complete-looking output.
The counts of the summary come from Beam metrics.
"""

import contextlib
import logging as logging_lib
import re
import time

from absl import logging
import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics.metric import Metrics
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.options.pipeline_options import StandardOptions

from data_prep import tfrecord_io
from data_prep.pretraining import byte_ranges
from data_prep.pretraining import chunking
from data_prep.pretraining import corpus
from data_prep.pretraining import instances as instances_lib
from data_prep.pretraining import outputs
from data_prep.pretraining import settings as settings_lib
from data_prep.pretraining import tokens

NAMESPACE = "create_pretraining_data"
COUNTERS = ("documents", "instances", "masked", "tokens", "random_next")


def runner_of(beam_args):
  """The --runner among Beam's pipeline options, or None."""
  return PipelineOptions(beam_args).view_as(StandardOptions).runner


def check_pipeline_args(beam_args):
  """ValueError naming the arguments that are no Beam pipeline option: the command line gives
  Beam every argument that is not our flag, and Beam would only log "Discarding unparseable
  args" and run without them, so a misspelled flag of ours would silently keep its default."""
  parsers = []  # Beam's own parser, with every pipeline option it knows
  PipelineOptions([]).get_all_options(add_extra_args_fn=parsers.append)
  _, unknown = parsers[0].parse_known_args(list(beam_args))
  flags = [arg.split("=", 1)[0] for arg in unknown if arg.startswith("-")]
  if flags:
    raise ValueError(f"unknown flag(s) {', '.join(flags)}: neither a flag of this program nor "
                     "a Beam pipeline option (see --helpshort)")
  if unknown:
    raise ValueError(f"unexpected argument(s) {unknown}: this program takes flags only")


def _runner(options):
  """--runner=DirectRunner as Beam's Python runner (the FnApiRunner, which honours
  --direct_num_workers and --direct_running_mode); Beam 2.77's DirectRunner would first try
  to download and start its Go runner, Prism. Other runners: None (Beam picks by name)."""
  if options.view_as(StandardOptions).runner not in ("DirectRunner", "direct"):
    return None
  # pylint: disable=g-import-not-at-top
  from apache_beam.portability.api import beam_provision_api_pb2
  from apache_beam.runners.portability.fn_api_runner import fn_runner
  from apache_beam.runners.portability.portable_runner import JobServiceHandle
  # As SwitchingDirectRunner does: workers in other processes get the options this way.
  encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
  return fn_runner.FnApiRunner(provision_info=fn_runner.ExtendedProvisionInfo(
      beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded)))


class _CountDocuments(beam.DoFn):
  """Pass 1: documents per byte range (and every line's UTF-8 checked)."""

  def __init__(self, errors):
    self._errors = errors
    self._documents = Metrics.counter(NAMESPACE, "documents")

  def process(self, element):
    _, path, start, end = element
    with byte_ranges.open_file(path) as f:
      n = sum(1 for _ in byte_ranges.read_range(f, path, start, end, self._errors))
    self._documents.inc(n)
    yield n


class _KeyDocuments(beam.DoFn):
  """Pass 2: (chunk, (key, file, offset, lines)) for every document of a byte range."""

  def __init__(self, errors, seed):
    self._errors = errors
    self._seed = seed

  def process(self, element, num_chunks):
    file_id, path, start, end = element
    with byte_ranges.open_file(path) as f:
      for offset, lines in byte_ranges.read_range(f, path, start, end, self._errors):
        key = chunking.document_key(self._seed, file_id, offset)
        yield key % num_chunks, (key, file_id, offset, lines)


class _BuildChunk(beam.DoFn):
  """One chunk's documents -> its serialized examples (unframed: the sink frames them)."""

  def __init__(self, settings, opts):
    self._settings = settings
    self._opts = opts
    self._tokenizer = None
    self._counters = {name: Metrics.counter(NAMESPACE, name) for name in COUNTERS[1:]}

  def setup(self):
    self._tokenizer = tokens.make_tokenizer(self._settings)

  def process(self, element):
    chunk_index, docs = element
    docs = sorted(docs, key=lambda d: chunking.sort_key(*d[:3]))
    chunk = tokens.tokenize_documents(self._tokenizer, [d[3] for d in docs], chunk_index,
                                      self._settings.chinese_word_segmenter)
    records, stats = instances_lib.serialize_chunk(chunk, self._opts)
    for name, counter in self._counters.items():
      counter.inc(stats.get(name, 0))
    for framed in records:
      yield framed[12:-4]  # 8-byte length, 4-byte crc | example | 4-byte crc


def build(p, settings, opts, files, output):
  """The pipeline's transforms on `p`; `files`: [(path, size)] (`byte_ranges.expand_inputs`)."""
  range_bytes = max(1, int(settings.read_range_mb * 2**20))
  ranges = [(file_id, path, start, end) for file_id, (path, size) in enumerate(files)
            for start, end in byte_ranges.split(size, range_bytes)]
  total_bytes = sum(size for _, size in files)
  chunk_size = chunking.chunk_bytes(settings.chunk_size_mb)
  min_docs = settings.min_docs_per_chunk
  ranges = (p | "Ranges" >> beam.Create(ranges, reshuffle=False)
            | "Spread" >> beam.Reshuffle())
  num_chunks = (ranges
                | "CountDocuments" >> beam.ParDo(_CountDocuments(settings.errors))
                | "Total" >> beam.CombineGlobally(sum)
                | "NumChunks" >> beam.Map(
                    lambda n: chunking.num_chunks(total_bytes, chunk_size, n, min_docs)))
  num_shards = settings.num_output_shards
  return (ranges
          | "KeyDocuments" >> beam.ParDo(_KeyDocuments(settings.errors, settings.random_seed),
                                         num_chunks=beam.pvalue.AsSingleton(num_chunks))
          | "GroupByChunk" >> beam.GroupByKey()
          | "BuildChunk" >> beam.ParDo(_BuildChunk(settings, opts))
          | "Write" >> beam.io.WriteToTFRecord(
              output, num_shards=num_shards,
              shard_name_template="" if num_shards == 1 else "-SSSSS-of-NNNNN",
              compression_type=(CompressionTypes.GZIP if settings.gzip_compress
                                else CompressionTypes.UNCOMPRESSED)))


def _counters(result):
  totals = dict.fromkeys(COUNTERS, 0)
  for c in result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))["counters"]:
    value = c.committed if c.committed is not None else c.attempted
    totals[c.key.metric.name] += value or 0
  return totals


def _user_error(e):
  """A worker's bad-input error, wherever the runner re-raises it (in-process: the error with
  " [while running 'step']" appended; other processes/machines: the traceback as text)."""
  text = str(e)
  if not isinstance(e, corpus.CorpusError):
    found = re.findall(r"^(?:[\w.]+\.)?CorpusError: (.*)$", text, re.M)
    if not found:
      return None
    text = found[-1]
  return corpus.CorpusError(re.sub(r"( \[while running '[^\]]*'\])+$", "", text))


class _DropUserErrors(logging_lib.Filter):
  """Drops a worker's log of a bad-input error with its traceback: the driver re-raises the
  error, which the command reports in one line."""

  def filter(self, record):
    error = record.exc_info[1] if record.exc_info else None
    return not (isinstance(error, Exception) and _user_error(error) is not None)


@contextlib.contextmanager
def _quiet_user_errors():
  """While an in-process runner (DirectRunner) runs: its workers log on these loggers."""
  loggers = [logging_lib.getLogger(name) for name in _WORKER_LOGGERS]
  drop = _DropUserErrors()
  for logger in loggers:
    logger.addFilter(drop)
  try:
    yield
  finally:
    for logger in loggers:
      logger.removeFilter(drop)


# Where Beam's in-process workers log a failed bundle (with the traceback).
_WORKER_LOGGERS = ("apache_beam.runners.worker.bundle_processor",
                   "apache_beam.runners.worker.sdk_worker",
                   "apache_beam.runners.common")


def _remove(paths):
  paths = [p for p in paths if FileSystems.exists(p)]
  if paths:
    FileSystems.delete(paths)


def _remove_temporary(output):
  """Beam's sink leaves its temporary directory (beam-temp-NAME-UUID) when a run fails.

  `tf.io.gfile` removes the directories, files and all, where it knows the file system (a
  local disk, gs://); Beam's FileSystems cannot (they list no directories). Where only Beam
  knows the scheme (s3://, hdfs://, azfs://), Beam's FileSystems remove the files in them.
  """
  directory, name = FileSystems.split(output)
  pattern = FileSystems.join(directory, f"beam-temp-{name}-*")
  fs = tfrecord_io.gfile()
  try:
    try:
      found = fs.glob(pattern)
    except Exception:  # pylint: disable=broad-except  (a scheme tf.io.gfile does not know)
      found = None
    if found is not None:
      for path in found:
        fs.rmtree(path)
    else:
      _remove([m.path for m in FileSystems.match([FileSystems.join(pattern, "*")])[0]
               .metadata_list])
  except Exception:  # pylint: disable=broad-except  (best effort; the error that matters is raised)
    logging.warning("could not remove %s", pattern)


def run(settings, beam_args):
  """Runs the pipeline to completion; returns the local writer's summary dict."""
  t0 = time.time()
  check_pipeline_args(beam_args)
  if settings.num_workers is not None:
    beam_args = list(beam_args) + [f"--num_workers={settings.num_workers}"]
  options = PipelineOptions(beam_args)
  options.get_all_options()  # Beam's checks of its own options (a usage error), before any work
  output = (settings.output_file or "").strip()
  if "," in output:
    raise ValueError("--runner needs a single --output_file (use --num_output_shards for "
                     f"several files); got {settings.output_file!r}")
  if not settings.vocab_file:
    raise ValueError("--vocab_file is required")
  settings_lib.check_ranges(settings)
  if not settings.read_range_mb > 0:
    raise ValueError(f"--read_range_mb={settings.read_range_mb} must be > 0")
  paths = outputs.output_paths(output, settings.num_output_shards)
  files = byte_ranges.expand_inputs(settings.input_file or "")
  # Local paths as absolute: workers may run elsewhere than the driver's directory.
  settings = settings._replace(vocab_file=tfrecord_io.absolute(settings.vocab_file))
  files = [(tfrecord_io.absolute(path), size) for path, size in files]
  # The vocabulary's special tokens are checked here, before any work.
  opts = settings_lib.instance_options(settings, tokens.make_tokenizer(settings))
  logging.info("Beam pipeline (%s): %d file(s), %.1f MB", runner_of(beam_args), len(files),
               sum(size for _, size in files) / 1e6)

  p = beam.Pipeline(runner=_runner(options), options=options)
  build(p, settings, opts, files, tfrecord_io.absolute(output))
  try:
    with _quiet_user_errors():
      result = p.run()
      result.wait_until_finish()
  except BaseException as e:
    _remove_temporary(tfrecord_io.absolute(output))
    error = _user_error(e) if isinstance(e, Exception) else None
    if error is not None:
      raise error from None
    raise
  totals = _counters(result)
  if not totals["documents"] or not totals["instances"]:
    _remove(paths)
    names = ", ".join(path for path, _ in files)
    raise ValueError(f"empty corpus: no non-blank line in {names}" if not totals["documents"]
                     else f"no instances: the corpus {names} has no tokens")
  return outputs.summarize(totals["documents"], totals["instances"], totals, time.time() - t0,
                           paths)
