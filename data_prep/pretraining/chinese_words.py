"""Chinese word segmentation for whole-word masking (the Chinese-BERT-wwm recipe).

BERT's tokenizer makes every CJK ideograph its own token, so the "##" rule of
`--do_whole_word_mask` never groups Chinese characters. With `--chinese_word_segmenter=jieba`
the writer segments each sentence's raw text with jieba and marks, per token, whether it
starts a word; the tokens stay characters, so the records keep their form.

A token starts a word when it is the first piece of a basic word (not a "##" piece) AND, if it
is a CJK character, that character is the first character of its jieba word. Latin words,
numbers, punctuation and [UNK] keep the "##" rule; a CJK character that is not first in a
mixed jieba word ("T恤") continues the word before it.

jieba is imported and its dictionary loaded lazily, in the process that tokenizes (the local
writer's main process, a Beam worker), once per process. `jieba.cut` with the HMM for words
not in the dictionary (jieba's default) is deterministic.
"""

import logging as std_logging

from absl import logging
import numpy as np

from data_prep import unicode_classes

SEGMENTERS = ("none", "jieba")

_jieba = None


def check_segmenter(name):
  if name not in SEGMENTERS:
    raise ValueError(f"--chinese_word_segmenter={name!r}: must be one of {list(SEGMENTERS)}")
  return name


def _load_jieba():
  """jieba, its dictionary loaded, its start-up messages silenced (once per process)."""
  global _jieba
  if _jieba is None:
    import jieba  # pylint: disable=g-import-not-at-top  (optional, loads a dictionary)
    jieba.setLogLevel(std_logging.WARNING)
    jieba.initialize()
    _jieba = jieba
  return _jieba


def is_cjk(char):
  """The tokenizer's definition (`unicode_classes.CJK_RANGES`): one token per such char."""
  cp = ord(char)
  return any(lo <= cp <= hi for lo, hi in unicode_classes.CJK_RANGES)


def cjk_word_starts(text):
  """For each CJK character of `text`, in order: does it start a jieba word?"""
  starts = []
  for word in _load_jieba().cut(text, cut_all=False, HMM=True):
    starts.extend(k == 0 for k, ch in enumerate(word) if is_cjk(ch))
  return starts


def encode_with_word_starts(tokenizer, lines):
  """Tokenizes lines as `tokenizer.encode_batch` and marks the tokens that start a word.

  Returns ids [tokens] int32, splits [lines + 1] int64 (as `encode_batch`) and word_starts
  [tokens] bool. The lines are split into the tokenizer's basic words first and each word is
  WordPiece-tokenized alone (the same pieces: normalization is idempotent and a basic word is
  never split again), which tells which token is a word's first piece. The k-th CJK basic
  word is the k-th CJK character of the raw line; if a line's counts differ (a normalization
  we did not foresee), its CJK characters each start a word, and that is logged.
  """
  words = tokenizer.split_words_batch(lines)  # [lines, (words)]
  flat = [w for row in words for w in row]
  ids, word_splits = tokenizer.encode_batch(flat)
  first_piece = np.zeros([len(ids)], bool)
  first_piece[word_splits[:-1][np.diff(word_splits) > 0]] = True
  word_start = np.ones([len(flat)], bool)  # per basic word
  mismatched = 0
  w = 0
  for line, row in zip(lines, words):
    cjk_words = [w + k for k, word in enumerate(row) if len(word) == 1 and is_cjk(word)]
    if cjk_words:
      starts = cjk_word_starts(line if isinstance(line, str) else line.decode("utf-8"))
      if len(starts) == len(cjk_words):
        word_start[cjk_words] = starts
      else:
        mismatched += 1
    w += len(row)
  if mismatched:
    logging.warning("%d line(s): jieba's CJK characters did not line up with the tokens; "
                    "their characters are masked one by one", mismatched)
  per_token_word = np.repeat(np.arange(len(flat)), np.diff(word_splits))
  starts = first_piece & word_start[per_token_word]
  words_before = np.zeros([len(lines) + 1], np.int64)  # [lines + 1]
  np.cumsum([len(row) for row in words], out=words_before[1:])
  splits = word_splits[words_before].astype(np.int64)
  return ids, splits, starts
