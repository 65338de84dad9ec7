"""run_distillation: a trained classifier or tagger (the teacher) -> a smaller student folder.

The student is trained by the fine-tuning runner like any run_classifier or run_ner model
(the same data flags, evaluation, best/, early stopping, restarts and strategies), by the
teacher's job (`classifier_job`, `ner_job`) wrapped in `DistillationJob`:
  - the student starts from `--student_num_layers` of the teacher's layers (`student_init`,
    written to OUTPUT_DIR/student_init), a `--student_init` folder, or a random
    `--student_config`;
  - its task is `distillation.DistillationTask` (labels and the teacher's soft outputs);
  - `--unlabeled_file` adds texts without labels (the transfer set) to the training records;
  - its run record names the teacher (`run_record.DistillationPart`).
The teacher's label set, vocabulary, case and sequence length are the student's.
"""

import dataclasses
import json
import os
import re
from typing import Optional

from absl import logging
import numpy as np
import tensorflow as tf

from data_prep import schema
from data_prep import tfrecord_io
from data_prep.classification import features as classifier_features
from data_prep.classification import own_files
from data_prep.classification import windows
from data_prep.classification.glue_processors import InputExample
from data_prep.tagging import conll
from data_prep.tagging import features as ner_features
from official_bert.interop import model_files
from official_bert.interop import model_folder
from official_bert.interop import run_record
from official_bert.interop import student_init
from official_bert.interop import weights_io
from official_bert.tasks import classifier_job
from official_bert.tasks import file_splits
from official_bert.tasks import ner_job
from official_bert.tasks.distillation import UNLABELED
from official_bert.tasks.distillation import DistillationTask
from official_bert.tasks.distillation import default_attention_weight
from official_bert.training import finetuning_runner
from official_bert.training.settings import option

TEACHER_TYPES = ("classifier", "tagger")
STUDENT_INIT_DIR = "student_init"
UNLABELED_RECORDS = "unlabeled.tf_record"
TRAIN_RECORDS = "distillation_train.tf_record"


@dataclasses.dataclass(frozen=True)
class DistillationSettings(classifier_job.ClassifierSettings, ner_job.NerSettings):
  """run_classifier's and run_ner's flags (the teacher's kind picks which apply), plus the
  teacher, the student and the distillation loss."""

  data_dir: Optional[str] = option(
      None, "GLUE: the glue_data/<TASK> folder (or a TFDS data dir); NER: the CoNLL-2003 "
      "folder.")
  teacher: Optional[str] = option(
      None, "The teacher: a trained classifier or tagger folder (a run_classifier/run_ner "
      "OUTPUT_DIR, its best/, or a folder saved by the Python API).")
  student_num_layers: Optional[int] = option(
      None, "The student keeps this many of the teacher's layers (evenly spaced, first and "
      "last included, as DistilBERT), its embeddings and head.",
      minimum=1)
  student_config: Optional[str] = option(
      None, "A bert_config.json for a student of another shape (random weights unless "
      "--student_init).")
  student_init: Optional[str] = option(
      None, "A pretrained small model to start the student from (any model folder with the "
      "teacher's vocabulary).")
  temperature: float = option(2.0, "Softens both distributions in the soft loss (Hinton et "
                              "al.; the loss is scaled by T^2).",
                              above=0.0)
  distill_weight: float = option(
      0.5, "Weight of the soft loss against the teacher; 1 - it weighs the labels' loss "
      "(0: labels only, the baseline).",
      minimum=0.0,
      maximum=1.0)
  hidden_weight: float = option(
      0.0, "Weight of TinyBERT's hidden-state loss (student layer i against the teacher layer "
      "it came from); needs equal hidden sizes.",
      minimum=0.0)
  attention_weight: Optional[float] = option(
      None, "Weight of TinyBERT's attention loss (student layer i's attention scores against "
      "the teacher layer's it came from); needs equal numbers of heads. Default: "
      "--hidden_weight's where the heads are equal (TinyBERT's layer loss), else 0.",
      minimum=0.0)
  unlabeled_file: Optional[str] = option(
      None, "Texts without labels for the teacher to label (the transfer set): a .txt with "
      "one text a line (a tagger: words split on spaces), a .tsv/.csv/.jsonl read with "
      "--text_column (--text_b_column), or a CoNLL file for a tagger.")


