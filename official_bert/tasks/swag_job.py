"""run_swag's job for `finetuning_runner`: the SWAG CSVs -> cached features, the multiple-choice
task, `<split>_results.tsv` (one probability per choice and the predicted choice)."""

import dataclasses
import os
from typing import Optional

import numpy as np
import tensorflow as tf

from data_prep import schema
from data_prep import tfrecord_io
from data_prep.classification import features as classifier_features
from data_prep.multiple_choice import swag
from official_bert.interop import run_record
from official_bert.tasks.multiple_choice import MultipleChoiceTask
from official_bert.training import finetuning_runner
from official_bert.training import settings as settings_lib
from official_bert.training.settings import option


@dataclasses.dataclass(frozen=True)
class SwagSettings(settings_lib.FinetuningSettings):
  RECORDED_MODEL_TYPE = "multiple_choice"  # `inherit_run_settings`: as ner_job's
  data_dir: Optional[str] = option(None, "Folder with the SWAG train.csv, val.csv, test.csv.")


SPLIT_FILES = {"train": "train.csv", "dev": "val.csv", "test": "test.csv"}


class SwagJob:
  """SWAG data and prediction files for `finetuning_runner.run`."""

  def __init__(self, settings):
    self.settings = settings
    self.ids = {}

  def _write(self, split, vocab):
    s = self.settings
    path = os.path.join(s.data_dir, SPLIT_FILES[split])
    if not tf.io.gfile.exists(path):
      raise FileNotFoundError(f"no {SPLIT_FILES[split]} in {s.data_dir}")
    examples = swag.read_swag(path, require_label=split != "test")
    if split == "train":
      examples = classifier_features.subsample(examples, s.max_train_examples, s.random_seed)
    self.ids[split] = [e.swag_id for e in examples]
    key = classifier_features.source_key(path, vocab, s.do_lower_case, s.max_seq_length,
                                         len(examples), s.random_seed)

    def build():
      tokenizer = classifier_features.cached_tokenizer(vocab, s.do_lower_case)
      columns = swag.convert_examples(examples, s.max_seq_length, tokenizer)
      return schema.swag_features(s.max_seq_length), columns, {}

    record = os.path.join(s.output_dir, f"{split}.tf_record")
    return record, classifier_features.cached_tfrecord(record, key, build)["num_examples"]

  def prepare(self):
    return finetuning_runner.prepare_splits(self.settings, self._write)

  def make_task(self, bert_config):
    return MultipleChoiceTask(bert_config, self.settings.max_seq_length)

  def main_metric(self):
    return "accuracy"

  def run_record(self):
    return run_record.RunRecord.of("multiple_choice", task="SWAG")

  def score(self, split, predictions):
    del split, predictions  # accuracy is the task's own metric
    return {}

  def write_predictions(self, split, predictions):
    probabilities = finetuning_runner.softmax(predictions["logits"])  # [n, choices]
    lines = ["id\t" + "\t".join(f"ending{i}" for i in range(probabilities.shape[1])) +
             "\tprediction\n"]
    for swag_id, row in zip(self.ids[split], probabilities):
      lines.append(f"{swag_id}\t" + "\t".join(f"{p:.6f}" for p in row) +
                   f"\t{int(np.argmax(row))}\n")
    path = os.path.join(self.settings.output_dir, f"{split}_results.tsv")
    tfrecord_io.write_text(path, "".join(lines))
    return [path]
