"""`TokenTagger`: named-entity (token) tagging, as `run_ner`, on word lists and raw text.

  tagger = ob.TokenTagger.from_preset(path, labels=["O", "B-PER", "I-PER", ...])
  tagger.fit(x=[["John", "lives", "in", "Paris"], ...], y=[["B-PER", "O", "O", "B-LOC"], ...])
  tagger.evaluate(x, y, return_dict=True)  # loss, token_accuracy, entity_precision/recall/f1
  tagger.predict_tags([["Mary", "left"]])        # [["B-PER", "O"]]
  tagger.predict_entities(["Mary left Berlin."])  # [[{"type": "PER", "text": "Mary",
                                                  #    "start": 0, "end": 4}, ...]]

Words become features exactly as `run_ner` writes them (`data_prep.tagging.features`: the
label on each word's first piece, windows of whole words), the loss is `run_ner`'s
(`tasks.tagging`) and so are the entity scores `evaluate` adds (`metrics.entity_results`,
over the whole set). Entities are read with conlleval's chunk rules for any tag scheme
`run_ner` reads (IOB1, IOB2, BIOES, BILOU, plain labels).

`predict_entities` takes raw text, which `words_with_offsets` splits into words as
CoNLL-2003's (Penn Treebank) tokenization does, keeping each word's character offsets
(`text[start:end]` is the entity's text), or word lists, as CoNLL's files hold them.
"""

import re

import keras
import numpy as np
import tensorflow as tf

from data_prep import tokenization
from data_prep import unicode_classes
from data_prep.pretraining import chinese_words
from data_prep.tagging import conll
from data_prep.tagging import features as ner_features
from official_bert.api import task_model
from official_bert.modeling.finetuning_models import BertTokenClassifier
from official_bert.tasks import metrics
from official_bert.tasks.distillation import UNLABELED
from official_bert.tasks.tagging import TaggingTask

# --- raw text -> words, as CoNLL-2003 splits them -----------------------------------------

HYPHENS = "-\u2010\u2011"
APOSTROPHES = "'\u2019"
CLITICS = ("s", "re", "ve", "ll", "d", "m")  # 's 're 've 'll 'd 'm, split off; and n't
# Words whose final period is theirs, not the sentence's (as written, and in capitals).
_ABBREVIATIONS = """
    Mr Mrs Ms Dr Prof Rev Hon Jr Sr St Mt Ft Gen Lt Col Maj Capt Sgt Cpl Adm Cmdr Gov Sen Rep
    Pres Messrs Mme Mlle Inc Corp Co Cos Ltd Bros Plc Pty Assn Dept Univ Ave Blvd Rd No Nos
    Vol Fig Ph.D Jan Feb Mar Apr Jun Jul Aug Sep Sept Oct Nov Dec Ala Ariz Ark Calif Colo
    Conn Del Fla Ga Ill Ind Kan Ky La Md Mich Minn Mo Mont Neb Nev Okla Ore Pa Tenn Tex Va Vt
    Wash Wis Wyo""".split()
ABBREVIATIONS = frozenset(_ABBREVIATIONS + [a.upper() for a in _ABBREVIATIONS] +
                          "vs etc al cf approx viz".split())
# The entity scores every form of `evaluate`'s results has (its dict has those per type too).
ENTITY_KEYS = ("entity_precision", "entity_recall", "entity_f1")
_INITIALS = re.compile(r"(?:[^\W\d_]\.)+[^\W\d_]")  # U.S, a.m, e.g: letters and dots


def is_abbreviation(word):
  """Whether `word` + "." is one word: U.S., a.m., an initial (J.), Inc., Aug., vs., ..."""
  word = re.split(f"[{HYPHENS}]", word)[-1]  # then-U.S.
  return (word in ABBREVIATIONS or _INITIALS.fullmatch(word) is not None
          or (len(word) == 1 and word.isupper()))


