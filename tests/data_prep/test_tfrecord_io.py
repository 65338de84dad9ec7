"""Our TFRecord framing is TensorFlow's, byte for byte; gzip files read back in TF."""

import pytest
import tensorflow as tf

from data_prep import tfrecord_io

RECORDS = [b"", b"x", b"hello world" * 50, bytes(range(256)) * 300]


def test_framing_equals_tensorflow_writer(tmp_path):
  theirs = tmp_path / "tf.tfrecord"
  with tf.io.TFRecordWriter(str(theirs)) as w:
    for r in RECORDS:
      w.write(r)
  ours = tmp_path / "ours.tfrecord"
  f = tfrecord_io.RecordFile(str(ours))
  f.write(b"".join(tfrecord_io.frame(r) for r in RECORDS))
  f.close()
  assert ours.read_bytes() == theirs.read_bytes()
  assert list(tfrecord_io.read_records(str(ours))) == RECORDS


def test_gzip_is_readable_by_tensorflow_and_deterministic(tmp_path):
  paths = []
  for name in ("a", "b"):
    path = tmp_path / f"{name}.tfrecord.gz"
    f = tfrecord_io.RecordFile(str(path), gzip_compress=True)
    f.write(b"".join(tfrecord_io.frame(r) for r in RECORDS))
    f.close()
    paths.append(path)
  assert paths[0].read_bytes() == paths[1].read_bytes()
  got = [r.numpy() for r in tf.data.TFRecordDataset(str(paths[0]), compression_type="GZIP")]
  assert got == RECORDS
  assert list(tfrecord_io.read_records(str(paths[0]))) == RECORDS


def test_corruption_is_detected(tmp_path):
  path = tmp_path / "x.tfrecord"
  data = bytearray(tfrecord_io.frame(b"payload" * 10))
  data[20] ^= 0xFF
  path.write_bytes(bytes(data))
  with pytest.raises(ValueError, match="x.tfrecord: corrupt"):
    list(tfrecord_io.read_records(str(path)))
