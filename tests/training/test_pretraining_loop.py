"""run_pretraining / Trainer: equivalences across strategies, resume, signals, errors.

Runs that need a process of their own (several workers, signals, and one with --cpu_devices
splitting a fresh process's CPU) are `python -m official_bert.run_pretraining`; the others,
errors included, run the command in this process through its launcher
(`conftest.run_command`), whose CPU conftest has already split in two."""

import glob
import json
import math
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

from conftest import REPO
from conftest import UNCASED_VOCAB
from conftest import corpus_text
from conftest import graph_optimizer_on
from conftest import need
from conftest import run_command
import keras
import numpy as np
import pytest
import tensorflow as tf

from data_prep.pretraining import writer
from official_bert.interop import model_files
from official_bert.tasks.pretraining import PretrainingTask
from official_bert.training import distribution
from official_bert.training import evaluation
from official_bert.training import input_pipeline
from official_bert.training import optimization
from official_bert.training import runner
from official_bert.training import training_loop

pytestmark = pytest.mark.large  # trains or runs commands: `make test`, not `make test-fast`

SEQ, PREDS = 32, 5
TINY = dict(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=64, hidden_act="gelu", hidden_dropout_prob=0.1,
            attention_probs_dropout_prob=0.1, max_position_embeddings=64, type_vocab_size=2,
            initializer_range=0.02)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
  root = tmp_path_factory.mktemp("pretrain")
  corpus = root / "corpus.txt"
  corpus.write_text(corpus_text(60_000), encoding="utf-8")
  writer.run(writer.Settings(input_file=str(corpus), output_file=str(root / "data.tfrecord"),
                             vocab_file=need(UNCASED_VOCAB), max_seq_length=SEQ,
                             max_predictions_per_seq=PREDS, dupe_factor=2, num_workers=1))
  configs = {}
  for name, overrides in [("tiny", {}), ("nodrop", {"hidden_dropout_prob": 0.0,
                                                    "attention_probs_dropout_prob": 0.0}),
                          ("wider", {"hidden_size": 48}), ("vocab1000", {"vocab_size": 1000}),
                          ("onetype", {"type_vocab_size": 1})]:
    path = root / f"{name}.json"
    path.write_text(json.dumps(dict(TINY, **overrides)))
    configs[name] = str(path)
  return {"records": str(root / "data.tfrecord"), "configs": configs, "root": root}


def _args(data, out, config="tiny", **kw):
  flags = dict(bert_config_file=data["configs"][config], input_file=data["records"],
               output_dir=str(out), do_train=True, train_batch_size=8, max_seq_length=SEQ,
               max_predictions_per_seq=PREDS, num_train_steps=6, num_warmup_steps=2,
               steps_per_loop=3, save_checkpoints_steps=3, learning_rate=1e-3, deterministic=True)
  flags.update(kw)
  return [f"--{k}={v}" if not isinstance(v, bool) else (f"--{k}" if v else f"--no{k}")
          for k, v in flags.items()]


def _cli(args, env=None, check=True, timeout=300, process=True):
  if process:
    proc = subprocess.run([sys.executable, "-m", "official_bert.run_pretraining"] + args,
                          cwd=REPO, capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, **(env or {})))
  else:
    proc = run_command("official_bert.run_pretraining", *args)
  if check and proc.returncode:
    raise AssertionError(proc.stderr[-3000:])
  return proc


def _model_weights(checkpoint_dir, step=None):
  path = (os.path.join(checkpoint_dir, f"ckpt-{step}") if step
          else tf.train.latest_checkpoint(checkpoint_dir))
  reader = tf.train.load_checkpoint(path)
  return {name: reader.get_tensor(name) for name, _ in tf.train.list_variables(path)
          if name.startswith("model/") and name.endswith("VARIABLE_VALUE")}


def _assert_close(a, b, atol):
  assert sorted(a) == sorted(b) and len(a) > 20
  worst = max(float(np.max(np.abs(a[k] - b[k]))) for k in a)
  assert worst <= atol, worst


