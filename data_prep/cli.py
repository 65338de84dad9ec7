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

Help: `--help` (or `--helpshort`, `-?`) prints the command's docstring and its own flags
(those its `define_flags()` and our shared flag modules define, with their help) and exits 0;
`--helpfull` adds absl's own flags (logging, flag files). Flags that libraries loaded by the
command define for themselves (absltest, TensorFlow's TPU and tracing flags) are not listed.

Signals: SIGTERM raises `Interrupted` in the main thread, as Ctrl-C (SIGINT) raises
KeyboardInterrupt, so `with` blocks run their cleanup (writers delete their temporary files,
worker pools are terminated); the program then exits with the signal's conventional status
(128 + signal number: 143 for SIGTERM, 130 for SIGINT) and one line, no traceback, so a
scheduler can tell a stopped run from a finished one. A training loop that saves a checkpoint
first takes the signals over while it runs (`training_loop.StopRequest`).
"""

import glob
import os
import re
import signal
import sys

from absl import app
from absl import flags
from absl import logging

from data_prep import lean_startup


def user_errors():
  """The exception types `launch` reports as a message, not a traceback."""
  # FloatingPointError: a training run whose loss became NaN or infinite.
  errors = (ValueError, OSError, FloatingPointError)
  tf = sys.modules.get("tensorflow")  # only if the program loaded it; errors come from it then
  if tf is not None and hasattr(tf, "errors"):
    errors += (tf.errors.NotFoundError, tf.errors.PermissionDeniedError)
  return errors


def check_output_files(output_flag="output_file", input_flags=("input_file", "vocab_file")):
  """Before any work: ValueError if a local --output_file (comma-separated) is a folder, or is
  one of the files of `input_flags` (glob patterns, as the programs expand them): the rename
  at the end would fail after the work, or replace the user's input."""
  if output_flag not in flags.FLAGS or not flags.FLAGS[output_flag].value:
    return
  outputs = [p.strip() for p in str(flags.FLAGS[output_flag].value).split(",") if p.strip()]
  inputs = {}
  for name in input_flags:
    value = flags.FLAGS[name].value if name in flags.FLAGS else None
    for pattern in (value if isinstance(value, list) else str(value or "").split(",")):
      pattern = pattern.strip()
      if pattern and "://" not in pattern:
        pattern = os.path.expanduser(pattern)
        # The pattern as a name too: "data[1].txt" is a file as well as a glob.
        inputs.update({os.path.realpath(p): name for p in glob.glob(pattern) + [pattern]})
  for path in outputs:
    if "://" in path:
      continue
    if os.path.isdir(path):
      raise ValueError(f"--{output_flag}={path} is a folder: give a file's path (e.g. "
                       f"{os.path.join(path, 'NAME')})")
    if os.path.realpath(path) in inputs:
      raise ValueError(f"--{output_flag}={path} is also the --{inputs[os.path.realpath(path)]}"
                       f": writing it would replace that input; choose another "
                       f"--{output_flag}")


def check_case_mismatch():
  """A data tool's guard, the fine-tuning commands' rule: ValueError when --do_lower_case
  contradicts its --vocab_file (where the vocabulary can tell), before any work: most
  upper-case words (or all of a cased vocabulary's) would become [UNK] or rare pieces.
  --allow_case_mismatch writes the records as asked, with a warning."""
  if "vocab_file" not in flags.FLAGS or not flags.FLAGS.vocab_file:
    return
  from data_prep.vocab import case  # pylint: disable=g-import-not-at-top  (TensorFlow)
  try:
    contradiction = case.contradiction(flags.FLAGS.vocab_file, flags.FLAGS.do_lower_case)
  except Exception:  # pylint: disable=broad-except  (TensorFlow's NotFoundError is none)
    return  # a missing or unreadable vocabulary is reported where it is read
  if not contradiction:
    return
  if flags.FLAGS.allow_case_mismatch:
    logging.warning("%s. --allow_case_mismatch: the records are written as asked.",
                    contradiction)
    return
  raise ValueError(f"{contradiction} (or pass --allow_case_mismatch if this is intended)")


def define_case_override():
  """--allow_case_mismatch, for the tools that check --do_lower_case (`check_case_mismatch`)."""
  flags.DEFINE_bool("allow_case_mismatch", False,
                    "Write the records with a --do_lower_case that the --vocab_file "
                    "contradicts (refused otherwise).")


class Interrupted(Exception):
  """The program was asked to stop by a signal (after saving what it could).

  Also built from its message alone (`type(e)(str(e))`, as Keras' traceback filter rebuilds
  an exception raised inside a call): the signal is read back from it."""

  def __init__(self, signum, what="stopped"):
    if isinstance(signum, str):
      message, name = signum, signum.rsplit(" ", 1)[-1]
      signum = signal.Signals[name] if name in signal.Signals.__members__ else signal.SIGTERM
    else:
      message = f"{what} by signal {signal.Signals(signum).name}"
    super().__init__(message)
    self.signum = int(signum)


# The signal `_raise_interrupted` raised for, should the exception be lost on its way (raised
# inside a finalizer, `__del__`, Python prints and drops it): `launch` exits with it anyway.
_PENDING = []


def _raise_interrupted(signum, frame):
  del frame
  _PENDING.append(signum)
  raise Interrupted(signum)


def define_tokenizer_flags(max_seq_length=128, vocab_help="The WordPiece vocabulary file.",
                           do_lower_case=True):
  """--vocab_file, --do_lower_case and --max_seq_length: how every writer tokenizes and packs,
  with google-research/bert's names and meaning (defaults: the writer's settings'), and
  --allow_case_mismatch (`check_case_mismatch`)."""
  flags.DEFINE_string("vocab_file", None, vocab_help)
  flags.DEFINE_bool("do_lower_case", do_lower_case,
                    "Lower-case and strip accents (uncased models).")
  flags.DEFINE_integer("max_seq_length", max_seq_length,
                       "Tokens per sequence, [CLS] and [SEP]s included.", lower_bound=3)
  define_case_override()


def missing_flags(names):
  """The flags of `names` that are unset or empty."""
  return [name for name in names if flags.FLAGS[name].value in (None, "", [])]


# The packages whose flags are a command's own: a command's, or a shared flag module's
# (`define_tokenizer_flags`, `official_bert.training.common_flags`).
OUR_PACKAGES = lean_startup.OUR_PACKAGES
# absl's modules whose flags --helpfull adds (absltest's are not the command's).
_ABSL_MODULES = ("absl.logging", "absl.app")
# --help, -help, --helpshort, -?, --helpfull (=true/=1 too); absl's syntax for booleans.
_HELP_ARG = re.compile(r"^--?(help|helpshort|\?|helpfull)(=(true|t|1|yes))?$", re.IGNORECASE)


def help_request(argv):
  """"short" (--help, --helpshort, -?), "full" (--helpfull) or None: what argv asks for
  (before a `--`, after which arguments are positional)."""
  asked = None
  for arg in argv[1:]:
    if arg == "--":
      break
    match = _HELP_ARG.match(arg)
    if match:
      asked = "full" if match.group(1) == "helpfull" or asked == "full" else "short"
  return asked


def command_flags(command=None):
  """The flags a command defined (its own module, or `__main__`) and our shared flag modules
  did, by name: those of modules of `OUR_PACKAGES`, of `command` and of `sys.argv[0]` (absl's
  name for `__main__`); not the libraries' (absl, absltest, TensorFlow)."""
  own = {}
  for module, module_flags in flags.FLAGS.flags_by_module_dict().items():
    if module in (command, sys.argv[0]) or module.split(".")[0] in OUR_PACKAGES:
      own.update({flag.name: flag for flag in module_flags})
  return own


def _render_flags(flag_list):
  """absl's layout: `--name: help`, then its default and type, indented."""
  lines = []
  for flag in sorted(flag_list, key=lambda f: f.name):
    name = f"--[no]{flag.name}" if flag.boolean else f"--{flag.name}"
    short = f"-{flag.short_name}," if flag.short_name else ""
    lines.append(flags.text_wrap(f"{short}{name}: {flag.help or ''}", indent="    ",
                                 firstline_indent="  "))
    if flag.default_as_str:
      lines.append(flags.text_wrap(f"(default: {flag.default_as_str})", indent="    "))
    if flag.parser.syntactic_help:
      lines.append(flags.text_wrap(f"({flag.parser.syntactic_help})", indent="    "))
  return "\n".join(lines)


def command_help(command=None, full=False):
  """What --help (`full`: --helpfull) prints: `command`'s docstring (a module name; default
  `__main__`), its flags (`command_flags`), and with `full` absl's."""
  module = sys.modules.get(command or "__main__") or sys.modules["__main__"]
  doc = (module.__doc__ or "").strip("\n") or f"USAGE: {sys.argv[0]} [flags]"
  own = command_flags(command)
  parts = [doc, "\nflags:", _render_flags(own.values())]
  if full:
    app.define_help_flags()  # as app.run would (idempotent)
    by_module = flags.FLAGS.flags_by_module_dict()
    for module_name in _ABSL_MODULES:
      absl_flags = [f for f in by_module.get(module_name, []) if f.name not in own]
      if absl_flags:
        parts += [f"\n{module_name}:", _render_flags(absl_flags)]
    parts += ["\nabsl.flags:",
              "  --flagfile: Insert flag definitions from the given file into the command line.",
              "  --undefok: Comma-separated flag names that may be given though not defined."]
  else:
    parts.append("\n--helpfull: also absl's flags (logging, flag files).")
  return "\n".join(parts) + "\n"


def _parse_known_flags(argv):
  """Like absl's parser, but arguments that are not our flags are left in argv for `main`
  (e.g. Apache Beam's pipeline options); a bad value of one of our flags is still an error."""
  try:
    return flags.FLAGS(argv, known_only=True)
  except flags.Error as e:
    sys.stderr.write(f"FATAL Flags parsing error: {e}\n"
                     "Pass --helpshort or --helpfull to see help on flags.\n")
    sys.exit(1)


def launch(main_fn, required_flags=(), positional=(), pass_through_unknown=False,
           command=None, replaces_in_place=()):
  """Parses the flags and runs `main_fn(argv)`; exits 1 with the message on a user error.

  --help/--helpshort/--helpfull print `command_help` and exit 0 before anything else.

  Args:
    positional: names of the positional arguments the program takes (all required), e.g.
      `("data.json", "pred.json")`; `argv[1:]` holds them.
    pass_through_unknown: `argv[1:]` holds every argument that is not one of the program's
      flags, in order (unknown `--name=value`, `--name value`, positionals), for `main_fn` to
      hand on or reject; `positional` is then not checked.
    command: the command's module name, whose docstring --help prints (default:
      `main_fn`'s module).
    replaces_in_place: the input flags whose file --output_file may be, an edit in place
      (extend_vocab's --vocab_file); any other input as --output_file is refused.
  """
  asked = help_request(sys.argv)
  if asked:
    command = command or getattr(main_fn, "__module__", None)
    sys.stdout.write(command_help(command, full=asked == "full"))
    sys.exit(0)

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
    _PENDING.clear()
    try:
      check_output_files(input_flags=tuple(
          f for f in ("input_file", "vocab_file") if f not in replaces_in_place))
      main_fn(argv)
      if _PENDING:  # raised where Python dropped it: the run went on, but was asked to stop
        raise Interrupted(_PENDING[0])
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
