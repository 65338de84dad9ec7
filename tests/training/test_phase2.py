"""The two-phase recipe on a tiny model: phase 1 at a short length, then phase 2 at a longer
one warm-started (new directory, fresh optimizer and schedule) or resumed (same directory,
step and schedule continued); --extend_positions and --resize_vocab on the way."""

import dataclasses
import glob
import json
import os
import shutil

from conftest import UNCASED_VOCAB
from conftest import corpus_text
from conftest import run_command
import numpy as np
import pytest
import tensorflow as tf

from data_prep import tokenization
from data_prep.pretraining import writer
from official_bert.interop import checkpointing
from official_bert.interop import model_files
from official_bert.interop import weight_loading
from official_bert.interop import weights_io
from official_bert.tasks import pretraining_job
from official_bert.tasks.pretraining import PretrainingTask
from official_bert.training import input_stream
from official_bert.training import optimization
from official_bert.training import runner

pytestmark = pytest.mark.large  # trains or runs commands: `make test`, not `make test-fast`

SHORT, LONG = (32, 5), (64, 10)  # (max_seq_length, max_predictions_per_seq) per phase
VOCAB_SIZE = len(tokenization.load_vocab_tokens(UNCASED_VOCAB))
TINY = dict(vocab_size=VOCAB_SIZE, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
            intermediate_size=32, hidden_act="gelu", hidden_dropout_prob=0.1,
            attention_probs_dropout_prob=0.1, max_position_embeddings=64, type_vocab_size=2,
            initializer_range=0.02)
CONFIGS = {"p64": {}, "p32": {"max_position_embeddings": 32},
           "vocab_big": {"vocab_size": VOCAB_SIZE + 40}, "vocab_small": {"vocab_size": 1000}}
WORDS, POSITIONS = weight_loading.WORD_EMBEDDINGS, weight_loading.POSITION_EMBEDDINGS
BIAS = "cls/predictions/output_bias"
LR = 1e-3


def _settings(data, out, config, length, **kw):
  seq, preds = length
  values = dict(bert_config_file=data["configs"][config], input_file=data["records"][seq],
                output_dir=str(out), do_train=True, train_batch_size=4, max_seq_length=seq,
                max_predictions_per_seq=preds, num_train_steps=4, num_warmup_steps=2,
                steps_per_loop=2, save_checkpoints_steps=2, learning_rate=LR,
                shuffle_buffer_size=100)
  values.update(kw)
  return pretraining_job.PretrainingSettings(**values)


def _cli(settings):
  """run_pretraining as a program, with these settings as its flags, in this process through
  its launcher (`test_pretraining_loop.py` runs it as `python -m`)."""
  args = []
  for field in dataclasses.fields(settings):
    value = getattr(settings, field.name)
    if value is not None and value != field.default:
      args.append(f"--{field.name}" if value is True else f"--{field.name}={value}")
  proc = run_command("official_bert.run_pretraining", *args)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return proc.stderr


@pytest.fixture(scope="module")
def data(tmp_path_factory):
  """Records at both lengths, configs, and two phase-1 runs: 4 steps with 64 positions (by
  the command, as a user runs it) and 2 steps with 32."""
  root = tmp_path_factory.mktemp("phase2")
  corpus = root / "corpus.txt"
  corpus.write_text(corpus_text(20_000), encoding="utf-8")
  records = {}
  for seq, preds in (SHORT, LONG):
    records[seq] = str(root / f"data{seq}.tfrecord")
    writer.run(writer.Settings(input_file=str(corpus), output_file=records[seq],
                               vocab_file=UNCASED_VOCAB, max_seq_length=seq,
                               max_predictions_per_seq=preds, dupe_factor=1, num_workers=1))
  configs = {}
  for name, overrides in CONFIGS.items():
    configs[name] = str(root / f"{name}.json")
    (root / f"{name}.json").write_text(json.dumps(dict(TINY, **overrides)))
  out = {"records": records, "configs": configs, "root": root}
  _cli(_settings(out, root / "phase1", "p64", SHORT))
  pretraining_job.run(_settings(out, root / "phase1_p32", "p32", SHORT, num_train_steps=2))
  return out


def _warm_started(settings):
  """A phase-2 trainer as `run_pretraining` builds it, after the warm start (step 0)."""
  config = model_files.read_config(settings.bert_config_file)
  task = PretrainingTask(config, settings.max_seq_length, settings.max_predictions_per_seq)
  trainer = runner.make_trainer(settings, tf.distribute.OneDeviceStrategy("/cpu:0"), task,
                                settings.num_train_steps, settings.num_warmup_steps)
  keeper = checkpointing.CheckpointKeeper(settings.output_dir, trainer.model,
                                          trainer.optimizer, trainer.step)
  what = keeper.restore_or_initialize(settings.init_checkpoint,
                                      runner.warm_start_adaptation(trainer))
  return what, trainer, {v.path: v.numpy() for v in trainer.model.weights}


def _loaded(trainer):
  from official_bert.interop import weight_names  # pylint: disable=g-import-not-at-top
  return {n: v.numpy() for n, v in weight_names.model_weight_pairs(trainer.model)}


