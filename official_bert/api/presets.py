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

from data_prep import tokenization
from official_bert.interop import checkpointing
from official_bert.interop import folder_writes
from official_bert.interop import hf_weights
from official_bert.interop import model_files
from official_bert.interop import weight_loading
from official_bert.interop import weight_names
from official_bert.interop import weights_io
from official_bert.training import case_check

# config: BertConfig; vocab_file; do_lower_case; weights: `weights_io.Weights` (read once);
# run_settings: a fine-tuning run's run_settings.json ({} otherwise); labels: its label names.
Preset = collections.namedtuple(
    "Preset", ["path", "config", "vocab_file", "do_lower_case", "weights", "run_settings",
               "labels"])


def load(path, read_weights=True):
  """Reads the model folder (or checkpoint prefix) at `path` into a `Preset`.

  Raises:
    FileNotFoundError: nothing at `path`, or no vocabulary / config beside it.
  """
  path = os.fspath(path)
  if not (tf.io.gfile.exists(path) or tf.io.gfile.exists(path + ".index")):
    raise FileNotFoundError(f"from_preset: no model at {path}")
  files = model_files.beside(path)
  if files.bert_config:
    config = model_files.read_config(files.bert_config)
  elif files.hf_config:
    config = hf_weights.load_hf_config(files.hf_config)
  else:
    raise FileNotFoundError(f"from_preset: {files.directory or path} has no bert_config.json "
                            f"or config.json (the model's configuration)")
  if not files.vocab:
    raise FileNotFoundError(f"from_preset: {files.directory or path} has no vocab.txt")
  run_settings = files.run_settings or {}
  do_lower_case = files.do_lower_case
  if do_lower_case is None:
    do_lower_case = run_settings.get("do_lower_case")
  if do_lower_case is None:  # a TF1 folder says nothing: its vocabulary does (cased_L-12...)
    cased = case_check.vocabulary_is_cased(tokenization.load_vocab_tokens(files.vocab))
    do_lower_case = not cased
  labels = run_settings.get("labels") or model_files.labels_beside(files.directory or path)
  weights = weights_io.read_weights(path) if read_weights else None
  return Preset(path, config, files.vocab, bool(do_lower_case), weights, run_settings,
                list(labels) if labels else None)


def assign(model, preset, require_heads=False):
  """Loads the preset's weights into `model`; a head absent from the file keeps its
  initialization (a warm start) unless `require_heads`. Returns the names of the variables
  left at their random initialization (a new head's; [] when the file had everything)."""
  loaded = set(weights_io.assign_weights(model, preset.weights, require_heads=require_heads))
  return [name for name, _ in weight_names.model_weight_pairs(model) if name not in loaded]


def save(path, network, preprocessor, record, overwrite=False):
  """Writes `network`'s weights and the model files to the folder `path`, atomically, by
  `folder_writes`' rule: a non-empty folder only with `overwrite`, which replaces the model
  there (`model_files.model_entries`) and keeps every other file.

  Weights are read through their canonical names (a LoRA layer's kernel is the merged one),
  so the folder holds a plain model any reader loads. `record`: run_settings.json's task
  entries (task, model_type, max_seq_length, labels, ...).
  """
  folder_writes.check_writable(path, overwrite, "overwrite=True")  # before any work
  encoder = network.encoder if hasattr(network, "encoder") else network
  tensors = weight_loading.export_canonical_weights(network)
  plain = type(network).from_config(network.get_config())
  plain.build()
  weight_loading.assign_canonical_weights(plain, tensors, "the model being saved")

  def fill(building):
    manager = tf.train.CheckpointManager(checkpointing.model_checkpoint(plain), building,
                                         max_to_keep=1, checkpoint_name="ckpt")
    manager.save(checkpoint_number=0)
    model_files.write(building, encoder.bert_config, preprocessor.vocab_file,
                      preprocessor.lower_case, record)

  folder_writes.write_folder(path, fill, overwrite, owned=model_files.model_entries)
