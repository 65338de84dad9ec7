"""TensorFlow's CPU pools sized to the usable physical cores (training/cpu_threads.py): the
cgroup quota (v2 and v1), SMT siblings counted once, a user's TF_NUM_*_THREADS kept, and the
pools really set in a fresh process before the TF context starts."""

import os
import subprocess
import sys

from conftest import REPO

from official_bert.training import cpu_threads


def _write(path, text):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w", encoding="ascii") as f:
    f.write(text + "\n")


def _topology(root, core_of_cpu):
  """A fake /sys/devices/system/cpu: cpu N on core `core_of_cpu[N]` of package 0."""
  for cpu, core in enumerate(core_of_cpu):
    _write(os.path.join(root, f"cpu{cpu}", "topology", "core_id"), str(core))
    _write(os.path.join(root, f"cpu{cpu}", "topology", "physical_package_id"), "0")
  return str(root)


def test_cgroup_limit_v2_v1_and_none(tmp_path):
  v2 = tmp_path / "v2"
  _write(str(v2 / "cpu.max"), "250000 100000")
  assert cpu_threads.cgroup_cpu_limit(str(v2)) == 2.5
  _write(str(v2 / "cpu.max"), "max 100000")
  assert cpu_threads.cgroup_cpu_limit(str(v2)) is None
  v1 = tmp_path / "v1"
  _write(str(v1 / "cpu" / "cpu.cfs_quota_us"), "400000")
  _write(str(v1 / "cpu" / "cpu.cfs_period_us"), "100000")
  assert cpu_threads.cgroup_cpu_limit(str(v1)) == 4.0
  _write(str(v1 / "cpu" / "cpu.cfs_quota_us"), "-1")  # v1's "no limit"
  assert cpu_threads.cgroup_cpu_limit(str(v1)) is None
  assert cpu_threads.cgroup_cpu_limit(str(tmp_path / "absent")) is None
  _write(str(v2 / "cpu.max"), "garbage")  # unreadable: no limit, not a failed command
  assert cpu_threads.cgroup_cpu_limit(str(v2), str(tmp_path / "absent")) is None


def test_cgroup_limit_of_a_nested_cgroup_is_the_smallest_on_its_path(tmp_path):
  self_cgroup = str(tmp_path / "self_cgroup")
  root = tmp_path / "fs"
  _write(self_cgroup, "0::/kubepods/pod1/ctr")  # cgroup v2, the process deep in the tree
  _write(str(root / "kubepods" / "pod1" / "cpu.max"), "300000 100000")  # the pod's limit
  _write(str(root / "kubepods" / "pod1" / "ctr" / "cpu.max"), "max 100000")
  _write(str(root / "kubepods" / "cpu.max"), "800000 100000")
  assert cpu_threads.cgroup_cpu_limit(str(root), self_cgroup) == 3.0
  # cgroup v1 inside a container: /proc/self/cgroup names the host's path, which is not
  # mounted here; the container's own cgroup is the mount's root.
  _write(self_cgroup, "4:memory:/docker/abc\n2:cpu,cpuacct:/docker/abc")
  v1 = tmp_path / "v1"
  _write(str(v1 / "cpu" / "cpu.cfs_quota_us"), "150000")
  _write(str(v1 / "cpu" / "cpu.cfs_period_us"), "100000")
  assert cpu_threads.cgroup_cpu_limit(str(v1), self_cgroup) == 1.5


def test_smt_siblings_count_once_and_the_quota_caps(tmp_path):
  sysfs = _topology(tmp_path, [0, 1, 2, 3, 0, 1, 2, 3])  # 4 cores, 2 threads each
  assert cpu_threads.physical_cores(range(8), sysfs) == 4
  assert cpu_threads.physical_cores([0, 4], sysfs) == 1  # two siblings of one core
  assert cpu_threads.default_threads(list(range(8)), None, sysfs)[0] == 4
  assert cpu_threads.default_threads(list(range(8)), 2.5, sysfs)[0] == 3  # rounded up
  assert cpu_threads.default_threads(list(range(8)), 0.5, sysfs)[0] == 1
  # No topology to read: each CPU is a core.
  assert cpu_threads.physical_cores(range(6), str(tmp_path / "none")) == 6


