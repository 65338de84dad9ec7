"""Character classes of the original BERT BasicTokenizer, as RE2 regex classes.

The original decides per character with Python's `unicodedata`; tensorflow-text and RE2 carry
their own (ICU/RE2) Unicode tables, which differ from Python's in places (newer or older
Unicode versions, different notions of whitespace). Building the classes from Python's own
tables once per process keeps the in-graph tokenizer's decisions identical to the reference
`FullTokenizer` running in the same interpreter.
"""

import functools
import itertools
import sys
import unicodedata

# The original's "Chinese character" ranges (CJK Unified Ideographs + extensions + compatibility).
CJK_RANGES = (
    (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
)


# The Unicode categories a class member can have (besides ASCII and U+FFFD, added apart).
_CANDIDATE_CATEGORIES = frozenset(
    ["Cc", "Cf", "Zs", "Zl", "Zp", "Mn", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po"])


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


def _ranges(code_points):
  """Sorted (lo, hi) ranges of consecutive code points, from sorted `code_points`."""
  out = []
  for cp in code_points:
    if out and out[-1][1] == cp - 1:
      out[-1][1] = cp
    else:
      out.append([cp, cp])
  return tuple((lo, hi) for lo, hi in out)


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
  # Only these categories (and ASCII's symbols, and U+FFFD) can be in a class: each class
  # below is Cc/Cf, Zs or `str.isspace` (Cc, Zs, Zl, Zp), P* or ASCII, or Mn. Python's
  # per-character decisions then run on a few thousand characters, not on all 1.1 million.
  categories = map(unicodedata.category, map(chr, range(sys.maxunicode + 1)))
  candidates = itertools.compress(range(sys.maxunicode + 1),
                                  map(_CANDIDATE_CATEGORIES.__contains__, categories))
  members = {"delete": [], "space": [], "punct": [], "mark": []}
  for cp in sorted(set(candidates).union(range(128), [0xFFFD])):
    c = chr(cp)
    if cp in (0, 0xFFFD) or is_control(c):
      members["delete"].append(cp)
    elif is_whitespace(c) or c.isspace():
      members["space"].append(cp)
    elif is_punctuation(c):
      members["punct"].append(cp)
    elif unicodedata.category(c) == "Mn":
      members["mark"].append(cp)
  return {
      "delete": _re2_class(_ranges(members["delete"])),
      "space": _re2_class(_ranges(members["space"])),
      "punct": _re2_class(_ranges(members["punct"])),
      "cjk": _re2_class(CJK_RANGES),
      "mark": _re2_class(_ranges(members["mark"])),
  }
