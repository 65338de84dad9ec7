"""TFRecord framing and files without TensorFlow, so worker processes can frame records.

A TFRecord file is a sequence of
  uint64 length (little endian) | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)
with `masked_crc = ((crc >> 15) | (crc << 17)) + 0xa282ead8` (mod 2**32), as TensorFlow
writes them. GZIP files are the same bytes in one gzip stream (header mtime 0, so the bytes
are deterministic).
"""

import gzip
import struct

import google_crc32c

_MASK_DELTA = 0xA282EAD8


def masked_crc32c(data):
  crc = google_crc32c.value(data)
  return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def frame(record):
  """One serialized example -> its TFRecord bytes."""
  length = struct.pack("<Q", len(record))
  return b"".join((length, struct.pack("<I", masked_crc32c(length)), record,
                   struct.pack("<I", masked_crc32c(record))))


def read_records(path):
  """Yields the records of an uncompressed or GZIP TFRecord file, checking both CRCs."""
  with open(path, "rb") as raw:
    magic = raw.read(2)
  opener = gzip.open if magic == b"\x1f\x8b" else open
  with opener(path, "rb") as f:
    while True:
      header = f.read(12)
      if not header:
        return
      if len(header) < 12:
        raise ValueError(f"{path}: truncated record header")
      length, length_crc = struct.unpack("<QI", header)
      if masked_crc32c(header[:8]) != length_crc:
        raise ValueError(f"{path}: corrupt record length")
      data, data_crc = f.read(length), f.read(4)
      if len(data) < length or len(data_crc) < 4 or struct.unpack(
          "<I", data_crc)[0] != masked_crc32c(data):
        raise ValueError(f"{path}: corrupt or truncated record")
      yield data


class RecordFile:
  """Appends framed records to a file, optionally in one gzip stream."""

  def __init__(self, path, gzip_compress=False):
    self._raw = open(path, "wb")
    self._out = (gzip.GzipFile(filename="", mode="wb", fileobj=self._raw, compresslevel=6,
                               mtime=0) if gzip_compress else self._raw)

  def write(self, framed_bytes):
    self._out.write(framed_bytes)

  def close(self):
    if self._out is not self._raw:
      self._out.close()
    self._raw.close()
