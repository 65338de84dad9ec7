"""run_squad's job for `finetuning_runner`: SQuAD JSON -> cached features (or the TFRecords of
`create_squad_data`), the span task, predictions.json / nbest_predictions.json / null_odds.json
as the original writes them, and the official scores (with v2.0's threshold search).

The command-line reference is run_squad's docstring.
"""

import dataclasses
import json
import os
from typing import Optional

from absl import logging
import numpy as np
import tensorflow as tf

from data_prep import tfrecord_io
from data_prep.squad import records as squad_schema
from data_prep.squad import writing as squad_writing
from official_bert.interop import run_record
from official_bert.tasks import squad_postprocess
from official_bert.tasks import squad_scorer
from official_bert.tasks.squad import SquadTask
from official_bert.training import finetuning_runner
from official_bert.training import input_pipeline
from official_bert.training import settings as settings_lib
from official_bert.training.settings import option


@dataclasses.dataclass(frozen=True)
class SquadSettings(settings_lib.FinetuningSettings):
  """SQuAD v1.1 / v2.0: the original's flags."""

  # The answer options a later run on the trained model (its --output_dir, or a new one with
  # it as --init_checkpoint) takes from its run record when not given: it answers as trained
  # (and as its export does).
  RECORDED_FLAGS = ("doc_stride", "max_query_length", "version_2_with_negative", "n_best_size",
                    "max_answer_length", "null_score_diff_threshold")
  RECORDED_MODEL_TYPE = "squad"

  train_file: Optional[str] = option(
      None, "SQuAD JSON for training, or its TFRecord(s) from data_prep.create_squad_data "
      "(comma-separated globs).")
  predict_file: Optional[str] = option(None, "SQuAD JSON to predict on (and score against).")
  predict_feature_file: Optional[str] = option(
      None, "Prediction TFRecord from create_squad_data --is_training=false (its "
      ".meta.jsonl next to it).")
  doc_stride: int = option(128, "Paragraph tokens between window starts.", minimum=1)
  max_query_length: int = option(64, "Question tokens kept.", minimum=1)
  n_best_size: int = option(20, "Candidate answers kept per question (nbest_predictions.json).",
                            minimum=1)
  max_answer_length: int = option(30, "Longest answer, in WordPiece tokens.", minimum=1)
  version_2_with_negative: bool = option(False, "SQuAD 2.0: questions may have no answer.")
  null_score_diff_threshold: float = option(
      0.0, "v2.0: predict no answer if null score - best span score > this.")


_SETTINGS_KEYS = ("vocab_file", "do_lower_case", "max_seq_length", "doc_stride", "max_query_length",
                  "version_2_with_negative", "is_training", "articles")


def _mtime(path):
  return tf.io.gfile.stat(path).mtime_nsec


def _is_json(path):
  return path.lower().endswith(".json")


