"""The one evaluation path for every task: `evaluate`, then `write_results`.

`evaluate` runs the task's loss and metric sums over a finite dataset (or its first
`max_steps` batches) and divides only at the end, by the normalizers summed over the whole
set: the loss over the evaluation set is that of one big batch (as the original's
`tf.metrics.mean` with weights), whatever the batching or strategy. With `keep_outputs` it
also returns the model's outputs and the task's `keep_features` for every example, in input
order, for corpus-level scores that are not ratios of sums (F1, MCC, SQuAD answers).
`predict` is the same loop without labels (test sets).
"""

import os

from absl import logging
import numpy as np
import tensorflow as tf

from data_prep import tfrecord_io

SUM = tf.distribute.ReduceOp.SUM


def _distributed_step(strategy, replica_fn):
  # reduce_retracing: batches cut to their longest sequence (`padding`) come in a dozen
  # lengths; after the second, one trace with the length left open serves them all.
  return tf.function(lambda features: strategy.run(replica_fn, args=(features,)),
                     reduce_retracing=True)


def _finite_loop(strategy, step, dataset_fn, max_steps=None):
  """Yields `step`'s per-replica results for each batch of a finite dataset."""
  iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))
  steps = 0
  while max_steps is None or steps < max_steps:
    optional = iterator.get_next_as_optional()
    if not optional.has_value():
      return
    yield step(optional.get_value())
    steps += 1


def _append_local(strategy, values, chunks):
  # Replicas took consecutive batches of the stream: their concatenation is input order.
  for name, value in values.items():
    for local in strategy.experimental_local_results(value):
      chunks.setdefault(name, []).append(np.asarray(local))


def _concatenated(chunks):
  return {name: np.concatenate(parts) for name, parts in chunks.items()}


def evaluate(trainer, dataset_fn, max_steps=None, keep_outputs=False):
  """Scores the current weights of `trainer.model` on `trainer.task`.

  Args:
    dataset_fn: (tf.distribute.InputContext) -> per-replica batched, finite dataset.
    max_steps: batches at most (None: the whole dataset).
    keep_outputs: also return the outputs and kept features of every example.
  Returns:
    (scores, outputs): scores holds each loss, their sum "loss" and each ratio metric as
    floats; outputs is {name: np.ndarray [examples, ...]} or None.
  """
  strategy, task, model = trainer.strategy, trainer.task, trainer.model

  def replica_fn(features):
    features = trainer.checked(features)
    outputs = model(features, training=False)
    sums = {"loss/" + k: v for k, v in task.loss_sums(features, outputs).items()}
    sums.update({"norm/" + k: v for k, v in task.loss_normalizers(features).items()})
    for name, (num, den) in task.metric_sums(features, outputs).items():
      sums["num/" + name], sums["den/" + name] = num, den
    kept = {}
    if keep_outputs:
      kept = dict(outputs)
      kept.update({name: features[name] for name in task.keep_features})
    if not sums:  # no labels (SQuAD's prediction windows): only the kept outputs count
      return {}, kept
    return tf.distribute.get_replica_context().all_reduce(SUM, sums), kept

  totals, chunks = None, {}
  step = trainer.cached_function(("evaluate", keep_outputs),
                                 lambda: _distributed_step(strategy, replica_fn))
  for sums, kept in _finite_loop(strategy, step, dataset_fn, max_steps):
    # All replicas hold the same all-reduced sums: take the first's.
    sums = {k: float(np.asarray(strategy.experimental_local_results(v)[0]))
            for k, v in sums.items()}
    totals = sums if totals is None else {k: totals[k] + sums[k] for k in totals}
    _append_local(strategy, kept, chunks)
  if totals is None:
    raise ValueError("evaluation data is empty")
  return ratios(totals, task.loss_epsilons), (_concatenated(chunks) if keep_outputs else None)


def ratios(totals, loss_epsilons):
  """{"loss/x", "norm/x", "num/m", "den/m"} sums -> {x, "loss", m} as the loop reports them."""
  scores = {}
  for key, value in totals.items():
    kind, name = key.split("/", 1)
    if kind == "loss":
      normalizer = totals["norm/" + name] + loss_epsilons.get(name, 0.0)
      if normalizer == 0:  # nothing it applies to (a loss of scores, a file without them)
        continue
      scores[name] = value / normalizer
    elif kind == "num":
      scores[name] = value / max(totals["den/" + name], 1e-12)
  if any(key.startswith("loss/") for key in totals):
    scores["loss"] = sum(scores.get(key.split("/", 1)[1], 0.0) for key in totals
                         if key.startswith("loss/"))
  return scores


def predict(strategy, model, dataset_fn, keep_features=()):
  """Model outputs for every example of a finite dataset, in input order, as numpy arrays.

  Args:
    dataset_fn: (tf.distribute.InputContext) -> per-replica batched, finite dataset.
    keep_features: feature names to pass through next to the outputs (e.g. "unique_ids").
  Returns:
    dict name -> np.ndarray [num_examples, ...] with the model outputs and kept features.
  """
  def replica_fn(features):
    outputs = dict(model(features, training=False))
    outputs.update({name: features[name] for name in keep_features})
    return outputs

  chunks = {}
  for outputs in _finite_loop(strategy, _distributed_step(strategy, replica_fn), dataset_fn):
    _append_local(strategy, outputs, chunks)
  return _concatenated(chunks)


def results_name(split):
  """"dev" -> "eval", "dev_matched" -> "eval_matched": the original's file names."""
  return split.replace("dev", "eval", 1) if split.startswith("dev") else split


def write_results_file(path, results):
  """One `key = value` a line, sorted, in the original's eval_results.txt format (the keys
  are the task's scores: docs/fine-tuning.md); atomically."""
  tfrecord_io.write_text(path, "".join(f"{key} = {results[key]}\n" for key in sorted(results)))


def write_split_results(output_dir, split, results):
  """A predicted split's `{split}_results.txt` (and TensorBoard); `results` None (a file
  without labels, predicted only): none, and an earlier labelled file's, which would
  describe other predictions, is removed. Returns the paths written."""
  path = os.path.join(output_dir, f"{split}_results.txt")
  if results is None:
    if tfrecord_io.gfile().exists(path):
      tfrecord_io.gfile().remove(path)
    return []
  write_results(output_dir, split, results, step=0)
  return [path]


def write_results(output_dir, name, results, step, summaries=True):
  """`{name}_results.txt` (`write_results_file`) and, with `summaries`, TensorBoard (not for
  scores of an earlier step, whose events are there already)."""
  logging.info("%s results: %s", name, results)
  write_results_file(os.path.join(output_dir, f"{name}_results.txt"), results)
  if not summaries:
    return
  writer = tf.summary.create_file_writer(os.path.join(output_dir, name))
  with writer.as_default(step=step):
    for key, value in results.items():
      if isinstance(value, (int, float)) and key != "global_step":
        tf.summary.scalar(key, value)
  writer.flush()
