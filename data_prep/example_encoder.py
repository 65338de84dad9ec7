"""Serializes batches of fixed-schema `tf.train.Example`s with numpy, no TensorFlow.

Building a `tf.train.Example` proto per instance costs tens of microseconds in Python; the wire
format for int64/float lists is simple enough to emit directly. Layout (protobuf wire format):

  Example   = 0x0a len Features
  Features  = (0x0a len MapEntry)*            # map<string, Feature>, field 1
  MapEntry  = 0x0a len key 0x12 len Feature
  Feature   = 0x1a len Int64List | 0x12 len FloatList
  Int64List = 0x0a len varint*                # packed
  FloatList = 0x0a len float32-LE*            # packed

The one Example encoder of data_prep: every writer (pretraining, SQuAD, classifier, NER, SWAG)
encodes with it, and `tfrecord_io` frames and writes the records. Tested by parsing our bytes
with TensorFlow and comparing to the values.
"""

import numpy as np

from data_prep import schema


def _varint(n):
  out = bytearray()
  while True:
    byte = n & 0x7F
    n >>= 7
    if n:
      out.append(byte | 0x80)
    else:
      out.append(byte)
      return bytes(out)


def _len_prefixed(tag, payload):
  return tag + _varint(len(payload)) + payload


def varint_rows(values):
  """Varint-encodes an int64 matrix row by row, as protobuf encodes an int64 field: a
  negative value is its 64-bit two's complement (10 bytes; e.g. an unlabeled example's -100).

  Args:
    values: [rows, cols] integer array.
  Returns:
    (flat uint8 array, byte_lengths [rows, cols] int64), values in row-major order.
  """
  values = np.asarray(values, dtype=np.int64).astype(np.uint64)
  top = int(values.max()) if values.size else 0
  width = 1
  while width < 10 and top >= (1 << (7 * width)):
    width += 1
  nbytes = np.ones(values.shape, dtype=np.int64)
  for k in range(1, width):
    nbytes += values >= np.uint64(1 << (7 * k))
  groups = np.empty(values.shape + (width,), dtype=np.uint8)  # [rows, cols, width]
  for k in range(width):
    group = ((values >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8)
    group |= ((nbytes > k + 1) * 0x80).astype(np.uint8)  # continuation bit but on the last
    groups[..., k] = group
  keep = np.arange(width)[None, None, :] < nbytes[..., None]
  return groups[keep], nbytes


_VARINT = [_varint(n) for n in range(1 << 16)]  # lengths seen in practice: O(1) lookup


def _v(n):
  return _VARINT[n] if n < (1 << 16) else _varint(n)


class ExampleEncoder:
  """Encodes rows of a fixed tuple of `schema.Feature`s into serialized Examples."""

  def __init__(self, features):
    self.features = tuple(features)
    self._keys = [_len_prefixed(b"\x0a", f.name.encode()) for f in self.features]
    self._list_tags = [b"\x12" if f.dtype == schema.FLOAT32 else b"\x1a" for f in self.features]
    self._headers = [{} for _ in self.features]  # payload size -> (header, entry size)

  def _header(self, i, n):
    """Bytes before a feature's packed payload of `n` bytes, and the entry's total size."""
    cached = self._headers[i].get(n)
    if cached is None:
      cached = self._headers[i][n] = self._make_header(i, n)
    return cached

  def _make_header(self, i, n):
    list_len = 1 + len(_v(n)) + n
    feature_len = 1 + len(_v(list_len)) + list_len
    entry_body = self._keys[i] + b"\x12" + _v(feature_len) + self._list_tags[i] + _v(list_len)
    entry_body += b"\x0a" + _v(n)
    entry_len = len(entry_body) + n
    return b"\x0a" + _v(entry_len) + entry_body, 1 + len(_v(entry_len)) + entry_len

  def _columns(self, columns):
    """Per feature: (flat payload bytes, row offsets list, constant row size or None)."""
    rows = None
    out = []
    for f in self.features:
      col = np.asarray(columns[f.name])
      if col.ndim != 2 or col.shape[1] != f.length:
        raise ValueError(f"feature {f.name}: expected [rows, {f.length}], got {col.shape}")
      rows = col.shape[0] if rows is None else rows
      if col.shape[0] != rows:
        raise ValueError(f"feature {f.name}: {col.shape[0]} rows, expected {rows}")
      if f.dtype == schema.FLOAT32:
        sizes = np.full([rows], 4 * f.length, dtype=np.int64)
        flat = np.ascontiguousarray(col, dtype="<f4").tobytes()
      else:
        flat, nbytes = varint_rows(col)
        flat = flat.tobytes()
        sizes = nbytes.sum(axis=1)
      offsets = np.zeros(rows + 1, dtype=np.int64)
      np.cumsum(sizes, out=offsets[1:])
      constant = int(sizes[0]) if rows and (sizes == sizes[0]).all() else None
      out.append((flat, offsets.tolist(), sizes.tolist(), constant))
    return rows or 0, out

  def encode(self, columns):
    """columns: dict name -> [rows, length] array. Returns a list of `bytes`, one per row."""
    rows, cols = self._columns(columns)
    headers = [self._headers[i] for i in range(len(cols))]
    for i, (_, _, sizes, _) in enumerate(cols):
      for n in set(sizes):
        self._header(i, n)
    out = []
    for r in range(rows):
      pieces = [b""]
      total = 0
      for cache, (flat, offsets, sizes, _) in zip(headers, cols):
        header, size = cache[sizes[r]]
        pieces.append(header)
        pieces.append(flat[offsets[r]:offsets[r + 1]])
        total += size
      pieces[0] = b"\x0a" + _v(total)
      out.append(b"".join(pieces))
    return out
