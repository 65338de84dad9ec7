"""Question + whole context -> answer text, in graph ops: the SQuAD export's text signatures.

The same steps as `create_squad_data` + `run_squad --do_predict`, vectorized over a batch:
  1. the context is cut into words at the original's whitespace (space, tab, CR, LF, U+202F),
     each word is tokenized on its own, the question is cut to `max_query_length` pieces;
  2. windows of `[CLS] question [SEP] context piece span [SEP]` every `doc_stride` pieces
     (the original's doc spans), each piece marked in the window where it has the most
     context (`_check_is_max_context`);
  3. one forward pass over every window of the batch;
  4. the original `write_predictions`: the `n_best_size` best starts and ends of each window,
     valid pairs (inside the context part, start in its max-context window, end >= start,
     at most `max_answer_length` pieces), ranked by start + end logit over all windows of a
     question, distinct texts kept; v2.0 adds the null answer (the lowest [CLS] score of any
     window) and answers "" when null - best > `null_score_diff_threshold`.

Answer text: like the original's `get_final_text`, the predicted pieces are mapped back to
the characters of the context's words: exactly, when each word's pieces spell it character
for character (lower-casing and accent stripping keep the count; an [UNK] piece spells the
basic token it stands for) and no predicted piece is [UNK]; otherwise the whole words of the
span (the original's fallback). Words are joined by one space, as the original joins
them; `answer_start`/`answer_end` are character offsets (code points) into the context, end
exclusive, so `context[answer_start:answer_end]` is the span as written.
"""

import tensorflow as tf

from official_bert.serving import text_packing

# The original SQuAD reader's whitespace.
_WHITESPACE = (" ", "\t", "\r", "\n", "\u202f")


def _segment_exclusive_cumsum(values, segment_ids, num_segments):
  """Exclusive cumulative sum of `values` restarting at each segment ([n] int64); the values
  are grouped by segment, in segment order (empty segments allowed)."""
  segment_offset = tf.cumsum(tf.math.unsorted_segment_sum(values, segment_ids, num_segments),
                             exclusive=True)
  return tf.cumsum(values, exclusive=True) - tf.gather(segment_offset, segment_ids)


def split_words(context):
  """[b] string -> words: ragged [b, (w)] string, char_start and char_length [b, (w)] int64
  (code points), as the original reader splits a paragraph."""
  chars = tf.strings.unicode_split(context, "UTF-8")  # [b, (c)]
  flat = chars.flat_values
  is_space = tf.reduce_any(tf.equal(flat[:, None], tf.constant(_WHITESPACE)[None, :]), axis=1)
  position = tf.range(tf.shape(flat, out_type=tf.int64)[0]) - tf.gather(
      chars.row_starts(), chars.value_rowids())  # [c] index in its text
  previous_space = tf.concat([[True], is_space[:-1]], 0) | tf.equal(position, 0)
  starts = ~is_space & previous_space  # [c] first character of a word
  word_of_char = tf.cumsum(tf.cast(starts, tf.int64)) - 1  # global word index
  num_words = tf.reduce_sum(tf.cast(starts, tf.int64))
  keep = tf.where(~is_space)[:, 0]
  words = tf.strings.unsorted_segment_join(tf.gather(flat, keep), tf.gather(word_of_char, keep),
                                           num_words)
  lengths = tf.math.unsorted_segment_sum(tf.ones_like(keep), tf.gather(word_of_char, keep),
                                         num_words)
  start_positions = tf.boolean_mask(position, starts)
  words_per_text = tf.math.unsorted_segment_sum(
      tf.cast(starts, tf.int64), chars.value_rowids(), chars.nrows())
  ragged = lambda values: tf.RaggedTensor.from_row_lengths(values, words_per_text,
                                                           validate=False)
  return ragged(words), ragged(start_positions), ragged(lengths)


