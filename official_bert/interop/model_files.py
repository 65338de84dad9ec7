"""The files beside a model's weights: their names, and the one reader and writer of each.

A model folder is weights (`weights_io`: a checkpoint, or an HF `model.safetensors`) plus:
  bert_config.json        our model config (an HF folder has HF's config.json instead)
  vocab.txt               the vocabulary
  tokenizer_config.json   {"do_lower_case": ...}, Hugging Face's file for the case setting
  run_settings.json       the run record (`run_record.RunRecord`): task, model_type,
                          max_seq_length, do_lower_case, labels and the task's part
  labels.txt              a job's label set in id order, one a line (run_ner, own-file
                          classification)
  head_config.json        run_ner --feature_based's head architecture, which the weights alone
                          do not determine
A fine-tuning OUTPUT_DIR (and its best/) gets them from `write` and the jobs, whatever
--init_checkpoint was, so `export --checkpoint=OUTPUT_DIR`, a later `--do_predict`,
`--init_checkpoint=OUTPUT_DIR` and `from_preset` read an HF folder and our folders alike
(`beside`), with no config, vocabulary, case or label flags.

Nothing here imports the rest of the package but the config class (`modeling.bert_config`,
which imports nothing of ours) and the record type (`run_record`): every layer may read these
files without an import cycle. `model_folder.read` is the reader of a whole folder.
"""

import collections
import dataclasses
import json
import os

from absl import logging
import tensorflow as tf

from data_prep import tfrecord_io
from official_bert.interop import run_record
from official_bert.modeling.bert_config import BertConfig

HF_WEIGHTS_FILE = "model.safetensors"  # an HF folder's weights (`weights_io` reads them)
CONFIG_FILE = "bert_config.json"
HF_CONFIG_FILE = "config.json"
VOCAB_FILE = "vocab.txt"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
RUN_SETTINGS_FILE = "run_settings.json"
LABELS_FILE = "labels.txt"
HEAD_CONFIG_FILE = "head_config.json"
# Files some jobs write into OUTPUT_DIR themselves (run_ner and own-file classification:
# labels.txt; run_ner --feature_based: head_config.json); best/ gets copies so that it
# exports on its own too.
JOB_FILES = (LABELS_FILE, HEAD_CONFIG_FILE)
# Every file that makes a model folder self-contained (the job's where present).
MODEL_FILES = (CONFIG_FILE, VOCAB_FILE, TOKENIZER_CONFIG_FILE, RUN_SETTINGS_FILE) + JOB_FILES
# The keys of head_config.json besides its model_type: `model_types.build_model`'s head_config.
_HEAD_CONFIG_KEYS = {"layers", "combine", "lstm_units", "lstm_layers"}

# Files that travel with a model; None when absent. do_lower_case: from an HF
# tokenizer_config.json (fine-tuning outputs write one too), else None. record: the
# `run_record.RunRecord` of run_settings.json (an empty one when absent).
ModelFiles = collections.namedtuple(
    "ModelFiles", ["directory", "bert_config", "hf_config", "vocab", "do_lower_case",
                   "record"])


def directory_of(path):
  """The folder of the weights at `path`: `path` itself when it is a folder (not a
  checkpoint prefix that also reads as one, as on ram://), else the folder it is in."""
  path = str(path) if path else ""
  if path and tf.io.gfile.isdir(path) and not tf.io.gfile.exists(path + ".index"):
    return path
  return os.path.dirname(path)


def latest_checkpoint(directory):
  """The latest checkpoint's prefix in `directory`, or None: `tf.train.latest_checkpoint`, but
  the prefix of the name its `checkpoint` file gives found in `directory` first (a folder
  copied from where google-research's run_* trained it names that absolute path), and without
  TensorFlow's ERROR log where the prefix is nowhere."""
  state = tf.train.get_checkpoint_state(directory)
  if state is None or not state.model_checkpoint_path:
    return None
  named = state.model_checkpoint_path
  # The prefix of that name in this folder first: a folder copied from where google-research's
  # run_* wrote it names the absolute path it was trained in, which may hold another model.
  for prefix in dict.fromkeys([os.path.join(directory, os.path.basename(named)), named]):
    if tf.io.gfile.exists(prefix + ".index"):
      return prefix
    # A V1 checkpoint is the one file at its prefix.
    if tf.io.gfile.exists(prefix) and not tf.io.gfile.isdir(prefix):
      return prefix
  return None


_WARNED_NORMALIZATION = set()


