"""A pytest plugin for measuring the suite: each test's wall time, its own CPU and the CPU of
the processes it started and waited for (`getrusage`), one JSON line per test in
$CPU_CENSUS_DIR/cpu_<pid>.jsonl (one file per xdist worker).

  CPU_CENSUS_DIR=/tmp/census PYTHONPATH=tests .venv/bin/python -m pytest -p cpu_census \
      -n 2 --dist loadfile tests

On the 2-core machines the same tree's wall time moves by 30-60 s between runs hours apart:
compare a change to the suite by the sum of its tests' CPU (docs/development.md).
"""

import json
import os
import resource
import time

import pytest

_OUT = []


def _cpu(who):
  usage = resource.getrusage(who)
  return usage.ru_utime + usage.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
  del nextitem
  if not _OUT:
    directory = os.environ.get("CPU_CENSUS_DIR", ".")
    os.makedirs(directory, exist_ok=True)
    _OUT.append(open(os.path.join(directory, f"cpu_{os.getpid()}.jsonl"), "a",  # pylint: disable=consider-using-with
                     encoding="utf-8"))
  wall = time.time()
  own, children = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
  yield
  _OUT[0].write(json.dumps({"id": item.nodeid, "wall": time.time() - wall,
                            "self": _cpu(resource.RUSAGE_SELF) - own,
                            "children": _cpu(resource.RUSAGE_CHILDREN) - children}) + "\n")
  _OUT[0].flush()
