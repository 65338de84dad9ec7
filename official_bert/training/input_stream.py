"""Which training input a run's output directory is reading, and from which step.

A resumed run re-reads its seeded input stream and skips what the steps so far consumed
(`runner.dataset_fn`). That is right only while the input is the one those steps read. A
phase 2 resumed in phase 1's directory (the original's recipe: same --output_dir, longer
--max_seq_length, other --input_file) reads a new stream: skipping phase 1's examples in it
would drop (and, over a repeated small file, re-read for nothing) most of phase 2's data.

So OUTPUT_DIR/input_stream.json records the stream (input patterns, sequence length, global
batch size) and the step at which it began; a run whose stream differs starts reading it
from its beginning at the current step, and says so. A directory without the file (written
before it existed) is taken to have read the current stream from step 0.
"""

import json
import os

from absl import logging
import tensorflow as tf

from data_prep import tfrecord_io

STREAM_FILE = "input_stream.json"


def stream_key(input_patterns, seq_length, global_batch_size, group_by_length=False,
               last_partial_batch=False):
  """What identifies a training input stream (JSON-serializable): the files the patterns
  match (absolute, sorted: the same files spelled another way are the same input), and
  --group_by_length / --last_partial_batch, which reorder or cut it (named only when on:
  older records stay valid)."""
  from official_bert.training import input_pipeline  # pylint: disable=g-import-not-at-top
  try:
    files = [tfrecord_io.absolute(p) for p in input_pipeline.expand_patterns(input_patterns)]
  except (ValueError, tf.errors.OpError):  # reported where the input is read
    files = [str(input_patterns)]
  key = {"input_files": files, "max_seq_length": seq_length,
         "global_batch_size": int(global_batch_size)}
  if group_by_length:
    key["group_by_length"] = True
  if last_partial_batch:
    key["last_partial_batch"] = True
  return key


def _read(path):
  if not tf.io.gfile.exists(path):
    return None
  try:
    with tf.io.gfile.GFile(path, "r") as f:
      record = json.loads(f.read())
    return record if isinstance(record, dict) and "first_step" in record else None
  except json.JSONDecodeError:
    logging.warning("%s: not JSON; taking the input as a new stream.", path)
    return {}


_OWN = "OUTPUT_DIR"


def _portable(key, output_dir):
  """`key` with its files inside `output_dir` (a fine-tuning run's own train.tf_record)
  named relative to it: a run folder moved or copied elsewhere (another mount, an rsync)
  reads the same stream, and resumes it where its checkpoint left it."""
  if not key or not isinstance(key.get("input_files"), list):
    return key
  own = tfrecord_io.absolute(output_dir).rstrip("/") + "/"
  files = [_OWN + "/" + f[len(own):] if isinstance(f, str) and f.startswith(own) else f
           for f in key["input_files"]]
  return dict(key, input_files=files)


def first_step(output_dir, key, start_step):
  """The step at which the stream `key` began in `output_dir` (so a resumed run skips the
  examples of `start_step - first_step` steps). `record` writes it once the run has saved a
  checkpoint.

  Every worker computes the same value whether or not the chief has already rewritten the
  file: a new record is (key, start_step), and start_step comes from the shared checkpoint.
  """
  if key is None:  # a dataset function that did not say what it reads
    return 0
  record = _read(os.path.join(output_dir, STREAM_FILE))
  if record is None:
    return 0  # a new directory, or one from before this file: the stream it always read
  key, recorded = _portable(key, output_dir), _portable(record.get("stream"), output_dir)
  if recorded == key and int(record.get("first_step", 0)) <= start_step:
    return int(record["first_step"])
  # Another input, or a record ahead of the checkpoint (checkpoints deleted since).
  if recorded != key:
    changed = _changed_settings(recorded, key)
    if changed:  # the same files read another way: a resume's flags changed, often unmeant
      logging.warning("Resuming at step %d with %s than the checkpoints of %s trained with: "
                      "the rest of the run reads its input anew from its beginning, and "
                      "its steps (--num_train_steps, or epochs in steps) count the new "
                      "batches. Rerun with the first values to resume the same run.",
                      start_step, changed, output_dir)
    else:
      logging.info("The training input changed at step %d (was %s; now %s): reading the "
                   "new input from its beginning.", start_step, record.get("stream"), key)
  return start_step


def _changed_settings(recorded, key):
  """"another global batch size (4 -> 8)" ..., where `recorded` and `key` read the same files
  with other settings; "" when their files differ (a new input: phase 2's)."""
  if not isinstance(recorded, dict) or recorded.get("input_files") != key.get("input_files"):
    return ""
  names = {"global_batch_size": "global batch size (--train_batch_size)",
           "max_seq_length": "sequence length", "group_by_length": "--group_by_length",
           "last_partial_batch": "--last_partial_batch"}
  return ", ".join(f"another {names.get(k, k)} ({recorded.get(k)} -> {key.get(k)})"
                   for k in sorted(set(recorded) | set(key))
                   if k != "input_files" and recorded.get(k) != key.get(k))


def record(output_dir, key, begin, chief=True):
  """Records (chief) that the stream `key` began at step `begin`, when a checkpoint that read
  it is saved: a run that failed before (a mistyped --input_file, a wrong length) leaves the
  record of the input its directory's checkpoints read, and a new directory none."""
  if key is None or not chief:
    return
  path = os.path.join(output_dir, STREAM_FILE)
  content = {"stream": _portable(key, output_dir), "first_step": begin}
  if _read(path) != content:
    tfrecord_io.write_text(path, json.dumps(content, indent=2, sort_keys=True) + "\n")
