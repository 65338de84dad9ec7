"""A command's process skips scikit-learn and JAX where only TensorFlow's import would load
them (data_prep/lean_startup.py); every other process and import is left alone."""

import subprocess
import sys

from conftest import REPO
from conftest import dev_environment
import pytest

from data_prep import lean_startup

PY = "/usr/bin/python3"


@pytest.mark.parametrize("orig_argv, argv, expected", [
    ([PY, "-m", "official_bert.run_classifier", "--help"], ["run_classifier.py"], True),
    ([PY, "-X", "importtime", "-u", "-mdata_prep.create_pretraining_data"], ["x.py"], True),
    ([PY, "/venv/bin/bert-run-classifier", "--help"], ["/venv/bin/bert-run-classifier"], True),
    # A user's own module that imports ours, or ours named after -c or a script: not a command.
    ([PY, "-m", "my_project.train"], ["-m"], False),
    ([PY, "-m", "pytest", "tests"], ["pytest"], False),
    ([PY, "-c", "import x", "-m", "official_bert.export"], ["-c"], False),
    ([PY, "train.py", "-m", "official_bert.export"], ["train.py"], False),
    ([PY, "-W", "ignore", "-m", "my_project"], ["-m"], False),
    ([PY], [""], False), ([], [], False)])
def test_command_processes_are_recognized(orig_argv, argv, expected):
  assert lean_startup.is_command_process(argv, orig_argv) is expected


def _find_spec_from(module_name, fullname):
  """The finder's answer for `fullname` imported by code of the module `module_name`."""
  code = compile("finder.find_spec(fullname)", f"<{module_name}>", "eval")
  return eval(code, {"__name__": module_name, "finder": lean_startup._SkipOptionalImports(),  # pylint: disable=protected-access
                     "fullname": fullname})


def test_only_the_optional_imports_of_keras_and_tflite_are_skipped():
  for importer, name in (("keras.src.wrappers.fixes", "sklearn"),
                         ("keras.src.wrappers.sklearn_wrapper", "sklearn.base"),
                         ("tensorflow.lite.python.util", "jax"),
                         ("keras.src.callbacks.orbax_checkpoint", "jax"),
                         ("keras.src.visualization.plot_image_gallery", "matplotlib.pyplot"),
                         ("keras.src.trainers.data_adapters.array_slicing", "pandas"),
                         ("keras.src.utils.image_utils", "PIL"),
                         ("keras.src.utils.image_dataset_utils", "PIL")):
    with pytest.raises(ModuleNotFoundError, match="not needed by this command"):
      _find_spec_from(importer, name)
  # Anyone else's import, and other packages, go on to the usual finders.
  for importer, name in (("__main__", "sklearn"), ("my_project.features", "jax"),
                         ("keras.src.backend.jax", "jax"), ("keras.src.wrappers", "numpy"),
                         ("tensorflow.python.ops", "jax"), ("my_project.plots", "matplotlib"),
                         ("apache_beam.dataframe", "pandas")):
    assert _find_spec_from(importer, name) is None


def test_not_installed_outside_a_command():
  # This process (a test worker) is not a command, and TensorFlow may be loaded already.
  meta_path = []
  assert not lean_startup.skip_optional_imports(argv=["-m"], orig_argv=["python", "-m", "mine"],
                                               meta_path=meta_path)
  assert not meta_path
  assert not any(type(f).__name__ == "_SkipOptionalImports" for f in sys.meta_path)


SKIPPED = tuple(lean_startup._SKIPPED)  # pylint: disable=protected-access


def test_a_command_process_imports_none_and_its_user_code_can():
  """A fresh process that starts as `python -m` does: TensorFlow's import loads none of the
  packages; afterwards an import of each from elsewhere works (where it is installed)."""
  code = """
import sys
sys.orig_argv = [sys.executable, "-m", "official_bert.run_classifier"]  # as `python -m` has it
import data_prep  # noqa
import tensorflow
names = sys.argv[1:]
print("LOADED", [name for name in names if name in sys.modules])
for name in names:
  try:
    __import__(name)
    print("USER", name, "ok")
  except ImportError:
    print("USER", name, "absent")
"""
  # The development environment's packages, which the test processes' children do not see.
  out = subprocess.run([sys.executable, "-c", code, *SKIPPED], cwd=REPO, capture_output=True,
                       text=True, check=True, env=dev_environment()).stdout
  assert "LOADED []" in out
  for name in SKIPPED:  # installed here (requirements-dev.txt) or not: never refused
    assert f"USER {name} ok" in out or (f"USER {name} absent" in out
                                         and _not_installed(name)), out


def _not_installed(name):
  import importlib.util  # pylint: disable=g-import-not-at-top
  return importlib.util.find_spec(name) is None
