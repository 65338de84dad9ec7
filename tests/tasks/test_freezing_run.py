"""--freeze_encoder and --freeze_layers through run_classifier: frozen weights are
bit-identical to the initial checkpoint after training, the others moved."""


import numpy as np
import pytest
from test_glue_run_classifier import TINY
from test_glue_run_classifier import _glue_slice
from test_glue_run_classifier import run_script

from official_bert.interop import checkpointing
from official_bert.interop import weights_io
from official_bert.modeling.encoder import BertEncoder

pytestmark = pytest.mark.large  # trains or runs commands: `make test`, not `make test-fast`


def init_checkpoint(tmp_path):
  """A tiny encoder's weights (random, seeded) under their canonical names."""
  encoder = BertEncoder(**TINY)
  encoder.build()
  return checkpointing.model_checkpoint(encoder).write(str(tmp_path / "init" / "ckpt"))


def _changed(init, trained):
  """canonical name -> whether training changed it (every init tensor must be in trained)."""
  return {name: not np.array_equal(value, trained[name]) for name, value in init.items()}


@pytest.mark.parametrize("flag", ["--freeze_layers=1", "--freeze_encoder"])
def test_frozen_weights_are_bit_identical(tmp_path, flag):
  init = init_checkpoint(tmp_path)
  out = tmp_path / "out"
  run_script("official_bert.run_classifier", tmp_path, "--task_name=MRPC",
             f"--data_dir={_glue_slice(tmp_path)}", f"--output_dir={out}", "--do_train",
             f"--init_checkpoint={init}", "--learning_rate=1e-2", flag)
  before = weights_io.read_weights(init).tensors
  after = weights_io.read_weights(str(out)).tensors
  changed = _changed(before, after)
  if flag == "--freeze_encoder":
    frozen = set(before)
  else:
    frozen = {n for n in before if n.startswith(("bert/embeddings/", "bert/encoder/layer_0/"))}
  assert frozen and not any(changed[n] for n in frozen)
  # Everything else trained: every tensor of layer 1 and the pooler moved.
  assert all(changed[n] for n in set(before) - frozen)
  assert "output_weights" in after


def test_freeze_more_layers_than_the_model_has(tmp_path):
  proc = run_script("official_bert.run_classifier", tmp_path, "--task_name=MRPC",
                    f"--data_dir={_glue_slice(tmp_path)}", f"--output_dir={tmp_path / 'o'}",
                    "--do_train", "--freeze_layers=3", check=False)
  assert proc.returncode == 1
  assert "--freeze_layers=3 but the encoder has 2 layers" in proc.stderr


def test_layerwise_lr_decay_moves_lower_layers_less(tmp_path):
  """decay 0.01 over 2 layers: embeddings at 1e-4 x lr, layer 0 at 0.01 x lr, layer 1 at lr."""
  init = init_checkpoint(tmp_path)
  data = _glue_slice(tmp_path)
  out = tmp_path / "out"
  run_script("official_bert.run_classifier", tmp_path, "--task_name=MRPC", f"--data_dir={data}",
             f"--output_dir={out}", "--do_train", f"--init_checkpoint={init}",
             "--learning_rate=1e-2", "--layerwise_lr_decay=0.01")
  before = weights_io.read_weights(init).tensors
  after = weights_io.read_weights(str(out)).tensors

  def moved(prefix):
    return max(float(np.max(np.abs(after[n] - v))) for n, v in before.items()
               if n.startswith(prefix))

  top = moved("bert/encoder/layer_1/")
  assert top > 1e-3
  assert 0 < moved("bert/encoder/layer_0/") < 0.05 * top
  assert 0 < moved("bert/embeddings/") < 0.05 * moved("bert/encoder/layer_0/")
  proc = run_script("official_bert.run_classifier", tmp_path, "--task_name=MRPC",
                    f"--data_dir={data}", f"--output_dir={tmp_path / 'p'}", "--do_train",
                    "--layerwise_lr_decay=1.5", check=False)
  assert proc.returncode == 1 and "--layerwise_lr_decay" in proc.stderr
