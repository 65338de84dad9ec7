"""run_classifier's settings and jobs for `finetuning_runner`: GLUE (`ClassifierJob`: cached
features, the task's GLUE metrics, test_results.tsv and the submission file) or the user's own
files (`classifier_own_files.OwnFilesJob`), chosen by `make_job`.

The command-line reference is run_classifier's docstring.
"""

import dataclasses
import os
from typing import Optional

import numpy as np

from data_prep import tfrecord_io
from data_prep.classification import glue_processors
from data_prep.classification import glue_records
from data_prep.classification import own_files
from official_bert.interop import run_record
from official_bert.tasks import classifier_own_files
from official_bert.tasks import file_splits
from official_bert.tasks import metrics
from official_bert.tasks.classification import ClassificationTask
from official_bert.training import finetuning_runner
from official_bert.training.settings import option


@dataclasses.dataclass(frozen=True)
class ClassifierSettings(file_splits.DelimitedFilesSettings):
  """GLUE (--task_name, --data_dir) or own .tsv/.csv/.jsonl files (columns by header name)."""

  # How the model's outputs are read, from OUTPUT_DIR's run record (a classifier's) when not
  # given (with INHERITED_FLAGS): a later --do_predict scores as the model was trained, not as
  # a single-label classifier of truncated texts.
  RECORDED_FLAGS = ("problem_type", "multi_label_threshold", "label_separator", "doc_stride")
  RECORDED_MODEL_TYPE = "classifier"
  HEAD_FLAGS = ("problem_type",)  # what the trained head is: refused when they contradict it

  task_name: Optional[str] = option(
      None, "GLUE task: CoLA, SST-2, MRPC, STS-B, QQP, MNLI, QNLI, RTE, WNLI.")
  data_dir: Optional[str] = option(None, "The glue_data/<TASK> folder (or a TFDS data dir).")
  tfds_data_dir: Optional[str] = option(None, "Read TFDS glue/<config> from this data dir.")
  text_column: str = option("text", "Column (header name, JSON key) of the text.")
  text_b_column: Optional[str] = option(None, "Column of the second text of a pair.")
  label_column: str = option("label", "Column of the label.")
  label_names: Optional[tuple] = option(
      None, "The label set in id order (default: the training file's labels, sorted, or "
      "OUTPUT_DIR/labels.txt).")
  problem_type: str = option(
      "single_label", "Own files: one label (softmax), several (sigmoids) or a number (MSE).",
      choices=own_files.PROBLEM_TYPES)
  label_separator: str = option(",", "Joins the labels of a multi-label TSV/CSV field.")
  multi_label_threshold: float = option(0.5, "Multi-label: predict labels above this "
                                        "probability.", above=0.0, maximum=1.0)
  class_weights: Optional[str] = option(
      None, "Single-label loss weights: 'balanced' (n / (labels * count) from the training "
      "file) or one number per label, in label order.")
  doc_stride: Optional[int] = option(
      None, "Own files: classify a text longer than --max_seq_length as overlapping windows "
      "starting every N tokens, averaging their probabilities (default: truncate, or the "
      "trained model's N on a later run in its --output_dir; 0: truncate).", minimum=0)


class ClassifierJob:
  """GLUE data, metrics and submission files for `finetuning_runner.run`."""

  def __init__(self, settings):
    self.settings = settings
    self.processor = glue_processors.get_processor(settings.task_name)
    self.meta = {}

  def _write(self, split, vocab):
    s = self.settings
    path, self.meta[split] = glue_records.write_split(
        self.processor, split, s.output_dir, vocab, s.do_lower_case, s.max_seq_length, s.data_dir,
        s.tfds_data_dir, s.max_train_examples if split == "train" else 0, s.random_seed)
    return path, self.meta[split]["num_examples"]

  def prepare(self):
    return finetuning_runner.prepare_splits(self.settings, self._write, self.processor.eval_splits,
                                            self.processor.predict_splits)

  def make_task(self, bert_config):
    regression = self.processor.is_regression
    return ClassificationTask(bert_config,
                              1 if regression else len(self.processor.labels),
                              self.settings.max_seq_length,
                              is_regression=regression)

  def main_metric(self):
    """--best_metric's default: the score GLUE ranks this task by."""
    return {"cola": "matthews_corr", "mrpc": "f1", "qqp": "f1",
            "stsb": "corr"}.get(self.processor.name.lower().replace("-", ""), "accuracy")

  def run_record(self):
    """For OUTPUT_DIR/run_settings.json (export's defaults)."""
    regression = self.processor.is_regression
    return run_record.RunRecord.of(
        "classifier", task=self.processor.name,
        labels=None if regression else list(self.processor.labels),
        num_labels=1 if regression else len(self.processor.labels),
        problem_type="regression" if regression else "single_label",
        text_pairs=self.processor.train_columns.text_b is not None)

  def _predicted(self, logits):  # [n, labels] -> class ids, or scores for regression
    return logits[:, 0] if self.processor.is_regression else np.argmax(logits, -1)

  def score(self, split, predictions):
    real = predictions["is_real_example"] > 0
    predicted = self._predicted(predictions["logits"])[real]
    if not self.processor.is_regression:
      metrics.warn_if_one_class(np.bincount(predicted, minlength=len(self.processor.labels)),
                                self.processor.labels, split, metrics.ONE_CLASS_ADVICE)
    return metrics.glue_scores(self.processor.name, predicted, predictions["label_ids"][real])

  def write_predictions(self, split, predictions):
    real = predictions["is_real_example"] > 0
    logits = predictions["logits"][real]
    guids = self.meta[split]["guids"]
    out = self.settings.output_dir
    rows = logits if self.processor.is_regression else finetuning_runner.softmax(logits)
    results = os.path.join(out, "test_results.tsv" if split == "test" else f"{split}_results.tsv")
    tfrecord_io.write_text(results,
                           "".join("\t".join(f"{p:.6f}" for p in row) + "\n" for row in rows))
    lines = ["index\tprediction\n"]
    for guid, value in zip(guids, self._predicted(logits)):
      label = f"{value:.3f}" if self.processor.is_regression else self.processor.labels[value]
      lines.append(f"{guid.rsplit('-', 1)[1]}\t{label}\n")
    submission = os.path.join(out, self.processor.submission_name(split) + ".tsv")
    tfrecord_io.write_text(submission, "".join(lines))
    return [results, submission]


def make_job(settings):
  """The own-files job with --train_file/--dev_file/--test_file, else GLUE's."""
  if file_splits.uses_own_files(settings):
    return classifier_own_files.OwnFilesJob(settings)
  if settings.doc_stride:
    raise ValueError("--doc_stride applies to your own files (--train_file/--dev_file/"
                     "--test_file)")
  if not settings.task_name:
    raise ValueError("--task_name (GLUE) or --train_file/--dev_file/--test_file (your own "
                     "files) is required")
  return ClassifierJob(settings)
