r"""A default pretraining corpus every machine has: the Python standard library's docstrings.

  python -m data_prep.demo_corpus --output_file=build/demo/corpus.txt [--max_mb=3]

Source files are parsed with `ast`, never imported (importing would run module code, need
optional C extensions, and be slow). One document per module: its docstring, then the
class/function docstrings in source order. Documents are sorted by module path, so the same
Python version always gives the same bytes. Output format as everywhere here: one sentence
per line, a blank line between documents, UTF-8. The sources are read with `os`/`open()`
(they are this interpreter's own files, always local); the output goes through
`tfrecord_io` like every data_prep output (atomic, any tf.io.gfile path).
"""

import ast
import os
import re
import sysconfig
import time

from absl import flags
from absl import logging

from data_prep import cli
from data_prep import tfrecord_io

FLAGS = flags.FLAGS

# Directories whose sources are not library documentation: test suites and their data (which
# includes deliberately broken code), the IDE, third-party packages, and the 2to3 fixers.
SKIP_DIRS = frozenset({"test", "tests", "idlelib", "site-packages", "dist-packages",
                       "lib2to3", "__pycache__"})
MIN_SENTENCES = 2  # a one-line docstring gives no sentence pairs for next-sentence prediction
_MIN_LETTER_RATIO = 0.6  # below this a line is markup, a table or code, not prose
# Break after . ! ? (optionally closed by a quote/bracket) when whitespace and an uppercase
# letter or digit follow. Naive about "e.g. Foo", which is acceptable for a demo corpus.
_SENTENCE_END = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"')\]]))\s+(?=[A-Z0-9])")
# C0/C1 control characters left after whitespace collapsing (those str.split() does not eat).
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def stdlib_dir():
  return sysconfig.get_paths()["stdlib"]


def module_files(root):
  """Relative paths of the stdlib's .py files outside SKIP_DIRS, sorted (determinism)."""
  found = []
  for dirpath, dirnames, filenames in os.walk(root):
    dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
    rel_dir = os.path.relpath(dirpath, root)
    for name in filenames:
      if name.endswith(".py"):
        found.append(os.path.normpath(os.path.join(rel_dir, name)))
  return sorted(found)


def module_docstrings(path):
  """Docstrings of a source file (module first, then defs in source order); None if unparsable."""
  try:
    with open(path, "rb") as f:
      tree = ast.parse(f.read(), filename=path)
  except (SyntaxError, ValueError, UnicodeDecodeError, RecursionError, OSError):
    return None
  defs = [n for n in ast.walk(tree)
          if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
  defs.sort(key=lambda n: (n.lineno, n.col_offset))  # ast.walk is breadth-first
  docs = [ast.get_docstring(n, clean=True) for n in [tree] + defs]
  return [d for d in docs if d]


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


# The Language Reference text behind `help("assert")` etc.: prose, kept as a dict of strings
# rather than docstrings; one document per topic. Roughly a third of the corpus.
TOPICS_MODULE = os.path.join("pydoc_data", "topics.py")


def _topic_texts(path):
  """The values of `topics = {...}` in pydoc_data/topics.py, in source order ([] if absent)."""
  try:
    with open(path, "rb") as f:
      tree = ast.parse(f.read(), filename=path)
  except (SyntaxError, ValueError, UnicodeDecodeError, RecursionError, OSError):
    return []
  for node in tree.body:
    if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict) and
        any(isinstance(t, ast.Name) and t.id == "topics" for t in node.targets)):
      return [v.value for v in node.value.values
              if isinstance(v, ast.Constant) and isinstance(v.value, str)]
  return []


def module_documents(root, rel):
  """Documents (lists of sentences) of one source file; None if it does not parse."""
  path = os.path.join(root, rel)
  if rel == TOPICS_MODULE:
    return [sentences(text) for text in _topic_texts(path)]
  docs = module_docstrings(path)
  if docs is None:
    return None
  return [[s for d in docs for s in sentences(d)]]


def _doc_bytes(doc):
  return sum(len(s.encode("utf-8")) + 1 for s in doc) + 1  # lines + their "\n" + blank line


def build_corpus(max_bytes, root=None, stats=None):
  """Documents (lists of sentences) in module-path order, at most ~max_bytes of text.

  Stops before the first document that would pass max_bytes, so the result is a prefix of
  the full corpus. `stats`, if given, is filled with counts.
  """
  root = root or stdlib_dir()
  files = module_files(root)
  corpus, size = [], 0
  counts = {"modules": 0, "unparsable": 0, "too_short": 0}
  for rel in files:
    docs = module_documents(root, rel)
    if docs is None:
      counts["unparsable"] += 1
      continue
    counts["modules"] += 1
    for doc in docs:
      if len(doc) < MIN_SENTENCES:
        counts["too_short"] += 1
        continue
      if size + _doc_bytes(doc) > max_bytes:
        break
      corpus.append(doc)
      size += _doc_bytes(doc)
    else:
      continue
    break  # max_bytes reached
  if stats is not None:
    stats.update(counts, source_files=len(files), stdlib=root)
  return corpus


def render(corpus):
  """Documents -> file text: one sentence per line, one blank line between documents."""
  return "\n\n".join("\n".join(doc) for doc in corpus) + "\n" if corpus else ""


def write_corpus(path, max_bytes, root=None, heldout_path=None, heldout_every=20):
  """Builds the corpus and writes it atomically; returns a stats dict.

  With `heldout_path`, every `heldout_every`-th document goes there instead, so a model can
  be evaluated on modules it never saw.
  """
  t0 = time.time()
  stats = {}
  corpus = build_corpus(max_bytes, root=root, stats=stats)
  if not corpus:
    raise ValueError(f"no documents found in the standard library at {stats['stdlib']}")
  heldout = []
  if heldout_path:
    heldout = corpus[heldout_every - 1::heldout_every]
    corpus = [d for i, d in enumerate(corpus) if (i + 1) % heldout_every]
    tfrecord_io.write_text(heldout_path, render(heldout))
  text = render(corpus)
  tfrecord_io.write_text(path, text)
  stats.update(documents=len(corpus), sentences=sum(len(d) for d in corpus),
               bytes=len(text.encode("utf-8")), output_file=path,
               heldout_documents=len(heldout), seconds=time.time() - t0)
  return stats


def define_flags():
  """Called only when run as a program (see `data_prep.cli`)."""
  flags.DEFINE_string("output_file", None, "Where to write the corpus.")
  flags.DEFINE_float("max_mb", 3.0, "Stop adding documents at this many MB (2**20 bytes).")
  flags.DEFINE_string("heldout_file", None, "If set, every 20th document goes here instead.")


def main(argv):
  del argv  # no positional arguments (`cli.launch` checks)
  s = write_corpus(FLAGS.output_file, int(FLAGS.max_mb * 2**20),
                   heldout_path=FLAGS.heldout_file)
  logging.info("Wrote %s: %d documents, %d sentences, %.2f MB from %d parsed modules of %s "
               "(%d unparsable, %d with < %d sentences; %d documents held out) in %.1fs",
               s["output_file"], s["documents"], s["sentences"], s["bytes"] / 2**20,
               s["modules"], s["stdlib"], s["unparsable"], s["too_short"], MIN_SENTENCES,
               s["heldout_documents"], s["seconds"])


if __name__ == "__main__":
  define_flags()
  cli.launch(main, required_flags=("output_file",))
