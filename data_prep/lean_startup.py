"""Our commands start without optional packages that TensorFlow's import loads for them.

`import tensorflow` imports keras, whose scikit-learn wrappers import scikit-learn, whose image
gallery imports matplotlib, whose array slicing imports pandas and whose image utilities import
Pillow, and `tensorflow.lite` and keras' Orbax checkpoint callback, which import JAX, each where
installed: over a third of a command's start-up in an environment with them all
(docs/development.md). No command uses these features. In a command's process (`python -m` with
one of our modules, or a `bert-*` script), those imports, and only when these modules make them,
find the package absent, which each handles as optional: keras' scikit-learn wrappers then
refuse to be built, `plot_image_gallery` asks for matplotlib, `fit` takes no pandas frames,
keras' image loading asks for Pillow, `TFLiteConverter.experimental_from_jax` is unavailable, and
the Orbax callback (JAX-only) skips a JAX version patch. Every other import of these packages,
from anywhere else and at any time, is unaffected; so is every process that is not one of our
commands (the Python API, a user's program, the tests).
"""

import importlib.abc
import os
import sys

# {package not to load: the modules (and their submodules) whose optional import of it is skipped}
_SKIPPED = {
    "sklearn": ("keras.src.wrappers",),
    "jax": ("tensorflow.lite", "keras.src.callbacks.orbax_checkpoint"),
    "matplotlib": ("keras.src.visualization",),
    "pandas": ("keras.src.trainers.data_adapters",),
    "PIL": ("keras.src.utils.image_utils", "keras.src.utils.image_dataset_utils"),
}


# Our packages, whose modules are our commands (`python -m official_bert.run_classifier`, ...).
OUR_PACKAGES = ("data_prep", "official_bert")
# Python's options that take their value as the next argument (`python -X importtime -m ...`).
_OPTIONS_WITH_VALUE = ("-W", "-X", "--check-hash-based-pycs")


def main_module(orig_argv):
  """The module `python -m` runs, from the interpreter's own command line (`sys.orig_argv`);
  "" for a script, `-c` code or the interactive interpreter."""
  args, i = list(orig_argv[1:]), 0
  while i < len(args):
    arg = args[i]
    if arg == "-m":
      return args[i + 1] if i + 1 < len(args) else ""
    if arg.startswith("-m"):  # -mpackage.module
      return arg[2:]
    if arg == "-c" or arg == "-" or not arg.startswith("-"):
      return ""  # code, stdin or a script: what follows is its own argv
    i += 2 if arg in _OPTIONS_WITH_VALUE else 1
  return ""


def is_command_process(argv=None, orig_argv=None):
  """Whether this process runs one of our commands: `python -m` of a module of our packages,
  or a bert-* script (pyproject.toml's entry points)."""
  argv = sys.argv if argv is None else argv
  orig_argv = getattr(sys, "orig_argv", []) if orig_argv is None else orig_argv
  if main_module(orig_argv).partition(".")[0] in OUR_PACKAGES:
    return True
  first = argv[0] if argv else ""
  return os.path.basename(first).startswith("bert-")


def _importer():
  """The name of the module whose code runs the import being resolved now."""
  frame = sys._getframe(2)  # pylint: disable=protected-access  (past find_spec and its caller)
  while frame is not None:
    name = frame.f_globals.get("__name__", "")
    if not (name.startswith("importlib") or name.startswith("_frozen_importlib")):
      return name
    frame = frame.f_back
  return ""


class _SkipOptionalImports(importlib.abc.MetaPathFinder):
  """Reports the `_SKIPPED` packages as absent to the modules that import them optionally."""

  def find_spec(self, fullname, path=None, target=None):  # pylint: disable=unused-argument
    importers = _SKIPPED.get(fullname.partition(".")[0])
    if importers:
      importer = _importer()
      if any(importer == name or importer.startswith(name + ".") for name in importers):
        raise ModuleNotFoundError(f"No module named {fullname!r} (not needed by this "
                                  "command: data_prep/lean_startup.py)", name=fullname)
    return None


def skip_optional_imports(argv=None, orig_argv=None, meta_path=None):
  """In a command's process and before TensorFlow is imported, installs the finder (once);
  returns whether it is installed."""
  meta_path = sys.meta_path if meta_path is None else meta_path
  if any(isinstance(finder, _SkipOptionalImports) for finder in meta_path):
    return True
  if not is_command_process(argv, orig_argv) or "tensorflow" in sys.modules:
    return False
  meta_path.insert(0, _SkipOptionalImports())
  return True
