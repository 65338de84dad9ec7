"""NER sentences -> fixed-length token-classification features -> TFRecords.

Each word is split into WordPieces; its label goes on its FIRST piece (weight 1) and the
other pieces get weight 0, so they are ignored by the loss and the metrics (the paper's
NER setup). A sentence longer than max_seq_length - 2 pieces is cut into several windows of
whole words, `[CLS] words [SEP]` each, so every word gets a prediction (a single word with
more pieces than fit keeps its first ones).

Features (`schema.ner_features`; original names where they exist):
  input_ids, input_mask, segment_ids  [L] int64
  label_ids                           [L] int64   label id on first pieces, 0 elsewhere
  label_weights                       [L] float32 1.0 on first pieces
"""

import numpy as np

from data_prep.classification import features as classifier_features


def word_pieces(tokenizer, sentences):
  """Per sentence, per word: its WordPiece ids ([UNK] if a word yields none)."""
  flat = [w for s in sentences for w in s.words]
  pieces = classifier_features.ragged_rows(tokenizer, flat)
  unk = tokenizer.vocab["[UNK]"]
  out, start = [], 0
  for s in sentences:
    out.append([list(p) if len(p) else [unk] for p in pieces[start:start + len(s.words)]])
    start += len(s.words)
  return out


def windows(pieces_per_word, budget):
  """Cuts a sentence into (first word, end word) windows of at most `budget` pieces."""
  spans, start, used = [], 0, 0
  for i, pieces in enumerate(pieces_per_word):
    if used and used + len(pieces) > budget:
      spans.append((start, i))
      start, used = i, 0
    used += len(pieces)
  spans.append((start, len(pieces_per_word)))
  return spans


def convert_sentences(sentences, label_list, max_seq_length, tokenizer):
  """Sentences (words, tags) -> (columns of the NER schema, windows).

  windows: one (sentence index, first word, end word) per feature row, to map the
  predictions back onto words.
  """
  label_map = {label: i for i, label in enumerate(label_list)}
  cls_id, sep_id = tokenizer.vocab["[CLS]"], tokenizer.vocab["[SEP]"]
  rows, spans = [], []
  for s_index, (sentence, pieces) in enumerate(zip(sentences,
                                                    word_pieces(tokenizer, sentences))):
    for first, end in windows(pieces, max_seq_length - 2):
      ids, labels, weights = [cls_id], [0], [0.0]
      for word in range(first, end):
        kept = pieces[word][:max_seq_length - 1 - len(ids)]  # room for [SEP]
        ids += kept
        labels += [label_map[sentence.tags[word]]] + [0] * (len(kept) - 1)
        weights += [1.0] + [0.0] * (len(kept) - 1)
      ids.append(sep_id)
      labels.append(0)
      weights.append(0.0)
      rows.append((ids, labels, weights))
      spans.append((s_index, first, end))
  n, L = len(rows), max_seq_length  # pylint: disable=invalid-name
  cols = {name: np.zeros([n, L], np.int64)
          for name in ("input_ids", "input_mask", "segment_ids", "label_ids")}
  cols["label_weights"] = np.zeros([n, L], np.float32)
  for i, (ids, labels, weights) in enumerate(rows):
    cols["input_ids"][i, :len(ids)] = ids
    cols["input_mask"][i, :len(ids)] = 1
    cols["label_ids"][i, :len(ids)] = labels
    cols["label_weights"][i, :len(ids)] = weights
  return cols, spans


def predictions_to_tags(logits, label_weights, spans, sentences, label_list):
  """Per sentence, the predicted tag of every word, from per-piece logits [n, L, labels].

  Reads the prediction at each word's first piece (label_weights == 1), in window order.
  """
  tags = [[None] * len(s.words) for s in sentences]
  best = np.argmax(logits, axis=-1)  # [n, L]
  for row, (s_index, first, end) in enumerate(spans):
    positions = np.nonzero(label_weights[row] > 0)[0]
    for word, position in zip(range(first, end), positions):
      tags[s_index][word] = label_list[int(best[row, position])]
  missing = sum(t is None for sentence in tags for t in sentence)
  if missing:
    raise ValueError(f"{missing} words have no prediction: predictions and windows disagree")
  return tags
