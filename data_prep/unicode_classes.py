"""Character classes of the original BERT BasicTokenizer, as RE2 regex classes.

The original decides per character with Python's `unicodedata`; tensorflow-text and RE2 carry
their own (ICU/RE2) Unicode tables, which differ from Python's in places (newer or older
Unicode versions, different notions of whitespace). Building the classes from Python's own
tables once per process keeps the in-graph tokenizer's decisions identical to the reference
`FullTokenizer` running in the same interpreter.
"""

import functools
import sys
import unicodedata

# The original's "Chinese character" ranges (CJK Unified Ideographs + extensions + compatibility).
CJK_RANGES = (
    (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
)


def is_control(char):
  """Deleted by the original's `_clean_text` (tab/newline/CR count as whitespace)."""
  if char in "\t\n\r":
    return False
  return unicodedata.category(char) in ("Cc", "Cf")


def is_whitespace(char):
  """Turned into a space by `_clean_text`."""
  return char in " \t\n\r" or unicodedata.category(char) == "Zs"


def is_punctuation(char):
  """Split off as its own token: all non-alphanumeric ASCII, and Unicode category P*."""
  cp = ord(char)
  if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
    return True
  return unicodedata.category(char).startswith("P")


def _ranges(flags, bit):
  """Sorted (lo, hi) code point ranges whose flag has `bit` set."""
  out = []
  start = None
  for cp, f in enumerate(flags):
    if f & bit:
      if start is None:
        start = cp
    elif start is not None:
      out.append((start, cp - 1))
      start = None
  if start is not None:
    out.append((start, len(flags) - 1))
  return tuple(out)


def re2_class_of(chars):
  """RE2 class matching exactly the given characters."""
  return _re2_class(tuple((ord(c), ord(c)) for c in sorted(set(chars))))


def _re2_class(ranges):
  parts = []
  for lo, hi in ranges:
    parts.append(r"\x{%X}" % lo if lo == hi else r"\x{%X}-\x{%X}" % (lo, hi))
  return "[" + "".join(parts) + "]"


@functools.lru_cache(maxsize=None)
def classes():
  """RE2 classes: `delete`, `space`, `punct`, `cjk`, `mark` (Mn).

  `space` is every character that survives `_clean_text` and that Python's `str.split()`
  splits on: the original maps `\\s`/Zs to " " and later splits on `str.split()`, which also
  breaks at U+2028/U+2029.
  """
  delete, space, punct, mark = 1, 2, 4, 8
  flags = bytearray(sys.maxunicode + 1)
  for cp in range(sys.maxunicode + 1):
    if 0xD800 <= cp <= 0xDFFF:  # surrogates never occur in valid UTF-8
      continue
    c = chr(cp)
    cat = unicodedata.category(c)
    if cat == "Cn":  # unassigned: none of the classes below (Cn is not Cc/Cf, P*, Zs, Mn)
      continue
    if cp in (0, 0xFFFD) or is_control(c):
      flags[cp] = delete
    elif is_whitespace(c) or c.isspace():
      flags[cp] = space
    elif is_punctuation(c):
      flags[cp] = punct
    elif cat == "Mn":
      flags[cp] = mark
  return {
      "delete": _re2_class(_ranges(flags, delete)),
      "space": _re2_class(_ranges(flags, space)),
      "punct": _re2_class(_ranges(flags, punct)),
      "cjk": _re2_class(CJK_RANGES),
      "mark": _re2_class(_ranges(flags, mark)),
  }
