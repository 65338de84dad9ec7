"""run_ner's job for `finetuning_runner`: CoNLL-2003 or own CoNLL-column files (any tag scheme)
-> cached features, the tagger or feature-based head, entity scores and prediction files.

The command-line reference (files, outputs, the feature-based flags) is run_ner's docstring.
"""

import dataclasses
import os
from typing import Optional

from absl import logging

from data_prep import schema
from data_prep import tfrecord_io
from data_prep.classification import features as classifier_features
from data_prep.tagging import conll
from data_prep.tagging import features as ner_features
from official_bert.interop import model_files
from official_bert.interop import run_record
from official_bert.modeling import layer_selection
from official_bert.tasks import file_splits
from official_bert.tasks import metrics
from official_bert.tasks.tagging import TaggingTask
from official_bert.training import evaluation
from official_bert.training import finetuning_runner
from official_bert.training import settings as settings_lib
from official_bert.training.settings import option


@dataclasses.dataclass(frozen=True)
class NerSettings(settings_lib.OwnFilesSettings):
  """CoNLL-2003 (--data_dir) or own CoNLL-column files, any tag scheme (IO, IOB1, BIO, BIOES,
  plain labels); a one-column test file (tokens only) is predicted only."""

  # A trained tagger given as --init_checkpoint to evaluate or predict into a new --output_dir
  # is read at its recorded --max_seq_length and case (`inherit_run_settings`).
  RECORDED_MODEL_TYPE = ("tagger", "feature_tagger")

  data_dir: Optional[str] = option(None, "Folder with the CoNLL-2003 files (either spelling).")
  token_column: int = option(0, "Column of the token in --train_file/--dev_file/--test_file.")
  tag_column: int = option(-1, "Column of the tag (negative: from the end).")
  feature_based: bool = option(
      False, "The paper's feature-based approach: frozen BERT, chosen layers -> BiLSTM.")
  layers: tuple = option(("-1", "-2", "-3", "-4"),
                         "Layers the feature-based model reads: -1 = last, 'embeddings', 'all'.")
  combine: str = option("concat", "How the chosen layers are combined (weighted: learned "
                        "softmax weights; last: the topmost one).",
                        choices=layer_selection.COMBINE_MODES)
  lstm_units: int = option(768, "Units per direction of the feature-based BiLSTM.", minimum=1)
  lstm_layers: int = option(2, "BiLSTM layers of the feature-based model.", minimum=1)


LABELS = list(conll.CONLL2003_LABELS)


def _stored_head_config(output_dir):
  """The head_config of the feature-based run in `output_dir` (its head_config.json), or None."""
  path = model_files.head_config_beside(output_dir)
  return model_files.read_head_config(path) if path else None


