"""Training and evaluation runs around a `Trainer`: checkpoints, TensorBoard, SIGTERM, NaN.

Shared by `tasks/pretraining_job` and `finetuning_runner` so none repeats the loop bookkeeping;
`launch` starts the run_*.py commands, extract_features and squad_evaluate.
"""

import contextlib
import json
import math
import os
import re

from absl import flags
from absl import logging
import keras
import tensorflow as tf

from data_prep import cli
from data_prep import record_checks
from data_prep import schema
from official_bert.interop import checkpointing
from official_bert.interop import model_files
from official_bert.interop import weight_loading
from official_bert.modeling import model_types
from official_bert.training import cpu_threads
from official_bert.training import distribution
from official_bert.training import evaluation
from official_bert.training import freezing
from official_bert.training import input_pipeline
from official_bert.training import input_stream
from official_bert.training import optimization
from official_bert.training import settings as settings_lib
from official_bert.training import training_loop


def setup_runtime(settings):
  """CPU threads, logical CPUs, the strategy, seeds, determinism and precision; returns the
  strategy.

  The order matters: logical devices and multi-worker collectives must be configured before
  anything initializes the TF context, and seeds before any variable exists.
  """
  cpu_threads.configure()
  if settings.cpu_devices:
    distribution.use_logical_cpus(settings.cpu_devices)
  strategy = distribution.get_strategy(settings.distribution_strategy, settings.num_gpus,
                                       settings.tpu, settings.cpu_devices, settings.tpu_zone,
                                       settings.gcp_project)
  keras.utils.set_random_seed(settings.random_seed)
  if settings.deterministic:
    tf.config.experimental.enable_op_determinism()
  distribution.set_precision(settings.dtype)
  logging.info("Strategy %s with %d replica(s)", type(strategy).__name__,
               strategy.num_replicas_in_sync)
  return strategy


def check_optimizer_settings(settings):
  """Optimizer flags that do not go together raise (callers check before any work)."""
  if settings.optimizer != "adamw" and not settings.adam_bias_correction:
    raise ValueError(f"--adam_bias_correction=False applies to --optimizer=adamw, not "
                     f"--optimizer={settings.optimizer}")


def make_trainer(settings, strategy, task, num_train_steps, num_warmup_steps):
  """The `Trainer` with the original's optimizer and schedule, as the settings say.

  It carries `warm_start_adaptation` (--resize_vocab, --extend_positions), which
  `run_training` and `restore_for_eval` apply to --init_checkpoint, so that every run
  gets them without passing them along.
  """
  decay = getattr(settings, "layerwise_lr_decay", None)  # fine-tuning settings only
  check_optimizer_settings(settings)
  extra = {}
  if decay is not None:
    extra.update(layerwise_lr_decay=decay, num_layers=task.bert_config.num_hidden_layers)
  trainer = training_loop.Trainer(
      strategy, task,
      lambda: optimization.scheduled_optimizer(
          settings.optimizer, settings.learning_rate, num_train_steps, num_warmup_steps,
          settings.weight_decay, settings.lr_schedule, settings.adam_bias_correction, **extra),
      settings.train_batch_size, settings.num_accumulation_steps,
      clip_norm=settings.clip_norm, dtype=settings.dtype, enable_xla=settings.enable_xla,
      prepare_model=lambda model: freezing.freeze(
          _packing(_recomputing(model, settings.recompute_grad), settings, strategy),
          getattr(settings, "freeze_encoder", False), getattr(settings, "freeze_layers", 0)))
  trainer.warm_start_adaptation = weight_loading.Adaptation(
      getattr(settings, "resize_vocab", False), getattr(settings, "extend_positions", False))
  # Fine-tuning settings only (pretraining's sequences are mostly full); TPUs compile one
  # static shape.
  task.trim_padding = (getattr(settings, "trim_padding", False)
                      and not distribution.is_tpu(strategy))
  task.group_by_length = getattr(settings, "group_by_length", False)
  task.last_partial_batch = bool(getattr(settings, "last_partial_batch", False))
  return trainer


def _recomputing(model, recompute_grad):
  """`model` with its encoder's `recompute_grad` set (--recompute_grad)."""
  encoder = getattr(model, "encoder", None)
  if encoder is not None and recompute_grad:
    encoder.recompute_grad = True
    logging.info("--recompute_grad: the %d Transformer layers' activations are recomputed in "
                 "the backward pass", len(encoder.transformer_layers))
  return model


