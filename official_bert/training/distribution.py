"""`tf.distribute` strategies by name, one training loop for all of them."""

import json
import os

from absl import logging
import keras
import tensorflow as tf

from official_bert.training.settings import STRATEGIES


def use_logical_cpus(count):
  """Splits the host CPU into `count` logical devices (before TF initializes them), so a
  MirroredStrategy over CPUs can be tested without GPUs. A process whose CPU is already split
  so (by an earlier run in it) keeps its devices; one split otherwise, or already initialized
  whole, is refused by name: TensorFlow fixes its devices once per process."""
  cpu = tf.config.list_physical_devices("CPU")[0]
  current = tf.config.get_logical_device_configuration(cpu)
  if current is not None and len(current) == count:
    return
  try:
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(count)])
  except RuntimeError as e:
    have = len(tf.config.list_logical_devices("CPU"))
    raise ValueError(f"--cpu_devices={count}: this process's TensorFlow already runs on {have} "
                     "logical CPU device(s), fixed when it started; run the command in a fresh "
                     "process") from e


def get_strategy(name="one_device",
                 num_gpus=None,
                 tpu=None,
                 num_cpus=None,
                 tpu_zone=None,
                 gcp_project=None):
  """A strategy by name.

  Args:
    name: one of STRATEGIES.
    num_gpus: GPUs to use (default: all visible); 0 means CPU.
    tpu: TPU address or name for `tpu` ("" or "local" for a local TPU VM).
    num_cpus: with no GPU, mirror over this many logical CPU devices (testing).
    tpu_zone, gcp_project: where to look a TPU name up (default: from the metadata server).
  """
  if name not in STRATEGIES:
    raise ValueError(f"--distribution_strategy={name!r}: expected one of {STRATEGIES}")
  if name == "multi_worker_mirrored":
    # Before anything initializes the TF context: collectives are configured at start-up.
    config = json.loads(os.environ.get("TF_CONFIG", "{}"))
    if not config.get("cluster"):
      logging.warning("multi_worker_mirrored without TF_CONFIG: a single worker")
    return tf.distribute.MultiWorkerMirroredStrategy()
  gpus = tf.config.list_logical_devices("GPU")
  if num_gpus is not None:
    if num_gpus > len(gpus):
      raise ValueError(f"--num_gpus={num_gpus} but only {len(gpus)} GPU(s) are visible")
    gpus = gpus[:num_gpus]
  if name == "one_device":
    return tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else "/cpu:0")
  if name == "mirrored":
    devices = [d.name for d in gpus]
    if not devices:
      cpus = tf.config.list_logical_devices("CPU")
      devices = [d.name for d in cpus[:num_cpus or len(cpus)]]
    return tf.distribute.MirroredStrategy(devices)
  try:
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
        tpu="" if tpu in (None, "local") else tpu, zone=tpu_zone, project=gcp_project)
    if tpu not in (None, "", "local"):
      tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
  except Exception as e:  # pylint: disable=broad-except  (Google Cloud's errors have no base)
    # Away from Google Cloud the resolver fails with a credentials or name lookup error (or
    # finds no TPU): one line naming the flags, not a traceback.
    where = f"--tpu_name={tpu}" if tpu not in (None, "") else "a local TPU"
    raise ValueError(f"--use_tpu: cannot reach {where} (--tpu_zone={tpu_zone}, "
                     f"--gcp_project={gcp_project}): {type(e).__name__}: {e}. Run on a Cloud "
                     "TPU VM (--tpu_name=local) or with Google Cloud credentials") from None
  return tf.distribute.TPUStrategy(resolver)


def is_tpu(strategy):
  """Whether `strategy` runs TPU programs, which take static shapes only."""
  return isinstance(strategy, (tf.distribute.TPUStrategy,
                               tf.distribute.experimental.TPUStrategy))


def is_chief(strategy):
  """Whether this worker writes checkpoints and summaries (worker 0 / single host)."""
  resolver = getattr(strategy, "cluster_resolver", None)
  if resolver is None or not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
    return True
  task_type, task_id = resolver.task_type, resolver.task_id
  return task_type is None or (task_type in ("chief", "worker") and task_id == 0)


def set_precision(dtype):
  """Global Keras policy for float32 | bfloat16 | float16 (mixed: float32 variables)."""
  policies = {"float32": "float32", "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}
  if dtype not in policies:
    raise ValueError(f"--dtype={dtype!r}: expected one of {sorted(policies)}")
  keras.mixed_precision.set_dtype_policy(policies[dtype])
