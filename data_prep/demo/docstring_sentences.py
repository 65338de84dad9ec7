"""Docstrings -> prose sentences, for the demo corpus (`stdlib_corpus`): doctests, literal
blocks, markup and code lines are dropped; what is left is split into sentences.
"""

import re

_MIN_LETTER_RATIO = 0.6  # below this a line is markup, a table or code, not prose
# Break after . ! ? (optionally closed by a quote/bracket) when whitespace and an uppercase
# letter or digit follow. Naive about "e.g. Foo", which is acceptable for a demo corpus.
_SENTENCE_END = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"')\]]))\s+(?=[A-Z0-9])")
# C0/C1 control characters left after whitespace collapsing (those str.split() does not eat).
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _is_prose(line):
  chars = [c for c in line if not c.isspace()]
  letters = sum(c.isalpha() for c in chars)
  return bool(chars) and letters >= _MIN_LETTER_RATIO * len(chars)


def _indent(line):
  return len(line) - len(line.lstrip())


_BULLET = re.compile(r"([*+-]|\d+\.|#\.)\s")


def _paragraphs(docstring):
  """Prose paragraphs of a docstring: doctest blocks, literal blocks and code lines removed.

  A literal block (reST "::" blocks, examples, code in the topics text where Sphinx dropped
  the "::") is recognized by layout: after a blank line, a non-bullet line indented deeper
  than the previous paragraph starts it; it ends at the next line indented no deeper.
  """
  paragraphs, current = [], []
  in_doctest = False
  para_indent = None     # indent of the first line of the current/last paragraph
  literal_indent = None  # while inside a literal block: the indent it must stay deeper than
  after_blank = False
  for line in docstring.splitlines() + [""]:
    stripped = line.strip()
    if not stripped:
      in_doctest, after_blank = False, True
      if current:
        paragraphs.append(" ".join(current))
        current = []
      continue
    indent = _indent(line)
    if literal_indent is not None and indent > literal_indent:
      continue
    literal_indent = None
    if (after_blank and para_indent is not None and indent > para_indent and
        not _BULLET.match(stripped)):
      literal_indent = para_indent
      continue
    if after_blank or para_indent is None:
      para_indent = indent
    after_blank = False
    if stripped.startswith(">>>"):
      in_doctest = True  # the prompt, its "..." continuations and its expected output
    if in_doctest or stripped.startswith("...") or not _is_prose(stripped):
      continue
    current.append(stripped[:-1] if stripped.endswith("::") else stripped)  # reST "::" -> ":"
  return paragraphs


def _clean(text):
  return _CONTROL.sub("", " ".join(text.split()))


def sentences(docstring):
  """One docstring -> sentences (a paragraph break always ends a sentence)."""
  out = []
  for paragraph in _paragraphs(docstring):
    for sentence in _SENTENCE_END.split(_clean(paragraph)):
      sentence = sentence.strip()
      # Inline prompts survive line filtering ("type >>> help()"); keep the corpus free of them.
      if sentence and ">>>" not in sentence and any(c.isalpha() for c in sentence):
        out.append(sentence)
  return out