def _packing(model, settings, strategy):
  """`model` with its encoder's `pack_training` set where --pack_tokens applies
  (`model_types.packs_training`)."""
  encoder = getattr(model, "encoder", None)
  if encoder is None or not getattr(settings, "pack_tokens", False) or settings.recompute_grad:
    return model
  static = settings.enable_xla or distribution.is_tpu(strategy)
  if model_types.packs_training(model, static_shapes=static):
    encoder.pack_training = True
    logging.info("--pack_tokens: training steps run the Transformer layers on the real tokens")
  return model


def warm_start_adaptation(trainer):
  """What --resize_vocab/--extend_positions allow (none for a `Trainer` built elsewhere)."""
  return getattr(trainer, "warm_start_adaptation", None)


def dataset_fn(task, input_patterns, global_batch_size, is_training, seed):
  """(InputContext, start_step) -> this pipeline's dataset, skipping what was consumed.

  `start_step` counts the steps that read this input (`input_stream`: a phase 2 resumed with
  other input files reads them from their start); `fn.stream` says what the input is.
  """
  def fn(ctx, start_step=0):
    per_replica = ctx.get_per_replica_batch_size(global_batch_size)
    consumed = start_step * per_replica * (ctx.num_replicas_in_sync // ctx.num_input_pipelines)
    return task.build_dataset(input_patterns, per_replica, is_training, input_context=ctx,
                              seed=seed, skip_examples=consumed if is_training else 0)
  fn.stream = input_stream.stream_key(
      input_patterns, getattr(task, "seq_length", getattr(task, "max_seq_length", None)),
      global_batch_size, getattr(task, "group_by_length", False),
      getattr(task, "last_partial_batch", False))
  return fn


def write_config_text(writer, config):
  with writer.as_default(step=0):
    tf.summary.text("config", "```\n" + json.dumps(config, indent=2, sort_keys=True) + "\n```")


def run_training(trainer, dataset_fn, output_dir, num_train_steps, steps_per_loop,
                 save_checkpoints_steps, init_checkpoint=None, keep_checkpoint_max=5,
                 config=None, eval_every_steps=0, on_evaluation=None):
  """Trains to `num_train_steps`, resuming from `output_dir` if it holds a checkpoint.

  Args:
    dataset_fn: (tf.distribute.InputContext, start_step) -> per-replica batched training
      dataset that skips what `start_step` steps consumed. Distributed iterators cannot be
      checkpointed in TF 2.20, so a resumed run re-reads the same seeded stream and skips
      ahead (on serialized records, before parsing): the input order is the uninterrupted
      run's on every strategy.
    steps_per_loop: steps per `train_steps` call, each one progress line and TensorBoard
      point; None: `settings.loop_steps`' default (at most a tenth of the run).
    config: dict written to TensorBoard as text (the model config and the flags).
    eval_every_steps: with `on_evaluation`, loops end (and a checkpoint is saved) at every
      multiple of it and at the last step, then `on_evaluation(step)` runs; it returns True
      to stop training early (patience exhausted). A resumed run whose checkpoint is at such
      a step calls it first: an evaluation the interruption skipped is made up, and an early
      stop already decided stays decided.
  Returns:
    The metrics of the last loop, or {} if there was nothing left to train.
  """
  strategy = trainer.strategy
  steps_per_loop = settings_lib.loop_steps(steps_per_loop, num_train_steps)
  chief = distribution.is_chief(strategy)
  worker_id = getattr(getattr(strategy, "cluster_resolver", None), "task_id", 0) or 0
  keeper = checkpointing.CheckpointKeeper(output_dir, trainer.model, trainer.optimizer,
                                          trainer.step, None, keep_checkpoint_max,
                                          chief=chief, worker_id=worker_id)
  keeper.restore_or_initialize(init_checkpoint, warm_start_adaptation(trainer))
  start_step = int(trainer.step.numpy())
  if start_step >= num_train_steps:
    logging.warning("Nothing to train: the checkpoint in %s is at step %d, this run's last "
                    "step is %d", output_dir, start_step, num_train_steps)
  # Steps that read this input: fewer than start_step if a resumed run changed the input.
  stream = getattr(dataset_fn, "stream", None)
  stream_began = input_stream.first_step(output_dir, stream, start_step)
  input_steps = start_step - stream_began
  iterator = iter(strategy.distribute_datasets_from_function(
      lambda ctx: dataset_fn(ctx, input_steps)))
  writer = tf.summary.create_file_writer(os.path.join(output_dir, "train")) if chief else None
  if writer is not None and config:
    write_config_text(writer, config)
  step = int(trainer.step.numpy())
  progress = training_loop.ProgressLog(trainer.global_batch_size, num_train_steps, step, writer)
  stop = training_loop.StopRequest()
  metrics = {}
  evaluating = bool(eval_every_steps and on_evaluation)
  stopped_early = False
  try:
    if evaluating and step > 0 and (step % eval_every_steps == 0 or step >= num_train_steps):
      stopped_early = bool(on_evaluation(step))  # resumed at an evaluation step
    while step < num_train_steps and not stop.requested and not stopped_early:
      to_boundary = save_checkpoints_steps - step % save_checkpoints_steps
      if evaluating:
        to_boundary = min(to_boundary, eval_every_steps - step % eval_every_steps)
      n = min(steps_per_loop, num_train_steps - step, to_boundary)
      metrics = trainer.train_steps(iterator, n)
      step = int(trainer.step.numpy())
      if not all(math.isfinite(v) for v in metrics.values()) and not trainer.float16:
        raise FloatingPointError(
            f"non-finite loss at step {step}: {metrics}; stopping without saving (lower "
            "--learning_rate, check the data, or use --dtype=float32)")
      metrics["examples_per_second"] = progress.log(
          step, metrics, training_loop.current_learning_rate(trainer.optimizer))
      at_evaluation = evaluating and (step % eval_every_steps == 0 or step >= num_train_steps)
      if step % save_checkpoints_steps == 0 or step >= num_train_steps or at_evaluation:
        # The record first: a run killed between the two resumes the new input where its
        # checkpoint left it, not from the beginning.
        input_stream.record(output_dir, stream, stream_began, chief)
        keeper.save("step %d" % step)
      if at_evaluation:
        stopped_early = bool(on_evaluation(step))
    if stop.requested and step % save_checkpoints_steps and step < num_train_steps:
      input_stream.record(output_dir, stream, stream_began, chief)
      keeper.save("stop requested by signal")
  finally:
    stop.restore()
    if writer is not None:
      writer.flush()
  if stop.requested:
    # Not a finished run (or one asked to stop before its evaluation and predictions): the
    # caller (and a scheduler, by the exit status) must know.
    raise cli.Interrupted(stop.signum, f"stopped at step {step} (checkpoint saved)")
  return metrics


def restore_for_eval(trainer, output_dir, init_checkpoint=None):
  """Weights to evaluate without training: the latest in `output_dir`, else init_checkpoint."""
  latest = model_files.latest_checkpoint(output_dir) if tf.io.gfile.isdir(output_dir) else None
  if latest:
    with checkpointing.damaged_checkpoint_errors(latest):
      try:
        checkpointing.model_checkpoint(trainer.model, step=trainer.step).read(
            latest).expect_partial()
      except (ValueError, tf.errors.InvalidArgumentError) as e:  # another model's shapes
        checkpointing.raise_mismatch(latest, trainer.model, e)
    logging.info("Evaluating %s (step %d)", latest, int(trainer.step.numpy()))
  elif init_checkpoint:
    checkpointing.warm_start(trainer.model, init_checkpoint, warm_start_adaptation(trainer))
  else:
    raise ValueError(f"nothing to evaluate: no checkpoint in {output_dir} and no "
                     "--init_checkpoint")


def run_evaluation(trainer, dataset_fn, output_dir, max_eval_steps, name="eval"):
  """Evaluates the current weights; writes `{name}_results.txt` and TensorBoard (chief)."""
  results, _ = evaluation.evaluate(trainer, dataset_fn, max_eval_steps)
  results["global_step"] = int(trainer.step.numpy())
  if distribution.is_chief(trainer.strategy):
    evaluation.write_results(output_dir, name, results, results["global_step"])
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
  training loop's check (`Trainer.checked`) reports, says which feature, which id and which
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
  return ValueError(f"corrupt input data: {where or record_checks.op_error_text(error)}")


def launch(run_fn, required_flags=("output_dir",), positional=()):
  """A script's `__main__` (after its `define_flags()`): `run_fn(FLAGS, *positional args)`
  through the one launcher, `data_prep.cli.launch`: a user error (a ValueError, a missing
  file or required flag, a non-finite loss) is its message and exit status 1; --help shows
  `run_fn`'s module's docstring and flags."""
  cli.launch(lambda argv: run_fn(flags.FLAGS, *argv[1:]), required_flags,
             positional=positional, command=run_fn.__module__)
