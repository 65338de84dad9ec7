"""Converts BERT weights between google-research TF1 checkpoints, Hugging Face and ours: the
work of `python -m official_bert.convert_checkpoint`.

Every conversion goes through our Keras model, so the weights are checked against the config
on the way (`weights_io.assign_weights`, strict: no random head). The output gets our
`bert_config.json`, HF's `config.json` beside an HF output, the input's `vocab.txt` and stated
case, and, when the head is the input's, its run record and label files.
"""

import os

from absl import logging
import tensorflow as tf

from data_prep import tfrecord_io
from official_bert.interop import checkpointing
from official_bert.interop import folder_writes
from official_bert.interop import hf_weights
from official_bert.interop import model_files
from official_bert.interop import model_folder
from official_bert.interop import tf1_checkpoint
from official_bert.interop import weight_loading
from official_bert.interop import weight_names
from official_bert.interop import weights_io
from official_bert.modeling import model_types

FORMATS = ("tf1", "hf", "ours")
_HF_ARCHITECTURES = {"encoder": "BertModel", "pretraining": "BertForPreTraining"}
_FORMAT_NAMES = {
    "tf1": "a google-research TF1 checkpoint",
    "ours": "one of our checkpoints",
    "hf": "a Hugging Face model"
}


def read_input(path, input_format, bert_config_file=None):
  """Returns (weights_io.Weights, BertConfig): what --input holds, checked against its format."""
  weights = weights_io.read_weights(path)
  if weights.format != input_format:
    raise ValueError(f"{weights.source} is {_FORMAT_NAMES[weights.format]}, but "
                     f"--input_format={input_format}")
  folder = model_folder.read(weights.source, config_file=bert_config_file,
                             names=model_folder.Names(path="--input"), require_vocab=False)
  return weights, folder.config


def hf_config_dict(bert_config, model_type):
  """Our config as an HF `config.json` (activation names translated)."""
  return hf_weights.hf_config_dict(bert_config, _HF_ARCHITECTURES[model_type])


def write_output(model, model_type, bert_config, path, output_format, hf_prefix=""):
  """Writes the model's weights; returns (the path written, the directory it is in)."""
  if output_format == "hf":
    if model_type not in _HF_ARCHITECTURES:
      raise ValueError(f"HF output supports --model_type=encoder or pretraining (HF names "
                       f"for our {model_type} head are not defined); use tf1 or ours")
    if path.endswith(".safetensors"):
      file, directory = path, os.path.dirname(path) or "."
    else:
      file, directory = os.path.join(path, model_files.HF_WEIGHTS_FILE), path
    hf_weights.save_hf_weights(model, file, prefix=hf_prefix)
    model_files.write_hf_config(directory, hf_config_dict(bert_config, model_type))
    return file, directory
  is_dir = tf.io.gfile.isdir(path) or path.endswith("/")
  default = "bert_model.ckpt" if output_format == "tf1" else "ckpt-0"
  prefix = os.path.join(path, default) if is_dir else path
  directory = os.path.dirname(prefix) or "."
  tf.io.gfile.makedirs(directory)
  if output_format == "tf1":
    written = tf1_checkpoint.write_tf1_checkpoint(weight_loading.export_canonical_weights(model),
                                                  prefix)
  else:
    written = checkpointing.model_checkpoint(model).write(prefix)
    # So that `model_files.latest_checkpoint(directory)` (and --init_checkpoint=DIR) finds it.
    tf1_checkpoint.write_checkpoint_state(written)
  return written, directory


def output_location(path, output_format):
  """(folder, name in it) that --output names: an HF output's folder and its .safetensors
  file; a TF1 or our output's folder and checkpoint prefix (a folder, an existing one or a
  path ending in /, gets the format's default prefix)."""
  path = str(path)
  if output_format == "hf":
    if path.endswith(".safetensors"):
      return os.path.dirname(path) or ".", os.path.basename(path)
    return path.rstrip("/") or "/", model_files.HF_WEIGHTS_FILE
  if path.endswith("/") or tf.io.gfile.isdir(path):
    return path.rstrip("/") or "/", "bert_model.ckpt" if output_format == "tf1" else "ckpt-0"
  return os.path.dirname(path) or ".", os.path.basename(path)


