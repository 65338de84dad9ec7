"""GLUE splits -> classifier TFRecords (`OUTPUT_DIR/<split>.tf_record`), cached while the
settings match: for `create_classifier_data` and `official_bert.tasks.classifier_job`."""

import os

from data_prep import schema
from data_prep import tfrecord_io
from data_prep.classification import features as classifier_features
from data_prep.classification import glue_processors


def task_splits(processor, splits=("train", "dev", "test")):
  """Split names to write: "dev"/"test" expand to the task's (MNLI has two of each)."""
  out = []
  for split in splits:
    out.extend({"dev": processor.eval_splits, "test": processor.predict_splits}.get(
        split, (split,)))
  return out


def write_split(processor, split, output_dir, vocab_file, do_lower_case, max_seq_length,
                data_dir=None, tfds_data_dir=None, max_examples=0, seed=12345):
  """Writes (or reuses, if written with the same settings) `output_dir/<split>.tf_record`.

  Args:
    max_examples: keep a seeded random subset of this many examples (0: all).
  Returns:
    (path, meta): meta has "num_examples", "labels", "guids", "is_regression".
  """
  path = os.path.join(output_dir, f"{split}.tf_record")
  key = {"task": processor.name, "split": split, "data_dir": data_dir,
         "tfds_data_dir": tfds_data_dir, "vocab_file": tfrecord_io.absolute(vocab_file),
         "do_lower_case": bool(do_lower_case), "max_seq_length": max_seq_length,
         "max_examples": max_examples, "seed": seed}

  def build():
    examples = glue_processors.load_examples(processor, split, data_dir, tfds_data_dir)
    examples = classifier_features.subsample(examples, max_examples, seed)
    if not examples:
      raise ValueError(f"{processor.name} {split}: no examples")
    tokenizer = classifier_features.cached_tokenizer(vocab_file, do_lower_case)
    columns = classifier_features.convert_examples(examples, processor.get_labels(),
                                                   max_seq_length, tokenizer)
    features = schema.classifier_features(max_seq_length, processor.is_regression)
    meta = {"labels": processor.get_labels(), "is_regression": processor.is_regression,
            "guids": [e.guid for e in examples]}
    return features, columns, meta

  return path, classifier_features.cached_tfrecord(path, key, build)


def write_task(task_name, splits, output_dir, vocab_file, do_lower_case, max_seq_length,
               data_dir=None, tfds_data_dir=None, max_train_examples=0, seed=12345):
  """`write_split` for each of a GLUE task's `splits` ("dev"/"test" expanded, see
  `task_splits`), in order; yields (path, meta) as each is written, so a caller can report
  it before the next one starts.

  Args:
    max_train_examples: keep a seeded random subset of the training set (0: all); the other
      splits are written whole.
  """
  processor = glue_processors.get_processor(task_name)
  splits = list(task_splits(processor, splits))
  if data_dir and not (tfds_data_dir or glue_processors.has_tfds_data(processor, data_dir)):
    missing = [f"{split}.tsv" for split in splits
               if not tfrecord_io.is_file(os.path.join(data_dir, f"{split}.tsv"))]
    if missing:  # before any split is written
      raise FileNotFoundError(f"{processor.name}: no {', '.join(missing)} in {data_dir} "
                              f"(the splits: {', '.join(splits)})")
  tfrecord_io.check_replaceable_records(
      [os.path.join(output_dir, f"{split}.tf_record") for split in splits], "--output_dir")
  for split in splits:
    yield write_split(processor, split, output_dir, vocab_file, do_lower_case, max_seq_length,
                      data_dir, tfds_data_dir, max_train_examples if split == "train" else 0,
                      seed)
