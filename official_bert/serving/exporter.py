"""Writes a BERT model as a SavedModel that serves raw text, a TF-Hub-style pair or a
TensorFlow Lite model: the work of `python -m official_bert.export`.

--checkpoint is ours, a google-research TF1 checkpoint (prefix or directory) or a Hugging Face
model (`weights_io`). A Hugging Face folder brings its config.json, vocab.txt and
tokenizer_config.json's do_lower_case; a fine-tuning OUTPUT_DIR brings its bert_config.json,
vocab.txt, labels.txt and run_settings.json (`model_folder.read`, `trained_settings`). Every
variable of the exported model must be in it: a classifier/squad/tagger head missing from the
file is an error (`allow_random_head` exports a random head anyway, for tests only).

single (default): one SavedModel with signatures `serving_default` (text), `serving_pair`
(text, text_b) and `serve_ids` (input_word_ids, input_mask, input_type_ids); outputs in
`serving.signatures`. hub_pair (encoder): like the Model Garden's export_tfhub,
DIR/preprocessor (text -> input_word_ids, input_mask, input_type_ids) and DIR/encoder (those
-> pooled_output, sequence_output, encoder_outputs, mean_pooled_output). tflite:
DIR/model.tflite, the `serve_ids` signature at seq max_seq_length for on-device use
(`serving.tflite_export`), with DIR/vocab.txt and DIR/assets.extra/.

An export is built beside its target and swapped in only when complete, so a failing export
leaves the previous model untouched. Loading needs tensorflow-text's ops registered (`import
tensorflow_text`); nothing from this repository. The vocabulary is saved in `assets/`, the
config and export settings in `assets.extra/`.
"""

import contextlib
import dataclasses
import json
import os
from typing import Optional, Sequence

from absl import logging
import tensorflow as tf

from data_prep import tfrecord_io
from data_prep import tokenization
from official_bert.interop import folder_writes
from official_bert.interop import model_files
from official_bert.interop import model_folder
from official_bert.interop import weight_names
from official_bert.interop import weights_io
from official_bert.modeling import model_types
from official_bert.modeling import sentence_embedding
from official_bert.serving import classifier_outputs
from official_bert.serving import onnx_export
from official_bert.serving import onnx_quantization
from official_bert.serving import signatures as export_signatures
from official_bert.serving import squad_answers
from official_bert.serving import text_packing
from official_bert.serving import tflite_export

SQUAD_FLAGS = ("doc_stride", "max_query_length", "n_best_size", "max_answer_length",
               "version_2_with_negative", "null_score_diff_threshold")
# Formats that hold only the serve_ids graph, one file each: (module, --quantize modes).
FILE_FORMATS = {"tflite": tflite_export, "onnx": onnx_export}
EXPORT_FORMATS = ("single", "hub_pair") + tuple(FILE_FORMATS)
# What a SavedModel folder holds (a single export's top level; each half of a hub_pair).
SAVED_MODEL_ENTRIES = ("saved_model.pb", "fingerprint.pb", "variables", "assets",
                       "assets.extra")
HUB_PAIR_ENTRIES = ("preprocessor", "encoder")
# Every format's --quantize modes, in first-seen order (the flag's choices).
QUANTIZE_MODES = tuple(dict.fromkeys(m for f in FILE_FORMATS.values() for m in f.QUANTIZE_MODES))
# The flags a fine-tuning run's run_settings.json supplies when not given.
FROM_RUN_SETTINGS = ("max_seq_length", "label_names", "num_labels", "problem_type",
                     "multi_label_threshold", "label_separator", "normalize_embeddings",
                     "pooling") + SQUAD_FLAGS


def _display_vocab(vocab, config, vocab_file):
  """The token list, one entry per model id (some checkpoints pad the vocabulary)."""
  model_folder.check_vocab_fits(len(vocab), config, vocab_file)
  vocab_size = config.vocab_size
  if len(vocab) < vocab_size:
    logging.warning("%s has %d tokens, the model %d ids: the extra ids show as [id N].", vocab_file,
                    len(vocab), vocab_size)
  return list(vocab) + [f"[id {i}]" for i in range(len(vocab), vocab_size)]


