"""Corpus-level scores of GLUE, own classification files and CoNLL-2003, as plain numpy
functions.

These need every prediction at once (an F1 or a correlation is not a mean of per-batch
values), so the jobs (`tasks/*_job.py`) compute them on the host from `evaluation.predict` outputs.
Definitions follow the GLUE and conlleval conventions:
  - F1: of the positive class (label 1), as GLUE reports it for MRPC and QQP;
  - Matthews correlation (CoLA): 0 when a confusion-matrix margin is empty (sklearn's choice);
  - Spearman: Pearson of the ranks, ties given their average rank (scipy's choice);
  - CoNLL entities: an entity counts only when its type and both boundaries match.
"""

from absl import logging
import numpy as np


def accuracy(predictions, labels):
  predictions, labels = np.asarray(predictions), np.asarray(labels)
  return float(np.mean(predictions == labels)) if labels.size else 0.0


def f1_score(predictions, labels, positive=1):
  """Binary F1 of class `positive`; 0 when there is no true or predicted positive."""
  predictions, labels = np.asarray(predictions), np.asarray(labels)
  tp = np.sum((predictions == positive) & (labels == positive))
  fp = np.sum((predictions == positive) & (labels != positive))
  fn = np.sum((predictions != positive) & (labels == positive))
  return float(2 * tp / (2 * tp + fp + fn)) if tp else 0.0


def matthews_corrcoef(predictions, labels):
  """Binary Matthews correlation: (TP TN - FP FN) / sqrt of the four margins' product."""
  p = np.asarray(predictions).astype(bool)
  t = np.asarray(labels).astype(bool)
  tp, tn = float(np.sum(p & t)), float(np.sum(~p & ~t))
  fp, fn = float(np.sum(p & ~t)), float(np.sum(~p & t))
  denominator = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
  return float((tp * tn - fp * fn) / denominator) if denominator else 0.0


def pearson(x, y):
  x = np.asarray(x, np.float64)
  y = np.asarray(y, np.float64)
  dx, dy = x - x.mean(), y - y.mean()
  denominator = np.sqrt(np.sum(dx * dx) * np.sum(dy * dy))
  return float(np.sum(dx * dy) / denominator) if denominator else 0.0


def average_ranks(x):
  """Ranks 1..n; tied values share the mean of the ranks they span."""
  x = np.asarray(x)
  order = np.argsort(x, kind="mergesort")
  sorted_x = x[order]
  # Start of each run of equal values; a run from i to j-1 gets rank (i + j + 1) / 2.
  starts = np.r_[True, sorted_x[1:] != sorted_x[:-1]]
  run_id = np.cumsum(starts) - 1
  bounds = np.r_[np.nonzero(starts)[0], len(x)]
  mean_rank = (bounds[:-1] + bounds[1:] + 1) / 2.0
  ranks = np.empty(len(x), np.float64)
  ranks[order] = mean_rank[run_id]
  return ranks


def spearman(x, y):
  return pearson(average_ranks(x), average_ranks(y))


def glue_scores(task_name, predictions, labels):
  """The metrics GLUE reports for a task (predictions: class ids, or scores for STS-B)."""
  key = task_name.lower().replace("-", "")
  if key == "stsb":
    p, s = pearson(predictions, labels), spearman(predictions, labels)
    return {"pearson": p, "spearman": s, "corr": (p + s) / 2}
  scores = {"accuracy": accuracy(predictions, labels)}
  if key == "cola":
    scores["matthews_corr"] = matthews_corrcoef(predictions, labels)
  if key in ("mrpc", "qqp"):
    scores["f1"] = f1_score(predictions, labels)
    scores["acc_and_f1"] = (scores["accuracy"] + scores["f1"]) / 2
  return scores


def _prf(tp, fp, fn):
  """(precision, recall, F1) from counts; each 0 where its denominator is 0 (sklearn's)."""
  precision = tp / (tp + fp) if tp + fp else 0.0
  recall = tp / (tp + fn) if tp + fn else 0.0
  f1 = 2 * tp / (2 * tp + fp + fn) if tp else 0.0
  return float(precision), float(recall), float(f1)


def per_class_scores(predictions, labels, names):
  """Single-label: accuracy, macro-F1 (the unweighted mean over `names`) and each class's
  precision, recall and F1 (`precision_<name>`, ...). predictions, labels: class ids."""
  p, t = np.asarray(predictions), np.asarray(labels)
  scores = {"accuracy": accuracy(p, t)}
  f1s = []
  for i, name in enumerate(names):
    prf = _prf(np.sum((p == i) & (t == i)), np.sum((p == i) & (t != i)),
               np.sum((p != i) & (t == i)))
    scores.update({f"precision_{name}": prf[0], f"recall_{name}": prf[1], f"f1_{name}": prf[2]})
    f1s.append(prf[2])
  scores["macro_f1"] = float(np.mean(f1s)) if f1s else 0.0
  return scores