def read_teacher(settings):
  """The teacher's `model_folder.ModelFolder`; a folder that is not a trained classifier or
  tagger raises ValueError naming --teacher."""
  if not settings.teacher:
    raise ValueError("--teacher is required: a trained classifier or tagger folder")
  expected = ("a teacher is a trained classifier or tagger folder (a run_classifier or run_ner "
              "OUTPUT_DIR or its best/, a TextClassifier or TokenTagger saved with save(), a "
              "distilled student)")
  try:
    teacher = model_folder.read(settings.teacher, names=model_folder.Names(path="--teacher"))
  except model_folder.MissingModelFileError:
    raise ValueError(f"--teacher={settings.teacher}: no model folder (no bert_config.json or "
                     f"config.json, or no vocab.txt, beside it): {expected}") from None
  if teacher.model_type is None:
    raise ValueError(f"--teacher={settings.teacher}: a model with no run record of its "
                     f"training (a pretrained model?): {expected}")
  if teacher.model_type not in TEACHER_TYPES:
    raise ValueError(
        f"--teacher={settings.teacher}: a {teacher.model_type} model (its run record); "
        f"{expected}" + ("; a feature-based run_ner tagger (frozen encoder, BiLSTM head) is "
                        "not one" if teacher.model_type == "feature_tagger" else ""))
  return teacher


def complete_from_teacher(settings, teacher, given):
  """`settings` with the teacher's sequence length, case, labels, problem type, --doc_stride,
  threshold and label separator where the flags do not say (the student reads the teacher's
  inputs and outputs)."""
  record, changes = teacher.record, {}
  if "max_seq_length" not in given and record.max_seq_length:
    changes["max_seq_length"] = record.max_seq_length
  if "do_lower_case" not in given:
    changes["do_lower_case"] = teacher.do_lower_case
  if teacher.model_type == "classifier":
    # How the teacher read its texts and labels (windows of long texts, multi-label names):
    # the classifier's recorded flags, --doc_stride only where the student reads own files
    # (a GLUE --task_name takes none).
    own = file_splits.uses_own_files(settings)
    for name in classifier_job.ClassifierSettings.RECORDED_FLAGS:
      if (name not in given and record.get(name)
          and (own or name != "doc_stride")):
        changes[name] = record.get(name)
    if not settings.label_names and teacher.labels and file_splits.uses_own_files(settings):
      changes["label_names"] = tuple(teacher.labels)
  return dataclasses.replace(settings, **changes)


def student_settings(settings, teacher, given):
  """`settings` completed from the teacher (sequence length, case, labels, problem type) and
  pointed at the student's start (config, vocabulary, weights); -> (settings, teacher layers
  or None). `given`: the names of the flags the user gave."""
  s, changes = complete_from_teacher(settings, teacher, given), {}
  for name in ("init_checkpoint", "bert_config_file", "vocab_file"):
    if name in given:
      raise ValueError(f"--{name}: the student's start comes from --student_num_layers, "
                       "--student_init or --student_config, its vocabulary from the teacher")
  chosen = [n for n in ("student_num_layers", "student_init", "student_config") if getattr(s, n)]
  if not chosen:
    raise ValueError("the student: pass --student_num_layers (some of the teacher's layers), "
                     "--student_init (a pretrained small model) or --student_config")
  if s.student_num_layers and len(chosen) > 1:
    raise ValueError(f"--student_num_layers takes the teacher's layers; it does not go with "
                     f"--{' --'.join(chosen[1:])}")
  layers = None
  if s.student_num_layers:
    directory = os.path.join(s.output_dir, STUDENT_INIT_DIR)
    # Before the student's start is rewritten: a student trained there with other layers.
    finetuning_runner.check_trained_config(
        s, dataclasses.replace(teacher.config, num_hidden_layers=s.student_num_layers),
        f"--student_num_layers={s.student_num_layers}")
    tfrecord_io.make_dirs(s.output_dir, "--output_dir")
    layers = student_init.write(teacher, directory, s.student_num_layers)
    logging.info("Student: %d layers, from the teacher's layers %s (of %d), in %s",
                 s.student_num_layers, layers, teacher.config.num_hidden_layers, directory)
    changes.update(init_checkpoint=directory,
                   bert_config_file=os.path.join(directory, model_files.CONFIG_FILE))
  else:
    config_file = s.student_config
    if s.student_init:
      init = model_folder.read(s.student_init,
                               config_file=s.student_config,
                               names=model_folder.Names(path="--student_init",
                                                        config="--student_config"))
      _check_same_vocabulary(init, teacher)
      config_file = init.config_file
    changes.update(init_checkpoint=s.student_init, bert_config_file=config_file)
  changes["vocab_file"] = teacher.vocab_file  # the student reads the teacher's inputs
  return dataclasses.replace(s, **changes), layers


