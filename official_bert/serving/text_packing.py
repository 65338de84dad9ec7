"""Raw text -> BERT inputs, in graph ops (for exported SavedModels and tf.data).

    texts  --tokenize_with_masks-->  ragged ids  --pack_inputs-->  input_word_ids,
                                                                    input_mask, input_type_ids

`[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]`, zero-padded to a fixed `seq_length` (the length the
model was trained at), as the original run_classifier.py / run_squad.py build their features,
or, with `pad_to_multiple`, only to the batch's longest input rounded up to that multiple
(never beyond `seq_length`): an export then does no work on padding a short request does not
need, and its outputs on the real tokens are those of the fixed length (padding is masked out
of attention).
A pair is truncated longest-first from the end, exactly like the original `_truncate_seq_pair`
(ties shorten the second segment). Nothing here imports Keras or the model, so the same
functions serve a whole model and a preprocessing-only SavedModel.
"""

import numpy as np
import tensorflow as tf

MASK_TOKEN = "[MASK]"


def tokenize_with_masks(tokenizer, texts, mask_id, mask_token=MASK_TOKEN):
  """Tokenizes [batch] strings; every literal `mask_token` in a text becomes `mask_id`.

  The BERT tokenizer splits "[MASK]" into "[", "mask", "]" (it is punctuation plus a word), so
  the texts are first cut at the literal token, the pieces tokenized, and `mask_id` put back
  between consecutive pieces. Cutting there changes nothing else: punctuation already ends a
  word, so the pieces tokenize as they would inside the whole text. The match is exact and
  case-sensitive, like Hugging Face's handling of special tokens.

  Args:
    tokenizer: anything with `.tokenize([n] string) -> RaggedTensor int64 [n, (tokens)]`
      (`data_prep.tokenization.TextTokenizer`).
    texts: string Tensor [batch].
    mask_id: the id of `mask_token` in the vocabulary.

  Returns:
    RaggedTensor int64 [batch, (tokens)].
  """
  texts = tf.convert_to_tensor(texts, tf.string)
  pieces = tf.strings.split(texts, sep=mask_token)  # [batch, (pieces)], >= 1 piece per text
  piece_ids = tokenizer.tokenize(pieces.flat_values)  # [num_pieces, (tokens)] int64
  # Each piece becomes its tokens followed by one mask id, except the last piece of a text.
  # Placed by index arithmetic on the flat values (ragged concatenation would add dozens of
  # assertion branches to every exported signature).
  text_of_piece = pieces.value_rowids()  # [num_pieces]
  last_piece = tf.gather(pieces.row_limits() - 1, text_of_piece)
  has_mask = tf.cast(
      tf.range(tf.shape(text_of_piece, out_type=tf.int64)[0]) < last_piece, tf.int64)
  num_tokens = piece_ids.row_lengths()
  out_lengths = num_tokens + has_mask
  out_starts = tf.cumsum(out_lengths, exclusive=True)  # where each piece starts in the output
  token_piece = piece_ids.value_rowids()
  token_target = (tf.gather(out_starts, token_piece) + tf.range(
      tf.shape(token_piece, out_type=tf.int64)[0]) - tf.gather(piece_ids.row_starts(),
                                                               token_piece))
  mask_pieces = tf.where(has_mask > 0)[:, 0]
  mask_target = tf.gather(out_starts + num_tokens, mask_pieces)
  values = tf.scatter_nd(
      tf.concat([token_target, mask_target], 0)[:, None],
      tf.concat([tf.cast(piece_ids.flat_values, tf.int64),
                 tf.fill(tf.shape(mask_pieces), tf.constant(mask_id, tf.int64))], 0),
      tf.reshape(tf.reduce_sum(out_lengths), [1]))
  text_lengths = tf.math.unsorted_segment_sum(out_lengths, text_of_piece, pieces.nrows())
  return tf.RaggedTensor.from_row_lengths(values, text_lengths, validate=False)


