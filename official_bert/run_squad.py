r"""SQuAD v1.1 / v2.0 fine-tuning and prediction, as google-research/bert's run_squad.py.

  python -m official_bert.run_squad --vocab_file=vocab.txt \
    --bert_config_file=bert_config.json --init_checkpoint=bert_model.ckpt \
    --do_train --train_file=train-v1.1.json --do_predict --predict_file=dev-v1.1.json \
    --train_batch_size=32 --learning_rate=3e-5 --num_train_epochs=2.0 \
    --max_seq_length=384 --doc_stride=128 --output_dir=out/squad

--train_file: a SQuAD JSON file (its features are written to OUTPUT_DIR/train.tf_record and
reused while the settings match), or TFRecords from `data_prep.create_squad_data`.
--predict_file: the SQuAD JSON to answer and score; --predict_feature_file: its features
from `create_squad_data --is_training=false` (else written to OUTPUT_DIR/predict.tf_record).
--init_checkpoint: ours, a google-research TF1 checkpoint, or a Hugging Face BERT folder
(`model.safetensors`, `config.json`, `vocab.txt`: then --bert_config_file and --vocab_file
may be left out). A checkpoint in --output_dir resumes instead.

Writes predictions.json, nbest_predictions.json, null_odds.json (v2.0) like the original,
and squad_eval_results.json: the official scores of predictions.json against
--predict_file (v2.0: with null_odds.json as na-probs, plus
"null_score_diff_threshold_search": the best --null_score_diff_threshold on this data and
the EM/F1 it gives, searched on every question's best non-null answer).

--do_eval scores --predict_file's answers with the official script (exact match, F1) through
the one evaluation path (eval_results.txt, OUTPUT_DIR/eval); with --eval_every_steps during
training too, the best by F1 kept in OUTPUT_DIR/best (see finetuning_runner).
"""

import sys

from official_bert.tasks import squad_job
from official_bert.training import common_flags
from official_bert.training import finetuning_runner
from official_bert.training import runner


def define_flags():
  common_flags.define_flags(squad_job.SquadSettings, original_only=("verbose_logging",),
                            max_seq_length=384)


def main(flag_values):
  settings = finetuning_runner.settings_from_flags(squad_job.SquadSettings, flag_values)
  record = common_flags.flags_dict(flag_values, sys.modules[__name__])
  return finetuning_runner.run_or_restart(settings, squad_job.SquadJob, record)


def console_main():
  """The `bert-run-squad` command (pyproject.toml's [project.scripts])."""
  define_flags()
  runner.launch(main, ["output_dir"])


if __name__ == "__main__":
  console_main()