def _check_same_vocabulary(init, teacher):
  if init.vocab_file and (tfrecord_io.read_text(init.vocab_file) != tfrecord_io.read_text(
      teacher.vocab_file)):
    raise ValueError(f"--student_init={init.path}: its vocabulary ({init.vocab_file}) differs "
                     f"from the teacher's ({teacher.vocab_file}); the student must read the "
                     "teacher's token ids")


class DistillationJob:
  """The teacher's job (`finetuning_runner`'s job protocol) with the transfer set, the
  distillation task and the student's record; everything else is the wrapped job's."""

  def __init__(self, base, settings, teacher, layers):
    self.base = base
    self.settings = settings
    self.teacher = teacher
    self.layers = layers
    self.num_unlabeled = 0
    self.attention_weight = settings.attention_weight  # resolved by make_task

  def __getattr__(self, name):  # score, write_predictions, main_metric, labels
    return getattr(self.base, name)

  def _labels(self):
    labels = getattr(self.base, "labels", None)
    processor = getattr(self.base, "processor", None)
    if labels is None and processor is not None and not processor.is_regression:
      labels = list(processor.labels)
    return labels

  def prepare(self):
    data = self.base.prepare()
    labels, wanted = self._labels(), self.teacher.labels
    if wanted and labels is not None and list(labels) != list(wanted):
      raise ValueError(f"the student's labels {list(labels)} differ from the teacher's "
                       f"{list(wanted)} ({self.teacher.path}): train it on the teacher's "
                       "label set")
    s = self.settings
    if not (s.do_train and s.unlabeled_file):
      return data
    if not (s.distill_weight or s.hidden_weight or s.attention_weight):
      logging.warning("--unlabeled_file with --distill_weight=0, --hidden_weight=0 and no "
                      "--attention_weight: its "
                      "texts teach nothing (no loss uses them) and only lengthen the epochs")
    vocab = finetuning_runner.vocab_file(s)
    unlabeled, self.num_unlabeled = self._write_unlabeled(vocab)
    path = os.path.join(s.output_dir, TRAIN_RECORDS)
    total = shuffled_union([data.train_file, unlabeled], path, s.random_seed)
    logging.info("Training on %d labeled and %d unlabeled examples (%s)", data.num_train_examples,
                 self.num_unlabeled, path)
    return data._replace(train_file=path, num_train_examples=total)

  def _problem_type(self):
    processor = getattr(self.base, "processor", None)  # GLUE: STS-B is a regression
    if processor is not None:
      return "regression" if processor.is_regression else "single_label"
    return self.settings.problem_type

  def _write_unlabeled(self, vocab):
    s = self.settings
    tagger = self.teacher.model_type == "tagger"
    texts = (read_unlabeled_sentences(s.unlabeled_file, s) if tagger else read_unlabeled_examples(
        s.unlabeled_file, s))
    if not texts:
      raise ValueError(f"--unlabeled_file={s.unlabeled_file}: no texts")
    labels = self._labels()
    key = classifier_features.source_key(
        s.unlabeled_file, vocab, s.do_lower_case, s.max_seq_length, len(texts), s.random_seed,
        labels=labels, kind=self.teacher.model_type, problem_type=self._problem_type(),
        columns=[s.text_column, s.text_b_column, s.token_column, s.tag_column],
        quoting=s.quoting, unlabeled=UNLABELED, doc_stride=s.doc_stride)

    def build():
      tokenizer = classifier_features.cached_tokenizer(vocab, s.do_lower_case)
      if tagger:
        return unlabeled_tagger_columns(texts, labels, s.max_seq_length, tokenizer)
      return unlabeled_classifier_columns(texts, labels, self._problem_type(),
                                          s.max_seq_length, tokenizer, s.doc_stride)

    path = os.path.join(s.output_dir, UNLABELED_RECORDS)
    classifier_features.cached_tfrecord(path, key, build)
    return path, len(texts)

  def make_task(self, bert_config):
    s = self.settings
    student = self.base.make_task(bert_config)
    teacher = self.base.make_task(self.teacher.config)
    layers_l, layers_k = (self.teacher.config.num_hidden_layers, bert_config.num_hidden_layers)
    self.attention_weight = default_attention_weight(s.attention_weight, s.hidden_weight,
                                                     bert_config, self.teacher.config)
    if s.hidden_weight and not self.attention_weight and s.attention_weight is None:
      logging.info("No attention loss: the student has %d heads, the teacher %d",
                   bert_config.num_attention_heads, self.teacher.config.num_attention_heads)
    pairs = None
    if s.hidden_weight or self.attention_weight:
      pairs = student_init.uniform_hidden_pairs(layers_l, layers_k, self.layers)
    path = self.teacher.path
    return DistillationTask(student,
                            teacher,
                            lambda model: weights_io.load_weights(model, path),
                            temperature=s.temperature,
                            distill_weight=s.distill_weight,
                            hidden_weight=s.hidden_weight,
                            hidden_pairs=pairs,
                            attention_weight=self.attention_weight)

  def run_record(self):
    s = self.settings
    part = run_record.DistillationPart(
        teacher=tfrecord_io.absolute(self.teacher.path),
        teacher_num_layers=self.teacher.config.num_hidden_layers,
        student_init=("teacher_layers" if self.layers is not None else s.student_init or "random"),
        teacher_layers=self.layers,
        temperature=s.temperature,
        distill_weight=s.distill_weight,
        hidden_weight=s.hidden_weight,
        attention_weight=self.attention_weight,
        unlabeled_file=s.unlabeled_file,
        unlabeled_examples=self.num_unlabeled or None)
    return dataclasses.replace(self.base.run_record(), distillation=part)


