"""The files that make a fine-tuning OUTPUT_DIR (and OUTPUT_DIR/best) self-contained.

Whatever --init_checkpoint was (ours, TF1, a Hugging Face folder), a training run writes next
to its checkpoints what reading them needs:
  bert_config.json        the model config (an HF config.json converted to ours)
  vocab.txt               the vocabulary
  tokenizer_config.json   {"do_lower_case": ...}, Hugging Face's file for the case setting
  run_settings.json       task, model_type, max_seq_length, do_lower_case, labels
`weights_io.model_files` finds them beside a checkpoint as it finds an HF folder's files, so
`export --checkpoint=OUTPUT_DIR` and a later `--do_predict` on OUTPUT_DIR need no config,
vocabulary, case or label flags.
"""

import json
import os

import tensorflow as tf

from data_prep import tfrecord_io
from official_bert.interop import weights_io

CONFIG_FILE = "bert_config.json"
VOCAB_FILE = "vocab.txt"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
RUN_SETTINGS_FILE = weights_io.RUN_SETTINGS_FILE
# Settings a later run on the directory takes from run_settings.json when their flags are
# not given: they must equal training's for the features to mean the same.
INHERITED_FLAGS = ("do_lower_case", "max_seq_length")
# Files some jobs write into OUTPUT_DIR themselves (run_ner and own-file classification:
# labels.txt; run_ner --feature_based: head_config.json); best/ gets copies so that it
# exports on its own too.
JOB_FILES = ("labels.txt", "head_config.json")


# Every file that makes a model folder self-contained (the job's where present).
MODEL_FILES = (CONFIG_FILE, VOCAB_FILE, TOKENIZER_CONFIG_FILE, RUN_SETTINGS_FILE) + JOB_FILES


def model_file_paths(directory):
  """The paths of `MODEL_FILES` in `directory` (what best/ copies, where present)."""
  return [os.path.join(directory, name) for name in MODEL_FILES]


def write(output_dir, config, vocab_file, do_lower_case, record):
  """Writes the four files into `output_dir`; returns the paths best/ copies (with
  `JOB_FILES`, copied where present)."""
  paths = model_file_paths(output_dir)
  config_path, vocab_path, tokenizer_path, settings_path = paths[:4]
  tfrecord_io.write_text(config_path, config.to_json_string())
  if tfrecord_io.absolute(vocab_file) != tfrecord_io.absolute(vocab_path):
    tf.io.gfile.copy(vocab_file, vocab_path, overwrite=True)  # byte for byte
  tfrecord_io.write_text(tokenizer_path,
                         json.dumps({"do_lower_case": bool(do_lower_case)}, indent=2) + "\n")
  tfrecord_io.write_text(settings_path,
                         json.dumps(dict(record, do_lower_case=bool(do_lower_case)), indent=2,
                                    sort_keys=True) + "\n")
  return paths


def read_run_settings(directory):
  """run_settings.json of a fine-tuning output directory, or {}."""
  path = os.path.join(directory, RUN_SETTINGS_FILE) if directory else ""
  if not path or not tf.io.gfile.exists(path):
    return {}
  return json.loads(tfrecord_io.read_text(path))
