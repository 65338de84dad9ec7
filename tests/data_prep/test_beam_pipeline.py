"""create_pretraining_data on Apache Beam (DirectRunner): the local writer's records, exactly.

The corpus is the fixture's real text re-cut into short documents with untidy separators
(runs of blank and whitespace-only lines, CRLF lines, no final newline), so that many
documents, chunks and byte ranges are involved in a few seconds.
"""

import array
import collections
import glob
import os
import posixpath
import random
import subprocess
import sys

from apache_beam.io.filesystem import FileMetadata
from apache_beam.io.filesystem import FileSystem
from conftest import REPO
from conftest import UNCASED_VOCAB
from conftest import corpus_text
from conftest import run_command
import pytest
import tensorflow as tf

from data_prep import schema
from data_prep.pretraining import beam_pipeline
from data_prep.pretraining import byte_ranges
from data_prep.pretraining import chunking
from data_prep.pretraining import corpus
from data_prep.pretraining import writer

pytestmark = pytest.mark.large  # trains or runs commands: `make test`, not `make test-fast`

L, P = 64, 10
IN_PROCESS = ["--runner=DirectRunner", "--direct_num_workers=1"]


def _recut(text, seed):
  """Real sentences in documents of 1-12 lines, separated by 1-3 blank or blank-looking
  lines; some CRLF lines; bytes, without a final newline."""
  rng = random.Random(seed)
  lines = [l for l in text.split("\n") if l.strip()]
  out, i = [], 0
  while i < len(lines):
    n = rng.randint(1, 12)
    out.append("\n".join(l + ("\r" if rng.random() < 0.05 else "") for l in lines[i:i + n]))
    out.append(rng.choice(["\n\n", "\n\n\n", "\n \t\n", "\n\n  \n\u3000\n"]))
    i += n
  return "".join(out[:-1]).encode("utf-8")


