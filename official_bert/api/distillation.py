"""`TextClassifier.distill`: a trained classifier (the teacher) into a smaller student, in
Python, with the command's task and student (`run_distillation`).

  student = ob.TextClassifier.distill(teacher_folder, texts, labels, unlabeled=more_texts,
                                      num_layers=2, epochs=2)
  student.save("student")        # a model folder like any other; its record names the teacher

The student keeps `num_layers` of the teacher's layers (`interop.student_init`), or is the
`student` model given; `fit` trains it on `tasks.distillation.DistillationTask`'s loss: the
labels' loss times (1 - distill_weight) plus distill_weight times the soft loss against the
teacher (temperature-softened KL, times T^2). `unlabeled` texts (no labels) take the soft
loss only. TensorFlow's backend (the teacher runs inside the step).
"""

import os
import tempfile

import numpy as np
import tensorflow as tf

from official_bert.interop import model_folder
from official_bert.interop import run_record
from official_bert.interop import student_init
from official_bert.tasks.distillation import UNLABELED
from official_bert.tasks.distillation import DistillationTask


def student_of(teacher, num_layers):
  """A model of the teacher's class with `num_layers` of its layers, its embeddings, head,
  labels and preprocessor (`student_init.write`, through temporary folders)."""
  with tempfile.TemporaryDirectory() as tmp:
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
  for what, mine, theirs in (
      ("labels", student.labels, teacher.labels),
      ("num_classes", student.num_classes, teacher.num_classes),
      ("problem_type", student.problem_type, teacher.problem_type),
      ("vocabulary", student.preprocessor.vocabulary, teacher.preprocessor.vocabulary),
      ("lower_case", student.preprocessor.lower_case, teacher.preprocessor.lower_case)):
    if mine != theirs:
      shown = "" if what == "vocabulary" else f": {mine!r} against the teacher's {theirs!r}"
      raise ValueError(f"distill: the student's {what} differs from the teacher's{shown}")


def _unlabeled_labels(student, n):
  if student.problem_type == "regression":
    return np.full([n], np.nan, np.float32)
  if student.problem_type == "multi_label":
    return np.full([n, student.num_classes], UNLABELED, np.float32)
  return np.full([n], UNLABELED, np.int32)


def _concatenate(a, b):
  if isinstance(a, tuple):
    return tuple(tf.concat([x, y], 0) for x, y in zip(a, b))
  return tf.concat([a, b], 0)


def distill(cls,
            teacher,
            x,
            y,
            unlabeled=None,
            num_layers=None,
            student=None,
            temperature=2.0,
            distill_weight=0.5,
            epochs=3,
            batch_size=32,
            learning_rate=5e-5,
            seed=None,
            validation_data=None,
            **fit_kwargs):
  """See `TextClassifier.distill`."""
  if isinstance(teacher, (str, os.PathLike)):
    teacher_path = os.fspath(teacher)
    teacher = cls.from_preset(teacher_path)
  else:
    teacher_path = getattr(teacher, "name", type(teacher).__name__)
  if not isinstance(teacher, cls):
    raise ValueError(f"distill: the teacher is a {type(teacher).__name__}, not a {cls.__name__}")
  layers = None
  if student is None:
    if not num_layers:
      raise ValueError("distill: give num_layers (the student keeps that many of the teacher's "
                       "layers) or student (a model of the same labels)")
    student, layers = student_of(teacher, num_layers)
  elif num_layers:
    raise ValueError("distill: num_layers takes the teacher's layers; it does not go with a "
                     "student model")
  else:
    _check_student(student, teacher)
  task = DistillationTask(student.task,
                          teacher.task,
                          None,
                          temperature=temperature,
                          distill_weight=distill_weight)
  teacher.network.trainable = False
  task.teacher = teacher.network
  texts = student._texts(x)  # pylint: disable=protected-access
  n = int((texts[0] if isinstance(texts, tuple) else texts).shape[0])
  labels = student.encode_labels(y, n)
  num_unlabeled = 0
  if unlabeled is not None:
    more = student._texts(unlabeled)  # pylint: disable=protected-access
    if isinstance(more, tuple) != isinstance(texts, tuple):
      raise ValueError("distill: unlabeled must be single texts or pairs, as x is")
    num_unlabeled = int((more[0] if isinstance(more, tuple) else more).shape[0])
    texts = _concatenate(texts, more)
    labels = np.concatenate([labels, _unlabeled_labels(student, num_unlabeled)], 0)
  total = n + num_unlabeled
  dataset = tf.data.Dataset.from_tensor_slices(
      (texts, labels)).shuffle(total, seed=seed, reshuffle_each_iteration=True).batch(batch_size)
  student.task = task
  try:
    student.compile(learning_rate=learning_rate)
    student.fit(dataset, epochs=epochs, seed=seed, validation_data=validation_data, **fit_kwargs)
  finally:
    student.task = task.student_task  # predict, evaluate and save as a plain classifier
  student.distillation = run_record.DistillationPart(
      teacher=teacher_path,
      teacher_num_layers=len(teacher.backbone.transformer_layers),
      student_init="teacher_layers" if layers is not None else "given",
      teacher_layers=layers,
      temperature=temperature,
      distill_weight=distill_weight,
      hidden_weight=0.0,
      unlabeled_examples=num_unlabeled or None)
  return student
