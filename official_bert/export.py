r"""Exports a BERT model as a SavedModel that serves raw text (TensorFlow Serving, tf.saved_model).

  python -m official_bert.export --bert_config_file=FILE --checkpoint=PATH --vocab_file=FILE \
    --do_lower_case=BOOL --model_type=encoder|pretraining|classifier|squad|tagger|feature_tagger \
    --export_dir=DIR [--max_seq_length=128] [--num_labels=N] [--label_names=a,b,c] \
    [--export_format=single|hub_pair|tflite] [--quantize=none|dynamic|float16] [--top_k=5] \
    [--normalize_embeddings]
  python -m official_bert.export --checkpoint=HF_MODEL_DIR --model_type=encoder --export_dir=DIR

--checkpoint is ours, a google-research TF1 checkpoint (prefix or directory) or a Hugging Face
model (`weights_io`). A Hugging Face folder brings its config.json, vocab.txt and
tokenizer_config.json's do_lower_case: --bert_config_file and --vocab_file may then be left
out, and --do_lower_case defaults to the folder's (as the fine-tuning scripts'
--init_checkpoint). Every variable of the exported model must be in it: a classifier/squad/
tagger head missing from the file is an error (`--allow_random_head` exports a random head
anyway, for tests only).

single (default): one SavedModel with signatures `serving_default` (text), `serving_pair`
(text, text_b) and `serve_ids` (input_word_ids, input_mask, input_type_ids); outputs in
`export_signatures`. hub_pair (--model_type=encoder): like the Model Garden's export_tfhub,
DIR/preprocessor (text -> input_word_ids, input_mask, input_type_ids) and DIR/encoder (those
-> pooled_output, sequence_output, encoder_outputs, mean_pooled_output). tflite: DIR/model.tflite,
the `serve_ids` signature at seq --max_seq_length for on-device use, float32 or --quantize'd
(`serving.tflite_export`), with DIR/vocab.txt and DIR/assets.extra/.

An encoder also returns `mean_pooled_output`, a sentence embedding (the mean over the real
tokens); `--normalize_embeddings` makes it unit length, as sentence-transformers models
(all-MiniLM-L6-v2, ...) are used: cosine similarity is then a dot product.

Loading needs tensorflow-text's ops registered (`import tensorflow_text`; TensorFlow Serving
builds include them); nothing from this repository. The vocabulary is saved in `assets/`,
the config and export settings in `assets.extra/`.
"""

import contextlib
import json
import os

from absl import flags
from absl import logging
import tensorflow as tf

from data_prep import cli
from data_prep import tfrecord_io
from data_prep import tokenization
from official_bert.interop import hf_weights
from official_bert.interop import weight_names
from official_bert.interop import weights_io
from official_bert.modeling import model_types
from official_bert.modeling.bert_config import BertConfig
from official_bert.serving import classifier_outputs
from official_bert.serving import signatures as export_signatures
from official_bert.serving import squad_answers
from official_bert.serving import tflite_export