def _warn_of_other_normalization(path, settings):
  """Hugging Face's BertTokenizer can keep accents while lower-casing (strip_accents false), or
  strip them without (true), and leave CJK characters unsplit (tokenize_chinese_chars false);
  BERT's tokenizer, ours, strips accents exactly when it lower-cases and splits CJK. Such a
  folder's text tokenizes differently here: said once per file."""
  lower = settings.get("do_lower_case")
  strip = settings.get("strip_accents")
  other = []
  if isinstance(strip, bool) and isinstance(lower, bool) and strip != lower:
    other.append(f"strip_accents={str(strip).lower()} with do_lower_case={str(lower).lower()}")
  if settings.get("tokenize_chinese_chars") is False:
    other.append("tokenize_chinese_chars=false")
  if other and path not in _WARNED_NORMALIZATION:
    _WARNED_NORMALIZATION.add(path)
    logging.warning("%s: %s; this library's tokenizer (BERT's) strips accents exactly when it "
                    "lower-cases and splits CJK characters, so words with accents (or CJK "
                    "text) may tokenize differently from the Hugging Face tokenizer of this "
                    "model", path, " and ".join(other))


def beside(path):
  """The files next to the weights at `path` (a file, prefix or directory): `ModelFiles`.

  bert_config: our `bert_config.json`; hf_config: HF's `config.json`; vocab: `vocab.txt`;
  do_lower_case: HF `tokenizer_config.json`'s, if it says; record: the run record of a
  trained model's `run_settings.json` (an empty `RunRecord` if none).
  """
  directory = directory_of(path)

  def there(name):
    file = os.path.join(directory, name)
    return file if tf.io.gfile.exists(file) else None

  do_lower_case = None
  tokenizer_config = there(TOKENIZER_CONFIG_FILE)
  if tokenizer_config:
    advice = ". Correct it, or remove it to take the case from the folder's run record or "\
             "vocabulary"
    try:
      settings = _read_json_object(tokenizer_config)
    except ValueError as e:
      raise DamagedFileError(f"{e}{advice}") from None
    do_lower_case = settings.get("do_lower_case")
    _warn_of_other_normalization(tokenizer_config, settings)
    if do_lower_case is not None and not isinstance(do_lower_case, bool):
      raise DamagedFileError(f"{tokenizer_config}: do_lower_case should be true or false, got "
                             f"{json.dumps(do_lower_case)}{advice}")
  return ModelFiles(directory, there(CONFIG_FILE), there(HF_CONFIG_FILE), there(VOCAB_FILE),
                    do_lower_case, read_run_settings(directory))


def check_exists(path, flag):
  """ValueError unless `path` (the value of `flag`) is a file, a folder or a checkpoint prefix
  (PREFIX.index exists): a mistyped path is named as such, not as a missing config."""
  if not (tf.io.gfile.exists(path) or tf.io.gfile.exists(path + ".index")):
    raise ValueError(f"{flag}={path} does not exist (no such file, folder or checkpoint "
                     "prefix)")


def model_entries(directory):
  """The entries of `directory` that belong to the model there (what a save over it with
  overwrite replaces): the model files, the checkpoints its `checkpoint` file lists (without
  one, the folder's one checkpoint: a release's bert_model.ckpt), and a
  Hugging Face folder's weights and config (read before ours, so they must not stay behind).
  A run's records, logs, scores, best/ and every other file are not the model's; nor is any
  file of a folder that holds no weights (a user's config.json or labels.txt there is theirs).
  """
  listing = [name.rstrip("/") for name in tf.io.gfile.listdir(directory)]
  state = tf.train.get_checkpoint_state(directory)
  # A checkpoint is PREFIX.index with its PREFIX.data-* shards: a lone docs.index (a search
  # index) is a user's file, and so is every docs.* beside it.
  indexed = [name[:-len(".index")] for name in listing if name.endswith(".index")
             and any(other.startswith(name[:-len("index")] + "data-") for other in listing)]
  if state is None and HF_WEIGHTS_FILE not in listing and not indexed:
    return []  # no model here
  names = set(MODEL_FILES) | {"checkpoint", HF_WEIGHTS_FILE, HF_CONFIG_FILE}
  prefixes = set()
  if state is not None:
    prefixes = {os.path.basename(p) for p in
                list(state.all_model_checkpoint_paths) + [state.model_checkpoint_path]}
  else:  # a released folder's one checkpoint (bert_model.ckpt), the one its readers take
    prefixes = set(indexed) if len(indexed) == 1 else set()
  return sorted(name for name in listing if name in names or any(
      name in (prefix + ".index", prefix + ".meta") or name.startswith(prefix + ".data-")
      for prefix in prefixes))


