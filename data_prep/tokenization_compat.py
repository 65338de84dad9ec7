"""The rest of the original google-research/bert `tokenization` module's API, same behaviour.

Projects that vendored the original `tokenization.py` import `data_prep.tokenization` in its
place; it re-exports everything here. `load_vocab` and `FullTokenizer` live in `tokenization`
(the in-graph tokenizer); this module holds the pure-Python rest:

  convert_to_unicode, printable_text, whitespace_tokenize, convert_by_vocab,
  convert_tokens_to_ids, convert_ids_to_tokens, validate_case_matches_checkpoint,
  BasicTokenizer, WordpieceTokenizer, _is_whitespace, _is_control, _is_punctuation.

Why `BasicTokenizer` and `WordpieceTokenizer` are small pure-Python classes rather than wrappers
over the in-graph `TextTokenizer`: the original's callers rely on per-call behaviour a wrapper
built once cannot reproduce. They read `do_lower_case`, `vocab`, `unk_token` and
`max_input_chars_per_word` at every call (forks and tf-models-official's tests set them after
construction); `WordpieceTokenizer.vocab` may be any container supporting `in` and `unk_token`
need not be in it (tensorflow-text needs a fixed token list holding the unknown token);
`WordpieceTokenizer` splits its input on whitespace only, not punctuation; and both are called
per word or per short text, where an eager TF call costs milliseconds. They reuse the
character predicates and CJK ranges of `unicode_classes`, the tables `TextTokenizer`'s RE2
classes are built from, so both paths make the same per-character decisions.

Behaviour follows google-research/bert master (as copied into tf-models-official's
`official.nlp.tools.tokenization`), except that tf-models-official's later additions are left
out: `BasicTokenizer(split_on_punc=...)`, and its 400-character word limit (the original's
200 is kept).
"""

import re
import unicodedata

from data_prep import unicode_classes

_LOWER_CASED_MODELS = ("uncased_L-24_H-1024_A-16", "uncased_L-12_H-768_A-12",
                       "multilingual_L-12_H-768_A-12", "chinese_L-12_H-768_A-12")
_CASED_MODELS = ("cased_L-12_H-768_A-12", "cased_L-24_H-1024_A-16",
                 "multi_cased_L-12_H-768_A-12")
# The original's pattern, unescaped "." included: it decides which paths are checked at all.
_CHECKPOINT_NAME = re.compile("^.*?([A-Za-z0-9_-]+)/bert_model.ckpt")


def validate_case_matches_checkpoint(do_lower_case, init_checkpoint):
  """Raises ValueError when `do_lower_case` contradicts a released checkpoint's name.

  Only the released names (uncased_L-12_H-768_A-12, cased_..., multilingual_..., chinese_...,
  multi_cased_...) followed by "/bert_model.ckpt" are checked; any other path passes.
  """
  if not init_checkpoint:
    return
  m = _CHECKPOINT_NAME.match(init_checkpoint)
  if m is None:
    return
  model_name = m.group(1)
  if model_name in _LOWER_CASED_MODELS and not do_lower_case:
    actual_flag, case_name, opposite_flag = "False", "lowercased", "True"
  elif model_name in _CASED_MODELS and do_lower_case:
    actual_flag, case_name, opposite_flag = "True", "cased", "False"
  else:
    return
  raise ValueError(
      "You passed in `--do_lower_case=%s` with `--init_checkpoint=%s`. However, `%s` seems to "
      "be a %s model, so you should pass in `--do_lower_case=%s` so that the fine-tuning "
      "matches how the model was pre-training. If this error is wrong, please just comment "
      "out this check." % (actual_flag, init_checkpoint, model_name, case_name, opposite_flag))


def convert_to_unicode(text):
  """str unchanged; bytes decoded as UTF-8, dropping invalid bytes; anything else ValueError."""
  if isinstance(text, str):
    return text
  if isinstance(text, bytes):
    return text.decode("utf-8", "ignore")
  raise ValueError("Unsupported string type: %s" % (type(text)))


def printable_text(text):
  """Text for print or logging: on Python 3 the same as `convert_to_unicode`."""
  return convert_to_unicode(text)


def whitespace_tokenize(text):
  """`text.split()`: splits on Python whitespace, drops empty pieces."""
  return text.split()


def convert_by_vocab(vocab, items):
  """Maps each item through `vocab` (token -> id or id -> token); unknown items: KeyError."""
  return [vocab[item] for item in items]


def convert_tokens_to_ids(vocab, tokens):
  return convert_by_vocab(vocab, tokens)


