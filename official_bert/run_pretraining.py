r"""BERT pretraining (masked LM + next sentence) on any tf.distribute strategy.

  python -m official_bert.run_pretraining --bert_config_file=configs/base.json \
    --input_file='data/pretrain-*' --output_dir=out --do_train --train_batch_size=256 \
    --num_train_steps=100000 --num_warmup_steps=10000 --learning_rate=1e-4 \
    --distribution_strategy=mirrored --dtype=bfloat16 --enable_xla

--bert_config_file may be left out with an --init_checkpoint folder that holds the config
(bert_config.json, or a Hugging Face folder's config.json): continued pretraining of a
released model. Restarting with the same --output_dir resumes from its latest checkpoint;
SIGTERM saves one before exiting. `tensorboard --logdir=OUTPUT_DIR` shows the losses,
accuracies, learning rate, gradient norm and examples/s.

The original recipe is the default. Two departures from it, as most pretraining does today:
  --next_sentence=False  masked LM only (RoBERTa): no next-sentence head, loss or metrics
      (evaluation reports masked_lm_loss/accuracy). Any records work (their
      next_sentence_labels are ignored); the writer's --next_sentence=False packs single
      segments for it. The pooler, which only the NSP head reads, is not trained: a
      fine-tuning script warm-started from the checkpoint says so and trains it from there.
  --dynamic_masking --vocab_file=VOCAB  reads records written with
      create_pretraining_data --masking=none and masks every batch in the input pipeline
      with the writer's rules (--masked_lm_prob, --max_predictions_per_seq,
      --do_whole_word_mask; 80% [MASK] / 10% random / 10% kept; never [CLS], [SEP] or
      padding), so each epoch sees new masks. --vocab_file (not a flag of the original
      script) gives the ids of [CLS], [SEP] and [MASK]; with --do_train (with or without
      --dynamic_masking) it also makes OUTPUT_DIR a model folder (bert_config.json,
      vocab.txt, the case the --init_checkpoint folder states or else the vocabulary
      implies, run_settings.json) that
      `ob.MaskedLM.from_preset`, `export --checkpoint=OUTPUT_DIR` and `run_*
      --init_checkpoint` read with no model flags. Masks
      are a function of --random_seed and the record's place in the input stream: reruns and
      resumed runs mask exactly as the uninterrupted run. Offline-masked records with
      --dynamic_masking, or unmasked ones without it, are an error naming the file.
"""

import sys

from official_bert.tasks import pretraining_job
from official_bert.training import common_flags
from official_bert.training import runner


def define_flags():
  common_flags.define_flags(pretraining_job.PretrainingSettings)


def main(flag_values):
  settings = common_flags.settings_from_flags(pretraining_job.PretrainingSettings, flag_values)
  record = common_flags.flags_dict(flag_values, sys.modules[__name__])
  return pretraining_job.run(settings, record)


def console_main():
  """The `bert-run-pretraining` command (pyproject.toml's [project.scripts])."""
  define_flags()
  runner.launch(main, ["input_file", "output_dir"])  # the config: pretraining_job.model_config


if __name__ == "__main__":
  console_main()
