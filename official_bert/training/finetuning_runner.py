"""The run-script plumbing every fine-tuning script shares (run_classifier, run_ner, run_squad,
run_swag).

A script supplies a *job*: what its data is and how to score and write predictions.

    class Job:
      def prepare(self) -> Data                       # write/reuse TFRecords in output_dir
      def make_task(self, bert_config) -> tasks.Task  # with `keep_features` for scoring
      def score(self, split, outputs) -> dict         # corpus metrics (F1, MCC, ...)
      def write_predictions(self, split, outputs)     # files for --do_predict

and `run(settings, job, record)` does the rest, from typed `settings.FinetuningSettings`:
strategy, model config, initial weights (ours, google-research TF1, or Hugging Face
safetensors), training with the one training loop (resume from output_dir, warm start from
init_checkpoint), evaluation through the one evaluation path (`evaluation.evaluate`: the
task's losses and ratio metrics over the whole dev set, plus the job's corpus-level metrics
from the outputs) and prediction.
"""

import collections
import sys

from absl import logging
import numpy as np

from data_prep import tfrecord_io
from official_bert.interop import hf_weights
from official_bert.interop import weights_io
from official_bert.modeling import bert_config as bert_config_lib
from official_bert.training import common_flags
from official_bert.training import distribution
from official_bert.training import evaluation
from official_bert.training import runner
from official_bert.training import settings as settings_lib

# What a job prepared: the training file and its size, and split name -> file to evaluate
# or predict ({} when not asked for).
Data = collections.namedtuple("Data", ["train_file", "num_train_examples", "eval_files",
                                       "predict_files"])


def hf_files(path):
  """`weights_io.ModelFiles` (config.json, vocab.txt, ...) if `path` is a Hugging Face model
  (a dir holding model.safetensors, or the file), else None."""
  return weights_io.model_files(path) if weights_io.is_hf_model(path) else None


def model_config(settings):
  """settings.bert_config_file, or the config.json of a Hugging Face init_checkpoint."""
  hf = hf_files(settings.init_checkpoint)
  if settings.bert_config_file:
    source = settings.bert_config_file
    config = bert_config_lib.BertConfig.from_json_file(source)
  elif hf and hf.hf_config:
    source = hf.hf_config
    config = hf_weights.load_hf_config(source)
  else:
    raise ValueError("--bert_config_file is required (unless --init_checkpoint is a Hugging "
                     "Face model with its config.json)")
  runner.check_sequence_length(settings.max_seq_length, config, source)
  return config


def vocab_file(settings):
  """settings.vocab_file, or the vocab.txt of a Hugging Face init_checkpoint."""
  if settings.vocab_file:
    return settings.vocab_file
  hf = hf_files(settings.init_checkpoint)
  if hf and hf.vocab:
    return hf.vocab
  raise ValueError("--vocab_file is required")


def prepare_splits(settings, write, eval_splits=("dev",), predict_splits=("test",)):
  """Writes (or reuses) the records of the splits the do_* settings need; returns a `Data`.

  Args:
    write: (split, vocab_file) -> (TFRecord path, number of examples).
  """
  vocab = vocab_file(settings)
  splits = ((["train"] if settings.do_train else [])
            + (list(eval_splits) if settings.do_eval else [])
            + (list(predict_splits) if settings.do_predict else []))
  written = {split: write(split, vocab) for split in splits}
  train_file, num_train_examples = written.get("train", (None, 0))
  return Data(train_file, num_train_examples,
              {s: written[s][0] for s in eval_splits if s in written},
              {s: written[s][0] for s in predict_splits if s in written})


def run(settings, job, record=None):
  """Trains, evaluates and predicts as the settings say; returns {"train", split: results}.

  Args:
    settings: a `settings.FinetuningSettings` (or a script's subclass).
    job: see the module docstring.
    record: dict of the run's flags, written to TensorBoard next to the model config.
  """
  if not (settings.do_train or settings.do_eval or settings.do_predict):
    raise ValueError("at least one of --do_train, --do_eval and --do_predict must be set")
  if not settings.output_dir:
    raise ValueError("--output_dir is required")
  output_dir = settings.output_dir
  tfrecord_io.make_dirs(output_dir, "--output_dir")
  # Before anything touches TensorFlow (the data step tokenizes with TF ops).
  strategy = runner.setup_runtime(settings)
  config = model_config(settings)
  data = job.prepare()
  task = job.make_task(config)
  steps, warmup = settings_lib.finetuning_steps(settings, data.num_train_examples or 1)
  trainer = runner.make_trainer(settings, strategy, task, steps, warmup)
  init = settings.init_checkpoint  # any format: the loop's warm start reads them all
  results = {}
  if settings.do_train:
    logging.info("Training: %d examples, %d steps (%d warmup), batch %d",
                 data.num_train_examples, steps, warmup, settings.train_batch_size)
    run_config = {"bert_config": config.to_dict(), "flags": record or {}}
    with runner.explained_input_errors(data.train_file, settings.bert_config_file):
      results["train"] = runner.run_training(
          trainer, runner.dataset_fn(task, data.train_file, settings.train_batch_size, True,
                                     settings.random_seed),
          output_dir, steps, settings.steps_per_loop, settings.save_checkpoints_steps, init,
          settings.keep_checkpoint_max, run_config)
  else:
    runner.restore_for_eval(trainer, output_dir, init)  # raises if there is nothing
  results.update(evaluate_and_predict(settings, job, task, trainer, data))
  return results


def launch(job_class, settings_class, required_flags):
  """A fine-tuning script's `__main__` (after its `define_flags()`): settings from the flags,
  `run(settings, job_class(settings))`, user errors as messages with exit status 1."""
  def main(flag_values):
    settings = common_flags.settings_from_flags(settings_class, flag_values)
    record = common_flags.flags_dict(flag_values, sys.modules["__main__"])
    return run(settings, job_class(settings), record)
  runner.launch(main, required_flags)


def evaluate_and_predict(settings, job, task, trainer, data):
  """Scores the eval splits (`<name>_results.txt`), writes the job's predictions (chief)."""
  strategy = trainer.strategy
  chief = distribution.is_chief(strategy)
  results = {}
  step = int(trainer.step.numpy())
  for split, path in (data.eval_files if settings.do_eval else {}).items():
    scores, outputs = evaluation.evaluate(
        trainer, runner.dataset_fn(task, path, settings.eval_batch_size, False, None),
        keep_outputs=True)
    scores = dict(scores, **job.score(split, outputs), global_step=step)
    if chief:
      evaluation.write_results(settings.output_dir, evaluation.results_name(split), scores,
                               step)
    results[split] = scores
  for split, path in (data.predict_files if settings.do_predict else {}).items():
    outputs = evaluation.predict(
        strategy, trainer.model,
        runner.dataset_fn(task, path, settings.predict_batch_size, False, None),
        keep_features=task.keep_features)
    if chief:
      job.write_predictions(split, outputs)
  return results


def softmax(logits):
  """Probabilities over the last axis (numpy), as the original's test_results.tsv."""
  z = np.exp(logits - np.max(logits, axis=-1, keepdims=True))
  return z / np.sum(z, axis=-1, keepdims=True)
