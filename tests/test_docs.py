"""README.md and docs/*.md: every page linked, every link resolves, every command exists.

A short README that links to one page per topic (issue 25): every docs/*.md page is linked
from README.md, every relative link (and its #anchor) of the README and the pages leads
somewhere, README.md lists every command module, and every command line of a ```sh, ```bash
or ```shell block names a command that exists with flags it defines (and, for a flag with
choices, one of them). The flags are read in
one subprocess that runs each command's `__main__` block up to its launcher (absl's
`app.run`), so they are exactly what the command defines when it runs.
"""

import functools
import glob
import json
import os
import re
import shlex
import subprocess
import sys
import tomllib

from conftest import child_pythonpath

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = ["README.md"] + sorted(
    os.path.relpath(p, REPO) for p in glob.glob(os.path.join(REPO, "docs", "*.md")))
MAX_README_LINES = 210
COMMAND_PACKAGES = ("data_prep", "official_bert")
SHELL_LANGUAGES = ("sh", "bash", "shell")
# absl's parser handles these itself (app.run defines the help flags, --flagfile and --undefok
# are read before any flag); absl.logging's own flags are found in the subprocess.
ABSL_FLAGS = {"help", "helpshort", "helpfull", "helpxml", "flagfile", "undefok"}

FENCE = re.compile(r"^```(\S*)\n(.*?)^```", flags=re.S | re.M)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} +(.+?) *#* *$", flags=re.M)


def read(page):
  with open(os.path.join(REPO, page), encoding="utf-8") as f:
    return f.read()


def prose(text):
  """The text without its fenced blocks and inline code (where a `#` or `[x](y)` is code)."""
  return re.sub(r"`[^`\n]*`", "", FENCE.sub("", text))


def slug(heading):
  """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
  return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@functools.cache
def anchors(page):
  return {slug(h) for h in HEADING.findall(FENCE.sub("", read(page)))}


def links(page):
  """(target page relative to the repo, anchor) of each relative link of `page`."""
  for target in LINK.findall(prose(read(page))):
    if re.match(r"[a-z]+:", target):  # https:, mailto:
      continue
    path, _, anchor = target.partition("#")
    path = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
    yield target, path, anchor


def test_every_page_is_linked_from_the_readme():
  linked = {path for _, path, _ in links("README.md")}
  unlinked = [p for p in PAGES[1:] if p not in linked]
  assert not unlinked, "pages README.md does not link to: " + ", ".join(unlinked)


def test_every_link_resolves():
  broken = []
  for page in PAGES:
    for target, path, anchor in links(page):
      if not os.path.exists(os.path.join(REPO, path)):
        broken.append(f"{page}: {target} (no {path})")
      elif anchor and path.endswith(".md") and anchor not in anchors(path):
        broken.append(f"{page}: {target} (no heading #{anchor} in {path})")
  assert not broken, "broken links:\n" + "\n".join(broken)


def test_the_readme_stays_short():
  assert read("README.md").count("\n") <= MAX_README_LINES


def command_modules():
  """The modules of the packages' top level that run as programs (`python -m MODULE`)."""
  found = []
  for package in COMMAND_PACKAGES:
    for path in sorted(glob.glob(os.path.join(REPO, package, "*.py"))):
      with open(path, encoding="utf-8") as f:
        if re.search(r'^if __name__ == "__main__":', f.read(), flags=re.M):
          found.append(f"{package}.{os.path.basename(path)[:-3]}")
  return found


def test_the_readme_lists_every_command():
  listed = set(re.findall(r"python -m ((?:data_prep|official_bert)\.\w+)", read("README.md")))
  commands = set(command_modules())
  assert not commands - listed, f"commands missing from README.md: {sorted(commands - listed)}"
  assert not listed - commands, f"README.md lists no such commands: {sorted(listed - commands)}"


def scripts():
  """`bert-*` console script -> module, from pyproject.toml."""
  with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
    entries = tomllib.load(f)["project"]["scripts"]
  return {name: target.split(":")[0] for name, target in entries.items()}


