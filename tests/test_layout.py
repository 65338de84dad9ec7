"""The shape of the code: commands are thin, and the library never imports a command.

A command (a module of `official_bert/` or `data_prep/` with a top-level `define_flags`) holds
its flags, `main` (flags -> settings -> one library call) and launcher; the work is in the
library, which the Python API (`official_bert.api`) shares. So no library module may import a
command module.
"""

import ast
import collections
import glob
import os
import re
import tokenize

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_COMMAND_LINES = 150


def _modules():
  """{dotted name: parsed tree} of every module of the two packages."""
  out = {}
  for package in ("official_bert", "data_prep"):
    for path in glob.glob(os.path.join(REPO, package, "**", "*.py"), recursive=True):
      name = os.path.relpath(path, REPO)[:-3].replace(os.sep, ".").replace(".__init__", "")
      with open(path, encoding="utf-8") as f:
        out[name] = (path, ast.parse(f.read(), filename=path))
  return out


def _is_command(name, tree):
  top_level = name.count(".") == 1  # official_bert.run_ner, data_prep.learn_vocab
  return top_level and any(isinstance(node, ast.FunctionDef) and node.name == "define_flags"
                           for node in tree.body)


def _imports(tree):
  names = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      names.update(a.name for a in node.names)
    elif isinstance(node, ast.ImportFrom) and node.module:
      names.update([node.module] + [f"{node.module}.{a.name}" for a in node.names])
  return names


def test_commands_are_thin_and_no_library_module_imports_one():
  modules = _modules()
  commands = {name for name, (_, tree) in modules.items() if _is_command(name, tree)}
  assert {"official_bert.run_classifier", "official_bert.export",
          "data_prep.create_pretraining_data"} <= commands
  for name in sorted(commands):
    path = modules[name][0]
    with open(path, encoding="utf-8") as f:
      lines = len(f.read().splitlines())
    assert lines <= MAX_COMMAND_LINES, f"{path}: {lines} lines; move the work to the library"
  for name, (path, tree) in sorted(modules.items()):
    if name in commands:
      continue
    wrong = _imports(tree) & commands
    assert not wrong, f"{path} (library) imports the command(s) {sorted(wrong)}"


def test_data_prep_never_imports_official_bert():
  for name, (path, tree) in _modules().items():
    if name.startswith("data_prep"):
      assert not any(n.split(".")[0] == "official_bert" for n in _imports(tree)), path


# The one-way order of official_bert's layers (docs/development.md, "Layout"): a layer imports
# only those before it. training/ never reaches tasks/; interop/ never reaches training/.
LAYERS = ("modeling", "interop", "training", "tasks", "serving", "api")


def test_layers_import_only_the_layers_before_them():
  broken = []
  for name, (path, tree) in sorted(_modules().items()):
    parts = name.split(".")
    if parts[0] != "official_bert" or len(parts) < 3 or parts[1] not in LAYERS:
      continue
    rank = LAYERS.index(parts[1])
    for imported in sorted(_imports(tree)):
      target = imported.split(".")
      if (target[0] == "official_bert" and len(target) > 1 and target[1] in LAYERS
          and LAYERS.index(target[1]) > rank):
        broken.append(f"{os.path.relpath(path, REPO)} ({parts[1]}) imports {imported}")
  assert not broken, "\n".join(broken)


def test_training_never_imports_tasks_and_interop_never_imports_training():
  """The two rules the order above implies that issue 38 found broken, named on their own."""
  for name, (path, tree) in _modules().items():
    for layer, forbidden in (("training", "tasks"), ("interop", "training")):
      if name.startswith(f"official_bert.{layer}."):
        assert not any(n.startswith(f"official_bert.{forbidden}") for n in _imports(tree)), path


_NOT_FOR_MODELS = ("official_bert.interop", "official_bert.training")
_FILE_CALLS = {"gfile", "open", "read_file", "write_file", "read_text", "write_text",
               "read_bytes", "write_bytes"}


