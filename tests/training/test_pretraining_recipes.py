"""run_pretraining --next_sentence=False (masked LM only) and --dynamic_masking (issue 13)."""

import glob
import json
import os
import random
import re
import signal
import subprocess
import sys
import time

from conftest import GLUE_DATA
from conftest import REPO
from conftest import UNCASED_VOCAB
from conftest import corpus_text
from conftest import graph_optimizer_on
from conftest import need
from conftest import run_command
from conftest import vocab_ids
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the exported tokenizer's ops)

from data_prep import schema
from data_prep.pretraining import instances
from data_prep.pretraining import writer
import official_bert as ob
from official_bert.interop import model_files
from official_bert.interop import weights_io
from official_bert.tasks import base
from official_bert.tasks import pretraining_job
from official_bert.tasks.pretraining import PretrainingTask
from official_bert.training import dynamic_masking
from official_bert.training import finetuning_runner
from official_bert.training import input_pipeline
from official_bert.training import optimization
from official_bert.training import training_loop

pytestmark = pytest.mark.large  # trains or runs commands: `make test`, not `make test-fast`

SEQ, PREDS = 32, 5
TINY = dict(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=64, hidden_act="gelu", hidden_dropout_prob=0.1,
            attention_probs_dropout_prob=0.1, max_position_embeddings=64, type_vocab_size=2,
            initializer_range=0.02)
CLS, SEP, MASK = vocab_ids(UNCASED_VOCAB, ["[CLS]", "[SEP]", "[MASK]"])


@pytest.fixture(scope="module")
def data(tmp_path_factory):
  """Records of the fixture corpus (real text) masked offline and unmasked (--masking=none)."""
  root = tmp_path_factory.mktemp("recipes")
  corpus = root / "corpus.txt"
  corpus.write_text(corpus_text(60_000), encoding="utf-8")
  for name in ("offline", "none"):
    writer.run(writer.Settings(input_file=str(corpus), output_file=str(root / f"{name}.tfrecord"),
                               vocab_file=need(UNCASED_VOCAB), max_seq_length=SEQ,
                               max_predictions_per_seq=PREDS, dupe_factor=1, num_workers=1,
                               masking=name))
  config = root / "tiny.json"
  config.write_text(json.dumps(TINY))
  return {"offline": str(root / "offline.tfrecord"), "none": str(root / "none.tfrecord"),
          "config": str(config)}


def _args(data, out, records="offline", **kw):
  flags = dict(bert_config_file=data["config"], input_file=data[records], output_dir=str(out),
               do_train=True, train_batch_size=8, max_seq_length=SEQ,
               max_predictions_per_seq=PREDS, num_train_steps=6, num_warmup_steps=2,
               steps_per_loop=3, save_checkpoints_steps=3, learning_rate=1e-3,
               deterministic=True)
  if records == "none":
    flags.update(dynamic_masking=True, vocab_file=UNCASED_VOCAB)
  flags.update(kw)
  return [f"--{k}={v}" if not isinstance(v, bool) else (f"--{k}" if v else f"--no{k}")
          for k, v in flags.items()]


def _cli(args, module="official_bert.run_pretraining", check=True):
  """The command in this process, through its own launcher (`conftest.run_command`); the
  killed run below is a real process."""
  proc = run_command(module, *args)
  if check:
    assert proc.returncode == 0, proc.stderr[-3000:]
  return proc


def _weights(path):
  """Model variables of a checkpoint (a file prefix or a directory), by short name."""
  path = tf.train.latest_checkpoint(path) if os.path.isdir(path) else path
  reader = tf.train.load_checkpoint(path)
  return {weights_io.model_variable_name(name): reader.get_tensor(name)
          for name, _ in tf.train.list_variables(path)
          if name.startswith("model/") and name.endswith("VARIABLE_VALUE")}


# ---- the masking itself: statistics, determinism, resume ----------------------------------

def _options(whole_word=False, seed=7):
  return dynamic_masking.options_from_vocab(
      UNCASED_VOCAB, TINY["vocab_size"], max_predictions_per_seq=PREDS,
      do_whole_word_mask=whole_word, seed=seed)


