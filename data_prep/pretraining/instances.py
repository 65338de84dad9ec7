"""The original `create_pretraining_data` algorithm, on token-id arrays, vectorized where it can be.

Worker processes run this module; it imports numpy only (no TensorFlow).

A chunk is a set of documents already tokenized: `ids` (all tokens, flat), `line_splits`
(offsets of each sentence in `ids`) and `doc_splits` (offsets of each document in the
sentences). Because a document's sentences are contiguous in `ids`, every segment A or B of
the original algorithm is one contiguous span (lo, length), and so is what truncation leaves.

Per document, as google-research/bert (worked example with max_seq_length 128):
  - target length 125 (= 128 - 3), or with prob. `short_seq_prob` a uniform one in [2, 125],
    chosen once per document;
  - sentences are gathered until the target is reached (or the document ends); A is the
    first `a_end` of them (uniform in [1, n-1]), B the rest, or, with prob. 0.5 or when there is
    only one sentence, a random span from another document of the chunk ("random next",
    label 1); the unused sentences are put back;
  - the longer side loses one token at a time from a random end until the pair fits.
Then 15% of the tokens (capped at `max_predictions_per_seq`, [CLS]/[SEP] excluded) are chosen,
each becoming [MASK] 80%, a random id 10%, itself 10%. The front/back coin flips of the
truncation are drawn as one binomial per side, which has the same distribution.

Options beyond the original (its behaviour stays the default):
  - `next_sentence=False`: single-segment sequences of contiguous text, no pairs
    (`packing`; `cross_document` lets them run on into the next document);
  - `masking="none"`: nothing is masked; the records carry the ids as they are and
    `word_starts` (`schema.unmasked_pretraining_features`) for masking in the input pipeline;
  - `Chunk.word_starts`: which tokens start a word, when a word segmenter made them
    (`chinese_words`); whole-word masking then groups by them instead of by "##" pieces.
"""

import dataclasses
import random

import numpy as np

from data_prep import example_encoder
from data_prep import schema
from data_prep import tfrecord_io
from data_prep.pretraining import packing

MASKING = ("offline", "none")
PACKING = ("sentences", "tokens")


@dataclasses.dataclass(frozen=True)
class InstanceOptions:
  max_seq_length: int = 128
  max_predictions_per_seq: int = 20
  masked_lm_prob: float = 0.15
  short_seq_prob: float = 0.1
  dupe_factor: int = 10
  do_whole_word_mask: bool = False
  random_seed: int = 12345
  vocab_size: int = 30522
  cls_id: int = 101
  sep_id: int = 102
  mask_id: int = 103
  continuation_ids: tuple = ()  # ids of "##" tokens, for whole-word masking
  use_v2_feature_names: bool = False  # input_word_ids/input_type_ids, as the Model Garden's
  next_sentence: bool = True  # False: single-segment sequences, no pairs (`packing`)
  cross_document: bool = False  # with next_sentence=False: sequences cross documents
  masking: str = "offline"  # or "none": unmasked ids and word_starts
  packing: str = "sentences"  # with next_sentence=False; "tokens": cut at token granularity

  def validate(self):
    if self.masking not in MASKING:
      raise ValueError(f"masking={self.masking!r} must be one of {list(MASKING)}")
    if self.packing not in PACKING:
      raise ValueError(f"packing={self.packing!r} must be one of {list(PACKING)}")
    if self.packing == "tokens" and self.next_sentence:
      raise ValueError("packing=tokens cuts single-segment sequences at token granularity, "
                       "across documents: it needs --next_sentence=False")
    if self.cross_document and self.next_sentence:
      raise ValueError("cross_document=True packs sequences across documents, which only "
                       "single-segment sequences do: it needs --next_sentence=False")
    if self.next_sentence and self.max_seq_length < 5:
      raise ValueError(f"max_seq_length={self.max_seq_length} is too small for a sentence pair: "
                       "[CLS] A [SEP] B [SEP] needs at least 5")
    if self.max_seq_length < 3:
      raise ValueError(f"max_seq_length={self.max_seq_length} is too small: [CLS] x [SEP] "
                       "needs at least 3")
    if not 0.0 <= self.short_seq_prob <= 1.0:
      raise ValueError(f"short_seq_prob={self.short_seq_prob} must be in [0, 1]")
    if self.dupe_factor < 1:
      raise ValueError(f"dupe_factor={self.dupe_factor} must be >= 1")
    if self.masking == "none":
      return  # the masking options are not used
    if self.max_predictions_per_seq < 1:
      raise ValueError(f"max_predictions_per_seq={self.max_predictions_per_seq} must be >= 1")
    if not 0.0 < self.masked_lm_prob <= 1.0:
      raise ValueError(f"masked_lm_prob={self.masked_lm_prob} must be in (0, 1]")


