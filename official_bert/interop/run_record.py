"""`RunRecord`: what a trained model folder says about itself (its `run_settings.json`).

One type, written by every fine-tuning job (`finetuning_runner`, through `model_files.write`)
and every Python API model (`save`), read by every consumer (`model_folder.read`: the API's
`from_preset`, `export`, `extract_features`, a later run on the same OUTPUT_DIR). A
`run_classifier` OUTPUT_DIR and a `TextClassifier.save` folder hold the same record, so each
loads and exports like the other.

  {"version": 2, "task": "SST-2", "model_type": "classifier", "max_seq_length": 64,
   "do_lower_case": true, "labels": ["0", "1"], "num_labels": 2,
   "classifier": {"problem_type": "single_label", "text_pairs": false, ...}}

The top level is what every kind of model has; one optional part per kind of task holds the
rest (`classifier`, `squad`, `embedder`). Version 1 files (before this type: one flat object)
are read too. Writing a field no part has is an error: the record is the schema.
"""

import dataclasses
import json
import typing
from typing import Optional

from absl import logging

VERSION = 2


class NewerVersionError(ValueError):
  """A record written by a newer official-bert than this one: upgrade to read it."""


@dataclasses.dataclass
class ClassifierPart:
  """A classifier's head and outputs (export's classifier options)."""
  problem_type: Optional[str] = None  # single_label, multi_label or regression
  multi_label_threshold: Optional[float] = None
  label_separator: Optional[str] = None
  doc_stride: Optional[int] = None  # long texts in windows, their scores averaged (0: cut)
  text_pairs: Optional[bool] = None  # trained on (first, second) pairs


@dataclasses.dataclass
class SquadPart:
  """A question answerer's answer options (the original's flags)."""
  doc_stride: Optional[int] = None
  max_query_length: Optional[int] = None
  version_2_with_negative: Optional[bool] = None
  n_best_size: Optional[int] = None
  max_answer_length: Optional[int] = None
  null_score_diff_threshold: Optional[float] = None


@dataclasses.dataclass
class EmbedderPart:
  """A sentence embedder's pooling and training loss."""
  pooling: Optional[str] = None
  normalize_embeddings: Optional[bool] = None
  loss: Optional[str] = None
  score_range: Optional[list] = None  # the training scores' (low, high)


@dataclasses.dataclass
class DistillationPart:
  """A distilled student's origin (`run_distillation`): the teacher and the recipe."""
  teacher: Optional[str] = None  # the teacher folder, as given
  teacher_num_layers: Optional[int] = None
  student_init: Optional[str] = None  # teacher_layers, a --student_init folder, or random
  teacher_layers: Optional[list] = None  # the teacher layers the student's were copied from
  temperature: Optional[float] = None
  distill_weight: Optional[float] = None
  hidden_weight: Optional[float] = None
  attention_weight: Optional[float] = None
  unlabeled_file: Optional[str] = None
  unlabeled_examples: Optional[int] = None


# model_type -> (part name, part class): the part a record of that model type may hold.
PARTS = {"classifier": ("classifier", ClassifierPart),
         "squad": ("squad", SquadPart),
         "encoder": ("embedder", EmbedderPart)}
_PART_CLASSES = {name: cls for name, cls in PARTS.values()}


