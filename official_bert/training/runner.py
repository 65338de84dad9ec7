"""Training and evaluation runs around a `Trainer`: checkpoints, TensorBoard, SIGTERM, NaN.

Shared by every run_*.py script so none repeats the loop bookkeeping.
"""

import contextlib
import json
import math
import os
import re
import sys

from absl import app
from absl import flags
from absl import logging
import keras
import tensorflow as tf

from data_prep import schema
from official_bert.training import checkpointing
from official_bert.training import common_flags
from official_bert.training import distribution
from official_bert.training import input_pipeline
from official_bert.training import optimization
from official_bert.training import training_loop


def setup_runtime(flag_values):
  """Logical CPUs, the strategy, then seeds and determinism; returns the strategy.

  The order matters: logical devices and multi-worker collectives must be configured before
  anything initializes the TF context, and seeds before any variable exists.
  """
  if flag_values.cpu_devices:
    distribution.use_logical_cpus(flag_values.cpu_devices)
  name, tpu = common_flags.strategy_flags(flag_values)
  strategy = distribution.get_strategy(name, flag_values.num_gpus, tpu, flag_values.cpu_devices,
                                       flag_values.tpu_zone, flag_values.gcp_project)
  keras.utils.set_random_seed(flag_values.random_seed)
  if flag_values.deterministic:
    tf.config.experimental.enable_op_determinism()
  logging.info("Strategy %s with %d replica(s)", type(strategy).__name__,
               strategy.num_replicas_in_sync)
  return strategy


def check_sequence_length(max_seq_length, config, source):
  """--max_seq_length must fit the position table of the config read from `source`."""
  if max_seq_length > config.max_position_embeddings:
    raise ValueError(f"--max_seq_length={max_seq_length} exceeds "
                     f"max_position_embeddings={config.max_position_embeddings} of {source}")


def make_trainer(flag_values, strategy, task, num_train_steps, num_warmup_steps):
  """The `Trainer` with the original's optimizer and schedule, as the common flags say."""
  schedule = optimization.WarmupLinearDecay(flag_values.learning_rate, num_warmup_steps,
                                            num_train_steps)
  return training_loop.Trainer(
      strategy, task,
      lambda: optimization.create_optimizer(flag_values.optimizer, schedule,
                                            weight_decay=flag_values.weight_decay),
      flag_values.train_batch_size, flag_values.num_accumulation_steps,
      clip_norm=flag_values.clip_norm, dtype=flag_values.dtype,
      enable_xla=flag_values.enable_xla)


def write_config_text(writer, config):
  with writer.as_default(step=0):
    tf.summary.text("config", "```\n" + json.dumps(config, indent=2, sort_keys=True) + "\n```")


def run_training(trainer, dataset_fn, output_dir, num_train_steps, steps_per_loop,
                 save_checkpoints_steps, init_checkpoint=None, keep_checkpoint_max=5,
                 config=None):
  """Trains to `num_train_steps`, resuming from `output_dir` if it holds a checkpoint.

  Args:
    dataset_fn: (tf.distribute.InputContext, start_step) -> per-replica batched training
      dataset that skips what `start_step` steps consumed. Distributed iterators cannot be
      checkpointed in TF 2.20, so a resumed run re-reads the same seeded stream and skips
      ahead (on serialized records, before parsing): the input order is the uninterrupted
      run's on every strategy.
    config: dict written to TensorBoard as text (the model config and the flags).
  Returns:
    The metrics of the last loop, or {} if there was nothing left to train.
  """
  strategy = trainer.strategy
  chief = distribution.is_chief(strategy)
  worker_id = getattr(getattr(strategy, "cluster_resolver", None), "task_id", 0) or 0
  keeper = checkpointing.CheckpointKeeper(output_dir, trainer.model, trainer.optimizer,
                                          trainer.step, None, keep_checkpoint_max,
                                          chief=chief, worker_id=worker_id)
  keeper.restore_or_initialize(init_checkpoint)
  start_step = int(trainer.step.numpy())
  iterator = iter(strategy.distribute_datasets_from_function(
      lambda ctx: dataset_fn(ctx, start_step)))
  writer = tf.summary.create_file_writer(os.path.join(output_dir, "train")) if chief else None
  if writer is not None and config:
    write_config_text(writer, config)
  step = int(trainer.step.numpy())
  progress = training_loop.ProgressLog(trainer.global_batch_size, num_train_steps, step, writer)
  stop = training_loop.StopRequest()
  metrics = {}
  try:
    while step < num_train_steps and not stop.requested:
      to_boundary = save_checkpoints_steps - step % save_checkpoints_steps
      n = min(steps_per_loop, num_train_steps - step, to_boundary)
      metrics = trainer.train_steps(iterator, n)
      step = int(trainer.step.numpy())
      if not all(math.isfinite(v) for v in metrics.values()) and not trainer.float16:
        raise FloatingPointError(
            f"non-finite loss at step {step}: {metrics}; stopping without saving (lower "
            "--learning_rate, check the data, or use --dtype=float32)")
      metrics["examples_per_second"] = progress.log(
          step, metrics, training_loop.current_learning_rate(trainer.optimizer))
      if step % save_checkpoints_steps == 0 or step >= num_train_steps:
        keeper.save("step %d" % step)
    if stop.requested and step % save_checkpoints_steps and step < num_train_steps:
      keeper.save("stop requested by signal")
  finally:
    stop.restore()
    if writer is not None:
      writer.flush()
  return metrics