def model_type_of(folder, model_type):
  """`model_type` if given, else the one the run record of `folder` (a
  `model_folder.ModelFolder`) names (ValueError when it names none: a pretrained model, which
  may be exported as several types)."""
  stored = folder.model_type
  if model_type:
    if model_types.is_other_head(stored, model_type):
      raise ValueError(f"--model_type={model_type} but --checkpoint={folder.path} was trained "
                       f"as a {stored} (its {model_files.RUN_SETTINGS_FILE}): leave "
                       f"--model_type out, or --model_type=encoder for its encoder's vectors")
    return model_type
  if not stored:
    raise ValueError(f"--model_type is required: --checkpoint={folder.path} has no run record "
                     f"({model_files.RUN_SETTINGS_FILE}) naming its model type (a pretrained "
                     "model: --model_type=encoder serves its vectors)")
  logging.info("--model_type=%s: from %s beside --checkpoint", stored,
               model_files.RUN_SETTINGS_FILE)
  return stored


@dataclasses.dataclass(frozen=True)
class ExportOptions:
  """Every export setting that is not about reading the model folder (`export`).

  model_type: what to export (`model_types.MODEL_TYPES`).
  max_seq_length: the text signatures pad/truncate to this length.
  num_labels: labels of a classifier/tagger head (default: len(label_names)).
  label_names: label strings in id order (default: the folder's labels, for a labelled head).
  export_format: `EXPORT_FORMATS`: single, hub_pair, tflite or onnx.
  top_k: predictions per [MASK] (pretraining).
  allow_random_head: export a head the checkpoint lacks with random weights (tests only).
  overwrite: replace an existing export (its own entries; other files stay).
  head_config_file: a feature_tagger's head_config.json (default: the folder's).
  normalize_embeddings: an encoder's mean_pooled_output and sentence_embedding unit length.
  squad_options: `squad_answers.SquadAnswerer`'s keyword arguments (doc_stride, ...), squad.
  quantize: tflite, onnx: `QUANTIZE_MODES` (the format's own).
  classifier_options: a `classifier_outputs.Options` for a classifier export.
  pooling: an encoder's `sentence_embedding` output (`sentence_embedding.POOLINGS`).
  calibration_file: --quantize_calibration_file (ONNX int8, `onnx_quantization`).
  min_cosine: --quantize_min_cosine, with `calibration_file`.
  xla_single_sequence: one text runs XLA-compiled (`modeling.single_sequence_xla`), SavedModels.
  source: export_info.json's model exported (default: the checkpoint; the API names itself).
  """
  model_type: str
  max_seq_length: int = 128
  num_labels: Optional[int] = None
  label_names: Optional[Sequence[str]] = None
  export_format: str = "single"
  top_k: int = 5
  allow_random_head: bool = False
  overwrite: bool = False
  head_config_file: Optional[str] = None
  normalize_embeddings: bool = False
  squad_options: Optional[dict] = None
  quantize: str = "none"
  classifier_options: Optional[classifier_outputs.Options] = None
  pooling: str = "mean"
  calibration_file: Optional[str] = None
  min_cosine: float = 0.99
  xla_single_sequence: bool = False
  source: Optional[str] = None


@contextlib.contextmanager
def quiet_saving():
  """Hides TensorFlow's INFO lines while saving (input renaming inside signatures, saver
  sharding, fingerprints, "Assets written"): internals, not news for the user. TensorFlow
  logs them through absl and through its own Python logger; warnings still show."""
  logger = tf.get_logger()
  level, verbosity = logger.level, logging.get_verbosity()
  logger.setLevel("WARNING")
  logging.set_verbosity(logging.WARNING)
  try:
    yield
  finally:
    logger.setLevel(level)
    logging.set_verbosity(verbosity)


