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

import sys

from official_bert.tasks import swag_job
from official_bert.training import common_flags
from official_bert.training import finetuning_runner
from official_bert.training import runner


def define_flags():
  common_flags.define_flags(swag_job.SwagSettings, train_batch_size=16, learning_rate=2e-5,
                            max_seq_length=64)


def main(flag_values):
  settings = finetuning_runner.settings_from_flags(swag_job.SwagSettings, flag_values)
  record = common_flags.flags_dict(flag_values, sys.modules[__name__])
  return finetuning_runner.run_or_restart(settings, swag_job.SwagJob, record)


def console_main():
  """The `bert-run-swag` command (pyproject.toml's [project.scripts])."""
  define_flags()
  runner.launch(main, ["data_dir", "output_dir"])


if __name__ == "__main__":
  console_main()
