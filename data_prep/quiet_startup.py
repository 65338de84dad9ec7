"""Keeps TensorFlow's C++ start-up noise out of our tools' output.

TensorFlow logs from C++ at import and first device use: on every machine an INFO line about
CPU instructions and "Could not find cuda drivers", and on a machine without an NVIDIA driver
an ERROR "failed call to cuInit", although nothing is wrong there. Before TensorFlow is
imported, and only if the user has not set `TF_CPP_MIN_LOG_LEVEL` themselves, we set it: to 3
(no C++ log lines; failures still raise Python exceptions) where no NVIDIA driver is present,
and to 1 (warnings and errors shown) where one is, so real GPU problems stay visible.
Python-side logs (absl: progress, summaries) are not affected.

When the user's program imported TensorFlow before us (`import tensorflow as tf` first), its
level is fixed already: TensorFlow reads `TF_CPP_MIN_LOG_LEVEL` once, at its first log line,
during its import. Its import lines are then the user's; the cuInit ERROR still to come would
look like ours. So in that case, without a driver and with the variable unset, we make the
first device use now (`tf.config.list_physical_devices`, which leaves every `tf.config`
setting open), with file descriptor 2 pointed at /dev/null for that call only.

`import jax` sets the variable to 1 where it is unset, and TensorFlow imports JAX where it is
installed (`tensorflow.lite`). That 1 is not the user's choice: it is read as unset where the
value is 1, JAX is imported and the process did not start with the variable
(`_set_by_jax`; Linux's /proc/self/environ: elsewhere the value stays the user's). A 1 that
the program itself put in `os.environ` before importing JAX reads as JAX's too.
"""

import os
import sys

_NVIDIA_DRIVER_PATHS = ("/proc/driver/nvidia", "/dev/nvidiactl", "/dev/nvidia0")


def has_nvidia_driver():
  return any(os.path.exists(path) for path in _NVIDIA_DRIVER_PATHS)


def _set_by_jax(environ, modules, initial_environ=None):
  """Whether TF_CPP_MIN_LOG_LEVEL is JAX's default (module doc). `initial_environ`: the
  variable names the process started with (None: /proc/self/environ, where readable)."""
  if environ.get("TF_CPP_MIN_LOG_LEVEL") != "1" or "jax" not in modules:
    return False
  if initial_environ is None:
    try:
      with open("/proc/self/environ", "rb") as f:
        initial_environ = {entry.split(b"=", 1)[0].decode("utf-8", "replace")
                           for entry in f.read().split(b"\0") if entry}
    except OSError:  # no /proc (macOS, Windows): the value is left as found
      return False
  return "TF_CPP_MIN_LOG_LEVEL" not in initial_environ


def quiet_tensorflow_startup(environ=os.environ, modules=sys.modules, initial_environ=None):
  """Sets TF_CPP_MIN_LOG_LEVEL as the module doc says, unless already set (JAX's default
  aside); returns it. If TensorFlow is in `modules` already (imported first), starts its
  devices quietly instead (module doc). `initial_environ`: as `_set_by_jax`'s."""
  if ("TF_CPP_MIN_LOG_LEVEL" not in environ
      or _set_by_jax(environ, modules, initial_environ)):
    environ["TF_CPP_MIN_LOG_LEVEL"] = "1" if has_nvidia_driver() else "3"
    if environ["TF_CPP_MIN_LOG_LEVEL"] == "3" and "tensorflow" in modules:
      start_devices_quietly(modules["tensorflow"])
  return environ["TF_CPP_MIN_LOG_LEVEL"]


def start_devices_quietly(tf):
  """TensorFlow's first device use (its CUDA probe) with nothing written to fd 2; returns
  whether it ran (not while TensorFlow's own import is under way, nor without an fd 2)."""
  list_devices = getattr(getattr(tf, "config", None), "list_physical_devices", None)
  if list_devices is None:
    return False
  try:
    if sys.stderr is not None:
      sys.stderr.flush()
    saved = os.dup(2)
  except (OSError, ValueError):
    return False
  devnull = os.open(os.devnull, os.O_WRONLY)
  try:
    os.dup2(devnull, 2)
    list_devices()
  finally:
    os.dup2(saved, 2)
    os.close(saved)
    os.close(devnull)
  return True