def restore_for_eval(trainer, output_dir, init_checkpoint=None):
  """Weights to evaluate without training: the latest in `output_dir`, else init_checkpoint."""
  latest = tf.train.latest_checkpoint(output_dir) if tf.io.gfile.isdir(output_dir) else None
  if latest:
    checkpointing.model_checkpoint(trainer.model, step=trainer.step).read(latest).expect_partial()
    logging.info("Evaluating %s (step %d)", latest, int(trainer.step.numpy()))
  elif init_checkpoint:
    checkpointing.warm_start(trainer.model, init_checkpoint)
  else:
    raise ValueError(f"nothing to evaluate: no checkpoint in {output_dir} and no "
                     "--init_checkpoint")


def run_evaluation(trainer, dataset_fn, output_dir, max_eval_steps, name="eval"):
  """Evaluates the current weights; writes summaries and `{name}_results.txt` (chief)."""
  strategy = trainer.strategy
  iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))
  results = trainer.evaluate(iterator, max_eval_steps)
  results["global_step"] = int(trainer.step.numpy())
  logging.info("%s results: %s", name, results)
  if distribution.is_chief(strategy):
    tf.io.gfile.makedirs(output_dir)
    with tf.io.gfile.GFile(os.path.join(output_dir, f"{name}_results.txt"), "w") as f:
      for key in sorted(results):
        f.write(f"{key} = {results[key]}\n")
    writer = tf.summary.create_file_writer(os.path.join(output_dir, name))
    with writer.as_default(step=results["global_step"]):
      for key, value in results.items():
        if key != "global_step":
          tf.summary.scalar(key, value)
    writer.flush()
  return results


_ID_RANGE = re.compile(re.escape(training_loop.ID_RANGE_ERROR) +
                       r"\]\s*\[(\w+)\]\s*\[(-?\d+)\]\s*\[(\w+)\]\s*\[(\d+)\]")
# Our feature name -> the original writer's (input_word_ids -> input_ids), for the message.
_ORIGINAL_NAMES = {ours: original for original, ours in schema.V2_NAMES.items()}


@contextlib.contextmanager
def explained_input_errors(input_patterns, bert_config_file):
  """Turns input-data failures inside training into ValueErrors that name the files.

  A corrupt record (DataLossError) is traced to its file; an id outside an embedding table
  (the records were written with another vocabulary than the model's config), which the
  training loop's check (`Trainer._checked`) reports, says which feature, which id and which
  config value disagree, instead of a graph traceback.
  """
  try:
    yield
  except tf.errors.DataLossError as e:
    raise corrupt_input_error(input_patterns, e) from None
  except tf.errors.InvalidArgumentError as e:
    checked = _ID_RANGE.search(e.message or "")
    if not checked:
      raise
    feature, value, key, size = checked.groups()
    if feature in _ORIGINAL_NAMES:
      feature += f" ({_ORIGINAL_NAMES[feature]})"
    raise ValueError(
        f"{input_patterns}: {feature} holds the id {value}, but "
        f"{bert_config_file or 'the model config'} has "
        f"{key}={size}; the records were written for a different vocabulary or config "
        "(check --vocab_file of create_pretraining_data / the data script against "
        "--bert_config_file)") from None


def corrupt_input_error(input_patterns, error):
  """A ValueError naming the damaged file(s) behind a DataLossError (which names none)."""
  bad = input_pipeline.find_corrupt_files(input_patterns)
  where = "; ".join(f"{path}: {message}" for path, message in bad)
  return ValueError(f"corrupt input data: {where or error.message}")


def main(run_fn, argv):
  """absl main: runs `run_fn()`; a ValueError or missing file ends with its message and exit
  status 1 (no traceback: it is the user's input)."""
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  logging.set_verbosity(logging.INFO)
  try:
    run_fn()
  except (ValueError, FileNotFoundError, FloatingPointError) as e:
    logging.error("%s", e)
    sys.exit(1)


def launch(run_fn, required_flags=("output_dir",)):
  """A script's `__main__`: `run_fn(FLAGS)` through `main`, the given flags required."""
  flags.mark_flags_as_required(list(required_flags))
  app.run(lambda argv: main(lambda: run_fn(flags.FLAGS), argv))