def define_flags():
  """Defines the flags; called only when run as a program, so importing this module
  (tests, other tools) never clashes with flags of the same name elsewhere."""
  flags.DEFINE_string("bert_config_file", None,
                      "bert_config.json of the model (default: an HF --checkpoint's config.json).")
  flags.DEFINE_string("checkpoint", None,
                      "Checkpoint: ours or TF1 (prefix or directory), or an HF model.")
  flags.DEFINE_string("vocab_file", None, "The vocabulary the model was trained with (default: "
                      "an HF --checkpoint's vocab.txt).")
  flags.DEFINE_bool("do_lower_case", True, "Lower-case input (uncased models). Default: an HF "
                    "--checkpoint's tokenizer_config.json, else True.")
  flags.DEFINE_enum("model_type", None, list(model_types.MODEL_TYPES), "What to export.")
  flags.DEFINE_string("export_dir", None, "Output directory (e.g. models/bert/1 for Serving).")
  flags.DEFINE_integer("max_seq_length", 128, "Text signatures pad/truncate to this length.")
  flags.DEFINE_integer("num_labels", None, "Labels of a classifier/tagger head.")
  flags.DEFINE_list("label_names", None, "Label strings in id order (classifier, tagger); "
                    "default: the labels.txt beside --checkpoint, if any.")
  flags.DEFINE_enum("export_format", "single", ["single", "hub_pair", "tflite"],
                    "One SavedModel, a TF-Hub-style preprocessor + encoder pair, or a "
                    "TensorFlow Lite model of serve_ids.")
  flags.DEFINE_enum("quantize", "none", list(tflite_export.QUANTIZE_MODES),
                    "tflite: float32 weights, int8 (dynamic range) or float16 weights.")
  flags.DEFINE_integer("top_k", 5, "Predictions per [MASK] (pretraining).")
  flags.DEFINE_bool("allow_random_head", False,
                    "Export even if the checkpoint lacks the head (random head; tests only).")
  flags.DEFINE_bool("overwrite", False, "Replace an existing --export_dir.")
  flags.DEFINE_string("head_config_file", None,
                      "feature_tagger: the head's head_config.json (default: the one beside "
                      "--checkpoint, written by run_ner --feature_based).")
  flags.DEFINE_integer("doc_stride", 128, "squad: context pieces between window starts. "
                       "classifier: classify texts longer than --max_seq_length in windows "
                       "starting every N pieces (default: run_classifier's --doc_stride from "
                       "run_settings.json beside --checkpoint, else off).")
  flags.DEFINE_enum("problem_type", None, list(classifier_outputs.PROBLEM_TYPES),
                    "classifier: single_label (softmax), multi_label (sigmoid + threshold) or "
                    "regression. Default: run_settings.json beside --checkpoint, else "
                    "single_label (regression with --num_labels=1).")
  flags.DEFINE_float("multi_label_threshold", None, "classifier, multi_label: a label is "
                     "predicted when its probability is above this (default: training's, else "
                     "0.5).")
  flags.DEFINE_string("label_separator", None, "classifier, multi_label: joins the predicted "
                      "labels in predicted_labels (default: training's, else ',').")
  flags.DEFINE_integer("max_query_length", 64, "squad: question pieces kept.")
  flags.DEFINE_integer("n_best_size", 20, "squad: answers in the n-best (and candidates per "
                       "window end).")
  flags.DEFINE_integer("max_answer_length", 30, "squad: the longest answer, in pieces.")
  flags.DEFINE_bool("version_2_with_negative", False,
                    "squad: a SQuAD 2.0 model (may answer nothing).")
  flags.DEFINE_float("null_score_diff_threshold", 0.0,
                     "squad v2.0: answer nothing when null score - best span > this.")
  flags.DEFINE_bool("normalize_embeddings", False,
                    "encoder: L2-normalize mean_pooled_output (sentence-transformers models).")


FLAGS = flags.FLAGS
_SQUAD_FLAGS = ("doc_stride", "max_query_length", "n_best_size", "max_answer_length",
                "version_2_with_negative", "null_score_diff_threshold")


def _display_vocab(vocab, vocab_size, vocab_file):
  """The token list, one entry per model id (some checkpoints pad the vocabulary)."""
  if len(vocab) > vocab_size:
    raise ValueError(f"{vocab_file} has {len(vocab)} tokens but the model's vocab_size is "
                     f"{vocab_size}")
  if len(vocab) < vocab_size:
    logging.warning("%s has %d tokens, the model %d ids: the extra ids show as [id N].", vocab_file,
                    len(vocab), vocab_size)
  return list(vocab) + [f"[id {i}]" for i in range(len(vocab), vocab_size)]


