"""The package (pyproject.toml): what the wheel holds, its console scripts and dependencies, the
sdist Beam's `--setup_file` builds for its workers, and an installed script run outside the repo.

The builds run on a copy of the tree (pip builds in place, which would leave build/ and
*.egg-info in the checkout) with the venv's setuptools and no network (`--no-build-isolation
--no-index`), as Beam's stager does.
"""

import configparser
import email.parser
import glob
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile

from conftest import CORPUS
from conftest import DEV_ONLY_IMPORTS
from conftest import REPO
import pytest

pytestmark = pytest.mark.large  # trains or runs commands: `make test`, not `make test-fast`

PACKAGES = ("data_prep", "official_bert")
# `make demo` steps, not installed commands (pyproject.toml says so too).
DEMO_MODULES = {"data_prep.demo_corpus", "official_bert.demo", "official_bert.demo_query"}
MAIN_BLOCK = 'if __name__ == "__main__":\n'


def _pins(path):
  with open(path, encoding="utf-8") as f:
    return [line.strip() for line in f if line.strip() and not line.lstrip().startswith("#")]


def _cli_modules():
  """Every top-level module of the two packages that runs as a program, demos aside."""
  modules = set()
  for package in PACKAGES:
    for path in glob.glob(os.path.join(REPO, package, "*.py")):
      with open(path, encoding="utf-8") as f:
        if f"\n{MAIN_BLOCK}" in f.read():
          modules.add(f"{package}.{os.path.basename(path)[:-3]}")
  return modules - DEMO_MODULES


def _pip(*args, cwd=None):
  proc = subprocess.run([sys.executable, "-m", "pip", *args, "--no-index", "-q"],
                        cwd=cwd,
                        capture_output=True,
                        text=True,
                        timeout=300)
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


@pytest.fixture(scope="module", name="source")
def source_fixture(tmp_path_factory):
  """The tree a clean clone has: top-level files and the source folders."""
  src = tmp_path_factory.mktemp("src")
  ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
  for name in os.listdir(REPO):
    path = os.path.join(REPO, name)
    if os.path.isfile(path):
      shutil.copy(path, src / name)
    elif name in PACKAGES + ("tests", "bench", "configs"):
      shutil.copytree(path, src / name, ignore=ignore)
  return src


@pytest.fixture(scope="module", name="wheel")
def wheel_fixture(source, tmp_path_factory):
  dist = tmp_path_factory.mktemp("dist")
  _pip("wheel", "--no-deps", "--no-build-isolation", "-w", str(dist), str(source))
  (path,) = glob.glob(str(dist / "*.whl"))
  assert os.path.basename(path) == "official_bert-0.2.0-py3-none-any.whl"
  return path


def _dist_info(wheel, name):
  with zipfile.ZipFile(wheel) as z:
    return z.read(f"official_bert-0.2.0.dist-info/{name}").decode("utf-8")


def test_wheel_holds_every_module_of_both_packages_and_nothing_else(source, wheel):
  expected = set()
  for package in PACKAGES:
    for root, dirs, files in os.walk(source / package):
      dirs[:] = [d for d in dirs if d != "__pycache__"]
      expected |= {
          os.path.relpath(os.path.join(root, f), source).replace(os.sep, "/")
          for f in files
          if f.endswith(".py")
      }
  with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if ".dist-info/" not in n]
  assert "data_prep/pretraining/instances.py" in names
  assert "official_bert/modeling/encoder.py" in names
  # A subfolder without __init__.py would be missing here: setuptools finds only packages.
  assert set(names) == expected
  assert not [n for n in names if n.startswith(("tests/", "bench/"))]
  assert _dist_info(wheel, "top_level.txt").split() == list(PACKAGES)


def test_every_cli_has_a_console_script_that_python_m_also_runs(wheel):
  entry_points = configparser.ConfigParser()
  entry_points.optionxform = str  # script names are case-sensitive
  entry_points.read_string(_dist_info(wheel, "entry_points.txt"))
  scripts = dict(entry_points["console_scripts"])
  modules = _cli_modules()
  assert len(modules) >= 14, modules
  # A new CLI gets `console_main` and a `bert-NAME` line in pyproject.toml's [project.scripts].
  assert scripts == {
      f"bert-{m.split('.')[1].replace('_', '-')}": f"{m}:console_main" for m in modules
  }, "a CLI needs console_main and a [project.scripts] line"
  for module in sorted(modules):
    assert callable(importlib.import_module(module).console_main), module
    with open(os.path.join(REPO, *module.split(".")) + ".py", encoding="utf-8") as f:
      # `python -m` and the script run the same function.
      assert f.read().endswith(f"\n{MAIN_BLOCK}  console_main()\n"), module


def test_wheel_depends_on_exactly_the_runtime_pins(wheel):
  metadata = email.parser.Parser().parsestr(_dist_info(wheel, "METADATA"))
  runtime = _pins(os.path.join(REPO, "requirements.txt"))
  assert metadata.get_all("Requires-Dist") == runtime
  assert metadata["Name"] == "official-bert" and metadata["Version"] == "0.2.0"
  assert metadata["Requires-Python"] == ">=3.11"
  assert "apache-beam==2.77.0" in runtime
  assert all(re.fullmatch(r"[A-Za-z0-9_.\-]+==[0-9][0-9A-Za-z.]*", pin) for pin in runtime), runtime
  # Dev tools stay out of the workers' install, and no package is pinned twice.
  dev = _pins(os.path.join(REPO, "requirements-dev.txt"))
  assert {"pytest", "ruff", "yapf"} <= {p.split("==")[0] for p in dev}
  assert not {p.split("==")[0] for p in dev} & {p.split("==")[0] for p in runtime}
  with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
    assert tomllib.load(f)["tool"]["setuptools"]["dynamic"]["dependencies"] == {
        "file": ["requirements.txt"]
    }


