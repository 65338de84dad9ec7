"""SQuAD questions -> fixed-length windows, as the original `convert_examples_to_features`.

For each question: the WordPiece tokens of its paragraph (each whitespace word tokenized on
its own, so sub-tokens map back to words), the question's tokens cut to `max_query_length`,
then windows of `max_seq_length - len(query) - 3` paragraph tokens every `doc_stride` tokens:
`[CLS] query [SEP] window [SEP]`. Training windows get the answer's token positions, or 0/0
([CLS]) when the window does not hold the whole answer or the question is impossible.

Same windows, ids and positions as the original, organized for speed:
  - the main process tokenizes each distinct word of the file once and each question once
    (`tokenize_paragraphs`, `tokenize_texts`: batched TF ops); the original re-tokenizes the
    paragraph word by word for every one of its questions;
  - `build_chunk` (numpy only, so spawn workers can run it without TensorFlow) makes the
    windows of a group of paragraphs, serializes them and writes their metadata lines.
"""

import collections
import json

import numpy as np

from data_prep import example_encoder
from data_prep import schema

Settings = collections.namedtuple(
    "Settings", ["max_seq_length", "doc_stride", "max_query_length", "is_training"])

# What a worker needs of a paragraph / question (picklable, no TensorFlow objects).
ParagraphData = collections.namedtuple(
    "ParagraphData", ["index", "sub_ids", "tok_to_orig", "orig_to_tok", "doc_tokens"])
ExampleData = collections.namedtuple(
    "ExampleData", ["example_index", "qas_id", "question", "paragraph", "query_ids",
                    "answer_ids", "start_position", "end_position", "is_impossible"])
Chunk = collections.namedtuple("Chunk", ["base_unique_id", "paragraphs", "examples"])


def validate(settings):
  if settings.max_query_length < 0:
    raise ValueError(f"--max_query_length={settings.max_query_length} must be >= 0")
  if settings.max_seq_length - settings.max_query_length - 3 < 1:
    raise ValueError(f"--max_seq_length={settings.max_seq_length} leaves no room for the "
                     f"paragraph after a question of --max_query_length="
                     f"{settings.max_query_length} tokens and [CLS] [SEP] [SEP]")
  if settings.doc_stride < 1:
    raise ValueError(f"--doc_stride={settings.doc_stride} must be >= 1")


def tokenize_texts(texts, encode_batch):
  """WordPiece ids of each text: a list of int32 arrays."""
  ids, splits = encode_batch(list(texts))
  return [ids[splits[i]:splits[i + 1]] for i in range(len(texts))]


def tokenize_paragraphs(paragraphs, encode_batch):
  """(sub_ids, tok_to_orig, orig_to_tok) per paragraph, each distinct word tokenized once.

  orig_to_tok has one more entry than words: its last is the number of sub-tokens, so the
  sub-tokens of word w are sub_ids[orig_to_tok[w]:orig_to_tok[w + 1]].
  """
  index = {}
  occurrences = [index.setdefault(w, len(index)) for p in paragraphs for w in p.doc_tokens]
  occurrences = np.asarray(occurrences, np.int64)  # [all words]: distinct-word index
  ids, splits = encode_batch(list(index))
  lengths = np.diff(splits)[occurrences]  # [all words]: sub-tokens per word
  # Ragged gather: the sub-tokens of every word occurrence, concatenated.
  ends = np.cumsum(lengths)
  flat = np.arange(int(ends[-1]) if len(ends) else 0) + np.repeat(
      splits[:-1][occurrences] - (ends - lengths), lengths)
  all_sub = ids[flat]
  out, word_at, tok_at = [], 0, 0
  for p in paragraphs:
    n_words = len(p.doc_tokens)
    lens = lengths[word_at:word_at + n_words]
    orig_to_tok = np.zeros(n_words + 1, np.int64)
    np.cumsum(lens, out=orig_to_tok[1:])
    n_sub = int(orig_to_tok[-1])
    out.append((all_sub[tok_at:tok_at + n_sub],
                np.repeat(np.arange(n_words, dtype=np.int32), lens), orig_to_tok))
    word_at += n_words
    tok_at += n_sub
  return out


