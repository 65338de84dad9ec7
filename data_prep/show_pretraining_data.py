r"""Prints what pretraining TFRecords hold: counts, statistics and a few decoded instances.

Masked records (the default) and unmasked ones (`create_pretraining_data --masking=none`,
shown with their words grouped by `word_starts`) alike; the kind is read from the files.

  python -m data_prep.show_pretraining_data --input_file='out/pretrain.tfrecord*' \
    --vocab_file=vocab.txt --max_seq_length=128 --max_predictions_per_seq=20
"""

from absl import flags

from data_prep import cli
from data_prep.pretraining import records_view

FLAGS = flags.FLAGS


def define_flags():
  """Called only when run as a program (see `data_prep.cli`)."""
  flags.DEFINE_string("input_file", None, "TFRecord file(s): comma-separated, globs allowed.")
  flags.DEFINE_string("vocab_file", None, "The vocabulary the files were written with.")
  flags.DEFINE_integer("max_seq_length", 128, "Sequence length of the files.")
  flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked positions per sequence.")
  flags.DEFINE_integer("num_examples", 2, "Instances to print decoded.")


def main(argv):
  del argv  # no positional arguments (`cli.launch` checks)
  print("\n".join(records_view.report(FLAGS.input_file, FLAGS.vocab_file, FLAGS.max_seq_length,
                                        FLAGS.max_predictions_per_seq, FLAGS.num_examples)))


def console_main():
  """The `bert-show-pretraining-data` command (pyproject.toml's [project.scripts])."""
  define_flags()
  cli.launch(main, required_flags=("input_file", "vocab_file"))


if __name__ == "__main__":
  console_main()