def _touches_files(tree):
  """Whether the module opens, reads or writes a file (open, tf.io.gfile, tf.io.read_file...)."""
  for node in ast.walk(tree):
    if isinstance(node, ast.Name) and node.id == "open":
      return True
    if isinstance(node, ast.Attribute) and node.attr in _FILE_CALLS:
      return True
    if isinstance(node, ast.ImportFrom) and node.module and "gfile" in node.module:
      return True
  return False


def test_models_know_no_file_format_training_or_file():
  """A model is layers and math: checkpoint names and file formats are interop's (it maps the
  names onto the model), the loop is training's, and files are read by their owners."""
  broken = []
  for name, (path, tree) in sorted(_modules().items()):
    if not name.startswith("official_bert.modeling"):
      continue
    wrong = sorted(n for n in _imports(tree)
                   if any(n == p or n.startswith(p + ".") for p in _NOT_FOR_MODELS))
    reasons = ([f"imports {wrong}"] if wrong else []) + (
        ["opens files"] if _touches_files(tree) else [])
    if reasons:
      broken.append(f"{path}: {'; '.join(reasons)}")
  assert not broken, "\n".join(broken)


def test_the_model_is_keras_on_every_backend_but_its_marked_tensorflow_part():
  """`modeling/` imports no TensorFlow (it runs on JAX and PyTorch) outside
  `modeling/tensorflow_only`, the padding-free and XLA inference paths of the exports."""
  broken = []
  for name, (path, tree) in sorted(_modules().items()):
    if (name.startswith("official_bert.modeling")
        and not name.startswith("official_bert.modeling.tensorflow_only")):
      tensorflow = sorted(n for n in _imports(tree)
                          if n == "tensorflow" or n.startswith("tensorflow."))
      if tensorflow:
        broken.append(f"{path}: imports {tensorflow}")
  assert not broken, "\n".join(broken)


_DOTTED = re.compile(r"\b((?:official_bert|data_prep)(?:\.\w+)+)(\*?)")


def _prose(path, tree):
  """The docstrings and comments of a module."""
  texts = [ast.get_docstring(node, clean=False) for node in ast.walk(tree)
           if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef))]
  with open(path, "rb") as f:
    texts += [t.string for t in tokenize.tokenize(f.readline) if t.type == tokenize.COMMENT]
  return [t for t in texts if t]


def _names(body):
  """The names a module or class body defines (functions, classes, assignments, imports)."""
  names = set()
  for node in body:
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
      names.add(node.name)
    elif isinstance(node, (ast.Assign, ast.AnnAssign)):
      targets = node.targets if isinstance(node, ast.Assign) else [node.target]
      names.update(t.id for t in targets if isinstance(t, ast.Name))
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
      names.update((a.asname or a.name).split(".")[0] for a in node.names)
  return names


def _resolves(dotted, modules):
  """Whether `official_bert.x.y.Name.member` names a module, then a name it defines, then a
  member of that class (deeper parts are not checked)."""
  parts = dotted.split(".")
  for end in range(len(parts), 0, -1):
    module = ".".join(parts[:end])
    if module in modules:
      break
  else:
    return False
  rest, body = parts[end:], modules[module][1].body
  for part in rest[:2]:
    if part not in _names(body):
      return False
    body = next((n.body for n in body if isinstance(n, ast.ClassDef) and n.name == part), [])
  return True


def test_docstrings_and_comments_name_existing_code():
  """A module or name that moved or was renamed leaves no stale `official_bert.x` behind."""
  modules = _modules()
  stale = []
  for name, (path, tree) in sorted(modules.items()):
    for text in _prose(path, tree):
      for dotted, glob_star in _DOTTED.findall(text):
        if not glob_star and not _resolves(dotted, modules):
          stale.append(f"{os.path.relpath(path, REPO)}: {dotted}")
  assert not stale, "\n".join(sorted(set(stale)))