def multi_label_scores(predictions, labels):
  """Multi-label, from [n, labels] 0/1 arrays: micro-F1 (counts pooled over labels),
  macro-F1 (mean of the labels' F1) and exact match (every label of an example right)."""
  p = np.asarray(predictions).astype(bool)
  t = np.asarray(labels).astype(bool)
  tp, fp, fn = np.sum(p & t, 0), np.sum(p & ~t, 0), np.sum(~p & t, 0)
  macro = [_prf(*counts)[2] for counts in zip(tp, fp, fn)]
  return {"micro_f1": _prf(tp.sum(), fp.sum(), fn.sum())[2],
          "macro_f1": float(np.mean(macro)) if macro else 0.0,
          "exact_match": float(np.mean(np.all(p == t, -1))) if len(p) else 0.0}


def regression_scores(predictions, labels):
  """Pearson, Spearman and mean squared error."""
  p, t = np.asarray(predictions, np.float64), np.asarray(labels, np.float64)
  return {"pearson": pearson(p, t), "spearman": spearman(p, t),
          "mse": float(np.mean((p - t)**2)) if t.size else 0.0}


def _split_tag(tag):
  """(prefix, type): "B-PER" -> ("B", "PER"); BILOU's L/U read as E/S; "O" -> ("O", "");
  a plain label without a scheme prefix ("PER") -> ("I", "PER"), so runs of it are chunks."""
  if tag == "O":
    return "O", ""
  prefix, dash, kind = tag.partition("-")
  if dash and prefix in ("B", "I", "E", "S", "L", "U"):
    return {"L": "E", "U": "S"}.get(prefix, prefix), kind
  return "I", tag


def _chunk_ends(prev, prev_type, tag, kind):
  """conlleval's endOfChunk: the chunk open before this tag ends here."""
  return (prev in ("E", "S") or (prev in ("B", "I") and tag in ("B", "S", "O"))
          or (prev != "O" and prev_type != kind))


def _chunk_starts(prev, prev_type, tag, kind):
  """conlleval's startOfChunk: a chunk starts at this tag."""
  return (tag in ("B", "S") or (prev in ("E", "S", "O") and tag in ("E", "I"))
          or (tag != "O" and prev_type != kind))


def entities(tags):
  """{(type, start, end)} of a tag sequence (end exclusive), by conlleval's chunk rules.

  One definition for every scheme: IOB2/BIO (a chunk starts at `B-X`), IOB1 and IO (also at
  `I-X` after `O` or another type), BIOES/BILOU (`S-X` is a chunk of one, `E-X` ends one),
  and plain labels (a run of one label). Ill-formed sequences, as a model may predict, are
  read as conlleval reads them: an `I-X` or `E-X` after `O` starts a chunk, a change of
  type ends one.
  """
  spans = set()
  prev, prev_type, start = "O", "", None
  for i, tag in enumerate(list(tags) + ["O"]):
    prefix, kind = _split_tag(tag)
    if start is not None and _chunk_ends(prev, prev_type, prefix, kind):
      spans.add((prev_type, start, i))
      start = None
    if _chunk_starts(prev, prev_type, prefix, kind):
      start = i
    prev, prev_type = prefix, kind
  return spans


def entity_scores(true_sequences, predicted_sequences):
  """Entity precision, recall and F1 over sentences, overall and per type (conlleval).

  Returns {"precision", "recall", "f1", "per_type": {type: {precision, recall, f1,
  support}}}; values are fractions (conlleval prints percentages).
  """
  if len(true_sequences) != len(predicted_sequences):
    raise ValueError(f"{len(true_sequences)} true vs {len(predicted_sequences)} predicted "
                     "sentences")
  gold, found = set(), set()
  for i, (t, p) in enumerate(zip(true_sequences, predicted_sequences)):
    if len(t) != len(p):
      raise ValueError(f"sentence {i}: {len(t)} true vs {len(p)} predicted tags")
    gold |= {(i,) + e for e in entities(t)}
    found |= {(i,) + e for e in entities(p)}

  def prf(g, f):
    correct = len(g & f)
    precision = correct / len(f) if f else 0.0
    recall = correct / len(g) if g else 0.0
    f1 = 2 * precision * recall / (precision + recall) if correct else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}

  scores = prf(gold, found)
  types = sorted({e[1] for e in gold | found})
  scores["per_type"] = {
      k: dict(prf({e for e in gold if e[1] == k}, {e for e in found if e[1] == k}),
              support=sum(e[1] == k for e in gold)) for k in types}
  return scores


