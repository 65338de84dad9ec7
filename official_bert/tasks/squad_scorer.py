"""The official SQuAD v1.1 and v2.0 scores (`python -m official_bert.squad_evaluate`).

The version is read from the data file ("version": "1.1" or "v2.0"); the output is the
official JSON: {"exact_match", "f1"} for v1.1; {"exact", "f1", "total", "HasAns_*",
"NoAns_*"} plus, with --na-prob-file, "best_exact", "best_exact_thresh", "best_f1",
"best_f1_thresh" for v2.0.

Definitions, as evaluate-v1.1.py / evaluate-v2.0.py:
  - answers are normalized: lower case, punctuation (string.punctuation) removed, the
    articles a/an/the removed, whitespace collapsed;
  - EM and token-F1 take the max over the gold answers;
  - v1.1: a question without a prediction scores 0;
  - v2.0: gold answers that normalize to "" are dropped, leaving [""] (no answer) if none
    remain; F1 is 1 when both prediction and gold are empty, 0 when only one is; a question
    whose na_prob exceeds --na-prob-thresh counts as predicting no answer; the best
    threshold is searched over the na_probs (null_odds.json from run_squad works as is).
    A question without a prediction is left out (the official script crashes on it).
"""

import collections
import json
import re
import string
import sys

import tensorflow as tf

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(s):
  """Lower text and remove punctuation, articles and extra whitespace (official)."""
  s = "".join(ch for ch in s.lower() if ch not in _PUNCTUATION)
  return " ".join(_ARTICLES.sub(" ", s).split())


# ---- v1.1 -------------------------------------------------------------------------------

def _token_f1(pred_toks, gold_toks):
  """F1 of the bag-of-tokens overlap, 0 without any (both official scripts' core)."""
  num_same = sum((collections.Counter(pred_toks) & collections.Counter(gold_toks)).values())
  if num_same == 0:
    return 0
  precision, recall = num_same / len(pred_toks), num_same / len(gold_toks)
  return 2 * precision * recall / (precision + recall)


def f1_v1(prediction, ground_truth):
  return _token_f1(normalize_answer(prediction).split(), normalize_answer(ground_truth).split())


def exact_v1(prediction, ground_truth):
  return normalize_answer(prediction) == normalize_answer(ground_truth)


class NoGoldAnswersError(ValueError):
  """A data file whose questions carry no gold answers (a file to predict, not to score)."""


def _scored_questions(dataset, version):
  """[(question id as a string, its qa dict)] of the questions with gold answers: an
  "answers" list, non-empty in v1.1 (in v2.0 an empty one is the no-answer gold). Ids are
  compared as strings, as predictions.json's keys are (a file may give ints)."""
  scored = [(str(qa["id"]), qa) for article in dataset for p in article["paragraphs"]
            for qa in p["qas"] if isinstance(qa.get("answers"), list)
            and (qa["answers"] or version != "1.1")]
  if not scored:
    raise NoGoldAnswersError("its questions have no gold answers: nothing to score")
  return scored


def evaluate_v1(dataset, predictions):
  """dataset: the file's "data" list; predictions: qas_id -> text. Questions without gold
  answers are not scored."""
  f1 = exact_match = total = 0
  for qid, qa in _scored_questions(dataset, "1.1"):
    total += 1
    if qid not in predictions:
      print(f"Unanswered question {qid} will receive score 0.", file=sys.stderr)
      continue
    golds = [a["text"] for a in qa["answers"]]
    pred = predictions[qid]
    exact_match += max(exact_v1(pred, g) for g in golds)
    f1 += max(f1_v1(pred, g) for g in golds)
  return {"exact_match": 100.0 * exact_match / total, "f1": 100.0 * f1 / total}


# ---- v2.0 -------------------------------------------------------------------------------

def _tokens(s):
  return normalize_answer(s).split() if s else []


def exact_v2(gold, pred):
  return int(normalize_answer(gold) == normalize_answer(pred))