def others_files(directory, given=()):
  """The names in `directory` that a run's `write` or `write_labels` would replace (its config,
  vocabulary, tokenizer_config.json, labels.txt; a `checkpoint` file, a `.tf_record` that is
  not records) or that make it another model's folder (a Hugging Face model), where no run of
  ours is there (no run record, which both put first, and no checkpoint): a user's vocab.txt
  or labels.txt, a downloaded model. `given`: paths the run reads as they are (its
  --vocab_file there). [] for a run's folder, a new one, or one without such files."""
  if not tf.io.gfile.isdir(directory):
    return []
  listing = {name.rstrip("/") for name in tf.io.gfile.listdir(directory)}
  if RUN_SETTINGS_FILE in listing or latest_checkpoint(directory):
    return []
  read_as_given = {tfrecord_io.absolute(path) for path in given if path}
  # A `checkpoint` file that names no checkpoint (TensorFlow ignores it, and a run writes its
  # own), and a `.tf_record` that is not records (a run's cached features replace theirs).
  theirs = {CONFIG_FILE, VOCAB_FILE, TOKENIZER_CONFIG_FILE, LABELS_FILE, HF_WEIGHTS_FILE,
            "checkpoint"}
  theirs |= {os.path.basename(path) for path in tfrecord_io.not_records(
      [os.path.join(directory, name) for name in listing if name.endswith(".tf_record")])}
  return sorted(name for name in listing & theirs
                if tfrecord_io.absolute(os.path.join(directory, name)) not in read_as_given)


def model_file_paths(directory):
  """The paths of `MODEL_FILES` in `directory` (what best/ copies, where present)."""
  return [os.path.join(directory, name) for name in MODEL_FILES]


def write(output_dir, config, vocab_file, do_lower_case, record):
  """Writes bert_config.json, vocab.txt, tokenizer_config.json and run_settings.json
  (`record`, a `run_record.RunRecord`, with do_lower_case) into `output_dir`; returns the
  paths best/ copies (with `JOB_FILES`, copied where present). `do_lower_case` None (unknown):
  no tokenizer_config.json, and the record says nothing of the case."""
  paths = model_file_paths(output_dir)
  config_path, vocab_path, tokenizer_path, settings_path = paths[:4]
  if do_lower_case is not None:
    record = dataclasses.replace(record, do_lower_case=bool(do_lower_case))
  # The record first: the folder is then a run's (`others_files`), whatever stops the rest.
  tfrecord_io.write_text(settings_path, record.to_json())
  write_config_file(config_path, config)
  if tfrecord_io.absolute(vocab_file) != tfrecord_io.absolute(vocab_path):
    tfrecord_io.copy_file(vocab_file, vocab_path)  # byte for byte
  if do_lower_case is None:  # nothing tells the case: the files do not claim one
    paths.remove(tokenizer_path)
  else:
    write_tokenizer_config(output_dir, do_lower_case)
  return paths


def read_config(path):
  """A bert_config.json (any tf.io.gfile path) as a `BertConfig`; errors name the file."""
  path = str(path)
  if not tf.io.gfile.exists(path):
    raise FileNotFoundError(f"{path}: no such BERT config file")
  return BertConfig.from_json_string(tfrecord_io.read_text(path), source=path)


def write_config_file(path, config):
  """`config` (a `BertConfig`) in our format at `path`, written atomically."""
  tfrecord_io.write_text(str(path), config.to_json_string())


def write_config(directory, config):
  """`directory`/bert_config.json: `config` in our format."""
  write_config_file(os.path.join(directory, CONFIG_FILE), config)


def write_hf_config(directory, hf_config):
  """`directory`/config.json: an HF config dict (`hf_weights.hf_config_dict`), atomically."""
  tfrecord_io.write_text(os.path.join(directory, HF_CONFIG_FILE),
                         json.dumps(hf_config, indent=2, sort_keys=True))


def write_tokenizer_config(directory, do_lower_case):
  """`directory`/tokenizer_config.json: the case, as Hugging Face's tokenizers write it."""
  tfrecord_io.write_text(os.path.join(directory, TOKENIZER_CONFIG_FILE),
                         json.dumps({"do_lower_case": bool(do_lower_case)}, indent=2) + "\n")


def copy_vocab(vocab_file, directory):
  """Copies `vocab_file` to `directory`/vocab.txt unless one is there already."""
  target = os.path.join(directory, VOCAB_FILE)
  if vocab_file and not tf.io.gfile.exists(target):
    tfrecord_io.copy_file(vocab_file, target)


class DamagedFileError(ValueError):
  """A model folder's file (its run record, tokenizer_config.json) that is there but cannot be
  read as what it should hold: an error naming the file, never "no model here"."""


