"""The one tf.data input builder: TFRecords of fixed-length features -> the model's batches.

    ds = dataset("out/pretrain.tfrecord-*", schema.pretraining_features(128, 20),
                 batch_size=32, is_training=True)

Every task reads through `dataset` (pretraining, classification, tagging, multiple choice,
SQuAD): it yields dicts of the model's names (`input_ids` -> `input_word_ids`,
`segment_ids` -> `input_type_ids`, `schema.V2_NAMES`; files written with either spelling
read), int64 cast to int32 (TPUs want int32), length-1 features as [batch] and `shapes`
applied (e.g. multiple choice [batch, num_choices, seq]); fine-tuning's batches may be
cut to their longest real sequence and grouped by length (`padding`). Files are found,
sniffed for GZIP and read through `tf.io.gfile`/`TFRecordDataset`, so `gs://` works like a
local path.

Corrupt files: TensorFlow's `DataLossError` ("corrupted record at 0") does not name the
file, and it surfaces deep inside the training loop. So `check_files` (run by default;
`data_prep.record_checks`)
reads the first record of every file before training, which catches files that are not
TFRecords, have the wrong compression, are empty or were written with other lengths. A
file damaged further in still fails only when reached; `find_corrupt_files` then reads
every file to the end and names the damaged ones.
"""

import collections

import tensorflow as tf

from data_prep import record_checks
from data_prep import schema
from data_prep import tfrecord_io
from data_prep.pretraining import outputs
from data_prep.record_checks import check_files  # noqa: F401  (this module's check, in data_prep)
from official_bert.training import padding


def expand_patterns(input_patterns):
  """Comma-separated paths/globs -> sorted, de-duplicated file list, by the writers' rules
  (`tfrecord_io.expand_patterns`: `out/*` never reads a writer's hidden temporary file).
  ValueError where the files hold shards of one output written twice with other counts
  (out.tfrecord-*-of-00004 and -of-00002): the older write's would be read too."""
  files = sorted(tfrecord_io.expand_patterns(input_patterns))
  totals = collections.defaultdict(set)
  for path in files:
    match = outputs.SHARD_NAME.match(path)
    if match:
      totals[match.group(1)].add(match.group(3))
  for prefix, counts in totals.items():
    if len(counts) > 1:
      names = ", ".join(f"{prefix}-*-of-{n}" for n in sorted(counts))
      raise ValueError(f"{input_patterns!r} matches shards of {prefix} written with "
                       f"{len(counts)} shard counts ({names}): an earlier write's shards are "
                       f"still there. Remove the older ones, or name the shards to read")
  return files


def find_corrupt_files(input_patterns):
  """Reads every record of every file: [(path, error message)] for the damaged ones.

  Slow (a full pass); meant for attributing a `DataLossError` raised during training.
  """
  bad = []
  for path in expand_patterns(input_patterns):
    try:
      compression = schema.compression_of(path)
      for _ in tf.data.TFRecordDataset(path, compression_type=compression).batch(4096):
        pass
    except tf.errors.DataLossError as e:
      bad.append((path, record_checks.op_error_text(e)))
  return bad


def _parser(features, shapes):
  spec = schema.tf_feature_spec(features)
  model_names = dict(schema.V2_NAMES)

  def parse(serialized):  # [batch] strings -> dict of [batch, ...] tensors
    out = {}
    for name, value in tf.io.parse_example(serialized, spec).items():
      value = tf.cast(value, tf.int32) if value.dtype == tf.int64 else value
      name = model_names.get(name, name)
      if name in shapes:
        value = tf.reshape(value, [-1] + list(shapes[name]))
      elif value.shape[-1] == 1:
        value = tf.squeeze(value, -1)  # [b, 1] -> [b]
      out[name] = value
    return out

  return parse


def _transformed(parse, batch_transform):
  def parse_and_transform(index, serialized):  # [batch] int64, [batch] strings
    return batch_transform(parse(serialized), index)
  return parse_and_transform


