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


def cgroup_cpu_limit(root="/sys/fs/cgroup"):
  """The CPU bandwidth quota in CPUs (a float), or None where there is none: cgroup v2's
  `cpu.max` ("QUOTA PERIOD" or "max PERIOD"), else v1's cpu.cfs_quota_us / cfs_period_us."""
  limit = _read(os.path.join(root, "cpu.max"))
  if limit:
    quota, _, period = limit.partition(" ")
    if quota != "max" and period:
      return int(quota) / int(period)
    return None
  quota = _read(os.path.join(root, "cpu", "cpu.cfs_quota_us"))
  period = _read(os.path.join(root, "cpu", "cpu.cfs_period_us"))
  if quota and period and int(quota) > 0:
    return int(quota) / int(period)
  return None


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
              environ=None):
  """Sizes TensorFlow's pools as the module docstring says, before the TF context starts;
  returns {pool: threads} of what it set (empty where it left TensorFlow's choice)."""
  environ = os.environ if environ is None else environ
  cpus = allowed_cpus() if cpus is None else cpus
  threads, why = default_threads(cpus, cgroup_cpu_limit(cgroup_root), sysfs)
  if threads >= len(cpus):  # TensorFlow's own number: one per CPU the process may use
    return {}
  setters = {
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