# ---- the transfer set -------------------------------------------------------------------
def _lines(path):
  """A text file's non-empty lines, stripped; lines end at "\n" only (a text holding U+2028
  or a form feed stays one text)."""
  return [line.strip() for line in tfrecord_io.read_text(path).split("\n") if line.strip()]


def read_unlabeled_examples(path, settings):
  """A classifier's unlabeled texts as `InputExample`s (label None): a .txt has one text a
  line; a .tsv/.csv/.jsonl is read by column (`own_files`), its labels ignored."""
  if path.endswith(".txt"):
    if settings.text_b_column:
      raise ValueError(f"--unlabeled_file={path}: a .txt holds one text a line; text pairs "
                       "(--text_b_column) need a .tsv/.csv/.jsonl")
    return [InputExample(f"unlabeled-{i}", text, None, None) for i, text in enumerate(_lines(path))]
  return _unlabeled_by_column(path, settings, settings.text_b_column)


def _unlabeled_by_column(path, settings, text_b_column):
  """The texts of a .tsv/.csv/.jsonl's --text_column (and `text_b_column`) as
  `InputExample`s, labels ignored (`own_files`)."""
  columns = own_files.Columns(settings.text_column, text_b_column, "\0no label column")
  examples = own_files.read_examples(path, columns, need_labels=False,
                                     quoting=settings.quoting).examples
  return [e._replace(label=None) for e in examples]


def read_unlabeled_sentences(path, settings):
  """A tagger's unlabeled sentences (`conll.Sentence`, tags None), words split on spaces:
  a .txt holds one sentence a line, unless it is CoNLL columns (`_looks_like_conll`: the
  CoNLL-2003 files are .txt); a .jsonl, or a .tsv/.csv whose header names --text_column, is
  read by that column (as a classifier's); another file is read as CoNLL columns
  (tags ignored)."""
  extension = os.path.splitext(path)[1].lower()
  if extension == ".txt":
    lines = [line.strip() for line in tfrecord_io.read_text(path).split("\n")]
    if not _looks_like_conll(lines):
      return [conll.Sentence(line.split(), None) for line in lines if line]
  if extension in (".jsonl", ".tsv", ".csv"):
    try:
      return [conll.Sentence(e.text_a.split(), None)
              for e in _unlabeled_by_column(path, settings, None)]
    except own_files.MissingColumnError:
      if extension == ".jsonl":
        raise
      # A .tsv/.csv without that column: CoNLL columns (run_ner's own files often are .tsv).
  logging.info("--unlabeled_file=%s: read as CoNLL columns (token column %d)", path,
               settings.token_column)
  sentences = conll.read_conll(path,
                               None,
                               settings.tag_column,
                               settings.token_column,
                               to_iob2=False,
                               allow_untagged=True)
  return [conll.Sentence(x.words, None) for x in sentences]


