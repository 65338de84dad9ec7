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


def read_conll(path, labels=CONLL2003_LABELS, tag_column=-1):
  """Sentences of a CoNLL file, tags converted to IOB2.

  Raises ValueError naming the file and line for a line with one column, or a tag outside
  `labels` (listing them); labels=None accepts any tag.
  """
  sentences = []
  words, tags = [], []

  def end_sentence():
    if words:
      sentences.append(Sentence(list(words), iob1_to_iob2(tags)))
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
    if len(parts) < 2:
      raise ValueError(f"{path}:{line_no}: expected 'word ... tag' columns, got {line!r}")
    tag = parts[tag_column]
    if labels is not None and tag not in labels:
      raise ValueError(f"{path}:{line_no}: unknown tag {tag!r}; known labels: "
                       f"{list(labels)}")
    words.append(parts[0])
    tags.append(tag)
  end_sentence()
  return sentences


def split_path(data_dir, split):
  """The file of `split` ("train", "dev", "test") in `data_dir`, in either spelling."""
  for name in SPLIT_FILES[split]:
    path = os.path.join(data_dir, name)
    if tfrecord_io.is_file(path):
      return path
  raise FileNotFoundError(f"no {' or '.join(SPLIT_FILES[split])} in {data_dir}")
