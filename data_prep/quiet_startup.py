"""Keeps TensorFlow's C++ start-up noise out of our tools' output.

TensorFlow logs from C++ at import and first device use: on every machine an INFO line about
CPU instructions and "Could not find cuda drivers", and on a machine without an NVIDIA driver
an ERROR "failed call to cuInit", although nothing is wrong there. Before TensorFlow is
imported, and only if the user has not set `TF_CPP_MIN_LOG_LEVEL` themselves, we set it: to 3
(no C++ log lines; failures still raise Python exceptions) where no NVIDIA driver is present,
and to 1 (warnings and errors shown) where one is, so real GPU problems stay visible.
Python-side logs (absl: progress, summaries) are not affected.
"""

import os

_NVIDIA_DRIVER_PATHS = ("/proc/driver/nvidia", "/dev/nvidiactl", "/dev/nvidia0")


def has_nvidia_driver():
  return any(os.path.exists(path) for path in _NVIDIA_DRIVER_PATHS)


def quiet_tensorflow_startup(environ=os.environ):
  """Sets TF_CPP_MIN_LOG_LEVEL as the module doc says, unless already set; returns it."""
  if "TF_CPP_MIN_LOG_LEVEL" not in environ:
    environ["TF_CPP_MIN_LOG_LEVEL"] = "1" if has_nvidia_driver() else "3"
  return environ["TF_CPP_MIN_LOG_LEVEL"]
