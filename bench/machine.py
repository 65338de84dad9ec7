"""What the bench scripts share: the machine they ran on and the MiniLM weights they load."""

import platform


def cpu_model():
  """The CPU's model name from /proc/cpuinfo, else what `platform` knows."""
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        if line.startswith("model name"):
          return line.split(":", 1)[1].strip()
  except OSError:
    pass
  return platform.processor() or "?"


def minilm_dir():
  """The installed MiniLM model folder; exits naming the pip command when it is missing."""
  # Imported here, not at the top: some scripts import this module before they put the
  # repository on sys.path (or never do, needing only cpu_model).
  from official_bert.interop import packaged_weights
  path = packaged_weights.minilm_dir()
  if path is None:
    raise SystemExit(packaged_weights.MINILM_INSTALL)
  return path
