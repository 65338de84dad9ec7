r"""Put a corpus's own frequent words into a released vocabulary's `[unusedN]` slots.

  python -m data_prep.extend_vocab --vocab_file=uncased_L-12_H-768_A-12/vocab.txt \
    --input_file='corpus/*.txt' --num_new_tokens=500 --output_file=domain_vocab.txt \
    [--do_lower_case=True] [--min_count=2]

google-research/bert reserves ~1000 `[unusedN]` lines in its vocabularies for this (their
#9, #396). Only those lines change: the line count and every other line stay byte for byte,
so a released checkpoint loads with the new file as it is (same vocab_size, same ids), and
the new words' embedding rows (trained never, so far) learn from further pretraining.

1. Whole words are counted over the corpus (streamed, through tf.io.gfile) with the
   tokenizer's own pre-tokenizer (the original BasicTokenizer's words, lower-cased and
   accent-stripped with --do_lower_case), i.e. exactly what WordPiece later looks up.
2. Candidates are the words the vocabulary splits into more than one piece, or maps to
   [UNK], seen at least --min_count times; the most frequent ones (ties by word) fill the
   `[unusedN]` slots in file order.
3. WordPiece is greedy longest-match-first, so a whole-word entry is always chosen over its
   pieces: the new words become one token each. The tool re-tokenizes the corpus's words
   with both vocabularies and reports the token counts before and after.
"""

from absl import flags

from data_prep import cli
from data_prep.vocab import extend

FLAGS = flags.FLAGS


def define_flags():
  """Called only when run as a program (see `data_prep.cli`)."""
  flags.DEFINE_string("vocab_file", None, "The WordPiece vocabulary with [unusedN] entries.")
  flags.DEFINE_string("input_file", None, "Corpus file(s): comma-separated, globs allowed.")
  flags.DEFINE_integer("num_new_tokens", None, "[unusedN] slots to fill (at most).")
  flags.DEFINE_string("output_file", None, "The new vocabulary (same line count).")
  flags.DEFINE_bool("do_lower_case", True, "Lower-case and strip accents (uncased models).")
  cli.define_case_override()
  flags.DEFINE_integer("min_count", 2, "Words seen fewer times are never added.")


def main(argv):
  del argv  # no positional arguments (`cli.launch` checks)
  cli.check_case_mismatch()
  return extend.extend_and_write(FLAGS.output_file, FLAGS.vocab_file, FLAGS.input_file,
                                 FLAGS.num_new_tokens, FLAGS.do_lower_case, FLAGS.min_count)


def console_main():
  define_flags()
  cli.launch(main, required_flags=("vocab_file", "input_file", "num_new_tokens",
                                   "output_file"), replaces_in_place=("vocab_file",))


if __name__ == "__main__":
  console_main()