def _configure(*args, **kwargs):
  """(what configure says it set, what reached the setters) with recording setters."""
  got = {}
  setters = {pool: (lambda n, pool=pool: got.__setitem__(pool, n)) for pool in cpu_threads.ENV}
  return cpu_threads.configure(*args, setters=setters, **kwargs), got


def test_configure_sizes_both_pools_keeps_the_users_and_leaves_a_plain_machine(tmp_path):
  sysfs = _topology(tmp_path / "sys", [0, 1, 2, 3, 0, 1, 2, 3])
  cgroup = tmp_path / "cgroup"
  _write(str(cgroup / "cpu.max"), "200000 100000")
  nowhere = str(tmp_path / "none")  # no /proc/self/cgroup of this machine's
  # A 2-CPU limit on 8 CPUs: both pools 2 (TensorFlow would take 8).
  assert _configure(list(range(8)), str(cgroup), sysfs, {}, nowhere) == ({
      "intra_op": 2,
      "inter_op": 2
  }, {
      "intra_op": 2,
      "inter_op": 2
  })
  # SMT without a limit: one thread per core.
  assert _configure(list(range(8)), nowhere, sysfs, {}, nowhere)[1] == {
      "intra_op": 4,
      "inter_op": 4
  }
  # The user's TF_NUM_INTRAOP_THREADS stays theirs.
  assert _configure(list(range(8)), str(cgroup), sysfs, {"TF_NUM_INTRAOP_THREADS": "6"},
                    nowhere) == ({
                        "inter_op": 2
                    }, {
                        "inter_op": 2
                    })
  # One thread per CPU already (no SMT, no limit): TensorFlow's choice is left alone.
  plain = _topology(tmp_path / "plain", [0, 1, 2, 3])
  assert _configure([0, 1, 2, 3], nowhere, plain, {}, nowhere) == ({}, {})


def test_configure_after_the_context_started_changes_nothing_and_does_not_raise(tmp_path):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  tf.constant(1.0) + 1.0  # the context is up in this process
  before = (tf.config.threading.get_intra_op_parallelism_threads(),
            tf.config.threading.get_inter_op_parallelism_threads())
  sysfs = _topology(tmp_path, [0, 0, 1, 1])
  assert cpu_threads.configure([0, 1, 2, 3], str(tmp_path / "none"), sysfs, {},
                               str(tmp_path / "none")) == {}
  assert (tf.config.threading.get_intra_op_parallelism_threads(),
          tf.config.threading.get_inter_op_parallelism_threads()) == before


_COMMAND_CHILD = """
import tensorflow as tf
from official_bert.training import cpu_threads, runner, settings
cpu_threads.allowed_cpus = lambda: [0, 1, 2, 3]
cpu_threads.cgroup_cpu_limit = lambda *args: 1.0  # a 1-CPU container on 4 CPUs
runner.setup_runtime(settings.FinetuningSettings())
print(tf.config.threading.get_intra_op_parallelism_threads(),
      tf.config.threading.get_inter_op_parallelism_threads())
"""


def test_every_command_sizes_the_pools_in_setup_runtime():
  """run_* and run_pretraining start through `runner.setup_runtime`, before any TF op."""
  env = {k: v for k, v in os.environ.items() if not k.startswith("TF_NUM_")}
  out = subprocess.run([sys.executable, "-c", _COMMAND_CHILD],
                       cwd=REPO,
                       check=True,
                       capture_output=True,
                       text=True,
                       env=dict(env, TF_CPP_MIN_LOG_LEVEL="3")).stdout
  assert out.split() == ["1", "1"]
