"""A newcomer's first commands (issue 36): --help lists the command's own flags and exits 0,
for every command; a mistyped --init_checkpoint is named as such.

The commands run in this process through their own launcher (`conftest.run_command`); one
--help runs as a real process (`python -m`), where absltest's and TensorFlow's TPU flags are
defined too and must not be listed as the command's."""

import os
import re
import subprocess
import sys

from absl import flags
from conftest import REPO
from conftest import UNCASED_VOCAB
from conftest import run_command
import pytest

pytestmark = pytest.mark.large  # trains or runs commands: `make test`, not `make test-fast`

# Every command of pyproject.toml's [project.scripts].
COMMANDS = [
    "data_prep.create_pretraining_data", "data_prep.create_classifier_data",
    "data_prep.create_squad_data", "data_prep.learn_vocab", "data_prep.extend_vocab",
    "data_prep.show_pretraining_data", "official_bert.run_pretraining",
    "official_bert.run_classifier", "official_bert.run_ner", "official_bert.run_squad",
    "official_bert.run_swag", "official_bert.run_embeddings", "official_bert.run_distillation",
    "official_bert.squad_evaluate",
    "official_bert.extract_features", "official_bert.export", "official_bert.convert_checkpoint",
]
# Flags of libraries a command loads (absltest, TensorFlow's TPU client and tensor tracer),
# and absl's own, which --help must not show as the command's.
LIBRARY_FLAGS = ("test_srcdir", "test_tmpdir", "xml_output_file", "hbm_oom_exit",
                 "tt_check_filter", "delta_threshold")
ABSL_FLAGS = ("verbosity", "logtostderr", "helpxml", "run_with_pdb")


def _listed(text):
  """The flag names a help text lists (`  --name:` or `  --[no]name:` lines)."""
  return set(re.findall(r"^  (?:-\S,)?--(?:\[no\])?([\w-]+):", text, re.MULTILINE))


def _own_flags(module):
  """The flags `module`'s console_main() defines before it launches (the launcher stubbed
  out; the flags are removed again)."""
  import importlib  # pylint: disable=g-import-not-at-top

  from data_prep import cli  # pylint: disable=g-import-not-at-top
  command = importlib.import_module(module)  # first: imports may define libraries' flags
  before, defined = set(flags.FLAGS), set()
  launch = cli.launch
  cli.launch = lambda *args, **kwargs: defined.update(set(flags.FLAGS) - before)
  try:
    command.console_main()
  finally:
    cli.launch = launch
  for name in defined:
    if name in flags.FLAGS:  # a short name goes with its flag
      delattr(flags.FLAGS, name)
  return {name for name in defined if len(name) > 1}


@pytest.mark.parametrize("module", COMMANDS)
def test_help_lists_the_commands_own_flags_and_exits_0(module):
  own = _own_flags(module)
  assert own, module
  for asked in ("--help", "--helpshort"):
    proc = run_command(module, asked)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Try --helpfull" not in proc.stdout
    assert _listed(proc.stdout) == own, (module, asked)
    assert "\n--helpfull: also absl's flags" in proc.stdout
  command = sys.modules[module]
  assert proc.stdout.startswith(command.__doc__.strip("\n")[:60]), proc.stdout[:300]


@pytest.mark.parametrize("module", ["data_prep.create_classifier_data",
                                    "official_bert.run_classifier"])
def test_helpfull_adds_absls_flags_and_exits_0(module):
  proc = run_command(module, "--helpfull")
  assert proc.returncode == 0, proc.stderr[-2000:]
  listed = _listed(proc.stdout)
  assert _own_flags(module) <= listed
  assert {"verbosity", "logtostderr", "flagfile", "helpfull"} <= listed
  assert not listed & set(LIBRARY_FLAGS)