def command_lines():
  """(page, module, [(flag, value)]) of every command in the pages' shell blocks: `python -m
  MODULE`, `python path/to/module.py` and the `bert-*` scripts."""
  by_script = scripts()
  found = []
  for page in PAGES:
    for language, block in FENCE.findall(read(page)):
      if language not in SHELL_LANGUAGES:
        continue
      for line in block.replace("\\\n", " ").splitlines():
        words = shlex.split(re.sub(r"(^|\s)#.*", "", line))
        for i, word in enumerate(words):
          module = None
          if re.fullmatch(r"(\S*/)?python3?", word) and i + 1 < len(words):
            if words[i + 1] == "-m" and i + 2 < len(words):
              module, args = words[i + 2], words[i + 3:]
            elif words[i + 1].endswith(".py"):
              module, args = words[i + 1][:-3].replace("/", "."), words[i + 2:]
          elif word in by_script:
            module, args = by_script[word], words[i + 1:]
          if module:
            passed = [a[2:].partition("=") for a in args if a.startswith("--") and len(a) > 2]
            found.append((page, module, [(name, value) for name, _, value in passed]))
  return found


_FLAGS_SCRIPT = r"""
import json, runpy, sys, warnings
from absl import app, flags
import absl.logging  # noqa: F401  # its flags (--logtostderr, --v, ...) count as defined
from data_prep import cli

class Stop(Exception):
  pass

launched = {}

def fake_launch(*args, pass_through_unknown=False, **kwargs):
  launched["pass_through"] = pass_through_unknown
  raise Stop

def fake_run(*args, **kwargs):
  raise Stop

cli.launch, app.run = fake_launch, fake_run
result = {"absl": sorted(flags.FLAGS)}
for module in sys.argv[1:]:
  launched.clear()
  before = set(flags.FLAGS)
  try:
    with warnings.catch_warnings():
      warnings.simplefilter("ignore", RuntimeWarning)  # "found in sys.modules": harmless
      runpy.run_module(module, run_name="__main__", alter_sys=False)
    error = "it never reached its launcher"
  except Stop:
    error = None
  except Exception as e:  # pylint: disable=broad-except
    error = f"{type(e).__name__}: {e}"
  new = set(flags.FLAGS) - before
  result[module] = {"error": error, "flags": sorted(new),
                    "booleans": sorted(n for n in new if flags.FLAGS[n].boolean),
                    "choices": {n: list(getattr(flags.FLAGS[n].parser, "enum_values", None) or [])
                                for n in new},
                    "pass_through": launched.get("pass_through", False)}
  for name in new:
    delattr(flags.FLAGS, name)
if any(v["pass_through"] for k, v in result.items() if k != "absl"):
  # Arguments that are not the command's flags go to Apache Beam's pipeline options.
  from apache_beam.options import pipeline_options
  parser = pipeline_options._BeamArgumentParser(allow_abbrev=False)
  for cls in {str(c): c for c in pipeline_options.PipelineOptions.__subclasses__()}.values():
    cls._add_argparse_args(parser)
  result["beam"] = sorted(s[2:] for a in parser._actions for s in a.option_strings
                          if s.startswith("--"))
print("FLAGS_JSON " + json.dumps(result))
"""


def defined_flags(modules):
  """{module: {"error", "flags", "booleans", "choices", "pass_through"}, "absl": [...],
  "beam": [...]}."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=child_pythonpath(REPO))
  out = subprocess.run([sys.executable, "-c", _FLAGS_SCRIPT, *modules], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=300, check=False)
  marker = [line for line in out.stdout.splitlines() if line.startswith("FLAGS_JSON ")]
  assert out.returncode == 0 and marker, out.stderr[-3000:]
  return json.loads(marker[0][len("FLAGS_JSON "):])


def module_exists(module):
  base = os.path.join(REPO, *module.split("."))
  return os.path.isfile(base + ".py") or os.path.isfile(os.path.join(base, "__main__.py"))


def test_every_documented_command_and_flag_exists():
  lines = command_lines()
  assert len(lines) >= 30, "the pages' shell blocks lost their commands"
  missing = sorted({f"{page}: python -m {m}" for page, m, _ in lines if not module_exists(m)})
  assert not missing, "documented commands that do not exist:\n" + "\n".join(missing)
  known = defined_flags(sorted({m for _, m, _ in lines}))
  wrong = []
  for page, module, passed in lines:
    command = known[module]
    if command["error"]:
      wrong.append(f"{page}: {module} does not start: {command['error']}")
      continue
    valid = set(command["flags"]) | set(known["absl"]) | ABSL_FLAGS
    valid |= {"no" + name for name in command["booleans"]}
    if command["pass_through"]:
      valid |= set(known["beam"])
    for name, value in passed:
      choices = command["choices"].get(name)
      if name not in valid:
        wrong.append(f"{page}: {module} --{name}")
      elif choices and value and value not in choices:
        wrong.append(f"{page}: {module} --{name}={value} (not one of {choices})")
  wrong = sorted(set(wrong))
  assert not wrong, "flags the command does not define, or bad choices:\n" + "\n".join(wrong)