def resolve_model_files(bert_config_file, checkpoint, vocab_file, do_lower_case):
  """(BertConfig, vocabulary file, do_lower_case) of the export.

  The flags where given, else the files beside `checkpoint` (`weights_io.model_files`): a
  Hugging Face folder's (config.json, vocab.txt, tokenizer_config.json's do_lower_case), or
  a fine-tuning OUTPUT_DIR's (or its best/: bert_config.json, vocab.txt,
  tokenizer_config.json, written by `training.model_dir`), read as the fine-tuning scripts
  read --init_checkpoint, so either exports in one command. `do_lower_case` None: the
  folder's, else True (the flag's default).
  """
  files = weights_io.model_files(checkpoint)
  hf = files if weights_io.is_hf_model(checkpoint) else None
  if not bert_config_file and files.bert_config:
    bert_config_file = files.bert_config  # ours beside the checkpoint (a fine-tuning output)
  if not vocab_file and files.vocab and files.bert_config:
    vocab_file = files.vocab
  if hf is None and files.bert_config:
    hf = files  # its tokenizer_config.json's do_lower_case, as an HF folder's
  if bert_config_file:
    config = BertConfig.from_json_file(bert_config_file)
  elif hf and hf.hf_config:
    config = hf_weights.load_hf_config(hf.hf_config)
  elif hf:
    raise ValueError(f"--bert_config_file is required: the Hugging Face model at "
                     f"--checkpoint={checkpoint} has no config.json")
  else:
    raise ValueError(f"--bert_config_file is required: --checkpoint={checkpoint} has no "
                     "bert_config.json beside it and is not a Hugging Face model folder "
                     "(whose config.json would do)")
  if not vocab_file:
    if not (hf and hf.vocab):
      raise ValueError(f"--vocab_file is required: --checkpoint={checkpoint} is not a Hugging "
                       f"Face model folder or a fine-tuning output with a vocab.txt")
    vocab_file = hf.vocab
  if do_lower_case is None:
    do_lower_case = True if hf is None or hf.do_lower_case is None else bool(hf.do_lower_case)
  logging.info("Config %s, vocabulary %s, do_lower_case=%s",
               bert_config_file or hf.hf_config, vocab_file, do_lower_case)
  return config, vocab_file, do_lower_case


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


def export(bert_config_file,
           checkpoint,
           vocab_file,
           do_lower_case,
           model_type,
           export_dir,
           max_seq_length=128,
           num_labels=None,
           label_names=None,
           export_format="single",
           top_k=5,
           allow_random_head=False,
           overwrite=False,
           head_config_file=None,
           normalize_embeddings=False,
           squad_options=None,
           quantize="none",
           classifier_options=None):
  """Writes the SavedModel(s); returns the exported tf.Module(s) (for in-process checks).

  `bert_config_file`, `vocab_file` and `do_lower_case` may be None for a Hugging Face
  `checkpoint` (`resolve_model_files`). `squad_options`: `squad_answers.SquadAnswerer`'s
  keyword arguments (doc_stride, max_query_length, n_best_size, ...) for a squad export.
  `classifier_options`: a `classifier_outputs.Options` for a classifier export.
  """
  config, vocab_file, do_lower_case = resolve_model_files(bert_config_file, checkpoint,
                                                          vocab_file, do_lower_case)
  head_config = None
  if model_type == "feature_tagger":
    head_config_file = head_config_file or model_types.head_config_beside(checkpoint)
    if not head_config_file:
      raise ValueError(f"--model_type=feature_tagger: no {model_types.HEAD_CONFIG_FILE} "
                       f"beside --checkpoint={checkpoint}; pass --head_config_file")
    head_config = model_types.read_head_config(head_config_file)
  vocab = tokenization.load_vocab_tokens(vocab_file)
  if not 3 <= max_seq_length <= config.max_position_embeddings:
    raise ValueError(f"--max_seq_length={max_seq_length} must be in [3, "
                     f"max_position_embeddings={config.max_position_embeddings}]")
  if not label_names and not num_labels and model_type in model_types.NEEDS_NUM_LABELS:
    # A fine-tuning run's labels.txt: served outputs carry label strings (flags win).
    label_names = model_types.labels_beside(checkpoint)
  if label_names:
    if num_labels and num_labels != len(label_names):
      raise ValueError(f"--num_labels={num_labels} but {len(label_names)} --label_names")
    num_labels = len(label_names)
  classifier_options = classifier_options or classifier_outputs.Options()
  if model_type == "classifier":
    classifier_outputs.check_problem_type(classifier_options.problem_type, num_labels)
    if classifier_options.doc_stride < 0:
      raise ValueError(f"--doc_stride={classifier_options.doc_stride} must be >= 0")
    if classifier_options.problem_type == "regression":
      num_labels = num_labels or 1
  if export_format == "hub_pair" and model_type != "encoder":
    raise ValueError("--export_format=hub_pair exports an encoder: use --model_type=encoder")
  tflite_export.check_options(export_format, quantize)
  if normalize_embeddings and model_type != "encoder":
    raise ValueError("--normalize_embeddings applies to an encoder's mean_pooled_output: use "
                     "--model_type=encoder")
  tfrecord_io.make_dirs(os.path.dirname(export_dir.rstrip("/")), "the parent of --export_dir")
  if tf.io.gfile.exists(export_dir) and not tf.io.gfile.isdir(export_dir):
    raise ValueError(f"--export_dir={export_dir} is a file")
  replacing = tf.io.gfile.exists(export_dir) and bool(tf.io.gfile.listdir(export_dir))
  if replacing and not overwrite:
    raise ValueError(f"{export_dir} exists and is not empty (pass --overwrite)")
  # Built beside the target and swapped in only when complete: a failing export (a bad
  # checkpoint, an interruption) leaves the previous model untouched and no partial one.
  building = _sibling(export_dir, "tmp")
  try:
    result = _build(config, vocab, checkpoint, vocab_file, do_lower_case, model_type, building,
                    max_seq_length, num_labels, label_names, export_format, top_k,
                    allow_random_head, head_config, normalize_embeddings, squad_options,
                    quantize, classifier_options)
  except BaseException:
    if tf.io.gfile.exists(building):
      tf.io.gfile.rmtree(building)
    raise
  _swap_in(building, export_dir, replacing)
  return result


