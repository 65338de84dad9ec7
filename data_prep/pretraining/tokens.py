"""A chunk's documents -> token ids (`instances.Chunk`): the one tokenizing step of both the
local writer and the Beam pipeline, so both build the same chunks."""

import numpy as np

from data_prep.pretraining import chinese_words
from data_prep.pretraining import instances as instances_lib


def make_tokenizer(settings):
  """The run's tokenizer (main process, or once per Beam worker); checks the special tokens."""
  from data_prep import tokenization  # pylint: disable=g-import-not-at-top  (TF: not workers)
  tokenizer = tokenization.FullTokenizer(settings.vocab_file, settings.do_lower_case)
  tokenization.check_special_tokens(tokenizer.vocab, settings.vocab_file,
                                    ("[UNK]", "[CLS]", "[SEP]", "[MASK]"))
  return tokenizer


def tokenize_documents(tokenizer, texts, chunk_index, word_segmenter="none"):
  """A chunk's documents (each a list of non-blank lines), in chunk order -> its `Chunk`;
  lines and documents without tokens are dropped. Both writers build chunks only here.
  word_segmenter "jieba" (`--chinese_word_segmenter`) also marks the tokens that start a word
  (`Chunk.word_starts`, see `chinese_words`); it loads jieba in the calling process."""
  lines = [line for doc in texts for line in doc]
  word_starts = None
  if chinese_words.check_segmenter(word_segmenter) == "jieba":
    ids, splits, word_starts = chinese_words.encode_with_word_starts(tokenizer, lines)
  else:
    ids, splits = tokenizer.encode_batch(lines)
  line_len = np.diff(splits)
  keep = line_len > 0
  doc_of_line = np.repeat(np.arange(len(texts)), [len(doc) for doc in texts])[keep]
  line_splits = np.zeros(int(keep.sum()) + 1, np.int64)
  np.cumsum(line_len[keep], out=line_splits[1:])
  lines_per_doc = np.bincount(doc_of_line, minlength=len(texts))
  lines_per_doc = lines_per_doc[lines_per_doc > 0]
  doc_splits = np.zeros(len(lines_per_doc) + 1, np.int64)
  np.cumsum(lines_per_doc, out=doc_splits[1:])
  return instances_lib.Chunk(chunk_index, ids, line_splits, doc_splits, word_starts)
