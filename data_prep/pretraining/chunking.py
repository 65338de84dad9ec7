"""Which chunk each document goes to: a seeded hash of its position, the same in every writer.

The instance algorithm draws a "random next sentence" from another document of the same chunk,
so the records depend on which documents share a chunk and in what order. A global seeded
permutation would need every document in one place; instead each document's key is a hash
of (seed, file number, byte offset of its first line), which any worker computes alone:

  - num_chunks = max(1, min(total input bytes // chunk bytes, documents // min_docs));
  - chunk = key % num_chunks, and within a chunk documents are ordered by key (ties, which
    need a 64-bit collision, by position).

So a chunk is a uniform random sample of the corpus (of about `chunk bytes` of text and, on
average, at least `min_docs` documents) and the local writer and the Beam pipeline, on any
number of workers, build the same chunks. Chunk k's random streams are seeded with k
(`instances.chunk_rngs`).
"""

import hashlib

import numpy as np


def document_key(seed, file_id, offset):
  """A stable 64-bit key (not Python's `hash`, which varies per process)."""
  digest = hashlib.blake2b(f"{seed}:{file_id}:{offset}".encode(), digest_size=8).digest()
  return int.from_bytes(digest, "little")


def chunk_bytes(chunk_size_mb):
  return int(chunk_size_mb * 2**20)


def num_chunks(total_bytes, chunk_size, num_docs, min_docs):
  """Chunks of about `chunk_size` bytes with `min_docs` documents on average, at least one."""
  return max(1, min(total_bytes // max(chunk_size, 1), num_docs // max(min_docs, 1)))


def sort_key(key, file_id, offset):
  """The order of documents within a chunk."""
  return (key, file_id, offset)


def plan(file_ids, offsets, seed, n):
  """The local writer's chunks: for k in 0..n-1, the document numbers of chunk k in order.

  Args:
    file_ids, offsets: per document (`corpus.DocumentIndex.file_id`, `.start`).
  Memory is a few arrays of one number per document; the chunks are yielded one at a time.
  """
  file_ids = np.asarray(file_ids)  # [docs]; array.array through the buffer protocol
  offsets = np.asarray(offsets)  # [docs]
  keys = np.fromiter((document_key(seed, f, o) for f, o in zip(file_ids.tolist(),
                                                                 offsets.tolist())),
                     np.uint64, len(offsets))  # [docs]
  chunk = keys % np.uint64(n)  # [docs]
  order = np.lexsort((offsets, file_ids, keys, chunk))  # last key sorts first
  bounds = np.searchsorted(chunk[order], np.arange(n + 1, dtype=np.uint64))
  for k in range(n):
    yield order[bounds[k]:bounds[k + 1]].tolist()