def _runtime_distributions():
  """The installed distributions requirements.txt pulls in, its pins' dependencies included
  (their markers evaluated, extras not taken): canonical names."""
  from importlib import metadata  # pylint: disable=import-outside-toplevel

  from packaging.requirements import Requirement  # pylint: disable=import-outside-toplevel
  from packaging.utils import canonicalize_name  # pylint: disable=import-outside-toplevel
  seen, todo = set(), _pins(os.path.join(REPO, "requirements.txt"))
  while todo:
    requirement = Requirement(todo.pop())
    if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
      continue
    name = canonicalize_name(requirement.name)
    if name not in seen:
      seen.add(name)
      todo += metadata.requires(requirement.name) or []
  return seen


def test_packages_hidden_from_the_tests_processes_are_outside_the_runtime_stack():
  """The processes the tests start see no `DEV_ONLY_IMPORTS` (conftest.py): no runtime
  requirement, direct or indirect, installs one of them, so a command that needs one would
  fail for a user; and a command's process starts without them."""
  from importlib import metadata  # pylint: disable=import-outside-toplevel

  from packaging.utils import canonicalize_name  # pylint: disable=import-outside-toplevel
  owners = metadata.packages_distributions()
  runtime = _runtime_distributions()
  assert {"tensorflow", "keras", "tensorflow-text", "numpy", "protobuf"} <= runtime
  for name in DEV_ONLY_IMPORTS:
    installed_by = {canonicalize_name(d) for d in owners.get(name, [])}
    assert not installed_by & runtime, (name, installed_by & runtime)
  code = ("import importlib.util, json, sys; import official_bert.run_classifier; "
          f"print(json.dumps([importlib.util.find_spec(n) is None for n in {DEV_ONLY_IMPORTS}] "
          "+ [n in sys.modules for n in ('tensorflow', 'keras')]))")
  proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                        timeout=300, check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  hidden_and_loaded = json.loads(proc.stdout.strip().splitlines()[-1])
  assert hidden_and_loaded == [True] * (len(DEV_ONLY_IMPORTS) + 2), hidden_and_loaded


def test_beam_setup_file_sdist_builds_the_same_package(source, tmp_path):
  """`--setup_file=./setup.py`: Beam builds an sdist (its stager, as on Dataflow) that the
  workers install; it must carry requirements.txt and give the same wheel metadata."""
  sdist_dir = tmp_path / "sdist"
  sdist_dir.mkdir()
  code = ("import sys\nfrom apache_beam.runners.portability.stager import Stager\n"
          "print(Stager._build_setup_package(sys.argv[1], sys.argv[2]))")
  proc = subprocess.run([sys.executable, "-c", code,
                         str(source / "setup.py"),
                         str(sdist_dir)],
                        capture_output=True,
                        text=True,
                        timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  (sdist,) = glob.glob(str(sdist_dir / "*.tar.gz"))
  with tarfile.open(sdist) as tar:
    names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
  assert {
      "requirements.txt", "pyproject.toml", "setup.py", "data_prep/pretraining/instances.py",
      "official_bert/modeling/encoder.py"
  } <= names
  assert not [n for n in names if n.startswith(("tests/", "bench/"))]
  _pip("wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "whl"), sdist)
  (wheel,) = glob.glob(str(tmp_path / "whl" / "*.whl"))
  metadata = email.parser.Parser().parsestr(_dist_info(wheel, "METADATA"))
  assert metadata.get_all("Requires-Dist") == _pins(os.path.join(REPO, "requirements.txt"))


def test_installed_console_script_runs_outside_the_repo(wheel, tmp_path):
  """`pip install` of the wheel (into a folder: the venv has the dependencies), then
  `bert-learn-vocab` from elsewhere: same vocab as the library call; a user error exits 1."""
  from data_prep.vocab import learn  # pylint: disable=g-import-not-at-top
  target = tmp_path / "site"
  _pip("install", "--no-deps", "--target", str(target), wheel)
  env = dict(os.environ, PYTHONPATH=str(target), TF_CPP_MIN_LOG_LEVEL="2")
  where = subprocess.run([sys.executable, "-c", "import data_prep; print(data_prep.__file__)"],
                         cwd=tmp_path,
                         env=env,
                         capture_output=True,
                         text=True,
                         check=True)
  assert where.stdout.strip() == str(target / "data_prep" / "__init__.py")
  script = str(target / "bin" / "bert-learn-vocab")
  corpus = tmp_path / "corpus.txt"
  with open(CORPUS, encoding="utf-8") as f:
    corpus.write_text(f.read(30_000).rsplit("\n", 1)[0] + "\n", encoding="utf-8")
  vocab_file = tmp_path / "vocab.txt"
  proc = subprocess.run(
      [script, f"--input_file={corpus}", f"--output_file={vocab_file}", "--vocab_size=300"],
      cwd=tmp_path,
      env=env,
      capture_output=True,
      text=True,
      timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  tokens = vocab_file.read_text(encoding="utf-8").splitlines()
  assert tokens == learn.learn_vocab([str(corpus)], 300, True)
  assert tokens[:5] == list(learn.RESERVED_TOKENS) and len(tokens) <= 300
  proc = subprocess.run([script, f"--output_file={vocab_file}"],
                        cwd=tmp_path,
                        env=env,
                        capture_output=True,
                        text=True,
                        timeout=300)
  assert proc.returncode == 1 and "--input_file is required" in proc.stderr, proc.stderr
  assert "Traceback" not in proc.stderr