class SquadJob:
  """SQuAD features, predictions and official scores for `finetuning_runner.run`."""

  def __init__(self, settings):
    self.settings = settings
    self.vocab = None
    self.predict_metadata = None

  def _features(self, json_file, name, is_training):
    """OUTPUT_DIR/name.tf_record for a SQuAD JSON file, reused while the settings match."""
    s = self.settings
    data_settings = squad_writing.Settings(input_file=json_file,
                                           output_file=os.path.join(s.output_dir,
                                                                    f"{name}.tf_record"),
                                           vocab_file=self.vocab,
                                           do_lower_case=s.do_lower_case,
                                           max_seq_length=s.max_seq_length,
                                           doc_stride=s.doc_stride,
                                           max_query_length=s.max_query_length,
                                           version_2_with_negative=s.version_2_with_negative,
                                           is_training=is_training)
    meta = squad_schema.metadata_path(data_settings.output_file)
    if tf.io.gfile.exists(meta) and _mtime(meta) > _mtime(json_file):
      header = squad_schema.read_metadata(meta, header_only=True).header
      source = tf.io.gfile.stat(json_file)
      wanted = dict(data_settings._asdict(), input_size=source.length,
                    input_mtime_nsec=source.mtime_nsec,
                    input_file=os.path.abspath(json_file),
                    vocab_file=os.path.abspath(self.vocab))
      # The input as read: a file replaced under its name (cp -p keeps an older mtime).
      if all(header.get(k) == wanted[k] for k in _SETTINGS_KEYS + (
          "input_file", "input_size", "input_mtime_nsec")):
        found = tfrecord_io.count_records(data_settings.output_file)
        if found == header.get("num_features"):
          logging.info("Reusing %s (same input and settings)", data_settings.output_file)
          return data_settings.output_file
        logging.warning("%s is damaged (%s of %s windows): writing it again",
                        data_settings.output_file, "truncated" if found is None else found,
                        header.get("num_features"))
    squad_writing.run(data_settings)
    return data_settings.output_file

  def _num_examples(self, tfrecord_patterns, is_training):
    """Questions in our TFRecords (from their metadata headers), after checking that they
    were written with this run's settings."""
    paths = input_pipeline.expand_patterns(tfrecord_patterns)
    total, ours = 0, None  # ours: this run's vocabulary fingerprint, read once for all shards
    for path in paths:
      header = squad_schema.read_metadata(squad_schema.metadata_path(path), header_only=True).header
      for key, flag in (("max_seq_length", self.settings.max_seq_length),
                        ("do_lower_case", self.settings.do_lower_case),
                        ("version_2_with_negative",
                         self.settings.version_2_with_negative), ("is_training", is_training)):
        if header.get(key) != flag:
          raise ValueError(f"{path} was written with {key}={header.get(key)}; this run "
                           f"needs {key}={flag}")
      trained = header.get("vocab_sha256")  # (absent in older files)
      if trained and ours is None:
        ours = squad_schema.vocab_fingerprint(self.vocab)
      if trained and trained != ours:
        raise ValueError(f"{path} was written with another vocabulary ({header.get('vocab_file')})"
                         f" than this run's {self.vocab}: its ids would be read as other "
                         "tokens; write it again with this vocabulary")
      total += header["num_examples"]
    return total

  def prepare(self):
    s = self.settings
    if s.max_train_examples:
      raise ValueError("--max_train_examples is not supported by run_squad (use "
                       "create_squad_data --articles)")
    self.vocab = finetuning_runner.vocab_file(s)
    train_file, num_train = None, 0
    if s.do_train:
      if not s.train_file:
        raise ValueError("--do_train needs --train_file")
      train_file = (self._features(s.train_file, "train", True)
                    if _is_json(s.train_file) else s.train_file)
      num_train = self._num_examples(train_file, True)
    predict, dev = {}, {}
    if s.do_eval and not s.predict_file:
      raise ValueError("--do_eval needs --predict_file: the SQuAD JSON whose official scores "
                       "are the evaluation")
    if s.do_predict or s.do_eval:
      if not (s.predict_file or s.predict_feature_file):
        raise ValueError("--do_predict needs --predict_file (or --predict_feature_file)")
      path = s.predict_feature_file or self._features(s.predict_file, "predict", False)
      self._num_examples(path, False)
      self.predict_metadata = squad_schema.read_metadata(squad_schema.metadata_path(path))
      header = self.predict_metadata.header
      made_from = header.get("input_file")
      # An --articles slice is scored against its own file (create_squad_data
      # --output_json_file), which holds exactly its questions.
      sources = [tfrecord_io.absolute(p) for p in (made_from, header.get("slice_file")) if p]
      if (s.predict_file and made_from
          and tfrecord_io.absolute(s.predict_file) not in sources):
        raise ValueError(f"--predict_feature_file={path} was made from {made_from}"
                         + (f" (articles {header['articles']}, written to "
                            f"{header['slice_file']})" if header.get("slice_file") else "")
                         + f", not --predict_file={s.predict_file}: the answers would be "
                         "scored against other questions")
      # --do_eval (and --eval_every_steps): the official scores of these windows' answers.
      dev = {"dev": path} if s.do_eval else {}
      predict = {"predict": path} if s.do_predict else {}
    return finetuning_runner.Data(train_file, num_train, dev, predict)

  def make_task(self, bert_config):
    return SquadTask(bert_config, self.settings.max_seq_length)

  def main_metric(self):
    return "f1"  # the official SQuAD F1

  def run_record(self):
    s = self.settings
    return run_record.RunRecord.of(
        "squad", task="SQuAD", doc_stride=s.doc_stride, max_query_length=s.max_query_length,
        version_2_with_negative=s.version_2_with_negative, n_best_size=s.n_best_size,
        max_answer_length=s.max_answer_length,
        null_score_diff_threshold=s.null_score_diff_threshold)

  def _answers(self, predictions):
    """(predictions, nbest, null_odds) of the original's write_predictions for the logits."""
    from data_prep import tokenization  # pylint: disable=g-import-not-at-top
    s, meta = self.settings, self.predict_metadata
    start = predictions["start_logits"].astype(np.float32)  # [windows, seq]
    end = predictions["end_logits"].astype(np.float32)
    results = {int(u): (s, e) for u, s, e in zip(predictions["unique_ids"], start, end)}
    tokenizer = tokenization.FullTokenizer(self.vocab, s.do_lower_case)
    return squad_postprocess.postprocess(meta.examples, meta.features, results,
                                         tokenizer.split_words_batch, s.n_best_size,
                                         s.max_answer_length, s.version_2_with_negative,
                                         s.null_score_diff_threshold)

  def _slice_ids(self):
    """The question ids of an --articles slice's records (scored alone), else None."""
    meta = self.predict_metadata
    if not meta.header.get("articles"):
      return None
    return {str(example.qas_id) for example in meta.examples}

  def score(self, split, predictions):
    """--do_eval: the official scores (exact match, F1) of the answers to --predict_file."""
    del split
    preds, nbest, null_odds = self._answers(predictions)
    _, scores = _score(self.settings.predict_file, preds, nbest, null_odds, self._slice_ids())
    return {k: v for k, v in scores.items() if isinstance(v, (int, float))}

  def write_predictions(self, split, predictions):
    """Postprocesses the logits, writes the original's files and the official scores; returns
    the paths written."""
    del split
    s, meta = self.settings, self.predict_metadata
    preds, nbest, null_odds = self._answers(predictions)
    out = s.output_dir
    written = [os.path.join(out, "predictions.json"), os.path.join(out, "nbest_predictions.json")]
    squad_postprocess.write_json(preds, written[0])
    squad_postprocess.write_json(nbest, written[1])
    if s.version_2_with_negative:
      written.append(os.path.join(out, "null_odds.json"))
      squad_postprocess.write_json(null_odds, written[-1])
    logging.info("Predictions for %d questions (%d windows)", len(preds),
                 len(predictions["unique_ids"]))
    gold = s.predict_file or meta.header.get("slice_file") or (
        meta.header["input_file"] if not meta.header["articles"] else None)
    if not gold:
      logging.info("No --predict_file to score against (the features are an article slice)")
      return written
    try:
      version, scores = _score(gold, preds, nbest, null_odds, self._slice_ids())
    except squad_scorer.NoGoldAnswersError:
      logging.info("%s has no gold answers: the predictions are not scored", gold)
      return written
    written.append(os.path.join(out, "squad_eval_results.json"))
    tfrecord_io.write_text(written[-1], json.dumps(scores, indent=2))
    logging.info("Official SQuAD %s scores of predictions.json against %s: %s", version, gold,
                 json.dumps(scores))
    if version != "1.1":
      best = scores[THRESHOLD_SEARCH]
      logging.info("Best --null_score_diff_threshold on this data: %s (EM %.2f, F1 %.2f)",
                   best["best_f1_thresh"], best["best_exact"], best["best_f1"])
    return written


