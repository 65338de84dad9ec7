"""Writes google-research/bert TF1 checkpoints (`bert_model.ckpt`).

A TF1 checkpoint is name-based: every variable is stored under its graph name, e.g.
`bert/encoder/layer_0/attention/self/query/kernel`, exactly our canonical names
(`weight_names`). Writing builds a throwaway TF1 graph with `tf.compat.v1` variables of those
names and saves it with `tf.compat.v1.train.Saver`, so the files (`.index`, `.data-*`,
`.meta`, `checkpoint`) are what the original code writes and reads: `init_from_checkpoint`,
`Saver.restore`, `tf.train.list_variables` all work on them. Reading (TF1, ours or Hugging
Face, told apart automatically) is `weights_io.read_weights` / `weights_io.load_weights`.
"""

import os

import numpy as np
import tensorflow as tf

from data_prep import tfrecord_io


def write_tf1_checkpoint(tensors, prefix, global_step=None):
  """Writes {name: array} as a TF1 name-based checkpoint at `prefix` (e.g. DIR/bert_model.ckpt).

  Also writes `DIR/checkpoint`, so `tf.train.latest_checkpoint(DIR)` finds it, and the
  `.meta` graph the original's Saver writes. Values are fed through placeholders rather than
  baked into the graph as constants, so BERT-large stays far below the 2 GB GraphDef limit.

  Returns:
    The prefix written (with `-global_step` appended if given, like `Saver.save`).
  """
  directory = os.path.dirname(prefix)
  if directory:
    tf.io.gfile.makedirs(directory)
  graph = tf.Graph()
  with graph.as_default():
    assigns, feeds = [], {}
    for name in sorted(tensors):
      value = np.asarray(tensors[name])
      variable = tf.compat.v1.get_variable(
          name, shape=value.shape, dtype=tf.as_dtype(value.dtype),
          initializer=tf.compat.v1.zeros_initializer(), use_resource=False)
      placeholder = tf.compat.v1.placeholder(variable.dtype.base_dtype, value.shape)
      assigns.append(tf.compat.v1.assign(variable, placeholder))
      feeds[placeholder] = value
    step = None
    if global_step is not None:
      step = tf.compat.v1.train.get_or_create_global_step()
      assigns.append(tf.compat.v1.assign(step, global_step))
    saver = tf.compat.v1.train.Saver(sharded=False)
    with tf.compat.v1.Session(graph=graph) as session:
      session.run(tf.compat.v1.global_variables_initializer())
      session.run(assigns, feed_dict=feeds)
      written = saver.save(session, prefix, global_step=step, write_state=False)
  write_checkpoint_state(written)
  return written


def write_checkpoint_state(prefix):
  """Writes `DIR/checkpoint` naming `prefix` relative to DIR, so the directory can be moved.

  `tf.train.latest_checkpoint(DIR)` (and so `--init_checkpoint=DIR`) then finds `prefix`.
  """
  directory, base = os.path.split(prefix)
  tfrecord_io.write_text(
      os.path.join(directory or ".", "checkpoint"),
      f'model_checkpoint_path: "{base}"\nall_model_checkpoint_paths: "{base}"\n')
