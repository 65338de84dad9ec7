"""BERT WordPiece tokenization with the original's exact semantics, running in TF graph ops.

Original `FullTokenizer` (google-research/bert, tf-models-official) on one string:
  1. `_clean_text`: drop NUL, U+FFFD and control/format characters (Cc, Cf; not \\t\\n\\r);
     whitespace (\\t\\n\\r, Zs) becomes " ".
  2. Every CJK ideograph becomes its own word.
  3. Split on whitespace (Python `str.split()`), then per word, if lower-casing: `str.lower()`,
     NFD, drop combining marks (Mn).
  4. Split off punctuation (non-alphanumeric ASCII and Unicode P*) as single-character words.
  5. Greedy longest-match-first WordPiece per word with "##" continuations; a word longer than
     `max_input_chars_per_word` characters, or one with no full cover, is a single [UNK].

tensorflow-text's `BertTokenizer`/`FastBertTokenizer` normalize differently (NFKC case folding
folds fullwidth forms and "™"; control characters become word breaks instead of vanishing;
a 100-byte word limit), so `TextTokenizer` does its own normalization with RE2 classes built
from Python's `unicodedata` (`unicode_classes`), then hands whole words to tensorflow-text's
`FastWordpieceTokenizer` (C++, linear-time greedy match). All of it is graph ops, so the same
module runs in `tf.data` and inside an exported SavedModel.

Known residual difference: for characters Python 3.11 (Unicode 14) does not know, ICU's newer
NFD tables may decompose where Python does not. Such characters are in no BERT vocabulary, so
the word becomes [UNK] either way.

A drop-in for the original module: the rest of its API (`BasicTokenizer`, `WordpieceTokenizer`,
`convert_to_unicode`, `validate_case_matches_checkpoint`, ...) lives in `tokenization_compat`
and is re-exported here. Deliberate differences: `load_vocab` raises FileNotFoundError (not
tf.errors.NotFoundError) for a missing file and ValueError for an empty one; `FullTokenizer`
takes `max_input_chars_per_word`, and its `basic_tokenizer`/`wordpiece_tokenizer` attributes
are the original's classes for callers that use them directly, while `tokenize` itself runs
in-graph (changing those attributes does not change it).
"""

import collections
import functools
import itertools
import operator
import sys

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text
from tensorflow_text.python.ops import regex_split_ops

from data_prep import tfrecord_io
from data_prep import tokenization_compat as compat
from data_prep import unicode_classes

UNK = "[UNK]"
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
DEFAULT_MAX_CHARS_PER_WORD = 200  # google-research/bert; tf-models-official uses 400
_BATCH = 8192  # texts per graph call: large enough to amortize the call, small enough for RAM

# The original module's remaining API, so `tokenization.BasicTokenizer` etc. work unchanged.
BasicTokenizer = compat.BasicTokenizer
WordpieceTokenizer = compat.WordpieceTokenizer
convert_by_vocab = compat.convert_by_vocab
convert_tokens_to_ids = compat.convert_tokens_to_ids
convert_ids_to_tokens = compat.convert_ids_to_tokens
convert_to_unicode = compat.convert_to_unicode
printable_text = compat.printable_text
whitespace_tokenize = compat.whitespace_tokenize
validate_case_matches_checkpoint = compat.validate_case_matches_checkpoint
_is_whitespace = compat._is_whitespace  # pylint: disable=protected-access  (forks call these)
_is_control = compat._is_control  # pylint: disable=protected-access
_is_punctuation = compat._is_punctuation  # pylint: disable=protected-access


def read_vocab_lines(vocab_file):
  """The vocabulary's raw lines (bytes, line ends kept) and their tokens in id order, read
  like the original `load_vocab` (lines split on "\\n", decoded, stripped)."""
  if not tfrecord_io.is_file(vocab_file):
    raise FileNotFoundError(f"vocab file not found: {vocab_file}")
  lines, tokens = [], []
  with tfrecord_io.open_file(vocab_file) as f:
    for line_no, raw in enumerate(f, start=1):
      try:
        tokens.append(raw.decode("utf-8").strip())
      except UnicodeDecodeError as e:
        raise ValueError(f"{vocab_file}:{line_no}: vocab is not UTF-8 ({e.reason})") from None
      lines.append(raw)
  if not tokens:
    raise ValueError(f"vocab file is empty: {vocab_file}")
  return lines, tokens


def load_vocab_tokens(vocab_file):
  """Tokens in id order (`read_vocab_lines`)."""
  return read_vocab_lines(vocab_file)[1]


def load_vocab(vocab_file):
  """OrderedDict token -> id, as the original (a repeated token keeps its last id)."""
  vocab = collections.OrderedDict()
  for index, token in enumerate(load_vocab_tokens(vocab_file)):
    vocab[token] = index
  return vocab


def check_special_tokens(vocab, vocab_file, required=SPECIAL_TOKENS):
  missing = [t for t in required if t not in vocab]
  if missing:
    raise ValueError(f"vocab {vocab_file} lacks special token(s) {missing}; "
                     f"BERT needs {list(required)}")