def dataset(input_patterns, features, batch_size, is_training=True, input_context=None,
            seed=None, skip_examples=0, shuffle_buffer_size=10000, shapes=None,
            drop_remainder=None, cycle_length=None, check_all_files=True,
            batch_transform=None, trim_features=(), group_by_length=False,
            epoch_batches=False):
  """Batched, parsed examples of `features` (a tuple of `schema.Feature`) from TFRecords.

  Args:
    input_patterns: comma-separated files/globs; GZIP is detected from the bytes.
    features: the writer's schema (`data_prep.schema`), v1 names; v2 files read too.
    batch_size: the PER-REPLICA batch: with a `tf.distribute` strategy pass
      `input_context.get_per_replica_batch_size(global_batch_size)`.
    is_training: shuffle (files and records) and repeat forever; else one pass, in file
      order (predictions come back in input order).
    input_context: a `tf.distribute.InputContext`. With at least `num_input_pipelines`
      files, each pipeline reads a disjoint subset of the files; with fewer files, every
      pipeline reads all of them and keeps every `num_input_pipelines`-th record (correct
      but each pipeline does all the I/O).
    seed: for the file and record shuffles; the same seed gives the same batches.
    skip_examples: drop this many records of this pipeline's (shuffled, repeated) stream
      before batching: with the same seed, a restart at step s passes the records the
      pipeline served before s and continues the same stream. The skipped records are
      still read (not parsed), so this costs I/O.
    shapes: model feature name -> per-example shape, for features stored flattened.
    drop_remainder: default `is_training`: TPUs and XLA want a static batch dimension.
    cycle_length: files read at once; default min(files, 8) for training, 1 otherwise so
      records come in file order.
    check_all_files: `check_files` on every file first; if False only on the first.
    batch_transform: optional (parsed batch, element indices) -> batch, e.g. masking on the
      fly (`dynamic_masking`). The indices ([batch] int64) number this pipeline's stream
      after shuffling and repeating but before `skip_examples`, so they keep growing across
      epochs and a resumed run sees the uninterrupted run's indices for the same records.
    trim_features: model names of the per-token features ([b, ..., seq]) to cut, in every
      batch, to its longest real sequence (`padding.trimmer`); () keeps the record length.
    group_by_length: training only: batches of similar lengths, sorted within windows of
      the shuffled stream (`padding.group_by_length`); resumes (`skip_examples`) stay exact.
    epoch_batches: training only: each epoch (one pass over the files, reshuffled) is
      batched on its own, its last batch partial, as Hugging Face's Trainer
      (--last_partial_batch); `skip_examples` must then be a whole number of batches.
  """
  paths = expand_patterns(input_patterns)
  compression, v2_names = check_files(paths if check_all_files else paths[:1], features)
  if v2_names:
    features = schema.with_v2_names(features)
  if drop_remainder is None:
    drop_remainder = is_training

  num_pipelines = input_context.num_input_pipelines if input_context else 1
  pipeline_id = input_context.input_pipeline_id if input_context else 0
  shard_files = num_pipelines > 1 and len(paths) >= num_pipelines
  shard_records = num_pipelines > 1 and not shard_files
  files = tf.data.Dataset.from_tensor_slices(paths)
  if shard_files:
    files = files.shard(num_pipelines, pipeline_id)
  num_files = len(paths[pipeline_id::num_pipelines]) if shard_files else len(paths)
  if is_training and not shard_records:
    # Not when sharding records: every pipeline must read the same record stream.
    files = files.shuffle(num_files, seed=seed)
  if cycle_length is None:
    cycle_length = min(num_files, 8) if is_training else 1

  parallel = {"num_parallel_calls": tf.data.AUTOTUNE, "deterministic": True}
  ds = files.interleave(
      lambda path: tf.data.TFRecordDataset(path, compression_type=compression),
      cycle_length=cycle_length, block_length=1, **(parallel if cycle_length > 1 else {}))
  if shard_records:
    ds = ds.shard(num_pipelines, pipeline_id)  # record level: too few files to split
  shapes = shapes or {}
  if trim_features or group_by_length:
    mask_shape = tuple(shapes.get("input_mask", (_length(features, "input_mask"),)))
  if is_training and epoch_batches:
    if group_by_length or batch_transform is not None:
      raise ValueError("epoch_batches: not with group_by_length or a batch_transform")
    if skip_examples % batch_size:
      raise ValueError(f"epoch_batches: skip_examples={skip_examples} is not a whole number "
                       f"of batches of {batch_size}")
    # Reshuffled every pass; batched before repeating, so no batch spans two epochs.
    ds = ds.shuffle(shuffle_buffer_size, seed=seed).batch(batch_size).repeat()
    ds = ds.skip(skip_examples // batch_size)
    skip_examples, batch_size = 0, None  # done
  elif is_training:
    ds = ds.shuffle(shuffle_buffer_size, seed=seed).repeat()
    if group_by_length:  # before the skip, so a resumed run skips the reordered stream
      mine = paths[pipeline_id::num_pipelines] if shard_files else paths
      records = _count_records(mine, compression) // (num_pipelines if shard_records else 1)
      ds = padding.group_by_length(
          ds, batch_size, padding.window_batches(batch_size, shuffle_buffer_size, records),
          mask_shape, seed)
  if batch_transform is not None:
    ds = ds.enumerate()  # (index, record), numbered before the skip
  if skip_examples:
    ds = ds.skip(skip_examples)
  # Batch the serialized strings, then parse a whole batch in one vectorized op.
  if batch_size is not None:
    ds = ds.batch(batch_size, drop_remainder=drop_remainder)
  parse = _parser(features, shapes)
  if batch_transform is not None:
    parse = _transformed(parse, batch_transform)
  ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  if trim_features:
    _check_token_features(trim_features, features, shapes, mask_shape[-1])
    ds = ds.map(padding.trimmer(trim_features, mask_shape[-1]))

  options = tf.data.Options()
  options.deterministic = True
  if input_context is not None:
    # We sharded ourselves; tf.distribute must not shard again.
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
  return ds.with_options(options).prefetch(tf.data.AUTOTUNE)


def _count_records(paths, compression):
  """Records in `paths` (a pass over the files, unparsed)."""
  ds = tf.data.TFRecordDataset(paths, compression_type=compression)
  return int(ds.reduce(tf.constant(0, tf.int64), lambda n, _: n + 1))


def _length(features, name):
  for f in features:
    if f.name == name:
      return f.length
  raise ValueError(f"the records have no {name} to find real tokens by")


def _check_token_features(names, features, shapes, record_length):
  """A feature declared per-token must end in the sequence axis: else cutting it is wrong."""
  stored = {schema.V2_NAMES.get(f.name, f.name): f.length for f in features}
  for name in names:
    if name not in stored:
      raise ValueError(f"per-token feature {name!r} is not in the records ({sorted(stored)})")
    last = shapes[name][-1] if name in shapes else stored[name]
    if last != record_length:
      raise ValueError(f"per-token feature {name!r} ends in {last} positions, not the "
                       f"sequence's {record_length}")


def pretraining_dataset(input_patterns, seq_length, max_predictions_per_seq, batch_size,
                        **kwargs):
  """`dataset` of the original pretraining records (`schema.pretraining_features`)."""
  return dataset(input_patterns,
                 schema.pretraining_features(seq_length, max_predictions_per_seq),
                 batch_size, **kwargs)


def synthetic_pretraining_dataset(seq_length, max_predictions_per_seq, vocab_size, batch_size,
                                  seed=0):
  """An infinite stream of random, well-formed batches (benchmarks without files).

  Each row has a random length; padding is zero; segment 1 starts at a random split;
  the masked positions are distinct, sorted, inside the real tokens and never 0 ([CLS]),
  and `masked_lm_ids` are the ids found there. Batch `i` depends only on (seed, i).
  """
  L, P = seq_length, max_predictions_per_seq  # pylint: disable=invalid-name
  if L < 3:
    raise ValueError(f"seq_length={L} must be >= 3")
  P_real = min(P, L - 2)  # pylint: disable=invalid-name  (room for [CLS] and [SEP])

  def make(step):
    seeds = tf.random.experimental.stateless_split(tf.stack([tf.cast(seed, tf.int64), step]), 6)
    b = batch_size
    length = tf.random.stateless_uniform([b, 1], seeds[0], minval=min(P_real + 2, L),
                                         maxval=L + 1, dtype=tf.int32)  # [b, 1]
    pos = tf.range(L)[None, :]  # [1, seq]
    input_mask = tf.cast(pos < length, tf.int32)  # [b, seq]
    ids = tf.random.stateless_uniform([b, L], seeds[1], minval=1, maxval=vocab_size,
                                      dtype=tf.int32)
    input_word_ids = ids * input_mask
    split = tf.random.stateless_uniform([b, 1], seeds[2], minval=1, maxval=L, dtype=tf.int32)
    input_type_ids = tf.cast((pos >= tf.minimum(split, length - 1)), tf.int32) * input_mask
    # Distinct positions: the top P of random scores over positions 1 .. length-1.
    scores = tf.random.stateless_uniform([b, L], seeds[3])
    scores = tf.where((pos >= 1) & (pos < length), scores, -1.0)
    chosen = tf.math.top_k(scores, k=P_real).indices  # [b, P_real]
    num_real = tf.random.stateless_uniform([b, 1], seeds[4], minval=1, maxval=P_real + 1,
                                           dtype=tf.int32)
    real = tf.range(P_real)[None, :] < num_real  # [b, P_real]
    chosen = tf.sort(tf.where(real, chosen, L), axis=-1)  # padding sorts last
    real = chosen < L
    positions = tf.where(real, chosen, 0)
    lm_ids = tf.where(real, tf.gather(input_word_ids, positions, batch_dims=1), 0)
    pad = [[0, 0], [0, P - P_real]]
    return {
        "input_word_ids": input_word_ids,
        "input_mask": input_mask,
        "input_type_ids": input_type_ids,
        "masked_lm_positions": tf.pad(positions, pad),  # [b, P]
        "masked_lm_ids": tf.pad(lm_ids, pad),
        "masked_lm_weights": tf.pad(tf.cast(real, tf.float32), pad),
        "next_sentence_labels": tf.random.stateless_uniform(
            [b], seeds[5], minval=0, maxval=2, dtype=tf.int32),  # [b]
    }

  return tf.data.Dataset.counter(dtype=tf.int64).map(make).prefetch(tf.data.AUTOTUNE)
