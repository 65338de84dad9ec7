"""One run at a time in an --output_dir (`output_lock`): a second run there stops with a
message before it writes anything; the lock goes with its process."""

import os
import subprocess
import sys

from conftest import REPO
from conftest import run_command
from conftest import tiny_model_folder
import pytest

from official_bert.training import output_lock

_HOLD = """
import importlib.util, sys, time
spec = importlib.util.spec_from_file_location("output_lock", sys.argv[1])
lock = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lock)
with lock.held(sys.argv[2]):
  print("held", flush=True)
  time.sleep(120)
"""


def test_a_second_run_in_a_held_output_dir_is_refused(tmp_path):
  out = tmp_path / "out"
  holder = subprocess.Popen(
      [sys.executable, "-c", _HOLD, os.path.join(REPO, "official_bert", "training",
                                                 "output_lock.py"), str(out)],
      stdout=subprocess.PIPE, text=True)
  try:
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(ValueError, match=f"--output_dir={out} is being written by another run"):
      with output_lock.held(str(out)):
        pass
    proc = run_command("official_bert.run_pretraining", "--do_train", f"--output_dir={out}",
                       "--input_file=/nonexistent/*", "--bert_config_file=/nonexistent.json")
    assert proc.returncode == 1 and "is being written by another run" in proc.stderr, (
        proc.stderr[-2000:])
    assert not out.exists()  # nothing written
    # Multi-worker runs share the folder: no lock.
    with output_lock.held(str(out), "multi_worker_mirrored"):
      pass
  finally:
    holder.kill()
    holder.wait()
  with output_lock.held(str(out)):  # released with its process
    with output_lock.held(str(out)):  # and reentrant in one process
      pass


def test_a_run_stopped_by_bad_input_leaves_no_empty_output_dir(tmp_path):
  model = tiny_model_folder(tmp_path / "model")
  train = tmp_path / "train.csv"
  train.write_text("sentence,label\na b,x\nc,y\n")  # no column "text"
  for out, existed in ((tmp_path / "new", False), (tmp_path / "mine", True)):
    if existed:
      out.mkdir()  # the user's own empty folder stays
    proc = run_command("official_bert.run_classifier", f"--train_file={train}", "--do_train",
                       f"--init_checkpoint={model}", f"--output_dir={out}")
    assert proc.returncode == 1 and "no column 'text'" in proc.stderr, proc.stderr[-2000:]
    assert out.exists() == existed
