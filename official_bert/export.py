r"""Exports a BERT model as a SavedModel that serves raw text (TensorFlow Serving, tf.saved_model).

  python -m official_bert.export --bert_config_file=FILE --checkpoint=PATH --vocab_file=FILE \
    --do_lower_case=BOOL --model_type=encoder|pretraining|classifier|squad|tagger|feature_tagger \
    --export_dir=DIR [--max_seq_length=128] [--num_labels=N] [--label_names=a,b,c] \
    [--export_format=single|hub_pair|tflite|onnx] [--quantize=none|dynamic|float16] \
    [--top_k=5] [--normalize_embeddings] [--pooling=mean|cls|pooled] [--xla_single_sequence]
  python -m official_bert.export --checkpoint=HF_MODEL_DIR --model_type=encoder --export_dir=DIR
  python -m official_bert.export --checkpoint=OUTPUT_DIR --export_dir=DIR   (a trained folder)

--checkpoint is ours, a google-research TF1 checkpoint (prefix or directory) or a Hugging Face
model. The folder (`interop.model_folder`) brings its config, vocabulary and case, so
--bert_config_file, --vocab_file and --do_lower_case may be left out; a trained folder's run
record (a run_* OUTPUT_DIR, a folder the Python API saved) brings --model_type and the flags
not given (max_seq_length, labels, a classifier's settings). single: one SavedModel
(`serving_default`, `serving_pair`, `serve_ids`); hub_pair:
DIR/preprocessor and DIR/encoder; tflite: DIR/model.tflite; onnx: DIR/model.onnx (both the
serve_ids graph, with DIR/vocab.txt). `--normalize_embeddings` makes an
encoder's mean_pooled_output and sentence_embedding unit length (sentence-transformers
models); `--pooling` picks sentence_embedding's pooling (a run_embeddings OUTPUT_DIR brings
both). The work is `serving.exporter`'s.
"""

from absl import flags

from data_prep import cli
from official_bert.interop import model_folder
from official_bert.modeling import model_types
from official_bert.modeling import sentence_embedding
from official_bert.serving import classifier_outputs
from official_bert.serving import exporter


def define_flags():
  """Defines the flags; called only when run as a program, so importing this module
  (tests, other tools) never clashes with flags of the same name elsewhere."""
  flags.DEFINE_string("bert_config_file", None,
                      "bert_config.json of the model (default: an HF --checkpoint's config.json).")
  flags.DEFINE_string("checkpoint", None,
                      "Checkpoint: ours or TF1 (prefix or directory), or an HF model.")
  flags.DEFINE_string("vocab_file", None, "The vocabulary the model was trained with (default: "
                      "an HF --checkpoint's vocab.txt).")
  flags.DEFINE_bool("do_lower_case", True, "Lower-case input (uncased models). Default: the "
                    "--checkpoint folder's (tokenizer_config.json, run record, vocabulary).")
  flags.DEFINE_bool("allow_case_mismatch", False, "Export with a --do_lower_case that "
                    "contradicts the model folder.")
  flags.DEFINE_enum("model_type", None, list(model_types.MODEL_TYPES), "What to export. "
                    "Default: the model type --checkpoint's run record names.")
  flags.DEFINE_string("export_dir", None, "Output directory (e.g. models/bert/1 for Serving).")
  flags.DEFINE_integer(
      "max_seq_length", 128, "Text signatures pad/truncate to this length. Not given: the run "
      "record's, else a sentence-transformers folder's (sentence_bert_config.json), else 128 "
      "or the model's max_position_embeddings where that is fewer.")
  flags.DEFINE_integer("num_labels", None, "Labels of a classifier/tagger head.")
  flags.DEFINE_list("label_names", None, "Label strings in id order (classifier, tagger); "
                    "default: the labels.txt beside --checkpoint, if any.")
  flags.DEFINE_enum("export_format", "single", list(exporter.EXPORT_FORMATS),
                    "One SavedModel, a TF-Hub-style preprocessor + encoder pair, or a "
                    "TensorFlow Lite or ONNX model of serve_ids.")
  flags.DEFINE_enum("quantize", "none", list(exporter.QUANTIZE_MODES),
                    "tflite, onnx: float32 weights, or int8 weights (dynamic range: "
                    "activations quantized on the fly); tflite also float16 weights.")
  flags.DEFINE_string("quantize_calibration_file", None,
                      "onnx, --quantize=dynamic: sample texts (one per line; a tab between a "
                      "pair's two): the export keeps float32 the fewest MatMuls that bring "
                      "every text's outputs to --quantize_min_cosine (default: all int8).")
  flags.DEFINE_float("quantize_min_cosine", 0.99, "With --quantize_calibration_file: the "
                     "least cosine of a text's int8 outputs to its float32 ones.")
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
                    "encoder: L2-normalize mean_pooled_output and sentence_embedding "
                    "(sentence-transformers models).")
  flags.DEFINE_enum("pooling", "mean", list(sentence_embedding.POOLINGS),
                    "encoder: how sentence_embedding pools the tokens (default: a "
                    "run_embeddings model's own, else mean).")
  flags.DEFINE_bool("xla_single_sequence", False,
                    "single, hub_pair: a request of one text (batch 1) runs XLA-compiled, "
                    "~15% lower latency on a CPU; serving then needs XLA (TensorFlow Serving: "
                    "--xla_cpu_compilation_enabled=true). Other batches as without.")


FLAGS = flags.FLAGS


def main(argv):
  del argv
  # None unless given: an HF --checkpoint's tokenizer_config.json decides.
  do_lower_case = FLAGS.do_lower_case if FLAGS["do_lower_case"].present else None
  # Read once (a missing --checkpoint is named here): its config, vocabulary, case, labels
  # and run record serve the model type, training's settings and the export alike.
  folder = model_folder.read(FLAGS.checkpoint, FLAGS.bert_config_file, FLAGS.vocab_file,
                             do_lower_case, FLAGS.allow_case_mismatch)
  model_type = exporter.model_type_of(folder, FLAGS.model_type)
  value, classifier_options = exporter.trained_settings(
      folder, model_type,
      {name: FLAGS[name].value for name in exporter.FROM_RUN_SETTINGS},
      {name for name in exporter.FROM_RUN_SETTINGS if FLAGS[name].present})
  options = exporter.ExportOptions(
      model_type, max_seq_length=value["max_seq_length"], num_labels=value["num_labels"],
      label_names=value["label_names"], export_format=FLAGS.export_format, top_k=FLAGS.top_k,
      allow_random_head=FLAGS.allow_random_head, overwrite=FLAGS.overwrite,
      head_config_file=FLAGS.head_config_file,
      normalize_embeddings=value["normalize_embeddings"],
      squad_options={name: value[name] for name in exporter.SQUAD_FLAGS},
      quantize=FLAGS.quantize, classifier_options=classifier_options, pooling=value["pooling"],
      calibration_file=FLAGS.quantize_calibration_file, min_cosine=FLAGS.quantize_min_cosine,
      xla_single_sequence=FLAGS.xla_single_sequence)
  exporter.export(folder, FLAGS.export_dir, options)
  print(f"Exported {model_type} ({FLAGS.export_format}) to {FLAGS.export_dir}")


def console_main():
  """The `bert-export` command (pyproject.toml's [project.scripts])."""
  define_flags()
  cli.launch(main,
             # --bert_config_file, --vocab_file, --model_type: unless the folder says.
             required_flags=("checkpoint", "export_dir"))


if __name__ == "__main__":
  console_main()