@dataclasses.dataclass
class Chunk:
  index: int  # position in the run: seeds this chunk's random streams
  ids: np.ndarray  # [tokens] int32
  line_splits: np.ndarray  # [lines + 1] int64, offsets into ids
  doc_splits: np.ndarray  # [docs + 1] int64, offsets into lines
  word_starts: np.ndarray = None  # [tokens] bool, aligned with ids: a word starts here


def chunk_rngs(seed, chunk_index):
  """Independent, reproducible random streams for one chunk (any number of workers)."""
  state = np.random.SeedSequence([seed, chunk_index]).generate_state(2)
  return random.Random(int(state[0])), np.random.default_rng(int(state[1]))


def _truncation_counts(la, lb, max_num_tokens):
  """Tokens the original's loop removes from A and from B (ties cut B)."""
  excess = la + lb - max_num_tokens
  ka = kb = 0
  if excess <= 0:
    return 0, 0
  if la > lb:
    d = min(excess, la - lb)
    ka, excess = d, excess - d
  elif lb > la:
    d = min(excess, lb - la)
    kb, excess = d, excess - d
  return ka + excess // 2, kb + (excess + 1) // 2


def pair_spans(chunk, opts, rng):
  """The sentence-pair decisions for every instance of a chunk, all dupe passes.

  Returns int64 arrays: a_lo, a_len, b_lo, b_len (spans into chunk.ids before truncation),
  cut_a, cut_b (tokens truncation removes) and label (1 = random next).
  """
  max_num_tokens = opts.max_seq_length - 3
  splits = chunk.line_splits.tolist()
  docs = chunk.doc_splits.tolist()
  num_docs = len(docs) - 1
  out = []
  for _ in range(opts.dupe_factor):
    for d in range(num_docs):
      first, end = docs[d], docs[d + 1]
      target = max_num_tokens
      if rng.random() < opts.short_seq_prob:
        target = rng.randint(2, max_num_tokens)
      start = i = first
      length = 0
      while i < end:
        length += splits[i + 1] - splits[i]
        if i == end - 1 or length >= target:
          n = i - start + 1
          a_end = 1 if n < 2 else rng.randint(1, n - 1)
          a_lo, a_hi = splits[start], splits[start + a_end]
          if n == 1 or rng.random() < 0.5:
            label = 1
            target_b = target - (a_hi - a_lo)
            for _ in range(10):
              other = rng.randint(0, num_docs - 1)
              if other != d:
                break
            j = rng.randint(docs[other], docs[other + 1] - 1)
            b_lo, b_hi = splits[j], splits[j + 1]
            while b_hi - b_lo < target_b and j + 1 < docs[other + 1]:
              j += 1
              b_hi = splits[j + 1]
            i -= n - a_end  # the unused sentences start the next pair
          else:
            label = 0
            b_lo, b_hi = a_hi, splits[i + 1]
          la, lb = a_hi - a_lo, b_hi - b_lo
          out.append((a_lo, la, b_lo, lb) + _truncation_counts(la, lb, max_num_tokens)
                     + (label,))
          start = i + 1
          length = 0
        i += 1
  cols = np.array(out, dtype=np.int64).reshape(-1, 7)
  names = ("a_lo", "a_len", "b_lo", "b_len", "cut_a", "cut_b", "label")
  return {name: cols[:, k] for k, name in enumerate(names)}