def words_with_offsets(text):
  """[(word, start, end)]: `text` split into words as CoNLL-2003's tokens are, with code-point
  offsets (`text[start:end] == word`).

  Whitespace separates words; punctuation is a word of its own (as the BERT tokenizer
  splits), except inside CoNLL's words: a hyphen between words (Ana-María, 1996-08-22,
  U.S.-led), an apostrophe between letters (O'Neil, D'Alema), a period inside a word
  (U.S, Amazon.com) or ending an abbreviation (U.S., Inc., J., see `is_abbreviation`), a
  comma, colon, slash or period between digits (1,000.5, 10:30, 1/2), a leading sign or
  decimal point (+44, .500), an ampersand between letters (AT&T), a currency's letters ($
  after up to 3 capitals: US$, C$), runs of periods or hyphens (..., --), and a number
  with its period starting a line (a numbered list's "1. Smith"). Clitics are
  split off as in the Penn Treebank: John's -> John 's, don't -> do n't (they're, we've,
  he'll, I'd, I'm alike). CJK characters are words of one character; control characters
  (a soft hyphen) neither split nor start a word.
  """
  kept = [(i, char) for i, char in enumerate(text) if not unicode_classes.is_control(char)]
  clean = "".join(char for _, char in kept)
  # Parts: runs of word characters ("w"), single punctuation ("p") and CJK ("c") characters;
  # a chunk is a run of parts with no whitespace between them.
  chunks, gap = [], True
  for k, char in enumerate(clean):
    if unicode_classes.is_whitespace(char):
      gap = True
      continue
    kind = ("p" if unicode_classes.is_punctuation(char) else
            "c" if chinese_words.is_cjk(char) else "w")
    if gap:
      chunks.append([])
    if kind == "w" and not gap and chunks[-1][-1][0] == "w":
      chunks[-1][-1][2] = k + 1
    else:
      chunks[-1].append([kind, k, k + 1])
    gap = False
  spans, end = [], 0
  for parts in chunks:
    first, start = parts[0], parts[0][1]
    if (len(parts) == 2 and first[0] == "w" and clean[start:first[2]].isdigit()
        and first[2] - start <= 3 and clean[parts[1][1]] == "."
        and (end == 0 or "\n" in clean[end:start] or "\r" in clean[end:start])):
      spans.append([start, parts[1][2]])  # a numbered list's "1." starting a line
    else:
      spans.extend(_chunk_words(clean, parts))
    end = parts[-1][2]
  return [(text[kept[a][0]:kept[b - 1][0] + 1], kept[a][0], kept[b - 1][0] + 1)
          for a, b in spans]


def _chunk_words(s, parts):
  """[start, end] spans in `s` of the words of one whitespace-free chunk's parts."""
  words = []
  i, n = 0, len(parts)
  while i < n:
    kind, a, b = parts[i]
    if kind != "p":
      words.append([a, b])
      i += 1
      continue
    char = s[a]
    after = parts[i + 1] if i + 1 < n else None
    left_w = i > 0 and parts[i - 1][0] == "w"  # the word before ends with letters/digits
    # U.S.-led: a word that ends with its own period joins a hyphen too.
    left_word = left_w or (i > 0 and s[a - 1] == "." and words[-1][0] < a - 1
                           and not unicode_classes.is_punctuation(s[words[-1][0]]))
    right_w = after is not None and after[0] == "w"
    if char in ".-" and after is not None and after[0] == "p" and s[after[1]] == char:
      j = i + 1  # "...", "--", "---"
      while j + 1 < n and parts[j + 1][0] == "p" and s[parts[j + 1][1]] == char:
        j += 1
      words.append([a, parts[j][2]])
      i = j + 1
      continue
    if right_w and ((char in HYPHENS and left_word) or (char in ".&" and left_w) or (
        char in ",:/." and left_w and s[a - 1].isdigit() and s[b].isdigit())):
      words[-1][1] = after[2]  # one word across the connector
      i += 2
      continue
    if char in APOSTROPHES and left_w and right_w:
      right = s[after[1]:after[2]].lower()
      if right in CLITICS:  # John 's
        words.append([a, after[2]])
      elif right == "t" and s[a - 1] in "nN" and a - 1 > words[-1][0]:  # do n't
        words[-1][1] = a - 1
        words.append([a - 1, after[2]])
      else:  # O'Neil
        words[-1][1] = after[2]
      i += 2
      continue
    if left_w and ((char == "." and is_abbreviation(s[words[-1][0]:a])) or (
        char == "$" and s[words[-1][0]:a].isalpha() and s[words[-1][0]:a].isupper()
        and a - words[-1][0] <= 3)):
      words[-1][1] = b  # U.S. Inc. C$
      i += 1
      continue
    if char in ".+" and not left_w and right_w and s[b].isdigit():  # .500 +44
      words.append([a, after[2]])
      i += 2
      continue
    words.append([a, b])
    i += 1
  return words