def test_help_of_a_real_process_hides_library_flags():
  """A fresh `python -m` (absltest and TensorFlow's TPU modules define flags on import)."""
  proc = subprocess.run([sys.executable, "-m", "official_bert.run_classifier", "--help"],
                        cwd=REPO, capture_output=True, text=True, timeout=300,
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  assert proc.returncode == 0, proc.stderr[-2000:]
  listed = _listed(proc.stdout)
  assert {"train_file", "label_names", "steps_per_loop", "init_checkpoint", "do_predict",
          "iterations_per_loop"} <= listed
  assert not listed & set(LIBRARY_FLAGS + ABSL_FLAGS), listed & set(LIBRARY_FLAGS + ABSL_FLAGS)
  assert "GLUE sentence (pair) classification" in proc.stdout
  full = subprocess.run([sys.executable, "-m", "official_bert.run_classifier", "--helpfull"],
                        cwd=REPO, capture_output=True, text=True, timeout=300,
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  assert full.returncode == 0, full.stderr[-2000:]
  assert not _listed(full.stdout) & set(LIBRARY_FLAGS)


def test_help_of_python_m_lists_the_flags_main_defines():
  """`python -m data_prep.X`: absl files the flags X defines under its path (sys.argv[0])."""
  proc = subprocess.run([sys.executable, "-m", "data_prep.demo_corpus", "--help"], cwd=REPO,
                        capture_output=True, text=True, timeout=300,
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert "output_file" in _listed(proc.stdout), proc.stdout


def test_help_after_a_double_dash_is_an_argument():
  from data_prep import cli  # pylint: disable=g-import-not-at-top
  assert cli.help_request(["prog", "--x=1", "--help"]) == "short"
  assert cli.help_request(["prog", "-?"]) == "short"
  assert cli.help_request(["prog", "--help", "--helpfull"]) == "full"
  assert cli.help_request(["prog", "--helpfull=true"]) == "full"
  assert cli.help_request(["prog", "--", "--help"]) is None
  assert cli.help_request(["prog", "--nohelp", "--helpxml"]) is None


def test_max_eval_steps_help_says_what_it_does():
  """docs/fine-tuning.md: fine-tuning evaluates the whole dev set; run_pretraining stops at
  --max_eval_steps batches."""
  finetuning = run_command("official_bert.run_classifier", "--help").stdout
  pretraining = run_command("official_bert.run_pretraining", "--help").stdout
  assert re.search(r"--max_eval_steps: Not used in fine-tuning, which evaluates the whole\s+"
                   r"dev set", finetuning), finetuning
  assert re.search(r"--max_eval_steps: run_pretraining --do_eval: evaluate at most N\s+"
                   r"batches", pretraining), pretraining


@pytest.mark.parametrize("module,args", [
    ("official_bert.run_classifier", ["--task_name=MRPC", "--data_dir=/nonexistent_glue",
                                      "--do_train", "--output_dir={out}"]),
    ("official_bert.run_ner", ["--data_dir=/nonexistent_conll", "--do_train",
                               "--output_dir={out}"]),
    ("official_bert.run_embeddings", ["--train_file=/nonexistent.tsv", "--do_train",
                                      "--output_dir={out}"]),
    ("official_bert.extract_features", ["--input_file={out}/lines.txt",
                                        "--output_file={out}/f.jsonl"]),
])
def test_a_nonexistent_init_checkpoint_is_named(tmp_path, module, args):
  """Without --bert_config_file, the message was "--bert_config_file is required"."""
  missing = tmp_path / "nonexistent"
  args = [a.format(out=tmp_path) for a in args]
  proc = run_command(module, f"--init_checkpoint={missing}", *args)
  assert proc.returncode == 1, proc.stderr[-2000:]
  assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
  assert (f"--init_checkpoint={missing} does not exist (no such file, folder or checkpoint "
          "prefix)") in proc.stderr, proc.stderr[-2000:]
  assert "--bert_config_file is required" not in proc.stderr
  # With the model flags given, the same message (not a later one about the weights).
  proc = run_command(module, f"--init_checkpoint={missing}", *args,
                     f"--vocab_file={UNCASED_VOCAB}", f"--bert_config_file={missing}.json")
  assert f"--init_checkpoint={missing} does not exist" in proc.stderr, proc.stderr[-2000:]


def test_export_names_a_nonexistent_checkpoint(tmp_path):
  missing = tmp_path / "nonexistent"
  proc = run_command("official_bert.export", f"--checkpoint={missing}", "--model_type=encoder",
                     f"--export_dir={tmp_path / 'export'}")
  assert proc.returncode == 1, proc.stderr[-2000:]
  assert f"--checkpoint={missing} does not exist" in proc.stderr, proc.stderr[-2000:]
  assert not (tmp_path / "export").exists()