def truncated_pair_lengths(len_a, len_b, budget):
  """Lengths the original `_truncate_seq_pair` leaves: [batch] int each.

  The original pops one token at a time from the longer segment (the second one on ties)
  until the pair fits `budget`. In closed form the first keeps min(len_a, max(budget - len_b,
  ceil(budget / 2))) and the second min(len_b, max(budget - len_a, floor(budget / 2))).
  `budget` may be a scalar or a [batch] tensor.
  """
  budget = tf.cast(budget, len_a.dtype)
  keep_a = tf.minimum(len_a, tf.maximum(budget - len_b, (budget + 1) // 2))
  keep_b = tf.minimum(len_b, tf.maximum(budget - len_a, budget // 2))
  return keep_a, keep_b


def _first_tokens(ragged, keep):
  """The first `keep[i]` tokens of each row: (values, row, column), flat.

  Index arithmetic on the flat values (one RaggedRange and a gather) rather than ragged
  slicing and concatenation, which build many more graph ops: exports trace this per
  signature.
  """
  starts = ragged.row_starts()
  index = tf.ragged.range(starts, starts + keep)  # [batch, (keep)] indices into the values
  rows = index.value_rowids()
  columns = index.flat_values - tf.gather(starts, rows)
  return tf.gather(ragged.flat_values, index.flat_values), rows, columns


def padded_width(lengths, seq_length, pad_to_multiple):
  """The batch's longest of `lengths` rounded up to `pad_to_multiple`, at most `seq_length`
  (int64 scalar); `seq_length` itself when `pad_to_multiple` is None."""
  if not pad_to_multiple:
    return tf.constant(seq_length, tf.int64)
  multiple = tf.constant(pad_to_multiple, tf.int64)
  longest = tf.reduce_max(tf.concat([tf.cast(lengths, tf.int64), [0]], 0))
  return tf.minimum(tf.constant(seq_length, tf.int64), (longest + multiple - 1) // multiple *
                    multiple)


# [CLS], one token and [SEP]: the shortest packed input.
MIN_PACKED_LENGTH = 3


def check_packed_length(length, name):
  """ValueError naming `name` (the argument or flag) unless `length` is a whole number of at
  least `MIN_PACKED_LENGTH`."""
  if isinstance(length, bool) or not isinstance(length, (int, np.integer)) or (
      length < MIN_PACKED_LENGTH):
    raise ValueError(f"{name}={length!r}: expected a whole number of tokens, at least "
                     f"{MIN_PACKED_LENGTH} ([CLS], a token and [SEP])")


def pack_inputs(segment_a, segment_b, seq_length, cls_id, sep_id, pad_to_multiple=None):
  """Builds the model inputs from token ids, with truncation and padding.

  Args:
    segment_a: RaggedTensor int [batch, (tokens)], the first text.
    segment_b: RaggedTensor int [batch, (tokens)] or None. A row with no tokens (an empty
      second text) gives a single-segment input for that row: `[CLS] a [SEP]`.
    seq_length: Python int, the padded length (>= 3): the most tokens an input keeps.
    cls_id, sep_id: ids of `[CLS]` and `[SEP]`.
    pad_to_multiple: None (pad to `seq_length`) or an int: pad to the batch's longest input
      rounded up to it (`padded_width`).

  Returns:
    dict of int32 [batch, width] (width = seq_length, or `padded_width`): `input_word_ids`
    (0-padded), `input_mask` (1 on real tokens), `input_type_ids` (0 for `[CLS] a [SEP]`,
    1 for `b [SEP]`).
  """
  check_packed_length(seq_length, "seq_length")
  segment_a = tf.cast(segment_a, tf.int64)
  len_a = segment_a.row_lengths()
  if segment_b is None:
    segment_b = tf.RaggedTensor.from_row_lengths(
        tf.zeros([0], tf.int64), tf.zeros_like(len_a), validate=False)
  segment_b = tf.cast(segment_b, tf.int64)
  len_b = segment_b.row_lengths()
  has_b = tf.cast(len_b > 0, tf.int64)
  budget = seq_length - 2 - has_b  # [CLS], [SEP] and, for pairs, a second [SEP]
  keep_a, keep_b = truncated_pair_lengths(len_a, len_b, budget)

  # Column of every token: [CLS] 0, a 1.., [SEP] keep_a + 1, b keep_a + 2.., [SEP] last.
  a_ids, a_rows, a_cols = _first_tokens(segment_a, keep_a)
  b_ids, b_rows, b_cols = _first_tokens(segment_b, keep_b)
  rows = tf.range(tf.shape(len_a, out_type=tf.int64)[0])
  pair_rows = tf.boolean_mask(rows, has_b > 0)
  total = keep_a + 2 + keep_b + has_b
  indices = tf.concat([
      tf.stack([a_rows, a_cols + 1], 1),
      tf.stack([b_rows, b_cols + tf.gather(keep_a, b_rows) + 2], 1),
      tf.stack([rows, tf.zeros_like(rows)], 1),
      tf.stack([rows, keep_a + 1], 1),
      tf.stack([pair_rows, tf.gather(total, pair_rows) - 1], 1),
  ], axis=0)
  values = tf.concat([a_ids, b_ids, tf.fill(tf.shape(rows), tf.constant(cls_id, tf.int64)),
                      tf.fill(tf.shape(rows), tf.constant(sep_id, tf.int64)),
                      tf.fill(tf.shape(pair_rows), tf.constant(sep_id, tf.int64))], axis=0)
  width = padded_width(total, seq_length, pad_to_multiple)
  word_ids = tf.scatter_nd(indices, values, tf.stack([tf.size(rows, tf.int64), width]))
  columns = tf.range(width, dtype=tf.int64)[None, :]
  mask = columns < total[:, None]
  second = tf.logical_and(mask, columns >= (keep_a + 2)[:, None])
  return {
      "input_word_ids": tf.cast(word_ids, tf.int32),
      "input_mask": tf.cast(mask, tf.int32),
      "input_type_ids": tf.cast(second, tf.int32),
  }


class TextToInputs(tf.Module):
  """Text (and optional second text) -> model inputs; the preprocessing of an export.

  Args:
    tokenizer: a `data_prep.tokenization.TextTokenizer` (a tf.Module; tracked for export).
    vocab: the token list, to look up the special tokens' ids.
    seq_length: the most tokens of an input: its padded length, unless `pad_to_multiple`.
    pad_to_multiple: None, or pad each batch only to its longest input rounded up to this
      (`pack_inputs`).
  """

  def __init__(self, tokenizer, vocab, seq_length, pad_to_multiple=None, name=None):
    super().__init__(name=name)
    ids = {token: i for i, token in enumerate(vocab)}
    missing = [t for t in ("[CLS]", "[SEP]", MASK_TOKEN) if t not in ids]
    if missing:
      raise ValueError(f"vocabulary lacks {missing}")
    self.tokenizer = tokenizer
    check_packed_length(seq_length, "seq_length")
    self.seq_length = int(seq_length)
    self.pad_to_multiple = int(pad_to_multiple) if pad_to_multiple else None
    self.cls_id, self.sep_id, self.mask_id = ids["[CLS]"], ids["[SEP]"], ids[MASK_TOKEN]

  def tokenize(self, texts):
    """[batch] string -> RaggedTensor int64 [batch, (tokens)], "[MASK]" kept as one token."""
    return tokenize_with_masks(self.tokenizer, texts, self.mask_id)

  def pack(self, segment_a, segment_b):
    """`pack_inputs` at this preprocessor's lengths and special tokens."""
    return pack_inputs(segment_a, segment_b, self.seq_length, self.cls_id, self.sep_id,
                       self.pad_to_multiple)

  def __call__(self, text, text_b=None):
    """[batch] string (and [batch] string) -> dict of int32 [batch, seq_length] (or [batch,
    width] with `pad_to_multiple`)."""
    if text_b is None:
      return self.pack(self.tokenize(text), None)
    tf.debugging.assert_equal(tf.shape(text), tf.shape(text_b),
                              message="text and text_b must have the same batch size")
    # One tokenizer call for both texts: half the graph, and one pass of the regex ops.
    both = self.tokenize(tf.concat([text, text_b], axis=0))
    batch = tf.shape(text, out_type=tf.int64)[0]
    return self.pack(both[:batch], both[batch:])