# The one-device run that the two-worker run and the damaged-checkpoint check start from: no
# dropout, the records in order, two loops (3 steps, then 1) and a checkpoint.
ONE_DEVICE_STEPS = dict(shuffle_buffer_size=1, num_train_steps=4, save_checkpoints_steps=4)


@pytest.fixture(scope="module")
def one_device_run(data, tmp_path_factory):
  """`ONE_DEVICE_STEPS` on one device, in this process: its output dir."""
  out = tmp_path_factory.mktemp("one_device")
  _cli(_args(data, out, "nodrop", **ONE_DEVICE_STEPS), process=False)
  return out


def test_mirrored_on_two_cpus_equals_one_device(data, tmp_path):
  # One device in this process (its CPU split in two as --cpu_devices=2 does, conftest); two
  # replicas in a fresh one, where --cpu_devices splits the CPU before TensorFlow starts. The
  # records shuffled and grouped by length as by default: both see the same stream.
  one = _cli(_args(data, tmp_path / "one", "nodrop", cpu_devices=2), process=False)
  two = _cli(_args(data, tmp_path / "two", "nodrop", cpu_devices=2,
                   distribution_strategy="mirrored"))
  assert "MirroredStrategy with 2 replica(s)" in two.stderr
  assert "OneDeviceStrategy with 1 replica(s)" in one.stderr
  _assert_close(_model_weights(tmp_path / "one"), _model_weights(tmp_path / "two"), 1e-5)


def _trainer(config, batch, accumulation, dtype="float32", task_cls=PretrainingTask):
  keras.utils.set_random_seed(1)
  task = task_cls(model_files.read_config(config), SEQ, PREDS)
  schedule = optimization.WarmupLinearDecay(1e-3, 2, 10)
  return training_loop.Trainer(tf.distribute.OneDeviceStrategy("/cpu:0"), task,
                               lambda: optimization.create_optimizer("adamw", schedule),
                               batch, accumulation, dtype=dtype)


def _eval_iterator(trainer, records, batch):
  ds_fn = lambda ctx: input_pipeline.pretraining_dataset(records, SEQ, PREDS, batch,
                                                         is_training=False,
                                                         drop_remainder=True).repeat()
  return iter(trainer.strategy.distribute_datasets_from_function(ds_fn))


def test_accumulating_k_micro_batches_equals_one_big_batch(data):
  big = _trainer(data["configs"]["nodrop"], 16, 1)
  big_metrics = big.train_steps(_eval_iterator(big, data["records"], 16), 3)
  acc = _trainer(data["configs"]["nodrop"], 16, 4)
  acc_metrics = acc.train_steps(_eval_iterator(acc, data["records"], 16), 3)
  for a, b in zip(big.model.trainable_variables, acc.model.trainable_variables):
    np.testing.assert_allclose(a.numpy(), b.numpy(), atol=2e-6)
  assert abs(big_metrics["loss"] - acc_metrics["loss"]) < 1e-5
  assert big_metrics["loss"] > 5  # a real loss was computed (ln 30522 ~ 10.3 at init)


def test_recompute_grad_trains_the_same_model(data, tmp_path):
  """--recompute_grad (gradient checkpointing) with dropout on: the same losses and weights."""
  plain = _cli(_args(data, tmp_path / "plain"), process=False)
  recomputed = _cli(_args(data, tmp_path / "recompute", recompute_grad=True), process=False)
  losses = [re.findall(r"\| loss ([0-9.]+) \|", p.stderr) for p in (plain, recomputed)]
  assert losses[0] and losses[0] == losses[1]
  assert "--recompute_grad: the 2 Transformer layers' activations are recomputed" in (
      recomputed.stderr)
  _assert_close(_model_weights(tmp_path / "plain"), _model_weights(tmp_path / "recompute"),
                1e-6)