def _learning_rates(output_dir):
  """{step: learning rate} from the run's TensorBoard events."""
  rates = {}
  for path in glob.glob(os.path.join(output_dir, "train", "events*")):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        if value.tag == "learning_rate":
          rates[event.step] = float(tf.make_ndarray(value.tensor))
  return rates


def _step(output_dir):
  return int(tf.train.load_checkpoint(tf.train.latest_checkpoint(output_dir)).get_tensor(
      "step/.ATTRIBUTES/VARIABLE_VALUE"))


def test_warm_started_phase2_loads_phase1_weights_with_a_fresh_optimizer(data, tmp_path):
  phase1 = str(data["root"] / "phase1")
  settings = _settings(data, tmp_path / "phase2", "p64", LONG, init_checkpoint=phase1)
  what, trainer, _ = _warm_started(settings)
  assert what == "warm_started"
  final = weights_io.read_weights(phase1).tensors
  for name, value in _loaded(trainer).items():
    np.testing.assert_array_equal(value, final[name], err_msg=name)
  assert int(trainer.step.numpy()) == 0 and int(trainer.optimizer.iterations.numpy()) == 0
  slots = [v.numpy() for v in trainer.optimizer.variables if v.path != "adam/iteration"]
  assert slots and not any(np.any(s) for s in slots)  # Adam's moments start at zero
  pretraining_job.run(settings)
  assert _step(settings.output_dir) == 4  # a new counter, not phase 1's 4 + 4
  schedule = optimization.WarmupLinearDecay(LR, 2, 4)  # the new schedule, warmup included
  rates = _learning_rates(settings.output_dir)
  assert rates[2] == pytest.approx(float(schedule(2)))
  assert rates[4] == pytest.approx(float(schedule(4)))


def test_resumed_phase2_continues_step_and_schedule_at_the_longer_length(data, tmp_path):
  out = tmp_path / "resumed"
  shutil.copytree(data["root"] / "phase1", out)
  settings = _settings(data, out, "p64", LONG, num_train_steps=8)
  log = _cli(settings)
  assert "RESUMED from" in log and "at step 4" in log
  assert "The training input changed at step 4" in log  # read from its start, not skipped
  assert _step(out) == 8
  # The schedule goes on from step 4, over the 8 steps of both phases.
  schedule = optimization.WarmupLinearDecay(LR, 2, 8)
  rates = _learning_rates(str(out))
  assert sorted(rates) == [2, 4, 6, 8]
  for step in (6, 8):
    assert rates[step] == pytest.approx(float(schedule(step)))
  record = json.loads((out / input_stream.STREAM_FILE).read_text())
  assert record["first_step"] == 4 and record["stream"]["max_seq_length"] == 64


def test_extend_positions_copies_the_trained_positions(data, tmp_path):
  short = str(data["root"] / "phase1_p32")
  settings = _settings(data, tmp_path / "longer", "p64", LONG, init_checkpoint=short,
                       extend_positions=True, num_train_steps=2)
  _, trainer, _ = _warm_started(settings)
  table = _loaded(trainer)[POSITIONS]  # [64, hidden]
  old = weights_io.read_weights(short).tensors[POSITIONS]  # [32, hidden]
  np.testing.assert_array_equal(table[:32], old)
  np.testing.assert_array_equal(table[32:], table[:32])
  results = pretraining_job.run(settings)  # trains at length 64
  assert np.isfinite(results["train"]["loss"]) and _step(settings.output_dir) == 2
  # Without the flag, the error names it; a shorter table than the checkpoint's never loads.
  with pytest.raises(ValueError, match="max_position_embeddings=64 is larger than the "
                                       "checkpoint's 32; --extend_positions"):
    pretraining_job.run(dataclasses.replace(settings, extend_positions=False,
                                               output_dir=str(tmp_path / "no_flag")))
  with pytest.raises(ValueError, match="cannot shrink, not even with --extend_positions"):
    pretraining_job.run(_settings(data, tmp_path / "shrink", "p32", SHORT,
                                     init_checkpoint=str(data["root"] / "phase1"),
                                     extend_positions=True))


def test_resize_vocab_keeps_rows_and_starts_new_ones_at_the_mean(data, tmp_path):
  phase1 = str(data["root"] / "phase1")
  settings = _settings(data, tmp_path / "bigger", "vocab_big", SHORT, init_checkpoint=phase1,
                       resize_vocab=True, num_train_steps=2)
  _, trainer, _ = _warm_started(settings)
  loaded, old = _loaded(trainer), weights_io.read_weights(phase1).tensors
  n = VOCAB_SIZE
  assert loaded[WORDS].shape[0] == n + 40
  np.testing.assert_array_equal(loaded[WORDS][:n], old[WORDS])
  np.testing.assert_allclose(loaded[WORDS][n:], np.tile(old[WORDS].mean(0), (40, 1)),
                             atol=1e-6)
  np.testing.assert_array_equal(loaded[BIAS][:n], old[BIAS])
  np.testing.assert_allclose(loaded[BIAS][n:], old[BIAS].mean(), atol=1e-6)
  assert np.isfinite(pretraining_job.run(settings)["train"]["loss"])
  with pytest.raises(ValueError, match=f"vocab_size=1000 is smaller than the checkpoint's "
                                       f"{n}: a vocabulary cannot shrink"):
    pretraining_job.run(dataclasses.replace(settings, bert_config_file=data["configs"][
        "vocab_small"], output_dir=str(tmp_path / "smaller")))
  with pytest.raises(ValueError, match=f"vocab_size={n + 40} is larger than the checkpoint's "
                                       f"{n}; --resize_vocab"):
    pretraining_job.run(dataclasses.replace(settings, resize_vocab=False,
                                               output_dir=str(tmp_path / "no_flag")))


