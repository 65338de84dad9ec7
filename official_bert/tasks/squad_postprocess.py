"""Start/end logits of SQuAD windows -> answer texts, as the original `write_predictions`.

Per question, over all its windows:
  1. candidates: the `n_best_size` best start and end positions of each window (all pairs);
     a pair is dropped if either end is outside the paragraph part of the window, the start
     is not in its max-context window, end < start, or it is longer than
     `max_answer_length` tokens;
  2. v2.0 adds the null answer ([CLS], [CLS]) of the window where it scores lowest;
  3. candidates by start + end logit, best first; each becomes text (`get_final_text`),
     duplicates are skipped, until `n_best_size`; softmax over them for `probability`;
  4. the prediction is the best text (v1.1), or "" if null score - best non-null score >
     `null_score_diff_threshold` (v2.0); that difference goes to null_odds.json.

Same output as the original for the same logits (tested against tf-models-official's
squad_lib); vectorized over candidate pairs, and the text normalization `get_final_text`
needs runs batched through our tokenizer (`basic_tokenize`: texts -> word lists, e.g.
`FullTokenizer.split_words_batch`, the original's BasicTokenizer).
"""

import collections
import json
import math

import numpy as np

from data_prep import tfrecord_io

NbestEntry = collections.namedtuple("NbestEntry", ["text", "start_logit", "end_logit"])


def _top(logits, n):
  """Indexes of the n largest logits, ties in position order (the original's stable sort)."""
  return np.argsort(-logits, kind="stable")[:n]


def window_candidates(feature, start_logits, end_logits, n_best_size, max_answer_length):
  """Valid (start, end) pairs of one window, in the original's generation order.

  Returns (starts, ends) int arrays, start-major over the top-n lists (before sorting).
  """
  size = len(start_logits)
  keys = np.fromiter(feature.token_to_orig_map.keys(), np.int64)
  in_doc = np.zeros(size, bool)  # [seq] position holds a paragraph token
  in_doc[keys[keys < size]] = True
  in_doc[len(feature.tokens):] = False
  context = np.zeros(size, bool)  # [seq] ... and this window is its max-context window
  ctx_keys = np.fromiter((k for k, v in feature.token_is_max_context.items() if v), np.int64)
  context[ctx_keys[ctx_keys < size]] = True
  s = _top(start_logits, n_best_size)[:, None]  # [n, 1]
  e = _top(end_logits, n_best_size)[None, :]  # [1, n]
  ok = in_doc[s] & in_doc[e] & context[s] & (e >= s) & (e - s + 1 <= max_answer_length)
  ss, ee = np.broadcast_to(s, ok.shape)[ok], np.broadcast_to(e, ok.shape)[ok]  # row-major
  return ss, ee


def get_final_text(pred_text, orig_text, tok_orig_text):
  """The original `get_final_text`: the span of `orig_text` that `pred_text` came from.

  `pred_text` is de-tokenized WordPiece text (normalized: lower case, no accents);
  `tok_orig_text` is " ".join(BasicTokenizer.tokenize(orig_text)). Both are aligned
  character by character after removing spaces; if that fails, `orig_text` is returned.
  Example: pred "steve smith", orig "Steve Smith's" -> tokenized "steve smith ' s"; the
  prediction is at 0..10 of it, which maps (spaces removed: "stevesmith") to 0..10 of the
  original -> "Steve Smith".
  """
  start = tok_orig_text.find(pred_text)
  if start == -1:
    return orig_text
  end = start + len(pred_text) - 1
  if len(orig_text) - orig_text.count(" ") != len(tok_orig_text) - tok_orig_text.count(" "):
    return orig_text
  # A position on a space has no non-space index (the original's map misses it).
  if tok_orig_text[start] == " " or tok_orig_text[end] == " ":
    return orig_text
  ns_start = start - tok_orig_text.count(" ", 0, start)
  ns_end = end - tok_orig_text.count(" ", 0, end)
  non_space = [i for i, c in enumerate(orig_text) if c != " "]
  return orig_text[non_space[ns_start]:non_space[ns_end] + 1]


def _softmax(scores):
  top = max(scores)
  exps = [math.exp(s - top) for s in scores]
  total = sum(exps)
  return [x / total for x in exps]


def _detokenize(tokens):
  text = " ".join(tokens).replace(" ##", "").replace("##", "")
  return " ".join(text.strip().split())


