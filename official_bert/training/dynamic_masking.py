"""Masked-LM masking in the input pipeline (`run_pretraining --dynamic_masking`), as RoBERTa.

The original writer masks each sequence once, offline (`dupe_factor` copies with different
masks); here records written with `create_pretraining_data --masking=none` are masked per
batch while training, so every epoch sees new masks. The rules are the writer's
(`data_prep.pretraining.instances`):
  - candidates: the real tokens (input_mask 1) except [CLS] and [SEP];
  - num_to_predict = min(max_predictions_per_seq, max(1, round(length * masked_lm_prob))),
    length counting the real tokens, rounding half to even as the writer's numpy;
  - token level: a uniform random subset of that many candidates (fewer if there are fewer);
    whole words (`do_whole_word_mask`): a word is a candidate with `word_starts` 1 (the first
    candidate always opens one) and the candidates after it with 0; words are visited in
    random order and taken only if the whole word fits what is left of the budget;
  - each chosen token becomes [MASK] 80%, a random id of the vocabulary 10%, itself 10%.
The output has the offline records' `masked_lm_positions` (sorted, zero-padded),
`masked_lm_ids` and `masked_lm_weights` [batch, max_predictions_per_seq], so the model and
loss code are the same for both kinds of records.

Determinism: the random numbers of a batch are stateless (`tf.random.stateless_*`), keyed by
(seed, input pipeline, index of the batch's first record in the pipeline's shuffled, repeated
stream). A resumed run re-reads the same stream and skips what was consumed
(`input_pipeline.dataset`), so it gets the same indices, hence the same masks, as the
uninterrupted run; the indices keep growing across epochs, so an epoch never repeats a mask.
The ids of [CLS], [SEP] and [MASK] come from the vocabulary (`--vocab_file`): learned
vocabularies do not have BERT's 101/102/103.
"""

import dataclasses

import tensorflow as tf

from data_prep import record_checks
from data_prep import schema
from data_prep import tokenization

_OFFLINE_FEATURES = ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")


@dataclasses.dataclass(frozen=True)
class MaskingOptions:
  max_predictions_per_seq: int
  vocab_size: int
  cls_id: int
  sep_id: int
  mask_id: int
  masked_lm_prob: float = 0.15
  do_whole_word_mask: bool = False
  seed: int = 0


def options_from_vocab(vocab_file, vocab_size, **kwargs):
  """`MaskingOptions` with the [CLS]/[SEP]/[MASK] ids of `vocab_file`; ValueError naming the
  file if it lacks one or its ids do not fit `vocab_size` (of the model config)."""
  if not vocab_file:
    raise ValueError("--dynamic_masking needs --vocab_file: the vocabulary the records were "
                     "written with (for the ids of [CLS], [SEP] and [MASK])")
  vocab = tokenization.load_vocab(vocab_file)
  tokenization.check_special_tokens(vocab, vocab_file, ("[CLS]", "[SEP]", "[MASK]"))
  ids = {token: vocab[token] for token in ("[CLS]", "[SEP]", "[MASK]")}
  too_big = {t: i for t, i in ids.items() if i >= vocab_size}
  if too_big:
    raise ValueError(f"--vocab_file={vocab_file}: ids {too_big} are outside the model's "
                     f"vocab_size={vocab_size}; is it the vocabulary of --bert_config_file?")
  # Random replacements come from the vocabulary's ids, as the writer draws them (a config's
  # vocab_size may be padded or resized beyond the vocabulary).
  return MaskingOptions(vocab_size=min(len(vocab), vocab_size), cls_id=ids["[CLS]"],
                        sep_id=ids["[SEP]"], mask_id=ids["[MASK]"], **kwargs)


def check_record_kind(paths, dynamic):
  """ValueError naming the file and the flag when the first record of a file is masked
  offline but `dynamic` is set, or unmasked (`--masking=none`) but it is not."""
  for path in paths:
    # (the reader that names a bad file)
    keys = record_checks.first_example(path, schema.compression_of(path)).features.feature
    masked = any(name in keys for name in _OFFLINE_FEATURES)
    if dynamic and masked:
      raise ValueError(f"{path}: the records are already masked (they have masked_lm_* "
                       "features) but --dynamic_masking masks in the input pipeline: write "
                       "them with create_pretraining_data --masking=none, or drop "
                       "--dynamic_masking to train on the masks they have")
    if not dynamic and not masked:
      raise ValueError(f"{path}: the records have no masked_lm_* features (written with "
                       "--masking=none?): pass --dynamic_masking (and --vocab_file) to mask "
                       "them in the input pipeline")


def num_to_predict(length, masked_lm_prob, max_predictions_per_seq):
  """[batch] int32: the writer's `instances.num_to_predict`, in TensorFlow (float64
  product, round half to even, as numpy)."""
  wanted = tf.round(tf.cast(length, tf.float64) * masked_lm_prob)
  return tf.minimum(max_predictions_per_seq, tf.maximum(1, tf.cast(wanted, tf.int32)))


def _ranks(scores):
  """[b, n] -> each entry's rank in its row, ascending (0 = smallest), ties by position."""
  order = tf.argsort(scores, axis=-1, stable=True)
  return tf.argsort(order, axis=-1, stable=True)