@pytest.fixture(scope="module")
def two_files(tmp_path_factory):
  """~60 KB in two files (file number is part of a document's identity)."""
  directory = tmp_path_factory.mktemp("corpus")
  text = corpus_text(60_000)
  half = text.find("\n", len(text) // 2)
  (directory / "a.txt").write_bytes(_recut(text[:half], 1))
  (directory / "b.txt").write_bytes(_recut(text[half:], 2))
  return str(directory / "*.txt")


def _settings(input_file, out, **kw):
  base = dict(input_file=input_file, output_file=str(out), vocab_file=UNCASED_VOCAB,
              max_seq_length=L, max_predictions_per_seq=P, dupe_factor=2, num_workers=1,
              chunk_size_mb=0.01, min_docs_per_chunk=4, read_range_mb=0.02)
  base.update(kw)
  return writer.Settings(**base)


def _records(pattern, gzip=False):
  """The multiset of serialized examples in the files of `pattern`."""
  paths = sorted(glob.glob(pattern))
  assert paths, pattern
  return collections.Counter(r.numpy() for r in tf.data.TFRecordDataset(
      paths, compression_type="GZIP" if gzip else ""))


def _same_summary(a, b):
  for name in ("documents", "instances", "masked_fraction", "random_next_fraction"):
    assert a[name] == pytest.approx(b[name]), name


@pytest.fixture(scope="module")
def local_and_beam(two_files, tmp_path_factory):
  out = tmp_path_factory.mktemp("out")
  local = writer.run(_settings(two_files, out / "local.tfrecord"))
  beam = beam_pipeline.run(_settings(two_files, out / "beam.tfrecord", num_workers=None),
                           IN_PROCESS)
  return local, beam, out


def test_same_records_as_the_local_writer(local_and_beam):
  local, beam, out = local_and_beam
  _same_summary(local, beam)
  assert local["documents"] > 40 and local["instances"] > 300
  assert _records(str(out / "beam.tfrecord")) == _records(str(out / "local.tfrecord"))


@pytest.mark.parametrize("flags", [
    dict(do_whole_word_mask=True, random_seed=7),
    dict(gzip_compress=True, num_output_shards=3, use_v2_feature_names=True),
    dict(next_sentence=False, cross_document=True, masking="none"),
])
def test_same_records_with_other_flags_gzip_and_shards(flags, two_files, tmp_path):
  local = writer.run(_settings(two_files, tmp_path / "local.tfrecord", **flags))
  beam = beam_pipeline.run(_settings(two_files, tmp_path / "beam.tfrecord", **flags),
                           IN_PROCESS)
  _same_summary(local, beam)
  shards = flags.get("num_output_shards", 1)
  names = sorted(os.path.basename(p) for p in glob.glob(str(tmp_path / "beam.tfrecord*")))
  assert names == (["beam.tfrecord"] if shards == 1 else
                   [f"beam.tfrecord-{i:05d}-of-{shards:05d}" for i in range(shards)])
  assert beam["files"] == [str(tmp_path / n) for n in names]
  gzip = flags.get("gzip_compress", False)
  assert all(schema.compression_of(str(tmp_path / n)) == ("GZIP" if gzip else "")
             for n in names)
  assert (_records(str(tmp_path / "beam.tfrecord*"), gzip)
          == _records(str(tmp_path / "local.tfrecord*"), gzip))
  assert not [n for n in os.listdir(tmp_path) if n.startswith((".", "beam-temp"))]


def test_chunks_are_a_seeded_hash_of_document_positions():
  """What both writers rely on: chunk = key % n, key order within, every document once."""
  file_ids = array.array("i", [0] * 300 + [1] * 300)
  offsets = array.array("q", list(range(0, 3000, 10)) * 2)
  chunks = list(chunking.plan(file_ids, offsets, 5, 6))
  assert sorted(d for c in chunks for d in c) == list(range(600))
  for k, docs in enumerate(chunks):
    keys = [chunking.document_key(5, file_ids[d], offsets[d]) for d in docs]
    assert all(key % 6 == k for key in keys) and keys == sorted(keys)
    assert 60 < len(docs) < 140  # uniform: 100 expected
  assert list(chunking.plan(file_ids, offsets, 6, 6)) != chunks
  assert chunking.document_key(5, 0, 10) == chunking.document_key(5, 0, 10)  # stable
  assert chunking.num_chunks(10 * 2**20, 2**20, 1000, 32) == 10  # by size
  assert chunking.num_chunks(10 * 2**20, 2**20, 100, 32) == 3  # by documents
  assert chunking.num_chunks(100, 2**20, 5, 32) == 1


def _all_documents(path):
  """The local writer's view: (offset, lines) of every document of a file."""
  index = corpus.index_documents([path], errors="replace")
  texts = corpus.read_documents(index, range(len(index)), errors="replace")
  return list(zip(index.start, texts))


@pytest.mark.parametrize("range_bytes", [1, 2, 3, 7, 64, 1000, 10**9])
def test_byte_ranges_find_every_document_once(range_bytes, tmp_path):
  """Ranges of every size, so some start in a document, in a line, in a blank run, on a
  CRLF, at the file's start and end: together they read the local writer's documents."""
  data = b"\n \n" + _recut(corpus_text(15_000), 3) + b"\n\xff bad \xfe\n\nlast"
  path = tmp_path / "c.txt"
  path.write_bytes(data)
  got = []
  with byte_ranges.open_file(str(path)) as f:
    for start, end in byte_ranges.split(len(data), range_bytes):
      got.extend(byte_ranges.read_range(f, str(path), start, end, errors="replace"))
  assert got == _all_documents(str(path)) and len(got) > 10


def test_many_byte_ranges_give_the_records_of_one(tmp_path):
  path = tmp_path / "one.txt"
  path.write_bytes(_recut(corpus_text(60_000), 4))
  one = beam_pipeline.run(_settings(str(path), tmp_path / "one.tfrecord", read_range_mb=64),
                          IN_PROCESS)
  many = beam_pipeline.run(_settings(str(path), tmp_path / "many.tfrecord", read_range_mb=0.01),
                           IN_PROCESS)
  assert path.stat().st_size > 5 * 0.01 * 2**20  # really many ranges
  _same_summary(one, many)
  assert _records(str(tmp_path / "many.tfrecord")) == _records(str(tmp_path / "one.tfrecord"))


def test_model_garden_loader_reads_the_beam_output(local_and_beam):
  from official.nlp.data import pretrain_dataloader  # the peer's reader
  _, _, out = local_and_beam
  config = pretrain_dataloader.BertPretrainDataConfig(
      input_path=str(out / "beam.tfrecord"), seq_length=L, max_predictions_per_seq=P,
      global_batch_size=8, is_training=False, use_next_sentence_label=True)
  batch = next(iter(pretrain_dataloader.BertPretrainDataLoader(config).load()))
  assert batch["input_word_ids"].shape == (8, L) and batch["input_word_ids"].dtype == tf.int32
  assert batch["masked_lm_positions"].shape == (8, P)
  assert batch["next_sentence_labels"].shape == (8, 1)


def _cli(args, process=True):
  """The command in a process of its own (the runs Beam carries out, whose workers and
  one-line error a shell sees), or, for errors found before any work, in this process
  through its launcher (`conftest.run_command`)."""
  if not process:
    return run_command("data_prep.create_pretraining_data", *args)
  return subprocess.run([sys.executable, "-m", "data_prep.create_pretraining_data"] + args,
                        cwd=REPO, capture_output=True, text=True, timeout=300)


def test_multi_processing_runner_through_the_cli(two_files, local_and_beam, tmp_path):
  """Two worker processes; Beam's options in both spellings (--name=value, --name value)."""
  _, _, out = local_and_beam
  proc = _cli([f"--input_file={two_files}", f"--output_file={tmp_path / 'mp.tfrecord'}",
               f"--vocab_file={UNCASED_VOCAB}", f"--max_seq_length={L}",
               f"--max_predictions_per_seq={P}", "--dupe_factor=2", "--chunk_size_mb=0.01",
               "--min_docs_per_chunk=4", "--read_range_mb=0.02", "--runner=DirectRunner",
               "--direct_running_mode", "multi_processing", "--direct_num_workers=2"])
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "sdk harness" in proc.stderr.lower()  # the options reached Beam: worker processes
  assert "random next sentences" in proc.stderr
  assert _records(str(tmp_path / "mp.tfrecord")) == _records(str(out / "local.tfrecord"))


def test_bad_utf8_names_file_and_line_and_writes_nothing(tmp_path):
  lines = [f"Sentence number {i} of a long file." for i in range(1, 2000)]
  lines[1500] = "Caf\udce9 au lait."  # line 1501: a Latin-1 byte
  for i in range(0, 2000, 7):
    lines[i] = ""
  path = tmp_path / "latin1.txt"
  path.write_bytes("\n".join(lines).encode("utf-8", "surrogateescape"))
  out = tmp_path / "out" / "x.tfrecord"
  args = [f"--input_file={path}", f"--output_file={out}", f"--vocab_file={UNCASED_VOCAB}",
          "--read_range_mb=0.001", "--runner=DirectRunner"]
  proc = _cli(args)
  assert proc.returncode == 1, proc.stderr[-3000:]
  assert "latin1.txt:1501: invalid UTF-8 at byte 3 of the line" in proc.stderr.splitlines()[-1]
  # One line: no worker's traceback of the same error before it, no notices of Beam's
  # optional Google Cloud clients.
  assert "Traceback" not in proc.stderr and "invalid UTF-8" not in proc.stderr.splitlines()[-2]
  assert "apitools" not in proc.stderr and "GCSFileSystem" not in proc.stderr, proc.stderr
  assert not out.parent.exists() or os.listdir(out.parent) == []
  replaced = beam_pipeline.run(
      _settings(str(path), tmp_path / "beam.tfrecord", errors="replace"), IN_PROCESS)
  local = writer.run(_settings(str(path), tmp_path / "local.tfrecord", errors="replace"))
  _same_summary(local, replaced)
  assert _records(str(tmp_path / "beam.tfrecord")) == _records(str(tmp_path / "local.tfrecord"))


@pytest.mark.parametrize("args_and_message", [
    (["--runner=DirectRunner", "--direct_running_mode=bogus"],
     "argument --direct_running_mode: invalid choice: 'bogus'"),  # Beam's own parser
    (["--direct_num_workers=2"], "Beam pipeline options need --runner"),
    (["--dupe_factr=2"], "not flags of this program (did you mean --dupe_factor?)"),
    (["--runner=DirectRunner", "--output_file=a.tfrecord,b.tfrecord"],
     "--runner needs a single --output_file"),
    (["--runner=DirectRunner", "--input_file=/nonexistent/*.txt"], "matches no file"),
    (["--runner=DirectRunner", "--input_file=nosuchfs://bucket/*.txt"],
     "cannot list the input 'nosuchfs://bucket/*.txt': ValueError: Unable to get filesystem"),
])
def test_arguments_reach_beam_or_are_clear_errors(args_and_message, two_files, tmp_path):
  args, message = args_and_message
  out = tmp_path / "o.tfrecord"
  proc = _cli([f"--input_file={two_files}", f"--output_file={out}",
               f"--vocab_file={UNCASED_VOCAB}", "--dupe_factor=1"] + args, process=False)
  assert proc.returncode in (1, 2), proc.stderr[-3000:]
  assert message in proc.stderr, proc.stderr[-3000:]
  assert os.listdir(tmp_path) == []


def test_a_misspelled_flag_under_runner_is_named_not_discarded(two_files, tmp_path):
  """Beam would log "Discarding unparseable args" and run with the flag's default."""
  proc = _cli([f"--input_file={two_files}", f"--output_file={tmp_path / 'o.tfrecord'}",
               f"--vocab_file={UNCASED_VOCAB}", "--runner=DirectRunner",
               "--max_seq_lenght=64", "--direct_num_workers=1"], process=False)
  assert proc.returncode == 1, proc.stderr[-3000:]
  assert ("unknown flag(s) --max_seq_lenght: neither a flag of this program nor a Beam "
          "pipeline option") in proc.stderr.splitlines()[-1]
  assert "Traceback" not in proc.stderr and os.listdir(tmp_path) == []
  with pytest.raises(ValueError, match=r"unexpected argument\(s\) \['stray'\]"):
    beam_pipeline.check_pipeline_args(["--runner=DirectRunner", "stray"])
  beam_pipeline.check_pipeline_args(IN_PROCESS + ["--direct_running_mode", "in_memory",
                                                  "--temp_location=gs://b/t", "--project=p"])


class _ObjectStore(FileSystem):
  """A Beam file system of the object-store kind (no directories), in memory: memfs://.
  Listing under memfs://locked fails as a bucket without the caller's permission does."""

  files = {}

  @classmethod
  def scheme(cls):
    return "memfs"

  def join(self, basepath, *paths):
    return posixpath.join(basepath, *paths)

  def split(self, path):
    return posixpath.split(path)

  def has_dirs(self):
    return False

  def _list(self, dir_or_prefix):
    if dir_or_prefix.startswith("memfs://locked"):
      raise PermissionError(13, "403 caller does not have storage.objects.list access")
    return [FileMetadata(p, len(d)) for p, d in sorted(self.files.items())
            if p.startswith(dir_or_prefix)]

  def exists(self, path):
    return path in self.files

  def metadata(self, path):
    return FileMetadata(path, len(self.files[path]))

  def delete(self, paths):
    for path in paths:
      del self.files[path]

  def _unused(self, *args, **kwargs):
    raise NotImplementedError

  mkdirs = create = open = copy = rename = size = last_updated = _unused


def test_a_file_system_error_is_reported_as_such_not_as_no_file():
  _ObjectStore.files = {"memfs://bucket/a.txt": b"abc"}
  assert byte_ranges.expand_inputs("memfs://bucket/*.txt") == [("memfs://bucket/a.txt", 3)]
  with pytest.raises(corpus.CorpusError, match="'memfs://bucket/b\\*' matches no file"):
    byte_ranges.expand_inputs("memfs://bucket/b*")
  with pytest.raises(OSError) as e:
    byte_ranges.expand_inputs("memfs://locked/*.txt")
  assert "cannot list the input 'memfs://locked/*.txt': PermissionError" in str(e.value)
  assert "storage.objects.list" in str(e.value) and "matches no file" not in str(e.value)


def test_input_expansion_has_the_local_writers_rules(tmp_path, monkeypatch):
  """`expand_inputs` lists through Beam (s3://, hdfs://: what the workers read), by the rules
  of the one local expansion (`tfrecord_io.expand_patterns`): same files, same errors; a
  relative glob too (Beam's local file system matches no bare "*.txt")."""
  for name in ("b.txt", "a.txt", ".hidden.txt", ".a.txt.tmp-123", "sub/c.txt", "c[1].md"):
    (tmp_path / name).parent.mkdir(exist_ok=True)
    (tmp_path / name).write_text(name)
  d = str(tmp_path)
  monkeypatch.chdir(tmp_path)
  for patterns in (f"{d}/*", f"{d}/*.txt", f"{d}/.*", f"{d}/a.txt,{d}/*", f"{d}/.hidden.txt",
                   f"{d}/*/c.txt", f"{d}/sub", f"{d}/", f"{d}/none*", f"{d}/missing.txt",
                   f"{d}/a.txt, {d}/none*", " , ", "*.txt", "a.txt", "./*.txt", "sub/*.txt",
                   "none*", f"{d}/c[1].md", "c[1].md"):
    try:
      want = corpus.expand_input_patterns(patterns)
    except corpus.CorpusError as e:
      with pytest.raises(corpus.CorpusError) as got:
        byte_ranges.expand_inputs(patterns)
      assert str(got.value) == str(e), patterns
      continue
    got = byte_ranges.expand_inputs(patterns)
    assert [path for path, _ in got] == want, patterns
    assert [size for _, size in got] == [os.path.getsize(p) for p in want]
  # An object store: no directories, but a folder marker ("sub/") is no input either.
  _ObjectStore.files = {"memfs://b/sub/": b"", "memfs://b/sub/c.txt": b"c", "memfs://b/.h": b""}
  assert byte_ranges.expand_inputs("memfs://b/*/*") == [("memfs://b/sub/c.txt", 1)]
  with pytest.raises(corpus.CorpusError, match="matches no file"):
    byte_ranges.expand_inputs("memfs://b/*")  # only a hidden file


def test_failed_runs_temporary_directories_are_removed_on_any_file_system(tmp_path):
  """Local (directories, nested, empty: tf.io.gfile) and an object store only Beam knows."""
  for name in ("beam-temp-o.tfrecord-1/x", "beam-temp-o.tfrecord-1/deeper/y",
               "beam-temp-other.tfrecord-2/z", "keep.txt"):
    (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / name).write_text("data")
  (tmp_path / "beam-temp-o.tfrecord-3").mkdir()  # a run that failed before writing
  beam_pipeline._remove_temporary(str(tmp_path / "o.tfrecord"))  # pylint: disable=protected-access
  assert sorted(os.listdir(tmp_path)) == ["beam-temp-other.tfrecord-2", "keep.txt"]
  _ObjectStore.files = {"memfs://b/out/beam-temp-o.tfrecord-1/x": b"", "memfs://b/out/o": b"",
                        "memfs://b/out/beam-temp-p.tfrecord-1/x": b""}
  beam_pipeline._remove_temporary("memfs://b/out/o.tfrecord")  # pylint: disable=protected-access
  assert sorted(_ObjectStore.files) == ["memfs://b/out/beam-temp-p.tfrecord-1/x",
                                        "memfs://b/out/o"]
