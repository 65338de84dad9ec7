"""A shim for tools that want a setup.py: everything is in pyproject.toml.

Apache Beam's `--setup_file=./setup.py` builds the sdist its workers install with
`python setup.py sdist` when the `build` module is not installed (it also takes
`--setup_file=./pyproject.toml`, but then needs `build`).
"""

import setuptools

setuptools.setup()
