"""What `from_preset(path)` reads and `save(path)` writes.

`path` is any model folder this project reads elsewhere: a Hugging Face BERT folder
(`model.safetensors`, `config.json`, `vocab.txt`), a google-research TF1 checkpoint (prefix,
or folder with `bert_config.json` and `vocab.txt`), a command's OUTPUT_DIR or its `best/`, or
a folder written by `save`. `save` writes a fine-tuning OUTPUT_DIR's layout (a checkpoint
and `interop.model_files`' files), so `export --checkpoint=PATH`, `run_* --init_checkpoint=PATH`
and `from_preset(PATH)` all read it.
"""

import collections
import os

import tensorflow as tf

from official_bert.interop import checkpointing
from official_bert.interop import folder_writes
from official_bert.interop import model_files
from official_bert.interop import model_folder
from official_bert.interop import run_record
from official_bert.interop import weight_loading
from official_bert.interop import weights_io

# config: BertConfig; vocab_file; do_lower_case; weights: `weights_io.Weights` (read once);
# record: the folder's `run_record.RunRecord` (empty for a pretrained model); labels: its
# label names.
Preset = collections.namedtuple(
    "Preset", ["path", "config", "vocab_file", "do_lower_case", "weights", "record", "labels"])


# How `from_preset`'s arguments are named in the one reader's messages.
NAMES = model_folder.Names(path="from_preset: the model", config="a config",
                           vocab="a vocabulary", case="lower_case",
                           allow_case="allow_case_mismatch=True")


def load(path, read_weights=True, lower_case=None, allow_case_mismatch=False):
  """Reads the model folder (or checkpoint prefix) at `path` into a `Preset`: the one reader's
  (`model_folder.read`) config, vocabulary, case, labels and run record, plus the weights.
  `lower_case` overrides the folder's case (as the commands' --do_lower_case); one that
  contradicts the folder is refused unless `allow_case_mismatch`.

  Raises:
    FileNotFoundError: nothing at `path`, or no vocabulary / config beside it.
    ValueError: a `lower_case` the folder contradicts; a damaged run record or
      tokenizer_config.json (`model_files.DamagedFileError`); a config this library cannot
      build (another position embedding type or activation, ...).
  """
  path = os.fspath(path)
  if not (tf.io.gfile.exists(path) or tf.io.gfile.exists(path + ".index")):
    raise FileNotFoundError(f"from_preset: no model at {path}")
  if path.endswith(".keras") and not tf.io.gfile.isdir(path):
    raise ValueError(f"from_preset: {path} is a Keras file, not a model folder: load it with "
                     f"keras.saving.load_model({path!r}) (after `import official_bert`), or "
                     f"save a model folder with model.save(FOLDER)")
  try:
    folder = model_folder.read(path, do_lower_case=lower_case,
                               allow_case_mismatch=allow_case_mismatch, names=NAMES)
  except model_folder.MissingModelFileError as e:
    raise FileNotFoundError(str(e)) from None  # no config or vocabulary
  weights = weights_io.read_weights(path) if read_weights else None
  return Preset(path, folder.config, folder.vocab_file, folder.do_lower_case, weights,
                folder.record, folder.labels)


def trained_as(preset, model_type):
  """{field: value} of the preset's run record when it was trained as `model_type` (its head
  and settings then load), else {}."""
  return preset.record.values() if preset.record.model_type == model_type else {}


def built_and_assigned(build, preset, network_of=lambda model: model, require_heads=False):
  """(model, untrained): `build()`'s model with the preset's weights assigned into its
  `network_of(model)` (`weights_io.built_and_assigned`: the weights the file holds are not
  drawn first); `untrained`: the names of those it lacks (a new head's, at their random
  initialization: a warm start, unless `require_heads`)."""
  return weights_io.built_and_assigned(
      build, lambda network: weights_io.assign_weights(network, preset.weights, require_heads),
      network_of)


def save(path, network, preprocessor, record=None, overwrite=False):
  """Writes `network`'s weights and the model files to the folder `path`, atomically, by
  `folder_writes`' rule: a non-empty folder only with `overwrite`, which replaces the model
  there (`model_files.model_entries`) and keeps every other file.

  Weights are read through their canonical names (a LoRA layer's kernel is the merged one),
  so the folder holds a plain model any reader loads. `record`: its
  `run_record.RunRecord` (None: a pretrained model's, empty).
  """
  folder_writes.check_writable(path, overwrite, "overwrite=True")  # before any work
  encoder = network.encoder if hasattr(network, "encoder") else network
  tensors = weight_loading.export_canonical_weights(network)
  plain, _ = weights_io.built_and_assigned(
      lambda: type(network).from_config(network.get_config()),
      lambda model: weight_loading.assign_canonical_weights(model, tensors,
                                                            "the model being saved"))

  def fill(building):
    manager = tf.train.CheckpointManager(checkpointing.model_checkpoint(plain), building,
                                         max_to_keep=1, checkpoint_name="ckpt")
    manager.save(checkpoint_number=0)
    model_files.write(building, encoder.bert_config, preprocessor.vocab_file,
                      preprocessor.lower_case, record or run_record.RunRecord())

  folder_writes.write_folder(path, fill, overwrite, owned=model_files.model_entries)
