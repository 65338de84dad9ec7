"""Every task's input through the one builder from a remote filesystem (gzip and not).

TensorFlow's in-memory `ram://` filesystem stands in for gs://: globbing, GZIP sniffing and
reading all go through tf.io.gfile / TFRecordDataset, so a path that is not on the local disk
must give the same batches as the local copy.
"""

import uuid

import numpy as np
import pytest
import tensorflow as tf

from data_prep import schema
from official_bert.modeling.bert_config import BertConfig
from official_bert.tasks.classification import ClassificationTask
from official_bert.tasks.multiple_choice import MultipleChoiceTask
from official_bert.tasks.pretraining import PretrainingTask
from official_bert.tasks.squad import SquadTask
from official_bert.tasks.tagging import TaggingTask

L = 16
CONFIG = BertConfig(vocab_size=50, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                    intermediate_size=8, max_position_embeddings=32, type_vocab_size=2)
TASKS = {
    "pretraining": lambda: PretrainingTask(CONFIG, L, 4),
    "classification": lambda: ClassificationTask(CONFIG, 3, L),
    "tagging": lambda: TaggingTask(CONFIG, 5, L),
    "multiple_choice": lambda: MultipleChoiceTask(CONFIG, L),
    "squad": lambda: SquadTask(CONFIG, L),
}


def _example(features, rng):
  feature = {}
  for f in features:
    if f.dtype == schema.FLOAT32:
      feature[f.name] = tf.train.Feature(float_list=tf.train.FloatList(
          value=rng.random(f.length).tolist()))
    else:  # small ids: valid for every table of CONFIG
      feature[f.name] = tf.train.Feature(int64_list=tf.train.Int64List(
          value=rng.integers(0, 2, f.length).tolist()))
  return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def _write(root, features, gzip, rng, num_files=2, per_file=5):
  options = tf.io.TFRecordOptions(compression_type="GZIP" if gzip else "")
  tf.io.gfile.makedirs(root)
  for i in range(num_files):
    with tf.io.TFRecordWriter(f"{root}/part-{i}.tfrecord", options) as writer:
      for _ in range(per_file):
        writer.write(_example(features, rng))
  return f"{root}/part-*.tfrecord"


def _batches(task, pattern, is_training):
  ds = task.build_dataset(pattern, 4, is_training, seed=3)
  return list((ds.take(3) if is_training else ds).as_numpy_iterator())


@pytest.mark.parametrize("gzip", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("name", sorted(TASKS))
def test_remote_input_equals_local(name, gzip, tmp_path):
  task = TASKS[name]()
  remote_root = f"ram://{uuid.uuid4().hex}/{name}"
  for is_training in (True, False):
    features = task.record_features(is_training)
    sub = "train" if is_training else "eval"
    local = _write(str(tmp_path / sub), features, gzip, np.random.default_rng(0))
    remote = _write(f"{remote_root}/{sub}", features, gzip, np.random.default_rng(0))
    assert schema.compression_of(remote.replace("*", "0")) == ("GZIP" if gzip else "")
    got, want = _batches(task, remote, is_training), _batches(task, local, is_training)
    assert len(got) == len(want) > 0
    for g, w in zip(got, want):
      assert sorted(g) == sorted(w)
      for key in w:
        np.testing.assert_array_equal(g[key], w[key], err_msg=f"{name} {sub} {key}")
  if name == "multiple_choice":
    assert got[0]["input_word_ids"].shape[1:] == (schema.SWAG_NUM_CHOICES, L)
  if name == "squad":
    assert "unique_ids" in got[0] and "start_positions" not in got[0]