def doc_spans(num_tokens, max_tokens_for_doc, doc_stride):
  """The original's sliding windows: [(start, length)] over `num_tokens` paragraph tokens.

  Example: 10 tokens, 4 per window, stride 3 -> (0, 4), (3, 4), (6, 4); the last window
  ends at the last token, then stops. A stride longer than the window skips tokens, as in
  the original (it advances by min(length, doc_stride)).
  """
  spans, start = [], 0
  while start < num_tokens:
    length = min(num_tokens - start, max_tokens_for_doc)
    spans.append((start, length))
    if start + length == num_tokens:
      break
    start += min(length, doc_stride)
  return spans


def max_context_span(spans, num_tokens):
  """For each paragraph token, the window where it has the most context (the original's
  `_check_is_max_context` for every position at once).

  A token's score in a window is min(tokens left of it, tokens right of it) + 0.01 * window
  length; the first window with the highest score wins. Example, windows (0, 4) and (3, 4)
  over 7 tokens: token 3 scores min(3, 0) + 0.04 in the first and min(0, 3) + 0.04 in the
  second -> the first (tie, earlier wins); token 4 only appears in the second.
  """
  if len(spans) == 1:  # most paragraphs fit one window
    return np.zeros(num_tokens, np.int64)
  best = np.full(num_tokens, -1, np.int64)
  best_score = np.full(num_tokens, -np.inf)
  for j, (start, length) in enumerate(spans):
    pos = np.arange(start, start + length)
    score = np.minimum(pos - start, start + length - 1 - pos) + 0.01 * length
    better = score > best_score[start:start + length]
    best[start:start + length][better] = j
    best_score[start:start + length][better] = score[better]
  return best


def improve_answer_span(doc_ids, start, end, answer_ids):
  """The original `_improve_answer_span`: the first sub-span of [start, end] whose tokens
  are exactly the answer's.

  The annotated answer covers whole whitespace words; WordPiece often splits finer.
  Example: context "(1895-1943).", answer "1895": the word's tokens are
  ( 1895 - 1943 ) . -> the span shrinks to the single token 1895. If nothing matches (the
  answer "Japan" inside the word "Japanese"), the word span stays.
  The original compares " ".join(tokens) strings; equal token ids are equal strings.
  """
  k = len(answer_ids)
  if k:
    for new_start in range(start, end + 1):
      new_end = new_start + k - 1  # only spans of the answer's length can match
      if new_end > end:
        break
      if np.array_equal(doc_ids[new_start:new_end + 1], answer_ids):
        return new_start, new_end
  return start, end


def num_windows(num_doc_tokens, num_query_tokens, settings):
  mtd = settings.max_seq_length - num_query_tokens - 3
  return len(doc_spans(num_doc_tokens, mtd, settings.doc_stride))


