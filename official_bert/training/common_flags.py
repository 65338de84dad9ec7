"""Flags shared by every run_*.py: defined once, google-research/bert names where they exist."""

import dataclasses

from absl import flags

from official_bert.training import distribution
from official_bert.training import settings


def define_common_flags(default_batch_size=32, default_lr=5e-5):
  """Model, checkpoint, training, strategy and precision flags."""
  flags.DEFINE_string("bert_config_file", None, "bert_config.json of the model.")
  flags.DEFINE_string("output_dir", None, "Checkpoints, TensorBoard logs and results go here.")
  flags.DEFINE_string("init_checkpoint", None,
                      "Warm-start weights only (ours or a google-research TF1 checkpoint). "
                      "A checkpoint already in --output_dir resumes instead.")
  flags.DEFINE_integer("max_seq_length", 128, "Sequence length of the input files.")
  flags.DEFINE_bool("do_train", False, "Train.")
  flags.DEFINE_bool("do_eval", False, "Evaluate.")
  flags.DEFINE_integer("train_batch_size", default_batch_size, "Global training batch size.")
  flags.DEFINE_integer("eval_batch_size", 8, "Global evaluation batch size.")
  flags.DEFINE_float("learning_rate", default_lr, "Peak learning rate.")
  flags.DEFINE_integer("num_train_steps", 100000, "Training steps.")
  flags.DEFINE_integer("num_warmup_steps", 10000, "Linear warmup steps.")
  flags.DEFINE_integer("save_checkpoints_steps", 1000, "Steps between checkpoints.")
  flags.DEFINE_integer("keep_checkpoint_max", 5, "Checkpoints kept in --output_dir.")
  flags.DEFINE_integer("steps_per_loop", 100,
                       "Steps per host round trip (logging granularity); "
                       "like the original's --iterations_per_loop.")
  flags.DEFINE_integer("iterations_per_loop", None, "Alias of --steps_per_loop (original name).")
  flags.DEFINE_enum("optimizer", "adamw", ["adamw", "lamb"], "Optimizer.")
  flags.DEFINE_float("weight_decay", 0.01, "Decoupled weight decay (not on LayerNorm, biases).")
  flags.DEFINE_float("clip_norm", 1.0, "Global gradient norm clip; 0 disables.")
  flags.DEFINE_integer("num_accumulation_steps", 1,
                       "Micro-batches per step (gradient accumulation).")
  flags.DEFINE_enum("distribution_strategy", "one_device", list(distribution.STRATEGIES),
                    "tf.distribute strategy; multi_worker_mirrored reads TF_CONFIG.")
  flags.DEFINE_integer("num_gpus", None, "GPUs to use (default: all visible).")
  flags.DEFINE_string("tpu", None, "TPU name or address for --distribution_strategy=tpu.")
  # google-research/bert's TPU flags, so its recipes run unchanged.
  flags.DEFINE_bool("use_tpu", False, "Original name: same as --distribution_strategy=tpu.")
  flags.DEFINE_string("tpu_name", None, "Original name of --tpu.")
  flags.DEFINE_string("tpu_zone", None, "GCE zone of the TPU (default: looked up).")
  flags.DEFINE_string("gcp_project", None, "GCP project of the TPU (default: looked up).")
  flags.DEFINE_integer("cpu_devices", None,
                       "Split the CPU into N logical devices (mirrored without GPUs; testing).")
  flags.DEFINE_enum("dtype", "float32", ["float32", "bfloat16", "float16"],
                    "Compute precision; float16 uses dynamic loss scaling.")
  flags.DEFINE_bool("enable_xla", False, "Compile the training step with XLA.")
  flags.DEFINE_integer("random_seed", 12345, "Seed for initialization, dropout and input order.")
  flags.DEFINE_bool("deterministic", False, "Deterministic ops (bit-exact reruns; slower).")
  flags.DEFINE_integer("max_eval_steps", 100, "Evaluation batches at most.")


def strategy_flags(flag_values):
  """(strategy name, TPU name) from --distribution_strategy/--tpu or the original
  --use_tpu/--tpu_name; contradicting combinations are errors, not silent choices."""
  name, tpu = flag_values.distribution_strategy, flag_values.tpu
  if flag_values.use_tpu:
    if name not in ("one_device", "tpu"):  # one_device is the default: not a choice
      raise ValueError(f"--use_tpu contradicts --distribution_strategy={name}")
    name = "tpu"
  if flag_values.tpu_name:
    if tpu and tpu != flag_values.tpu_name:
      raise ValueError(f"--tpu={tpu} and --tpu_name={flag_values.tpu_name} differ")
    tpu = flag_values.tpu_name
  if tpu and name != "tpu":
    raise ValueError(f"--tpu/--tpu_name={tpu} needs --distribution_strategy=tpu (or --use_tpu)")
  return name, tpu


def flags_dict(flag_values, main_module):
  """This script's and the common flags' values, for the run's record in TensorBoard."""
  return {f.name: f.value for module in (main_module, __name__)
          for f in flag_values.get_flags_for_module(module)}


def define_finetuning_flags(default_batch_size=32, default_lr=5e-5, default_seq=128):
  """The common flags plus google-research/bert's fine-tuning ones."""
  define_common_flags(default_batch_size=default_batch_size, default_lr=default_lr)
  flags.FLAGS.set_default("max_seq_length", default_seq)
  flags.DEFINE_string("vocab_file", None, "The vocabulary the model was trained with.")
  flags.DEFINE_bool("do_lower_case", True, "Lower-case input (uncased models).")
  flags.DEFINE_bool("do_predict", False, "Write predictions for the test/predict data.")
  flags.DEFINE_integer("predict_batch_size", 8, "Global prediction batch size.")
  flags.DEFINE_float("num_train_epochs", 3.0, "Epochs over the training data.")
  flags.DEFINE_float("warmup_proportion", 0.1,
                     "Fraction of the training steps with linear warmup.")
  flags.DEFINE_integer("max_train_examples", 0,
                       "Train on a seeded random subset of this many examples (0: all).")


def settings_from_flags(settings_class, flag_values):
  """`settings_class` (a `settings.RunSettings` dataclass) filled from the flags of the same
  names; the strategy resolved from the original's TPU flags too. For fine-tuning settings,
  --num_train_steps/--num_warmup_steps count only when given (else: from the epochs)."""
  values = {}
  finetuning = issubclass(settings_class, settings.FinetuningSettings)
  for field in dataclasses.fields(settings_class):
    if field.name not in flag_values:
      continue
    flag = flag_values[field.name]
    if finetuning and field.name in ("num_train_steps", "num_warmup_steps") and not flag.present:
      continue
    values[field.name] = flag.value
  values["distribution_strategy"], values["tpu"] = strategy_flags(flag_values)
  if flag_values["iterations_per_loop"].value:
    values["steps_per_loop"] = flag_values["iterations_per_loop"].value
  return settings_class(**values)
