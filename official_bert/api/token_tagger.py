"""`TokenTagger`: named-entity (token) tagging, as `run_ner`, on word lists and raw text.

  tagger = ob.TokenTagger.from_preset(path, labels=["O", "B-PER", "I-PER", ...])
  tagger.fit(x=[["John", "lives", "in", "Paris"], ...], y=[["B-PER", "O", "O", "B-LOC"], ...])
  tagger.predict_tags([["Mary", "left"]])        # [["B-PER", "O"]]
  tagger.predict_entities(["Mary left Berlin."])  # [[{"type": "PER", "text": "Mary",
                                                  #    "start": 0, "end": 4}, ...]]

Words become features exactly as `run_ner` writes them (`data_prep.tagging.features`: the
label on each word's first piece, windows of whole words), and the loss is `run_ner`'s
(`tasks.tagging`). `predict_entities` splits raw text into words where the BERT tokenizer
does (whitespace, punctuation, CJK characters), keeping each word's character offsets, and
reads entities with conlleval's chunk rules for any tag scheme `run_ner` reads (IOB1, IOB2,
BIOES, BILOU, plain labels): `text[start:end]` is the entity's text.
"""

import keras
import numpy as np
import tensorflow as tf

from data_prep import tokenization
from data_prep import unicode_classes
from data_prep.pretraining import chinese_words
from data_prep.tagging import conll
from data_prep.tagging import features as ner_features
from official_bert.api import presets
from official_bert.api import task_model
from official_bert.api.backbone import Backbone
from official_bert.api.preprocessor import Preprocessor
from official_bert.modeling.finetuning_models import BertTokenClassifier
from official_bert.tasks import metrics
from official_bert.tasks.tagging import TaggingTask


def words_with_offsets(text):
  """[(word, start, end)]: the BERT basic tokenizer's words with code-point offsets."""
  words, start = [], None
  for i, char in enumerate(text + " "):
    if unicode_classes.is_control(char):
      continue  # deleted by the tokenizer (a soft hyphen joins, it does not split)
    own = unicode_classes.is_punctuation(char) or chinese_words.is_cjk(char)
    if unicode_classes.is_whitespace(char) or own:
      if start is not None:
        words.append((text[start:i], start, i))
        start = None
      if own:
        words.append((char, i, i + 1))
    elif start is None:
      start = i
  return words


def entities_in_text(text, words, tags):
  """[{"type", "text", "start", "end"}] of `text` from its `words_with_offsets` and their
  tags (conlleval's chunks), in order."""
  found = sorted(metrics.entities(tags), key=lambda entity: entity[1])
  return [{"type": kind, "text": text[words[a][1]:words[b - 1][2]], "start": words[a][1],
           "end": words[b - 1][2]} for kind, a, b in found]


