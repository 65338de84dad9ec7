"""SQuAD span prediction as a `tasks.Task`: model, input pipeline, loss and metrics.

Loss as the original run_squad.py: per example the mean of the start and end position
cross-entropies over the whole sequence, (CE(start) + CE(end)) / 2, averaged over the
examples of the global batch (the loop divides the sums by the number of examples).
"""

import tensorflow as tf

from data_prep import schema
from data_prep.squad import records as squad_schema
from official_bert.training import input_pipeline
from official_bert.tasks import base as tasks
from official_bert.modeling.encoder import BertEncoder
from official_bert.modeling.finetuning_models import BertSpanLabeler

_MODEL_NAMES = {"input_ids": "input_word_ids", "segment_ids": "input_type_ids"}


def _nll(positions, logits):  # [b], [b, seq] -> [b]
  log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
  return -tf.gather(log_probs, positions, batch_dims=1)


def _hits(positions, logits):  # [b], [b, seq] -> [b] float
  return tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), positions), tf.float32)


class SquadTask(tasks.Task):
  """Start/end logits over the window; `build_model` makes a `BertSpanLabeler`."""

  loss_epsilons = {"span_loss": 0.0}
  keep_features = ("unique_ids",)  # passed through predictions to map logits to windows

  def __init__(self, bert_config, seq_length, shuffle_buffer_size=10000):
    self.bert_config = bert_config
    self.seq_length = seq_length
    self.shuffle_buffer_size = shuffle_buffer_size

  def build_model(self):
    encoder = BertEncoder.from_bert_config(self.bert_config)
    model = BertSpanLabeler(encoder, name="bert_span_labeler")
    model.build()
    return model

  def build_dataset(self, input_patterns, per_replica_batch_size, is_training,
                    input_context=None, seed=None, skip_examples=0):
    return squad_dataset(input_patterns, self.seq_length, per_replica_batch_size, is_training,
                         input_context, seed, skip_examples, self.shuffle_buffer_size)

  def loss_normalizers(self, features):
    return {"span_loss": tf.cast(tf.shape(features["start_positions"])[0], tf.float32)}

  def loss_sums(self, features, outputs):
    start = _nll(features["start_positions"], outputs["start_logits"])  # [b]
    end = _nll(features["end_positions"], outputs["end_logits"])  # [b]
    return {"span_loss": tf.reduce_sum((start + end) / 2.0)}

  def metric_sums(self, features, outputs):
    n = tf.cast(tf.shape(features["start_positions"])[0], tf.float32)
    start_hit = _hits(features["start_positions"], outputs["start_logits"])
    end_hit = _hits(features["end_positions"], outputs["end_logits"])
    return {"start_accuracy": (tf.reduce_sum(start_hit), n),
            "end_accuracy": (tf.reduce_sum(end_hit), n),
            "span_accuracy": (tf.reduce_sum(start_hit * end_hit), n)}


def squad_dataset(input_patterns, seq_length, batch_size, is_training, input_context=None,
                  seed=None, skip_examples=0, shuffle_buffer_size=10000):
  """Batches of `data_prep.create_squad_data` TFRecords with the model's feature names.

  Training: shuffled, repeated, full batches; `skip_examples` records of this pipeline's
  seeded stream are passed first (a resumed run continues the same stream). Prediction:
  one pass in file order, the last batch partial, `unique_ids` kept to map results back.
  `batch_size` is per replica.
  """
  paths = input_pipeline.expand_patterns(input_patterns)
  compressions = {schema.compression_of(p) if tf.io.gfile.exists(p) else "" for p in paths}
  if len(compressions) > 1:
    raise ValueError(f"mixed GZIP and uncompressed files in {input_patterns!r}")
  spec = squad_schema.tf_feature_spec(seq_length, is_training)
  ds = tf.data.TFRecordDataset(paths, compression_type=compressions.pop())
  if input_context is not None and input_context.num_input_pipelines > 1:
    ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
  if is_training:
    ds = ds.shuffle(shuffle_buffer_size, seed=seed).repeat()
    if skip_examples:
      ds = ds.skip(skip_examples)

  def parse(serialized):  # [batch] strings -> dict of int32 [batch, seq] / [batch]
    out = {}
    for name, value in tf.io.parse_example(serialized, spec).items():
      value = tf.cast(value, tf.int32)
      out[_MODEL_NAMES.get(name, name)] = value[:, 0] if value.shape[-1] == 1 else value
    return out

  ds = ds.batch(batch_size, drop_remainder=is_training)
  ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  options = tf.data.Options()
  options.deterministic = True
  if input_context is not None:
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
  return ds.with_options(options).prefetch(tf.data.AUTOTUNE)


def check_record_length(path, seq_length):
  """ValueError naming the file if its first record's input_ids are not `seq_length` long."""
  compression = schema.compression_of(path)
  for record in tf.data.TFRecordDataset(path, compression_type=compression).take(1):
    found = len(tf.train.Example.FromString(record.numpy()).features.feature[
        "input_ids"].int64_list.value)
    if found != seq_length:
      raise ValueError(f"{path}: windows of {found} tokens but --max_seq_length={seq_length}")