def assemble(ids, spans, opts, np_rng):
  """Truncate, then lay out [CLS] A [SEP] B [SEP]: token matrix [n, L], per-row lengths,
  segment ids [n, L], masking candidates [n, L] (A and B) and src [n, L] (offset in ids of
  each A/B token, 0 elsewhere)."""
  front_a = np_rng.binomial(spans["cut_a"], 0.5)
  front_b = np_rng.binomial(spans["cut_b"], 0.5)
  a_lo = spans["a_lo"] + front_a
  la = spans["a_len"] - spans["cut_a"]
  b_lo = spans["b_lo"] + front_b
  lb = spans["b_len"] - spans["cut_b"]
  cols = np.arange(opts.max_seq_length)[None, :]  # [1, L]
  b_start = (la + 2)[:, None]  # [n, 1]
  in_a = (cols >= 1) & (cols <= la[:, None])  # [n, L]
  in_b = (cols >= b_start) & (cols < b_start + lb[:, None])
  src = np.where(in_a, a_lo[:, None] + cols - 1, b_lo[:, None] + cols - b_start)
  tokens = np.where(in_a | in_b, ids[np.where(in_a | in_b, src, 0)], 0).astype(np.int64)
  rows = np.arange(len(la))
  tokens[:, 0] = opts.cls_id
  tokens[rows, la + 1] = opts.sep_id
  tokens[rows, la + lb + 2] = opts.sep_id
  length = la + lb + 3
  segment = ((cols >= b_start) & (cols < length[:, None])).astype(np.int64)
  return tokens, length, segment, in_a | in_b, np.where(in_a | in_b, src, 0)


def num_to_predict(length, opts):
  """min(P, max(1, round(len * prob))): Python's round, half to even, as numpy's."""
  return np.minimum(opts.max_predictions_per_seq,
                    np.maximum(1, np.round(length * opts.masked_lm_prob).astype(np.int64)))


def choose_positions(candidates, length, opts, np_rng):
  """Token-level masking: a uniform random subset of the candidates per row.

  Returns positions [n, P] (sorted, zero-padded) and count [n].
  """
  n, seq = candidates.shape
  count = np.minimum(num_to_predict(length, opts), candidates.sum(axis=1))
  scores = np.where(candidates, np_rng.random((n, seq)), 2.0)
  order = np.argsort(scores, axis=1, kind="stable")[:, :opts.max_predictions_per_seq]
  if order.shape[1] < opts.max_predictions_per_seq:  # P > L: pad
    order = np.pad(order, [(0, 0), (0, opts.max_predictions_per_seq - order.shape[1])])
  valid = np.arange(opts.max_predictions_per_seq)[None, :] < count[:, None]
  positions = np.sort(np.where(valid, order, seq + 1), axis=1)
  return np.where(valid, positions, 0), count


def word_start_matrix(tokens, candidates, src, stream_starts, opts):
  """[n, L] bool: candidates that start a word. From the chunk's word starts (gathered at
  src) when a segmenter made them, else every token that is not a "##" piece."""
  if stream_starts is not None:
    return stream_starts[src] & candidates
  # Sized by the ids too: a vocab with repeated lines has ids >= its number of tokens.
  is_cont = np.zeros([max(opts.vocab_size, int(tokens.max(initial=0)) + 1)], dtype=bool)
  is_cont[list(opts.continuation_ids)] = True
  return ~is_cont[tokens] & candidates


def choose_whole_words(word_starts, candidates, length, opts, np_rng):
  """Whole-word masking: words (a candidate that does not start a word joins the word before,
  as "##" pieces do) in random order, a word taken only if it fits in the budget, as the
  original."""
  budget = num_to_predict(length, opts)
  n = candidates.shape[0]
  positions = np.zeros([n, opts.max_predictions_per_seq], dtype=np.int64)
  count = np.zeros([n], dtype=np.int64)
  for r in range(n):
    cand = np.flatnonzero(candidates[r])
    starts = word_starts[r, cand]
    if len(cand):
      starts[0] = True  # the first candidate always opens a word
    bounds = np.append(np.flatnonzero(starts), len(cand)).tolist()
    chosen = []
    for g in np_rng.permutation(len(bounds) - 1).tolist():
      if len(chosen) >= budget[r]:
        break
      size = bounds[g + 1] - bounds[g]
      if len(chosen) + size > budget[r]:
        continue
      chosen.extend(cand[bounds[g]:bounds[g + 1]].tolist())
    chosen.sort()
    positions[r, :len(chosen)] = chosen
    count[r] = len(chosen)
  return positions, count


