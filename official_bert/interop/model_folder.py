"""The one reader of a model folder: every entry point asks it, flags only override it.

Given any model we accept (a Hugging Face folder, a google-research TF1 checkpoint prefix or
folder, a `run_*` OUTPUT_DIR or its `best/`, a folder `save` wrote), `read` returns its config,
vocabulary, case, labels, head config and run record (`ModelFolder`). The Python API's
`from_preset`, `export`, `extract_features`, `convert_checkpoint` and the fine-tuning runner
all read a folder here, so they tokenize and build it the same way.

The case (do_lower_case), one policy, from the folder:
  1. its `tokenizer_config.json` (Hugging Face's file; our outputs write one too),
  2. else its run record (`run_settings.json`),
  3. else its vocabulary: a cased vocabulary (many entries with upper-case letters) is cased,
     a lower-case one uncased (`case_check.vocabulary_is_cased`),
  4. else (a vocabulary with too few cased letters to tell, e.g. CJK) lower-cased, BERT's
     default.
An explicit value (a flag, an argument) overrides it, but one that contradicts the folder's
tokenizer_config.json, run record or vocabulary is refused with the commands' case guard
(`case_check.check`) unless the caller allows the mismatch.
"""

import dataclasses
import json
import os
from typing import Optional

from absl import logging
import tensorflow as tf

from data_prep import tfrecord_io
from official_bert.interop import case_check
from official_bert.interop import hf_weights
from official_bert.interop import model_files
from official_bert.interop import run_record
from official_bert.modeling.bert_config import BertConfig


@dataclasses.dataclass(frozen=True)
class Names:
  """How the caller names the path and its overrides in messages (flags or arguments)."""
  path: str = "--checkpoint"
  config: str = "--bert_config_file"
  vocab: str = "--vocab_file"
  case: str = "--do_lower_case"
  allow_case: str = "--allow_case_mismatch"


@dataclasses.dataclass(frozen=True)
class ModelFolder:
  """What `read` found. `config_file`/`vocab_file` may be the overrides given."""
  path: str  # as given: a folder, a checkpoint prefix or a weights file
  directory: str  # the folder holding the weights and the files beside them
  config: Optional[BertConfig]
  config_file: Optional[str]
  vocab_file: Optional[str]
  do_lower_case: bool
  case_source: str  # where the case came from: a file, "the vocabulary", a flag, ...
  record: run_record.RunRecord
  labels: Optional[list]  # label names in id order: the record's, else labels.txt
  head_config_file: Optional[str]  # run_ner --feature_based's head_config.json

  @property
  def model_type(self):
    """The model type the folder's run record names (None for a pretrained model)."""
    return self.record.model_type


def declared_case(files, record):
  """(do_lower_case, its file) that a model's files state (its tokenizer_config.json, else
  its run record), or (None, None): the witness the case guard holds a flag against."""
  if files.do_lower_case is not None:
    return bool(files.do_lower_case), os.path.join(files.directory,
                                                   model_files.TOKENIZER_CONFIG_FILE)
  if record.do_lower_case is not None:
    return bool(record.do_lower_case), os.path.join(files.directory,
                                                    model_files.RUN_SETTINGS_FILE)
  return None, None


def folder_case(files, record, vocab_file):
  """(do_lower_case, where it came from) by the module's policy, for the files beside a
  model (`model_files.beside`), its record and its vocabulary."""
  declared, source = declared_case(files, record)
  if declared is not None:
    return declared, source
  return vocabulary_case(vocab_file)


def warn_if_the_vocabulary_disagrees(do_lower_case, source, vocab_file, names=Names()):
  """The folder's file decides the case (`folder_case`); a vocabulary that says otherwise
  is worth a warning (lower-casing a cased vocabulary, or the reverse). `names`: how the
  override is spelled (a command's flags, the API's arguments)."""
  cased = case_check.vocabulary_file_is_cased(vocab_file)
  if cased is not None and cased == do_lower_case:
    joiner = " " if names.case.startswith("--") else ", "
    logging.warning(
        "%s says do_lower_case=%s but the vocabulary %s is %s: following %s. If the "
        "vocabulary is right, correct the file (or pass %s=%s%s%s)", source, do_lower_case,
        vocab_file, "cased" if cased else "uncased", source, names.case, not do_lower_case,
        joiner, names.allow_case)


def vocabulary_case(vocab_file):
  """(do_lower_case, where it came from) by the vocabulary alone (steps 3 and 4 above)."""
  if vocab_file:
    cased = case_check.vocabulary_file_is_cased(vocab_file)
    if cased is not None:
      return not cased, f"the vocabulary {vocab_file}"
  return True, "the default (nothing in the folder says)"


# google-research/bert's --max_seq_length default, and the Python API's sequence_length.
DEFAULT_SEQUENCE_LENGTH = 128