def _save(module, directory, signatures, vocab_file, extra):
  module.vocab_file = tf.saved_model.Asset(vocab_file)
  with quiet_saving():
    tf.saved_model.save(module, directory, signatures=signatures)
  extra_dir = os.path.join(directory, "assets.extra")
  tf.io.gfile.makedirs(extra_dir)
  for name, content in extra.items():
    with tf.io.gfile.GFile(os.path.join(extra_dir, name), "w") as f:
      f.write(content)


def export(folder, export_dir, options):
  """Writes the SavedModel(s) of the model in `folder` (a `model_folder.ModelFolder`:
  `model_folder.read`) to `export_dir` as `options` (an `ExportOptions`) say; returns the
  exported tf.Module(s) (for in-process checks). The folder brings the config, vocabulary,
  case, weights, labels and a feature_tagger's head config; `options` may override the last
  two."""
  model_type = options.model_type
  head_config = None
  if model_type == "feature_tagger":
    head_config_file = options.head_config_file or folder.head_config_file
    if not head_config_file:
      raise ValueError(f"--model_type=feature_tagger: no {model_files.HEAD_CONFIG_FILE} "
                       f"beside --checkpoint={folder.path}; pass --head_config_file")
    head_config = model_files.read_head_config(head_config_file)
  config = folder.config
  vocab = tokenization.load_vocab_tokens(folder.vocab_file)
  max_seq_length = options.max_seq_length
  text_packing.check_packed_length(max_seq_length, "--max_seq_length")
  config.check_sequence_length(max_seq_length, "--max_seq_length", folder.config_file)
  num_labels, label_names = options.num_labels, options.label_names
  if not label_names and not num_labels and model_type in model_types.NEEDS_NUM_LABELS:
    # A fine-tuning run's labels: served outputs carry label strings (options win).
    label_names = folder.labels
  if label_names:
    if num_labels and num_labels != len(label_names):
      raise ValueError(f"--num_labels={num_labels} but {len(label_names)} --label_names")
    num_labels = len(label_names)
  classifier_options = options.classifier_options or classifier_outputs.Options()
  if model_type == "classifier":
    classifier_outputs.check_problem_type(classifier_options.problem_type, num_labels)
    if classifier_options.doc_stride < 0:
      raise ValueError(f"--doc_stride={classifier_options.doc_stride} must be >= 0")
    if classifier_options.problem_type == "regression":
      num_labels = num_labels or 1
    separator = classifier_options.separator
    joined = [name for name in label_names or [] if separator and separator in str(name)]
    if classifier_options.problem_type == "multi_label" and joined:
      raise ValueError(f"label {joined[0]!r} holds the --label_separator {separator!r} that "
                       f"joins the predicted labels: its predicted_labels would read as "
                       f"others; pass another --label_separator (e.g. '|')")
  export_format, quantize = options.export_format, options.quantize
  if export_format == "hub_pair" and model_type != "encoder":
    raise ValueError("--export_format=hub_pair exports an encoder: use --model_type=encoder")
  check_quantize(export_format, quantize)
  if options.xla_single_sequence and export_format in FILE_FORMATS:
    raise ValueError(f"--xla_single_sequence compiles a SavedModel's requests of one text; "
                     f"--export_format={export_format} runs in its own runtime")
  calibration_texts = None
  if options.calibration_file:
    if (export_format, quantize) != ("onnx", "dynamic"):
      raise ValueError("--quantize_calibration_file calibrates --export_format=onnx "
                       "--quantize=dynamic")
    if model_type == "multiple_choice":
      raise ValueError("--quantize_calibration_file: not for --model_type=multiple_choice "
                       "(its inputs are a text and its choices)")
    if not 0.0 < options.min_cosine <= 1.0:
      raise ValueError(f"--quantize_min_cosine={options.min_cosine} must be in (0, 1]")
    calibration_texts = onnx_quantization.read_texts(options.calibration_file)
  if options.normalize_embeddings and model_type != "encoder":
    raise ValueError("--normalize_embeddings applies to an encoder's mean_pooled_output: use "
                     "--model_type=encoder")
  pooling = options.pooling or "mean"
  if pooling not in sentence_embedding.POOLINGS:
    raise ValueError(f"--pooling={pooling} must be one of "
                     f"{', '.join(sentence_embedding.POOLINGS)}")
  if pooling != "mean" and model_type != "encoder":
    raise ValueError("--pooling applies to an encoder's sentence_embedding: use "
                     "--model_type=encoder")
  # What `_build` writes: the values resolved above, not the ones asked for.
  options = dataclasses.replace(options, num_labels=num_labels, label_names=label_names,
                                classifier_options=classifier_options, pooling=pooling)
  folder_writes.check_writable(export_dir, options.overwrite, "--overwrite")  # before any work
  result = []

  def fill(building):
    result.append(_build(folder, vocab, options, building, head_config, calibration_texts))

  # Built beside the target (or inside an existing folder) and moved in only when complete:
  # a failing export (a bad checkpoint, an interruption) leaves the previous model untouched
  # and no partial one; --overwrite replaces an export's own entries and keeps other files.
  folder_writes.write_folder(export_dir, fill, options.overwrite, owned=export_entries,
                             option="--overwrite")
  return result[0]


