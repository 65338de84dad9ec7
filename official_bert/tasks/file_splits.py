"""The user's own files as a job's splits (--train_file, --dev_file, --test_file): the one
reading, subsampling, record caching and prediction-file writing of the jobs that train on
them (`classifier_own_files.OwnFilesJob`, `embedding_job.EmbeddingJob`).
"""

import csv
import io
import os

from data_prep import tfrecord_io
from data_prep.classification import features as classifier_features
from official_bert.training import evaluation

FILE_FLAGS = {"train": "train_file", "dev": "dev_file", "test": "test_file"}
DO_FLAGS = {"train": "do_train", "dev": "do_eval", "test": "do_predict"}


def uses_own_files(settings):
  return any(getattr(settings, flag) for flag in FILE_FLAGS.values())


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
                                         s.max_seq_length, len(examples), s.random_seed, **key)
    record = os.path.join(s.output_dir, f"{split}.tf_record")
    return record, classifier_features.cached_tfrecord(record, key, build)

  def _write_prediction_rows(self, split, predictions, header, rows):
    """`<split>_predictions.tsv` (atomically): `header` and `rows`, led by the file's ids if
    it has them; a file with labels (scores) is also scored into the results."""
    data, out = self.data[split], self.settings.output_dir
    if data.ids is not None:
      header, rows = ["id"] + header, [[i] + row for i, row in zip(data.ids, rows)]
    text = io.StringIO()
    csv.writer(text, delimiter="\t", lineterminator="\n").writerows([header] + rows)
    tfrecord_io.write_text(os.path.join(out, f"{split}_predictions.tsv"), text.getvalue())
    if data.has_labels:
      evaluation.write_results(out, split, self.score(split, predictions), step=0)