def _matchable_vocab(tokens):
  """The vocab list for FastWordpiece: ids unchanged, unusable entries made unmatchable.

  Empty tokens (a vocab line of only whitespace) and earlier copies of a repeated token
  become strings containing a space: our words never contain one, so they never match, and
  a repeated token resolves to its last id like the original's dict.
  """
  last = {t: i for i, t in enumerate(tokens)}
  return [t if t and last[t] == i else f"<unmatchable {i}>" for i, t in enumerate(tokens)]


@functools.lru_cache(maxsize=None)
def _lowercase_gaps():
  """Characters whose `str.lower()` differs from `tf.strings.lower` (older ICU tables)."""
  # map/compress: the comparison runs in C, over 1.1 million characters at each start-up.
  chars = list(map(chr, itertools.chain(range(0xD800), range(0xE000, sys.maxunicode + 1))))
  cased = list(itertools.compress(chars, map(operator.ne, map(str.lower, chars), chars)))
  ours = tf.strings.lower(tf.constant(cased), encoding="utf-8").numpy()
  return {c: c.lower() for c, o in zip(cased, ours) if o.decode("utf-8") != c.lower()}


class TextTokenizer(tf.Module):
  """Batched text -> WordPiece ids, in graph ops.

  Args:
    vocab: list of tokens in id order (`load_vocab_tokens`).
    lower_case: lower-case and strip accents, as `do_lower_case` in the original.
    max_input_chars_per_word: longer words become one [UNK] (original: 200).

  Examples:
    >>> tok = TextTokenizer(load_vocab_tokens("vocab.txt"), lower_case=True)
    >>> tok.tokenize(tf.constant(["Hello, World!"]))  # RaggedTensor [batch, (tokens)]
  """

  def __init__(self, vocab, lower_case=True,
               max_input_chars_per_word=DEFAULT_MAX_CHARS_PER_WORD, name=None):
    super().__init__(name=name)
    if UNK not in vocab:
      raise ValueError(f"vocab lacks {UNK}")
    self.vocab_size = len(vocab)
    self.lower_case = bool(lower_case)
    self.max_input_chars_per_word = int(max_input_chars_per_word)
    classes = unicode_classes.classes()
    self._delete = classes["delete"]
    self._mark = classes["mark"]
    # Each in a group, as `tf_text.regex_split` hands them to its op (`split_words`).
    self._word_break = ("((?:%s|%s|%s))" % (classes["space"], classes["punct"], classes["cjk"])
                        ).encode("utf-8")
    self._own_word = ("((?:%s|%s))" % (classes["punct"], classes["cjk"])).encode("utf-8")
    self._lower_fix = None
    if self.lower_case:
      # A gap matters only if a vocab token holds the character or its lower case: otherwise
      # the word is [UNK] whichever way it is cased.
      vocab_chars = set("".join(t[2:] if t.startswith("##") else t for t in vocab))
      gaps = {c: low for c, low in _lowercase_gaps().items()
              if c in vocab_chars or set(low) & vocab_chars}
      if gaps:
        keys = sorted(gaps)
        self._lower_fix_pattern = "(?s).*%s.*" % unicode_classes.re2_class_of(keys)
        self._lower_fix = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(keys, [gaps[k] for k in keys]),
            default_value="")
    # A word of N characters has at most 4N UTF-8 bytes; the char limit is enforced by us.
    self._wordpiece = tf_text.FastWordpieceTokenizer(
        vocab=_matchable_vocab(list(vocab)), suffix_indicator="##",
        max_bytes_per_word=4 * self.max_input_chars_per_word + 4,
        token_out_type=tf.int64, unknown_token=UNK, no_pretokenization=True)

  def _apply_lower_fix(self, texts):
    """Lower-cases the characters `tf.strings.lower` misses, only in texts that hold one."""
    rows = tf.where(tf.strings.regex_full_match(texts, self._lower_fix_pattern))  # [k, 1]
    sub = tf.gather_nd(texts, rows)
    chars = tf.strings.unicode_split(sub, "UTF-8")  # [k, (chars)]
    mapped = self._lower_fix.lookup(chars.flat_values)
    fixed = tf.where(mapped == "", chars.flat_values, mapped)
    sub = tf.strings.reduce_join(chars.with_flat_values(fixed), axis=1)
    return tf.tensor_scatter_nd_update(texts, rows, sub)

  def normalize(self, texts):
    """Steps 1 and 3 of the original on whole texts: [batch] string -> [batch] string."""
    # Deleting first matters: tf.strings.lower stops at a NUL byte.
    texts = tf.strings.regex_replace(texts, self._delete, "")
    if self.lower_case:
      if self._lower_fix is not None:
        texts = self._apply_lower_fix(texts)
      texts = tf.strings.lower(texts, encoding="utf-8")
      texts = tf_text.normalize_utf8(texts, "NFD")
      texts = tf.strings.regex_replace(texts, self._mark, "")
    return texts

  def split_words(self, texts):
    """The original BasicTokenizer's output: [batch] string -> [batch, (words)] string."""
    # tensorflow-text's op as `tf_text.regex_split` runs it (each pattern in a group), less the
    # wrapper's two ragged tensors of offsets and its checks of row splits the op made: a
    # check is a cond, a function of its own in every traced graph, and these were a third of
    # a traced tokenizer.
    words, _, _, row_splits = regex_split_ops.gen_regex_split_ops.regex_split_with_offsets(
        tf.reshape(self.normalize(texts), [-1]), self._word_break, self._own_word)
    return tf.RaggedTensor.from_row_splits(words, row_splits, validate=False)

  def word_pieces(self, words):
    """[n] words (`split_words`' output) -> [n, (pieces)] int64 WordPiece ids; a word longer
    than `max_input_chars_per_word` is one [UNK]."""
    too_long = tf.strings.length(words, unit="UTF8_CHAR") > self.max_input_chars_per_word
    return self._wordpiece.tokenize(tf.where(too_long, UNK, words))

  def tokenize(self, texts):
    """[batch] string -> [batch, (tokens)] int64 WordPiece ids."""
    words = self.split_words(texts)  # [batch, (words)]
    pieces = self.word_pieces(words.flat_values)  # [words, (pieces)]
    # Each text's pieces: `words.with_flat_values(pieces).merge_dims(1, 2)`, without its checks.
    splits = tf.gather(pieces.row_splits, words.row_splits)  # [batch + 1]
    return tf.RaggedTensor.from_row_splits(pieces.flat_values, splits, validate=False)