def export_entries(directory):
  """The entries of `directory` that belong to an export already there (`export --overwrite`
  replaces them besides the new export's own): a SavedModel's files, the halves of a hub_pair
  that are SavedModels, a TFLite or ONNX file and the vocab.txt written beside it. A name that
  an export could write but that no export there owns (a user's vocab.txt or encoder/, a model
  folder's vocabulary) is kept."""
  listing = {name.rstrip("/") for name in tf.io.gfile.listdir(directory)}
  owned = set()
  if "saved_model.pb" in listing:
    owned.update(SAVED_MODEL_ENTRIES)
  owned.update(name for name in HUB_PAIR_ENTRIES
               if tf.io.gfile.exists(os.path.join(directory, name, "saved_model.pb")))
  file_models = [f.MODEL_FILE for f in FILE_FORMATS.values() if f.MODEL_FILE in listing]
  owned.update(file_models)
  if file_models and not model_files.model_entries(directory):  # else the model's vocabulary
    owned.add(model_files.VOCAB_FILE)
  return sorted(owned & listing)


def check_quantize(export_format, quantize):
  """Raises ValueError for a --export_format or --quantize that is unknown, or a --quantize
  the format does not have."""
  if export_format not in EXPORT_FORMATS:
    raise ValueError(f"--export_format={export_format}: expected one of "
                     f"{', '.join(EXPORT_FORMATS)}")
  modes = FILE_FORMATS[export_format].QUANTIZE_MODES if export_format in FILE_FORMATS else (
      "none",)
  if quantize not in modes:
    raise ValueError(f"--quantize={quantize} is not one of --export_format={export_format}'s: "
                     f"{', '.join(modes)}")


def _write_file_export(export_dir, export_format, content, info, vocab_file, extra):
  """A one-file export: DIR/model.tflite or model.onnx, DIR/vocab.txt (the app tokenizes
  with it) and assets.extra/ (`extra`, with the format's settings in export_info.json)."""
  tfrecord_io.make_dirs(os.path.join(export_dir, "assets.extra"), "--export_dir")
  with tf.io.gfile.GFile(os.path.join(export_dir, FILE_FORMATS[export_format].MODEL_FILE),
                         "wb") as f:
    f.write(content)
  tf.io.gfile.copy(vocab_file, os.path.join(export_dir, model_files.VOCAB_FILE))
  extra = dict(extra)
  extra["export_info.json"] = json.dumps(
      dict(json.loads(extra["export_info.json"]), **{export_format: info}), indent=2) + "\n"
  for name, text in extra.items():
    with tf.io.gfile.GFile(os.path.join(export_dir, "assets.extra", name), "w") as f:
      f.write(text)


