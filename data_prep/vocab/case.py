"""Whether a vocabulary is cased, read from its entries, and what contradicts it: the
fine-tuning commands' case guard (`official_bert.interop.case_check`) and the data tools'
(`data_prep.cli.check_case_mismatch`) ask here."""

import functools
import os

import tensorflow as tf

from data_prep import tokenization

# A vocabulary is cased when over this share of its entries with letters that have a case
# hold an upper-case one (bert-base-cased: ~20%; uncased vocabularies: ~0; bert-base-chinese
# holds "<S>", "<T>": ~0.2%).
CASED_SHARE = 0.01
# Fewer entries with cased letters than this (a CJK-only vocabulary) say nothing about case.
MIN_CASED_LETTER_ENTRIES = 100


def vocabulary_is_cased(tokens):
  """True (cased), False (lower-case only) or None (too few letters with a case to tell)."""
  with_case, upper = 0, 0
  for token in tokens:
    if token.startswith("[") and token.endswith("]"):
      continue  # [CLS], [unused0], ...
    letters = [c for c in token if c.lower() != c.upper()]
    if letters:
      with_case += 1
      upper += any(c != c.lower() for c in letters)
  if with_case < MIN_CASED_LETTER_ENTRIES:
    return None
  return upper > CASED_SHARE * with_case


def vocabulary_file_is_cased(vocab_file):
  """`vocabulary_is_cased` of a vocab.txt. Every read of a model folder asks (the case policy,
  the guard, the warning of a file that contradicts it), so each version of a file (its path,
  size and modification time) is read and scanned once per process."""
  stat = tf.io.gfile.stat(vocab_file)
  return _file_is_cased(os.path.abspath(vocab_file) if "://" not in vocab_file else vocab_file,
                        stat.length, stat.mtime_nsec)


@functools.lru_cache(maxsize=16)
def _file_is_cased(path, length, mtime_nsec):  # pylint: disable=unused-argument  (the key)
  return vocabulary_is_cased(tokenization.load_vocab_tokens(path))


def contradiction(vocab_file, do_lower_case, flag="--do_lower_case"):
  """The sentence saying how `flag`=`do_lower_case` contradicts the vocabulary at
  `vocab_file`, or None when it does not (or the vocabulary cannot tell)."""
  given = f"{flag}={do_lower_case}"
  cased = vocabulary_file_is_cased(vocab_file)
  if cased and do_lower_case:
    return (f"{given} but the vocabulary {vocab_file} is cased (it has upper-case entries, "
            f"which lower-cased input never matches): pass {flag}=False")
  if cased is False and not do_lower_case:
    return (f"{given} but the vocabulary {vocab_file} is uncased (all its entries are "
            f"lower-case, so upper-case input becomes [UNK] or rare pieces): pass {flag}=True")
  return None