class FullTokenizer:
  """The familiar interface of the original `tokenization.FullTokenizer`, on `TextTokenizer`.

  `tokenize`, `convert_tokens_to_ids`, `convert_ids_to_tokens`, `vocab`, `inv_vocab` behave as
  in the original; `encode_batch` is the fast path (many texts per graph call).
  """

  def __init__(self, vocab_file, do_lower_case=True,
               max_input_chars_per_word=DEFAULT_MAX_CHARS_PER_WORD):
    tokens = load_vocab_tokens(vocab_file)
    self.vocab_file = vocab_file
    self.do_lower_case = bool(do_lower_case)
    self.vocab = collections.OrderedDict()
    for index, token in enumerate(tokens):
      self.vocab[token] = index
    self.inv_vocab = {v: k for k, v in self.vocab.items()}
    # The original's attributes, for callers that run the two stages themselves.
    self.basic_tokenizer = BasicTokenizer(do_lower_case=do_lower_case)
    self.wordpiece_tokenizer = WordpieceTokenizer(
        vocab=self.vocab, max_input_chars_per_word=max_input_chars_per_word)
    self.text_tokenizer = TextTokenizer(tokens, lower_case=do_lower_case,
                                        max_input_chars_per_word=max_input_chars_per_word)
    # Eager on purpose: with thousands of texts per call the per-op overhead is negligible,
    # while tracing a tf.function costs ~1 s at start-up. Exports trace `text_tokenizer`.
    self._ids_fn = self.text_tokenizer.tokenize
    self._words_fn = self.text_tokenizer.split_words

  def _batches(self, fn, texts):
    texts = [convert_to_unicode(t) for t in texts]  # the original's bytes/str/ValueError rules
    for start in range(0, len(texts), _BATCH):
      yield fn(tf.constant(texts[start:start + _BATCH], dtype=tf.string))

  def encode_batch(self, texts):
    """Many texts -> (ids [total] int32, row_splits [len(texts)+1] int64), numpy."""
    values, lengths = [], []
    for ragged in self._batches(self._ids_fn, texts):
      values.append(ragged.flat_values.numpy().astype(np.int32))
      lengths.append(ragged.row_lengths().numpy())
    if not values:
      return np.zeros([0], np.int32), np.zeros([1], np.int64)
    lengths = np.concatenate(lengths)
    splits = np.zeros([len(lengths) + 1], np.int64)
    np.cumsum(lengths, out=splits[1:])
    return np.concatenate(values), splits

  def tokenize_to_ids_batch(self, texts):
    ids, splits = self.encode_batch(texts)
    return [ids[splits[i]:splits[i + 1]].tolist() for i in range(len(splits) - 1)]

  def split_words_batch(self, texts):
    """The basic tokens (normalized words) of each text, as lists of str."""
    out = []
    for ragged in self._batches(self._words_fn, texts):
      out.extend([[w.decode("utf-8") for w in row] for row in ragged.to_list()])
    return out

  def tokenize(self, text):
    return self.convert_ids_to_tokens(self.tokenize_to_ids_batch([text])[0])

  def convert_tokens_to_ids(self, tokens):
    return [self.vocab[t] for t in tokens]

  def convert_ids_to_tokens(self, ids):
    return [self.inv_vocab[i] for i in ids]