class SquadAnswerer:
  """Answers questions over whole contexts with a span-labeling model (see module doc).

  Args:
    model: a built `BertSpanLabeler` (weights loaded).
    tokenizer: a `data_prep.tokenization.TextTokenizer`.
    vocab: the token list (special-token ids and each piece's text length).
    seq_length, doc_stride, max_query_length: as `create_squad_data`'s flags.
    n_best_size, max_answer_length, version_2_with_negative, null_score_diff_threshold: as
      `run_squad`'s.
  """

  def __init__(self, model, tokenizer, vocab, seq_length, doc_stride=128, max_query_length=64,
               n_best_size=20, max_answer_length=30, version_2_with_negative=False,
               null_score_diff_threshold=0.0):
    if seq_length <= max_query_length + 3:
      raise ValueError(f"--max_seq_length={seq_length} must be more than --max_query_length"
                       f"={max_query_length} + 3 (room for context)")
    if doc_stride < 1 or n_best_size < 1 or max_answer_length < 1:
      raise ValueError("--doc_stride, --n_best_size and --max_answer_length must be >= 1")
    # A plain object, not a tf.Module: the export tracks the tokenizer and the variables.
    self.model = model
    self.tokenizer = tokenizer
    ids = {token: i for i, token in enumerate(vocab)}
    self.cls_id, self.sep_id = ids["[CLS]"], ids["[SEP]"]
    self.unk_id = ids.get("[UNK]", -1)
    # Characters of the context each piece stands for ("##" is not text).
    self.piece_lengths = tf.constant(
        [len(t[2:]) if t.startswith("##") else len(t) for t in vocab], tf.int64)
    self.seq_length = int(seq_length)
    self.doc_stride = int(doc_stride)
    self.max_query_length = int(max_query_length)
    self.n_best_size = min(int(n_best_size), self.seq_length)
    self.max_answer_length = int(max_answer_length)
    self.version_2 = bool(version_2_with_negative)
    self.null_score_diff_threshold = float(null_score_diff_threshold)

  def _pieces(self, context):
    """Context words and their pieces, with what `get_final_text` needs per piece."""
    words, word_start, word_length = split_words(context)
    # Each word's basic tokens (normalized, as the original's BasicTokenizer gives them to
    # `get_final_text`), then their pieces: an [UNK] piece spells its whole basic token.
    basic = self.tokenizer.split_words(words.flat_values)  # [w, (t)]
    basic_pieces = tf.cast(self.tokenizer.word_pieces(basic.flat_values), tf.int64)  # [t, (p)]
    word_pieces = tf.RaggedTensor.from_row_splits(
        basic_pieces.flat_values, tf.gather(basic_pieces.row_splits, basic.row_splits),
        validate=False)  # [w, (p)]
    piece_ids = word_pieces.flat_values
    piece_word = word_pieces.value_rowids()  # global word of each piece
    is_unk = tf.equal(piece_ids, self.unk_id)
    basic_length = tf.strings.length(basic.flat_values, unit="UTF8_CHAR")
    piece_len = tf.where(is_unk,
                         tf.gather(tf.cast(basic_length, tf.int64), basic_pieces.value_rowids()),
                         tf.gather(self.piece_lengths, piece_ids))
    piece_offset = _segment_exclusive_cumsum(piece_len, piece_word, word_pieces.nrows())
    spelled = tf.math.unsorted_segment_sum(piece_len, piece_word, word_pieces.nrows())
    aligned = (spelled == word_length.flat_values) & (word_pieces.row_lengths() > 0)
    # Where each word starts in " ".join(words) of its text.
    word_text = words.value_rowids()
    joined_start = _segment_exclusive_cumsum(word_length.flat_values + 1, word_text,
                                             words.nrows())
    pieces_per_text = tf.math.unsorted_segment_sum(word_pieces.row_lengths(), word_text,
                                                   words.nrows())
    pieces = tf.RaggedTensor.from_row_lengths(piece_ids, pieces_per_text, validate=False)
    return dict(words=words, word_start=word_start.flat_values,
                word_length=word_length.flat_values, joined_start=joined_start,
                unaligned_before=tf.cumsum(tf.cast(~aligned, tf.int64), exclusive=True),
                num_unaligned=tf.reduce_sum(tf.cast(~aligned, tf.int64)),
                unk_before=tf.cumsum(tf.cast(is_unk, tf.int64), exclusive=True),
                num_unk=tf.reduce_sum(tf.cast(is_unk, tf.int64)),
                pieces=pieces, piece_word=piece_word, piece_len=piece_len,
                piece_offset=piece_offset)

  def _windows(self, question_ids, pieces):
    """The doc spans of every text, flat: text, start, length, max-context flags, inputs."""
    num_doc = pieces.row_lengths()  # [b]
    num_query = question_ids.row_lengths()
    max_doc = self.seq_length - num_query - 3  # [b] max_tokens_for_doc
    step = tf.minimum(max_doc, self.doc_stride)
    extra = tf.maximum(num_doc - max_doc, 0)
    count = tf.where(num_doc > 0, (extra + step - 1) // step + 1, 0)  # windows per text
    index = tf.ragged.range(count)  # [b, (windows)]
    text = index.value_rowids()  # [W]
    start = index.flat_values * tf.gather(step, text)
    length = tf.minimum(tf.gather(num_doc, text) - start, tf.gather(max_doc, text))
    # Max context: each piece's best window (score min(left, right) + 0.01 * length, the
    # first of equal ones), as integers x100.
    offsets = tf.ragged.range(length)  # [W, (length)]
    window = offsets.value_rowids()
    t = offsets.flat_values
    window_length = tf.gather(length, window)
    score = 100 * tf.minimum(t, window_length - 1 - t) + window_length
    piece = tf.gather(pieces.row_starts(), tf.gather(text, window)) + tf.gather(start,
                                                                               window) + t
    total_pieces = tf.shape(pieces.flat_values, out_type=tf.int64)[0]
    best = tf.math.unsorted_segment_max(score, piece, total_pieces)
    is_best = tf.equal(score, tf.gather(best, piece))
    first = tf.math.unsorted_segment_min(tf.where(is_best, window, tf.int64.max), piece,
                                         total_pieces)
    span = tf.RaggedTensor.from_row_lengths(tf.gather(pieces.flat_values, piece), length,
                                            validate=False)
    # [CLS] question [SEP] span [SEP]: it always fits, so nothing is truncated. Padded to
    # seq_length, not to the longest window as other text signatures: the original's n-best
    # takes the top n of all seq_length logits, padding included, so a shorter window could
    # change which candidates survive (answers would differ from run_squad --do_predict's).
    inputs = text_packing.pack_inputs(tf.gather(question_ids, text), span, self.seq_length,
                                      self.cls_id, self.sep_id)
    q_len = tf.gather(num_query, text)
    columns = tf.range(self.seq_length, dtype=tf.int64)[None, :]
    doc_begin = (q_len + 2)[:, None]
    in_doc = (columns >= doc_begin) & (columns < doc_begin + length[:, None])  # [W, seq]
    # Per window position: the piece (index within its text) and the max-context flag.
    doc_piece = tf.where(in_doc, start[:, None] + columns - doc_begin, -1)
    flags = tf.cast(tf.equal(window, tf.gather(first, piece)), tf.int32)
    at = tf.stack([window, tf.gather(q_len, window) + 2 + t], axis=1)
    max_context = tf.scatter_nd(at, flags, tf.stack([tf.size(text, tf.int64),
                                                     self.seq_length])) > 0
    return text, inputs, in_doc, doc_piece, max_context

  def __call__(self, question, context):
    """[b] questions and [b] contexts -> dict of answers (see `ServingModule` docs)."""
    question_ids = tf.cast(self.tokenizer.tokenize(question), tf.int64)[:, :self.max_query_length]
    p = self._pieces(context)
    text, inputs, in_doc, doc_piece, max_context = self._windows(question_ids, p["pieces"])
    out = self.model(inputs, training=False)
    start_logits = tf.cast(out["start_logits"], tf.float64)  # [W, seq]
    end_logits = tf.cast(out["end_logits"], tf.float64)
    return self._answers(text, tf.shape(context, out_type=tf.int64)[0], context, p, in_doc,
                         doc_piece, max_context, start_logits, end_logits)

  def _answers(self, text, batch, context, p, in_doc, doc_piece, max_context, start_logits,
               end_logits):
    n = self.n_best_size
    top_starts = tf.math.top_k(start_logits, n).indices  # [W, n], ties: lower position first
    top_ends = tf.math.top_k(end_logits, n).indices
    s = tf.broadcast_to(top_starts[:, :, None], tf.concat([tf.shape(top_starts), [n]], 0))
    e = tf.broadcast_to(top_ends[:, None, :], tf.shape(s))
    gather = lambda values, at: tf.gather(values, at, batch_dims=1)
    ok = (gather(in_doc, s) & gather(in_doc, e) & gather(max_context, s) & (e >= s)
          & (e - s + 1 <= self.max_answer_length))  # [W, n, n]
    where = tf.where(ok)  # window-major, start-major: the original's generation order
    window, s, e = where[:, 0], tf.gather_nd(s, where), tf.gather_nd(e, where)
    start_logit = tf.gather_nd(start_logits, tf.stack([window, tf.cast(s, tf.int64)], 1))
    end_logit = tf.gather_nd(end_logits, tf.stack([window, tf.cast(e, tf.int64)], 1))
    cand_text = tf.gather(text, window)
    first_piece = tf.gather(p["pieces"].row_starts(), cand_text)
    ps = first_piece + tf.gather_nd(doc_piece, tf.stack([window, tf.cast(s, tf.int64)], 1))
    pe = first_piece + tf.gather_nd(doc_piece, tf.stack([window, tf.cast(e, tf.int64)], 1))
    ws, we = tf.gather(p["piece_word"], ps), tf.gather(p["piece_word"], pe)
    unaligned = tf.gather(tf.concat([p["unaligned_before"], [p["num_unaligned"]]], 0), we + 1)
    # The original finds the predicted pieces' text in the words' basic tokens: never when it
    # holds "[UNK]"; then, as when a word's pieces do not spell it, the whole words.
    unk = tf.gather(tf.concat([p["unk_before"], [p["num_unk"]]], 0), pe + 1)
    exact = (tf.equal(unaligned - tf.gather(p["unaligned_before"], ws), 0)
             & tf.equal(unk - tf.gather(p["unk_before"], ps), 0))
    into_start = tf.where(exact, tf.gather(p["piece_offset"], ps), 0)
    into_end = tf.where(exact, tf.gather(p["piece_offset"], pe) + tf.gather(p["piece_len"], pe),
                        tf.gather(p["word_length"], we))
    joined = tf.strings.reduce_join(p["words"], axis=1, separator=" ")  # [b]
    j0 = tf.gather(p["joined_start"], ws) + into_start
    j1 = tf.gather(p["joined_start"], we) + into_end
    answer = tf.strings.substr(tf.gather(joined, cand_text), j0, j1 - j0, unit="UTF8_CHAR")
    c0 = tf.gather(p["word_start"], ws) + into_start
    c1 = tf.gather(p["word_start"], we) + into_end
    score = start_logit + end_logit
    if self.version_2:
      # Null answer: the window with the lowest [CLS] score (the first of equal ones).
      null = start_logits[:, 0] + end_logits[:, 0]  # [W]
      lowest = tf.math.unsorted_segment_min(null, text, batch)
      windows = tf.range(tf.size(text, out_type=tf.int64))
      null_window = tf.math.unsorted_segment_min(
          tf.where(tf.equal(null, tf.gather(lowest, text)), windows, tf.int64.max), text, batch)
      has_window = null_window < tf.int64.max
      # A text without a window (an empty context) reads a 0 appended after the last window:
      # a batch of only such texts has no window to read.
      null_window = tf.where(has_window, null_window, tf.size(text, out_type=tf.int64))
      null_start = tf.gather(tf.concat([start_logits[:, 0], [0.0]], 0), null_window)
      null_end = tf.gather(tf.concat([end_logits[:, 0], [0.0]], 0), null_window)
      null_score = tf.where(has_window, lowest, 1e6)  # the original's initial value
      # Appended last, so a tie with a span ranks after it, as the original's stable sort.
      examples = tf.range(batch)
      cand_text = tf.concat([cand_text, examples], 0)
      start_logit = tf.concat([start_logit, null_start], 0)
      end_logit = tf.concat([end_logit, null_end], 0)
      score = tf.concat([score, null_start + null_end], 0)
      answer = tf.concat([answer, tf.fill([batch], "")], 0)
      minus_one = -tf.ones([batch], tf.int64)
      c0, c1 = tf.concat([c0, minus_one], 0), tf.concat([c1, minus_one], 0)
    return self._nbest(batch, cand_text, score, start_logit, end_logit, answer, c0, c1,
                       null_score if self.version_2 else None,
                       (null_start, null_end) if self.version_2 else None)

  def _nbest(self, batch, cand_text, score, start_logit, end_logit, answer, c0, c1, null_score,
             null_logits):
    n = self.n_best_size
    by_score = tf.argsort(-score, stable=True)
    order = tf.gather(by_score, tf.argsort(tf.gather(cand_text, by_score), stable=True))
    cand_text, score, answer = (tf.gather(x, order) for x in (cand_text, score, answer))
    start_logit, end_logit, c0, c1 = (tf.gather(x, order) for x in (start_logit, end_logit, c0,
                                                                    c1))
    # Distinct texts per question, first (best) kept: ids in order of first appearance.
    key = tf.strings.join([tf.strings.as_string(cand_text), answer], separator="\x00")
    _, first_id = tf.unique(key)
    positions = tf.range(tf.size(key, out_type=tf.int64))
    first_position = tf.math.unsorted_segment_min(positions, first_id, tf.size(key))
    kept = tf.equal(tf.gather(first_position, first_id), positions)
    rank = _segment_exclusive_cumsum(tf.cast(kept, tf.int64), cand_text, batch)
    take = tf.where(kept & (rank < n))[:, 0]
    rows = tf.gather(cand_text, take)
    row_lengths = tf.math.unsorted_segment_sum(tf.ones_like(rows), rows, batch)
    ragged = lambda x: tf.RaggedTensor.from_row_lengths(tf.gather(x, take), row_lengths,
                                                        validate=False)
    entries = {"text": ragged(answer), "score": ragged(score), "start": ragged(c0),
               "end": ragged(c1), "start_logit": ragged(start_logit),
               "end_logit": ragged(end_logit)}
    # The original's additions: v2.0's null entry when no "" made the n-best; v1.1's "empty"
    # when no span was valid.
    if null_score is not None:
      has_empty = tf.reduce_any(tf.equal(entries["text"], ""), axis=1)
      extra = tf.cast(~has_empty, tf.int64)
      fill = {"text": tf.fill([batch], ""), "score": null_logits[0] + null_logits[1],
              "start": -tf.ones([batch], tf.int64), "end": -tf.ones([batch], tf.int64),
              "start_logit": null_logits[0], "end_logit": null_logits[1]}
    else:
      extra = tf.cast(tf.equal(row_lengths, 0), tf.int64)
      zeros = tf.zeros([batch], tf.float64)
      fill = {"text": tf.fill([batch], "empty"), "score": zeros,
              "start": -tf.ones([batch], tf.int64), "end": -tf.ones([batch], tf.int64),
              "start_logit": zeros, "end_logit": zeros}
    keep_extra = tf.where(extra > 0)[:, 0]
    for name, value in fill.items():
      tail = tf.RaggedTensor.from_row_lengths(tf.gather(value, keep_extra), extra,
                                              validate=False)
      entries[name] = tf.concat([entries[name], tail], axis=1)
    width = n + 1
    dense = {
        "nbest_text": entries["text"].to_tensor("", shape=[None, width]),
        "nbest_score": entries["score"].to_tensor(-1e9, shape=[None, width]),
        "nbest_start": entries["start"].to_tensor(-1, shape=[None, width]),
        "nbest_end": entries["end"].to_tensor(-1, shape=[None, width]),
    }
    valid = tf.sequence_mask(entries["text"].row_lengths(), width)
    probability = tf.where(valid, tf.nn.softmax(tf.where(valid, dense["nbest_score"], -1e300)),
                           0.0)
    first = {k: v[:, 0] for k, v in dense.items()}
    result = {"answer_text": first["nbest_text"], "answer_start": first["nbest_start"],
              "answer_end": first["nbest_end"], "score": first["nbest_score"]}
    if null_score is not None:
      # The best non-null entry, and "" when the null answer beats it by the threshold.
      non_null = valid & tf.not_equal(dense["nbest_text"], "")
      best = tf.argmax(tf.cast(non_null, tf.int32), axis=1, output_type=tf.int32)
      has_best = tf.reduce_any(non_null, axis=1)
      pick = lambda x: tf.gather(x, best, batch_dims=1)
      diff = null_score - pick(dense["nbest_score"])
      answered = has_best & (diff <= self.null_score_diff_threshold)
      result = {"answer_text": tf.where(answered, pick(dense["nbest_text"]), ""),
                "answer_start": tf.where(answered, pick(dense["nbest_start"]), -1),
                "answer_end": tf.where(answered, pick(dense["nbest_end"]), -1),
                "score": tf.where(answered, pick(dense["nbest_score"]), null_score),
                "no_answer_score": tf.cast(null_score, tf.float32),
                "null_score_diff": tf.cast(tf.where(has_best, diff, null_score), tf.float32)}
    result.update(dense, nbest_probability=probability)
    cast = {tf.float64: tf.float32, tf.int64: tf.int32}
    return {k: tf.cast(v, cast[v.dtype]) if v.dtype in cast else v for k, v in result.items()}
