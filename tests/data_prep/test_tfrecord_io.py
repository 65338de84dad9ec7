"""Our TFRecord framing is TensorFlow's, byte for byte; gzip files read back in TF; files go
through tf.io.gfile (ram://, TensorFlow's in-memory filesystem, stands in for gs://)."""

import os
import subprocess
import sys
import uuid

import pytest
import tensorflow as tf

from data_prep import schema
from data_prep import tfrecord_io

RECORDS = [b"", b"x", b"hello world" * 50, bytes(range(256)) * 300]


def _read(path):
  """TensorFlow's reader as the oracle (it checks both CRCs of every record)."""
  compression = schema.compression_of(str(path))
  return [r.numpy() for r in tf.data.TFRecordDataset(str(path), compression_type=compression)]


def _write(path, gzip_compress=False):
  with tfrecord_io.RecordFile(str(path), gzip_compress=gzip_compress) as f:
    for r in RECORDS[:2]:
      f.write(r)  # one record at a time...
    f.write_framed(b"".join(tfrecord_io.frame(r) for r in RECORDS[2:]))  # ...or pre-framed


def test_framing_equals_tensorflow_writer(tmp_path):
  theirs = tmp_path / "tf.tfrecord"
  with tf.io.TFRecordWriter(str(theirs)) as w:
    for r in RECORDS:
      w.write(r)
  ours = tmp_path / "ours.tfrecord"
  _write(ours)
  assert ours.read_bytes() == theirs.read_bytes()
  assert _read(ours) == RECORDS


def test_gzip_is_readable_by_tensorflow_and_deterministic(tmp_path):
  paths = []
  for name in ("a", "b"):
    path = tmp_path / f"{name}.tfrecord.gz"
    _write(path, gzip_compress=True)
    paths.append(path)
  assert paths[0].read_bytes() == paths[1].read_bytes()
  got = [r.numpy() for r in tf.data.TFRecordDataset(str(paths[0]), compression_type="GZIP")]
  assert got == RECORDS
  assert _read(paths[0]) == RECORDS


def test_corruption_is_detected(tmp_path):
  path = tmp_path / "x.tfrecord"
  data = bytearray(tfrecord_io.frame(b"payload" * 10))
  data[20] ^= 0xFF
  path.write_bytes(bytes(data))
  with pytest.raises(tf.errors.DataLossError, match="corrupted record"):
    _read(path)


def test_remote_paths_compression_and_round_trip():
  root = f"ram://{uuid.uuid4().hex}"
  plain, gz = f"{root}/sub/plain.tfrecord", f"{root}/sub/gz.tfrecord"
  _write(plain)
  _write(gz, gzip_compress=True)
  assert schema.compression_of(plain) == ""
  assert schema.compression_of(gz) == "GZIP"
  assert _read(gz) == RECORDS
  assert [r.numpy() for r in tf.data.TFRecordDataset(gz, compression_type="GZIP")] == RECORDS
  assert sorted(tf.io.gfile.listdir(f"{root}/sub")) == ["gz.tfrecord", "plain.tfrecord"]
  with pytest.raises(FileNotFoundError, match="nothing.tfrecord"):
    schema.compression_of(f"{root}/nothing.tfrecord")


def test_text_round_trip_and_missing_file(tmp_path):
  path = str(tmp_path / "d" / "t.txt")
  tfrecord_io.write_text(path, "héllo\r\nwörld\n")
  with tfrecord_io.open_file(path, "r", newline="") as f:
    assert f.read() == "héllo\r\nwörld\n"  # no newline translation on write
  with tfrecord_io.open_file(path) as f:
    f.seek(6)  # "héllo" is 6 bytes
    assert f.read() == "\r\nwörld\n".encode()
  with pytest.raises(FileNotFoundError, match="nope.txt"):
    tfrecord_io.open_file(str(tmp_path / "nope.txt"))


def test_a_failed_write_leaves_nothing(tmp_path):
  path = tmp_path / "o.tfrecord"
  with pytest.raises(RuntimeError):
    with tfrecord_io.RecordFile(str(path)) as f:
      f.write(b"half")
      assert list(tmp_path.iterdir()) == [tmp_path / tfrecord_io.temporary_path("o.tfrecord")]
      raise RuntimeError("interrupted")
  assert not list(tmp_path.iterdir())


def test_a_folder_at_the_output_path_is_named_and_leaves_nothing(tmp_path):
  folder = tmp_path / "o.txt"
  folder.mkdir()
  with pytest.raises(ValueError, match="o.txt is a folder: an output file cannot replace it"):
    tfrecord_io.write_text(str(folder), "x")
  # A folder made there while the file was written: the rename fails, the temporary goes.
  with pytest.raises(tf.errors.OpError):
    with tfrecord_io.AtomicFile(str(tmp_path / "p.txt"), "w") as f:
      f.write("x")
      (tmp_path / "p.txt").mkdir()
  assert sorted(p.name for p in tmp_path.iterdir()) == ["o.txt", "p.txt"]


def test_an_empty_output_still_exists(tmp_path):
  assert tfrecord_io.write_examples(str(tmp_path / "e.tfrecord"), (), {"x": []}) == 0
  assert (tmp_path / "e.tfrecord").read_bytes() == b""


def _dead_pid():
  """The id of a process that has exited (and been reaped)."""
  proc = subprocess.Popen([sys.executable, "-c", "pass"])
  proc.wait()
  return proc.pid


def test_every_atomic_writer_removes_what_killed_writers_left(tmp_path):
  """A writer killed with -9 leaves its hidden `.NAME.tmp-PID` file (or folder); the next
  atomic write of NAME removes it, keeping a live process's, another name's, a non-pid's."""
  dead, dead_too = _dead_pid(), _dead_pid()
  stale = [tmp_path / f".o.txt.tmp-{dead}", tmp_path / f".o.txt.tmp-{dead_too}"]
  stale[0].write_bytes(b"half")
  (stale[1] / "nested").mkdir(parents=True)  # a folder built beside, as best/'s
  kept = [tmp_path / f".o.txt.tmp-{os.getppid()}", tmp_path / f".x.txt.tmp-{dead}",
          tmp_path / ".o.txt.tmp-notapid", tmp_path / ".o.txt.tmp-0"]
  for path in kept:
    path.write_bytes(b"")
  tfrecord_io.write_text(str(tmp_path / "o.txt"), "done")
  assert not any(p.exists() for p in stale) and all(p.exists() for p in kept)
  assert (tmp_path / "o.txt").read_text() == "done"
  assert tfrecord_io.remove_stale_temporaries([f"ram://{uuid.uuid4().hex}/o.txt"]) == []


def test_copy_file_is_atomic(tmp_path):
  source = tmp_path / "vocab.txt"
  source.write_bytes(b"[PAD]\r\n[UNK]\n")
  out = tmp_path / "model" / "vocab.txt"
  tfrecord_io.copy_file(str(source), str(out))
  assert out.read_bytes() == source.read_bytes() and os.listdir(out.parent) == ["vocab.txt"]
  with pytest.raises(Exception, match="missing.txt"):
    tfrecord_io.copy_file(str(tmp_path / "missing.txt"), str(out))
  assert out.read_bytes() == source.read_bytes() and os.listdir(out.parent) == ["vocab.txt"]