def read_run_settings(directory):
  """The `run_record.RunRecord` of `directory`'s run_settings.json (empty when there is none).

  Raises:
    ValueError: a damaged record (not JSON, a field of the wrong type), naming the file. Read
      as none, the folder would load as a pretrained encoder, with the default length and
      case, not as the model it records.
  """
  path = os.path.join(directory, RUN_SETTINGS_FILE) if directory else ""
  if not path or not tf.io.gfile.exists(path):
    return run_record.RunRecord()
  try:
    return run_record.RunRecord.from_json(tfrecord_io.read_text(path), source=path)
  except run_record.NewerVersionError as e:
    raise DamagedFileError(str(e)) from None
  except ValueError as e:
    raise DamagedFileError(f"{e}. The folder's run record is damaged: correct it (a model saved "
                           "by official-bert writes it), or remove it to read the folder as a "
                           "pretrained model") from None


def labels_beside(checkpoint):
  """The label strings of the labels.txt a fine-tuning run (run_classifier/run_ner on own
  files) wrote in a checkpoint's directory (or the directory given), one a line; or None.

  Blank lines are skipped and Windows line ends accepted (a hand-edited file); bad UTF-8 is a
  ValueError naming the line.
  """
  directory = checkpoint if tf.io.gfile.isdir(checkpoint) else os.path.dirname(checkpoint)
  path = os.path.join(directory, LABELS_FILE)
  if not tf.io.gfile.exists(path):
    return None
  return [line for line in tfrecord_io.read_text(path).splitlines() if line]


def is_reordering(trained, given):
  """Whether label list `given` holds `trained`'s labels (strings, in id order) in another
  order: a head trained on one order scores each label as another under the other."""
  return given != trained and sorted(given) == sorted(trained)


def labels_of(directory, record=None):
  """A trained folder's label names in id order: its run record's (`record`, else read), else
  its labels.txt; None when it has neither (a pretrained model)."""
  record = read_run_settings(directory) if record is None else record
  return list(record.labels) if record.labels else labels_beside(directory)


def write_labels(directory, labels, required=True):
  """`directory`/labels.txt: `labels` in id order, one a line (read by `labels_beside`).
  Not `required` (the run record beside it holds them): nothing is written where a label has
  a line break. Where `directory` holds no run record, an empty one is written first (`write`
  fills it): a run that stops before it leaves a run's folder, not a labels.txt that
  `others_files` would take for the user's.

  Raises:
    ValueError: a label with a line break, which the file cannot hold as one line.
  """
  broken = [label for label in labels if "\n" in str(label) or "\r" in str(label)]
  if broken and not required:
    return
  if broken:
    raise ValueError(f"label {broken[0]!r} holds a line break, which {LABELS_FILE} (one label "
                     f"a line) cannot hold: remove line breaks from the labels")
  record_path = os.path.join(directory, RUN_SETTINGS_FILE)
  if not tf.io.gfile.exists(record_path):
    tfrecord_io.write_text(record_path, run_record.RunRecord().to_json())
  tfrecord_io.write_text(os.path.join(directory, LABELS_FILE),
                         "".join(f"{label}\n" for label in labels))


def head_config_beside(checkpoint):
  """The head_config.json in a checkpoint's directory (or the directory given), or None."""
  directory = checkpoint if tf.io.gfile.isdir(checkpoint) else os.path.dirname(checkpoint)
  path = os.path.join(directory, HEAD_CONFIG_FILE)
  return path if tf.io.gfile.exists(path) else None


def read_head_config(path):
  """The `model_types.build_model` head_config in a head_config.json (its model_type key
  dropped)."""
  config = _read_json_object(path)
  config.pop("model_type", None)
  if set(config) != _HEAD_CONFIG_KEYS:
    raise ValueError(f"{path}: expected the keys {sorted(_HEAD_CONFIG_KEYS)}, got "
                     f"{sorted(config)}")
  return config


def _read_json_object(path):
  """The JSON object (a dict) in the file at `path`; ValueError naming it otherwise."""
  return run_record.json_object(tfrecord_io.read_text(path), path)


def write_head_config(output_dir, head_config):
  """OUTPUT_DIR/head_config.json; a different architecture than an existing run's is an
  error (its checkpoints would not fit)."""
  path = os.path.join(output_dir, HEAD_CONFIG_FILE)
  content = json.dumps({"model_type": "feature_tagger", **head_config}, indent=2) + "\n"
  if tf.io.gfile.exists(path):
    old = tfrecord_io.read_text(path)
    if old != content and latest_checkpoint(output_dir):
      raise ValueError(f"{path} describes another feature-based model than these flags "
                       f"({old.strip()} vs {content.strip()}): use a new --output_dir")
  tfrecord_io.write_text(path, content)
