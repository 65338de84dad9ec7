"""Catches a cased/uncased mismatch before training: --do_lower_case against the checkpoint.

Lower-casing the input of a cased model (or not lower-casing for an uncased one) trains and
scores without any error, only worse: most words fall apart into [UNK] or rare pieces. Three
witnesses are checked, any of which settles it:
  - a released checkpoint's name (the original's `validate_case_matches_checkpoint`);
  - a Hugging Face folder's (or a fine-tuning output's) tokenizer_config.json do_lower_case;
  - the vocabulary itself: a cased vocabulary has many entries with upper-case letters, an
    uncased one none (a few symbols such as "<S>" aside).
`--allow_case_mismatch` overrides all three.
"""

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

_OVERRIDE = "or pass --allow_case_mismatch if this is intended"


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


class CaseMismatchError(ValueError):
  """A case given (a flag, an argument) that a witness contradicts (`check`)."""


def check(do_lower_case, init_checkpoint=None, vocab_file=None, config_lower_case=None,
          config_source=None, config_vocab_file=None, flag="--do_lower_case",
          allow="--allow_case_mismatch"):
  """Raises CaseMismatchError (a ValueError) when --do_lower_case contradicts a witness (see
  the module doc).

  Args:
    config_lower_case: do_lower_case of a tokenizer_config.json (None: no such file).
    config_source: the file it came from, for the message.
    config_vocab_file: the vocabulary beside that file. A flag that agrees with the file is
      taken whatever that vocabulary suggests; another vocabulary (--vocab_file) is checked.
    flag, allow: how the caller names the case and the override (the Python API:
      "lower_case", "allow_case_mismatch=True").
  """
  given = f"{flag}={do_lower_case}"
  override = _OVERRIDE.replace("--allow_case_mismatch", allow)
  try:
    tokenization.validate_case_matches_checkpoint(do_lower_case, init_checkpoint)
  except ValueError as e:
    message = str(e).split(" If this error")[0].replace("--do_lower_case", flag)
    raise CaseMismatchError(f"{message} ({override})") from None
  if config_lower_case is not None:
    if bool(config_lower_case) != bool(do_lower_case):
      raise CaseMismatchError(f"{given} but {config_source} says do_lower_case="
                       f"{bool(config_lower_case)}: pass {flag}="
                       f"{bool(config_lower_case)} ({override})")
    if not vocab_file or (config_vocab_file and os.path.abspath(vocab_file)
                          == os.path.abspath(config_vocab_file)):
      return  # the model's own file says so: it outranks what its vocabulary suggests
  if vocab_file:
    cased = vocabulary_file_is_cased(vocab_file)
    if cased and do_lower_case:
      raise CaseMismatchError(
          f"{given} but the vocabulary {vocab_file} is cased (it has upper-case entries, "
          f"which lower-cased input never matches): pass {flag}=False ({override})")
    if cased is False and not do_lower_case:
      raise CaseMismatchError(
          f"{given} but the vocabulary {vocab_file} is uncased (all its entries are "
          f"lower-case, so upper-case input becomes [UNK] or rare pieces): pass {flag}=True "
          f"({override})")
