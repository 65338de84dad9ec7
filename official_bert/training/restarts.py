"""Random restarts (`--num_restarts=K`), as the paper did for its small data sets: "we ran
several random restarts and selected the best model on the Dev set".

Restart k trains in OUTPUT_DIR/restart_k with seed `--random_seed + k` (data order, head
initialization, dropout), everything else the same, and is scored on the dev data (its
`best/`, when it keeps one with --eval_every_steps/--best_metric, else its final weights).
The best restart by `--best_metric` (default: the task's main metric) becomes the run's
result in OUTPUT_DIR/best: its weights and the files that make the folder self-contained,
so `export --checkpoint=OUTPUT_DIR/best`, `--init_checkpoint` and `--do_predict` use it.
OUTPUT_DIR/restarts.json and the log give every restart's dev scores with the metric's mean,
standard deviation and best; OUTPUT_DIR/eval_results.txt holds the best restart's scores.
`--do_predict` predicts with the best restart into OUTPUT_DIR.

An interrupted run started again with the same flags resumes: finished restarts are scored
again from their checkpoints (no training), the interrupted one resumes from its own.
"""

import dataclasses
import json
import os
import statistics

from absl import logging
import tensorflow as tf

from data_prep import tfrecord_io
from official_bert.interop import folder_writes
from official_bert.interop import model_files
from official_bert.training import best_checkpoint
from official_bert.training import evaluation

RESTARTS_FILE = "restarts.json"


def restart_dir(output_dir, k):
  return os.path.join(output_dir, f"restart_{k}")


def check(settings):
  """Bad combinations of --num_restarts raise."""
  if settings.num_restarts > 1 and not (settings.do_train and settings.do_eval):
    raise ValueError("--num_restarts needs --do_train and --do_eval (restarts are compared on "
                     "the dev data)")


def _result(directory, k, results):
  """(scores, weights directory) of restart k in `directory`: its best/ if it kept one, else
  its final weights."""
  best = best_checkpoint.best_dir(directory)
  best_file = os.path.join(best, best_checkpoint.RESULTS_FILE)
  if tf.io.gfile.exists(best_file):
    return json.loads(tfrecord_io.read_text(best_file)), best
  scores = [v for key, v in results.items() if key != "train"]
  if not scores:
    raise ValueError(f"restart {k} has no dev scores (--do_eval)")
  return scores[0], directory


def _copy_weights_and_files(source, target):
  """`target` anew (built beside, swapped in) from `source`'s latest checkpoint, model files
  and scores."""
  latest = model_files.latest_checkpoint(source)
  if latest is None:
    raise ValueError(f"no checkpoint in {source}")

  def fill(building):
    best_checkpoint.copy_present(tf.io.gfile.glob(latest + ".*"), building)
    name = os.path.basename(latest)
    tfrecord_io.write_text(os.path.join(building, "checkpoint"),
                           f'model_checkpoint_path: "{name}"\n'
                           f'all_model_checkpoint_paths: "{name}"\n')
    scores = [os.path.join(source, n) for n in ("eval_results.txt", best_checkpoint.RESULTS_FILE)]
    best_checkpoint.copy_present(model_files.model_file_paths(source) + scores, building)
  folder_writes.replace_own_folder(target, fill)


def summarize(metric_spec, restarts):
  """restarts.json's content: every restart's scores, the metric's mean, sd and best."""
  metric, higher = best_checkpoint.parse_metric(metric_spec)
  for r in restarts:
    if metric not in r["scores"]:
      raise ValueError(f"--best_metric={metric} is not among the evaluation's scores "
                       f"({', '.join(sorted(r['scores']))})")
  values = [float(r["scores"][metric]) for r in restarts]
  best = (max if higher else min)(range(len(values)), key=lambda i: values[i])
  return {"metric": metric, "higher_is_better": higher, "restarts": restarts,
          "mean": statistics.mean(values),
          "std": statistics.stdev(values) if len(values) > 1 else 0.0,
          "best": dict(restart=best, seed=restarts[best]["seed"], value=values[best])}


def run(settings, make_job, run_once):
  """Trains `settings.num_restarts` seeds with `run_once(settings, job)`; keeps the best.

  Returns the run's results: {"restarts": summary, split: the best restart's scores, ...}.
  """
  check(settings)
  output_dir = settings.output_dir
  tfrecord_io.make_dirs(output_dir, "--output_dir")
  restarts, metric_spec = [], settings.best_metric
  for k in range(settings.num_restarts):
    seed = settings.random_seed + k
    logging.info("Restart %d of %d: seed %d in %s", k + 1, settings.num_restarts, seed,
                 restart_dir(output_dir, k))
    once = dataclasses.replace(settings, output_dir=restart_dir(output_dir, k),
                               random_seed=seed, num_restarts=1, do_predict=False)
    job = make_job(once)
    results = run_once(once, job)
    metric_spec = metric_spec or getattr(job, "main_metric", lambda: "loss")()
    scores, weights = _result(once.output_dir, k, results)
    restarts.append({"restart": k, "seed": seed, "output_dir": once.output_dir,
                     "weights": weights,
                     "scores": {n: v for n, v in scores.items()
                                if isinstance(v, (int, float)) and not isinstance(v, bool)}})
  summary = summarize(metric_spec, restarts)
  best = restarts[summary["best"]["restart"]]
  _copy_weights_and_files(best["weights"], best_checkpoint.best_dir(output_dir))
  tfrecord_io.write_text(os.path.join(output_dir, RESTARTS_FILE),
                         json.dumps(summary, indent=2) + "\n")
  # OUTPUT_DIR reads as the best restart's: its config, vocabulary, labels and scores.
  best_checkpoint.copy_present(model_files.model_file_paths(best["weights"]), output_dir)
  evaluation.write_results(output_dir, "eval", best["scores"],
                           int(best["scores"].get("global_step", 0)))
  logging.info("Restarts (%s): %s; mean %.4f, sd %.4f, best %.4f (restart %d, seed %d), in %s",
               summary["metric"], ", ".join(f"{r['scores'][summary['metric']]:.4f}"
                                            for r in restarts),
               summary["mean"], summary["std"], summary["best"]["value"],
               summary["best"]["restart"], summary["best"]["seed"],
               best_checkpoint.best_dir(output_dir))
  results = {"restarts": summary, "dev": best["scores"]}
  if settings.do_predict:
    predict = dataclasses.replace(
        settings, do_train=False, do_eval=False, num_restarts=1,
        init_checkpoint=best_checkpoint.best_dir(output_dir), bert_config_file=None,
        vocab_file=None, eval_every_steps=0, best_metric=None, early_stopping_patience=0)
    run_once(predict, make_job(predict))
  return results