def check_vocab_fits(num_tokens, config, vocab_file):
  """ValueError where a vocabulary of `num_tokens` (from `vocab_file`) has more tokens than
  the model `config` has ids: its last tokens' ids would index past the embeddings (a
  vocabulary of another model). Fewer is allowed (some checkpoints pad the vocabulary)."""
  if num_tokens > config.vocab_size:
    raise ValueError(f"{vocab_file} has {num_tokens} tokens but the model's vocab_size is "
                     f"{config.vocab_size}: the vocabulary of another model? (a vocabulary "
                     f"grown by extend_vocab needs the model resized: --resize_vocab)")


def default_sequence_length(config, preferred=DEFAULT_SEQUENCE_LENGTH):
  """The sequence length a model is read at when none is given (and its run record names
  none): `preferred`, or the model's max_position_embeddings where that is fewer, so a small
  model's folder needs no flag or argument on any route."""
  return min(preferred, config.max_position_embeddings)


class MissingModelFileError(ValueError):
  """No config or vocabulary beside a model, and none given (`read`)."""


# sentence-transformers' settings file beside a model it saved (all-MiniLM-L6-v2's).
SENTENCE_TRANSFORMERS_CONFIG = "sentence_bert_config.json"


def embedding_sequence_length(path, config=None):
  """The length sentence-transformers embeds at with the model at `path` (a folder or a
  prefix in it): its sentence_bert_config.json's max_seq_length, within `config`'s positions;
  None without one. An embedder read from such a folder takes it as its default, so that its
  vectors are sentence-transformers' for long texts too."""
  directory = model_files.directory_of(os.fspath(path))
  file = os.path.join(directory, SENTENCE_TRANSFORMERS_CONFIG)
  if not tf.io.gfile.exists(file):
    return None
  try:
    length = json.loads(tfrecord_io.read_text(file)).get("max_seq_length")
  except (ValueError, AttributeError):
    return None  # not ours to judge: the default applies
  if not isinstance(length, int) or isinstance(length, bool) or length < 3:
    return None
  return min(length, config.max_position_embeddings) if config else length


def read(path, config_file=None, vocab_file=None, do_lower_case=None,
         allow_case_mismatch=False, names=Names(), require_config=True, require_vocab=True):
  """Reads the model at `path` (see the module doc); the other arguments override the folder.

  Raises:
    ValueError: `path` does not exist; no config or vocabulary beside it (and none given,
      when required); an explicit case that contradicts the folder (unless
      `allow_case_mismatch`). Each names the path and the flag or argument to pass.
  """
  path = os.fspath(path)
  model_files.check_exists(path, names.path)
  files = model_files.beside(path)
  record = files.record
  config = None
  if config_file:
    config = model_files.read_config(config_file)
  elif files.bert_config:
    config_file, config = files.bert_config, model_files.read_config(files.bert_config)
  elif files.hf_config:
    config_file, config = files.hf_config, hf_weights.load_hf_config(files.hf_config)
  elif require_config:
    raise MissingModelFileError(f"{names.config} is required: {names.path}={path} has no "
                     f"{model_files.CONFIG_FILE} (ours) or {model_files.HF_CONFIG_FILE} "
                     "(Hugging Face's) beside it")
  vocab_file = vocab_file or files.vocab
  if not vocab_file and require_vocab:
    only_json = files.directory and tf.io.gfile.exists(
        os.path.join(files.directory, "tokenizer.json"))
    raise MissingModelFileError(f"{names.vocab} is required: {names.path}={path} has no "
                     f"{model_files.VOCAB_FILE} beside it" + (
                         " (its tokenizer.json is not read: save the tokenizer's vocab.txt "
                         "there, e.g. transformers' tokenizer.save_vocabulary(path))"
                         if only_json else ""))
  declared = declared_case(files, record)
  case, source = folder_case(files, record, vocab_file)
  if do_lower_case is None and vocab_file and declared[0] is not None:
    warn_if_the_vocabulary_disagrees(case, source, vocab_file, names)
  if do_lower_case is not None:
    if not allow_case_mismatch:
      case_check.check(bool(do_lower_case), path, vocab_file, *declared, files.vocab,
                       flag=names.case, allow=names.allow_case)
    case, source = bool(do_lower_case), names.case
  labels = model_files.labels_of(files.directory or path, record)
  folder = ModelFolder(path, files.directory, config, config_file, vocab_file, case, source,
                       record, list(labels) if labels else None,
                       model_files.head_config_beside(files.directory or path))
  logging.info("Model %s: config %s, vocabulary %s, do_lower_case=%s (from %s)%s", path,
               config_file, vocab_file, case, source,
               f", a {record.model_type}" if record.model_type else "")
  return folder
