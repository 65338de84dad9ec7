"""A default pretraining corpus every machine has: the Python standard library's docstrings
(`demo_corpus`, the first step of `make demo`).

Source files are parsed with `ast`, never imported (importing would run module code, need
optional C extensions, and be slow). One document per module: its docstring, then the
class/function docstrings in source order, as sentences (`docstring_sentences`). Documents are
sorted by module path, so the same Python version always gives the same bytes. The sources are
read with `os`/`open()` (this interpreter's own files, always local); the output goes through
`tfrecord_io` like every data_prep output (atomic, any tf.io.gfile path).
"""

import ast
import os
import sysconfig
import time

from absl import logging

from data_prep import tfrecord_io
from data_prep.demo import docstring_sentences

# Directories whose sources are not library documentation: test suites and their data (which
# includes deliberately broken code), the IDE, third-party packages, and the 2to3 fixers.
SKIP_DIRS = frozenset({"test", "tests", "idlelib", "site-packages", "dist-packages",
                       "lib2to3", "__pycache__"})
MIN_SENTENCES = 2  # a one-line docstring gives no sentence pairs for next-sentence prediction


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


_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
# The fields that hold statements (a definition is one): those of blocks, their `else` and
# `finally`, exception handlers and match cases.
_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


def _definitions(tree):
  """Every function and class definition of a module, at any depth. Only statements are
  walked: the expressions that are most of a tree hold none (what `ast.walk` also visits)."""
  found, stack = [], [tree]
  while stack:
    node = stack.pop()
    for field in _BLOCKS:
      children = getattr(node, field, None)
      if isinstance(children, list):
        found.extend(child for child in children if isinstance(child, _DEFINITIONS))
        stack.extend(children)
  return found


def module_docstrings(path):
  """Docstrings of a source file (module first, then defs in source order); None if unparsable."""
  try:
    with open(path, "rb") as f:
      tree = ast.parse(f.read(), filename=path)
  except (SyntaxError, ValueError, UnicodeDecodeError, RecursionError, OSError):
    return None
  defs = _definitions(tree)
  defs.sort(key=lambda n: (n.lineno, n.col_offset))  # the walk is not in source order
  docs = [ast.get_docstring(n, clean=True) for n in [tree] + defs]
  return [d for d in docs if d]


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
    return [docstring_sentences.sentences(text) for text in _topic_texts(path)]
  docs = module_docstrings(path)
  if docs is None:
    return None
  return [[s for d in docs for s in docstring_sentences.sentences(d)]]


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
  """Builds the corpus and writes it atomically; logs and returns a stats dict.

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
  logging.info("Wrote %s: %d documents, %d sentences, %.2f MB from %d parsed modules of %s "
               "(%d unparsable, %d with < %d sentences; %d documents held out) in %.1fs",
               path, stats["documents"], stats["sentences"], stats["bytes"] / 2**20,
               stats["modules"], stats["stdlib"], stats["unparsable"], stats["too_short"],
               MIN_SENTENCES, stats["heldout_documents"], stats["seconds"])
  return stats