def entities_in_text(text, words, tags):
  """[{"type", "text", "start", "end"}] of `text` from its `words_with_offsets` and their
  tags (conlleval's chunks), in order."""
  found = sorted(metrics.entities(tags), key=lambda entity: entity[1])
  return [{"type": kind, "text": text[words[a][1]:words[b - 1][2]], "start": words[a][1],
           "end": words[b - 1][2]} for kind, a, b in found]


def entities_in_words(words, tags):
  """[{"type", "text", "start", "end", "words", "word_start", "word_end"}] of a word list
  and its tags, in order: `words[word_start:word_end]` are the entity's words; "text",
  "start" and "end" are as in `" ".join(words)` (words joined by one space)."""
  starts = np.cumsum([0] + [len(word) + 1 for word in words]).tolist()
  found = sorted(metrics.entities(tags), key=lambda entity: entity[1])
  return [{"type": kind, "text": " ".join(words[a:b]), "start": starts[a],
           "end": starts[b] - 1, "words": list(words[a:b]), "word_start": a, "word_end": b}
          for kind, a, b in found]


def _as_list(x):
  """A list, tuple, numpy array or pandas Series as a list; None for anything else."""
  if hasattr(x, "to_numpy") and not isinstance(x, (str, bytes)):
    x = x.to_numpy()
  if isinstance(x, np.ndarray):
    return list(x) if x.ndim else None
  return list(x) if isinstance(x, (list, tuple)) else None


def _what(x):
  return f"{x!r:.40} ({type(x).__name__})"


def word_lists(x, name="x"):
  """`x` (a list of word lists, one per sentence) as lists of strings; a ValueError that says
  what is expected for anything else."""
  expected = (f"{name} must be a list of word lists, one per sentence (e.g. [['John', "
              f"'Smith', 'left']])")
  rows = None if isinstance(x, (str, bytes)) else _as_list(x)
  if rows is None:
    raise ValueError(f"{expected}, got {_what(x)}")
  out = []
  for i, words in enumerate(rows):
    if isinstance(words, (str, bytes)):
      raise ValueError(f"{expected}, but {name}[{i}] is the string {words!r:.40}: put one "
                       f"sentence's words in a list ([words]); raw text goes to "
                       f"predict_entities")
    words_list = _as_list(words)
    if words_list is None:
      raise ValueError(f"{expected}, but {name}[{i}] is {_what(words)}")
    for j, word in enumerate(words_list):
      if not isinstance(word, str):
        raise ValueError(f"{expected}, but {name}[{i}][{j}] is {_what(word)}: words are "
                         f"strings")
    out.append(words_list)
  return out