def build_chunk(chunk, settings, cls_id, sep_id, vocab_tokens=None):
  """Windows of one chunk of paragraphs -> (serialized Examples, metadata lines, counts).

  `vocab_tokens` (id -> token) is needed for prediction metadata only.
  """
  L = settings.max_seq_length  # pylint: disable=invalid-name
  training = settings.is_training
  paragraphs = {p.index: p for p in chunk.paragraphs}
  rows = []  # (example, span index, start, length)
  positions = []  # training: (start, end) per window
  context_cache = {}  # (paragraph, window size) -> best window per token
  lines = []
  stats = collections.Counter()
  emitted = set()
  for ex in chunk.examples:
    para = paragraphs[ex.paragraph]
    n_sub = len(para.sub_ids)
    nq = len(ex.query_ids)
    spans = doc_spans(n_sub, L - nq - 3, settings.doc_stride)
    if training:
      positions.extend(_window_positions(ex, para, spans, nq + 2, stats))
    else:
      if ex.paragraph not in emitted:
        emitted.add(ex.paragraph)
        lines.append(json.dumps({
            "paragraph": ex.paragraph, "doc_tokens": para.doc_tokens,
            "sub_tokens": [vocab_tokens[i] for i in para.sub_ids.tolist()],
            "tok_to_orig": para.tok_to_orig.tolist()}))
      lines.append(json.dumps({
          "example": ex.example_index, "qas_id": ex.qas_id, "question": ex.question,
          "paragraph": ex.paragraph,
          "query_tokens": [vocab_tokens[i] for i in ex.query_ids.tolist()]}))
      key = (ex.paragraph, L - nq - 3)
      if key not in context_cache:
        context_cache[key] = max_context_span(spans, n_sub)
      best = context_cache[key]
    for j, (start, length) in enumerate(spans):
      if not training:
        # "1" where this window is the token's max-context window: [length] chars
        bits = ((best[start:start + length] == j) + 48).astype(np.uint8).tobytes().decode()
        lines.append(json.dumps({
            "feature": chunk.base_unique_id + len(rows), "example": ex.example_index,
            "doc_span_index": j, "doc_start": start, "doc_length": length,
            "max_context": bits}))
      rows.append((ex, start, length))
  stats["features"] = len(rows)
  stats["examples"] = len(chunk.examples)
  columns = _columns(rows, paragraphs, L, cls_id, sep_id)
  columns["unique_ids"] = (chunk.base_unique_id + np.arange(len(rows), dtype=np.int64))[:, None]
  if training:
    pos = np.asarray(positions, np.int64).reshape(-1, 3)
    columns["start_positions"] = pos[:, :1]
    columns["end_positions"] = pos[:, 1:2]
    columns["is_impossible"] = pos[:, 2:]
  encoder = example_encoder.ExampleEncoder(schema.squad_features(L, training))
  return encoder.encode(columns), lines, stats


def _window_positions(ex, para, spans, doc_offset, stats):
  """[(start_position, end_position, is_impossible)] per window, as the original writes them.

  Example: answer tokens 150..152 of the paragraph, query of 10 tokens (doc_offset 12),
  windows starting at 0 and 128 (length 371): the first holds it at 12 + 150 = 162..164,
  the second at 12 + 22 = 34..36. A window that cuts the answer gets 0/0.
  """
  impossible = int(bool(ex.is_impossible))
  if ex.is_impossible:
    stats["impossible_windows"] += len(spans)
    return [(0, 0, impossible)] * len(spans)
  tok_start = int(para.orig_to_tok[ex.start_position])
  tok_end = int(para.orig_to_tok[ex.end_position + 1]) - 1
  improved = improve_answer_span(para.sub_ids, tok_start, tok_end, ex.answer_ids)
  stats["answers_narrowed"] += improved != (tok_start, tok_end)
  tok_start, tok_end = improved
  out = []
  for start, length in spans:
    if tok_start >= start and tok_end <= start + length - 1:
      out.append((tok_start - start + doc_offset, tok_end - start + doc_offset, impossible))
    else:
      stats["windows_without_answer"] += 1
      out.append((0, 0, impossible))
  return out


def _columns(rows, paragraphs, seq_length, cls_id, sep_id):
  """input_ids, input_mask, segment_ids [windows, seq_length] of `rows`."""
  n = len(rows)
  input_ids = np.zeros((n, seq_length), np.int64)  # [windows, seq]
  doc_offset = np.zeros((n, 1), np.int64)
  real_length = np.zeros((n, 1), np.int64)
  for r, (ex, start, length) in enumerate(rows):
    nq = len(ex.query_ids)
    row = input_ids[r]
    row[0] = cls_id
    row[1:1 + nq] = ex.query_ids
    row[1 + nq] = sep_id
    row[nq + 2:nq + 2 + length] = paragraphs[ex.paragraph].sub_ids[start:start + length]
    row[nq + 2 + length] = sep_id
    doc_offset[r] = nq + 2
    real_length[r] = nq + 3 + length
  pos = np.arange(seq_length)[None, :]  # [1, seq]
  input_mask = (pos < real_length).astype(np.int64)
  segment_ids = ((pos >= doc_offset) & (pos < real_length)).astype(np.int64)
  return {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}
