"""Typed settings of a run: declared once, as dataclass fields that are also the flags.

Library code (runner, finetuning_runner, jobs) reads these, never the flags object, so it
can be called from Python and tested without flags. A command's own settings (`tasks/*_job.py`,
`tasks/pretraining_job`, `serving/feature_extraction`) subclass these with its extra fields;
`common_flags.define_flags` defines a flag per field (names, defaults and help from here:
google-research/bert's names) and `common_flags.settings_from_flags` builds the settings from
them at the entry point.
"""

import dataclasses
import math
from typing import Optional


def option(default, help_text, choices=None, minimum=None, maximum=None, above=None):
  """A settings field that is also a command-line flag of the same name.

  The flag's type follows the field's (bool, int, float, str; Optional allowed), `choices`
  makes it an enum; `common_flags.define_flags` defines it and `settings_from_flags` reads it
  back, so a setting is declared once. `minimum`/`maximum` (inclusive) and `above`
  (exclusive) are its range, checked when the settings are built (`check_ranges`), before
  any work: a bad value is an error naming the flag, not a run that trains on nonsense.
  """
  return dataclasses.field(default=default, metadata={
      "help": help_text, "choices": choices, "minimum": minimum, "maximum": maximum,
      "above": above})


def check_ranges(settings):
  """ValueError naming the first flag whose value is outside its declared range."""
  for field in dataclasses.fields(settings):
    value, meta = getattr(settings, field.name), field.metadata
    if value is None or isinstance(value, (str, bool, tuple)):
      continue
    low, high, above = meta.get("minimum"), meta.get("maximum"), meta.get("above")
    if isinstance(value, float) and not math.isfinite(value):  # nan passes every comparison
      raise ValueError(f"--{field.name}={value}: must be a finite number")
    if low is not None and value < low:
      raise ValueError(f"--{field.name}={value}: must be >= {low}")
    if above is not None and value <= above:
      raise ValueError(f"--{field.name}={value}: must be > {above}")
    if high is not None and value > high:
      raise ValueError(f"--{field.name}={value}: must be <= {high}")


class Checked:
  """Mixin: settings check their ranges when built."""

  def __post_init__(self):
    check_ranges(self)


# --steps_per_loop's default: at most this many steps per loop, and a tenth of the run's.
DEFAULT_STEPS_PER_LOOP = 100
STRATEGIES = ("one_device", "mirrored", "multi_worker_mirrored", "tpu")
DTYPES = ("float32", "bfloat16", "float16")