_TAG = re.compile(r"^(O|[BIESLU]-\S+)$")


def _looks_like_conll(lines):
  """Whether a text file's `lines` (stripped) are CoNLL columns, not one sentence a line:
  every line (-DOCSTART- aside) the same number of fields, and blank (or whitespace) lines
  between sentences, or (one sentence, no blank line) a tag in the last of two or more
  columns on every line."""
  first, last = next((i for i, x in enumerate(lines) if x), 0), len(lines)
  while last > first and not lines[last - 1]:
    last -= 1
  inner = [line for line in lines[first:last] if not line.startswith("-DOCSTART-")]
  fields = {len(line.split()) for line in inner if line}
  if len(fields) != 1:
    return False
  if "" in inner:
    return True
  return fields.pop() >= 2 and all(_TAG.match(line.split()[-1]) for line in inner)


def unlabeled_classifier_columns(examples, labels, problem_type, max_seq_length, tokenizer,
                                 doc_stride=None):
  """(schema, columns, meta) of classifier records whose label says "none" (`UNLABELED`;
  NaN for a regression score), so that only the soft loss uses them; with `doc_stride`, one
  record per window of a long text, as the labeled records."""
  regression = problem_type == "regression"
  label_list = [None] if regression else list(labels)
  placeholder = 0.0 if regression else label_list[0]
  columns = classifier_features.convert_examples([e._replace(label=placeholder) for e in examples],
                                                 label_list, max_seq_length, tokenizer)
  if problem_type == "multi_label":
    columns["label_ids"] = np.full([len(examples), len(label_list)], UNLABELED, np.float32)
    features = schema.multi_label_classifier_features(max_seq_length, len(label_list))
  else:
    columns["label_ids"] = np.full_like(columns["label_ids"], np.nan if regression else UNLABELED)
    features = schema.classifier_features(max_seq_length, regression)
  if doc_stride:
    columns, _ = windows.windowed_columns(examples, columns, max_seq_length, doc_stride,
                                          tokenizer)
  return features, columns, {}


def unlabeled_tagger_columns(sentences, labels, max_seq_length, tokenizer):
  """(schema, columns, meta) of NER records whose first word pieces (the scored positions,
  `label_weights` 1) carry `UNLABELED`."""
  placeholder = [conll.Sentence(x.words, [labels[0]] * len(x.words)) for x in sentences]
  columns, _ = ner_features.convert_sentences(placeholder, labels, max_seq_length, tokenizer)
  columns["label_ids"] = np.where(columns["label_weights"] > 0, UNLABELED,
                                  columns["label_ids"]).astype(columns["label_ids"].dtype)
  return schema.ner_features(max_seq_length), columns, {}


def shuffled_union(paths, path, seed):
  """Writes the records of `paths` to `path` in one seeded random order (labeled and
  unlabeled examples mixed evenly in every part of an epoch); reuses it while the inputs and
  seed are unchanged. Returns the number of records."""
  stats = [(p, tf.io.gfile.stat(p)) for p in paths]
  key = json.dumps(
      {
          "inputs": [(tfrecord_io.absolute(p), st.length, st.mtime_nsec) for p, st in stats],
          "seed": seed
      },
      sort_keys=True)
  key_file = path + ".json"
  if tf.io.gfile.exists(path) and tf.io.gfile.exists(key_file):
    stored = json.loads(tfrecord_io.read_text(key_file))
    if stored.get("key") == key:
      return stored["num_examples"]
  records = [r.numpy() for r in tf.data.TFRecordDataset(paths)]
  order = np.random.default_rng(seed).permutation(len(records))
  with tfrecord_io.RecordFile(path) as f:
    for i in order:
      f.write(records[i])
  tfrecord_io.write_text(key_file, json.dumps({"key": key, "num_examples": len(records)}))
  return len(records)


