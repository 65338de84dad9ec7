"""The user's own files as a job's splits (--train_file, --dev_file, --test_file): the one
reading, subsampling, record caching and prediction-file writing of the jobs that train on
them (`classifier_own_files.OwnFilesJob`, `embedding_job.EmbeddingJob`), their one --quoting
flag (`DelimitedFilesSettings`), and the one check of an inferred label set for a label rare
enough to be a typo (`warn_rare_labels`: those jobs, own-file NER, and the Python API may call
it).
"""

import collections
import csv
import dataclasses
import io
import os

from absl import logging

from data_prep import tfrecord_io
from data_prep.classification import features as classifier_features
from data_prep.classification import own_files
from official_bert.training import evaluation
from official_bert.training import settings as settings_lib
from official_bert.training.settings import option

FILE_FLAGS = {"train": "train_file", "dev": "dev_file", "test": "test_file"}
DO_FLAGS = {"train": "do_train", "dev": "do_eval", "test": "do_predict"}


# A training label seen fewer than RARE_LABEL_COUNT times, while every other label is seen at
# least RARE_LABEL_RATIO times as often, is named in a warning (`warn_rare_labels`).
RARE_LABEL_COUNT = 3
RARE_LABEL_RATIO = 10


@dataclasses.dataclass(frozen=True)
class DelimitedFilesSettings(settings_lib.OwnFilesSettings):
  """Own .tsv/.csv/.jsonl files (`own_files`: run_classifier, run_embeddings); run_ner's
  CoNLL-column files have no quotes to read."""

  quoting: str = option(
      "csv", "How a .tsv/.csv file's quotes are read: csv (quoted fields, as pandas and "
      "Python's csv module write) or none (quotes are plain characters, as the GLUE TSVs are "
      "read: csv.QUOTE_NONE).", choices=own_files.QUOTINGS)


def uses_own_files(settings):
  return any(getattr(settings, flag) for flag in FILE_FLAGS.values())


def warn_rare_labels(labels, locations=None, label_flag=None, unit="training rows",
                     fix="Fix the file"):
  """Warns (absl WARNING) of each label that is likely a typo: seen fewer than
  `RARE_LABEL_COUNT` times while the other labels are each seen at least `RARE_LABEL_RATIO`
  times as often. A label set inferred from the training data would make it a class of its
  own, silently.

  Args:
    labels: the training labels, one entry per row (`unit`): a label, or a list of labels
      (multi-label: each counts).
    locations: where each row is, parallel to `labels` (e.g. "train.csv:57", or the file
      alone); None: not known.
    label_flag: the flag that gives the label set explicitly (e.g. "--label_names"), which the
      warning suggests; None: the command has none.
    unit: what the entries of `labels` are, for the message.
    fix: what the message asks for (the Python API's labels are no file).
  Returns:
    The warnings (one per rare label, in label order), as logged.
  """
  counts, first = collections.Counter(), {}
  for i, row in enumerate(labels):
    for label in row if isinstance(row, (list, tuple)) else [row]:
      counts[label] += 1
      first.setdefault(label, i)
  common = sorted(label for label, n in counts.items() if n >= RARE_LABEL_COUNT)
  if not common:
    return []
  least = min(counts[label] for label in common)
  warnings = []
  for label in sorted(set(counts) - set(common)):
    n = counts[label]
    if least < RARE_LABEL_RATIO * n:
      continue
    where = f"{locations[first[label]]}: " if locations is not None else ""
    advice = (f", or pass {label_flag}={','.join(map(str, common))} (then any other label is an "
              "error)" if label_flag else "")
    warnings.append(f"{where}label {label!r} occurs {n} time{'s' if n > 1 else ''} in "
                    f"{len(labels):,} {unit} (the others at least {least:,} times): a typo? "
                    f"{fix}{advice}")
    logging.warning("%s", warnings[-1])
  return warnings


class FileSplitsJob:
  """A job's splits read from the user's files. A subclass gives `_read(split)` (an
  `own_files.Examples`: examples, has_labels, ids) and `score(split, predictions)`."""

  missing_file_note = ""  # appended to "--train_file is required for --do_train"

  def __init__(self, settings):
    self.settings = settings
    self.data = {}  # split -> own_files.Examples

  def _path(self, split):
    path = getattr(self.settings, FILE_FLAGS[split])
    if not path:
      raise ValueError(f"--{FILE_FLAGS[split]} is required for --{DO_FLAGS[split]}"
                       f"{self.missing_file_note}")
    return path

  def _read(self, split):
    raise NotImplementedError

  def _examples(self, split):
    """The split's examples, read once; training's a seeded --max_train_examples subset."""
    if split not in self.data:
      self.data[split] = self._read(split)
    examples = self.data[split].examples
    if split == "train":
      s = self.settings
      examples = classifier_features.subsample(examples, s.max_train_examples, s.random_seed)
    return examples

  def _cached_records(self, split, vocab, examples, build, **key):
    """OUTPUT_DIR/<split>.tf_record written by `build` (`features.cached_tfrecord`), or reused
    while the file, the tokenization, the sampling and `key` are unchanged; -> (path, meta)."""
    s = self.settings
    key = classifier_features.source_key(self._path(split), vocab, s.do_lower_case,
                                         s.max_seq_length, len(examples), s.random_seed,
                                         quoting=s.quoting, **key)
    record = os.path.join(s.output_dir, f"{split}.tf_record")
    return record, classifier_features.cached_tfrecord(record, key, build)

  def _write_prediction_rows(self, split, predictions, header, rows):
    """`<split>_predictions.tsv` (atomically): `header` and `rows`, led by the file's ids if
    it has them; a file with labels (scores) is also scored into `<split>_results.txt`.
    Returns the paths written."""
    data, out = self.data[split], self.settings.output_dir
    if data.ids is not None:
      header, rows = ["id"] + header, [[i] + row for i, row in zip(data.ids, rows)]
    text = io.StringIO()
    csv.writer(text, delimiter="\t", lineterminator="\n").writerows([header] + rows)
    path = os.path.join(out, f"{split}_predictions.tsv")
    tfrecord_io.write_text(path, text.getvalue())
    scores = self.score(split, predictions) if data.has_labels else None
    return [path] + evaluation.write_split_results(out, split, scores)
