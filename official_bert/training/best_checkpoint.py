"""The best evaluation's weights, kept in OUTPUT_DIR/best, and early stopping.

After each evaluation during training (`--eval_every_steps`), `BestKeeper.update` compares
the chosen metric with the best so far. An improvement writes OUTPUT_DIR/best afresh: the
model weights and step (an object-based checkpoint that `export`, `--init_checkpoint` and
`--do_predict` read; the run's own final evaluation and predictions load it,
`restore_if_earlier`), `best_results.json` / `eval_results.txt` (the scores) and the files
that make the folder self-contained (bert_config.json, vocab.txt, ...). The folder is built
beside the old one and swapped in when complete, so an interruption never leaves half of it.

The best value and the count of evaluations without improvement live in best/state.json
(written atomically after every evaluation), so a run resumed in the same output directory
keeps both: early stopping counts across interruptions, and a finished early stop stays
finished.
"""

import json
import os

from absl import logging
import tensorflow as tf

from data_prep import tfrecord_io
from official_bert.interop import checkpointing
from official_bert.interop import folder_writes
from official_bert.interop import model_files
from official_bert.training import evaluation

BEST_DIR = "best"
STATE_FILE = "state.json"
RESULTS_FILE = "best_results.json"
# Metrics that improve downwards, by their name's last word: losses, error rates (loss,
# masked_lm_loss, mean_absolute_error). Everything else (accuracy, F1, MCC, correlations,
# exact match) improves upwards, per-class scores too, whatever their label is called (a
# classifier's f1_<label>, an NER type's <type>_f1: f1_loss, error_recall).
_LOWER_IS_BETTER = ("loss", "error", "perplexity", "mse", "mae")
_PER_CLASS_SCORES = ("precision", "recall", "f1", "support")


def parse_metric(spec):
  """(name, higher_is_better) of a --best_metric: "max:NAME" / "min:NAME" say the direction,
  else it follows the name's last word (losses and errors lower, everything else higher)."""
  direction, colon, name = spec.partition(":")
  if colon and direction in ("max", "min"):
    return name, direction == "max"
  words = spec.lower().split("_")
  if len(words) > 1 and (words[0] in _PER_CLASS_SCORES or words[-1] in _PER_CLASS_SCORES):
    return spec, True
  return spec, words[-1] not in _LOWER_IS_BETTER


def best_dir(output_dir):
  return os.path.join(output_dir, BEST_DIR)


