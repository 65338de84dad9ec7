"""A TFRecord file checked against the features its reader expects, at its first record: the
one check of `official_bert`'s input pipeline (before training) and `show_pretraining_data`
(before reading), so a file that is not a TFRecord, is empty, has the wrong compression or was
written with other lengths is named with the flag to change, not a TensorFlow error.
"""

import re

import tensorflow as tf

from data_prep import schema


def op_error_text(error):
  """A TensorFlow op error's own words ("truncated record at 29670"), without the function
  and op names TensorFlow wraps them in."""
  text = (error.message if hasattr(error, "message") else str(error)).strip()
  text = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", text.splitlines()[0] if text else "")
  return re.sub(r"\s*\[Op:[^\]]*\].*$", "", text)


def first_example(path, compression):
  """The first record of `path` as a `tf.train.Example`; ValueError naming the file if bad."""
  try:
    records = list(tf.data.TFRecordDataset(path, compression_type=compression).take(1))
  except (tf.errors.DataLossError, tf.errors.OutOfRangeError) as e:
    kind = "GZIP-compressed " if compression else ""
    raise ValueError(f"{path}: not a valid {kind}TFRecord file ({op_error_text(e)})") from e
  if not records:
    raise ValueError(f"{path}: empty file, no records")
  try:
    return tf.train.Example.FromString(records[0].numpy())
  except Exception as e:  # protobuf's DecodeError; its module path varies by implementation
    raise ValueError(f"{path}: the first record is not a tf.train.Example ({e})") from e


def _length_flag(name, length, seq_length):
  if name.startswith("masked_lm"):
    return "--max_predictions_per_seq"
  return "--max_seq_length" if length == seq_length else "expected"


def check_files(paths, features):
  """Checks the first record of each file against `features` (writers' names).

  Returns (compression, v2_names) shared by all files. Raises ValueError naming the file
  for a bad or empty file, mixed compression or feature names, a missing feature (records
  of another task), or a feature whose length is not the one the flags ask for.
  """
  if not paths:
    raise ValueError("no input files")
  compressions = {p: schema.compression_of(p) for p in paths}
  if len(set(compressions.values())) > 1:
    gz = [p for p, c in compressions.items() if c]
    plain = [p for p, c in compressions.items() if not c]
    raise ValueError(f"mixed compression: {len(gz)} GZIP file(s) (e.g. {gz[0]}) and "
                     f"{len(plain)} uncompressed (e.g. {plain[0]}); use one kind")
  compression = compressions[paths[0]]
  seq_length = next((f.length for f in features if f.name == "input_ids"), None)
  v2_first = None
  for path in paths:
    feature = first_example(path, compression).features.feature
    v2 = schema.V2_NAMES["input_ids"] in feature
    if v2_first is None:
      v2_first = v2
    elif v2 != v2_first:
      raise ValueError(f"{path}: uses {'v2' if v2 else 'v1'} feature names but {paths[0]} "
                       f"uses {'v2' if v2_first else 'v1'}; files must share one naming")
    named = schema.with_v2_names(features) if v2 else features
    missing = [f.name for f in named if f.name not in feature]
    if missing:
      raise ValueError(f"{path}: records lack feature(s) {missing} (they have "
                       f"{sorted(feature)}): not written for this task?")
    for f in named:
      kind = "float_list" if f.dtype == schema.FLOAT32 else "int64_list"
      if feature[f.name].WhichOneof("kind") != kind:
        raise ValueError(f"{path}: {f.name} is a {feature[f.name].WhichOneof('kind')}, "
                         f"expected a {kind}")
      found = len(getattr(feature[f.name], kind).value)
      if found != f.length:
        raise ValueError(f"{path}: {f.name} has length {found} but "
                         f"{_length_flag(f.name, f.length, seq_length)}={f.length}")
  return compression, v2_first