def _build(folder, vocab, options, export_dir, head_config=None, calibration_texts=None):
  """Writes the SavedModel(s) of `folder` to `export_dir` (a fresh directory).

  vocab: the folder's vocabulary tokens; options: `export`'s resolved `ExportOptions`;
  calibration_texts: `onnx_quantization.read_texts`' texts or None.
  """
  config, vocab_file, model_type = folder.config, folder.vocab_file, options.model_type
  export_format, max_seq_length = options.export_format, options.max_seq_length
  label_names, pooling = options.label_names, options.pooling
  normalize_embeddings = options.normalize_embeddings
  squad_options, classifier_options = options.squad_options, options.classifier_options
  weights = weights_io.read_weights(folder.path)
  # A masked-LM-only checkpoint (run_pretraining --next_sentence=False) exports without the
  # next-sentence head and outputs.
  next_sentence = not (model_type == "pretraining"
                       and weight_names.is_masked_lm_only(weights.tensors))
  model, _ = weights_io.built_and_assigned(
      lambda: model_types.build_model(model_type, config, options.num_labels, head_config,
                                      next_sentence),
      lambda model: weights_io.assign_weights(model, weights,
                                              require_heads=not options.allow_random_head))
  # Each request's real tokens only, where `model_types.skips_padding` allows.
  encoder = model if model_type == "encoder" else model.encoder
  encoder.skip_padding = model_types.skips_padding(model_type,
                                                   static_shapes=export_format == "tflite")
  encoder.xla_single_sequence = bool(options.xla_single_sequence)
  resolved = weights.source
  if options.allow_random_head:
    logging.warning(
        "--allow_random_head: a head absent from %s is exported with random "
        "weights.", resolved)
  tokenizer = tokenization.TextTokenizer(vocab, lower_case=folder.do_lower_case)
  info = {
      "model_type": model_type,
      "checkpoint": options.source or resolved,
      "max_seq_length": max_seq_length,
      "do_lower_case": bool(folder.do_lower_case),
      "top_k": options.top_k,
      "label_names": label_names,
      "export_format": export_format,
      "head_config": head_config,
      "normalize_embeddings": bool(normalize_embeddings),
      "pooling": pooling if model_type == "encoder" else None,
      "xla_single_sequence": bool(options.xla_single_sequence),
      "squad_options": squad_options if model_type == "squad" else None,
      "classifier_options": (classifier_options._asdict()
                             if model_type == "classifier" and classifier_options else None),
  }
  extra = {
      model_files.CONFIG_FILE: config.to_json_string(),
      "export_info.json": json.dumps(info, indent=2) + "\n"
  }

  answerer = None
  if model_type == "squad" and export_format == "single":
    answerer = squad_answers.SquadAnswerer(model, tokenizer, vocab, max_seq_length,
                                           **(squad_options or {}))
  if export_format != "hub_pair":
    # Padded to each request's longest text; the Hub preprocessor below keeps the fixed
    # length its TF-Hub-style users build on.
    preprocessor = export_signatures.make_preprocessor(tokenizer, vocab, max_seq_length,
                                                       export_signatures.PAD_TO_MULTIPLE)
    module = export_signatures.ServingModule(model,
                                             model_type,
                                             preprocessor,
                                             _display_vocab(vocab, config, vocab_file),
                                             top_k=options.top_k,
                                             label_names=label_names,
                                             normalize_embeddings=normalize_embeddings,
                                             squad_answerer=answerer,
                                             classifier=classifier_options,
                                             pooling=pooling)
    if export_format == "tflite":
      content, file_info = tflite_export.convert(module, model_type, max_seq_length,
                                                 options.quantize)
    elif export_format == "onnx":
      feeds = calibration_texts and onnx_quantization.calibration_inputs(preprocessor,
                                                                          calibration_texts)
      content, file_info = onnx_export.convert(module, model_type, options.quantize, feeds,
                                               options.min_cosine)
    if export_format in FILE_FORMATS:
      _write_file_export(export_dir, export_format, content, file_info, vocab_file, extra)
      return module
    _save(module, export_dir, module.signatures(), vocab_file, extra)
    return module
  hub_pre = export_signatures.HubPreprocessor(
      export_signatures.make_preprocessor(tokenizer, vocab, max_seq_length))
  hub_encoder = export_signatures.HubEncoder(model, normalize_embeddings, pooling)
  _save(hub_pre, os.path.join(export_dir, "preprocessor"), hub_pre.signatures(), vocab_file, extra)
  _save(hub_encoder, os.path.join(export_dir, "encoder"), hub_encoder.signatures(), vocab_file,
        extra)
  return hub_pre, hub_encoder


