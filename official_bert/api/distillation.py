"""`TextClassifier.distill`, `TokenTagger.distill`: a trained classifier or tagger (the
teacher) into a smaller student, in Python, with the command's task and student
(`run_distillation`).

  student = ob.TextClassifier.distill(teacher_folder, texts, labels, unlabeled=more_texts,
                                      num_layers=2, epochs=2)
  student = ob.TokenTagger.distill(teacher, word_lists, tag_lists, unlabeled=sentences,
                                   num_layers=2)
  student.save("student")        # a model folder like any other; its record names the teacher

The student keeps `num_layers` of the teacher's layers (`interop.student_init`), or is the
`student` model given; `fit` trains it on `tasks.distillation.DistillationTask`'s loss: the
labels' loss times (1 - distill_weight) plus distill_weight times the soft loss against the
teacher (temperature-softened KL, times T^2), plus TinyBERT's hidden-state and attention
losses when their weights are set. `unlabeled` texts (no labels) take the teacher's losses
only. TensorFlow's backend (the teacher runs inside the step).
"""

import os
import tempfile

from official_bert.interop import model_folder
from official_bert.interop import run_record
from official_bert.interop import student_init
from official_bert.tasks.distillation import DistillationTask
from official_bert.tasks.distillation import default_attention_weight


def student_of(teacher, num_layers, teacher_folder=None):
  """A model of the teacher's class with `num_layers` of its layers, its embeddings, head,
  labels and preprocessor (`student_init.write`): read from `teacher_folder` where the
  teacher came from one, else from the teacher saved to a temporary folder."""
  with tempfile.TemporaryDirectory() as tmp:
    source = teacher_folder
    if source is None:
      source = os.path.join(tmp, "teacher")
      teacher.save(source)
    folder = os.path.join(tmp, "student")
    layers = student_init.write(model_folder.read(source), folder, num_layers)
    student = type(teacher).from_preset(folder)
  student.preprocessor = teacher.preprocessor  # the same vocabulary, case and length
  return student, layers


def _check_student(student, teacher):
  """A given student must read and answer as the teacher: the same labels in the same order,
  problem type, vocabulary and case."""
  checks = [("labels", lambda m: m.labels),
            ("num_classes", lambda m: getattr(m, "num_classes", None)),
            ("problem_type", lambda m: getattr(m, "problem_type", None)),
            ("vocabulary", lambda m: m.preprocessor.vocabulary),
            ("lower_case", lambda m: m.preprocessor.lower_case)]
  for what, read in checks:
    mine, theirs = read(student), read(teacher)
    if mine != theirs:
      shown = "" if what == "vocabulary" else f": {mine!r} against the teacher's {theirs!r}"
      raise ValueError(f"distill: the student's {what} differs from the teacher's{shown}")


def distill(cls,
            teacher,
            x,
            y,
            unlabeled=None,
            num_layers=None,
            student=None,
            temperature=2.0,
            distill_weight=0.5,
            hidden_weight=0.0,
            attention_weight=None,
            epochs=3,
            batch_size=32,
            learning_rate=5e-5,
            seed=None,
            validation_data=None,
            **fit_kwargs):
  """See `TextClassifier.distill` and `TokenTagger.distill`."""
  teacher_folder = None
  if isinstance(teacher, (str, os.PathLike)):
    teacher_folder = os.fspath(teacher)
    teacher = cls.from_preset(teacher_folder)
  if not isinstance(teacher, cls):
    raise ValueError(f"distill: the teacher is a {type(teacher).__name__}, not a {cls.__name__}")
  layers = None
  if student is None:
    if not num_layers:
      raise ValueError("distill: give num_layers (the student keeps that many of the teacher's "
                       "layers) or student (a model of the same labels)")
    student, layers = student_of(teacher, num_layers, teacher_folder)
  elif num_layers:
    raise ValueError("distill: num_layers takes the teacher's layers; it does not go with a "
                     "student model")
  else:
    _check_student(student, teacher)
  teacher_config, student_config = teacher.backbone.bert_config, student.backbone.bert_config
  attention_weight = default_attention_weight(attention_weight, hidden_weight, student_config,
                                              teacher_config)
  pairs = None
  if hidden_weight or attention_weight:
    pairs = student_init.uniform_hidden_pairs(teacher_config.num_hidden_layers,
                                              student_config.num_hidden_layers, layers)
  task = DistillationTask(student.task,
                          teacher.task,
                          None,
                          temperature=temperature,
                          distill_weight=distill_weight,
                          hidden_weight=hidden_weight,
                          hidden_pairs=pairs,
                          attention_weight=attention_weight)
  dataset, num_unlabeled = student.distillation_batches(x, y, unlabeled, batch_size, seed)
  task.attach(student.network, teacher.network)
  student.task = task
  skips = teacher.backbone.skip_padding  # the task sets it in the student's steps
  try:
    student.compile(learning_rate=learning_rate)
    student.fit(dataset, epochs=epochs, seed=seed, validation_data=validation_data, **fit_kwargs)
  finally:
    student.task = task.student_task  # predict, evaluate and save as a plain model
    task.detach(student.network)
    teacher.backbone.skip_padding = skips
  student.distillation = run_record.DistillationPart(
      teacher=teacher_folder or getattr(teacher, "name",
                                        type(teacher).__name__),
      teacher_num_layers=teacher_config.num_hidden_layers,
      student_init="teacher_layers" if layers is not None else "given",
      teacher_layers=layers,
      temperature=temperature,
      distill_weight=distill_weight,
      hidden_weight=hidden_weight,
      attention_weight=attention_weight,
      unlabeled_examples=num_unlabeled or None)
  return student