def _stream(data, options, batches, batch_size=64, skip_examples=0, shuffle_buffer_size=1):
  """`batches` training batches (shuffle buffer 1: records in file order, repeated), as
  numpy, with the unmasked records they came from."""
  features = schema.unmasked_pretraining_features(SEQ)
  kw = dict(is_training=True, seed=3, skip_examples=skip_examples,
            shuffle_buffer_size=shuffle_buffer_size)
  masked = input_pipeline.dataset(data["none"], features, batch_size,
                                  batch_transform=dynamic_masking.batch_masker(options), **kw)
  plain = input_pipeline.dataset(data["none"], features, batch_size, **kw)
  out = []
  for m, p in zip(masked.take(batches).as_numpy_iterator(),
                  plain.take(batches).as_numpy_iterator()):
    out.append((m, p))
  return out


def _words(plain_row, candidates):
  """The whole words of a row: lists of candidate positions (a start and its continuations)."""
  words = []
  for pos in np.flatnonzero(candidates):
    if plain_row["word_starts"][pos] or not words:
      words.append([pos])
    else:
      words[-1].append(pos)
  return words


@pytest.mark.parametrize("whole_word", [False, True], ids=["tokens", "whole_words"])
def test_masking_statistics_on_real_text(data, whole_word):
  """Masked fraction, 80/10/10, never [CLS]/[SEP]/padding, whole words all or nothing."""
  opts = _options(whole_word)
  replaced = kept = random_id = 0
  chosen_total = real_total = 0
  for m, p in _stream(data, opts, batches=40):
    ids, real = p["input_word_ids"], p["input_mask"] > 0
    candidates = real & (ids != CLS) & (ids != SEP)
    budget = instances.num_to_predict(real.sum(1), instances.InstanceOptions(
        max_predictions_per_seq=PREDS, masked_lm_prob=0.15))
    for r in range(len(ids)):
      weights = m["masked_lm_weights"][r]
      count = int(weights.sum())
      assert np.all(weights[:count] == 1) and np.all(weights[count:] == 0)
      pos = m["masked_lm_positions"][r][:count]
      assert np.all(np.diff(pos) > 0) and np.all(m["masked_lm_positions"][r][count:] == 0)
      assert candidates[r][pos].all(), "masked [CLS], [SEP] or padding"
      np.testing.assert_array_equal(m["masked_lm_ids"][r][:count], ids[r][pos])
      untouched = np.ones(SEQ, bool)
      untouched[pos] = False
      np.testing.assert_array_equal(m["input_word_ids"][r][untouched], ids[r][untouched])
      new = m["input_word_ids"][r][pos]
      replaced += int((new == MASK).sum())
      kept += int((new == ids[r][pos]).sum())
      random_id += int(((new != MASK) & (new != ids[r][pos])).sum())
      if whole_word:
        assert count <= budget[r]
        chosen = set(pos.tolist())
        for word in _words({k: v[r] for k, v in p.items()}, candidates[r]):
          assert len(chosen & set(word)) in (0, len(word)), (word, pos)
      else:  # exactly the writer's number: min(P, max(1, round(0.15 len))), or all candidates
        assert count == min(budget[r], candidates[r].sum())
      chosen_total += count
      real_total += int(real[r].sum())
  n = replaced + kept + random_id
  assert n > 8000
  assert abs(replaced / n - 0.8) < 0.02 and abs(kept / n - 0.1) < 0.015 and \
      abs(random_id / n - 0.1) < 0.015, (replaced, kept, random_id)
  # ~15% of the tokens (rounding at these short lengths and, for whole words, budgets a
  # whole word does not fit, take it a little under).
  assert 0.12 < chosen_total / real_total < 0.17, chosen_total / real_total


def test_num_to_predict_is_the_writers_rule():
  lengths = np.arange(0, 700)
  for prob, cap in [(0.15, 20), (0.15, 80), (0.1, 76), (0.5, 1000), (1 / 6, 30)]:
    expected = instances.num_to_predict(lengths, instances.InstanceOptions(
        max_predictions_per_seq=cap, masked_lm_prob=prob))
    got = dynamic_masking.num_to_predict(tf.constant(lengths), prob, cap).numpy()
    np.testing.assert_array_equal(got, expected)


