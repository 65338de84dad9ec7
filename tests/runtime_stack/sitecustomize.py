"""Python imports this at start-up in every process the tests start (conftest.py puts this
folder first on PYTHONPATH): the packages named in $OFFICIAL_BERT_TESTS_HIDDEN (comma-separated)
are made unimportable, as in the runtime stack (requirements.txt), which lacks them.

TensorFlow and Keras import several packages whenever they are installed (JAX from TFLite's
helpers, pandas, scikit-learn with SciPy, matplotlib and OpenCV from Keras' utilities): the
development environment has them (tf-models-official, the backend tests' JAX and PyTorch), and
each process a test starts spent a third of its start-up importing them. `None` in
`sys.modules` is Python's own way to say a module cannot be imported: `import` raises
ModuleNotFoundError and `importlib.util.find_spec` returns None, as when it is absent.

It also sets the garbage collector's thresholds of the processes the tests start
($OFFICIAL_BERT_TESTS_GC, as conftest sets them in the test processes).
"""

import gc
import os
import sys

for _name in filter(None, os.environ.get("OFFICIAL_BERT_TESTS_HIDDEN", "").split(",")):
  sys.modules.setdefault(_name, None)

# The garbage collector's thresholds that conftest gives the test processes (GC_ENV there
# says why), in this process the tests started, set before it imports anything heavy.
_thresholds = os.environ.get("OFFICIAL_BERT_TESTS_GC")
if _thresholds:
  gc.set_threshold(*map(int, _thresholds.split(",")))