@dataclasses.dataclass(frozen=True)
class RunSettings(Checked):
  """What every training script shares: the model, the loop, the strategy, precision."""

  bert_config_file: Optional[str] = option(None, "bert_config.json of the model.")
  output_dir: Optional[str] = option(None, "Checkpoints, TensorBoard logs and results go here.")
  init_checkpoint: Optional[str] = option(
      None, "Warm-start weights only (ours, a google-research TF1 checkpoint or a Hugging "
      "Face model folder). A checkpoint already in --output_dir resumes instead.")
  resize_vocab: bool = option(
      False, "With --init_checkpoint: if the config's vocab_size is larger than the "
      "checkpoint's, keep the trained word-embedding and masked-LM bias rows and start the new "
      "rows at their mean (a vocabulary with tokens added at its end). Never shrinks.")
  extend_positions: bool = option(
      False, "With --init_checkpoint: if the config's max_position_embeddings is larger than "
      "the checkpoint's, fill the new positions with copies of the trained ones (row i = old "
      "row i mod old length), to train at a longer --max_seq_length. Never shrinks.")
  max_seq_length: int = option(128, "Sequence length of the input files.", minimum=3)
  do_train: bool = option(False, "Train.")
  do_eval: bool = option(False, "Evaluate.")
  train_batch_size: int = option(32, "Global training batch size.", minimum=1)
  eval_batch_size: int = option(8, "Global evaluation batch size.", minimum=1)
  learning_rate: float = option(5e-5, "Peak learning rate.", above=0.0)
  # None in fine-tuning: derived from the epochs (`num_train_epochs`, `warmup_proportion`).
  num_train_steps: Optional[int] = option(100000, "Training steps.", minimum=1)
  num_warmup_steps: Optional[int] = option(10000, "Linear warmup steps.", minimum=0)
  save_checkpoints_steps: int = option(1000, "Steps between checkpoints.", minimum=1)
  keep_checkpoint_max: int = option(5, "Checkpoints kept in --output_dir.", minimum=1)
  steps_per_loop: Optional[int] = option(
      None, "Steps per host round trip: each logs a progress line and writes a TensorBoard "
      f"point; the original's --iterations_per_loop (default: {DEFAULT_STEPS_PER_LOOP}, or a "
      "tenth of the training steps if fewer, so a short run shows progress).", minimum=1)
  optimizer: str = option("adamw", "Optimizer.", choices=("adamw", "lamb"))
  lr_schedule: str = option(
      "bert", "After the linear warmup: 'bert', the original's linear decay of the global step "
      "(the rate jumps onto peak * (1 - step / steps)); 'linear', Hugging Face's "
      "get_linear_schedule_with_warmup (from the peak down to 0 over the remaining steps).",
      choices=("bert", "linear"))
  adam_bias_correction: bool = option(
      True, "AdamW: bias-corrected moments, as PyTorch's AdamW (what Hugging Face and "
      "keras-hub results use); False is the original BERT's AdamWeightDecayOptimizer "
      "exactly (no bias correction).")
  weight_decay: float = option(0.01, "Decoupled weight decay (not on LayerNorm, biases).",
                               minimum=0.0)
  clip_norm: float = option(1.0, "Global gradient norm clip; 0 disables.", minimum=0.0)
  num_accumulation_steps: int = option(1, "Micro-batches per step (gradient accumulation).",
                                      minimum=1)
  max_eval_steps: int = option(
      100, "run_pretraining --do_eval: evaluate at most N batches of --eval_input_file "
      "(default: --input_file).", minimum=1)
  # Runtime: resolved from --distribution_strategy/--tpu and the original --use_tpu/--tpu_name.
  distribution_strategy: str = option(
      "one_device",
      "tf.distribute strategy; multi_worker_mirrored reads TF_CONFIG.",
      choices=STRATEGIES)
  num_gpus: Optional[int] = option(None, "GPUs to use (default: all visible).", minimum=0)
  tpu: Optional[str] = option(None, "TPU name or address for --distribution_strategy=tpu.")
  tpu_zone: Optional[str] = option(None, "GCE zone of the TPU (default: looked up).")
  gcp_project: Optional[str] = option(None, "GCP project of the TPU (default: looked up).")
  cpu_devices: Optional[int] = option(
      None, "Split the CPU into N logical devices (mirrored without GPUs; testing).", minimum=1)
  dtype: str = option("float32",
                      "Compute precision; float16 uses dynamic loss scaling.",
                      choices=DTYPES)
  enable_xla: bool = option(False, "Compile the training step with XLA.")
  recompute_grad: bool = option(
      False, "Gradient checkpointing: recompute each Transformer layer's activations in the "
      "backward pass instead of keeping them (much less memory at long --max_seq_length, "
      "about a third more compute; the same loss and gradients, dropout included).")
  random_seed: int = option(12345, "Seed for initialization, dropout and input order.")
  deterministic: bool = option(False, "Deterministic ops (bit-exact reruns; slower).")


# A fine-tuning recipe as a whole: the optimizer's form, the schedule and the batching that
# go together (`--recipe`; each of these flags, given, overrides its recipe's value).
RECIPES = {
    # google-research/bert: AdamWeightDecayOptimizer (no bias correction), the rate jumps onto
    # peak * (1 - step / steps) after warmup, int(examples / batch * epochs) full batches.
    "original": dict(lr_schedule="bert", adam_bias_correction=False, last_partial_batch=False),
    # Hugging Face's Trainer: torch.optim.AdamW, get_linear_schedule_with_warmup, and every
    # epoch's last partial batch (ceil(examples / batch) steps an epoch).
    "huggingface": dict(lr_schedule="linear", adam_bias_correction=True,
                        last_partial_batch=True),
}


