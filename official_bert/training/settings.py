"""Typed settings of a run, built once from the flags at the entry point.

Library code (runner, finetuning_runner, jobs) reads these, never the flags object, so it
can be called from Python and tested without flags. A script's own settings subclass these
with its extra fields; `common_flags.settings_from_flags` fills every field from the flag of
the same name.
"""

import dataclasses
from typing import Optional


@dataclasses.dataclass(frozen=True)
class RunSettings:
  """What every training script shares: the model, the loop, the strategy, precision."""

  output_dir: Optional[str] = None
  bert_config_file: Optional[str] = None
  init_checkpoint: Optional[str] = None
  max_seq_length: int = 128
  do_train: bool = False
  do_eval: bool = False
  train_batch_size: int = 32
  eval_batch_size: int = 8
  learning_rate: float = 5e-5
  # None in fine-tuning: derived from the epochs (`num_train_epochs`, `warmup_proportion`).
  num_train_steps: Optional[int] = 100000
  num_warmup_steps: Optional[int] = 10000
  save_checkpoints_steps: int = 1000
  keep_checkpoint_max: int = 5
  steps_per_loop: int = 100
  optimizer: str = "adamw"
  weight_decay: float = 0.01
  clip_norm: float = 1.0
  num_accumulation_steps: int = 1
  max_eval_steps: int = 100
  # Runtime: resolved from --distribution_strategy/--tpu and the original --use_tpu/--tpu_name.
  distribution_strategy: str = "one_device"
  num_gpus: Optional[int] = None
  tpu: Optional[str] = None
  tpu_zone: Optional[str] = None
  gcp_project: Optional[str] = None
  cpu_devices: Optional[int] = None
  dtype: str = "float32"
  enable_xla: bool = False
  random_seed: int = 12345
  deterministic: bool = False


@dataclasses.dataclass(frozen=True)
class FinetuningSettings(RunSettings):
  """google-research/bert's fine-tuning settings on top of the common ones."""

  num_train_steps: Optional[int] = None
  num_warmup_steps: Optional[int] = None
  vocab_file: Optional[str] = None
  do_lower_case: bool = True
  do_predict: bool = False
  predict_batch_size: int = 8
  num_train_epochs: float = 3.0
  warmup_proportion: float = 0.1
  max_train_examples: int = 0


def finetuning_steps(settings, num_examples):
  """(num_train_steps, num_warmup_steps): from the epochs as the original run_classifier /
  run_squad count them, unless the settings give steps or warmup explicitly."""
  steps = settings.num_train_steps
  if steps is None:
    steps = max(1, int(num_examples / settings.train_batch_size * settings.num_train_epochs))
  warmup = settings.num_warmup_steps
  if warmup is None:
    warmup = int(steps * settings.warmup_proportion)
  return steps, warmup
