"""The one way data_prep programs start: absl flags, absl logging, user errors without traces.

A program defines its flags in `define_flags()` (never at import time: importing two programs
into one process, as tests and `official_bert` do, would define --input_file twice) and ends

  if __name__ == "__main__":
    define_flags()
    cli.launch(main, required_flags=("input_file", "output_file"))

`main(argv)` gets the positional arguments `launch` was told to expect (`argv[1:]`; others
are a usage error). A user error (a ValueError, an OSError such as FileNotFoundError,
TensorFlow's NotFoundError and PermissionDeniedError from gs:// paths, a non-finite training
loss) or a missing required flag ends the program with its message on the log (stderr) and
exit status 1, without a traceback; anything else is a bug and keeps its traceback.

Signals: SIGTERM raises `Interrupted` in the main thread, as Ctrl-C (SIGINT) raises
KeyboardInterrupt, so `with` blocks run their cleanup (writers delete their temporary files,
worker pools are terminated); the program then exits with the signal's conventional status
(128 + signal number: 143 for SIGTERM, 130 for SIGINT) and one line, no traceback, so a
scheduler can tell a stopped run from a finished one. A training loop that saves a checkpoint
first takes the signals over while it runs (`training_loop.StopRequest`).
"""

import signal
import sys

from absl import app
from absl import flags
from absl import logging


def user_errors():
  """The exception types `launch` reports as a message, not a traceback."""
  # FloatingPointError: a training run whose loss became NaN or infinite.
  errors = (ValueError, OSError, FloatingPointError)
  tf = sys.modules.get("tensorflow")  # only if the program loaded it; errors come from it then
  if tf is not None and hasattr(tf, "errors"):
    errors += (tf.errors.NotFoundError, tf.errors.PermissionDeniedError)
  return errors


class Interrupted(Exception):
  """The program was asked to stop by a signal (after saving what it could)."""

  def __init__(self, signum, what="stopped"):
    super().__init__(f"{what} by signal {signal.Signals(signum).name}")
    self.signum = signum


def _raise_interrupted(signum, frame):
  del frame
  raise Interrupted(signum)


def define_tokenizer_flags(max_seq_length=128, vocab_help="The WordPiece vocabulary file.",
                           do_lower_case=True):
  """--vocab_file, --do_lower_case and --max_seq_length: how every writer tokenizes and packs,
  with google-research/bert's names and meaning (defaults: the writer's settings')."""
  flags.DEFINE_string("vocab_file", None, vocab_help)
  flags.DEFINE_bool("do_lower_case", do_lower_case,
                    "Lower-case and strip accents (uncased models).")
  flags.DEFINE_integer("max_seq_length", max_seq_length,
                       "Tokens per sequence, [CLS] and [SEP]s included.")


def missing_flags(names):
  """The flags of `names` that are unset or empty."""
  return [name for name in names if flags.FLAGS[name].value in (None, "", [])]


def _parse_known_flags(argv):
  """Like absl's parser, but arguments that are not our flags are left in argv for `main`
  (e.g. Apache Beam's pipeline options); a bad value of one of our flags is still an error."""
  try:
    return flags.FLAGS(argv, known_only=True)
  except flags.Error as e:
    sys.stderr.write(f"FATAL Flags parsing error: {e}\n"
                     "Pass --helpshort or --helpfull to see help on flags.\n")
    sys.exit(1)


def launch(main_fn, required_flags=(), positional=(), pass_through_unknown=False):
  """Parses the flags and runs `main_fn(argv)`; exits 1 with the message on a user error.

  Args:
    positional: names of the positional arguments the program takes (all required), e.g.
      `("data.json", "pred.json")`; `argv[1:]` holds them.
    pass_through_unknown: `argv[1:]` holds every argument that is not one of the program's
      flags, in order (unknown `--name=value`, `--name value`, positionals), for `main_fn` to
      hand on or reject; `positional` is then not checked.
  """

  def run(argv):
    logging.set_verbosity(logging.INFO)
    if not pass_through_unknown and len(argv) - 1 != len(positional):
      expected = " ".join(positional) or "none"
      raise app.UsageError(f"expected positional arguments: {expected}; got {argv[1:]}")
    missing = missing_flags(required_flags)
    if missing:
      logging.error("%s", " ".join(f"--{name} is required" for name in missing))
      sys.exit(1)
    previous = signal.signal(signal.SIGTERM, _raise_interrupted)
    try:
      main_fn(argv)
    except user_errors() as e:
      logging.error("%s", e)
      sys.exit(1)
    except Interrupted as e:
      logging.error("%s; partial outputs were removed, checkpoints kept", e)
      sys.exit(128 + e.signum)
    except KeyboardInterrupt:
      logging.error("interrupted (SIGINT); partial outputs were removed, checkpoints kept")
      sys.exit(128 + signal.SIGINT)
    finally:
      signal.signal(signal.SIGTERM, previous)

  if pass_through_unknown:
    app.run(run, flags_parser=_parse_known_flags)
  else:
    app.run(run)