ONE_CLASS_ADVICE = ("Train longer (--num_train_epochs, more examples) or try another "
                    "--learning_rate: docs/fine-tuning.md#small-data")


def warn_if_one_class(counts, names, where, advice):
  """Warns (absl WARNING) when every prediction fell in one class: a model that learned only
  the majority class (too few steps or examples, or a learning rate that does not suit them).
  `counts` [num_classes]: predictions per class; `names`: the classes' names; `where`: what
  was scored ("dev", "evaluate"); `advice`: what to try. Returns the message, or None."""
  counts = np.asarray(counts)
  total = int(counts.sum())
  if len(counts) < 2 or total < 2 or int(counts.max()) != total:
    return None
  message = (f"{where}: all {total} examples were predicted as {names[int(counts.argmax())]!r}: "
             f"the model has not learned to tell the classes apart (a majority-class model). "
             f"{advice}")
  logging.warning("%s", message)
  return message


def entity_results(true_sequences, predicted_sequences):
  """`entity_scores` as run_ner reports them: entity_precision, entity_recall, entity_f1 and,
  per type, <type>_precision, <type>_recall, <type>_f1, <type>_support (one flat dict).
  A type whose keys are the overall ones (tags B-entity, I-entity) has type_<type>_f1, ...:
  the overall scores (--best_metric's default, entity_f1) stay the overall ones."""
  scores = entity_scores(true_sequences, predicted_sequences)
  flat = {f"entity_{k}": v for k, v in scores.items() if k != "per_type"}
  for kind, values in scores["per_type"].items():
    prefix = f"type_{kind}" if any(f"{kind}_{k}" in flat for k in values) else kind
    flat.update({f"{prefix}_{k}": v for k, v in values.items()})
  return flat


def retrieval_scores(queries, candidates, gold, ks=(1, 10), chunk=1024):
  """Recall@k for each k and MRR@max(k) of ranking `candidates` [m, h] for each query [n, h]
  by cosine similarity; `gold` [n] is the index of each query's right candidate.

  A candidate scoring the same as the right one counts as ranked above it (no lucky ties).
  Queries are scored `chunk` at a time, so n x m never sits in memory at once.
  """
  unit = lambda x: x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)
  queries, candidates = unit(np.asarray(queries, np.float64)), unit(np.asarray(candidates,
                                                                               np.float64))
  gold = np.asarray(gold)
  ranks = []  # 1 = first
  for start in range(0, len(queries), chunk):
    similarity = queries[start:start + chunk] @ candidates.T  # [chunk, m]
    right = similarity[np.arange(len(similarity)), gold[start:start + chunk]]
    ranks.append(np.sum(similarity >= right[:, None], axis=1))  # the right one counts too
  ranks = np.concatenate(ranks) if ranks else np.zeros([0])
  top = max(ks)
  scores = {f"recall@{k}": float(np.mean(ranks <= k)) if ranks.size else 0.0 for k in ks}
  reciprocal = np.where(ranks <= top, 1.0 / ranks, 0.0)
  scores[f"mrr@{top}"] = float(np.mean(reciprocal)) if ranks.size else 0.0
  return scores


def pair_cosines(first, second):
  """cos(first_i, second_i): [n, h], [n, h] -> [n] float64."""
  first, second = np.asarray(first, np.float64), np.asarray(second, np.float64)
  return np.sum(first * second, -1) / np.maximum(
      np.linalg.norm(first, axis=-1) * np.linalg.norm(second, axis=-1), 1e-12)


def similarity_scores(first, second, gold):
  """STS-style: Pearson and Spearman correlation of cos(first_i, second_i) with gold scores."""
  cos = pair_cosines(first, second)
  return {"pearson": pearson(cos, gold), "spearman": spearman(cos, gold)}


def pair_retrieval_scores(first, second, second_texts, ks=(1, 10)):
  """`retrieval_scores` of query/positive pairs: each first text's own second text among all
  the distinct second texts (a text repeated across pairs is one candidate)."""
  index = {}
  gold = [index.setdefault(text, len(index)) for text in second_texts]
  second = np.asarray(second)
  candidates = np.zeros([len(index), second.shape[-1]], second.dtype)
  candidates[gold] = second
  return retrieval_scores(first, candidates, gold, ks)
