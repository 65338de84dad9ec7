"""CoNLL-2003 NER files: sentences of (words, IOB2 tags).

Both spellings of the data are read: the original release (`eng.train`, `eng.testa`,
`eng.testb`; IOB1, where `B-` only separates two adjacent entities of one type) and the
common IOB2 copies (`train.txt`, `valid.txt`, `test.txt`; every entity starts with `B-`).
Lines are `word POS chunk NER`, space-separated; blank lines end sentences; `-DOCSTART-`
lines mark documents and are not sentences. Tags are always returned as IOB2:
`iob1_to_iob2` leaves IOB2 unchanged, so no format flag is needed.
"""

import collections
import os

from data_prep import tfrecord_io

Sentence = collections.namedtuple("Sentence", ["words", "tags"])

# The CoNLL-2003 label set, "O" first (id 0).
CONLL2003_LABELS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC",
                    "I-MISC")

# What the data files are called in each spelling, by split.
SPLIT_FILES = {"train": ("eng.train", "train.txt"), "dev": ("eng.testa", "valid.txt"),
               "test": ("eng.testb", "test.txt")}


def iob1_to_iob2(tags):
  """IOB1 -> IOB2: an `I-X` that starts an entity (after `O` or another type) becomes `B-X`.

  >>> iob1_to_iob2(["I-PER", "I-PER", "O", "I-LOC", "B-LOC"])
  ['B-PER', 'I-PER', 'O', 'B-LOC', 'B-LOC']
  """
  out = []
  previous = "O"
  for tag in tags:
    if tag.startswith("I-") and (previous == "O" or previous[2:] != tag[2:]):
      tag = "B-" + tag[2:]
    out.append(tag)
    previous = tag
  return out


def iob2_to_bioes(tags):
  """IOB2 tags -> BIOES: a one-word entity is S-, a longer one B- I-... E-; O stays."""
  out = []
  for i, tag in enumerate(tags):
    following = tags[i + 1] if i + 1 < len(tags) else "O"
    last = following != "I-" + tag[2:]  # the entity ends here
    if tag.startswith("B-"):
      out.append(("S-" if last else "B-") + tag[2:])
    elif tag.startswith("I-"):
      out.append(("E-" if last else "I-") + tag[2:])
    else:
      out.append(tag)
  return out


def read_conll(path, labels=CONLL2003_LABELS, tag_column=-1, token_column=0, to_iob2=True,
               allow_untagged=False):
  """Sentences of a CoNLL-style column file (one token per line, blank line between
  sentences, `-DOCSTART-` lines skipped).

  Args:
    labels: the allowed tags (an unknown one is an error naming the file, line and tag and
      listing them), or None for any.
    tag_column, token_column: column indexes (negative from the end).
    to_iob2: convert IOB1 tags to IOB2 (CoNLL-2003); False keeps the file's tags as they are
      (a user's own scheme: IO, IOB2, BIOES, plain labels, ...).
    allow_untagged: a file whose lines have one column only is read as tokens without tags
      (`Sentence.tags` None): a file to predict.
  Raises ValueError naming the file and line for a line whose column count differs from the
  file's first token line, or too few columns for the token and tag columns.
  """
  sentences = []
  words, tags = [], []
  width = None

  def end_sentence():
    if words:
      untagged = width == 1 and allow_untagged
      sentences.append(Sentence(list(words), None if untagged else
                                (iob1_to_iob2(tags) if to_iob2 else list(tags))))
      words.clear()
      tags.clear()

  for line_no, line in enumerate(tfrecord_io.read_text(path).split("\n"), start=1):
    parts = line.split()
    if not parts:
      end_sentence()
      continue
    if parts[0] == "-DOCSTART-":
      end_sentence()
      continue
    if width is None:
      width = len(parts)
      needed = max(_columns_needed(tag_column), _columns_needed(token_column))
      if width < needed and not (width == 1 and allow_untagged):
        raise ValueError(f"{path}:{line_no}: {width} column(s), but the token and tag columns "
                         f"({token_column}, {tag_column}) need {needed}: {line!r}")
    if len(parts) != width:
      raise ValueError(f"{path}:{line_no}: {len(parts)} columns where the file's first line "
                       f"has {width}: {line!r}")
    if width == 1 and allow_untagged:
      words.append(parts[0])
      continue
    tag = parts[tag_column]
    if labels is not None and tag not in labels:
      raise ValueError(f"{path}:{line_no}: unknown tag {tag!r}; known labels: "
                       f"{list(labels)}")
    words.append(parts[token_column])
    tags.append(tag)
  end_sentence()
  return sentences


def _columns_needed(index):
  return index + 1 if index >= 0 else -index


def tag_set(sentences):
  """The labels of training sentences, "O" first (id 0) if present, the others sorted."""
  found = {t for s in sentences for t in s.tags}
  return (["O"] if "O" in found else []) + sorted(found - {"O"})


def split_path(data_dir, split):
  """The file of `split` ("train", "dev", "test") in `data_dir`, in either spelling."""
  for name in SPLIT_FILES[split]:
    path = os.path.join(data_dir, name)
    if tfrecord_io.is_file(path):
      return path
  raise FileNotFoundError(f"no {' or '.join(SPLIT_FILES[split])} in {data_dir}")
