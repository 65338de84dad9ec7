r"""GLUE sentence (pair) classification and STS-B regression, as google-research/bert's.

  python -m official_bert.run_classifier --task_name=MRPC --data_dir=glue_data/MRPC \
    --vocab_file=vocab.txt --bert_config_file=bert_config.json \
    --init_checkpoint=bert_model.ckpt --do_train --do_eval --do_predict \
    --max_seq_length=128 --train_batch_size=32 --learning_rate=2e-5 \
    --num_train_epochs=3 --output_dir=out/mrpc

--init_checkpoint: ours, a google-research TF1 checkpoint, or a Hugging Face model folder
(`model.safetensors` + `config.json` + `vocab.txt`; then --bert_config_file and --vocab_file
may be left out). --data_dir holds the `glue_data/<TASK>` TSVs, or is a TFDS data dir with
`glue/<config>` (or pass --tfds_data_dir). Features are written once to
`OUTPUT_DIR/<split>.tf_record` (reused while the settings match) and read back by the input
pipeline. Outputs: `eval_results.txt` (loss, accuracy and the task's GLUE metrics; MNLI:
`eval_matched_results.txt` and `eval_mismatched_results.txt`), `test_results.tsv` (class
probabilities, as the original) and the GLUE submission file (`MRPC.tsv`, `MNLI-m.tsv`,
...: `index<TAB>prediction`).

Your own data instead of GLUE (then --task_name may be left out):

  python -m official_bert.run_classifier --train_file=train.csv --dev_file=dev.csv \
    --test_file=test.jsonl --text_column=review --label_column=stars ... --output_dir=out/mine

.tsv, .csv or .jsonl (by extension), columns by header name (`--text_column`, optional
`--text_b_column`, `--label_column`; an `id` column is carried into the predictions; a test
file may lack the label column). A .tsv/.csv is read with CSV quoting (`--quoting=csv`);
`--quoting=none` reads quotes as plain characters, as the GLUE TSVs are read (a GLUE-style
file whose texts hold quotes). `--problem_type` single_label (softmax), multi_label
(sigmoids; labels a JSON list or joined by `--label_separator`) or regression (MSE);
`--class_weights` balanced or a list; `--doc_stride` windows long texts. Labels go to
`OUTPUT_DIR/labels.txt`; predictions to `test_predictions.tsv`. See `tasks/classifier_own_files.py`
and `data_prep/classification/own_files.py`.
"""

import sys

from official_bert.tasks import classifier_job
from official_bert.training import common_flags
from official_bert.training import finetuning_runner
from official_bert.training import runner


def define_flags():
  common_flags.define_flags(classifier_job.ClassifierSettings)


def main(flag_values):
  settings = finetuning_runner.settings_from_flags(classifier_job.ClassifierSettings, flag_values)
  record = common_flags.flags_dict(flag_values, sys.modules[__name__])
  return finetuning_runner.run_or_restart(settings, classifier_job.make_job, record)


def console_main():
  """The `bert-run-classifier` command (pyproject.toml's [project.scripts])."""
  define_flags()
  runner.launch(main, ["output_dir"])


if __name__ == "__main__":
  console_main()