def _random_tokens(candidates, budget, seed):
  """[b, L] bool: `budget` uniformly chosen candidates per row (all if fewer)."""
  scores = tf.random.stateless_uniform(tf.shape(candidates), seed)
  scores = tf.where(candidates, scores, 2.0)  # non-candidates rank last
  return candidates & (_ranks(scores) < budget[:, None])


def _whole_words(candidates, word_starts, budget, seed):
  """[b, L] bool: whole words in random order, each taken only if it fits the budget."""
  cand = tf.cast(candidates, tf.int32)
  first = candidates & (tf.cumsum(cand, axis=1) == 1)
  starts = candidates & ((word_starts > 0) | first)
  group = tf.cumsum(tf.cast(starts, tf.int32), axis=1) - 1  # [b, L] word of each candidate
  batch, length = tf.shape(candidates)[0], tf.shape(candidates)[1]
  group = tf.where(candidates, group, length)  # non-candidates: an extra, unused slot
  rows = tf.range(batch)[:, None]  # [b, 1]
  sizes = tf.math.unsorted_segment_sum(
      cand, rows * (length + 1) + group, batch * (length + 1))
  sizes = tf.reshape(sizes, [batch, length + 1])[:, :length]  # [b, L] tokens per word
  num_words = tf.reduce_sum(tf.cast(starts, tf.int32), axis=1)  # [b]
  scores = tf.random.stateless_uniform([batch, length], seed)
  scores = tf.where(tf.range(length)[None, :] < num_words[:, None], scores, 2.0)
  order = tf.argsort(scores, axis=1, stable=True)  # [b, L] words in random order
  ordered_sizes = tf.gather(sizes, order, batch_dims=1)

  def visit(state, size):  # state: [b] tokens taken so far; size: [b] this word's
    taken, _ = state
    take = (size > 0) & (taken + size <= budget)
    return taken + tf.where(take, size, 0), take

  _, took = tf.scan(visit, tf.transpose(ordered_sizes),
                    initializer=(tf.zeros([batch], tf.int32), tf.zeros([batch], tf.bool)))
  took = tf.transpose(took)  # [b, L] in visiting order
  word_taken = tf.gather(took, tf.argsort(order, axis=1, stable=True), batch_dims=1)
  return candidates & tf.gather(word_taken, tf.minimum(group, length - 1), batch_dims=1)


def mask_batch(features, options, seed):
  """Masks a parsed batch of `--masking=none` records; `seed` is a [2] int64 stateless seed.

  Returns the features with input_word_ids masked and masked_lm_positions / masked_lm_ids
  [b, P] int32 and masked_lm_weights [b, P] float32 added (word_starts removed).
  """
  o = options
  ids = features["input_word_ids"]  # [b, L]
  real = features["input_mask"] > 0
  candidates = real & (ids != o.cls_id) & (ids != o.sep_id)
  budget = num_to_predict(tf.reduce_sum(tf.cast(real, tf.int32), axis=1), o.masked_lm_prob,
                          o.max_predictions_per_seq)  # [b]
  seeds = tf.random.experimental.stateless_split(seed, 4)
  if o.do_whole_word_mask:
    chosen = _whole_words(candidates, features["word_starts"], budget, seeds[0])
  else:
    chosen = _random_tokens(candidates, budget, seeds[0])
  # Chosen positions first, in order; then pad to P (P may exceed L).
  length = tf.shape(ids)[1]
  pos = tf.range(length)[None, :]
  keys = tf.sort(tf.where(chosen, pos, length + pos), axis=1)  # [b, L]
  p = o.max_predictions_per_seq
  keys = tf.pad(keys, [[0, 0], [0, tf.maximum(p - length, 0)]])[:, :p]  # [b, P]
  count = tf.reduce_sum(tf.cast(chosen, tf.int32), axis=1)  # [b] <= budget <= P
  valid = tf.range(p)[None, :] < count[:, None]  # [b, P]
  positions = tf.where(valid, keys, 0)
  labels = tf.where(valid, tf.gather(ids, positions, batch_dims=1), 0)
  shape = tf.shape(positions)
  keep_draw = tf.random.stateless_uniform(shape, seeds[1])
  random_draw = tf.random.stateless_uniform(shape, seeds[2])
  random_ids = tf.random.stateless_uniform(shape, seeds[3], minval=0, maxval=o.vocab_size,
                                           dtype=tf.int32)
  new = tf.where(keep_draw < 0.8, o.mask_id, tf.where(random_draw < 0.5, labels, random_ids))
  where = tf.where(valid)  # [n, 2] (row, slot) of the real predictions
  targets = tf.stack([where[:, 0], tf.cast(tf.gather_nd(positions, where), tf.int64)], 1)
  out = {k: v for k, v in features.items() if k != "word_starts"}
  out["input_word_ids"] = tf.tensor_scatter_nd_update(ids, targets, tf.gather_nd(new, where))
  out["masked_lm_positions"] = positions
  out["masked_lm_ids"] = labels
  out["masked_lm_weights"] = tf.cast(valid, tf.float32)
  return out


def batch_masker(options, pipeline_id=0):
  """The `input_pipeline.dataset` batch_transform: (batch, element indices) -> masked batch,
  keyed by (options.seed, pipeline_id, the batch's first element index)."""
  base = tf.constant([options.seed, pipeline_id], tf.int64)

  def transform(features, index):  # index: [b] int64
    seed = tf.random.experimental.stateless_fold_in(base, index[0])
    return mask_batch(features, options, seed)

  return transform
