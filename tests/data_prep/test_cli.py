"""The one CLI convention (`data_prep.cli`): flags defined only when run, user errors as a
message and exit status 1, never a traceback."""

import signal
import subprocess
import sys

from conftest import REPO
import pytest

from data_prep import cli

pytestmark = pytest.mark.large  # trains or runs commands: `make test`, not `make test-fast`

PROGRAMS = ("create_pretraining_data", "create_squad_data", "create_classifier_data",
            "learn_vocab", "extend_vocab", "demo_corpus", "show_pretraining_data")


def _run(args, code=None):
  cmd = [sys.executable] + (["-c", code] if code else ["-m"] + args)
  return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)


def test_importing_every_program_defines_no_flags():
  code = ("from absl import flags\n" +
          "".join(f"import data_prep.{p}\n" for p in PROGRAMS) +
          "defined = [n for n in ('input_file', 'output_file', 'vocab_file', 'task_name') "
          "if n in flags.FLAGS]\n"
          "assert not defined, defined\n")
  proc = _run(None, code)
  assert proc.returncode == 0, proc.stderr[-2000:]


def test_missing_required_flag_is_exit_1_with_the_message():
  proc = _run(["data_prep.demo_corpus", "--max_mb=0.01"])
  assert proc.returncode == 1, proc.stderr[-2000:]
  assert "--output_file is required" in proc.stderr
  assert "Traceback" not in proc.stderr


def test_value_error_is_exit_1_with_the_message(tmp_path):
  out = tmp_path / "corpus.txt"
  proc = _run(["data_prep.demo_corpus", f"--output_file={out}", "--max_mb=0"])
  assert proc.returncode == 1, proc.stderr[-2000:]
  assert "no documents found in the standard library" in proc.stderr
  assert "Traceback" not in proc.stderr
  assert not out.exists()


def test_missing_input_file_is_exit_1_with_the_message(tmp_path):
  proc = _run(["data_prep.show_pretraining_data", f"--input_file={tmp_path}/none*.tfrecord",
               "--vocab_file=unused.txt"])
  assert proc.returncode == 1, proc.stderr[-2000:]
  assert "matches no file" in proc.stderr and "Traceback" not in proc.stderr


def test_unexpected_positional_argument_is_a_usage_error(tmp_path):
  proc = _run(["data_prep.demo_corpus", f"--output_file={tmp_path / 'c.txt'}", "extra"])
  assert proc.returncode == 1
  assert "got ['extra']" in proc.stderr and "Traceback" not in proc.stderr


def test_writers_flags_take_their_defaults_from_the_settings():
  """A writer's defaults are declared once, in its library Settings; the command's flags (one
  per field) show the same (--num_workers unset: the library decides, all cores for big
  inputs)."""
  for program, settings in (("create_pretraining_data", "data_prep.pretraining.settings"),
                            ("create_squad_data", "data_prep.squad.writing")):
    code = (f"from absl import flags\nfrom data_prep import {program}\nimport {settings} as s\n"
            f"{program}.define_flags()\n"
            "wrong = {n: (flags.FLAGS[n].default, v) for n, v in s.Settings._field_defaults"
            ".items() if flags.FLAGS[n].default != v}\n"
            "assert not wrong, wrong\n"
            "assert s.Settings('in', 'out', 'vocab').num_workers is None\n")
    proc = _run(None, code)
    assert proc.returncode == 0, f"{program}: {proc.stderr[-2000:]}"


def test_an_interrupted_rebuilt_from_its_message_keeps_its_signal():
  """Keras' traceback filter rebuilds an exception as type(e)(str(e)): Interrupted's signal
  number came back as a ValueError (exit 1, a traceback) instead of exit 143."""
  e = cli.Interrupted(signal.SIGTERM, "stopped at step 3 (checkpoint saved)")
  again = type(e)(str(e))
  assert (again.signum, str(again)) == (signal.SIGTERM, str(e))


_DROPPED_SIGNAL = """
import os, signal, sys
sys.path.insert(0, sys.argv[1])
from data_prep import cli

class Finalized:
  def __del__(self):
    os.kill(os.getpid(), signal.SIGTERM)  # its handler runs in here: Python drops the raise
    for _ in range(10000):
      pass

def main(argv):
  thing = Finalized()
  del thing
  print("went on", flush=True)

sys.argv = sys.argv[:1]
cli.launch(main)
"""


def test_a_sigterm_raised_inside_a_finalizer_still_ends_the_run_with_its_status():
  proc = subprocess.run([sys.executable, "-c", _DROPPED_SIGNAL, REPO], capture_output=True,
                        text=True, timeout=120, check=False)
  assert "went on" in proc.stdout  # the exception was dropped where it was raised ...
  assert proc.returncode == 143, proc.stderr[-2000:]  # ... yet the run ends as stopped
  assert "stopped by signal SIGTERM" in proc.stderr
