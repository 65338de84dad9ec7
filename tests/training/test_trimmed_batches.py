"""--trim_padding and --group_by_length (issue 23): batches cut to their longest real sequence
give the padded run's losses, metrics and predictions; grouping keeps every record, is
seeded, and a resumed run sees the uninterrupted run's batches.

Records are written here with random lengths (a tiny vocabulary, a tiny model, dropout off:
with dropout, masks of another shape are another random draw, equal only in distribution).
"""

import dataclasses

import keras
import numpy as np
import pytest
import tensorflow as tf

from data_prep import schema
from official_bert.modeling.bert_config import BertConfig
from official_bert.tasks.classification import ClassificationTask
from official_bert.tasks.multiple_choice import MultipleChoiceTask
from official_bert.tasks.squad import SquadTask
from official_bert.tasks.tagging import TaggingTask
from official_bert.training import evaluation
from official_bert.training import input_pipeline
from official_bert.training import input_stream
from official_bert.training import padding
from official_bert.training import runner
from official_bert.training import settings as settings_lib

pytestmark = pytest.mark.large  # trains or runs commands: `make test`, not `make test-fast`

L, BATCH, LABELS = 40, 8, 3
CONFIG = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=32, max_position_embeddings=L, type_vocab_size=2,
                    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
CPU = tf.distribute.OneDeviceStrategy("/cpu:0")


def _row(rng, length, seq=L):
  """Inputs of one sequence of `length` real tokens, zero-padded to `seq`."""
  ids = np.zeros(seq, np.int64)
  ids[:length] = rng.integers(4, CONFIG.vocab_size, length)
  mask = (np.arange(seq) < length).astype(np.int64)
  types = ((np.arange(seq) >= length // 2) * mask).astype(np.int64)
  return ids, mask, types


def _example(row):
  def feature(values):
    values = np.asarray(values).reshape(-1)
    if values.dtype.kind == "f":
      return tf.train.Feature(float_list=tf.train.FloatList(value=values))
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))
  return tf.train.Example(features=tf.train.Features(
      feature={name: feature(value) for name, value in row.items()})).SerializeToString()


def write(path, rows):
  with tf.io.TFRecordWriter(str(path)) as w:
    for row in rows:
      w.write(_example(row))
  return str(path)