THRESHOLD_SEARCH = "null_score_diff_threshold_search"


def _score(gold, preds, nbest, null_odds, only_ids=None):
  """(version, official scores of `preds` against the `gold` file); v2.0 adds the search.
  `only_ids`: score these questions only (an --articles slice's, against the whole file)."""
  version, dataset = squad_scorer.read_dataset(gold)
  if only_ids is not None:
    dataset = [dict(article, paragraphs=[
        dict(p, qas=[qa for qa in p["qas"] if str(qa["id"]) in only_ids])
        for p in article["paragraphs"]]) for article in dataset]
  answered, num_gold = squad_scorer.check_coverage(dataset, preds, gold, "predictions.json")
  if answered != num_gold:
    logging.warning("%s has %d questions, the predictions cover %d", gold, num_gold, answered)
  if version == "1.1":
    return version, squad_scorer.evaluate_v1(dataset, preds)
  # predictions.json already answers "" where the null odds exceed --null_score_diff_
  # threshold: scored as written (the official na_prob_thresh, 1.0 for a probability, would
  # read a span kept at odds over 1 as "no answer").
  scores = squad_scorer.evaluate_v2(dataset, preds, null_odds, na_prob_thresh=float("inf"))
  # The official best_* search runs on predictions.json, where questions over the current
  # threshold already say "": it cannot know what a higher threshold would answer (a model
  # that predicts "" everywhere gets best_f1_thresh 0.0 whatever its spans are worth). Run on
  # every question's best non-null answer (what the threshold lets through) with the same
  # null odds, the search scores each --null_score_diff_threshold exactly.
  answers = {q: next((e["text"] for e in entries if e["text"]), "") for q, entries in nbest.items()}
  search = squad_scorer.evaluate_v2(dataset, answers, null_odds, exact_search=True)
  scores[THRESHOLD_SEARCH] = {
      k: search[k] for k in ("best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh")
  }
  return version, scores