# Modules that may open a file for writing, and why: everything else writes its outputs
# through data_prep.tfrecord_io (`write_text`, `AtomicFile`): a temporary name, renamed when
# complete, so an interrupted run never leaves a complete-looking file.
_WRITERS_ALLOWED = {
    "data_prep.tfrecord_io": "the atomic writer: opens the temporary name it renames",
    "official_bert.serving.exporter":
        "writes inside an export folder built apart and moved in when complete (folder_writes)",
    "data_prep.quiet_startup": "opens /dev/null to mute TensorFlow's device probe: no file",
    "official_bert.serving.tflite_export": "writes inside the exporter's folder (as above)",
    "official_bert.serving.onnx_quantization":
        "writes scratch files in a tempfile.TemporaryDirectory (ONNX Runtime's quantizer)",
    "official_bert.training.best_checkpoint":
        "copies into best/'s folder built beside and swapped in whole",
    "official_bert.training.output_lock":
        "opens an empty lock file in the system's temporary folder (flock): no output",
}


def _opens_for_writing(tree):
  """Line numbers of `open(...)`/`GFile(...)` calls whose mode writes, appends or creates (or
  is not a literal), and of `gfile.copy(...)`/`shutil.copy*(...)` calls."""
  lines = []
  for node in ast.walk(tree):
    if not isinstance(node, ast.Call):
      continue
    func = node.func
    name = getattr(func, "id", None) or getattr(func, "attr", None)
    if name in ("copy", "copyfile", "copy2") and re.search(r"gfile|shutil", ast.unparse(func)):
      lines.append(node.lineno)
      continue
    if name not in ("open", "GFile"):
      continue
    mode = node.args[1] if len(node.args) > 1 else next(
        (k.value for k in node.keywords if k.arg == "mode"), None)
    literal = isinstance(mode, ast.Constant) and isinstance(mode.value, str)
    if mode is not None and (not literal or set(mode.value) & set("wax+")):
      lines.append(node.lineno)
  return lines


def test_outputs_are_written_atomically():
  found = {}
  for name, (path, tree) in _modules().items():
    lines = _opens_for_writing(tree)
    if lines:
      found[name] = f"{os.path.relpath(path, REPO)}:{','.join(map(str, lines))}"
  unexpected = [f"{where}: write through data_prep.tfrecord_io (write_text, AtomicFile)"
                for name, where in sorted(found.items()) if name not in _WRITERS_ALLOWED]
  assert not unexpected, "\n".join(unexpected)


# Methods that a framework calls by name (Keras, io.RawIOBase).
_HOOKS = {"compute_output_spec", "readinto"}


def _words(paths):
  words = collections.Counter()
  for path in paths:
    with open(path, encoding="utf-8") as f:
      words.update(re.findall(r"\w+", f.read()))
  return words


def test_no_unused_or_test_only_code():
  """Every function, class, method and module constant of the packages is named again by the
  packages, the benchmarks or the docs: one that nothing names is dead code, one that only
  tests name is test code (it goes to tests/)."""
  modules = _modules()
  package = _words(path for path, _ in modules.values())
  outside = _words(glob.glob(os.path.join(REPO, "bench", "**", "*.py"), recursive=True)
                   + glob.glob(os.path.join(REPO, "docs", "*.md"))
                   + [os.path.join(REPO, "README.md")])
  tests = _words(glob.glob(os.path.join(REPO, "tests", "**", "*.py"), recursive=True))
  wrong = []
  for name, (path, tree) in sorted(modules.items()):
    defined = [(node.name, node.lineno) for node in ast.walk(tree)
               if isinstance(node, (ast.FunctionDef, ast.ClassDef))]
    defined += [(t.id, node.lineno) for node in tree.body if isinstance(node, ast.Assign)
                for t in node.targets if isinstance(t, ast.Name)]
    for n, line in defined:
      if n.startswith("__") or n in _HOOKS or package[n] > 1 or outside[n]:
        continue
      what = "only tests use it" if tests[n] else "nothing uses it"
      wrong.append(f"{os.path.relpath(path, REPO)}:{line}: {n}: {what}")
  assert not wrong, "\n".join(wrong)