def _sequences(rng, n, shortest=3, longest=L // 2):
  """Yields `n` (length, inputs) pairs: a random real length in [shortest, longest] and the
  input_ids, input_mask and segment_ids features of a sequence that long. A generator, so each
  task's own draws (labels, spans) follow its row's, as when every task drew them inline."""
  for _ in range(n):
    length = int(rng.integers(shortest, longest + 1))
    ids, mask, types = _row(rng, length)
    yield length, {"input_ids": ids, "input_mask": mask, "segment_ids": types}


def classifier_rows(rng, n, longest=L // 2):
  return [dict(inputs, label_ids=[int(rng.integers(0, LABELS))], is_real_example=[1])
          for _, inputs in _sequences(rng, n, longest=longest)]


def ner_rows(rng, n):
  rows = []
  for length, inputs in _sequences(rng, n):
    mask = inputs["input_mask"]
    labels = rng.integers(0, LABELS, L) * mask
    weights = (rng.random(L) < 0.7) * mask
    weights[0] = weights[length - 1] = 0  # [CLS], [SEP]
    rows.append(dict(inputs, label_ids=labels, label_weights=weights.astype(np.float32)))
  return rows


def squad_rows(rng, n):
  rows = []
  for i, (length, inputs) in enumerate(_sequences(rng, n, shortest=6)):
    start = int(rng.integers(1, length - 2))
    rows.append({"unique_ids": [1000 + i], **inputs, "start_positions": [start],
                 "end_positions": [start + 1], "is_impossible": [0]})
  return rows


@pytest.fixture(scope="module")
def files(tmp_path_factory):
  root = tmp_path_factory.mktemp("trim")
  rng = np.random.default_rng(0)
  swag = []
  for _ in range(16):
    parts = [_row(rng, int(rng.integers(3, 12))) for _ in range(schema.SWAG_NUM_CHOICES)]
    swag.append({"input_ids": np.concatenate([p[0] for p in parts]),
                 "input_mask": np.concatenate([p[1] for p in parts]),
                 "segment_ids": np.concatenate([p[2] for p in parts]), "label_ids": [1]})
  return {"classifier": write(root / "cls.tfrecord", classifier_rows(rng, 48)),
          "classifier_dev": write(root / "cls_dev.tfrecord", classifier_rows(rng, 21)),
          "ner": write(root / "ner.tfrecord", ner_rows(rng, 48)),
          "ner_dev": write(root / "ner_dev.tfrecord", ner_rows(rng, 13)),
          "squad": write(root / "squad.tfrecord", squad_rows(rng, 16)),
          "swag": write(root / "swag.tfrecord", swag),
          "long": write(root / "long.tfrecord", classifier_rows(rng, 256, longest=L))}


def test_bucket_lengths():
  assert [padding.bucket_length(n, 512) for n in (0, 1, 8, 9, 64, 65, 81, 128, 129, 300)] == [
      8, 8, 8, 16, 64, 80, 96, 128, 160, 320]
  assert padding.bucket_length(37, 40) == 40 and padding.bucket_length(30, 30) == 30
  assert len({padding.bucket_length(n, 128) for n in range(129)}) == 12
  assert len({padding.bucket_length(n, 512) for n in range(513)}) == 20


def _batches(task, path, trim, is_training=False, **kw):
  task.trim_padding = trim
  ds = task.build_dataset(path, BATCH, is_training, seed=5, **kw)
  return list(ds.take(6).as_numpy_iterator())


@pytest.mark.parametrize("kind", ["classifier", "ner", "swag"])
def test_token_features_are_cut_to_the_longest_real_sequence(files, kind):
  task = {"classifier": ClassificationTask(CONFIG, LABELS, L),
          "ner": TaggingTask(CONFIG, LABELS, L),
          "swag": MultipleChoiceTask(CONFIG, L)}[kind]
  for padded, cut in zip(_batches(task, files[kind], False, True),
                         _batches(task, files[kind], True, True)):
    longest = int(padding.real_lengths(padded["input_mask"]).numpy().max())
    length = padding.bucket_length(longest, L)
    assert length < L and cut["input_mask"].shape[-1] == length
    for name, value in padded.items():
      if name in task.token_features:
        np.testing.assert_array_equal(cut[name], value[..., :length])
        assert not value[..., length:].any()  # only padding was cut
      else:
        np.testing.assert_array_equal(cut[name], value)
  assert {"label_ids", "label_weights"} <= set(TaggingTask.token_features)


def test_squad_batches_keep_their_length_and_why(files):
  """SQuAD is never cut: its positions would stay valid and its logits at real tokens equal,
  but the original's span loss is a softmax over every position, padding included."""
  task = SquadTask(CONFIG, L)
  batch = _batches(task, files["squad"], True, True)[0]
  assert batch["input_mask"].shape == (BATCH, L) and task.token_features == ()
  keras.utils.set_random_seed(3)
  model = task.build_model()
  length = padding.bucket_length(int(padding.real_lengths(batch["input_mask"]).numpy().max()), L)
  cut = {k: v[..., :length] if k.startswith("input_") else v for k, v in batch.items()}
  full, short = model(batch, training=False), model(cut, training=False)
  real = batch["input_mask"][:, :length].astype(bool)
  np.testing.assert_allclose(np.asarray(short["start_logits"])[real],
                             np.asarray(full["start_logits"])[:, :length][real], atol=1e-5)
  loss = lambda f, o: float(task.loss_sums(f, o)["span_loss"])
  assert abs(loss(batch, full) - loss(cut, short)) > 1e-3


def _run(task, train, dev, trim, steps=3):
  """Per-step training metrics, then the evaluation's scores and outputs."""
  keras.utils.set_random_seed(11)
  settings = settings_lib.FinetuningSettings(trim_padding=trim, learning_rate=1e-3,
                                             train_batch_size=BATCH, eval_batch_size=BATCH)
  trainer = runner.make_trainer(settings, CPU, task, steps, 1)
  trainer.model.dropout.rate = 0.0  # the head's too: [b, seq, h] masks differ with seq
  assert task.trim_padding == trim
  fn = runner.dataset_fn(task, train, BATCH, True, 5)
  iterator = iter(CPU.distribute_datasets_from_function(lambda ctx: fn(ctx, 0)))
  history = [trainer.train_steps(iterator, 1) for _ in range(steps)]
  scores, outputs = evaluation.evaluate(trainer, runner.dataset_fn(task, dev, BATCH, False, None),
                                        keep_outputs=True)
  return history, scores, outputs


@pytest.mark.parametrize("kind", ["classifier", "ner"])
def test_trimmed_run_equals_padded_run(files, kind):
  make = {"classifier": lambda: ClassificationTask(CONFIG, LABELS, L),
          "ner": lambda: TaggingTask(CONFIG, LABELS, L)}[kind]
  padded = _run(make(), files[kind], files[kind + "_dev"], trim=False)
  trimmed = _run(make(), files[kind], files[kind + "_dev"], trim=True)
  for a, b in zip(padded[0], trimmed[0]):  # every step's loss, gradient norm, metrics
    assert set(a) == set(b)
    for name in a:
      np.testing.assert_allclose(b[name], a[name], rtol=1e-4, atol=1e-5, err_msg=name)
  for name in padded[1]:
    np.testing.assert_allclose(trimmed[1][name], padded[1][name], rtol=1e-4, err_msg=name)
  for name in padded[2]:  # predictions (logits) and the kept labels, in input order
    np.testing.assert_allclose(trimmed[2][name], padded[2][name], rtol=1e-4, atol=1e-5,
                               err_msg=name)


def test_evaluation_batches_are_cut_only_without_position_outputs(files):
  cls, ner = ClassificationTask(CONFIG, LABELS, L), TaggingTask(CONFIG, LABELS, L)
  assert _batches(cls, files["classifier_dev"], True)[0]["input_mask"].shape[1] < L
  assert _batches(ner, files["ner_dev"], True)[0]["input_mask"].shape[1] == L


def _stream(path, seed=5, skip=0, group=True, n=12, buffer=BATCH * 4):
  ds = input_pipeline.dataset(path, schema.classifier_features(L), BATCH, is_training=True,
                              seed=seed, skip_examples=skip, shuffle_buffer_size=buffer,
                              group_by_length=group, trim_features=("input_word_ids",
                                                                    "input_mask"))
  return list(ds.take(n).as_numpy_iterator())


def _keys(batches):
  return sorted(tuple(row) for b in batches for row in b["input_word_ids"][:, :8].tolist())


def test_group_by_length_keeps_records_is_seeded_and_resumes_exactly(files):
  grouped, plain = _stream(files["long"]), _stream(files["long"], group=False)
  # Windows of 4 batches: the same records as the shuffled stream's, reordered.
  assert _keys(grouped[:4]) == _keys(plain[:4]) and _keys(grouped[4:8]) == _keys(plain[4:8])
  spread = lambda bs: np.mean([np.ptp(padding.real_lengths(b["input_mask"]).numpy())
                               for b in bs])
  assert spread(grouped) < spread(plain) / 2
  assert (np.mean([b["input_mask"].shape[1] for b in grouped])
          < np.mean([b["input_mask"].shape[1] for b in plain]))
  again, other = _stream(files["long"]), _stream(files["long"], seed=6)
  assert all((a["input_word_ids"] == b["input_word_ids"]).all() for a, b in zip(grouped, again))
  assert _keys(other[:4]) != _keys(grouped[:4])
  resumed = _stream(files["long"], skip=5 * BATCH, n=7)  # mid-window: batches 5.. as before
  for a, b in zip(grouped[5:], resumed):
    np.testing.assert_array_equal(a["input_word_ids"], b["input_word_ids"])


def test_group_windows_are_small_and_within_the_data():
  assert padding.window_batches(32, 10000, 67349) == padding.WINDOW_BATCHES == 50
  assert padding.window_batches(32, 320, 67349) == 10  # at most a shuffle buffer
  assert padding.window_batches(8, 10000, 40) == 5  # never two copies of the data
  assert padding.window_batches(32, 10000, 10) == 1


def test_a_declared_token_feature_must_have_the_sequence_length(files):
  with pytest.raises(ValueError, match="label_ids"):
    input_pipeline.dataset(files["classifier"], schema.classifier_features(L), BATCH,
                           trim_features=("input_mask", "label_ids"))


def test_settings_reach_the_task_and_pretraining_stays_padded():
  fields = {f.name: f.default for f in dataclasses.fields(settings_lib.FinetuningSettings)}
  assert fields["trim_padding"] is True and fields["group_by_length"] is False
  assert "trim_padding" not in {f.name for f in dataclasses.fields(settings_lib.RunSettings)}
  task = ClassificationTask(CONFIG, LABELS, L)
  runner.make_trainer(settings_lib.RunSettings(), CPU, task, 2, 1)
  assert not task.trim_padding and not task.group_by_length
  key = input_stream.stream_key("x", L, 32)
  assert "group_by_length" not in key
  assert input_stream.stream_key("x", L, 32, group_by_length=True) == dict(
      key, group_by_length=True)