def f1_v2(gold, pred):
  gold_toks, pred_toks = _tokens(gold), _tokens(pred)
  if not gold_toks or not pred_toks:
    return int(gold_toks == pred_toks)  # no-answer: 1 if both are, else 0
  return _token_f1(pred_toks, gold_toks)


def _raw_scores_v2(dataset, predictions):
  exact, f1, has_ans = {}, {}, {}
  missing = 0
  for qid, qa in _scored_questions(dataset, "v2.0"):
    if qid not in predictions:
      missing += 1
      continue
    has_ans[qid] = bool(qa["answers"])
    golds = [a["text"] for a in qa["answers"] if normalize_answer(a["text"])] or [""]
    exact[qid] = max(exact_v2(g, predictions[qid]) for g in golds)
    f1[qid] = max(f1_v2(g, predictions[qid]) for g in golds)
  if missing:
    print(f"{missing} question(s) without a prediction are left out", file=sys.stderr)
  return exact, f1, has_ans


def _summary(exact, f1, qids):
  total = len(qids)
  return {"exact": 100.0 * sum(exact[q] for q in qids) / total,
          "f1": 100.0 * sum(f1[q] for q in qids) / total, "total": total}


def best_threshold(predictions, scores, na_probs, has_ans, exact=False):
  """(best score in %, threshold): the official `find_best_thresh`.

  Start with every question answered "no answer" (score = number of NoAns questions), then
  answer questions in increasing na_prob order: a HasAns question adds its score, a NoAns
  one with a non-empty prediction loses 1. Worked example: na_probs q1 0.1 (HasAns,
  F1 1), q2 0.5 (NoAns, predicted "x"), q3 0.9 (HasAns, F1 0.5): scores 1 -> 2 (q1)
  -> 1 (q2) -> 1.5 (q3); the best, 2 of 3, is at threshold 0.1 -> (66.7, 0.1).

  The official search assumes probabilities (>= 0: "no answer" everywhere at 0.0) and may
  stop inside a run of equal values. `exact`: a threshold that gives the score it reports
  for any values (null score differences, often negative): below the smallest where
  answering nothing wins, and only after every question of equal value (a threshold answers
  all of them or none).
  """
  score = best = sum(1 for q in has_ans if not has_ans[q])
  ordered = [q for q in sorted(na_probs, key=lambda k: na_probs[k]) if q in scores]
  thresh = 0.0
  if exact and ordered:
    thresh = min(0.0, float(na_probs[ordered[0]]) - 1.0)
  for i, qid in enumerate(ordered):
    score += scores[qid] if has_ans[qid] else (-1 if predictions[qid] else 0)
    tied_next = exact and i + 1 < len(ordered) and na_probs[ordered[i + 1]] == na_probs[qid]
    if score > best and not tied_next:
      best, thresh = score, na_probs[qid]
  return 100.0 * best / len(scores), thresh


def evaluate_v2(dataset, predictions, na_probs=None, na_prob_thresh=1.0, exact_search=False):
  """The official v2.0 dict; best-threshold keys only when `na_probs` is given (the
  official search, or with `exact_search` one whose thresholds give the scores reported:
  `best_threshold`)."""
  exact_raw, f1_raw, has_ans = _raw_scores_v2(dataset, predictions)
  if not exact_raw:
    raise ValueError("no question of the data file has a prediction")
  probs = na_probs if na_probs is not None else {k: 0.0 for k in predictions}
  missing = [q for q in exact_raw if q not in probs]
  if missing:
    raise ValueError(f"{len(missing)} predicted question(s) have no na_prob, e.g. "
                     f"{missing[0]}")

  def thresholded(raw):  # predicting "no answer" when na_prob > threshold
    return {q: float(not has_ans[q]) if probs[q] > na_prob_thresh else s
            for q, s in raw.items()}

  exact, f1 = thresholded(exact_raw), thresholded(f1_raw)
  out = _summary(exact, f1, list(exact))
  for prefix, wanted in (("HasAns", True), ("NoAns", False)):
    qids = [q for q in exact if has_ans[q] == wanted]
    if qids:
      out.update({f"{prefix}_{k}": v for k, v in _summary(exact, f1, qids).items()})
  if na_probs is not None:
    # Only over the predicted questions, so every counted question has a score.
    answered = {q: has_ans[q] for q in exact_raw}
    probs = {q: p for q, p in na_probs.items() if q in answered}
    out["best_exact"], out["best_exact_thresh"] = best_threshold(predictions, exact_raw,
                                                                 probs, answered, exact_search)
    out["best_f1"], out["best_f1_thresh"] = best_threshold(predictions, f1_raw, probs,
                                                           answered, exact_search)
  return out


