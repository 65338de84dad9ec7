r"""Learn a BERT WordPiece vocabulary from a corpus.

  python -m data_prep.learn_vocab --input_file=corpus/*.txt --output_file=vocab.txt \
    --vocab_size=8000 --do_lower_case=True [--min_count=2]

Words are counted with the original BasicTokenizer's rules, tensorflow-text's WordPiece
learner picks the pieces, and [PAD] [UNK] [CLS] [SEP] [MASK] come first (ids 0-4); how, step
by step: `data_prep/vocab/learn.py`. The output is deterministic for the same input and flags;
it is written atomically.
"""

from absl import flags

from data_prep import cli
from data_prep.vocab import learn

FLAGS = flags.FLAGS


def define_flags():
  """Called only when run as a program (see `data_prep.cli`)."""
  flags.DEFINE_string("input_file", None, "Corpus file(s): comma-separated, globs allowed.")
  flags.DEFINE_string("output_file", None, "Where to write the vocab (one token per line).")
  flags.DEFINE_integer("vocab_size", 8000, "Maximum vocab size, reserved tokens included.")
  flags.DEFINE_bool("do_lower_case", True, "Lower-case and strip accents (uncased models).")
  flags.DEFINE_integer("min_count", 2, "Words seen fewer times are not learner input.")
  flags.DEFINE_integer("min_char_count", 2, "Characters seen this often get c and ##c tokens.")
  flags.DEFINE_integer("max_unique_chars", 1000, "At most this many characters get tokens.")
  flags.DEFINE_integer("max_input_tokens", 100_000,
                       "The learner sees at most this many distinct words (the most frequent).")


def main(argv):
  del argv  # no positional arguments (`cli.launch` checks)
  learn.learn_and_write(FLAGS.input_file, FLAGS.output_file, FLAGS.vocab_size,
                        FLAGS.do_lower_case, min_count=FLAGS.min_count,
                        min_char_count=FLAGS.min_char_count,
                        max_unique_chars=FLAGS.max_unique_chars,
                        max_input_tokens=FLAGS.max_input_tokens)


def console_main():
  """The `bert-learn-vocab` command (pyproject.toml's [project.scripts])."""
  define_flags()
  cli.launch(main, required_flags=("input_file", "output_file"))


if __name__ == "__main__":
  console_main()