def _sibling(path, kind):
  path = path.rstrip("/")
  parent, name = os.path.split(path)
  return os.path.join(parent, f".{name}.{kind}-{os.getpid()}")


def _swap_in(building, export_dir, replacing):
  """Puts the finished export at `export_dir`; the old one is removed only after that."""
  old = _sibling(export_dir, "old") if replacing else None
  if old:
    tf.io.gfile.rename(export_dir, old)
  elif tf.io.gfile.exists(export_dir):  # an empty directory
    tf.io.gfile.rmtree(export_dir)
  tf.io.gfile.rename(building, export_dir)
  if old:
    tf.io.gfile.rmtree(old)


def _build(config, vocab, checkpoint, vocab_file, do_lower_case, model_type, export_dir,
           max_seq_length, num_labels, label_names, export_format, top_k, allow_random_head,
           head_config=None, normalize_embeddings=False, squad_options=None, quantize="none",
           classifier_options=None):
  """Writes the SavedModel(s) to `export_dir` (a fresh directory)."""
  weights = weights_io.read_weights(checkpoint)
  # A masked-LM-only checkpoint (run_pretraining --next_sentence=False) exports without the
  # next-sentence head and outputs.
  next_sentence = not (model_type == "pretraining"
                       and weight_names.is_masked_lm_only(weights.tensors))
  model = model_types.build_model(model_type, config, num_labels, head_config, next_sentence)
  weights_io.assign_weights(model, weights, require_heads=not allow_random_head)
  resolved = weights.source
  if allow_random_head:
    logging.warning(
        "--allow_random_head: a head absent from %s is exported with random "
        "weights.", resolved)
  tokenizer = tokenization.TextTokenizer(vocab, lower_case=do_lower_case)
  preprocessor = export_signatures.make_preprocessor(tokenizer, vocab, max_seq_length)
  info = {
      "model_type": model_type,
      "checkpoint": resolved,
      "max_seq_length": max_seq_length,
      "do_lower_case": bool(do_lower_case),
      "top_k": top_k,
      "label_names": label_names,
      "export_format": export_format,
      "head_config": head_config,
      "normalize_embeddings": bool(normalize_embeddings),
      "squad_options": squad_options if model_type == "squad" else None,
      "classifier_options": (classifier_options._asdict()
                             if model_type == "classifier" and classifier_options else None),
  }
  extra = {
      "bert_config.json": config.to_json_string(),
      "export_info.json": json.dumps(info, indent=2) + "\n"
  }

  answerer = None
  if model_type == "squad" and export_format == "single":
    answerer = squad_answers.SquadAnswerer(model, tokenizer, vocab, max_seq_length,
                                           **(squad_options or {}))
  if export_format in ("single", "tflite"):
    module = export_signatures.ServingModule(model,
                                             model_type,
                                             preprocessor,
                                             _display_vocab(vocab, config.vocab_size, vocab_file),
                                             top_k=top_k,
                                             label_names=label_names,
                                             normalize_embeddings=normalize_embeddings,
                                             squad_answerer=answerer,
                                             classifier=classifier_options)
    if export_format == "tflite":
      tflite_export.write(module, model_type, export_dir, max_seq_length, quantize, vocab_file,
                          extra)
      return module
    _save(module, export_dir, module.signatures(), vocab_file, extra)
    return module
  hub_pre = export_signatures.HubPreprocessor(preprocessor)
  hub_encoder = export_signatures.HubEncoder(model, normalize_embeddings)
  _save(hub_pre, os.path.join(export_dir, "preprocessor"), hub_pre.signatures(), vocab_file, extra)
  _save(hub_encoder, os.path.join(export_dir, "encoder"), hub_encoder.signatures(), vocab_file,
        extra)
  return hub_pre, hub_encoder