def make_job_fn(teacher, layers):
  """settings -> the `DistillationJob` around the teacher kind's job (`run_or_restart`'s);
  without --do_train the plain job (a trained student is evaluated or predicted without its
  teacher)."""

  def make_job(settings):
    if teacher.model_type == "tagger":
      if settings.feature_based:
        raise ValueError("--feature_based: a distilled student is fine-tuned; leave it out")
      base = ner_job.NerJob(settings, tags=teacher.labels)
    else:
      base = classifier_job.make_job(settings)
    if not settings.do_train:  # a trained student: evaluated or predicted without a teacher
      return base
    return DistillationJob(base, settings, teacher, layers)

  return make_job


def run(settings, given, record=None):
  """Distills `settings.teacher` into a student in `settings.output_dir` (`finetuning_runner`).

  Args:
    given: names of the settings the user gave (the others may come from the teacher).
    record: the run's flags, for TensorBoard.
  """
  if not settings.output_dir:
    raise ValueError("--output_dir is required")
  teacher = read_teacher(settings)
  check_folders(settings, teacher)
  check_teacher_settings(settings, teacher, given)
  if settings.do_train:
    settings, layers = student_settings(settings, teacher, given)
  else:  # a trained student in OUTPUT_DIR: evaluated or predicted as the plain task
    if not model_files.latest_checkpoint(settings.output_dir):
      raise ValueError(f"--output_dir={settings.output_dir} holds no trained student (no "
                       "checkpoint): add --do_train")
    settings, layers = complete_from_teacher(settings, teacher, given), None
  return finetuning_runner.run_or_restart(settings, make_job_fn(teacher, layers), record)


def _inside(path, folder):
  path, folder = tfrecord_io.absolute(path).rstrip("/"), tfrecord_io.absolute(folder).rstrip("/")
  return path == folder or path.startswith(folder + "/")


def check_folders(settings, teacher):
  """The student's OUTPUT_DIR must be neither the teacher's folder, inside it, nor above it:
  the student's files would replace the teacher's."""
  if _inside(settings.output_dir, teacher.directory) or _inside(teacher.directory,
                                                                settings.output_dir):
    raise ValueError(f"--output_dir={settings.output_dir} and --teacher={settings.teacher} "
                     "overlap: the student's files would replace the teacher's; give the "
                     "student a folder of its own")
  best = os.path.join(teacher.directory, "best")
  if tf.io.gfile.exists(os.path.join(best, "checkpoint")) and not _inside(teacher.path, best):
    logging.warning("--teacher=%s: its last step teaches (the folder's best checkpoint is in "
                    "%s: pass --teacher=%s for it)", settings.teacher, best, best)


def check_teacher_settings(settings, teacher, given):
  """Flags that contradict the teacher (its case, problem type, single texts or pairs) raise,
  before anything is written (the student reads the teacher's inputs)."""
  if "do_lower_case" in given and not settings.allow_case_mismatch:
    model_folder.read(settings.teacher, do_lower_case=settings.do_lower_case,
                      names=model_folder.Names(path="--teacher"))
  record = teacher.record
  if teacher.model_type != "classifier":
    return
  stored = record.get("problem_type")
  if "problem_type" in given and stored and settings.problem_type != stored:
    raise ValueError(f"--problem_type={settings.problem_type}: the teacher "
                     f"({settings.teacher}) is {stored}; the student must be too")
  pairs = record.get("text_pairs")
  if pairs is not None and file_splits.uses_own_files(settings) and (
      bool(settings.text_b_column) != bool(pairs)):
    raise ValueError(f"the teacher ({settings.teacher}) was trained on "
                     f"{'text pairs' if pairs else 'single texts'}: "
                     f"{'pass' if pairs else 'leave out'} --text_b_column")
  if pairs and settings.unlabeled_file and settings.unlabeled_file.endswith(".txt"):
    raise ValueError(f"--unlabeled_file={settings.unlabeled_file}: the teacher reads text "
                     "pairs, which a .txt (one text a line) cannot hold; use a .tsv/.csv/.jsonl "
                     "with --text_column and --text_b_column")
