"""Reads SQuAD v1.1 / v2.0 JSON into paragraphs and questions, as the original run_squad.py.

The original `read_squad_examples` splits each context on whitespace (" \\t\\r\\n" and U+202F)
into `doc_tokens`, maps every character to its word (`char_to_word_offset`) and turns a
training answer's character offset into word positions. Here a paragraph is split once and
shared by its questions (the original copies the words into every question), and the
character -> word map is a binary search over word starts instead of a per-character list.

Differences from the original, all on input it would crash on or silently mishandle:
  - a file that is not JSON, lacks "data"/"paragraphs"/"qas", or whose version disagrees with
    `version_2_with_negative`, is a `SquadError` naming the file (and the article/paragraph);
  - a training answer whose text is not found at its offset (or whose offset is outside the
    context) is skipped and counted (the original skips the first kind and crashes on the
    second); the caller logs the count;
  - training questions with several answers (dev files) use the first one (the original
    raises);
  - a context without a single non-whitespace character yields questions without windows:
    skipped for training, kept for prediction (postprocessing answers "empty", the
    original's fallback, for v1.1, and "" for v2.0, where the original crashes).
"""

import bisect
import collections
import dataclasses
import json
import re
from typing import List, Optional

from data_prep import tfrecord_io

# The original's `is_whitespace`: exactly these, not Python's str.split() set.
_WORD = re.compile("[^ \t\r\n\u202f]+")

V1 = "1.1"
V2 = "v2.0"


class SquadError(ValueError):
  """A SQuAD file that cannot be read as asked; the message names the file."""


@dataclasses.dataclass
class Paragraph:
  context: str
  doc_tokens: List[str]  # whitespace-separated words of the context
  _word_starts: Optional[List[int]] = None  # character offset of each word (on demand)

  def char_to_word(self, offset):
    """The original's `char_to_word_offset[offset]`: the word holding or preceding `offset`.

    Example: context "ab  cd": offsets 0,1 -> 0; 2,3 (spaces) -> 0; 4,5 -> 1.
    """
    if self._word_starts is None:  # only training needs it
      self._word_starts = [m.start() for m in _WORD.finditer(self.context)]
    return bisect.bisect_right(self._word_starts, offset) - 1


@dataclasses.dataclass
class Example:
  qas_id: str
  question_text: str
  paragraph_index: int
  orig_answer_text: Optional[str] = None  # training only
  start_position: Optional[int] = None  # word index in the paragraph; -1 if impossible
  end_position: Optional[int] = None
  is_impossible: bool = False


def split_words(context):
  """The original's whitespace split of a context (its `doc_tokens`)."""
  return _WORD.findall(context)


def load_json(path):
  """The parsed file; SquadError naming the file if it is missing or not JSON."""
  try:
    with tfrecord_io.open_file(path, "r", encoding="utf-8-sig") as f:  # a BOM is no error
      return json.load(f)
  except FileNotFoundError:
    raise SquadError(f"{path}: SQuAD file not found") from None
  except IsADirectoryError:
    raise SquadError(f"{path}: is a folder, not a SQuAD file") from None
  except UnicodeDecodeError as e:
    raise SquadError(f"{path}: not UTF-8 ({e})") from None
  except json.JSONDecodeError as e:
    raise SquadError(f"{path}: malformed JSON at line {e.lineno} column {e.colno}: "
                     f"{e.msg}") from None


def file_version(dataset, path):
  """"1.1" or "v2.0" from the "version" field, else from whether `is_impossible` appears."""
  if not isinstance(dataset, dict) or not isinstance(dataset.get("data"), list):
    raise SquadError(f"{path}: not a SQuAD file (expected an object with a \"data\" list)")
  version = str(dataset.get("version", ""))
  if version in ("1.1", "v1.1"):
    return V1
  if version in ("v2.0", "2.0"):
    return V2
  has_impossible = any("is_impossible" in qa for article in dataset["data"]
                       for p in article.get("paragraphs", ()) for qa in p.get("qas", ()))
  return V2 if has_impossible else V1


def _field(obj, key, kind, where, path):
  value = obj.get(key) if isinstance(obj, dict) else None
  if not isinstance(value, kind):
    raise SquadError(f"{path}: {where}: missing or malformed \"{key}\"")
  return value


def select_articles(articles, spec):
  """Articles by a Python slice string: "40:" (from the 41st on), ":40", "3:5" or ""."""
  if not spec:
    return articles
  parts = spec.split(":")
  if len(parts) != 2:
    raise ValueError(f"--articles={spec!r}: expected START:END (either may be empty)")
  try:
    start, end = (int(p) if p.strip() else None for p in parts)
  except ValueError:
    raise ValueError(f"--articles={spec!r}: START and END must be integers") from None
  return articles[start:end]


