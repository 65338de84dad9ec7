"""`QuestionAnswerer`: extractive QA (SQuAD v1.1 / v2.0), as `run_squad` and the squad export.

  qa = ob.QuestionAnswerer.from_preset(path)
  qa.fit("train-v1.1.json", epochs=2)   # or a list of {"question", "context", "answers":
                                        #   [{"text", "answer_start"}], "is_impossible"}
  qa.answer("Who wrote it?", long_text)  # {"text", "start", "end", "score"}

Training windows are written by the SQuAD writer `run_squad` uses (`data_prep.squad.writing`),
the loss is `run_squad`'s; `answer` runs the squad export's in-graph windows and answer rules
(`serving.squad_answers`) over contexts of any length: `start`/`end` are code-point offsets
into the context (end exclusive; -1 when a v2.0 model answers nothing).
"""

import inspect
import json
import os
import shutil
import tempfile

from absl import logging
import keras
import tensorflow as tf

from data_prep import tfrecord_io
from data_prep.squad import writing
from official_bert.api import task_model
from official_bert.api.preprocessor import as_string_tensor
from official_bert.modeling.encoder import INPUT_NAMES
from official_bert.modeling.finetuning_models import BertSpanLabeler
from official_bert.serving import squad_answers
from official_bert.tasks.squad import SquadTask
from official_bert.training import input_pipeline

# The answer options and their defaults: `SquadAnswerer`'s (the export's and run_squad's).
DEFAULT_OPTIONS = {
    name: parameter.default
    for name, parameter in inspect.signature(squad_answers.SquadAnswerer).parameters.items()
    if name in ("doc_stride", "max_query_length", "n_best_size", "max_answer_length",
                "null_score_diff_threshold")}


# An example's keys: SQuAD's, and the Hugging Face `squad` / `squad_v2` datasets' (`title`).
EXAMPLE_KEYS = ("id", "title", "question", "context", "answers", "is_impossible")


def _answers(ex, i):
  """An example's answers as SQuAD's [{"text", "answer_start"}]: SQuAD's own list, or the
  Hugging Face datasets' {"text": [...], "answer_start": [...]}."""
  answers = ex.get("answers", [])
  if isinstance(answers, dict):
    if set(answers) != {"text", "answer_start"} or len(answers["text"]) != len(
        answers["answer_start"]):
      raise ValueError(f"example {i}: answers {answers!r} must be a list of {{'text', "
                       f"'answer_start'}} dicts, or {{'text': [...], 'answer_start': [...]}} "
                       f"lists of one length")
    answers = [{"text": t, "answer_start": int(a)}
               for t, a in zip(answers["text"], answers["answer_start"])]
  answers = list(answers)
  for answer in answers:
    if not isinstance(answer, dict) or not {"text", "answer_start"} <= set(answer):
      raise ValueError(f"example {i}: answer {answer!r} needs 'text' and 'answer_start' (the "
                       f"answer's first character in the context)")
  return answers


def examples_to_squad_json(examples, path, version_2_with_negative=False):
  """Writes a list of example dicts as a SQuAD JSON file (one paragraph per example; a
  question's id is its `id`, else its index in the list)."""
  paragraphs = []
  for i, ex in enumerate(examples):
    if not isinstance(ex, dict):
      raise ValueError(f"example {i} is a {type(ex).__name__}, not a dict with "
                       f"'question', 'context' and 'answers'")
    missing = [k for k in ("question", "context") if k not in ex]
    if missing:
      raise ValueError(f"example {i} lacks {missing}")
    unknown = sorted(set(ex) - set(EXAMPLE_KEYS))
    if unknown:
      raise ValueError(f"example {i} has key(s) {unknown} that a question answerer does not "
                       f"read; its keys are {list(EXAMPLE_KEYS)}, the answers as "
                       f"'answers': [{{'text': ..., 'answer_start': ...}}]")
    qa = {"id": str(ex.get("id", i)), "question": ex["question"],
          "answers": _answers(ex, i)}
    if version_2_with_negative:  # Hugging Face's squad_v2: no answers is unanswerable
      qa["is_impossible"] = bool(ex.get("is_impossible", not qa["answers"]))
    elif ex.get("is_impossible"):  # kept: the reader says what a v1.1 model cannot train on
      qa["is_impossible"] = True
    paragraphs.append({"context": ex["context"], "qas": [qa]})
  version = "v2.0" if version_2_with_negative else "v1.1"
  tfrecord_io.write_text(path, json.dumps({"version": version, "data": [
      {"title": "examples", "paragraphs": paragraphs}]}))