def postprocess(examples, features, results, basic_tokenize, n_best_size=20,
                max_answer_length=30, version_2_with_negative=False,
                null_score_diff_threshold=0.0):
  """Predictions for every example.

  Args:
    examples: objects with `qas_id`, `doc_tokens`, in example_index order.
    features: windows with `unique_id`, `example_index`, `tokens`, `token_to_orig_map`,
      `token_is_max_context` (`data_prep.squad.records.InputFeatures` or the original's).
    results: unique_id -> (start_logits [seq], end_logits [seq]).
    basic_tokenize: list of texts -> list of word lists (the original's BasicTokenizer).
  Returns:
    (predictions {qas_id: text}, nbest {qas_id: [{text, probability, start_logit,
    end_logit}]}, null_odds {qas_id: score_diff} (v2.0 only, else {})).
  """
  by_example = collections.defaultdict(list)
  for f in features:
    by_example[f.example_index].append(f)
  # Per example: candidates sorted best first, and v2.0's null answer.
  ranked, nulls = [], []
  for index in range(len(examples)):
    cands, null = [], None  # null: (score, start_logit, end_logit, window)
    for f in by_example.get(index, ()):
      if f.unique_id not in results:
        continue
      # float64, as the original's Python floats: sums and ties as it computes them.
      start_logits, end_logits = (np.asarray(x, np.float64) for x in results[f.unique_id])
      if version_2_with_negative:
        score = start_logits[0] + end_logits[0]
        if null is None or score < null[0]:
          null = (score, start_logits[0], end_logits[0], f)
      ss, ee = window_candidates(f, start_logits, end_logits, n_best_size, max_answer_length)
      cands.extend(zip(start_logits[ss].tolist(), end_logits[ee].tolist(), ss.tolist(),
                       ee.tolist(), [f] * len(ss)))
    if version_2_with_negative:
      null = null or (1000000, 0.0, 0.0, None)  # the original's initial values
      cands.append((float(null[1]), float(null[2]), 0, 0, null[3]))
    cands.sort(key=lambda c: c[0] + c[1], reverse=True)  # stable, as the original
    ranked.append(cands)
    nulls.append(null)
  nbests = _nbest(examples, ranked, basic_tokenize, n_best_size)
  predictions, all_nbest, null_odds = {}, {}, {}
  for example, nbest, null in zip(examples, nbests, nulls):
    if version_2_with_negative and all(e.text for e in nbest):
      nbest.append(NbestEntry("", float(null[1]), float(null[2])))
    if not nbest:  # no valid span at all (e.g. an empty context): the original's nonce
      nbest.append(NbestEntry("" if version_2_with_negative else "empty", 0.0, 0.0))
    probs = _softmax([e.start_logit + e.end_logit for e in nbest])
    all_nbest[example.qas_id] = [
        {"text": e.text, "probability": p, "start_logit": e.start_logit,
         "end_logit": e.end_logit} for e, p in zip(nbest, probs)]
    if not version_2_with_negative:
      predictions[example.qas_id] = nbest[0].text
      continue
    best = next((e for e in nbest if e.text), None)
    if best is None:
      null_odds[example.qas_id] = float(null[0])
      predictions[example.qas_id] = ""
    else:
      diff = float(null[0]) - best.start_logit - best.end_logit
      null_odds[example.qas_id] = diff
      predictions[example.qas_id] = "" if diff > null_score_diff_threshold else best.text
  return predictions, all_nbest, null_odds


def _nbest(examples, ranked, basic_tokenize, n_best_size):
  """The n-best distinct texts per example, from its ranked candidates.

  Texts are only known after `get_final_text`, which needs the basic tokens of the original
  text; so candidates are taken `n_best_size` at a time per example, their original texts
  tokenized in one batch, and examples still short of n_best_size distinct texts go on.
  """
  nbests = [[] for _ in examples]
  seen = [set() for _ in examples]
  cursor = [0] * len(examples)
  cache = {}  # original text -> " ".join(basic tokens)
  todo = [i for i in range(len(examples)) if ranked[i]]
  while todo:
    batch = []  # (example, start_logit, end_logit, pred_text, orig_text) or null
    for i in todo:
      for start_logit, end_logit, s, e, f in ranked[i][cursor[i]:cursor[i] + n_best_size]:
        if s > 0:  # a span; 0/0 is the null answer
          orig = examples[i].doc_tokens[f.token_to_orig_map[s]:f.token_to_orig_map[e] + 1]
          batch.append((i, start_logit, end_logit, _detokenize(f.tokens[s:e + 1]),
                        " ".join(orig)))
        else:
          batch.append((i, start_logit, end_logit, None, None))
      cursor[i] += n_best_size
    new = sorted({b[4] for b in batch if b[4] is not None and b[4] not in cache})
    cache.update(zip(new, (" ".join(words) for words in basic_tokenize(new))))
    for i, start_logit, end_logit, pred_text, orig_text in batch:
      if len(nbests[i]) >= n_best_size:
        continue
      text = "" if pred_text is None else get_final_text(pred_text, orig_text,
                                                         cache[orig_text])
      if text in seen[i]:
        continue
      seen[i].add(text)
      nbests[i].append(NbestEntry(text, start_logit, end_logit))
    todo = [i for i in todo if len(nbests[i]) < n_best_size and cursor[i] < len(ranked[i])]
  return nbests


def write_json(obj, path):
  """Like the original's output files (indent 4); atomically."""
  tfrecord_io.write_text(path, json.dumps(obj, indent=4) + "\n")
