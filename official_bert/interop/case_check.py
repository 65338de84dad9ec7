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

import os

from data_prep import tokenization
from data_prep.vocab import case as vocab_case

# How a vocabulary says its case (one copy, with the data tools' guard).
vocabulary_is_cased = vocab_case.vocabulary_is_cased
vocabulary_file_is_cased = vocab_case.vocabulary_file_is_cased

_OVERRIDE = "or pass --allow_case_mismatch if this is intended"


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
    contradiction = vocab_case.contradiction(vocab_file, do_lower_case, flag)
    if contradiction:
      raise CaseMismatchError(f"{contradiction} ({override})")