def convert_ids_to_tokens(inv_vocab, ids):
  return convert_by_vocab(inv_vocab, ids)


def _one_char(char):
  """`char`, or the TypeError the original raises for anything but one character.

  The original asks `unicodedata.category(char)` for every input it has not matched by `==`;
  the `unicode_classes` predicates test `char in " \\t\\n\\r"`, which "" and " \\t" pass.
  """
  unicodedata.category(char)
  return char


def _is_whitespace(char):
  """" ", \\t, \\n, \\r or Unicode category Zs: becomes a space in `_clean_text`."""
  return unicode_classes.is_whitespace(_one_char(char))


def _is_control(char):
  """Category Cc or Cf other than \\t, \\n, \\r: dropped by `_clean_text`."""
  return unicode_classes.is_control(_one_char(char))


def _is_punctuation(char):
  """Non-alphanumeric printable ASCII or category P*: split off as its own token."""
  return unicode_classes.is_punctuation(char)  # calls ord(char) first, as the original


class BasicTokenizer:
  """Cleans text, splits it on whitespace, CJK ideographs and punctuation, optionally lower-cases
  and strips accents: the original's words before WordPiece (`FullTokenizer.split_words_batch`
  is the batched in-graph equivalent)."""

  def __init__(self, do_lower_case=True):
    self.do_lower_case = do_lower_case

  def tokenize(self, text):
    text = self._tokenize_chinese_chars(self._clean_text(convert_to_unicode(text)))
    split_tokens = []
    for token in whitespace_tokenize(text):
      if self.do_lower_case:
        token = self._run_strip_accents(token.lower())
      split_tokens.extend(self._run_split_on_punc(token))
    # Split again: lower-casing and NFD could in principle produce whitespace.
    return whitespace_tokenize(" ".join(split_tokens))

  def _run_strip_accents(self, text):
    """NFD, then drops combining marks (category Mn)."""
    return "".join(c for c in unicodedata.normalize("NFD", text)
                   if unicodedata.category(c) != "Mn")

  def _run_split_on_punc(self, text):
    """Each punctuation character becomes its own piece; the runs between are kept whole."""
    pieces = []
    start_new_piece = True
    for char in text:
      if _is_punctuation(char):
        pieces.append(char)
        start_new_piece = True
      elif start_new_piece:
        pieces.append(char)
        start_new_piece = False
      else:
        pieces[-1] += char
    return pieces

  def _tokenize_chinese_chars(self, text):
    """Surrounds every CJK ideograph with spaces, making it a word of its own."""
    return "".join(f" {c} " if self._is_chinese_char(ord(c)) else c for c in text)

  def _is_chinese_char(self, cp):
    """Code point in the original's CJK Unified Ideographs ranges (not Hangul or kana)."""
    return any(lo <= cp <= hi for lo, hi in unicode_classes.CJK_RANGES)

  def _clean_text(self, text):
    """Drops NUL, U+FFFD and control characters; whitespace becomes " "."""
    out = []
    for char in text:  # one character each: no need for _one_char's check
      if char in "\x00\ufffd" or unicode_classes.is_control(char):
        continue
      out.append(" " if unicode_classes.is_whitespace(char) else char)
    return "".join(out)


class WordpieceTokenizer:
  """Greedy longest-match-first WordPiece of whitespace-separated words, "##" continuations.

  A word longer than `max_input_chars_per_word` characters, or one the vocab cannot cover
  entirely, becomes a single `unk_token`. Example: "unaffable" -> ["un", "##aff", "##able"].
  """

  def __init__(self, vocab, unk_token="[UNK]", max_input_chars_per_word=200):
    self.vocab = vocab
    self.unk_token = unk_token
    self.max_input_chars_per_word = max_input_chars_per_word

  def tokenize(self, text):
    output_tokens = []
    for word in whitespace_tokenize(convert_to_unicode(text)):
      pieces = self._word_pieces(word)
      output_tokens.extend([self.unk_token] if pieces is None else pieces)
    return output_tokens

  def _word_pieces(self, word):
    """The pieces of one word, or None where it is too long or cannot be covered."""
    if len(word) > self.max_input_chars_per_word:
      return None
    pieces = []
    start = 0
    while start < len(word):
      for end in range(len(word), start, -1):
        piece = word[start:end] if start == 0 else "##" + word[start:end]
        if piece in self.vocab:
          break
      else:
        return None
      pieces.append(piece)
      start = end
    return pieces
