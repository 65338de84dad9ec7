"""Whole words of a corpus, counted with the tokenizer's own pre-tokenizer
(`TextTokenizer.split_words`, the original BERT BasicTokenizer's words): what WordPiece later
looks up, so both learning a vocabulary (`learn`) and extending one (`extend`) count here.

The files are streamed in batches of lines (through tf.io.gfile), with strict UTF-8 and a
progress line every few seconds on large inputs.
"""

import collections
import time

from absl import logging

from data_prep import tfrecord_io
from data_prep.pretraining import corpus

_LOG_EVERY_S = 5.0


class _Rate:
  """Logs lines/s at most every few seconds while counting a large input."""

  def __init__(self, total_bytes):
    self.total_bytes = max(total_bytes, 1)
    self.start = self.last = time.time()

  def update(self, lines, done_bytes, force=False):
    now = time.time()
    if force or now - self.last >= _LOG_EVERY_S:
      self.last = now
      elapsed = max(now - self.start, 1e-9)
      logging.info("counting words: %5.1f%% | %d lines (%.0f lines/s) | %.1f MB | %.0fs",
                   100 * min(done_bytes / self.total_bytes, 1.0), lines, lines / elapsed,
                   done_bytes / 1e6, elapsed)


def _line_batches(files, batch_lines):
  """Non-blank lines of all files in batches: (lines, bytes read so far). Strict UTF-8."""
  batch, done = [], 0
  for path in files:
    with tfrecord_io.open_file(path) as f:
      for line_no, raw in enumerate(f, start=1):
        done += len(raw)
        try:
          text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
          raise corpus.CorpusError(f"{path}:{line_no}: invalid UTF-8 ({e.reason})") from None
        if text.strip():
          batch.append(text)
          if len(batch) >= batch_lines:
            yield batch, done
            batch = []
  if batch:
    yield batch, done


def count_words(files, do_lower_case, batch_lines=4096):
  """Counter of the pre-tokenizer's words over all files (str keys)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top  (TF only where needed)

  from data_prep import tokenization  # pylint: disable=g-import-not-at-top
  # split_words needs no wordpiece vocab; "[UNK]" satisfies the constructor.
  splitter = tokenization.TextTokenizer(["[UNK]"], lower_case=do_lower_case)
  counts = collections.Counter()  # bytes keys: decoding once per distinct word is cheaper
  rate = _Rate(sum(tf.io.gfile.stat(f).length for f in files))
  lines = done = 0
  for batch, done in _line_batches(files, batch_lines):
    words = splitter.split_words(tf.constant(batch, dtype=tf.string))
    counts.update(words.flat_values.numpy().tolist())
    lines += len(batch)
    rate.update(lines, done)
  rate.update(lines, done, force=True)
  return collections.Counter({w.decode("utf-8"): c for w, c in counts.items()})
