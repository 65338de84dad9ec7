"""TensorFlow's CPU thread pools sized to the cores this process may use (TF-only).

TensorFlow sizes its intra-op and inter-op pools to the CPUs the process may be scheduled on
(its affinity mask). Two common machines get that wrong:
- In a container with a CPU limit (Docker `--cpus`, a Kubernetes CPU limit: a cgroup
  bandwidth quota), the affinity mask still holds the whole host: a 4-CPU pod on a 96-CPU node
  runs 96 threads, which the kernel throttles to 4 CPUs' time.
- With simultaneous multithreading, each core counts twice; the math kernels then share a
  core's units between two threads. PyTorch and Intel's TensorFlow guide use one thread per
  physical core.
So the commands (`setup_runtime`) size both pools to the physical cores among the CPUs the
process may use, capped by the cgroup quota. A pool the user sized (TF_NUM_INTRAOP_THREADS,
TF_NUM_INTEROP_THREADS) is left as set, and so is everything on a machine where the rule gives
TensorFlow's own number.
"""

import math
import os

from absl import logging
import tensorflow as tf

ENV = {"intra_op": "TF_NUM_INTRAOP_THREADS", "inter_op": "TF_NUM_INTEROP_THREADS"}


def _read(path):
  try:
    with open(path, encoding="ascii") as f:
      return f.read().strip()
  except OSError:
    return None


def _limit(quota, period):
  """CPUs of one cgroup's quota and period (strings); None for "max" (v2) or -1 (v1)."""
  try:
    quota, period = int(quota), int(period)
  except (TypeError, ValueError):  # absent, "max", or not ours to read
    return None
  return quota / period if quota > 0 and period > 0 else None


def _own_cgroups(self_cgroup, controller):
  """This process's cgroup in the hierarchy of `controller` ("" = cgroup v2's "0::PATH"; "cpu"
  = v1's "N:cpu,cpuacct:PATH") and each of its ancestors, deepest first, "" (the root) last."""
  path = ""
  for line in (_read(self_cgroup) or "").splitlines():
    fields = line.split(":", 2)
    if len(fields) == 3 and controller in fields[1].split(","):
      path = fields[2]
      break
  parts = [part for part in path.split("/") if part]
  return ["/".join(parts[:n]) for n in range(len(parts), -1, -1)]


def cgroup_cpu_limit(root="/sys/fs/cgroup", self_cgroup="/proc/self/cgroup"):
  """The CPU bandwidth quota in CPUs (a float), or None where there is none: the smallest
  over this process's cgroup and its ancestors (a limit above applies too) of v2's `cpu.max`
  ("QUOTA PERIOD") and v1's cpu.cfs_quota_us / cpu.cfs_period_us. In a container whose own
  cgroup is mounted at `root` (/proc/self/cgroup then names the host's path), the root's."""
  limits = []
  for rel in _own_cgroups(self_cgroup, ""):
    quota, _, period = (_read(os.path.join(root, rel, "cpu.max")) or "").partition(" ")
    limits.append(_limit(quota, period))
  for rel in _own_cgroups(self_cgroup, "cpu"):
    folder = os.path.join(root, "cpu", rel)
    limits.append(
        _limit(_read(os.path.join(folder, "cpu.cfs_quota_us")),
               _read(os.path.join(folder, "cpu.cfs_period_us"))))
  limits = [limit for limit in limits if limit is not None]
  return min(limits) if limits else None


def physical_cores(cpus, sysfs="/sys/devices/system/cpu"):
  """How many distinct cores the logical CPUs `cpus` sit on (SMT siblings count once); where
  the topology cannot be read, each CPU counts as a core."""
  cores = set()
  for cpu in cpus:
    topology = os.path.join(sysfs, f"cpu{cpu}", "topology")
    package, core = (_read(os.path.join(topology, "physical_package_id")),
                     _read(os.path.join(topology, "core_id")))
    cores.add((package, core) if core is not None else ("cpu", cpu))
  return len(cores)


def allowed_cpus():
  """The logical CPUs this process may run on."""
  if hasattr(os, "sched_getaffinity"):
    return sorted(os.sched_getaffinity(0))
  return list(range(os.cpu_count() or 1))


def default_threads(cpus=None, limit=None, sysfs="/sys/devices/system/cpu"):
  """(threads, why): one thread per physical core among `cpus`, at most the quota `limit`
  (rounded up: a 2.5-CPU limit runs 3 threads), at least 1."""
  cpus = allowed_cpus() if cpus is None else cpus
  cores = physical_cores(cpus, sysfs)
  threads, why = cores, f"{cores} physical cores of {len(cpus)} CPUs"
  if limit is not None and math.ceil(limit) < threads:
    threads, why = max(1, math.ceil(limit)), f"a cgroup CPU limit of {limit:g}"
  return threads, why


def configure(cpus=None,
              cgroup_root="/sys/fs/cgroup",
              sysfs="/sys/devices/system/cpu",
              environ=None,
              self_cgroup="/proc/self/cgroup",
              setters=None):
  """Sizes TensorFlow's pools as the module docstring says, before the TF context starts;
  returns {pool: threads} of what it set (empty where it left TensorFlow's choice).
  `setters` ({pool: fn(threads)}) stand in for tf.config.threading's in tests."""
  environ = os.environ if environ is None else environ
  cpus = allowed_cpus() if cpus is None else cpus
  threads, why = default_threads(cpus, cgroup_cpu_limit(cgroup_root, self_cgroup), sysfs)
  if threads >= len(cpus):  # TensorFlow's own number: one per CPU the process may use
    return {}
  setters = setters or {
      "intra_op": tf.config.threading.set_intra_op_parallelism_threads,
      "inter_op": tf.config.threading.set_inter_op_parallelism_threads
  }
  done = {}
  for pool, set_threads in setters.items():
    if environ.get(ENV[pool]):
      continue
    try:
      set_threads(threads)
    except RuntimeError:  # the context started already (a second run in one process)
      continue
    done[pool] = threads
  if done:
    logging.info("CPU threads: %s (%s; TensorFlow would take %d; set %s to choose)",
                 ", ".join(f"{pool} {n}" for pool, n in done.items()), why, len(cpus),
                 " / ".join(ENV[pool] for pool in done))
  return done
