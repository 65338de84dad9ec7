"""Start-up and export logs: no CUDA noise on a machine without a GPU, no TensorFlow save
internals; our own progress and summary lines stay."""

import json
import os
import subprocess
import sys

from conftest import REPO
from conftest import UNCASED_VOCAB
from conftest import need
import pytest

from data_prep import quiet_startup
from official_bert.interop import checkpointing
from official_bert.modeling.encoder import BertEncoder

pytestmark = pytest.mark.large  # trains or runs commands: `make test`, not `make test-fast`

TINY = {"vocab_size": 30522, "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
        "intermediate_size": 32, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 32,
        "type_vocab_size": 2, "initializer_range": 0.02}


def test_level_follows_the_driver_and_never_overrides_the_user(monkeypatch):
  monkeypatch.setattr(quiet_startup, "has_nvidia_driver", lambda: False)
  assert quiet_startup.quiet_tensorflow_startup({}, modules={}) == "3"
  monkeypatch.setattr(quiet_startup, "has_nvidia_driver", lambda: True)
  assert quiet_startup.quiet_tensorflow_startup({}, modules={}) == "1"
  assert quiet_startup.quiet_tensorflow_startup({"TF_CPP_MIN_LOG_LEVEL": "0"}, modules={}) == "0"


def test_jax_default_level_is_not_the_users(monkeypatch):
  """`import jax` sets the level to 1 where it is unset (TensorFlow imports JAX where it is
  installed): that 1 is read as unset; a 1 the process started with, or any other value,
  stays the user's."""
  monkeypatch.setattr(quiet_startup, "has_nvidia_driver", lambda: False)
  jax = {"jax": object()}
  assert quiet_startup.quiet_tensorflow_startup(
      {"TF_CPP_MIN_LOG_LEVEL": "1"}, modules=jax, initial_environ=set()) == "3"
  assert quiet_startup.quiet_tensorflow_startup(
      {"TF_CPP_MIN_LOG_LEVEL": "1"}, modules=jax,
      initial_environ={"TF_CPP_MIN_LOG_LEVEL"}) == "1"
  assert quiet_startup.quiet_tensorflow_startup(
      {"TF_CPP_MIN_LOG_LEVEL": "1"}, modules={}, initial_environ=set()) == "1"
  assert quiet_startup.quiet_tensorflow_startup(
      {"TF_CPP_MIN_LOG_LEVEL": "2"}, modules=jax, initial_environ=set()) == "2"


class _FakeTensorFlow:
  """A `tensorflow` module that records its device listings and writes to fd 2 there."""

  def __init__(self):
    self.listed = 0
    self.config = self

  def list_physical_devices(self):
    self.listed += 1
    os.write(2, b"failed call to cuInit\n")
    return []


def test_tensorflow_imported_first_starts_its_devices_with_fd2_muted(monkeypatch, capfd):
  """Imported after TensorFlow, without a driver and with the variable unset: its first device
  use (the cuInit ERROR) happens now, its fd 2 output dropped; else nothing is started."""
  tf = _FakeTensorFlow()
  monkeypatch.setattr(quiet_startup, "has_nvidia_driver", lambda: False)
  assert quiet_startup.quiet_tensorflow_startup({}, modules={"tensorflow": tf}) == "3"
  assert tf.listed == 1 and "cuInit" not in capfd.readouterr().err
  os.write(2, b"fd 2 is back\n")
  assert capfd.readouterr().err == "fd 2 is back\n"
  quiet_startup.quiet_tensorflow_startup({"TF_CPP_MIN_LOG_LEVEL": "0"}, modules={"tensorflow": tf})
  monkeypatch.setattr(quiet_startup, "has_nvidia_driver", lambda: True)
  quiet_startup.quiet_tensorflow_startup({}, modules={"tensorflow": tf})
  assert tf.listed == 1  # the user's level, or a driver whose errors must show
  # While TensorFlow's own import is under way (no tf.config yet): nothing to start.
  assert quiet_startup.start_devices_quietly(object()) is False


_TF_FIRST = """
import tensorflow as tf
import official_bert as ob
print("imported", flush=True)
print(float(tf.reduce_sum(tf.ones([2]))), ob.__name__, flush=True)
"""


def test_tensorflow_imported_first_then_ours_shows_no_cuinit_error():
  """The order of a user's script: TensorFlow, then official_bert, then the first op. The
  lines of TensorFlow's own import are the user's; no CUDA ERROR comes after ours."""
  env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
  proc = subprocess.run([sys.executable, "-c", _TF_FIRST], cwd=REPO, env=env,
                        capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert proc.stdout.split() == ["imported", "2.0", "official_bert"], proc.stdout
  if not quiet_startup.has_nvidia_driver():
    assert "cuInit" not in proc.stderr and "CUDA error" not in proc.stderr, proc.stderr[-3000:]


def test_export_cli_prints_only_our_lines(tmp_path):
  config = tmp_path / "bert_config.json"
  config.write_text(json.dumps(TINY))
  encoder = BertEncoder(**TINY)
  encoder.build()
  checkpoint = checkpointing.model_checkpoint(encoder).write(str(tmp_path / "ckpt"))
  env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
  proc = subprocess.run(
      [sys.executable, "-m", "official_bert.export", f"--bert_config_file={config}",
       f"--checkpoint={checkpoint}", f"--vocab_file={need(UNCASED_VOCAB)}",
       "--model_type=encoder", f"--export_dir={tmp_path / 'export'}", "--max_seq_length=16"],
      cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  log = proc.stdout + proc.stderr
  assert "Loaded" in log and "Exported encoder (single)" in log
  noise = ("signature_serialization", "unsupported characters", "Sharding callback",
           "fingerprint", "Assets written", "cpu_feature_guard")
  if not quiet_startup.has_nvidia_driver():
    noise += ("cuInit", "cuda drivers", "CUDA")
  assert not [n for n in noise if n in log], log[-3000:]