def test_input_stream_records_where_each_input_began(tmp_path):
  one = input_stream.stream_key("a-*.tfrecord", 128, 256)
  two = input_stream.stream_key("b-*.tfrecord", 512, 256)
  out = str(tmp_path)
  path = tmp_path / input_stream.STREAM_FILE

  def run(key, step, chief=True, saved=True):
    """A run resumed at `step`: where its stream began, recorded when it saves."""
    began = input_stream.first_step(out, key, step)
    if saved:
      input_stream.record(out, key, began, chief)
    return began

  assert run(one, 7, saved=False) == 0  # no record: a directory from before it
  assert not path.exists()  # nothing written before a checkpoint of the run
  assert run(one, 9) == 0
  assert json.loads(path.read_text()) == {"stream": one, "first_step": 0}
  # A run on another input that failed before its first checkpoint (a mistyped
  # --input_file) records nothing: the next run on the first input still skips its steps.
  assert run(two, 9, saved=False) == 9
  assert run(one, 9) == 0
  assert run(two, 9, chief=False) == 9  # workers agree, write nothing
  assert json.loads(path.read_text())["stream"] == one
  assert run(two, 9) == 9
  assert run(two, 12, chief=False) == 9
  assert run(two, 15) == 9
  assert run(None, 15) == 0  # a dataset function that does not say
  # Checkpoints deleted since (the record is ahead of the step): a new stream, not a skip < 0.
  assert run(two, 3) == 3


def test_a_moved_run_folder_reads_its_own_records_as_the_same_stream(tmp_path):
  """A fine-tuning run's own OUTPUT_DIR/train.tf_record, recorded by absolute path, read as
  another input once the folder was moved (another mount, an rsync): the resumed run read
  it from its beginning instead of skipping what its steps had read."""
  first, moved = tmp_path / "first", tmp_path / "moved"
  first.mkdir()
  (first / "train.tf_record").write_bytes(b"")
  key = input_stream.stream_key(str(first / "train.tf_record"), 64, 4)
  input_stream.record(str(first), key, 0)
  record = json.loads((first / input_stream.STREAM_FILE).read_text())
  assert record["stream"]["input_files"] == ["OUTPUT_DIR/train.tf_record"]
  first.rename(moved)
  key = input_stream.stream_key(str(moved / "train.tf_record"), 64, 4)
  assert input_stream.first_step(str(moved), key, 10) == 0  # the same stream: skip 10 steps


def test_a_resume_with_another_batch_size_is_warned_of(tmp_path, caplog):
  """The same files with another --train_batch_size: the steps count other batches (a
  batch-4 run at step 10 of 20 read as finished at batch 8): a warning, not an INFO line."""
  (tmp_path / "train.tf_record").write_bytes(b"")
  files = str(tmp_path / "train.tf_record")
  input_stream.record(str(tmp_path), input_stream.stream_key(files, 64, 4), 0)
  with caplog.at_level("INFO"):
    assert input_stream.first_step(str(tmp_path), input_stream.stream_key(files, 64, 8), 10) == 10
  warned = [r for r in caplog.records if r.levelname == "WARNING"]
  assert len(warned) == 1 and "another global batch size (--train_batch_size) (4 -> 8)" in (
      warned[0].getMessage())
  caplog.clear()
  with caplog.at_level("INFO"):  # other files (phase 2): a new input, as before
    input_stream.first_step(str(tmp_path), input_stream.stream_key("other-*", 128, 8), 10)
  assert not [r for r in caplog.records if r.levelname == "WARNING"]


def test_input_stream_key_is_the_files_not_their_spelling(tmp_path, monkeypatch):
  for name in ("x-0.tfrecord", "x-1.tfrecord"):
    (tmp_path / name).write_bytes(b"")
  monkeypatch.chdir(tmp_path)
  spelled = [input_stream.stream_key(p, 128, 8)
             for p in ("x-*.tfrecord", "./x-*.tfrecord", f"{tmp_path}/x-0.tfrecord,x-1.tfrecord")]
  assert spelled[0] == spelled[1] == spelled[2]
  assert spelled[0]["input_files"] == [str(tmp_path / "x-0.tfrecord"),
                                       str(tmp_path / "x-1.tfrecord")]
  (tmp_path / "x-2.tfrecord").write_bytes(b"")  # another file under the glob: another input
  assert input_stream.stream_key("x-*.tfrecord", 128, 8) != spelled[0]
