"""A smaller student's first weights, taken from its teacher's (DistilBERT's initialization).

A student of K layers keeps the teacher's embeddings, pooler and task head, and K of its L
Transformer layers, evenly spaced from the first to the last (`teacher_layers`: for 6 of 12,
layers 0, 2, 4, 7, 9, 11, which is the choice DistilBERT made). The result is written as a
model folder (a TF1 checkpoint in canonical names, bert_config.json, vocab.txt and the case)
that a run warm-starts from like any other (`--init_checkpoint`).
"""

import dataclasses
import json
import os
import re

import numpy as np
import tensorflow as tf

from data_prep import tfrecord_io
from official_bert.interop import model_files
from official_bert.interop import run_record
from official_bert.interop import tf1_checkpoint
from official_bert.interop import weights_io

CHECKPOINT_NAME = "bert_model.ckpt"
_LAYER = re.compile(r"^(bert/encoder/layer_)(\d+)(/.*)$")


def teacher_layers(teacher_num_layers, student_num_layers):
  """The K teacher layers (0-based) a K-layer student starts from: evenly spaced, first and
  last included (one layer: the last)."""
  if not 1 <= student_num_layers <= teacher_num_layers:
    raise ValueError(f"--student_num_layers={student_num_layers}: must be 1 to the teacher's "
                     f"{teacher_num_layers} layers")
  if student_num_layers == 1:
    return [teacher_num_layers - 1]
  return [int(i) for i in np.round(np.linspace(0, teacher_num_layers - 1, student_num_layers))]


def uniform_hidden_pairs(teacher_num_layers, student_num_layers, layers=None):
  """For each student hidden state (0 = embeddings, i = after layer i), the teacher's it is
  matched with: the output of the teacher layer student layer i was copied from, else
  TinyBERT's uniform map (i * L / K)."""
  if layers is None:
    layers = [
        round((i + 1) * teacher_num_layers / student_num_layers) - 1
        for i in range(student_num_layers)
    ]
  return [0] + [layer + 1 for layer in layers]


def student_tensors(tensors, layers):
  """Teacher weights (canonical TF1 name -> array) -> the student's: Transformer layer
  `layers[j]` becomes layer j, the other layers are dropped, everything else is kept."""
  position = {layer: j for j, layer in enumerate(layers)}
  out = {}
  for name, value in tensors.items():
    match = _LAYER.match(name)
    if match is None:
      out[name] = value
    elif int(match.group(2)) in position:
      out[f"{match.group(1)}{position[int(match.group(2))]}{match.group(3)}"] = value
  return out


def write(teacher, directory, num_layers):
  """Writes the student folder of `teacher` (a `model_folder.ModelFolder`) with `num_layers`
  layers into `directory`, atomically (a folder renamed when complete); reuses one written
  for the same teacher weights and layers. Returns the teacher layers taken."""
  layers = teacher_layers(teacher.config.num_hidden_layers, num_layers)
  source = weights_io.weights_source(teacher.path)
  key = {
      "teacher": tfrecord_io.absolute(source),
      "layers": layers,
      "teacher_weights": _weights_state(source)
  }
  key_file = os.path.join(directory, "student_init.json")
  if tf.io.gfile.exists(key_file) and tfrecord_io.read_text(key_file).strip() == _json(key):
    return layers  # a rerun or resumed run: the same student start
  weights = weights_io.read_weights(source)
  temporary = tfrecord_io.temporary_path(directory.rstrip("/"))
  if tf.io.gfile.exists(temporary):
    tf.io.gfile.rmtree(temporary)
  tf.io.gfile.makedirs(temporary)
  tf1_checkpoint.write_tf1_checkpoint(student_tensors(weights.tensors, layers),
                                      os.path.join(temporary, CHECKPOINT_NAME))
  config = dataclasses.replace(teacher.config, num_hidden_layers=num_layers)
  model_files.write(
      temporary, config, teacher.vocab_file, teacher.do_lower_case,
      dataclasses.replace(teacher.record, distillation=None)
      if teacher.record else run_record.RunRecord())
  if teacher.labels:  # (the record holds them too)
    model_files.write_labels(temporary, teacher.labels, required=False)
  tfrecord_io.write_text(os.path.join(temporary, "student_init.json"), _json(key) + "\n")
  if tf.io.gfile.exists(directory):
    if not tf.io.gfile.exists(key_file):  # never remove what we did not write
      raise ValueError(f"{directory} exists and is not a student folder this command wrote; "
                       "move it away")
    tf.io.gfile.rmtree(directory)  # ours, for another teacher or layer choice
  tf.io.gfile.rename(temporary, directory)
  return layers


def _weights_state(path):
  files = tf.io.gfile.glob(path + "*") if not tf.io.gfile.exists(path) else [path]
  return sorted((os.path.basename(f), tf.io.gfile.stat(f).length) for f in files)


def _json(value):
  return json.dumps(value, sort_keys=True)