def test_killed_at_random_points_then_rerun_matches_an_uninterrupted_run(data, tmp_path):
  """Fault injection: -9, TERM and INT at random moments, then a rerun: bit-identical."""
  steps = dict(num_train_steps=12, save_checkpoints_steps=2, steps_per_loop=1)
  with graph_optimizer_on():  # the killed runs are real processes
    _cli(_args(data, tmp_path / "straight", **steps), process=False)
  crashed = tmp_path / "crashed"
  rng = random.Random(5)
  stopped = []
  for signum in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT):
    proc = subprocess.Popen(
        [sys.executable, "-m", "official_bert.run_pretraining"]
        + _args(data, crashed, **steps), cwd=REPO, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True)
    events = len(glob.glob(str(crashed / "train" / "events*")))
    deadline = time.time() + 240  # this run's own event file: it is past start-up
    while len(glob.glob(str(crashed / "train" / "events*"))) == events and \
        time.time() < deadline:
      time.sleep(0.05)
    time.sleep(rng.uniform(0.0, 1.0))  # a random moment of the training
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=120)
    assert "Traceback" not in err, err[-2000:]
    # A run that finished before the signal arrived exits 0; a stopped one says so.
    assert proc.returncode in (0, -signal.SIGKILL, 128 + signum), err[-2000:]
    stopped.append(proc.returncode != 0)
  assert stopped[0], "the first run was not interrupted"
  with graph_optimizer_on():
    _cli(_args(data, crashed, **steps), process=False)  # resumes from what the stopped runs saved
  a, b = _model_weights(tmp_path / "straight", 12), _model_weights(crashed, 12)
  assert all(np.array_equal(a[k], b[k]) for k in a), "resumed weights differ"


def _free_ports(n):
  socks = [socket.socket() for _ in range(n)]
  for s in socks:
    s.bind(("localhost", 0))
  ports = [s.getsockname()[1] for s in socks]
  for s in socks:
    s.close()
  return ports


