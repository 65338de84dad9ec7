r"""A default pretraining corpus every machine has: the Python standard library's docstrings.

  python -m data_prep.demo_corpus --output_file=build/demo/corpus.txt [--max_mb=3]

Source files are parsed with `ast`, never imported (importing would run module code, need
optional C extensions, and be slow). One document per module: its docstring, then the
class/function docstrings in source order. Documents are sorted by module path, so the same
Python version always gives the same bytes. Output format as everywhere here: one sentence
per line, a blank line between documents, UTF-8. The sources are read with `os`/`open()`
(they are this interpreter's own files, always local); the output goes through
`tfrecord_io` like every data_prep output (atomic, any tf.io.gfile path).
"""

from absl import flags

from data_prep import cli
from data_prep.demo import stdlib_corpus

FLAGS = flags.FLAGS


def define_flags():
  """Called only when run as a program (see `data_prep.cli`)."""
  flags.DEFINE_string("output_file", None, "Where to write the corpus.")
  flags.DEFINE_float("max_mb", 3.0, "Stop adding documents at this many MB (2**20 bytes).")
  flags.DEFINE_string("heldout_file", None, "If set, every 20th document goes here instead.")


def main(argv):
  del argv  # no positional arguments (`cli.launch` checks)
  stdlib_corpus.write_corpus(FLAGS.output_file, int(FLAGS.max_mb * 2**20),
                             heldout_path=FLAGS.heldout_file)


if __name__ == "__main__":
  define_flags()
  cli.launch(main, required_flags=("output_file",))