@dataclasses.dataclass
class RunRecord:
  """A trained model's record; every field optional (a bare pretrained folder has none)."""
  task: Optional[str] = None  # SST-2, own_files, NER, SQuAD, embeddings, or the API class's
  model_type: Optional[str] = None  # `modeling.model_types.MODEL_TYPES`
  max_seq_length: Optional[int] = None
  do_lower_case: Optional[bool] = None
  labels: Optional[list] = None  # label names in id order (strings)
  label_values: Optional[list] = None  # the labels as the API user gave them (e.g. ints)
  num_labels: Optional[int] = None
  classifier: Optional[ClassifierPart] = None
  squad: Optional[SquadPart] = None
  embedder: Optional[EmbedderPart] = None
  distillation: Optional[DistillationPart] = None  # any model type: a distilled student's
  version: int = VERSION

  @classmethod
  def of(cls, model_type, **fields):
    """A record from flat fields: the top-level ones, the rest into `model_type`'s part.

    Raises:
      ValueError: a field neither the top level nor that part has.
    """
    top = {f.name for f in dataclasses.fields(cls)} - set(_PART_CLASSES) - {"version"}
    if isinstance(fields.get("distillation"), dict):
      fields = dict(fields, distillation=_distillation_part(fields["distillation"]))
    part_name, part_cls = PARTS.get(model_type, (None, None))
    part_fields = {f.name for f in dataclasses.fields(part_cls)} if part_cls else set()
    unknown = sorted(set(fields) - top - part_fields)
    if unknown:
      raise ValueError(f"run record of a {model_type}: no field {unknown} (top level: "
                       f"{sorted(top)}; its part: {sorted(part_fields) or 'none'})")
    record = cls(model_type=model_type, **{k: v for k, v in fields.items() if k in top})
    part_values = {k: v for k, v in fields.items() if k in part_fields and k not in top}
    if part_name:
      setattr(record, part_name, part_cls(**part_values))
    return record

  @property
  def part(self):
    """This record's task part (a `ClassifierPart`, ...), or None."""
    name = PARTS.get(self.model_type, (None,))[0]
    return getattr(self, name) if name else None

  def values(self):
    """{field: value} of every field set, the part's with the top level's (the flags of the
    same names take their defaults from these: export, extract_features, later runs)."""
    out = {k: v for k, v in dataclasses.asdict(self).items()
           if v is not None and k not in _PART_CLASSES and k not in ("version", "distillation")}
    if self.part is not None:
      out.update({k: v for k, v in dataclasses.asdict(self.part).items() if v is not None})
    return out

  def get(self, name, default=None):
    return self.values().get(name, default)

  def to_json(self):
    value = {"version": self.version}
    for field in dataclasses.fields(self):
      item = getattr(self, field.name)
      if field.name == "version" or item is None:
        continue
      value[field.name] = ({k: v for k, v in dataclasses.asdict(item).items() if v is not None}
                           if field.name in _PART_CLASSES or field.name == "distillation"
                           else item)
    return json.dumps(value, indent=2, sort_keys=True) + "\n"

  @classmethod
  def from_json(cls, text, source="run_settings.json"):
    """A record from its JSON (version 1's flat object or version 2's); errors name `source`.
    Fields this version does not know are logged and skipped (a hand-added note).

    Raises:
      ValueError: not a JSON object, or a field of the wrong type (naming it).
      NewerVersionError: a version this one does not read.
    """
    value = json_object(text, source)
    version = value.pop("version", 1)
    if not _is_a(version, int) or version < 1:
      raise ValueError(f"{source}: version should be a whole number from 1, got "
                       f"{json.dumps(version)}")
    if version > VERSION:
      raise NewerVersionError(f"{source}: version {version}, written by a newer official-bert "
                              f"(this one reads versions 1 to {VERSION}): upgrade "
                              f"official-bert to read it")
    model_type = value.get("model_type")
    if model_type is not None and not isinstance(model_type, str):
      raise ValueError(f"{source}: model_type should be a string, got {json.dumps(model_type)}")
    flat = dict(value)
    distillation = flat.pop("distillation", None)
    nested = set()  # fields of a version 2 part, checked there (named "part.field")
    for name in _PART_CLASSES:
      part = flat.pop(name, None)
      if part is not None and not isinstance(part, dict):
        raise ValueError(f"{source}: {name} should be a JSON object (its fields), got "
                         f"{json.dumps(part)}")
      if part:
        _check_types(_PART_CLASSES[name], part, source, f"{name}.")
        flat.update(part)
        nested.update(part)
    if distillation is not None and not isinstance(distillation, dict):
      raise ValueError(f"{source}: distillation should be a JSON object (its fields), got "
                       f"{json.dumps(distillation)}")
    top = {f.name for f in dataclasses.fields(cls)} - set(_PART_CLASSES) - {"version"}
    part_cls = PARTS.get(model_type, (None, None))[1]
    known = top | ({f.name for f in dataclasses.fields(part_cls)} if part_cls else set())
    unknown = sorted(set(flat) - known)
    if unknown:
      logging.warning("%s: fields %s are not part of a %s's record (version %s); ignored.",
                      source, unknown, model_type, version)
    _check_types(cls, {k: v for k, v in flat.items() if k in top}, source)
    if part_cls:  # version 1's flat fields
      _check_types(part_cls, {k: v for k, v in flat.items() if k in known - top - nested},
                   source)
    if flat.get("labels") is not None and not all(isinstance(l, str) for l in flat["labels"]):
      raise ValueError(f"{source}: labels should be a list of label names (strings; the "
                       f"labels as given go in label_values), got {json.dumps(flat['labels'])}")
    flat.pop("model_type", None)
    record = cls.of(model_type, **{k: v for k, v in flat.items() if k in known})
    if isinstance(distillation, dict):
      record.distillation = _distillation_part(distillation, source)
    record.version = VERSION
    return record


def json_object(text, source):
  """The JSON object (a dict) in `text`; ValueError naming `source` (its file) otherwise."""
  try:
    value = json.loads(text)
  except json.JSONDecodeError as e:
    raise ValueError(f"{source}: not valid JSON ({e})") from None
  if not isinstance(value, dict):
    raise ValueError(f"{source}: expected a JSON object, got {type(value).__name__}")
  return value


def _distillation_part(value, source="run record"):
  known = {f.name for f in dataclasses.fields(DistillationPart)}
  unknown = sorted(set(value) - known)
  if unknown:
    logging.warning("%s: distillation fields %s are not known (version %s); ignored.", source,
                    unknown, VERSION)
  value = {k: v for k, v in value.items() if k in known}
  _check_types(DistillationPart, value, source, "distillation.")
  return DistillationPart(**value)


# What each field's JSON value must be, by its annotation (Optional[x] -> x).
_TYPE_NAMES = {bool: "true or false", int: "a whole number", float: "a number",
               str: "a string", list: "a list"}


def _is_a(value, kind):
  """Whether a JSON value is of `kind` as a record means it: true/false is no number."""
  if kind is bool:
    return isinstance(value, bool)
  if kind is int:
    return isinstance(value, int) and not isinstance(value, bool)
  if kind is float:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
  return isinstance(value, kind)


def _check_types(cls, values, source, prefix=""):
  """ValueError naming `source` and the field whose value is not of its field's type: a
  hand-edited "false" (a string, which Python reads as true) or "neg,pos" (not a list)."""
  kinds = {f.name: next((a for a in typing.get_args(f.type) if a is not type(None)), f.type)
           for f in dataclasses.fields(cls)}
  for name, value in values.items():
    kind = kinds.get(name)
    if value is not None and kind in _TYPE_NAMES and not _is_a(value, kind):
      raise ValueError(f"{source}: {prefix}{name} should be {_TYPE_NAMES[kind]}, got "
                       f"{json.dumps(value)}")