@keras.saving.register_keras_serializable(package="official_bert")
class QuestionAnswerer(task_model.TaskModel):
  """Args: a `Backbone`, a `Preprocessor`, `version_2_with_negative` and the answer options
  (`DEFAULT_OPTIONS`' keys, as run_squad's flags)."""

  model_type = "squad"
  reads_files = True  # fit / evaluate take SQuAD JSON file(s)

  def __init__(self, backbone, preprocessor, version_2_with_negative=False, **options):
    kwargs = {k: options.pop(k) for k in ("name", "trainable", "dtype") if k in options}
    unknown = sorted(set(options) - set(DEFAULT_OPTIONS))
    if unknown:
      raise ValueError(f"QuestionAnswerer: unknown option(s) {unknown}; expected "
                       f"{sorted(DEFAULT_OPTIONS)}")
    network = BertSpanLabeler(backbone, name="squad")
    task = SquadTask(backbone.bert_config, preprocessor.sequence_length)
    super().__init__(network, preprocessor, task, **kwargs)
    self._work_dirs = []  # the training windows of the running fit/evaluate
    # Tokens, not [CLS]'s pooler, feed the head: it gets no gradient (as in run_ner/run_squad).
    backbone.pooler_dense.trainable = False
    self.version_2_with_negative = bool(version_2_with_negative)
    self.options = dict(DEFAULT_OPTIONS, **options)
    self._fit_query_length(preprocessor.sequence_length, "max_query_length" in options)
    self._answerer = squad_answers.SquadAnswerer(
        task_model.HostOutputs(self.network),
        preprocessor.tokenizer, preprocessor.vocabulary,
        preprocessor.sequence_length, version_2_with_negative=self.version_2_with_negative,
        **self.options)

  default_sequence_length = 384

  def _fit_query_length(self, sequence_length, given):
    """A sequence with room for the question (max_query_length pieces) and some context: a
    short model (max_position_embeddings 64, say) gets half its sequence for the question
    unless max_query_length is given."""
    query = self.options["max_query_length"]
    if sequence_length > query + 3:
      return
    if given:
      raise ValueError(f"sequence_length={sequence_length} must be more than "
                       f"max_query_length={query} + 3: the room for the context")
    if sequence_length // 2 + 3 >= sequence_length:
      raise ValueError(f"sequence_length={sequence_length} leaves no room for a question and "
                       f"its context")
    self.options["max_query_length"] = max(1, sequence_length // 2)
    logging.info("QuestionAnswerer: max_query_length=%d (half of sequence_length=%d; the "
                 "default %d leaves no room for the context)",
                 self.options["max_query_length"], sequence_length, query)

  @classmethod
  def preset_arguments(cls, path, preset, stored, kwargs):
    """A run_squad OUTPUT_DIR (or a saved QuestionAnswerer) loads its head and brings its
    SQuAD version and answer options."""
    if kwargs.get("version_2_with_negative") is None:
      kwargs["version_2_with_negative"] = bool(stored.get("version_2_with_negative", False))
    for name in DEFAULT_OPTIONS:  # run_squad's (or a saved model's) unless given
      if stored.get(name) is not None:
        kwargs.setdefault(name, stored[name])
    return kwargs, bool(stored)

  def call(self, inputs, training=None):
    return self.network(inputs, training=training)

  def make_dataset(self, x, y=None, batch_size=32, shuffle=False, seed=None):
    """x: SQuAD JSON file(s) or a list of example dicts -> training windows."""
    if y is not None:
      raise ValueError("QuestionAnswerer.fit takes the answers inside x (SQuAD JSON or "
                       "example dicts), not y")
    folder = tempfile.mkdtemp(prefix="ob_squad_")
    self._work_dirs.append(folder)
    if isinstance(x, (str, os.PathLike)):
      files = [os.fspath(x)]
    elif x and all(isinstance(f, (str, os.PathLike)) for f in x):
      files = [os.fspath(f) for f in x]
    else:
      files = [os.path.join(folder, "examples.json")]
      examples_to_squad_json(list(x), files[0], self.version_2_with_negative)
    records = []
    for i, input_file in enumerate(files):
      records.append(os.path.join(folder, f"train_{i}.tf_record"))
      # The examples' temporary file is not one the user knows: messages name x.
      self._write_windows(input_file, records[-1],
                          "x" if input_file == os.path.join(folder, "examples.json") else None)
    num_windows = sum(tfrecord_io.count_records(r) for r in records)
    # The training schema (answer positions) whether shuffled (fit) or not (evaluate). fit
    # counts every window, its last batch partial, as the other task models and Keras.
    dataset = input_pipeline.dataset(",".join(records), self.task.record_features(True),
                                     batch_size, is_training=shuffle, seed=seed,
                                     epoch_batches=shuffle)
    dataset = dataset.map(lambda f: ({k: f[k] for k in INPUT_NAMES},
                                     (f["start_positions"], f["end_positions"])))
    batches = -(-num_windows // batch_size)
    return dataset.take(batches).apply(tf.data.experimental.assert_cardinality(batches))

  def _write_windows(self, input_file, output_file, input_name=None):
    """The training windows of a SQuAD JSON file, as run_squad writes them."""
    try:
      writing.run(writing.Settings(
          input_file=input_file, output_file=output_file,
          vocab_file=self.preprocessor.vocab_file, do_lower_case=self.preprocessor.lower_case,
          max_seq_length=self.preprocessor.sequence_length,
          doc_stride=self.options["doc_stride"],
          max_query_length=self.options["max_query_length"],
          version_2_with_negative=self.version_2_with_negative, is_training=True,
          num_workers=1), input_name)
    except ValueError as e:  # (the reader's errors name the file)
      if input_name is None:
        raise
      raise ValueError(str(e).replace(input_file, input_name)) from None

  def validation_x_y(self, data):
    """fit's validation_data is as x: SQuAD JSON file(s) or example dicts (the answers in
    them)."""
    return data, None

  def map_batches(self, dataset):
    raise ValueError("QuestionAnswerer.fit takes SQuAD JSON file(s) or example dicts")

  def fit(self, *args, **kwargs):
    try:
      return super().fit(*args, **kwargs)
    finally:
      self._remove_work_dirs()

  def evaluate(self, *args, **kwargs):
    if kwargs.get("_use_cached_eval_dataset"):  # fit's validation: fit removes the files
      return super().evaluate(*args, **kwargs)
    try:
      return super().evaluate(*args, **kwargs)
    finally:
      self._remove_work_dirs()

  def _remove_work_dirs(self):
    while self._work_dirs:
      shutil.rmtree(self._work_dirs.pop(), ignore_errors=True)

  def loss_features(self, x, y, sample_weight):
    return {"start_positions": y[0], "end_positions": y[1]}

  def predict(self, x=None, *args, **kwargs):
    """Not Keras' `predict` on raw input: a question needs its context (`answer`)."""
    raise ValueError("QuestionAnswerer.predict: ask with answer(question, context), strings "
                     "or equal-length lists of them, which gives each answer's text, start, "
                     "end and score")

  def answer(self, question, context):
    """The best answer to `question` in `context` (strings, or equal-length lists of them):
    {"text", "start", "end", "score"}, or a list of them for lists; text "" and start/end -1
    where there is none (SQuAD 2.0's null answer, or no valid span). The text is the
    original's (run_squad's predictions.json: the span's words joined by one space);
    `context[start:end]` is the span as written (code points), equal to the text where the
    span holds no run of whitespace."""
    single = isinstance(question, str)
    questions = as_string_tensor(question, "question")
    contexts = as_string_tensor(context, "context")
    if questions.shape[0] != contexts.shape[0]:
      raise ValueError(f"{questions.shape[0]} questions but {contexts.shape[0]} contexts")
    with task_model.outputs_for_tensorflow_ops():
      result = self._answerer(questions, contexts)
    # No valid span (start -1): "", not the original's "empty" placeholder of v1.1's
    # predictions.json (which the exports keep): an empty span's text.
    out = [{"text": (result["answer_text"][i].numpy().decode("utf-8")
                     if int(result["answer_start"][i]) >= 0 else ""),
            "start": int(result["answer_start"][i]), "end": int(result["answer_end"][i]),
            "score": float(result["score"][i])} for i in range(int(questions.shape[0]))]
    return out[0] if single else out

  def get_config(self):
    return dict(super().get_config(), version_2_with_negative=self.version_2_with_negative,
                **self.options)

  def run_settings(self):
    return dict(super().run_settings(), version_2_with_negative=self.version_2_with_negative,
                **self.options)

  def export_arguments(self, options):
    squad = dict(self.options, version_2_with_negative=self.version_2_with_negative)
    return dict(super().export_arguments(options), squad_options=squad)
