r"""SWAG multiple choice: each choice is `[CLS] sent1 [SEP] sent2 ending [SEP]`, softmax over
the choices' [CLS] scores (the BERT paper's setup).

  python -m official_bert.run_swag --data_dir=swagaf/data --vocab_file=vocab.txt \
    --bert_config_file=bert_config.json --init_checkpoint=bert_model.ckpt \
    --do_train --do_eval --max_seq_length=64 --train_batch_size=16 \
    --learning_rate=2e-5 --num_train_epochs=3 --output_dir=out/swag

--data_dir holds the SWAG CSVs: `train.csv`, `val.csv` (dev) and `test.csv` (no labels).
Features are cached in `OUTPUT_DIR/<split>.tf_record`. Outputs: `eval_results.txt` (loss,
accuracy) and, with --do_predict, `test_results.tsv` (`id`, one probability per choice and
the predicted choice).
"""

import os
import sys

from absl import flags
import numpy as np

from data_prep.classification import features as classifier_features
from data_prep.multiple_choice import swag
from official_bert.training import finetuning_runner
from official_bert.training import runner
from official_bert.tasks.multiple_choice import MultipleChoiceTask

flags.DEFINE_string("data_dir", None, "Folder with the SWAG train.csv, val.csv, test.csv.")
finetuning_runner.define_flags(default_batch_size=16, default_lr=2e-5, default_seq=64)
FLAGS = flags.FLAGS
SPLIT_FILES = {"train": "train.csv", "dev": "val.csv", "test": "test.csv"}


class SwagJob:
  """SWAG data and prediction files for `finetuning_runner.run`."""

  def __init__(self, flag_values):
    self.flags = flag_values
    self.ids = {}

  def _write(self, split, vocab):
    fv = self.flags
    path = os.path.join(fv.data_dir, SPLIT_FILES[split])
    if not os.path.isfile(path):
      raise FileNotFoundError(f"no {SPLIT_FILES[split]} in {fv.data_dir}")
    examples = swag.read_swag(path, require_label=split != "test")
    if split == "train":
      examples = classifier_features.subsample(examples, fv.max_train_examples, fv.random_seed)
    self.ids[split] = [e.swag_id for e in examples]
    key = {"source": os.path.abspath(path), "vocab_file": os.path.abspath(vocab),
           "do_lower_case": fv.do_lower_case, "max_seq_length": fv.max_seq_length,
           "num_examples": len(examples), "seed": fv.random_seed}

    def build():
      tokenizer = classifier_features.cached_tokenizer(vocab, fv.do_lower_case)
      columns = swag.convert_examples(examples, fv.max_seq_length, tokenizer)
      return swag.swag_schema(fv.max_seq_length), columns, {}

    record = os.path.join(fv.output_dir, f"{split}.tf_record")
    return record, classifier_features.cached_tfrecord(record, key, build)["num_examples"]

  def prepare(self, flag_values):
    return finetuning_runner.prepare_splits(flag_values, self._write)

  def make_task(self, bert_config):
    return MultipleChoiceTask(bert_config, self.flags.max_seq_length)

  def score(self, split, predictions):
    del split, predictions  # accuracy is the task's own metric
    return {}

  def write_predictions(self, split, predictions):
    probabilities = finetuning_runner.softmax(predictions["logits"])  # [n, choices]
    with open(os.path.join(self.flags.output_dir, f"{split}_results.tsv"), "w",
              encoding="utf-8") as f:
      f.write("id\t" + "\t".join(f"ending{i}" for i in range(probabilities.shape[1]))
              + "\tprediction\n")
      for swag_id, row in zip(self.ids[split], probabilities):
        f.write(f"{swag_id}\t" + "\t".join(f"{p:.6f}" for p in row)
                + f"\t{int(np.argmax(row))}\n")


def run(flag_values):
  return finetuning_runner.run(flag_values, SwagJob(flag_values), sys.modules[__name__])


if __name__ == "__main__":
  runner.launch(run, ["data_dir", "output_dir"])