# ---- files ------------------------------------------------------------------------------

def read_dataset(path):
  """(version "1.1" or "v2.0", data list); ValueError naming the file on bad input."""
  # The reader's checks and version detection; data_prep imports no official_bert.
  from data_prep.squad import reader as squad_reader
  dataset = squad_reader.load_json(path)
  return squad_reader.file_version(dataset, path), dataset["data"]


def _read_json_object(path, what):
  if tf.io.gfile.isdir(path):
    raise ValueError(f"{path}: is a folder, not a {what} file")
  try:
    with tf.io.gfile.GFile(path, "r") as f:
      value = json.load(f)
  except (FileNotFoundError, tf.errors.NotFoundError):
    raise ValueError(f"{path}: {what} file not found") from None
  except json.JSONDecodeError as e:
    raise ValueError(f"{path}: malformed JSON at line {e.lineno} column {e.colno}: "
                     f"{e.msg}") from None
  if not isinstance(value, dict):
    raise ValueError(f"{path}: {what} must be a JSON object (question id -> value)")
  return value


# Below this share of questions with a prediction, the predictions are almost surely of
# another data file (or a run that failed): the scores would be ~0 and mean nothing.
MIN_COVERAGE = 0.5


def check_coverage(dataset, predictions, data_file, prediction_file, strict=False):
  """Warns (ValueError with `strict`) when the predictions answer under MIN_COVERAGE of the
  questions of `dataset`; returns (answered, total)."""
  ids = [str(qa["id"]) for article in dataset for p in article["paragraphs"] for qa in p["qas"]]
  answered = sum(1 for qid in ids if qid in predictions)
  if ids and answered < MIN_COVERAGE * len(ids):
    message = (f"{prediction_file} answers only {answered} of the {len(ids)} questions of "
               f"{data_file}: predictions of another data file? The scores below are "
               "meaningless")
    if strict:
      raise ValueError(message)
    print("WARNING: " + message, file=sys.stderr)
  return answered, len(ids)


def evaluate_files(data_file, prediction_file, na_prob_file=None, na_prob_thresh=1.0,
                   strict=False):
  version, dataset = read_dataset(data_file)
  try:
    _scored_questions(dataset, version)
  except NoGoldAnswersError as e:
    raise NoGoldAnswersError(f"{data_file}: {e}") from None
  predictions = _read_json_object(prediction_file, "predictions")
  _check_values(predictions, prediction_file, str, "an answer text (predictions.json, not "
                "nbest_predictions.json)")
  check_coverage(dataset, predictions, data_file, prediction_file, strict)
  if version == "1.1":
    return evaluate_v1(dataset, predictions)
  na_probs = _read_json_object(na_prob_file, "na-prob") if na_prob_file else None
  if na_probs is not None:
    _check_values(na_probs, na_prob_file, (int, float), "a probability (null_odds.json)")
  return evaluate_v2(dataset, predictions, na_probs, na_prob_thresh)


def _check_values(values, path, kind, what):
  """ValueError naming `path` and the first question id whose value is not `kind`."""
  bad = next((k for k, v in values.items()
              if not isinstance(v, kind) or isinstance(v, bool)), None)
  if bad is not None:
    raise ValueError(f"{path}: the value of {bad!r} is {json.dumps(values[bad])[:80]}, not "
                     f"{what}")