def mask_tokens(tokens, positions, count, opts, np_rng):
  """80% [MASK], 10% random id (any id, as the original), 10% unchanged; in place."""
  n, p = positions.shape
  valid = np.arange(p)[None, :] < count[:, None]
  rows = np.broadcast_to(np.arange(n)[:, None], positions.shape)
  labels = np.where(valid, tokens[rows, positions], 0)
  keep_draw = np_rng.random((n, p))
  random_draw = np_rng.random((n, p))
  random_ids = np_rng.integers(0, opts.vocab_size, (n, p))
  new = np.where(keep_draw < 0.8, opts.mask_id, np.where(random_draw < 0.5, labels, random_ids))
  tokens[rows[valid], positions[valid]] = new[valid]
  return labels, valid.astype(np.float32)


def create_instances(chunk, opts):
  """All instances of a chunk, shuffled: a dict of feature name -> [n, length] arrays."""
  py_rng, np_rng = chunk_rngs(opts.random_seed, chunk.index)
  if opts.next_sentence:
    spans = pair_spans(chunk, opts, py_rng)
  else:
    stream = packing.extended_stream(chunk, opts.sep_id)
    spans = packing.packed_spans(chunk, opts, py_rng)
  order = np_rng.permutation(len(spans["label"]))
  spans = {k: v[order] for k, v in spans.items()}
  if opts.next_sentence:
    tokens, length, segment, candidates, src = assemble(chunk.ids, spans, opts, np_rng)
    stream_starts = chunk.word_starts
  else:
    tokens, length, segment, candidates, src = packing.assemble_single(stream, spans, opts)
    stream_starts = stream.word_starts
  cols = np.arange(opts.max_seq_length)[None, :]
  columns = {
      "input_ids": tokens,
      "input_mask": (cols < length[:, None]).astype(np.int64),
      "segment_ids": segment,
      "next_sentence_labels": spans["label"][:, None],
  }
  starts = None
  if opts.masking == "none" or opts.do_whole_word_mask:
    starts = word_start_matrix(tokens, candidates, src, stream_starts, opts)
    if opts.packing == "tokens" and not opts.next_sentence:
      # A sequence cut inside a word: its first piece opens a word of its own.
      first = np.argmax(candidates, axis=1)
      starts[np.arange(len(first)), first] |= candidates[np.arange(len(first)), first]
  if opts.masking == "none":
    columns["word_starts"] = starts.astype(np.int64)
    return columns
  if opts.do_whole_word_mask:
    positions, count = choose_whole_words(starts, candidates, length, opts, np_rng)
  else:
    positions, count = choose_positions(candidates, length, opts, np_rng)
  labels, weights = mask_tokens(tokens, positions, count, opts, np_rng)
  columns.update(masked_lm_positions=positions, masked_lm_ids=labels, masked_lm_weights=weights)
  return columns


def serialize_chunk(chunk, opts):
  """Instances of a chunk as TFRecord-framed tf.train.Examples, plus counts for the summary."""
  if len(chunk.doc_splits) < 2:
    return [], {"instances": 0, "masked": 0, "random_next": 0, "tokens": 0}
  columns = create_instances(chunk, opts)
  if opts.masking == "none":
    features = schema.unmasked_pretraining_features(opts.max_seq_length,
                                                    v2_names=opts.use_v2_feature_names)
  else:
    features = schema.pretraining_features(opts.max_seq_length, opts.max_predictions_per_seq,
                                           v2_names=opts.use_v2_feature_names)
  if opts.use_v2_feature_names:
    columns = {schema.V2_NAMES.get(k, k): v for k, v in columns.items()}
  records = [tfrecord_io.frame(r)
             for r in example_encoder.ExampleEncoder(features).encode(columns)]
  stats = {
      "instances": len(records),
      "masked": int(columns["masked_lm_weights"].sum()) if opts.masking != "none" else 0,
      "random_next": int(columns["next_sentence_labels"].sum()),
      "tokens": int(columns["input_mask"].sum()),
  }
  return records, stats
