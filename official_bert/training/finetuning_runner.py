"""The run-script plumbing every fine-tuning script shares (run_classifier, run_ner, run_swag).

A script supplies a *job*: what its data is and how to score and write predictions.

    class Job:
      def prepare(self, flag_values) -> Data          # write/reuse TFRecords in --output_dir
      def make_task(self, bert_config) -> tasks.Task  # with `keep_features` for scoring
      def score(self, split, predictions) -> dict     # corpus metrics (F1, MCC, ...)
      def write_predictions(self, split, predictions) # files for --do_predict

and `run(flag_values, job, main_module)` does the rest: strategy, model config, initial
weights (ours, google-research TF1, or Hugging Face safetensors), training with the one
training loop (resume from --output_dir, warm start from --init_checkpoint), evaluation and
prediction. Evaluation runs `training_loop.predict` over the whole dev set and scores it on
the host: the task's own loss and ratio metrics, plus the job's corpus-level metrics, which
cannot be averaged over batches.
"""

import collections
import os

from absl import flags
from absl import logging
import numpy as np
import tensorflow as tf

from official_bert.modeling import bert_config as bert_config_lib
from official_bert.training import checkpointing
from official_bert.training import common_flags
from official_bert.training import distribution
from official_bert.interop import hf_weights
from official_bert.training import runner
from official_bert.tasks import base as tasks
from official_bert.training import training_loop

# What a job prepared: the training file and its size, and split name -> file to evaluate
# or predict ({} when not asked for).
Data = collections.namedtuple("Data", ["train_file", "num_train_examples", "eval_files",
                                       "predict_files"])


def define_flags(default_batch_size=32, default_lr=5e-5, default_seq=128):
  """google-research/bert's fine-tuning flags (`common_flags`) plus ours."""
  common_flags.define_finetuning_flags(default_batch_size, default_lr, default_seq)
  flags.DEFINE_integer("max_train_examples", 0,
                       "Train on a seeded random subset of this many examples (0: all).")


def hf_files(path):
  """(model.safetensors, config.json) if `path` is a Hugging Face model (a dir holding
  model.safetensors, or the file), else None."""
  if path and os.path.isdir(path) and os.path.isfile(os.path.join(path, "model.safetensors")):
    path = os.path.join(path, "model.safetensors")
  if path and path.endswith(".safetensors") and os.path.isfile(path):
    return path, os.path.join(os.path.dirname(path), "config.json")
  return None


def model_config(flag_values):
  """--bert_config_file, or the config.json of a Hugging Face --init_checkpoint."""
  hf = hf_files(flag_values.init_checkpoint)
  if flag_values.bert_config_file:
    source = flag_values.bert_config_file
    config = bert_config_lib.BertConfig.from_json_file(source)
  elif hf:
    source = hf[1]
    config = hf_weights.load_hf_config(source)
  else:
    raise ValueError("--bert_config_file is required (unless --init_checkpoint is a Hugging "
                     "Face model with its config.json)")
  runner.check_sequence_length(flag_values.max_seq_length, config, source)
  return config


def vocab_file(flag_values):
  """--vocab_file, or the vocab.txt of a Hugging Face --init_checkpoint."""
  hf = hf_files(flag_values.init_checkpoint)
  if flag_values.vocab_file:
    return flag_values.vocab_file
  if hf and os.path.isfile(os.path.join(os.path.dirname(hf[0]), "vocab.txt")):
    return os.path.join(os.path.dirname(hf[0]), "vocab.txt")
  raise ValueError("--vocab_file is required")


def prepare_splits(flag_values, write, eval_splits=("dev",), predict_splits=("test",)):
  """Writes (or reuses) the records of the splits the --do_* flags need; returns a `Data`.

  Args:
    write: (split, vocab_file) -> (TFRecord path, number of examples).
  """
  vocab = vocab_file(flag_values)
  splits = ((["train"] if flag_values.do_train else [])
            + (list(eval_splits) if flag_values.do_eval else [])
            + (list(predict_splits) if flag_values.do_predict else []))
  written = {split: write(split, vocab) for split in splits}
  train_file, num_train_examples = written.get("train", (None, 0))
  return Data(train_file, num_train_examples,
              {s: written[s][0] for s in eval_splits if s in written},
              {s: written[s][0] for s in predict_splits if s in written})


def load_initial_weights(model, path):
  """Warm-starts `model` (a fine-tuning model or a bare encoder) from our checkpoint, a TF1
  one, or HF safetensors (encoder weights only)."""
  hf = hf_files(path)
  if hf:
    hf_weights.load_hf_weights(getattr(model, "encoder", model), hf[0], require_heads=False)
    logging.info("Warm-started the encoder WEIGHTS ONLY from %s; the head is new.", hf[0])
  else:
    checkpointing.warm_start(model, path)


def tf_init_checkpoint(model, init_checkpoint, output_dir):
  """The --init_checkpoint to hand to the training loop, which reads TF checkpoints only.

  A Hugging Face model is loaded into `model` and written once as our checkpoint in
  `output_dir/init_from_hf/` (unless a checkpoint in output_dir will resume the run anyway).
  """
  if not hf_files(init_checkpoint) or _has_checkpoint(output_dir):
    return init_checkpoint
  load_initial_weights(model, init_checkpoint)
  return checkpointing.model_checkpoint(model).write(
      os.path.join(output_dir, "init_from_hf", "ckpt"))


def _has_checkpoint(output_dir):
  return tf.io.gfile.isdir(output_dir) and tf.train.latest_checkpoint(output_dir) is not None


