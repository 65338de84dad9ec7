r"""Converts BERT weights between google-research TF1 checkpoints, Hugging Face and ours.

  python -m official_bert.convert_checkpoint --input=PATH --input_format=tf1|hf|ours \
    --output=PATH --output_format=tf1|hf|ours [--bert_config_file=FILE] \
    [--model_type=pretraining|encoder|classifier|squad|tagger|multiple_choice|feature_tagger]
    [--num_labels=N]

Paths:
  tf1   a checkpoint prefix (`DIR/bert_model.ckpt`) or a directory (its latest checkpoint);
        as output, a directory gets `DIR/bert_model.ckpt`.
  ours  a prefix or a directory (as written by run_pretraining; latest checkpoint); as output,
        a directory gets `DIR/ckpt-0`.
  hf    a `.safetensors` file or a directory holding `model.safetensors` + `config.json`; as
        output, a directory gets both.

Every conversion goes through our Keras model, so the weights are checked against the config
on the way: a missing or mis-shaped tensor stops with a message listing names and shapes, an
extra one is listed in a warning. `bert_config.json` (our format: `"gelu"` is the original's
tanh approximation, `"gelu_exact"` the erf form that HF calls `"gelu"`) is written next to
every output, and HF's `config.json` next to an HF output. A `vocab.txt` next to the input is
copied along, with its stated case (`tokenizer_config.json`); a trained folder's run record and
labels come too when the output keeps its head, so the output exports with no other flag. TF1
optimizer slots (`adam_m`, `adam_v`) and `global_step` are ignored.

The output folder is written when complete. A folder that holds files already (the input's
own too) is refused unless --overwrite; then its model is replaced and its other files kept.
"""

from absl import flags

from data_prep import cli
from official_bert.interop import conversion
from official_bert.modeling import model_types


def define_flags():
  """Defines the flags; called only when run as a program, so importing this module
  (tests, other tools) never clashes with flags of the same name elsewhere."""
  flags.DEFINE_string("input", None, "Input checkpoint (see the module doc for each format).")
  flags.DEFINE_enum("input_format", None, conversion.FORMATS, "Format of --input.")
  flags.DEFINE_string("output", None, "Where to write the converted weights.")
  flags.DEFINE_enum("output_format", None, conversion.FORMATS, "Format of --output.")
  flags.DEFINE_string(
      "bert_config_file", None,
      "bert_config.json of the model (our format). Default: bert_config.json "
      "next to --input, or HF config.json for --input_format=hf.")
  flags.DEFINE_enum(
      "model_type", None, list(model_types.MODEL_TYPES),
      "Which weights to convert. Default: inferred from the input's names "
      "(pretraining when it has cls/predictions, else encoder, ...).")
  flags.DEFINE_integer("num_labels", None,
                       "Labels of a classifier/tagger head (default: read from the input).")
  flags.DEFINE_string(
      "hf_prefix", None, "Prefix of the bert/* tensors in an HF output, e.g. 'bert.' "
      "(default: the HF input's, else 'bert.' for pretraining, '' for encoder).")
  flags.DEFINE_bool(
      "overwrite", False, "Replace the model in a non-empty --output folder (its weights, "
      "config, vocabulary, record); the folder's other files are kept. Without it such a "
      "folder is refused and nothing is written.")


FLAGS = flags.FLAGS


def main(argv):
  del argv
  model_type, written = conversion.convert(FLAGS.input, FLAGS.input_format, FLAGS.output,
                                           FLAGS.output_format, FLAGS.bert_config_file,
                                           FLAGS.model_type, FLAGS.num_labels, FLAGS.hf_prefix,
                                           FLAGS.overwrite)
  print(f"Wrote {model_type} weights ({FLAGS.output_format}) to {written}")


def console_main():
  """The `bert-convert-checkpoint` command (pyproject.toml's [project.scripts])."""
  define_flags()
  cli.launch(main, required_flags=("input", "input_format", "output", "output_format"))


if __name__ == "__main__":
  console_main()