@dataclasses.dataclass(frozen=True)
class FinetuningSettings(RunSettings):
  """google-research/bert's fine-tuning settings on top of the common ones."""

  recipe: str = option(
      "original", "The fine-tuning recipe as a whole: 'original' (google-research/bert: "
      "AdamW without bias correction, --lr_schedule=bert, full batches only) or 'huggingface' "
      "(the Trainer's: PyTorch's AdamW, --lr_schedule=linear, each epoch's last partial "
      "batch). --adam_bias_correction, --lr_schedule and --last_partial_batch, given, override "
      "it.", choices=tuple(RECIPES))
  lr_schedule: Optional[str] = option(
      None, "After the linear warmup: 'bert', the original's linear decay of the global step "
      "(the rate jumps onto peak * (1 - step / steps)); 'linear', Hugging Face's "
      "get_linear_schedule_with_warmup (from the peak down to 0 over the remaining steps). "
      "Default: --recipe's.", choices=("bert", "linear"))
  adam_bias_correction: Optional[bool] = option(
      None, "AdamW: bias-corrected moments, as PyTorch's AdamW (Hugging Face's, keras-hub's); "
      "False is the original BERT's AdamWeightDecayOptimizer exactly. Default: --recipe's.")
  last_partial_batch: Optional[bool] = option(
      None, "Train on each epoch's last partial batch, ceil(examples / batch) steps an epoch, "
      "as Hugging Face's Trainer; False: full batches over the shuffled, repeated examples, "
      "int(examples / batch * epochs) steps, as the original. Default: --recipe's.")

  num_train_steps: Optional[int] = option(
      None, "Training steps (default: from --num_train_epochs).", minimum=1)
  num_warmup_steps: Optional[int] = option(
      None, "Linear warmup steps (default: from --warmup_proportion).", minimum=0)
  max_eval_steps: int = option(
      100, "Not used in fine-tuning, which evaluates the whole dev set (run_pretraining "
      "--do_eval's limit).", minimum=1)
  vocab_file: Optional[str] = option(None, "The vocabulary the model was trained with.")
  do_lower_case: bool = option(True, "Lower-case input (uncased models).")
  do_predict: bool = option(False, "Write predictions for the test/predict data.")
  predict_batch_size: int = option(8, "Global prediction batch size.", minimum=1)
  num_train_epochs: float = option(3.0, "Epochs over the training data.", above=0.0)
  warmup_proportion: float = option(0.1, "Fraction of the training steps with linear warmup.",
                                    minimum=0.0, maximum=1.0)
  max_train_examples: int = option(
      0, "Train on a seeded random subset of this many examples (0: all).", minimum=0)
  freeze_encoder: bool = option(False, "Train only the head: the encoder's weights stay fixed.")
  freeze_layers: int = option(
      0, "Keep the embeddings and the lowest N Transformer layers fixed.", minimum=0)
  layerwise_lr_decay: Optional[float] = option(
      None, "Layer l's learning rate times decay^(L - l) (embeddings: l = 0; pooler and head: "
      "factor 1), e.g. 0.95.", above=0.0, maximum=1.0)
  eval_every_steps: int = option(
      0, "With --do_train --do_eval: also evaluate on the dev data every N steps (0: at the "
      "end only); each evaluation goes to eval_results.txt, the log and OUTPUT_DIR/eval.",
      minimum=0)
  best_metric: Optional[str] = option(
      None, "Keep the checkpoint of the best evaluation by this metric in OUTPUT_DIR/best "
      "(default: the task's main metric). A name whose last word is 'loss', 'error', "
      "'perplexity', 'mse' or 'mae' is lower-is-better, others higher (a per-class score too: "
      "f1_loss, a label's F1); 'min:NAME' / 'max:NAME' say so explicitly.")
  early_stopping_patience: int = option(
      0, "Stop after this many evaluations without improving --best_metric (0: never).",
      minimum=0)
  num_restarts: int = option(
      1, "Random restarts, as the paper for small data sets: train this many seeds "
      "(--random_seed, +1, ...) in OUTPUT_DIR/restart_K, keep the best on dev (by "
      "--best_metric) in OUTPUT_DIR/best, and write every restart's dev scores with their "
      "mean, standard deviation and best to OUTPUT_DIR/restarts.json.", minimum=1)
  allow_case_mismatch: bool = option(
      False, "Train even if --do_lower_case contradicts the checkpoint's name, its "
      "tokenizer_config.json or the vocabulary's letter case.")
  trim_padding: bool = option(
      True, "Cut each batch to its longest real sequence (rounded up to one of a few bucket "
      "lengths) instead of --max_seq_length: the same results, no work on padding. Not on "
      "TPUs (static shapes), nor for SQuAD, whose loss spans the padding.")
  pack_tokens: bool = option(
      True, "Train on the real tokens only: the Transformer layers' dense parts on the "
      "batch's real tokens, attention in blocks of similar lengths (as the exports serve): "
      "the same losses and gradients without the work on padding. Classifiers, taggers, "
      "multiple choice and sentence embeddings; not SQuAD, nor with --enable_xla, "
      "--recompute_grad or on TPUs (static shapes).")
  group_by_length: bool = option(
      False, "Training batches of texts of similar length (sorted within windows of the "
      "shuffled stream, 50 batches at most, whose batches come in a seeded random order): "
      "less padding to compute with --trim_padding; resumes stay exact.")

  def __post_init__(self):
    """The recipe's values for the flags not given (None)."""
    recipe = RECIPES[self.recipe]
    for name, value in recipe.items():
      if getattr(self, name) is None:
        if name == "adam_bias_correction" and self.optimizer != "adamw":
          value = True  # no AdamW to correct: LAMB's own moments
        object.__setattr__(self, name, value)
    if self.last_partial_batch and self.group_by_length:
      raise ValueError("--group_by_length batches within windows of the repeated stream: not "
                       "with --last_partial_batch (or --recipe=huggingface); pass "
                       "--last_partial_batch=False")
    super().__post_init__()


