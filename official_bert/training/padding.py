"""No work on padding: batches cut to their longest real sequence, and grouped by length.

Records are written at --max_seq_length, so a batch of short texts (SST-2 averages about 25
tokens of 128) would pay for every padding position. Padding is masked out of attention, so
cutting it changes no real token's output (`trim_batch`). A batch is cut to a bucket length
(`bucket_length`), not to its exact longest sequence: XLA compiles a step per shape, and a
few lengths per octave keep that to about a dozen shapes at 128 and twenty at 512.

`group_by_length` reorders a training stream so that batches hold texts of similar length
(Hugging Face's `group_by_length`): less padding left after cutting. It works on the
serialized stream, before `input_pipeline.dataset` skips what a resumed run consumed, and
each window is a whole number of batches; so a restart at any step sees the same batches.
Windows are small (`window_batches`), so batches stay random: which lengths meet, and in
which order the batches come.
"""

import tensorflow as tf

# Lengths up to this are multiples of it; beyond, multiples of an eighth of the next power
# of two (65..128 -> 80, 96, 112, 128; 257..512 -> 320, 384, 448, 512).
MIN_STEP = 8
# Batches sorted together: Hugging Face's LengthGroupedSampler megabatch. A larger window
# gives more uniform batches but fewer distinct ones (a window sorts by length rank).
WINDOW_BATCHES = 50


def bucket_length(longest, record_length):
  """The length a batch whose longest real sequence has `longest` tokens is cut to: at least
  `longest` (and 1), at most `record_length`, at most about 1/8 more than needed beyond 64."""
  longest = max(int(longest), 1)
  step = max(MIN_STEP, (1 << (longest - 1).bit_length()) // 8)
  return min(-(-longest // step) * step, record_length)


def real_lengths(mask):
  """[b, ..., seq] input_mask -> [b] int32: 1 + the last real position over the example's
  sequences (its choices / texts), 0 if none. Not sum(mask): a mask that is not a prefix of
  ones still loses no real token."""
  positions = tf.range(1, tf.shape(mask)[-1] + 1, dtype=tf.int32)  # [seq]
  last = tf.where(tf.not_equal(mask, 0), positions, 0)  # [b, ..., seq]
  return tf.reduce_max(tf.reshape(last, [tf.shape(mask)[0], -1]), axis=-1)


def trimmer(token_features, record_length):
  """(parsed batch) -> the batch with `token_features` ([b, ..., seq] each) cut to the
  bucket length of its longest real sequence; the other features as they are."""
  table = tf.constant([bucket_length(n, record_length) for n in range(record_length + 1)],
                      tf.int32)  # longest -> cut length, the one rule above

  def trim_batch(batch):
    length = tf.gather(table, tf.reduce_max(real_lengths(batch["input_mask"])))
    return {name: value[..., :length] if name in token_features else value
            for name, value in batch.items()}

  return trim_batch


def window_batches(batch_size, shuffle_buffer_size, num_records):
  """Batches per sorted window: WINDOW_BATCHES, at most a shuffle buffer and the data (a
  window spanning several epochs would put copies of one example in one batch)."""
  return max(1, min(WINDOW_BATCHES, shuffle_buffer_size // batch_size,
                    num_records // batch_size))


def group_by_length(records, batch_size, window_batches, mask_shape, seed=None):
  """The serialized stream `records` (infinite) reordered window by window: each window of
  `window_batches` batches is sorted by real length (stable), cut into batches, and the
  batches put in a random order keyed by (seed, window index). Every record is kept.

  mask_shape: input_mask's per-example shape ((seq,), or (choices, seq) for a flattened one).
  """
  size = 1
  for dim in mask_shape:
    size *= dim
  spec = {"input_mask": tf.io.FixedLenFeature([size], tf.int64)}
  window = batch_size * window_batches
  seed = tf.constant(seed or 0, tf.int64)

  def reorder(index, serialized):  # window index, [window] strings
    mask = tf.reshape(tf.io.parse_example(serialized, spec)["input_mask"],
                      [-1] + list(mask_shape))
    lengths = real_lengths(mask)  # [window]
    batches = tf.reshape(tf.gather(serialized, tf.argsort(lengths, stable=True)),
                         [window_batches, batch_size])
    noise = tf.random.stateless_uniform([window_batches], tf.stack([seed, index]))
    return tf.reshape(tf.gather(batches, tf.argsort(noise)), [window])

  return records.batch(window, drop_remainder=True).enumerate().map(
      reorder, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True).unbatch()