@keras.saving.register_keras_serializable(package="official_bert")
class TokenTagger(task_model.TaskModel):
  """Args: a `Backbone`, a `Preprocessor` (its vocabulary, case and sequence length), the
  tag set in id order (run_ner's labels.txt order).

  Tags come back as the labels went in (`label_values`: `labels=[0, 1, 2]` gives ints, also
  after `save` and `from_preset`), as `TextClassifier`'s labels do; `labels` are their names,
  `str(label)`, which the features, entity scores and exports read. `y` takes labels or their
  names, or, where no label is named so, label ids (an int i is the i-th label).
  """

  model_type = "tagger"
  needs_y = True
  y_description = "the tags of x, a list of tags per sentence"

  def __init__(self, backbone, preprocessor, labels, **kwargs):
    values = [] if labels is None else [task_model.plain_label(label) for label in labels]
    labels = [str(label) for label in values]
    if not labels or len(set(labels)) != len(labels):
      raise ValueError(f"TokenTagger needs labels=[...] without duplicates, got {labels}")
    network = BertTokenClassifier(backbone, len(labels), name="tagger")
    task = TaggingTask(backbone.bert_config, len(labels), preprocessor.sequence_length)
    super().__init__(network, preprocessor, task, **kwargs)
    # Tokens, not [CLS]'s pooler, feed the head: it gets no gradient (as in run_ner/run_squad).
    backbone.pooler_dense.trainable = False
    self.labels = labels  # the names: what the features, entity scores and files read
    self.label_values = values  # as given: what predict_tags returns
    self.tokenizer = tokenization.FullTokenizer(preprocessor.vocab_file,
                                                    preprocessor.lower_case)
    self._validation = None  # fit's (validation sentences, batch size), for entity scores

  @classmethod
  def preset_arguments(cls, path, preset, stored, kwargs):
    """A run_ner OUTPUT_DIR (or a saved TokenTagger) brings its labels and loads its head."""
    labels = kwargs.pop("labels", None)
    if preset.record.model_type == "feature_tagger" and labels is None:
      raise ValueError(
          f"{path} is a run_ner --feature_based tagger (a head on the frozen encoder's "
          f"layers), which TokenTagger does not load: serve it with `python -m "
          f"official_bert.export --checkpoint={path} --export_dir=DIR`, or pass labels= to "
          f"fine-tune a new TokenTagger from its encoder")
    if stored and labels is not None and list(map(str, labels)) != list(preset.labels or []):
      raise ValueError(f"labels={list(labels)} but {path} was trained with labels "
                       f"{preset.labels} (in that order): leave labels out to use its head, or "
                       f"start from the model it was fine-tuned from")
    if stored and labels is None:
      labels = stored.get("label_values") or preset.labels
    if not stored and labels is None:
      raise task_model.needs_a_new_head(cls, path, preset, "labels=[...]")
    return dict(kwargs, labels=labels), bool(stored)

  # --- data ---------------------------------------------------------------------------------

  def _tag_names(self, tags, i, index):
    """One sentence's tags (labels, their names or label ids) as tag names."""
    names, unknown = [], []
    for tag in tags:
      name = tag.decode("utf-8") if isinstance(tag, bytes) else str(tag)
      if name not in index and isinstance(tag, (int, np.integer)) and not isinstance(
          tag, bool) and 0 <= tag < len(self.labels) and not task_model.ids_are_names(
              self.labels):
        name = self.labels[int(tag)]
      if name not in index:
        unknown.append(tag)
      names.append(name)
    if unknown:
      raise ValueError(f"sentence {i}: tag(s) {sorted(set(unknown), key=str)} not in labels "
                       f"{self.labels} (nor a label id 0..{len(self.labels) - 1})")
    return names

  def _sentences(self, x, y=None, name="x"):
    """conll.Sentences (tag names) of word lists `x` and tag lists `y` (placeholders if
    None): fit, evaluate, predict and predict_tags all read x this way."""
    x = word_lists(x, name)
    if y is None:
      return [conll.Sentence(words, [self.labels[0]] * len(words)) for words in x]
    rows = None if isinstance(y, (str, bytes)) else _as_list(y)
    if rows is None:
      raise ValueError(f"y must be a list of tag lists, one per sentence of x, got {_what(y)}")
    if len(rows) != len(x):
      raise ValueError(f"y has {len(rows)} tag lists for {len(x)} sentences")
    sentences, index = [], set(self.labels)
    for i, (words, tags) in enumerate(zip(x, rows)):
      tags = None if isinstance(tags, (str, bytes)) else _as_list(tags)
      if tags is None:
        raise ValueError(f"y[{i}] must be a list of tags, one per word of x[{i}], got "
                         f"{_what(rows[i])}")
      if len(words) != len(tags):
        raise ValueError(f"sentence {i}: {len(words)} words but {len(tags)} tags")
      sentences.append(conll.Sentence(words, self._tag_names(tags, i, index)))
    return sentences

  def _check_inputs(self, x, y, call, batch_size=None):
    if not isinstance(x, tf.data.Dataset):  # distill's prepared batches
      word_lists(x, "x")  # a tagger's x is word lists, never a string of text or a path
      if isinstance(y, (str, bytes)):
        raise ValueError(f"y must be a list of tag lists, one per sentence of x, got {_what(y)}")
    super()._check_inputs(x, y, call, batch_size)

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
    spec = dataset.element_spec
    if isinstance(spec, tuple) and isinstance(spec[0], dict) and "input_word_ids" in spec[0]:
      return dataset  # batches of features, as make_dataset and distill make them
    raise ValueError("TokenTagger takes word lists (x) and tag lists (y), not a Dataset")

  def distillation_batches(self, x, y, unlabeled, batch_size, seed):
    """Labeled word lists and tag lists, and `unlabeled` sentences (word lists, or raw texts
    split as `predict_entities` splits them) whose scored pieces carry `UNLABELED`."""
    inputs, label_ids, label_weights, _ = self._features(self._sentences(x, y))
    num_unlabeled = 0
    if unlabeled is not None:
      rows = _as_list(unlabeled)
      if rows is None or isinstance(unlabeled, (str, bytes)):
        raise ValueError(f"distill: unlabeled must be a list of word lists or texts, got "
                         f"{_what(unlabeled)}")
      rows = [[w for w, _, _ in words_with_offsets(r)] if isinstance(r, str) else r
              for r in rows]
      more, more_ids, more_weights, _ = self._features(self._sentences(rows, name="unlabeled"))
      more_ids = np.where(more_weights > 0, UNLABELED, more_ids).astype(more_ids.dtype)
      num_unlabeled = len(rows)
      inputs = {k: np.concatenate([v, more[k]], 0) for k, v in inputs.items()}
      label_ids = np.concatenate([label_ids, more_ids], 0)
      label_weights = np.concatenate([label_weights, more_weights], 0)
    dataset = task_model.batches((inputs, label_ids, label_weights), batch_size, True, seed)
    return dataset, num_unlabeled

  def loss_features(self, x, y, sample_weight):
    return {"label_ids": y, "label_weights": sample_weight}

  # --- training and scores ------------------------------------------------------------------

  def fit(self, x=None, y=None, batch_size=32, epochs=1, validation_data=None, **kwargs):
    """Keras' fit on word lists and tag lists; `validation_data=(x, y)` also logs
    val_entity_precision, val_entity_recall and val_entity_f1 (as `evaluate`)."""
    if validation_data is not None:
      if not (isinstance(validation_data, (tuple, list)) and len(validation_data) == 2):
        raise ValueError("validation_data must be (word lists, tag lists)")
      self._validation = (self._sentences(*validation_data), batch_size)
    try:
      return super().fit(x, y, batch_size, epochs, validation_data, **kwargs)
    finally:
      self._validation = None

  def evaluate(self, x=None, y=None, batch_size=32, return_dict=False, **kwargs):
    """Keras' evaluate (loss, token_accuracy: ratios over all labeled words) and run_ner's
    entity scores over the whole of x (`metrics.entity_results`, conlleval's), from one more
    pass over x that predicts its tags.

    return_dict=True: the dict has entity_precision, entity_recall, entity_f1 and, per
    entity type, <type>_precision, <type>_recall, <type>_f1, <type>_support, as run_ner's
    eval results. Otherwise a list: Keras' (loss, token_accuracy) then entity_precision,
    entity_recall, entity_f1.
    """
    if kwargs.get("_use_cached_eval_dataset"):  # fit's validation: already preprocessed
      logs = super().evaluate(x, y, batch_size=batch_size, return_dict=return_dict, **kwargs)
      if self._validation is not None and isinstance(logs, dict):
        scores = self.entity_scores(*self._validation)
        logs.update({k: scores[k] for k in ENTITY_KEYS})
      return logs
    if y is None:
      raise ValueError("evaluate needs y: one tag list per word list of x")
    sentences = self._sentences(x, y)
    results = super().evaluate(x, y, batch_size=batch_size, return_dict=return_dict, **kwargs)
    scores = self.entity_scores(sentences, batch_size)
    if return_dict:
      return dict(results, **scores)
    results = results if isinstance(results, list) else [results]
    return results + [scores[k] for k in ENTITY_KEYS]

  def entity_scores(self, sentences, batch_size=32):
    """run_ner's scores (`metrics.entity_results`) of the tags predicted for `sentences`
    (conll.Sentence of words and tag names) against theirs."""
    return metrics.entity_results([s.tags for s in sentences],
                                  self._predicted_names(sentences, batch_size))

  # --- predictions --------------------------------------------------------------------------

  def predict(self, x, batch_size=32, **kwargs):
    """Per-piece probabilities [windows, sequence_length, labels] of the word lists' features
    (one row per window, as run_ner's records; the export serves the first window of a text):
    a sentence longer than `sequence_length` pieces has several rows, so rows and sentences
    pair up only while each fits. `predict_tags` gives one tag per word of each sentence."""
    logits = self.predict_logits(x, batch_size, **kwargs)
    return tf.nn.softmax(logits, axis=-1).numpy()

  def _predicted_names(self, sentences, batch_size):
    """One tag name per word, read at each word's first piece (run_ner's predictions)."""
    if not sentences:
      return []
    inputs, _, label_weights, spans = self._features(sentences)
    self.warn_if_untrained("predict")
    logits = keras.Model.predict(self, task_model.batches((inputs,), batch_size, False, None),
                                 verbose=0)
    return ner_features.predictions_to_tags(logits, label_weights, spans, sentences,
                                            self.labels)

  def predict_tags(self, x, batch_size=32):
    """One tag per word of each word list (run_ner's predictions), as the labels went in."""
    label_of = dict(zip(self.labels, self.label_values))
    return [[label_of[name] for name in names]
            for names in self._predicted_names(self._sentences(x), batch_size)]

  def predict_entities(self, texts, batch_size=32):
    """Each text's entities, in order.

    texts: a string or a list of strings (raw text, split by `words_with_offsets`): each
    entity is {"type", "text", "start", "end"} (code points, end exclusive;
    `text[start:end]` is its text). Or a list of word lists (pre-split words, as CoNLL's):
    each entity is {"type", "text", "start", "end", "words", "word_start", "word_end"}, its
    words `words[word_start:word_end]`, and "text", "start", "end" as in the words joined by
    one space (`entities_in_words`).
    """
    if isinstance(texts, str):
      texts = [texts]
    rows = None if isinstance(texts, bytes) else _as_list(texts)
    expected = ("texts must be a string, a list of strings (raw text) or a list of word "
                "lists (e.g. [['John', 'Smith', 'left']])")
    if rows is None:
      raise ValueError(f"{expected}, got {_what(texts)}")
    if all(isinstance(text, str) for text in rows):
      words = [words_with_offsets(text) for text in rows]
      tags = self._predicted_names(self._sentences([[w for w, _, _ in ws] for ws in words]),
                                   batch_size)
      return [entities_in_text(text, ws, ts) for text, ws, ts in zip(rows, words, tags)]
    if any(isinstance(text, (str, bytes)) for text in rows):
      raise ValueError(f"{expected}, not a mix of strings and word lists")
    words = word_lists(rows, "texts")
    tags = self._predicted_names(self._sentences(words), batch_size)
    return [entities_in_words(ws, ts) for ws, ts in zip(words, tags)]

  # --- files --------------------------------------------------------------------------------

  def get_config(self):
    return dict(super().get_config(), labels=self.label_values)

  def run_settings(self):
    settings = dict(super().run_settings(), labels=self.labels)
    if self.label_values != self.labels:  # e.g. ints: from_preset gives them back as such
      settings["label_values"] = self.label_values
    return settings

  def export_arguments(self, options):
    return dict(super().export_arguments(options), label_names=self.labels)