def convert(input_path,
            input_format,
            output_path,
            output_format,
            bert_config_file=None,
            model_type=None,
            num_labels=None,
            hf_prefix=None,
            overwrite=False):
  """The whole conversion; returns (model_type, path written).

  The output folder follows `folder_writes`' rule: a new or empty folder gets the files when
  they are complete; a non-empty one (the input's own folder too) is refused unless
  `overwrite`, and then only the model there is replaced (the user's other files are kept).
  """
  weights, config = read_input(input_path, input_format, bert_config_file)
  trained = model_files.beside(weights.source).record.model_type
  if model_types.is_other_head(trained, model_type):
    raise ValueError(f"--model_type={model_type} but --input={input_path} was trained as a "
                     f"{trained} (its {model_files.RUN_SETTINGS_FILE}): leave --model_type "
                     "out, or --model_type=encoder for its encoder alone")
  model_type = model_type or weight_names.infer_model_type(weights.tensors)
  num_labels = num_labels or weight_names.num_labels_in(weights.tensors, model_type)
  logging.info("Converting a %s model (%d layers, hidden %d, %s)", model_type,
               config.num_hidden_layers, config.hidden_size, config.hidden_act)
  # Strict: every variable of the model must come from the input (no random head).
  model, _ = weights_io.built_and_assigned(
      lambda: model_types.build_model(
          model_type, config, num_labels,
          next_sentence=not weight_names.is_masked_lm_only(weights.tensors)),
      lambda model: weights_io.assign_weights(model, weights, require_heads=True))
  if hf_prefix is None:
    hf_prefix = weights.hf_prefix if weights.hf_prefix is not None else (
        "bert." if model_type == "pretraining" else "")
  beside = model_files.beside(weights.source)
  directory, name = output_location(output_path, output_format)
  prefix_given = output_format != "hf" and name == os.path.basename(str(output_path))
  written = []

  def fill(folder):
    path, _ = write_output(model, model_type, config, os.path.join(folder, name),
                           output_format, hf_prefix)
    written.append(os.path.join(directory, os.path.relpath(path, folder)))
    _write_model_files(folder, config, model_type, beside, output_format)

  _check_not_a_training_run(directory)
  try:
    folder_writes.write_folder(directory, fill, overwrite, owned=model_files.model_entries,
                               option="--overwrite")
  except folder_writes.FolderNotEmptyError as e:
    if not prefix_given:
      raise
    raise ValueError(f"{e}. (--output={output_path} is a checkpoint prefix in that folder; "
                     f"end it with / for a new folder of that name)") from e
  return model_type, written[0]


def _check_not_a_training_run(directory):
  """ValueError if `directory` holds a training run's checkpoints (with the optimizer's
  state): --overwrite would replace them all with the converted model's, and the run could
  not resume."""
  latest = model_files.latest_checkpoint(directory) if tf.io.gfile.isdir(directory) else None
  if latest and any(name.startswith("optimizer/")
                    for name, _ in tf.train.list_variables(latest)):
    raise ValueError(f"{directory} holds a training run's checkpoints ({os.path.basename(latest)}"
                     f", with its optimizer's state): converting into it would replace them "
                     f"and the run could not resume. Choose another --output")


def _write_model_files(folder, config, model_type, beside, output_format):
  """The files beside the converted weights in the new `folder`: the config, the input's
  vocabulary and stated case (a Hugging Face output: the vocabulary's, where nothing states
  it), and, for a model of the input's trained type, its run record
  and job files (labels, head config), so that the output exports and loads with no flags,
  as the input."""
  model_files.write_config(folder, config)
  model_files.copy_vocab(beside.vocab, folder)

  def copy(name):
    source = os.path.join(beside.directory, name)
    if tf.io.gfile.exists(source):
      tfrecord_io.copy_file(source, os.path.join(folder, name))
      return True
    return False

  # The case the input's own files state travels with it: without the file, the output would
  # be read by its vocabulary alone, which may say otherwise (or too little to tell). Its
  # tokenizer_config.json whole (other keys too), else the case its run record states.
  declared, _ = model_folder.declared_case(beside, beside.record)
  if declared is None and output_format == "hf" and beside.vocab:
    # A Hugging Face folder without tokenizer_config.json is lower-cased by transformers'
    # BertTokenizer: a cased release (no file states its case) would be read wrongly there.
    declared, _ = model_folder.vocabulary_case(beside.vocab)
  if not copy(model_files.TOKENIZER_CONFIG_FILE) and declared is not None:
    model_files.write_tokenizer_config(folder, declared)
  if beside.record.model_type == model_type:  # else another head (or none): not its task
    for name in (model_files.RUN_SETTINGS_FILE,) + model_files.JOB_FILES:
      copy(name)
