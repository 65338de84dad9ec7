"""The flags of every run_*.py and extract_features, defined from its settings dataclass
(`settings.py`, subclassed in `tasks/*_job.py` and `serving/feature_extraction`):
google-research/bert's names, one declaration for flag and setting."""

import dataclasses
import typing

from absl import flags
from absl import logging

from official_bert.training import settings


def _flag_type(annotation):
  """bool/int/float/str of a field annotation (Optional[X] -> X)."""
  args = [a for a in typing.get_args(annotation) if a is not type(None)]
  return args[0] if args else annotation


_DEFINE = {
    bool: flags.DEFINE_bool,
    int: flags.DEFINE_integer,
    float: flags.DEFINE_float,
    str: flags.DEFINE_string,
    tuple: flags.DEFINE_list
}


# google-research/bert's flags that mean nothing here (TPUEstimator's settings, which
# tf.distribute takes otherwise; its debugging output): accepted, so that its command lines
# run, and named in a warning when given. name -> (define, default, why).
_ORIGINAL_ONLY = {
    "master": (flags.DEFINE_string, None, "TPUEstimator's master address; the TPU is found "
               "through --tpu_name"),
    "num_tpu_cores": (flags.DEFINE_integer, 8, "TPUEstimator's core count; tf.distribute uses "
                      "every core of the TPU"),
    "verbose_logging": (flags.DEFINE_bool, False, "run_squad's alignment debugging output"),
    "use_one_hot_embeddings": (flags.DEFINE_bool, False, "a TPU speed setting of the "
                               "original's embedding lookup; the results are the same"),
    "use_tpu": (flags.DEFINE_bool, False, "extract_features runs on this machine's devices"),
}


def _define_original_only(names):
  for name in names:
    define, default, why = _ORIGINAL_ONLY[name]
    define(name, default, f"google-research/bert's flag, accepted and not used: {why}.")


def warn_of_original_only_flags(flag_values):
  """A warning for each flag of `_ORIGINAL_ONLY` given on the command line."""
  for name, (_, _, why) in _ORIGINAL_ONLY.items():
    if name in flag_values and flag_values[name].present and (
        flag_values[name].value != flag_values[name].default):
      logging.warning("--%s=%s: google-research/bert's flag, not used here (%s)", name,
                      flag_values[name].value, why)


def define_flags(settings_class, original_only=(), **defaults):
  """One flag per field of `settings_class` (a `settings.RunSettings` subclass), plus the
  original's aliases and the flags of `original_only` (`_ORIGINAL_ONLY`; a RunSettings script
  has --master and --num_tpu_cores). `defaults` overrides a field's default for this script
  (e.g. a fine-tuning script's batch size)."""
  for field in dataclasses.fields(settings_class):
    default = defaults.get(field.name, field.default)
    default = list(default) if isinstance(default, tuple) else default  # DEFINE_list's
    help_text = field.metadata.get("help", field.name)
    if field.metadata.get("choices"):
      flags.DEFINE_enum(field.name, default, list(field.metadata["choices"]), help_text)
    else:
      _DEFINE[_flag_type(field.type)](field.name, default, help_text)
  if not issubclass(settings_class, settings.RunSettings):
    _define_original_only(original_only)
    return
  _define_original_only(("master", "num_tpu_cores") + tuple(original_only))
  # google-research/bert's names, so its recipes run unchanged.
  flags.DEFINE_integer("iterations_per_loop", None, "Alias of --steps_per_loop (original name).")
  flags.DEFINE_bool("use_tpu", False, "Original name: same as --distribution_strategy=tpu.")
  flags.DEFINE_string("tpu_name", None, "Original name of --tpu.")


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
  return {
      f.name: f.value for module in (main_module, __name__)
      for f in flag_values.get_flags_for_module(module)
  }


def settings_from_flags(settings_class, flag_values):
  """`settings_class` filled from the flags of its fields' names (see `define_flags`), the
  strategy resolved from the original's TPU flags too."""
  values = {
      field.name: flag_values[field.name].value for field in dataclasses.fields(settings_class)
  }
  values = {name: tuple(v) if isinstance(v, list) else v for name, v in values.items()}
  warn_of_original_only_flags(flag_values)
  if not issubclass(settings_class, settings.RunSettings):
    return settings_class(**values)
  values["distribution_strategy"], values["tpu"] = strategy_flags(flag_values)
  alias = flag_values["iterations_per_loop"].value
  if alias:
    if flag_values["steps_per_loop"].present and values["steps_per_loop"] != alias:
      raise ValueError(f"--iterations_per_loop={alias} and --steps_per_loop="
                       f"{values['steps_per_loop']} differ (one is the other's original name)")
    values["steps_per_loop"] = alias
  return settings_class(**values)
