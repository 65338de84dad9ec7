r"""BERT pretraining (masked LM + next sentence) on any tf.distribute strategy.

  python -m official_bert.run_pretraining --bert_config_file=configs/base.json \
    --input_file='data/pretrain-*' --output_dir=out --do_train --train_batch_size=256 \
    --num_train_steps=100000 --num_warmup_steps=10000 --learning_rate=1e-4 \
    --distribution_strategy=mirrored --dtype=bfloat16 --enable_xla

Restarting with the same --output_dir resumes from its latest checkpoint; SIGTERM saves one
before exiting. `tensorboard --logdir=OUTPUT_DIR` shows the losses, accuracies, learning rate,
gradient norm and examples/s.

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
      script) gives the ids of [CLS], [SEP] and [MASK]. Masks are a function of
      --random_seed and the record's place in the input stream: reruns and resumed runs mask
      exactly as the uninterrupted run. Offline-masked records with --dynamic_masking, or
      unmasked ones without it, are an error naming the file.
"""

import dataclasses
import sys
from typing import Optional

from data_prep import tfrecord_io
from official_bert.modeling import bert_config as bert_config_lib
from official_bert.tasks.pretraining import PretrainingTask
from official_bert.training import common_flags
from official_bert.training import dynamic_masking
from official_bert.training import runner
from official_bert.training import settings as settings_lib
from official_bert.training.settings import option


@dataclasses.dataclass(frozen=True)
class PretrainingSettings(settings_lib.RunSettings):
  input_file: Optional[str] = option(None, "Pretraining TFRecords: comma-separated globs.")
  eval_input_file: Optional[str] = option(None, "Held-out TFRecords (default: --input_file).")
  max_predictions_per_seq: int = option(20, "Masked LM predictions per sequence.", minimum=1)
  shuffle_buffer_size: int = option(10000, "Training examples shuffled together.", minimum=1)
  next_sentence: bool = option(
      True, "Train the next-sentence head and loss; False: masked LM only (the pooler is not "
      "trained).")
  dynamic_masking: bool = option(
      False, "Mask each batch in the input pipeline: for records written with "
      "create_pretraining_data --masking=none (needs --vocab_file).")
  vocab_file: Optional[str] = option(
      None, "With --dynamic_masking: the vocabulary the records were written with (its "
      "[CLS], [SEP] and [MASK] ids).")
  masked_lm_prob: float = option(0.15, "With --dynamic_masking: fraction of tokens masked.",
                                 above=0.0, maximum=1.0)
  do_whole_word_mask: bool = option(
      False, "With --dynamic_masking: mask whole words (the records' word_starts).")


def define_flags():
  common_flags.define_flags(PretrainingSettings)


def masking_options(settings, config):
  """`MaskingOptions` for --dynamic_masking, else None (ValueError naming a flag that needs
  --dynamic_masking)."""
  s = settings
  if not s.dynamic_masking:
    if s.do_whole_word_mask:
      raise ValueError("--do_whole_word_mask needs --dynamic_masking (records masked offline "
                       "were masked by create_pretraining_data's own --do_whole_word_mask)")
    return None
  return dynamic_masking.options_from_vocab(
      s.vocab_file, config.vocab_size, max_predictions_per_seq=s.max_predictions_per_seq,
      masked_lm_prob=s.masked_lm_prob, do_whole_word_mask=s.do_whole_word_mask,
      seed=s.random_seed)


def run(settings, record=None):
  """Trains and/or evaluates; returns {"train": metrics, "eval": results}.

  Args:
    settings: `PretrainingSettings`.
    record: the run's flags, written to TensorBoard next to the model config.
  """
  s = settings
  if not (s.do_train or s.do_eval):
    raise ValueError("at least one of --do_train and --do_eval must be set")
  tfrecord_io.make_dirs(s.output_dir, "--output_dir")
  strategy = runner.setup_runtime(s)
  config = bert_config_lib.BertConfig.from_json_file(s.bert_config_file)
  runner.check_sequence_length(s.max_seq_length, config, s.bert_config_file)
  task = PretrainingTask(config, s.max_seq_length, s.max_predictions_per_seq, s.shuffle_buffer_size,
                         next_sentence=s.next_sentence, masking=masking_options(s, config))
  trainer = runner.make_trainer(s, strategy, task, s.num_train_steps, s.num_warmup_steps)
  results = {}
  if s.do_train:
    run_config = {"bert_config": config.to_dict(), "flags": record or {}}
    with runner.explained_input_errors(s.input_file, s.bert_config_file):
      results["train"] = runner.run_training(
          trainer, runner.dataset_fn(task, s.input_file, s.train_batch_size, True, s.random_seed),
          s.output_dir, s.num_train_steps, s.steps_per_loop, s.save_checkpoints_steps,
          s.init_checkpoint, s.keep_checkpoint_max, run_config)
  if s.do_eval:
    if not s.do_train:
      runner.restore_for_eval(trainer, s.output_dir, s.init_checkpoint)
    eval_files = s.eval_input_file or s.input_file
    with runner.explained_input_errors(eval_files, s.bert_config_file):
      results["eval"] = runner.run_evaluation(
          trainer, runner.dataset_fn(task, eval_files, s.eval_batch_size, False, s.random_seed),
          s.output_dir, s.max_eval_steps)
  return results


def main(flag_values):
  run(common_flags.settings_from_flags(PretrainingSettings, flag_values),
      common_flags.flags_dict(flag_values, sys.modules[__name__]))


def console_main():
  """The `bert-run-pretraining` command (pyproject.toml's [project.scripts])."""
  define_flags()
  runner.launch(main, ["bert_config_file", "input_file", "output_dir"])


if __name__ == "__main__":
  console_main()
