r"""Distillation: a trained classifier or tagger (the teacher) into a smaller, faster student.

  python -m official_bert.run_distillation --teacher=out/sst2 \
    --train_file=train.tsv --dev_file=dev.tsv --text_column=sentence --quoting=none \
    --unlabeled_file=unlabeled.txt --student_num_layers=2 \
    --do_train --do_eval --num_train_epochs=2 --output_dir=out/sst2_student

--teacher: any trained classifier or tagger folder (a run_classifier or run_ner OUTPUT_DIR,
its best/, or a folder saved by the Python API). The student reads the teacher's vocabulary,
case, sequence length and labels, and takes run_classifier's flags (a classifier teacher) or
run_ner's (a tagger teacher) for its data and training: GLUE (--task_name, --data_dir),
CoNLL-2003 (--data_dir) or own files, evaluation during training, best/, early stopping,
--num_restarts, strategies.

The student: `--student_num_layers=K` keeps K of the teacher's layers (evenly spaced, first
and last included, as DistilBERT: 6 of 12 are 0, 2, 4, 7, 9, 11), its embeddings and head;
or `--student_init=DIR` (a pretrained small model with the same vocabulary) or
`--student_config=bert_config.json` (random weights).

The loss: `(1 - --distill_weight)` x the labels' loss, plus `--distill_weight` x the soft
loss against the teacher (KL divergence of the outputs softened by `--temperature`, scaled by
T^2, Hinton et al. 2015; a regression teacher's score by squared difference), plus
`--hidden_weight` x TinyBERT's hidden-state loss (equal hidden sizes) and `--attention_weight`
x its attention-score loss (equal numbers of heads; by default --hidden_weight's where the
heads match). `--distill_weight=0`
with no unlabeled file is plain fine-tuning of the student (the baseline).
`--unlabeled_file`: texts without labels that the teacher labels (.txt one text a line, a
.tsv/.csv/.jsonl by --text_column, or CoNLL columns for a tagger); distillation gains most
from them.

The OUTPUT_DIR is a model folder like run_classifier's or run_ner's (`export
--checkpoint=OUTPUT_DIR`, `from_preset`, `--do_predict`); its run_settings.json names the
teacher (`distillation`). See docs/distillation.md.
"""

import sys

from official_bert.tasks import distillation_job
from official_bert.training import common_flags
from official_bert.training import finetuning_runner
from official_bert.training import runner


def define_flags():
  common_flags.define_flags(distillation_job.DistillationSettings)


def main(flag_values):
  settings = finetuning_runner.settings_from_flags(distillation_job.DistillationSettings,
                                                   flag_values)
  given = {name for name in flag_values if flag_values[name].present}
  record = common_flags.flags_dict(flag_values, sys.modules[__name__])
  return distillation_job.run(settings, given, record)


def console_main():
  """The `bert-run-distillation` command (pyproject.toml's [project.scripts])."""
  define_flags()
  runner.launch(main, ["output_dir", "teacher"])


if __name__ == "__main__":
  console_main()