def run_settings_defaults(folder, given):
  """{flag: value} from the run record (run_settings.json) of `folder` (a
  `model_folder.ModelFolder`), for the flags not `given`: max_seq_length, label_names,
  num_labels, a classifier's problem_type, multi_label_threshold, label_separator and
  doc_stride, a squad model's answer options, an embedder's normalize_embeddings (training's
  values)."""
  stored = folder.record.values()
  defaults = {name: stored.get(name) for name in FROM_RUN_SETTINGS}
  defaults["label_names"] = stored.get("labels")
  if defaults["label_names"]:
    defaults["num_labels"] = None  # implied by the names
  return {k: v for k, v in defaults.items() if v is not None and k not in given}


def trained_settings(folder, model_type, flag_values, given):
  """The export's {flag: value} for `FROM_RUN_SETTINGS` and a classifier's
  `classifier_outputs.Options` (None for other model types).

  `flag_values`: each of those flags' value; `given`: the names set on the command line, which
  win over training's run_settings.json in `folder` (`run_settings_defaults`).
  """
  defaults = run_settings_defaults(folder, given)
  trained = [str(label) for label in (folder.labels or [])]
  names = [str(label) for label in (flag_values.get("label_names") or [])]
  # Renaming is the flag's purpose; the same names in another order serve each as another.
  if "label_names" in given and model_files.is_reordering(trained, names):
    raise ValueError(f"--label_names={','.join(names)}: --checkpoint={folder.path} was trained "
                     f"with these labels in another order, {trained}: each would be served "
                     f"as another. Leave --label_names out (the record's), or give them in "
                     f"that order")
  if model_type != "encoder":  # an embedder's settings: not for its encoder's other uses
    defaults = {k: v for k, v in defaults.items()
                if k not in ("pooling", "normalize_embeddings")}
  if defaults:
    logging.info("From %s beside --checkpoint: %s", model_files.RUN_SETTINGS_FILE, defaults)
  value = {name: defaults.get(name, flag_values[name]) for name in FROM_RUN_SETTINGS}
  if "max_seq_length" not in set(given) | set(defaults) and folder.config is not None:
    embedding = (model_folder.embedding_sequence_length(folder.path, folder.config)
                 if model_type == "encoder" else None)  # a sentence-transformers folder's
    value["max_seq_length"] = embedding or model_folder.default_sequence_length(
        folder.config, value["max_seq_length"])
  if model_type != "classifier":
    return value, None
  # --doc_stride's default (128) is squad's: a classifier windows only when asked or trained so.
  doc_stride = value["doc_stride"] if "doc_stride" in set(given) | set(defaults) else 0
  problem_type = classifier_outputs.problem_type_of(value["problem_type"], value["num_labels"],
                                                   value["label_names"])
  threshold = value["multi_label_threshold"]
  threshold = 0.5 if threshold is None else threshold
  classifier_outputs.check_threshold(threshold, "--multi_label_threshold" if (
      "multi_label_threshold" in set(given)) else
      f"{model_files.RUN_SETTINGS_FILE}'s multi_label_threshold")
  return value, classifier_outputs.Options(problem_type, threshold,
                                           value["label_separator"] or ",", doc_stride or 0)