class BestKeeper:
  """Tracks `metric` over evaluations; keeps the best weights in OUTPUT_DIR/best.

  Args:
    output_dir: the run's output directory.
    metric: the score to compare (a key of the evaluation's scores).
    patience: evaluations without improvement before `should_stop` (0: never).
    companions: files copied into best/ with every new best (config, vocabulary, settings),
      so best/ exports and predicts on its own.
    chief: only the chief writes (every worker computes the same scores).
  """

  def __init__(self, output_dir, metric, patience=0, companions=(), chief=True):
    self.directory = best_dir(output_dir)
    self.spec = metric
    self.metric, self.higher = parse_metric(metric)
    self.patience = patience
    self.companions = list(companions)
    self.chief = chief
    self.state = {"metric": self.spec, "higher_is_better": self.higher, "best_value": None,
                  "best_step": None, "evaluations_without_improvement": 0,
                  "last_evaluated_step": None, "stopped_early": False}
    self._load()

  def _load(self):
    path = os.path.join(self.directory, STATE_FILE)
    if not tf.io.gfile.exists(path):
      return
    try:
      stored = json.loads(tfrecord_io.read_text(path))
    except json.JSONDecodeError:
      logging.warning("%s is not JSON: best-checkpoint tracking starts over", path)
      return
    if stored.get("metric") != self.spec:
      # Another metric's best says nothing about this one's: start over (best/ is replaced
      # by the next evaluation).
      logging.warning("%s tracked %s, this run %s: best-checkpoint tracking starts over",
                      path, stored.get("metric"), self.spec)
      return
    self.state.update(stored)
    logging.info("Resumed best-checkpoint tracking: best %s = %s at step %s, %d evaluation(s) "
                 "without improvement", self.metric, self.state["best_value"],
                 self.state["best_step"], self.state["evaluations_without_improvement"])

  @property
  def should_stop(self):
    return self.state["stopped_early"]

  @property
  def last_evaluated_step(self):
    return self.state["last_evaluated_step"]

  def _improves(self, value):
    best = self.state["best_value"]
    return best is None or (value > best if self.higher else value < best)

  def update(self, scores, model, step):
    """Records an evaluation at `step` of `model`'s current weights; returns whether it is
    the best so far (then best/ holds these weights)."""
    if self.metric not in scores:
      raise ValueError(f"--best_metric={self.metric} is not among the evaluation's scores "
                       f"({', '.join(sorted(scores))})")
    value = float(scores[self.metric])
    improved = self._improves(value)
    state = self.state
    state["last_evaluated_step"] = step
    if improved:
      state.update(best_value=value, best_step=step, evaluations_without_improvement=0)
    else:
      state["evaluations_without_improvement"] += 1
      if self.patience and state["evaluations_without_improvement"] >= self.patience:
        state["stopped_early"] = True
    logging.info("Evaluation at step %d: %s = %s (%s; best %s at step %s%s)", step, self.metric,
                 value, "new best" if improved else "no improvement", state["best_value"],
                 state["best_step"],
                 f", {state['evaluations_without_improvement']}/{self.patience} without "
                 "improvement" if self.patience else "")
    if state["stopped_early"]:
      logging.info("Early stopping at step %d: %d evaluations without improving %s", step,
                   state["evaluations_without_improvement"], self.metric)
    if self.chief:
      if improved:
        self._write_best(scores, model, step)
      else:
        self._write_state(self.directory)
    return improved

  def restore_if_earlier(self, model, step):
    """Loads best/'s weights into `model` and its step into the `step` variable if the best
    evaluation came before `step` (at `step` itself, best/ holds the same weights); returns
    whether it did."""
    best_step = self.state["best_step"]
    if best_step is None or best_step >= int(step.numpy()):
      return False
    # The chief wrote best/ when it evaluated best_step; training went on after that, so
    # every worker finds it complete.
    path = model_files.latest_checkpoint(self.directory)
    if path is None:
      logging.warning("No checkpoint in %s: keeping the last step's weights", self.directory)
      return False
    with checkpointing.damaged_checkpoint_errors(path):
      checkpointing.model_checkpoint(model, step=step).read(path).expect_partial()
    return True

  def _write_state(self, directory):
    tfrecord_io.write_text(os.path.join(directory, STATE_FILE),
                           json.dumps(self.state, indent=2) + "\n")

  def _write_best(self, scores, model, step):
    """Builds the new best/ beside the old one, then swaps it in."""
    def fill(building):
      # Model weights and step only: what export and warm starts read, a third of the size
      # of a training checkpoint (no Adam slots).
      step_variable = tf.Variable(step, dtype=tf.int64, trainable=False)
      manager = tf.train.CheckpointManager(
          checkpointing.model_checkpoint(model, step=step_variable), building, max_to_keep=1)
      manager.save(checkpoint_number=step)
      results = {k: v for k, v in scores.items() if isinstance(v, (int, float, str))}
      tfrecord_io.write_text(os.path.join(building, RESULTS_FILE),
                             json.dumps(dict(results, global_step=step), indent=2) + "\n")
      evaluation.write_results_file(os.path.join(building, "eval_results.txt"), results)
      copy_present(self.companions, building)
      self._write_state(building)
    folder_writes.replace_own_folder(self.directory, fill)
    logging.info("Best %s = %s at step %d: weights and scores in %s", self.metric,
                 scores[self.metric], step, self.directory)


def copy_present(paths, directory):
  """Copies each of `paths` that exists into `directory` (same base name, overwritten)."""
  for path in paths:
    if path and tf.io.gfile.exists(path):
      tf.io.gfile.copy(path, os.path.join(directory, os.path.basename(path)), overwrite=True)