@keras.saving.register_keras_serializable(package="official_bert")
class TokenTagger(task_model.TaskModel):
  """Args: a `Backbone`, a `Preprocessor` (its vocabulary, case and sequence length), the
  tag set in id order (run_ner's labels.txt order)."""

  model_type = "tagger"

  def __init__(self, backbone, preprocessor, labels, **kwargs):
    labels = [str(label) for label in labels or []]
    if not labels or len(set(labels)) != len(labels):
      raise ValueError(f"TokenTagger needs labels=[...] without duplicates, got {labels}")
    network = BertTokenClassifier(backbone, len(labels), name="tagger")
    task = TaggingTask(backbone.bert_config, len(labels), preprocessor.sequence_length)
    super().__init__(network, preprocessor, task, **kwargs)
    # Tokens, not [CLS]'s pooler, feed the head: it gets no gradient (as in run_ner/run_squad).
    backbone.pooler_dense.trainable = False
    self.labels = labels
    self.tokenizer = tokenization.FullTokenizer(preprocessor.vocab_file,
                                                    preprocessor.lower_case)

  @classmethod
  def from_preset(cls, path, labels=None, sequence_length=None, **kwargs):
    """Any model folder; a run_ner OUTPUT_DIR (or a saved TokenTagger) brings its labels
    and loads its head."""
    preset = presets.load(path)
    stored = preset.run_settings if preset.run_settings.get("model_type") == "tagger" else {}
    if stored and labels is not None and list(map(str, labels)) != list(preset.labels or []):
      raise ValueError(f"labels={list(labels)} but {path} was trained with labels "
                       f"{preset.labels} (in that order): leave labels out to use its head, or "
                       f"start from the model it was fine-tuned from")
    fine_tuned = bool(stored)
    labels = preset.labels if fine_tuned else labels
    sequence_length = sequence_length or stored.get("max_seq_length") or 128
    backbone = Backbone.from_bert_config(preset.config, name="encoder")
    preprocessor = Preprocessor(preset.vocab_file, preset.do_lower_case, sequence_length)
    model = cls(backbone, preprocessor, labels, **kwargs)
    presets.assign(model.network, preset, require_heads=fine_tuned)
    return model

  def _sentences(self, x, y=None):
    if isinstance(x, str) or (len(x) and isinstance(x[0], str)):
      raise ValueError("x: a list of word lists (one list of words per sentence); for raw "
                       "text use predict_entities")
    x = [list(words) for words in x]
    if y is None:
      return [conll.Sentence(words, [self.labels[0]] * len(words)) for words in x]
    y = [list(tags) for tags in y]
    if len(y) != len(x):
      raise ValueError(f"y has {len(y)} tag lists for {len(x)} sentences")
    for i, (words, tags) in enumerate(zip(x, y)):
      if len(words) != len(tags):
        raise ValueError(f"sentence {i}: {len(words)} words but {len(tags)} tags")
      unknown = sorted(set(tags) - set(self.labels))
      if unknown:
        raise ValueError(f"sentence {i}: tag(s) {unknown} not in labels {self.labels}")
    return [conll.Sentence(words, tags) for words, tags in zip(x, y)]

  def _features(self, sentences):
    cols, spans = ner_features.convert_sentences(sentences, self.labels,
                                                 self.preprocessor.sequence_length,
                                                 self.tokenizer)
    inputs = {"input_word_ids": cols["input_ids"].astype(np.int32),
              "input_mask": cols["input_mask"].astype(np.int32),
              "input_type_ids": cols["segment_ids"].astype(np.int32)}
    return inputs, cols["label_ids"].astype(np.int32), cols["label_weights"], spans

  def make_dataset(self, x, y=None, batch_size=32, shuffle=False, seed=None):
    inputs, label_ids, label_weights, _ = self._features(self._sentences(x, y))
    if y is None:
      return task_model.batches((inputs,), batch_size, False, None)
    return task_model.batches((inputs, label_ids, label_weights), batch_size, shuffle, seed)

  def map_batches(self, dataset):
    raise ValueError("TokenTagger takes word lists (x) and tag lists (y), not a Dataset")

  def loss_features(self, x, y, sample_weight):
    return {"label_ids": y, "label_weights": sample_weight}

  def predict(self, x, batch_size=32, **kwargs):
    """Per-piece probabilities [windows, sequence_length, labels] of the word lists' features
    (one row per window, as run_ner's records)."""
    logits = self.predict_logits(x, batch_size, **kwargs)
    return tf.nn.softmax(logits, axis=-1).numpy()

  def predict_tags(self, x, batch_size=32):
    """One tag per word, read at each word's first piece (run_ner's predictions)."""
    sentences = self._sentences(x)
    if not sentences:
      return []
    inputs, _, label_weights, spans = self._features(sentences)
    logits = keras.Model.predict(self, task_model.batches((inputs,), batch_size, False, None),
                                 verbose=0)
    return ner_features.predictions_to_tags(logits, label_weights, spans, sentences,
                                            self.labels)

  def predict_entities(self, texts, batch_size=32):
    """For each raw text, its entities: {"type", "text", "start", "end"} (code points, end
    exclusive), in order."""
    if isinstance(texts, str):
      texts = [texts]
    words = [words_with_offsets(t) for t in texts]
    tags = self.predict_tags([[w for w, _, _ in ws] for ws in words], batch_size)
    return [entities_in_text(text, ws, ts) for text, ws, ts in zip(texts, words, tags)]

  def get_config(self):
    return dict(super().get_config(), labels=self.labels)

  def run_settings(self):
    return dict(super().run_settings(), labels=self.labels)

  def export_arguments(self, options):
    return dict(super().export_arguments(options), label_names=self.labels)
