"""tf.data input for fine-tuning TFRecords of fixed-length features (classifier, NER, SWAG...).

    ds = fixed_length_dataset("out/train.tf_record", classifier_schema(128), batch_size=32,
                              is_training=True)

yields dicts of the model's names (`input_ids` -> `input_word_ids`, `segment_ids` ->
`input_type_ids`; files written with either spelling read), int64 cast to int32 (TPUs want
int32), length-1 features as scalars ([batch]) and `shapes` applied (e.g. multiple choice
[batch, num_choices, seq]). Sharding, shuffling, repetition and skipping behave as in
`input_pipeline.pretraining_dataset`, so the training loop's resume-by-skipping works here too.
"""

import os

import tensorflow as tf

from data_prep import schema
from official_bert.training import input_pipeline

MODEL_NAMES = {"input_ids": "input_word_ids", "segment_ids": "input_type_ids"}


def _compression(path):
  return schema.compression_of(path) if os.path.exists(path) else ""


def _file_spec(path, features):
  """The parse spec for `path`: our features, under the v2 names if the file uses those."""
  compression = _compression(path)
  try:
    first = next(iter(tf.data.TFRecordDataset(path, compression_type=compression).take(1)),
                 None)
  except tf.errors.DataLossError as e:
    raise ValueError(f"{path}: not a valid TFRecord file ({e.message.strip()})") from e
  if first is None:
    raise ValueError(f"{path}: empty file, no records")
  present = set(tf.train.Example.FromString(first.numpy()).features.feature)
  if "input_word_ids" in present:
    features = tuple(f._replace(name=MODEL_NAMES.get(f.name, f.name)) for f in features)
  missing = [f.name for f in features if f.name not in present]
  if missing:
    raise ValueError(f"{path}: records lack feature(s) {missing} (they have "
                     f"{sorted(present)}): not written for this task?")
  return schema.tf_feature_spec(features), compression


def _parser(spec, shapes):
  def parse(serialized):  # [batch] strings -> dict of [batch, ...] tensors
    raw = tf.io.parse_example(serialized, spec)
    out = {}
    for name, value in raw.items():
      value = tf.cast(value, tf.int32) if value.dtype == tf.int64 else value
      name = MODEL_NAMES.get(name, name)
      if name in shapes:
        value = tf.reshape(value, [-1] + list(shapes[name]))
      elif value.shape[-1] == 1:
        value = tf.squeeze(value, -1)  # [b, 1] -> [b]
      out[name] = value
    return out
  return parse


def fixed_length_dataset(input_patterns, features, batch_size, is_training=True,
                         input_context=None, seed=None, skip_examples=0,
                         shuffle_buffer_size=10000, shapes=None, drop_remainder=None):
  """Batched, parsed examples of `features` (a tuple of `schema.Feature`) from TFRecords.

  Args:
    input_patterns: comma-separated files/globs.
    batch_size: the PER-REPLICA batch size.
    is_training: shuffle files and records, repeat forever, drop the last partial batch;
      else one pass in file order (predictions come back in input order).
    input_context: tf.distribute.InputContext: pipelines read disjoint files when there are
      enough, else every pipeline reads all and keeps every n-th record.
    skip_examples: records of this pipeline's (shuffled, repeated) stream to pass before
      batching: a resumed run continues the same stream.
    shapes: model feature name -> per-example shape, for features stored flattened.
  """
  paths = input_pipeline.expand_patterns(input_patterns)
  spec, compression = _file_spec(paths[0], features)  # all files of a task share one writer
  if drop_remainder is None:
    drop_remainder = is_training
  pipelines = input_context.num_input_pipelines if input_context else 1
  pipeline_id = input_context.input_pipeline_id if input_context else 0
  by_file = pipelines > 1 and len(paths) >= pipelines
  if by_file:
    paths = paths[pipeline_id::pipelines]
  files = tf.data.Dataset.from_tensor_slices(paths)
  if is_training and (by_file or pipelines == 1):
    # Not when sharding records: every pipeline must read the same record stream.
    files = files.shuffle(len(paths), seed=seed)
  cycle_length = min(len(paths), 8) if is_training else 1  # eval: records in file order
  parallel = {"num_parallel_calls": tf.data.AUTOTUNE, "deterministic": True}
  ds = files.interleave(lambda p: tf.data.TFRecordDataset(p, compression_type=compression),
                        cycle_length=cycle_length, **(parallel if cycle_length > 1 else {}))
  if pipelines > 1 and not by_file:
    ds = ds.shard(pipelines, pipeline_id)
  if is_training:
    ds = ds.shuffle(shuffle_buffer_size, seed=seed).repeat()
  if skip_examples:
    ds = ds.skip(skip_examples)
  ds = ds.batch(batch_size, drop_remainder=drop_remainder)
  ds = ds.map(_parser(spec, shapes or {}), num_parallel_calls=tf.data.AUTOTUNE,
              deterministic=True)
  options = tf.data.Options()
  options.deterministic = True
  if input_context is not None:  # sharded here; tf.distribute must not shard again
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
  return ds.with_options(options).prefetch(tf.data.AUTOTUNE)


class FixedLengthInputMixin:
  """`Task.build_dataset` for tasks whose records are `self.features` (a schema tuple).

  Subclasses set `features`, and optionally `shapes` and `shuffle_buffer_size`.
  """

  features = ()
  shapes = None
  shuffle_buffer_size = 10000

  def build_dataset(self, input_patterns, per_replica_batch_size, is_training,
                    input_context=None, seed=None, skip_examples=0):
    return fixed_length_dataset(input_patterns, self.features, per_replica_batch_size,
                                is_training=is_training, input_context=input_context,
                                seed=seed, skip_examples=skip_examples,
                                shuffle_buffer_size=self.shuffle_buffer_size,
                                shapes=self.shapes)