def test_masks_are_deterministic_new_each_epoch_and_the_same_after_a_skip(data):
  """The resume property: a stream restarted with `skip_examples` masks as the whole one."""
  opts = _options(whole_word=True)
  num_records = sum(1 for _ in tf.data.TFRecordDataset(data["none"]))
  batches = 2 * num_records // 16 + 2  # more than two epochs
  first = _stream(data, opts, batches, batch_size=16, shuffle_buffer_size=100)
  again = _stream(data, opts, batches, batch_size=16, shuffle_buffer_size=100)
  resumed = _stream(data, opts, batches - 5, batch_size=16, skip_examples=5 * 16,
                    shuffle_buffer_size=100)
  for (a, _), (b, _) in zip(first, again):
    for k in a:
      np.testing.assert_array_equal(a[k], b[k])
  for (a, _), (b, _) in zip(first[5:], resumed):
    for k in a:
      np.testing.assert_array_equal(a[k], b[k])
  other_seed = _stream(data, _options(whole_word=True, seed=8), 3, batch_size=16,
                       shuffle_buffer_size=100)
  assert any(not np.array_equal(a["masked_lm_positions"], b["masked_lm_positions"])
             for (a, _), (b, _) in zip(first, other_seed))
  # Records in file order (buffer 1): epoch 2 sees each record again, with another mask.
  ordered = _stream(data, opts, 2 * num_records // 16, batch_size=16)
  rows = {k: np.concatenate([m[k] for m, _ in ordered]) for k in ordered[0][0]}
  plain = np.concatenate([p["input_word_ids"] for _, p in ordered])
  n = min(num_records, len(plain) - num_records)
  np.testing.assert_array_equal(plain[:n], plain[num_records:num_records + n])
  same = np.all(rows["masked_lm_positions"][:n] == rows["masked_lm_positions"][
      num_records:num_records + n], axis=1)
  assert same.mean() < 0.3, same.mean()


def test_the_task_masks_through_the_one_dataset_builder(data, monkeypatch):
  """PretrainingTask plugs its masking into `Task.build_dataset` (its batch_transform hook):
  one call of the one builder, whose batches are the masker's; records masked offline get
  no transform."""
  config = model_files.read_config(data["config"])
  options = _options(whole_word=True)
  expected = _stream(data, options, 1, batch_size=16)[0][0]
  builders, transforms = [], []
  base_build, dataset = base.Task.build_dataset, input_pipeline.dataset

  def spy_build(self, *args, **kwargs):
    builders.append(type(self).__name__)
    return base_build(self, *args, **kwargs)

  def spy_dataset(*args, **kwargs):
    transforms.append(kwargs.get("batch_transform"))
    return dataset(*args, **kwargs)

  monkeypatch.setattr(base.Task, "build_dataset", spy_build)
  monkeypatch.setattr(input_pipeline, "dataset", spy_dataset)
  task = PretrainingTask(config, SEQ, PREDS, shuffle_buffer_size=1, masking=options)
  got = next(task.build_dataset(data["none"], 16, True, seed=3).as_numpy_iterator())
  assert builders == ["PretrainingTask"] and len(transforms) == 1 and transforms[0]
  assert sorted(got) == sorted(expected)
  for k in expected:
    np.testing.assert_array_equal(got[k], expected[k], err_msg=k)
  PretrainingTask(config, SEQ, PREDS).build_dataset(data["offline"], 8, True)
  assert len(builders) == 2 and transforms[1] is None


# ---- through run_pretraining ----------------------------------------------------------------

def test_dynamic_masking_killed_and_rerun_matches_an_uninterrupted_run(data, tmp_path):
  steps = dict(num_train_steps=10, save_checkpoints_steps=2, steps_per_loop=1,
               do_whole_word_mask=True, shuffle_buffer_size=50)
  with graph_optimizer_on():  # the killed run is a real process
    _cli(_args(data, tmp_path / "straight", "none", **steps))
  crashed = tmp_path / "crashed"
  proc = subprocess.Popen([sys.executable, "-m", "official_bert.run_pretraining"]
                          + _args(data, crashed, "none", **steps), cwd=REPO,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
  deadline = time.time() + 240
  while not glob.glob(str(crashed / "ckpt-2.index")) and time.time() < deadline:
    time.sleep(0.05)
  time.sleep(random.Random(3).uniform(0.0, 0.5))
  proc.send_signal(signal.SIGKILL)
  proc.communicate(timeout=120)
  assert proc.returncode == -signal.SIGKILL, "the run finished before it was killed"
  stopped_at = int(tf.train.latest_checkpoint(crashed).rsplit("-", 1)[1])
  with graph_optimizer_on():
    rerun = _cli(_args(data, crashed, "none", **steps))
  assert "RESUMED" in rerun.stderr and stopped_at < 10
  a, b = _weights(str(tmp_path / "straight")), _weights(str(crashed))
  assert len(a) > 20 and sorted(a) == sorted(b)
  assert all(np.array_equal(a[k], b[k]) for k in a), "resumed weights differ"


def test_mlm_only_trains_without_nsp_and_warm_starts_run_classifier(data, tmp_path):
  out = tmp_path / "mlm"
  _cli(_args(data, out, "none", next_sentence=False, do_eval=True, max_eval_steps=2))
  results = dict(line.split(" = ") for line in (out / "eval_results.txt").read_text().split("\n")
                 if line)
  assert {"masked_lm_loss", "masked_lm_accuracy", "loss"} <= set(results)
  assert not any("next_sentence" in k for k in results)
  weights = _weights(str(out / "ckpt-3")), _weights(str(out / "ckpt-6"))
  assert not any(k.startswith("cls/seq_relationship") for k in weights[1])
  # The pooler is not trained (not even decayed); the rest is.
  for name in weights[1]:
    if name.startswith("bert/pooler"):
      np.testing.assert_array_equal(weights[0][name], weights[1][name])
  assert not np.array_equal(weights[0]["bert/embeddings/word_embeddings"],
                            weights[1]["bert/embeddings/word_embeddings"])
  # With --vocab_file the OUTPUT_DIR is a whole model folder: `ob.MaskedLM` loads it and
  # `export` needs no flag but --checkpoint/--export_dir; both give the same predictions.
  # Exported as it is: masked-LM predictions, no next-sentence outputs (no such head).
  mlm = ob.MaskedLM.from_preset(str(out))
  assert mlm.preprocessor.sequence_length == SEQ and not mlm.next_sentence
  texts = ["the [MASK] of the house", "a [MASK] day in the [MASK]"]
  filled = mlm.fill_mask(texts, top_k=3)
  _cli([f"--checkpoint={out}", f"--export_dir={tmp_path / 'export_cli'}", "--top_k=3"],
       module="official_bert.export")
  served = tf.saved_model.load(str(tmp_path / "export_cli")).signatures["serving_default"](
      text=tf.constant(texts))
  assert served["masked_lm_top_ids"].shape[:2] == (2, 2)  # each text's slots (at most 2)
  assert not any(k.startswith("next_sentence") for k in served)
  for row, masks in enumerate(filled):
    for slot, pairs in enumerate(masks):
      assert [t.decode() for t in served["masked_lm_top_tokens"].numpy()[row, slot]] == [
          t for t, _ in pairs]
      np.testing.assert_allclose(served["masked_lm_top_probabilities"].numpy()[row, slot],
                                 [p for _, p in pairs], atol=1e-5)
  # Fine-tuning from it: the encoder is loaded, the log says what happened to the pooler.
  glue = tmp_path / "glue"
  glue.mkdir()
  for name, rows in (("train", 24), ("dev", 8)):
    with open(os.path.join(GLUE_DATA, "MRPC", f"{name}.tsv"), encoding="utf-8") as f:
      (glue / f"{name}.tsv").write_text("".join(f.readlines()[:rows + 1]), encoding="utf-8")
  fine = tmp_path / "fine"
  proc = _cli([f"--vocab_file={UNCASED_VOCAB}", f"--bert_config_file={data['config']}",
               "--task_name=MRPC", f"--data_dir={glue}", f"--output_dir={fine}",
               f"--init_checkpoint={out}", "--do_train", "--do_eval", "--max_seq_length=32",
               "--train_batch_size=8", "--num_train_steps=2", "--steps_per_loop=2",
               "--learning_rate=1e-9"], module="official_bert.run_classifier")
  assert "never trained by next-sentence prediction" in proc.stderr, proc.stderr[-3000:]
  assert "WEIGHTS ONLY" in proc.stderr
  tuned = _weights(str(fine))
  for name in ("bert/embeddings/word_embeddings", "bert/encoder/layer_1/output/dense/kernel",
               "bert/pooler/dense/kernel"):
    np.testing.assert_allclose(tuned[name], weights[1][name], atol=1e-6, err_msg=name)


def test_mlm_only_on_offline_records_has_no_nsp_head_loss_or_metric(data):
  config = model_files.read_config(data["config"])
  task = PretrainingTask(config, SEQ, PREDS, next_sentence=False)
  trainer = training_loop.Trainer(
      tf.distribute.OneDeviceStrategy("/cpu:0"), task,
      lambda: optimization.create_optimizer("adamw", 1e-3), 8)
  assert trainer.model.next_sentence_head is None
  assert not any("pooler" in v.path for v in trainer.model.trainable_variables)
  iterator = iter(trainer.strategy.distribute_datasets_from_function(
      lambda ctx: task.build_dataset(data["offline"], 8, True, ctx, seed=1)))
  metrics = trainer.train_steps(iterator, 2)
  assert set(metrics) == {"loss", "masked_lm_loss", "masked_lm_accuracy", "gradient_norm",
                          "real_tokens"}  # the loop's mean real tokens a step (ProgressLog's)
  assert metrics["loss"] == pytest.approx(metrics["masked_lm_loss"]) and metrics["loss"] > 5


def test_records_of_the_other_kind_are_named_through_the_cli(data, tmp_path):
  proc = _cli(_args(data, tmp_path / "o", "offline", num_train_steps=1, dynamic_masking=True,
                    vocab_file=UNCASED_VOCAB), check=False)
  assert proc.returncode == 1, proc.stderr[-2000:]
  assert (f"{data['offline']}: the records are already masked (they have masked_lm_* "
          "features) but --dynamic_masking") in proc.stderr and "--masking=none" in proc.stderr
  assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("records,extra,message", [
    ("none", {}, "none.tfrecord: the records have no masked_lm_* features (written with "
     "--masking=none?): pass --dynamic_masking"),
    ("offline", {"dynamic_masking": True}, "offline.tfrecord: the records are already masked"),
    ("none", {"dynamic_masking": True, "vocab_file": None},
     "--dynamic_masking needs --vocab_file"),
    ("offline", {"do_whole_word_mask": True}, "--do_whole_word_mask needs --dynamic_masking"),
])
def test_record_kind_and_flag_errors(data, records, extra, message):
  settings = pretraining_job.PretrainingSettings(**dict(
      dict(bert_config_file=data["config"], input_file=data[records], max_seq_length=SEQ,
           max_predictions_per_seq=PREDS, vocab_file=UNCASED_VOCAB), **extra))
  config = model_files.read_config(data["config"])
  with pytest.raises(ValueError, match=re.escape(message)):
    task = PretrainingTask(config, SEQ, PREDS,
                           masking=pretraining_job.masking_options(settings, config))
    task.build_dataset(settings.input_file, 8, True)


def test_continued_pretraining_takes_the_init_folders_config_and_case(data, tmp_path):
  """From a released folder: its config without --bert_config_file, and the case it states
  (not the one its vocabulary implies) in OUTPUT_DIR's files, with a warning."""
  init = tmp_path / "init"
  init.mkdir()
  (init / "bert_config.json").write_text(json.dumps(TINY))
  model_files.write_tokenizer_config(str(init), False)
  out = tmp_path / "out"
  settings = pretraining_job.PretrainingSettings(
      init_checkpoint=str(init), vocab_file=UNCASED_VOCAB, output_dir=str(out),
      input_file=data["offline"], max_seq_length=SEQ, do_train=True)
  config, source = finetuning_runner.config_and_source(settings)
  assert config == model_files.read_config(data["config"])
  assert source == str(init / "bert_config.json")
  pretraining_job.write_model_files(settings, config, source)
  assert model_files.beside(str(out)).do_lower_case is False  # the vocabulary says uncased
  os.remove(init / model_files.TOKENIZER_CONFIG_FILE)  # nothing stated: the vocabulary's
  pretraining_job.write_model_files(settings, config, source)
  assert model_files.beside(str(out)).do_lower_case is True
  with pytest.raises(ValueError, match="--bert_config_file is required"):
    finetuning_runner.config_and_source(pretraining_job.PretrainingSettings(
        output_dir=str(tmp_path / "empty")))
