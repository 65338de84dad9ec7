r"""BERT pretraining (masked LM + next sentence) on any tf.distribute strategy.

  python -m official_bert.run_pretraining --bert_config_file=configs/base.json \
    --input_file='data/pretrain-*' --output_dir=out --do_train --train_batch_size=256 \
    --num_train_steps=100000 --num_warmup_steps=10000 --learning_rate=1e-4 \
    --distribution_strategy=mirrored --dtype=bfloat16 --enable_xla

Restarting with the same --output_dir resumes from its latest checkpoint; SIGTERM saves one
before exiting. `tensorboard --logdir=OUTPUT_DIR` shows the losses, accuracies, learning rate,
gradient norm and examples/s.
"""

import sys

from absl import flags

from official_bert.modeling import bert_config as bert_config_lib
from official_bert.training import common_flags
from official_bert.training import runner
from official_bert.tasks import base as tasks

flags.DEFINE_string("input_file", None, "Pretraining TFRecords: comma-separated globs.")
flags.DEFINE_string("eval_input_file", None, "Held-out TFRecords (default: --input_file).")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked LM predictions per sequence.")
flags.DEFINE_integer("shuffle_buffer_size", 10000, "Training examples shuffled together.")
common_flags.define_common_flags(default_batch_size=32, default_lr=5e-5)
FLAGS = flags.FLAGS


def run(flag_values):
  """Trains and/or evaluates; returns {"train": metrics, "eval": results}."""
  if not (flag_values.do_train or flag_values.do_eval):
    raise ValueError("at least one of --do_train and --do_eval must be set")
  strategy = runner.setup_runtime(flag_values)
  config = bert_config_lib.BertConfig.from_json_file(flag_values.bert_config_file)
  runner.check_sequence_length(flag_values.max_seq_length, config, flag_values.bert_config_file)
  tasks.set_precision(flag_values.dtype)
  task = tasks.PretrainingTask(config, flag_values.max_seq_length,
                               flag_values.max_predictions_per_seq,
                               flag_values.shuffle_buffer_size)
  trainer = runner.make_trainer(flag_values, strategy, task, flag_values.num_train_steps,
                                flag_values.num_warmup_steps)
  results = {}

  def dataset_fn(patterns, global_batch, is_training):
    def fn(ctx, start_step=0):
      per_replica = ctx.get_per_replica_batch_size(global_batch)
      consumed = start_step * per_replica * (ctx.num_replicas_in_sync // ctx.num_input_pipelines)
      return task.build_dataset(patterns, per_replica, is_training, input_context=ctx,
                                seed=flag_values.random_seed, skip_examples=consumed)
    return fn

  if flag_values.do_train:
    run_config = {"bert_config": config.to_dict(),
                  "flags": common_flags.flags_dict(flag_values, sys.modules[__name__])}
    with runner.explained_input_errors(flag_values.input_file, flag_values.bert_config_file):
      results["train"] = runner.run_training(
          trainer, dataset_fn(flag_values.input_file, flag_values.train_batch_size, True),
          flag_values.output_dir, flag_values.num_train_steps,
          common_flags.steps_per_loop(flag_values), flag_values.save_checkpoints_steps,
          flag_values.init_checkpoint, flag_values.keep_checkpoint_max, run_config)
  if flag_values.do_eval:
    if not flag_values.do_train:
      runner.restore_for_eval(trainer, flag_values.output_dir, flag_values.init_checkpoint)
    eval_files = flag_values.eval_input_file or flag_values.input_file
    with runner.explained_input_errors(eval_files, flag_values.bert_config_file):
      results["eval"] = runner.run_evaluation(
          trainer, dataset_fn(eval_files, flag_values.eval_batch_size, False),
          flag_values.output_dir, flag_values.max_eval_steps)
  return results


if __name__ == "__main__":
  runner.launch(run, ["bert_config_file", "input_file", "output_dir"])