class NerJob:
  """CoNLL data, entity scores and prediction files for `finetuning_runner.run`."""

  def __init__(self, settings, tags=None):
    """tags: own files' tag set in id order (a distilled student's: its teacher's), instead of
    the training file's."""
    self.settings = settings
    self.sentences = {}
    self.windows = {}
    self.own_files = file_splits.uses_own_files(settings)
    self.labels = LABELS
    self.tags = list(tags) if tags else None

  def _path(self, split):
    s = self.settings
    if not self.own_files:
      if not s.data_dir:
        raise ValueError("--data_dir (CoNLL-2003) or --train_file/--dev_file/--test_file "
                         "(your own files) is required")
      return conll.split_path(s.data_dir, split)
    path = getattr(s, file_splits.FILE_FLAGS[split])
    if not path:
      raise ValueError(f"--{file_splits.FILE_FLAGS[split]} is required for "
                       f"--{file_splits.DO_FLAGS[split]}")
    return path

  def _read(self, split):
    s = self.settings
    if not self.own_files:
      return conll.read_conll(self._path(split), LABELS)
    return conll.read_conll(self._path(split), self.labels, s.tag_column, s.token_column,
                            to_iob2=False, allow_untagged=split == "test")

  def _own_labels(self):
    """Own files: the training file's tags (written to OUTPUT_DIR/labels.txt; a rare one is
    warned of, `file_splits.warn_rare_labels`), or those of the run in --output_dir."""
    s = self.settings
    if self.tags:
      finetuning_runner.check_trained_labels(s, self.tags, "the teacher's tags")
      model_files.write_labels(s.output_dir, self.tags)
      return self.tags
    if s.train_file:
      sentences = conll.read_conll(s.train_file, None, s.tag_column, s.token_column,
                                   to_iob2=False)
      if not sentences:
        raise ValueError(f"{s.train_file}: no sentences")
      labels = conll.tag_set(sentences)
      tags = [tag for sentence in sentences for tag in sentence.tags]
      file_splits.warn_rare_labels(tags, [s.train_file] * len(tags), unit="training tokens")
      finetuning_runner.check_trained_labels(s, labels, f"--train_file={s.train_file}")
      model_files.write_labels(s.output_dir, labels)
      return labels
    labels = finetuning_runner.trained_labels(s, ("tagger", "feature_tagger"))
    if labels is None:
      raise ValueError(f"no --train_file, and no tags of a trained model in --output_dir="
                       f"{s.output_dir} or --init_checkpoint (its "
                       f"{model_files.RUN_SETTINGS_FILE} or {model_files.LABELS_FILE}): the tag "
                       f"set is unknown")
    return labels

  def _write(self, split, vocab):
    s = self.settings
    path = self._path(split)
    sentences = self._read(split)
    if not sentences:
      raise ValueError(f"{path}: no sentences")
    if split == "train":
      sentences = classifier_features.subsample(sentences, s.max_train_examples, s.random_seed)
    self.sentences[split] = sentences
    key = classifier_features.source_key(
        path, vocab, s.do_lower_case, s.max_seq_length, len(sentences), s.random_seed,
        labels=self.labels, columns=[s.token_column, s.tag_column] if self.own_files else None)
    # A file to predict has no tags: the features carry a placeholder (never scored).
    tagged = [x if x.tags is not None else conll.Sentence(x.words, [self.labels[0]] * len(
        x.words)) for x in sentences]

    def build():
      tokenizer = classifier_features.cached_tokenizer(vocab, s.do_lower_case)
      columns, windows = ner_features.convert_sentences(tagged, self.labels, s.max_seq_length,
                                                        tokenizer)
      return schema.ner_features(s.max_seq_length), columns, {"windows": windows}

    record = os.path.join(s.output_dir, f"{split}.tf_record")
    meta = classifier_features.cached_tfrecord(record, key, build)
    self.windows[split] = meta["windows"]
    return record, meta["num_examples"]

  def prepare(self):
    if self.own_files:
      self.labels = self._own_labels()
      logging.info("Tags (%d): %s", len(self.labels), " ".join(self.labels))
    return finetuning_runner.prepare_splits(self.settings, self._write)

  def make_task(self, bert_config):
    s = self.settings
    head_config = None
    stored = _stored_head_config(s.output_dir)
    if not s.feature_based and stored and model_files.latest_checkpoint(s.output_dir):
      # The run in --output_dir was feature-based: evaluate/predict/resume it as such.
      logging.info("%s: the model in --output_dir is feature-based (%s)",
                   model_files.HEAD_CONFIG_FILE, stored)
      head_config = stored
    elif s.feature_based:
      layers = layer_selection.parse_layers(s.layers, bert_config.num_hidden_layers)
      head_config = {"layers": sorted(layers), "combine": s.combine, "lstm_units": s.lstm_units,
                     "lstm_layers": s.lstm_layers}
      logging.info("Feature-based: frozen encoder, %s combined by %s -> %d-layer BiLSTM (%d "
                   "units)", layer_selection.describe(sorted(layers),
                                                      bert_config.num_hidden_layers),
                   s.combine, s.lstm_layers, s.lstm_units)
      model_files.write_head_config(s.output_dir, head_config)
    return TaggingTask(bert_config, len(self.labels), s.max_seq_length,
                       head_config=head_config)

  def main_metric(self):
    return "entity_f1"

  def run_record(self):
    """For OUTPUT_DIR/run_settings.json (export's defaults; the tags in id order)."""
    feature_based = _stored_head_config(self.settings.output_dir) is not None
    return run_record.RunRecord.of("feature_tagger" if feature_based else "tagger", task="NER",
                                   labels=list(self.labels), num_labels=len(self.labels))

  def _tags(self, split, predictions):
    return ner_features.predictions_to_tags(predictions["logits"], predictions["label_weights"],
                                            self.windows[split], self.sentences[split],
                                            self.labels)

  def score(self, split, predictions):
    if any(x.tags is None for x in self.sentences[split]):
      return {}  # a file without tags: predictions only
    return metrics.entity_results([s.tags for s in self.sentences[split]],
                                  self._tags(split, predictions))

  def write_predictions(self, split, predictions):
    tags = self._tags(split, predictions)
    lines = []
    for sentence, predicted in zip(self.sentences[split], tags):
      if sentence.tags is None:  # `word predicted`
        lines.extend(f"{w} {p}\n" for w, p in zip(sentence.words, predicted))
      else:  # `word gold predicted`: conlleval's input
        lines.extend(
            f"{w} {g} {p}\n" for w, g, p in zip(sentence.words, sentence.tags, predicted))
      lines.append("\n")
    out = self.settings.output_dir
    path = os.path.join(out, f"{split}_predictions.txt")
    tfrecord_io.write_text(path, "".join(lines))
    # `score`'s {}: a file without tags, predicted only (no results file).
    scores = self.score(split, predictions) or None
    return [path] + evaluation.write_split_results(out, split, scores)