def read_squad(path, is_training, version_2_with_negative, articles="", skipped=None):
  """Reads a SQuAD file.

  Args:
    is_training: read answers (first answer; v2 impossible questions get -1 positions).
    version_2_with_negative: the file must be v2.0 (and v1.1 if False).
    articles: optional slice of the article list, e.g. "0:40" (see `select_articles`).
  Returns:
    (paragraphs, examples, stats): stats counts "questions", "skipped_answer_mismatch",
    "skipped_empty_context", "multiple_answers" (first one used). `skipped`, a list, gets the
    id of each training question skipped for its answer.
  """
  dataset = load_json(path)
  version = file_version(dataset, path)
  if version_2_with_negative and version != V2:
    raise SquadError(f"{path}: is SQuAD v{version}, but --version_2_with_negative is set "
                     "(version_2_with_negative=True in the Python API)")
  if not version_2_with_negative and version == V2:
    raise SquadError(f"{path}: is SQuAD {version} (unanswerable questions); pass "
                     "--version_2_with_negative (the Python API: a QuestionAnswerer with "
                     "version_2_with_negative=True)")
  paragraphs, examples = [], []
  stats = collections.Counter()
  seen_ids = {}  # question id -> where
  for a, article in enumerate(select_articles(dataset["data"], articles)):
    for p, para in enumerate(_field(article, "paragraphs", list, f"article {a}", path)):
      where = f"article {a} paragraph {p}"
      context = _field(para, "context", str, where, path)
      words = split_words(context)
      paragraph = Paragraph(context, words)
      for qa in _field(para, "qas", list, where, path):
        example = Example(qas_id=str(_field(qa, "id", (str, int), where, path)),
                          question_text=_field(qa, "question", str, where, path),
                          paragraph_index=len(paragraphs))
        if "is_impossible" in qa and not isinstance(qa["is_impossible"], bool):
          raise SquadError(f"{path}: {where}: question {example.qas_id}: is_impossible is "
                           f"{qa['is_impossible']!r}, expected true or false (a JSON bool)")
        if example.qas_id in seen_ids:
          # predictions.json and the scores key by id: one of the two would be lost.
          raise SquadError(f"{path}: {where}: question id {example.qas_id} is also the id of "
                           f"a question in {seen_ids[example.qas_id]}: ids must be unique")
        seen_ids[example.qas_id] = where
        stats["questions"] += 1
        if not words:
          stats["skipped_empty_context"] += 1
          if is_training:
            continue
        elif is_training and not _set_answer(example, qa, paragraph,
                                             version_2_with_negative, stats, where, path):
          if skipped is not None:
            skipped.append(example.qas_id)
          continue
        examples.append(example)
      paragraphs.append(paragraph)
  return paragraphs, examples, stats


def _set_answer(example, qa, paragraph, version_2_with_negative, stats, where, path):
  """Sets the answer fields; False if the answer does not match the context (skipped)."""
  answers = qa.get("answers") or []
  example.is_impossible = bool(version_2_with_negative and qa.get("is_impossible", False))
  if example.is_impossible:
    example.start_position = example.end_position = -1
    example.orig_answer_text = ""
    return True
  if not answers and qa.get("is_impossible") and not version_2_with_negative:
    raise SquadError(f"{path}: {where}: question {example.qas_id} is marked is_impossible, "
                     "which SQuAD 1.1 training has not: pass --version_2_with_negative (the "
                     "Python API: a QuestionAnswerer with version_2_with_negative=True)")
  if not answers:
    raise SquadError(f"{path}: {where}: question {example.qas_id} has no answer "
                     "(and is not marked is_impossible)")
  if len(answers) > 1:
    stats["multiple_answers"] += 1
  text = _field(answers[0], "text", str, where, path)
  offset = _field(answers[0], "answer_start", int, where, path)  # "4" is not an offset
  context = paragraph.context
  if not text or not 0 <= offset <= len(context) - len(text):
    stats["skipped_answer_mismatch"] += 1
    return False
  start = paragraph.char_to_word(offset)
  end = paragraph.char_to_word(offset + len(text) - 1)
  # The original's check: the words covering the answer contain its whitespace-cleaned text.
  actual = " ".join(paragraph.doc_tokens[max(start, 0):end + 1])
  if start < 0 or actual.find(" ".join(text.strip().split())) == -1:
    stats["skipped_answer_mismatch"] += 1
    return False
  example.orig_answer_text = text
  example.start_position, example.end_position = start, end
  return True