@dataclasses.dataclass(frozen=True)
class OwnFilesSettings(FinetuningSettings):
  """Fine-tuning on the user's own files instead of a built-in data set (the script's doc
  gives the formats): run_classifier, run_ner."""

  train_file: Optional[str] = option(
      None, "Your own training data, instead of the built-in data set; its labels (tags) are "
      "the label set unless given.")
  dev_file: Optional[str] = option(None, "Your own dev data (--do_eval).")
  test_file: Optional[str] = option(
      None, "Your own data to predict (--do_predict); without labels (the label column or "
      "tag column) it is predicted, not scored.")


def loop_steps(steps_per_loop, num_train_steps):
  """Steps per training loop (one progress line and TensorBoard point each): `steps_per_loop`
  if given, else `DEFAULT_STEPS_PER_LOOP` or a tenth of `num_train_steps` (at least 1), if
  that is less: a 31-step fine-tuning logs every 3 steps, not once at its end."""
  if steps_per_loop:
    return steps_per_loop
  return min(DEFAULT_STEPS_PER_LOOP, max(1, num_train_steps // 10))


def finetuning_steps(settings, num_examples):
  """(num_train_steps, num_warmup_steps): from the epochs as the original run_classifier /
  run_squad count them (as Hugging Face's Trainer with --last_partial_batch), unless the
  settings give steps or warmup explicitly."""
  steps = settings.num_train_steps
  if steps is None and getattr(settings, "last_partial_batch", False):
    # Hugging Face's count: every epoch's batches, its last one partial.
    steps = max(1, math.ceil(math.ceil(num_examples / settings.train_batch_size)
                             * settings.num_train_epochs))
  elif steps is None:
    steps = max(1, int(num_examples / settings.train_batch_size * settings.num_train_epochs))
  warmup = settings.num_warmup_steps
  if warmup is None:
    warmup = int(steps * settings.warmup_proportion)
  return steps, warmup
