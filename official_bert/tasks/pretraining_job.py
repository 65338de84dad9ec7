"""BERT pretraining (masked LM + next sentence, or masked LM only; masks offline or per batch)
from typed settings: `run(PretrainingSettings(...))`. The command-line reference is
run_pretraining's docstring."""

import dataclasses
from typing import Optional

from absl import logging

from data_prep import tfrecord_io
from data_prep import tokenization
from official_bert.interop import case_check
from official_bert.interop import model_files
from official_bert.interop import model_folder
from official_bert.interop import run_record
from official_bert.tasks.pretraining import PretrainingTask
from official_bert.training import distribution
from official_bert.training import dynamic_masking
from official_bert.training import finetuning_runner
from official_bert.training import output_lock
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
      None, "The vocabulary the records were written with: --dynamic_masking takes its "
      "[CLS], [SEP] and [MASK] ids; given with --do_train, it is written into --output_dir "
      "with the config, the case and the run record, so the folder loads (from_preset, "
      "export --checkpoint) with no model flags.")
  masked_lm_prob: float = option(0.15, "With --dynamic_masking: fraction of tokens masked.",
                                 above=0.0, maximum=1.0)
  do_whole_word_mask: bool = option(
      False, "With --dynamic_masking: mask whole words (the records' word_starts).")


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


def write_model_files(settings, config, config_file):
  """--output_dir's bert_config.json, vocab.txt, tokenizer_config.json and run record, as a
  fine-tuning OUTPUT_DIR has them. The case is the one the --init_checkpoint folder states (its
  tokenizer_config.json or run record: the model continues with its tokenizer), else the one
  the vocabulary implies (the records hold ids, not the writer's flags)."""
  s = settings
  tokens = tokenization.load_vocab_tokens(s.vocab_file)
  tokenization.check_special_tokens({t: i for i, t in enumerate(tokens)}, s.vocab_file,
                                    ("[CLS]", "[SEP]", "[MASK]"))
  if len(tokens) > config.vocab_size:
    raise ValueError(f"--vocab_file={s.vocab_file} has {len(tokens)} tokens but the "
                     f"config's ({config_file}) vocab_size is {config.vocab_size}")
  cased = case_check.vocabulary_is_cased(tokens)
  do_lower_case = None if cased is None else not cased  # None: the files claim no case
  source = "the vocabulary"
  if s.init_checkpoint:
    files = model_files.beside(s.init_checkpoint)
    declared, where = model_folder.declared_case(files, files.record)
    if declared is not None:
      model_folder.warn_if_the_vocabulary_disagrees(declared, where, s.vocab_file)
      do_lower_case, source = declared, where
  logging.info("--output_dir's model files: do_lower_case=%s (from %s)", do_lower_case, source)
  model_files.write(s.output_dir, config, s.vocab_file, do_lower_case, run_record.RunRecord.of(
      "pretraining", task="pretraining", max_seq_length=s.max_seq_length))


def run(settings, record=None):
  """`train_and_evaluate` with --output_dir's lock (`output_lock`): one run there at a time."""
  with output_lock.held(settings.output_dir, settings.distribution_strategy):
    return train_and_evaluate(settings, record)


def train_and_evaluate(settings, record=None):
  """Trains and/or evaluates; returns {"train": metrics, "eval": results}.

  Args:
    settings: `PretrainingSettings`.
    record: the run's flags, written to TensorBoard next to the model config.
  """
  s = settings
  if not (s.do_train or s.do_eval):
    raise ValueError("at least one of --do_train and --do_eval must be set")
  # --bert_config_file, else the --init_checkpoint folder's (continued pretraining of a
  # released model) or a resumed OUTPUT_DIR's.
  config, config_file = finetuning_runner.config_and_source(s)
  finetuning_runner.check_trained_config(s, config, config_file)  # a resume of another model
  tfrecord_io.make_dirs(s.output_dir, "--output_dir")
  strategy = runner.setup_runtime(s)
  config.check_sequence_length(s.max_seq_length, "--max_seq_length", config_file)
  task = PretrainingTask(config, s.max_seq_length, s.max_predictions_per_seq, s.shuffle_buffer_size,
                         next_sentence=s.next_sentence, masking=masking_options(s, config))
  trainer = runner.make_trainer(s, strategy, task, s.num_train_steps, s.num_warmup_steps)
  results = {}
  if s.do_train:
    if s.vocab_file and distribution.is_chief(strategy):
      write_model_files(s, config, config_file)
    run_config = {"bert_config": config.to_dict(), "flags": record or {}}
    with runner.explained_input_errors(s.input_file, config_file):
      results["train"] = runner.run_training(
          trainer, runner.dataset_fn(task, s.input_file, s.train_batch_size, True, s.random_seed),
          s.output_dir, s.num_train_steps, s.steps_per_loop, s.save_checkpoints_steps,
          s.init_checkpoint, s.keep_checkpoint_max, run_config)
  if s.do_eval:
    if not s.do_train:
      runner.restore_for_eval(trainer, s.output_dir, s.init_checkpoint)
    eval_files = s.eval_input_file or s.input_file
    with runner.explained_input_errors(eval_files, config_file):
      results["eval"] = runner.run_evaluation(
          trainer, runner.dataset_fn(task, eval_files, s.eval_batch_size, False, s.random_seed),
          s.output_dir, s.max_eval_steps)
  return results