def dataset_fn(task, input_file, global_batch_size, is_training, seed):
  """(InputContext, start_step) -> this pipeline's dataset, skipping what was consumed."""
  def fn(ctx, start_step=0):
    per_replica = ctx.get_per_replica_batch_size(global_batch_size)
    consumed = start_step * per_replica * (ctx.num_replicas_in_sync // ctx.num_input_pipelines)
    return task.build_dataset(input_file, per_replica, is_training, input_context=ctx,
                              seed=seed, skip_examples=consumed if is_training else 0)
  return fn


def train_steps(flag_values, num_examples):
  """(steps, warmup): from the epochs as the original, unless --num_train_steps is given."""
  steps, warmup = common_flags.finetuning_steps(
      num_examples, flag_values.num_train_epochs, flag_values.train_batch_size,
      flag_values.warmup_proportion)
  if flag_values["num_train_steps"].present:
    steps = flag_values.num_train_steps
    warmup = int(steps * flag_values.warmup_proportion)
  if flag_values["num_warmup_steps"].present:
    warmup = flag_values.num_warmup_steps
  return steps, warmup


def host_scores(task, predictions):
  """The task's losses and ratio metrics over all predictions (numpy in, floats out)."""
  features = {k: predictions[k] for k in task.keep_features}
  outputs = {k: v for k, v in predictions.items() if k not in features}
  norms = task.loss_normalizers(features)
  scores = {name: float(value) / (float(norms[name]) + task.loss_epsilons.get(name, 0.0))
            for name, value in task.loss_sums(features, outputs).items()}
  scores["loss"] = sum(scores.values())
  for name, (num, den) in task.metric_sums(features, outputs).items():
    scores[name] = float(num) / max(float(den), 1e-12)
  return scores


def write_results(output_dir, name, results, step):
  """`{name}_results.txt` (one `key = value` a line, as the original) and TensorBoard."""
  with tf.io.gfile.GFile(os.path.join(output_dir, f"{name}_results.txt"), "w") as f:
    f.write("".join(f"{key} = {results[key]}\n" for key in sorted(results)))
  with tf.summary.create_file_writer(os.path.join(output_dir, name)).as_default(step=step):
    for key, value in results.items():
      if isinstance(value, (int, float)) and key != "global_step":
        tf.summary.scalar(key, value)


def results_name(split):
  """"dev" -> "eval", "dev_matched" -> "eval_matched": the original's file names."""
  return split.replace("dev", "eval", 1) if split.startswith("dev") else split


def run(flag_values, job, main_module):
  """Trains, evaluates and predicts as the flags ask; returns {"train", split: results}."""
  if not (flag_values.do_train or flag_values.do_eval or flag_values.do_predict):
    raise ValueError("at least one of --do_train, --do_eval and --do_predict must be set")
  if not flag_values.output_dir:
    raise ValueError("--output_dir is required")
  # Before anything touches TensorFlow (the data step tokenizes with TF ops).
  strategy = runner.setup_runtime(flag_values)
  config = model_config(flag_values)
  tasks.set_precision(flag_values.dtype)
  output_dir = flag_values.output_dir
  tf.io.gfile.makedirs(output_dir)
  data = job.prepare(flag_values)
  task = job.make_task(config)
  steps, warmup = train_steps(flag_values, data.num_train_examples or 1)
  trainer = runner.make_trainer(flag_values, strategy, task, steps, warmup)
  init = tf_init_checkpoint(trainer.model, flag_values.init_checkpoint, output_dir)
  results = {}
  if flag_values.do_train:
    logging.info("Training: %d examples, %d steps (%d warmup), batch %d",
                 data.num_train_examples, steps, warmup, flag_values.train_batch_size)
    run_config = {"bert_config": config.to_dict(),
                  "flags": common_flags.flags_dict(flag_values, main_module)}
    with runner.explained_input_errors(data.train_file, flag_values.bert_config_file):
      results["train"] = runner.run_training(
          trainer, dataset_fn(task, data.train_file, flag_values.train_batch_size, True,
                              flag_values.random_seed),
          output_dir, steps, common_flags.steps_per_loop(flag_values),
          flag_values.save_checkpoints_steps, init, flag_values.keep_checkpoint_max,
          run_config)
  else:
    runner.restore_for_eval(trainer, output_dir, init)  # raises if there is nothing
  results.update(evaluate_and_predict(flag_values, job, task, trainer, data))
  return results


def evaluate_and_predict(flag_values, job, task, trainer, data):
  """Scores the eval splits (`<name>_results.txt`), writes the job's predictions (chief)."""
  strategy = trainer.strategy
  chief = distribution.is_chief(strategy)

  def predictions(path, batch_size):
    return training_loop.predict(strategy, trainer.model,
                                 dataset_fn(task, path, batch_size, False, None),
                                 keep_features=task.keep_features)

  results = {}
  step = int(trainer.step.numpy())
  for split, path in (data.eval_files if flag_values.do_eval else {}).items():
    out = predictions(path, flag_values.eval_batch_size)
    scores = dict(host_scores(task, out), **job.score(split, out), global_step=step)
    logging.info("%s results: %s", split, scores)
    if chief:
      write_results(flag_values.output_dir, results_name(split), scores, step)
    results[split] = scores
  for split, path in (data.predict_files if flag_values.do_predict else {}).items():
    out = predictions(path, flag_values.predict_batch_size)
    if chief:
      job.write_predictions(split, out)
  return results


def softmax(logits):
  """Probabilities over the last axis (numpy), as the original's test_results.tsv."""
  z = np.exp(logits - np.max(logits, axis=-1, keepdims=True))
  return z / np.sum(z, axis=-1, keepdims=True)
