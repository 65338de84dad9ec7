"""Single-segment sequences for masked-LM-only pretraining (`--next_sentence=False`).

RoBERTa dropped next-sentence prediction and packed contiguous text instead: DOC-SENTENCES
(sentences of one document) or, with `--cross_document=True`, FULL-SENTENCES (a sequence may
run on into the next document, a [SEP] between the two). Here, per chunk of documents:

  - a sequence is [CLS] text [SEP], one segment (segment_ids 0, next_sentence_labels 0);
  - sentences are added whole until the sequence reaches its target length; the target is
    max_seq_length - 2, or with prob. `short_seq_prob` a uniform one in [2, max_seq_length - 2]
    drawn as the original does: once per document (DOC-SENTENCES) or once per sequence
    (FULL-SENTENCES, where sequences do not belong to one document);
  - a sentence that no longer fits starts the next sequence, except one longer than a whole
    sequence, which is split: the sequence is filled with its first tokens and the rest
    continues in the next sequence. So every token of every document is in exactly one
    sequence of each dupe pass (nothing is truncated away);
  - across documents, the [SEP] between two documents costs one token; a sequence never
    starts or ends with it.

With `--packing=tokens` (`token_spans`) sentences are not kept whole: the stream (documents
running on, a [SEP] between two) is cut every max_seq_length - 2 tokens, as Hugging Face's
`group_texts` cuts, so every sequence but a chunk's last is full; no short targets.

To handle every case alike, the chunk's tokens are laid out as one stream with a [SEP]
between consecutive documents; every sequence is then one contiguous span (lo, length) of it.
"""

import dataclasses

import numpy as np


@dataclasses.dataclass
class Stream:
  ids: np.ndarray  # [tokens + docs - 1] the chunk's ids, a [SEP] between documents
  is_sep: np.ndarray  # [same] bool: the documents' [SEP]s
  word_starts: np.ndarray = None  # [same] bool, if the chunk has them ([SEP]s: False)


def extended_stream(chunk, sep_id):
  """The chunk's tokens with a [SEP] between consecutive documents (see the module doc)."""
  num_docs = len(chunk.doc_splits) - 1
  doc_starts = chunk.line_splits[chunk.doc_splits]  # [docs + 1] token offsets
  size = len(chunk.ids) + max(num_docs - 1, 0)
  is_sep = np.zeros([size], bool)
  is_sep[doc_starts[1:-1] + np.arange(num_docs - 1)] = True
  ids = np.full([size], sep_id, chunk.ids.dtype)
  ids[~is_sep] = chunk.ids
  starts = None
  if chunk.word_starts is not None:
    starts = np.zeros([size], bool)
    starts[~is_sep] = chunk.word_starts
  return Stream(ids, is_sep, starts)


def _units(chunk):
  """Per document, its sentences as (start, end, is_sep) in stream offsets; then the [SEP]
  after it (except after the last document)."""
  splits = chunk.line_splits.tolist()
  docs = chunk.doc_splits.tolist()
  out = []
  for d in range(len(docs) - 1):
    doc = [(splits[i] + d, splits[i + 1] + d, False) for i in range(docs[d], docs[d + 1])]
    out.append(doc)
    if d < len(docs) - 2:
      out.append([(doc[-1][1], doc[-1][1] + 1, True)])
  return out


def _pack(units, next_target, max_num_tokens, out):
  """Appends (lo, length) of the sequences that cover `units` (one region) to `out`."""
  u, n = 0, len(units)
  pos = units[0][0] if units else 0
  while u < n:
    if units[u][2] and pos <= units[u][0]:  # never start a sequence with the [SEP]
      pos = units[u][1]
      u += 1
      continue
    target = next_target()
    lo = pos
    while u < n:
      end = units[u][1]
      if end - lo <= max_num_tokens:  # the (rest of the) unit fits
        pos = end
        u += 1
        if pos - lo >= target:
          break
      else:
        if end - pos > max_num_tokens:  # longer than a sequence: split it, fill this one
          pos = lo + max_num_tokens
        break
    hi = pos - 1 if u > 0 and units[u - 1][2] and units[u - 1][1] == pos else pos
    out.append((lo, hi - lo))


def token_spans(chunk, opts, rng):
  """--packing=tokens: per dupe pass, the stream cut into spans of max_seq_length - 2 tokens
  (the first pass from the stream's start, each later one from a random offset, so that the
  passes' boundaries differ; the tokens before it are one shorter span). A document [SEP] at
  either end of a span is left out (it is then one token shorter): a sequence never starts
  or ends with one. Every token is in exactly one span of each pass."""
  max_num_tokens = opts.max_seq_length - 2
  num_docs = len(chunk.doc_splits) - 1
  size = len(chunk.ids) + max(num_docs - 1, 0)
  is_sep = np.zeros([size + 1], bool)  # one past the end: never a [SEP]
  doc_starts = chunk.line_splits[chunk.doc_splits]
  is_sep[doc_starts[1:-1] + np.arange(max(num_docs - 1, 0))] = True
  los, his = [], []
  for p in range(opts.dupe_factor):
    offset = rng.randint(1, max_num_tokens - 1) if p and max_num_tokens > 2 else 0
    starts = np.arange(offset, size, max_num_tokens, dtype=np.int64)
    if offset and size:
      starts = np.concatenate([[0], starts[starts > 0]])
    ends = np.minimum(np.append(starts[1:], size), size)
    los.append(starts + is_sep[starts])
    his.append(ends - is_sep[np.maximum(ends - 1, 0)])
  lo, hi = np.concatenate(los), np.concatenate(his)
  keep = hi > lo
  lo, hi = lo[keep], hi[keep]
  return {"lo": lo, "length": hi - lo, "label": np.zeros([len(lo)], np.int64)}


def packed_spans(chunk, opts, rng):
  """The sequences of every dupe pass: int64 arrays lo, length (stream offsets), label (0)."""
  if opts.packing == "tokens":
    return token_spans(chunk, opts, rng)
  max_num_tokens = opts.max_seq_length - 2

  def draw():
    if rng.random() < opts.short_seq_prob:
      return rng.randint(min(2, max_num_tokens), max_num_tokens)
    return max_num_tokens

  units = _units(chunk)
  out = []
  for _ in range(opts.dupe_factor):
    if opts.cross_document:
      _pack([x for group in units for x in group], draw, max_num_tokens, out)
    else:
      for group in units[::2]:  # the documents, without the [SEP]s between them
        target = draw()
        _pack(group, lambda t=target: t, max_num_tokens, out)
  cols = np.array(out, dtype=np.int64).reshape(-1, 2)
  return {"lo": cols[:, 0], "length": cols[:, 1], "label": np.zeros([len(cols)], np.int64)}


def assemble_single(stream, spans, opts):
  """Lays out [CLS] span [SEP]: tokens [n, L], lengths [n], segment ids [n, L] (all 0),
  masking candidates [n, L] (the span's tokens but the documents' [SEP]s) and src [n, L]
  (stream offset of each span token, 0 elsewhere)."""
  lo, size = spans["lo"], spans["length"]
  cols = np.arange(opts.max_seq_length)[None, :]  # [1, L]
  inside = (cols >= 1) & (cols <= size[:, None])  # [n, L]
  src = np.where(inside, lo[:, None] + cols - 1, 0)
  tokens = np.where(inside, stream.ids[src], 0).astype(np.int64)
  tokens[:, 0] = opts.cls_id
  tokens[np.arange(len(size)), size + 1] = opts.sep_id
  candidates = inside & ~stream.is_sep[src]
  return tokens, size + 2, np.zeros_like(tokens), candidates, src