def test_two_worker_multi_worker_mirrored_agrees_with_one_device(data, one_device_run,
                                                                 tmp_path):
  cluster = {"worker": [f"localhost:{p}" for p in _free_ports(2)]}
  out = tmp_path / "multi"
  procs = []
  for index in range(2):
    env = dict(os.environ, TF_CONFIG=json.dumps(
        {"cluster": cluster, "task": {"type": "worker", "index": index}}))
    procs.append(subprocess.Popen(
        [sys.executable, "-m", "official_bert.run_pretraining"]
        + _args(data, out, "nodrop", distribution_strategy="multi_worker_mirrored",
                **ONE_DEVICE_STEPS),
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
  logs = [p.communicate(timeout=300)[0] for p in procs]
  assert [p.returncode for p in procs] == [0, 0], logs[0][-2000:] + logs[1][-2000:]
  final = [l for log in logs for l in log.splitlines() if "step 4/4" in l]
  assert len(final) == 2 and final[0].split("| lr")[0].split("]")[-1] == \
      final[1].split("| lr")[0].split("]")[-1]
  assert not glob.glob(str(out / ".worker_*"))  # the non-chief's copy is removed
  _assert_close(_model_weights(one_device_run), _model_weights(out), 1e-5)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_a_signal_saves_a_checkpoint_and_exits_with_its_code(data, tmp_path, signum):
  out = tmp_path / "stopped"
  proc = subprocess.Popen(
      [sys.executable, "-m", "official_bert.run_pretraining"]
      + _args(data, out, num_train_steps=100000, save_checkpoints_steps=100000,
              steps_per_loop=2), cwd=REPO, stdout=subprocess.DEVNULL,
      stderr=subprocess.PIPE, text=True)
  deadline = time.time() + 240
  while not glob.glob(str(out / "train" / "events*")) and time.time() < deadline:
    time.sleep(0.1)
  # Training has started (its event file): a stop asked now, even during the first loop's
  # tracing, ends that loop of 2 steps and saves it.
  time.sleep(1)
  proc.send_signal(signum)
  _, err = proc.communicate(timeout=120)
  # Not a finished run: the signal's conventional status (143 TERM, 130 INT), no traceback.
  assert proc.returncode == 128 + signum, err[-2000:]
  assert "stop requested by signal" in err and f"by signal {signum.name}" in err
  assert "Traceback" not in err
  step = int(tf.train.latest_checkpoint(out).rsplit("-", 1)[1])
  assert 0 < step < 100000


def test_a_signal_is_heard_while_the_steps_run_and_a_second_ctrl_c_stops_at_once(
    monkeypatch):
  """Python runs a handler only when TensorFlow returns (a loop of steps may take minutes):
  the first signal was acknowledged after the loop, and a second Ctrl-C, merged with it, did
  nothing. Here the main thread waits in one TensorFlow call, as in a loop's steps."""
  exits = []
  monkeypatch.setattr(os, "_exit", exits.append)  # the second Ctrl-C's exit, recorded
  busy = tf.function(lambda: tf.py_function(lambda: time.sleep(1.5) or 0, [], tf.int32))
  stop = training_loop.StopRequest()
  heard = []

  def signals():
    time.sleep(0.2)
    os.kill(os.getpid(), signal.SIGINT)
    while not stop.requested:
      time.sleep(0.005)
    heard.append(time.monotonic())
    os.kill(os.getpid(), signal.SIGINT)
    while not exits:
      time.sleep(0.005)
    heard.append(time.monotonic())

  sender = threading.Thread(target=signals)
  try:
    sender.start()
    busy()
    returned = time.monotonic()
    sender.join(timeout=10)
  finally:
    stop.restore()
  assert stop.requested and stop.signum == signal.SIGINT
  assert exits == [128 + signal.SIGINT]
  assert len(heard) == 2 and heard[1] < returned - 0.5, (heard, returned)  # before the call


def test_warm_start_resume_mismatch_tensorboard_and_eval(data, tmp_path):
  first = tmp_path / "first"
  _cli(_args(data, first, num_train_steps=4, save_checkpoints_steps=2, steps_per_loop=2),
       process=False)
  # Resume: same directory, more steps.
  again = _cli(_args(data, first, num_train_steps=6, save_checkpoints_steps=2,
                     steps_per_loop=2, init_checkpoint=str(first)), process=False)
  assert "RESUMED from" in again.stderr and "is ignored" in again.stderr
  assert tf.train.latest_checkpoint(first).endswith("ckpt-6")
  # Fewer steps than the checkpoint's: nothing trains, and the run says so.
  done = _cli(_args(data, first, num_train_steps=4, save_checkpoints_steps=2,
                    steps_per_loop=2), process=False)
  assert (f"Nothing to train: the checkpoint in {first} is at step 6, this run's last step is "
          f"4" in done.stderr), done.stderr[-2000:]
  assert tf.train.latest_checkpoint(first).endswith("ckpt-6")
  # Warm start: weights only, the step starts at 0 in a new directory.
  warm = _cli(_args(data, tmp_path / "warm", num_train_steps=2, steps_per_loop=2,
                    save_checkpoints_steps=2, init_checkpoint=str(first), do_eval=True,
                    max_eval_steps=3), process=False)
  assert "WEIGHTS ONLY" in warm.stderr
  assert tf.train.latest_checkpoint(tmp_path / "warm").endswith("ckpt-2")
  results = dict(line.split(" = ") for line in
                 (tmp_path / "warm" / "eval_results.txt").read_text().splitlines())
  for key in ("masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy",
              "next_sentence_loss"):
    assert math.isfinite(float(results[key]))
  assert 0 <= float(results["masked_lm_accuracy"]) <= 1 and results["global_step"] == "2"
  # A checkpoint of another shape: the variable and both shapes are named.
  bad = _cli(_args(data, tmp_path / "bad", "wider", init_checkpoint=str(first)), check=False,
             process=False)
  assert bad.returncode != 0
  assert "cannot load BERT weights" in bad.stderr
  assert "bert/embeddings/word_embeddings: file has (30522, 32), model expects (30522, 48)" \
      in bad.stderr
  # Resuming with another config: the variable and both shapes are named.
  resume_bad = _cli(_args(data, first, "wider", num_train_steps=8), check=False,
                    process=False)
  assert resume_bad.returncode != 0 and "does not fit the model" in resume_bad.stderr
  assert "bert/embeddings/word_embeddings: checkpoint [30522, 32] vs model [30522, 48]" in \
      resume_bad.stderr, resume_bad.stderr[-2000:]
  # TensorBoard: every scalar the issue lists, and the config as text.
  tags = set()
  for path in glob.glob(str(first / "train" / "events*")):
    for event in tf.compat.v1.train.summary_iterator(path):
      tags.update(v.tag for v in event.summary.value)
  assert {"loss", "masked_lm_loss", "masked_lm_accuracy", "next_sentence_loss",
          "next_sentence_accuracy", "learning_rate", "gradient_norm", "examples_per_second",
          "real_tokens_per_second", "config"} <= tags


@pytest.mark.parametrize("extra,message", [
    ({"input_file": "/nonexistent/*.tfrecord"}, "matches no file"),
    ({"max_seq_length": 48}, "has length 32 but --max_seq_length=48"),
])
def test_bad_input_names_the_problem(data, tmp_path, extra, message):
  proc = _cli(_args(data, tmp_path / "o", **extra), check=False, process=False)
  assert proc.returncode != 0 and message in proc.stderr, proc.stderr[-2000:]


@pytest.mark.parametrize("config,message", [
    ("vocab1000", r"input_word_ids \(input_ids\) holds the id \d+, but \S+vocab1000.json has "
                  r"vocab_size=1000"),
    ("onetype", r"input_type_ids \(segment_ids\) holds the id 1, but \S+onetype.json has "
                r"type_vocab_size=1"),
])
def test_records_for_another_vocabulary_or_config_are_named(data, tmp_path, config, message):
  proc = _cli(_args(data, tmp_path / "o", config), check=False, process=False)
  assert proc.returncode == 1, proc.stderr[-2000:]
  assert re.search(message, proc.stderr) and data["records"] in proc.stderr, proc.stderr[-2000:]
  assert "Traceback" not in proc.stderr


def test_a_truncated_checkpoint_in_output_dir_is_named(data, one_device_run, tmp_path):
  out = tmp_path / "o"
  shutil.copytree(one_device_run, out)  # a run's OUTPUT_DIR, its checkpoint then damaged
  latest = tf.train.latest_checkpoint(out)
  shard = glob.glob(latest + ".data-*")[0]
  with open(shard, "rb") as f:
    content = f.read()
  with open(shard, "wb") as f:
    f.write(content[:len(content) // 2])
  proc = _cli(_args(data, out, "nodrop", **dict(ONE_DEVICE_STEPS, num_train_steps=6)),
              check=False, process=False)
  assert proc.returncode == 1, proc.stderr[-2000:]
  assert (f"{latest}.*: cannot read checkpoint {latest} (truncated or corrupt?)" in proc.stderr
          and "delete these files to resume from an earlier one" in proc.stderr), \
      proc.stderr[-2000:]
  assert "Traceback" not in proc.stderr


def test_a_record_corrupted_mid_file_is_named(data, tmp_path):
  good = open(data["records"], "rb").read()
  bad = tmp_path / "damaged.tfrecord"
  middle = len(good) // 2
  bad.write_bytes(good[:middle] + bytes(b ^ 0xFF for b in good[middle:middle + 64])
                  + good[middle + 64:])
  proc = _cli(_args(data, tmp_path / "o", input_file=str(bad), num_train_steps=200),
              check=False, process=False)
  assert proc.returncode != 0
  assert "corrupt input data" in proc.stderr and "damaged.tfrecord" in proc.stderr, \
      proc.stderr[-2000:]


def test_predict_returns_outputs_in_input_order(data):
  trainer = _trainer(data["configs"]["nodrop"], 8, 1)
  ds_fn = lambda ctx: input_pipeline.pretraining_dataset(data["records"], SEQ, PREDS, 5,
                                                         is_training=False)
  out = evaluation.predict(trainer.strategy, trainer.model, ds_fn,
                              keep_features=("input_word_ids",))
  records = [r for r in tf.data.TFRecordDataset(data["records"])]
  assert out["masked_lm_logits"].shape == (len(records), PREDS, 30522)
  first = next(iter(input_pipeline.pretraining_dataset(data["records"], SEQ, PREDS, 1,
                                                       is_training=False)))
  np.testing.assert_array_equal(out["input_word_ids"][0], first["input_word_ids"][0])
  direct = trainer.model(first, training=False)["next_sentence_logits"]
  np.testing.assert_allclose(out["next_sentence_logits"][0], direct[0], atol=1e-5)


def test_nan_loss_stops_with_a_message(data, tmp_path, monkeypatch):
  trainer = _trainer(data["configs"]["tiny"], 8, 1)
  monkeypatch.setattr(trainer, "train_steps", lambda it, n: {"loss": float("nan")})
  fn = lambda ctx, start: input_pipeline.pretraining_dataset(data["records"], SEQ, PREDS, 8)
  with pytest.raises(FloatingPointError, match="non-finite loss at step 0"):
    runner.run_training(trainer, fn, str(tmp_path), 4, 2, 2)
  assert tf.train.latest_checkpoint(str(tmp_path)) is None


class _InfiniteLossTask(PretrainingTask):
  def loss_sums(self, features, outputs):
    return {k: v * float("inf") for k, v in super().loss_sums(features, outputs).items()}


def test_float16_skips_non_finite_steps_and_lowers_the_loss_scale(data):
  try:
    distribution.set_precision("float16")
    trainer = _trainer(data["configs"]["tiny"], 8, 1, dtype="float16",
                       task_cls=_InfiniteLossTask)
    before = [v.numpy().copy() for v in trainer.model.trainable_variables]
    scale = float(trainer.optimizer.dynamic_scale.numpy())
    trainer.train_steps(_eval_iterator(trainer, data["records"], 8), 1)
    after = [v.numpy() for v in trainer.model.trainable_variables]
    assert all(np.array_equal(a, b) for a, b in zip(before, after))
    assert float(trainer.optimizer.dynamic_scale.numpy()) == scale / 2
  finally:
    distribution.set_precision("float32")


def test_float16_and_bfloat16_train_finite(data):
  for dtype in ("bfloat16", "float16"):
    try:
      distribution.set_precision(dtype)
      trainer = _trainer(data["configs"]["tiny"], 8, 1, dtype=dtype)
      metrics = trainer.train_steps(_eval_iterator(trainer, data["records"], 8), 2)
      assert math.isfinite(metrics["loss"]) and metrics["loss"] > 5, (dtype, metrics)
    finally:
      distribution.set_precision("float32")


def test_cpu_devices_keeps_a_cpu_split_so_and_names_another_count():
  # This process's CPU is two logical devices from its start (conftest).
  distribution.use_logical_cpus(2)
  assert len(tf.config.list_logical_devices("CPU")) == 2
  with pytest.raises(ValueError, match=r"--cpu_devices=3: .* already runs on 2 logical CPU"):
    distribution.use_logical_cpus(3)


def test_strategy_names_and_errors():
  assert isinstance(distribution.get_strategy("one_device"), tf.distribute.OneDeviceStrategy)
  with pytest.raises(ValueError, match="expected one of"):
    distribution.get_strategy("parameter_server")
  with pytest.raises(ValueError, match="--num_gpus=2"):
    distribution.get_strategy("mirrored", num_gpus=2)


def test_original_tpu_flags_map_onto_the_strategy_flags():
  from types import SimpleNamespace  # pylint: disable=import-outside-toplevel

  from official_bert.training import common_flags

  def resolve(**given):
    values = dict(distribution_strategy="one_device", tpu=None, use_tpu=False, tpu_name=None)
    values.update(given)
    return common_flags.strategy_flags(SimpleNamespace(**values))

  assert resolve() == ("one_device", None)
  assert resolve(use_tpu=True, tpu_name="grpc://10.0.0.2:8470") == ("tpu", "grpc://10.0.0.2:8470")
  assert resolve(distribution_strategy="tpu", tpu="my-tpu") == ("tpu", "my-tpu")
  assert resolve(use_tpu=True) == ("tpu", None)  # a local TPU VM
  assert resolve(distribution_strategy="mirrored") == ("mirrored", None)
  with pytest.raises(ValueError, match="--use_tpu contradicts --distribution_strategy=mirrored"):
    resolve(use_tpu=True, distribution_strategy="mirrored")
  with pytest.raises(ValueError, match="differ"):
    resolve(use_tpu=True, tpu="a", tpu_name="b")
  with pytest.raises(ValueError, match="needs --distribution_strategy=tpu"):
    resolve(tpu_name="my-tpu")