_FROM_RUN_SETTINGS = ("max_seq_length", "label_names", "num_labels", "problem_type",
                      "multi_label_threshold", "label_separator", "doc_stride")


def run_settings_defaults(checkpoint, given):
  """{flag: value} from a fine-tuning output's run_settings.json beside `checkpoint`, for
  the flags not `given`: max_seq_length, label_names, num_labels and a classifier's
  problem_type, multi_label_threshold, label_separator and doc_stride (training's values)."""
  stored = weights_io.model_files(checkpoint).run_settings or {}
  defaults = {name: stored.get(name) for name in _FROM_RUN_SETTINGS}
  defaults["label_names"] = stored.get("labels")
  if defaults["label_names"]:
    defaults["num_labels"] = None  # implied by the names
  return {k: v for k, v in defaults.items() if v is not None and k not in given}


def main(argv):
  del argv
  # None unless given: an HF --checkpoint's tokenizer_config.json decides.
  do_lower_case = FLAGS.do_lower_case if FLAGS["do_lower_case"].present else None
  given = {name for name in _FROM_RUN_SETTINGS if FLAGS[name].present}
  defaults = run_settings_defaults(FLAGS.checkpoint, given)
  if defaults:
    logging.info("From %s beside --checkpoint: %s", weights_io.RUN_SETTINGS_FILE, defaults)
  value = {name: defaults.get(name, FLAGS[name].value) for name in _FROM_RUN_SETTINGS}
  classifier_options = None
  if FLAGS.model_type == "classifier":
    # --doc_stride's default (128) is squad's: a classifier windows only when asked or trained so.
    doc_stride = value["doc_stride"] if "doc_stride" in given | set(defaults) else 0
    problem_type = value["problem_type"] or (
        "regression" if value["num_labels"] == 1 and not value["label_names"] else "single_label")
    classifier_options = classifier_outputs.Options(
        problem_type, 0.5 if value["multi_label_threshold"] is None
        else value["multi_label_threshold"], value["label_separator"] or ",", doc_stride or 0)
  export(FLAGS.bert_config_file, FLAGS.checkpoint, FLAGS.vocab_file, do_lower_case,
         FLAGS.model_type, FLAGS.export_dir, value["max_seq_length"], value["num_labels"],
         value["label_names"], FLAGS.export_format, FLAGS.top_k, FLAGS.allow_random_head,
         FLAGS.overwrite, FLAGS.head_config_file, FLAGS.normalize_embeddings,
         {name: FLAGS[name].value for name in _SQUAD_FLAGS}, FLAGS.quantize, classifier_options)
  print(f"Exported {FLAGS.model_type} ({FLAGS.export_format}) to {FLAGS.export_dir}")


def console_main():
  """The `bert-export` command (pyproject.toml's [project.scripts])."""
  define_flags()
  cli.launch(main,
             # --bert_config_file and --vocab_file: unless in an HF --checkpoint.
             required_flags=("checkpoint", "model_type", "export_dir"))


if __name__ == "__main__":
  console_main()
