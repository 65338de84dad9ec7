"""The run plumbing every fine-tuning command shares (run_classifier, run_ner, run_squad,
run_swag).

A command supplies a *job* (tasks/: ner_job, squad_job, swag_job, classifier_job,
classifier_own_files): what its data is and how to score and write
predictions.

    class Job:
      def prepare(self) -> Data                       # write/reuse TFRecords in output_dir
      def make_task(self, bert_config) -> tasks.base.Task  # with `keep_features` for scoring
      def score(self, split, outputs) -> dict         # corpus metrics (F1, MCC, ...)
      def write_predictions(self, split, outputs) -> [path]  # --do_predict's files
      def main_metric(self) -> str                    # --best_metric's default
      def run_record(self) -> dict                    # task, model_type, labels (after prepare)

and `run(settings, job, record)` does the rest, from typed `settings.FinetuningSettings`:
strategy, model config, initial weights (ours, google-research TF1, or Hugging Face
safetensors), training with the one training loop (resume from output_dir, warm start from
init_checkpoint), evaluation through the one evaluation path (`evaluation.evaluate`: the
task's losses and ratio metrics over the whole dev set, plus the job's corpus-level metrics
from the outputs) and prediction. A command's main is `settings_from_flags` (its flags, and
--output_dir's run settings) then `run_or_restart` (`run`, or the --num_restarts restarts).
"""

import collections
import dataclasses
import os

from absl import logging
import numpy as np
import tensorflow as tf

from data_prep import tfrecord_io
from official_bert.interop import case_check
from official_bert.interop import model_files
from official_bert.interop import model_folder
from official_bert.interop import run_record
from official_bert.modeling import model_types
from official_bert.training import best_checkpoint
from official_bert.training import common_flags
from official_bert.training import distribution
from official_bert.training import evaluation
from official_bert.training import output_lock
from official_bert.training import restarts
from official_bert.training import runner
from official_bert.training import settings as settings_lib

# What a job prepared: the training file and its size, and split name -> file to evaluate
# or predict ({} when not asked for).
Data = collections.namedtuple("Data", ["train_file", "num_train_examples", "eval_files",
                                       "predict_files"])
# Settings a later run on the directory takes from run_settings.json when their flags are
# not given: they must equal training's for the features to mean the same.
INHERITED_FLAGS = ("do_lower_case", "max_seq_length")


# (path, which flag, the state of its model files) -> ModelFolder: a run asks for its config,
# vocabulary and case several times (and its jobs again); the folder is read once, and read
# again only when its files change (a first run writes them into --output_dir).
_READ = {}


def _files_state(path):
  directory = model_files.directory_of(path)
  state = []
  for name in model_files.MODEL_FILES + (model_files.HF_CONFIG_FILE,):
    file = os.path.join(directory, name)
    if tf.io.gfile.exists(file):
      stat = tf.io.gfile.stat(file)
      state.append((name, stat.mtime_nsec, stat.length))
  return tuple(state)


def _read_once(path, flag, **kwargs):
  key = (path, flag, _files_state(path))
  if key not in _READ:
    if len(_READ) > 32:  # a process running many jobs (tests, a study) keeps the recent
      _READ.clear()
    _READ[key] = model_folder.read(path, names=model_folder.Names(path=flag), **kwargs)
  return _READ[key]


def _own_folder(settings):
  """The `model_folder.ModelFolder` of --output_dir, if an earlier run of it wrote its files
  there (`model_files.write`) and trained: a resumed, --do_eval or --do_predict run on it
  needs no model flags. Files without a checkpoint are a failed run's: --init_checkpoint's
  model is the one."""
  output_dir = getattr(settings, "output_dir", None)  # extract_features' settings have none
  if (output_dir and tf.io.gfile.exists(os.path.join(output_dir, model_files.CONFIG_FILE))
      and _trained_here(output_dir)):
    return _read_once(output_dir, "--output_dir", require_vocab=False)
  return None


def _init_folder(settings):
  """The `model_folder.ModelFolder` of --init_checkpoint (any format; its config and
  vocabulary may be absent: the flags give them), or None (ValueError if it does not
  exist)."""
  if not settings.init_checkpoint:
    return None
  return _read_once(settings.init_checkpoint, "--init_checkpoint", require_config=False,
                    require_vocab=False)


def trained_labels(settings, model_types):
  """The label names (in id order) of the trained model a run reads: --output_dir's (its run
  record's, else its labels.txt), else --init_checkpoint's where it was trained as one of
  `model_types` (or says nothing of its type); None for a pretrained model."""
  output_dir = getattr(settings, "output_dir", None)
  labels = model_files.labels_of(output_dir) if output_dir else None
  if labels:
    return labels
  init = _init_folder(settings)
  if init is None or init.record.model_type not in (None,) + tuple(model_types):
    return None
  return init.labels


def check_not_the_pretrained_folder(settings):
  """ValueError, before anything is written, where a training run's --output_dir is the folder
  of --init_checkpoint and that holds a pretrained model (no fine-tuned model's run record):
  the run would write its labels, records and run record into the model's folder, which
  would then read as a fine-tuned model without its head. A fine-tuned model's own folder
  (training continued in place) is not refused."""
  if not (settings.do_train and settings.init_checkpoint and settings.output_dir):
    return
  init_dir = model_files.directory_of(settings.init_checkpoint)
  if tfrecord_io.absolute(init_dir) != tfrecord_io.absolute(settings.output_dir):
    return
  if _init_folder(settings).record.model_type in model_types.HEAD_TYPES:
    return
  raise ValueError(f"--output_dir={settings.output_dir} is the folder of --init_checkpoint="
                   f"{settings.init_checkpoint}, a pretrained model: the run would write its "
                   f"checkpoints, labels and records into the model's folder. Choose a new "
                   f"--output_dir (the model is read from --init_checkpoint as it is)")


def _trained_here(output_dir):
  """Whether --output_dir holds a trained model's checkpoint (a run to resume or read)."""
  return bool(output_dir) and tf.io.gfile.isdir(output_dir) and bool(
      model_files.latest_checkpoint(output_dir))


def check_trained_labels(settings, labels, given_by):
  """ValueError, before anything is written, where --output_dir holds a trained model whose
  labels (names, in id order) are not `labels` (from `given_by`: a flag or the training
  file): its head would be read under other names, or would not fit. Also
  `check_init_labels`, before the run writes its labels."""
  if not _trained_here(settings.output_dir):
    check_init_labels(settings, labels)
    return
  trained = model_files.labels_of(settings.output_dir)
  if trained and list(trained) != list(labels):
    raise ValueError(f"--output_dir={settings.output_dir} holds a model trained with labels "
                     f"{list(trained)} (in that order); {given_by} gives {list(labels)}: use a "
                     f"new --output_dir, or leave {given_by} out to use the model's labels")


def check_init_labels(settings, labels):
  """ValueError where --init_checkpoint is a model trained with `labels` (this run's, in id
  order) in another order: its head fits, is loaded, and would score each label as another
  (a CoNLL --data_dir's fixed order on a model trained on own files, --label_names reordered).
  Other label sets (a new task on a trained model) are the user's choice."""
  if not labels or _trained_here(settings.output_dir):
    return  # a resumed --output_dir: `check_trained_labels`
  init = _init_folder(settings)
  if init is None or not init.labels:
    return
  trained, given = [str(label) for label in init.labels], [str(label) for label in labels]
  if model_files.is_reordering(trained, given):
    raise ValueError(f"--init_checkpoint={settings.init_checkpoint} was trained with labels "
                     f"{trained} (in that order); this run's are the same in another order, "
                     f"{given}: its head would score each label as another. Give the labels in "
                     f"the model's order (--label_names, or own files: --train_file, "
                     f"--dev_file, --test_file, whose labels the model's record keeps)")


# The config fields that make a trained model another one (its weights' shapes, its function):
# a run in an --output_dir that trained with other values would restore part of the model.
_MODEL_DEFINING = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                   "intermediate_size", "hidden_act", "max_position_embeddings",
                   "type_vocab_size")


def model_config(settings):
  """The model's `config_and_source`, checked against --max_seq_length and against the model
  trained in --output_dir (`check_trained_config`)."""
  config, source = config_and_source(settings)
  config.check_sequence_length(settings.max_seq_length, "--max_seq_length", source)
  check_trained_config(settings, config, source)
  return config


def check_trained_config(settings, config, source):
  """ValueError when --output_dir holds a model trained with another config than `config`
  (from `source`): the run would resume (or evaluate) it with part of its weights, and
  rewrite its bert_config.json."""
  own = _own_folder(settings)
  if own is None or own.config is None or source == own.config_file:
    return
  differ = [f"{name} {getattr(own.config, name)} vs {getattr(config, name)}"
            for name in _MODEL_DEFINING if getattr(own.config, name) != getattr(config, name)]
  if differ:
    raise ValueError(f"--output_dir={settings.output_dir} holds a model trained with another "
                     f"config than {source} ({'; '.join(differ)}): a run there resumes, "
                     f"evaluates or predicts with that model. Choose a new --output_dir, or "
                     f"leave the model flags out to use the trained one")


def config_and_source(settings):
  """(BertConfig, its file): settings.bert_config_file, else the bert_config.json in
  --output_dir, else the config beside --init_checkpoint (a Hugging Face config.json, or a
  bert_config.json)."""
  if settings.bert_config_file:
    source = settings.bert_config_file
    config = model_files.read_config(source)
  else:
    folder = next((f for f in (_own_folder(settings), _init_folder(settings))
                   if f and f.config), None)
    if folder is None:
      raise ValueError("--bert_config_file is required (unless --output_dir or "
                       "--init_checkpoint holds a bert_config.json, or --init_checkpoint is a "
                       "Hugging Face model with its config.json)")
    source, config = folder.config_file, folder.config
  return config, source


def vocab_file(settings):
  """settings.vocab_file, else the vocab.txt in --output_dir, else the one beside
  --init_checkpoint."""
  if settings.vocab_file:
    return settings.vocab_file
  for folder in (_own_folder(settings), _init_folder(settings)):
    if folder and folder.vocab_file:
      return folder.vocab_file
  raise ValueError("--vocab_file is required")


def folder_case(settings):
  """(do_lower_case, its source) of the model the run reads (--output_dir's, else
  --init_checkpoint's; `model_folder.folder_case`), or None without either."""
  folder = _own_folder(settings) or _init_folder(settings)
  if folder is None:
    return None
  return model_folder.folder_case(model_files.beside(folder.path), folder.record,
                                  settings.vocab_file or folder.vocab_file)


def check_case(settings):
  """--do_lower_case against the checkpoint's name, tokenizer_config.json and run record
  (--output_dir's, else --init_checkpoint's) and the vocabulary (`case_check`); skipped with
  --allow_case_mismatch."""
  if settings.allow_case_mismatch:
    return
  folder = next((f for f in (_own_folder(settings), _init_folder(settings)) if f), None)
  witness, source, folder_vocab = None, None, None
  if folder is not None:
    beside = model_files.beside(folder.path)
    witness, source = model_folder.declared_case(beside, folder.record)
    folder_vocab = beside.vocab
  case_check.check(settings.do_lower_case, settings.init_checkpoint, vocab_file(settings),
                   witness, source, folder_vocab)


def prepare_splits(settings, write, eval_splits=("dev",), predict_splits=("test",)):
  """Writes (or reuses) the records of the splits the do_* settings need; returns a `Data`.

  Args:
    write: (split, vocab_file) -> (TFRecord path, number of examples).
  """
  vocab = vocab_file(settings)
  splits = ((["train"] if settings.do_train else [])
            + (list(eval_splits) if settings.do_eval else [])
            + (list(predict_splits) if settings.do_predict else []))
  written = {split: write(split, vocab) for split in splits}
  train_file, num_train_examples = written.get("train", (None, 0))
  return Data(train_file, num_train_examples,
              {s: written[s][0] for s in eval_splits if s in written},
              {s: written[s][0] for s in predict_splits if s in written})


def run(settings, job, record=None):
  """Trains, evaluates and predicts as the settings say; returns {"train", split: results}.

  Args:
    settings: a `settings.FinetuningSettings` (or a script's subclass).
    job: see the module docstring.
    record: dict of the run's flags, written to TensorBoard next to the model config.
  """
  if not (settings.do_train or settings.do_eval or settings.do_predict):
    raise ValueError("at least one of --do_train, --do_eval and --do_predict must be set")
  if not settings.output_dir:
    raise ValueError("--output_dir is required")
  output_dir = settings.output_dir
  theirs = model_files.others_files(output_dir, (settings.vocab_file, settings.bert_config_file))
  if theirs:  # before any work: the run would write over them, or beside another model
    raise ValueError(f"--output_dir={output_dir} holds {', '.join(theirs)}, not a run's (no "
                     f"{model_files.RUN_SETTINGS_FILE}, no checkpoint): a run writes its model "
                     f"files there; choose a new --output_dir, or move them")
  check_not_the_pretrained_folder(settings)
  tracking = check_training_controls(settings)
  runner.check_optimizer_settings(settings)
  tfrecord_io.make_dirs(output_dir, "--output_dir")
  # Before anything touches TensorFlow (the data step tokenizes with TF ops).
  strategy = runner.setup_runtime(settings)
  config = model_config(settings)
  check_case(settings)  # before hours of training on mangled text
  vocab = vocab_file(settings)
  data = job.prepare()
  if hasattr(job, "run_record"):  # the fixed label sets (GLUE, CoNLL's --data_dir) too
    check_init_labels(settings, job.run_record().labels)
  task = job.make_task(config)
  steps, warmup = settings_lib.finetuning_steps(settings, data.num_train_examples or 1)
  trainer = runner.make_trainer(settings, strategy, task, steps, warmup)
  init = settings.init_checkpoint  # any format: the loop's warm start reads them all
  chief = distribution.is_chief(strategy)
  results = {}
  evaluated = {}  # step -> {split: scores} of the evaluations during training
  if settings.do_train:
    companions = []
    if chief:  # the output directory exports and predicts without the model flags
      task_record = dataclasses.replace(
          getattr(job, "run_record", run_record.RunRecord)(),
          max_seq_length=settings.max_seq_length)
      companions = model_files.write(output_dir, config, vocab, settings.do_lower_case,
                                     task_record)
    on_evaluation = keeper = None
    if tracking:
      if not data.eval_files:
        raise ValueError("--eval_every_steps/--best_metric/--early_stopping_patience: this "
                         "script has no dev data to evaluate during training")
      on_evaluation, keeper = periodic_evaluation(settings, job, task, trainer, data,
                                                  companions, evaluated)
    logging.info("Training: %d examples, %d steps (%d warmup), batch %d",
                 data.num_train_examples, steps, warmup, settings.train_batch_size)
    run_config = {"bert_config": config.to_dict(), "flags": record or {}}
    with runner.explained_input_errors(data.train_file, settings.bert_config_file):
      results["train"] = runner.run_training(
          trainer, runner.dataset_fn(task, data.train_file, settings.train_batch_size, True,
                                     settings.random_seed),
          output_dir, steps, settings.steps_per_loop, settings.save_checkpoints_steps, init,
          settings.keep_checkpoint_max, run_config,
          eval_every_steps=settings.eval_every_steps or steps, on_evaluation=on_evaluation)
    if keeper:
      use_best(settings, job, task, trainer, data, keeper, evaluated)
  else:
    runner.restore_for_eval(trainer, output_dir, init)  # raises if there is nothing
    best_dir = best_checkpoint.best_dir(output_dir)
    best = model_files.latest_checkpoint(best_dir)
    last = model_files.latest_checkpoint(output_dir)
    if best and last and os.path.basename(best) != os.path.basename(last):
      logging.warning("%s holds the best checkpoint of the training (%s); this run reads the "
                      "last (step %d): give --output_dir=%s for the best", best_dir,
                      os.path.basename(best), int(trainer.step.numpy()), best_dir)
  results.update(evaluate_and_predict(settings, job, task, trainer, data, evaluated))
  return results


def check_training_controls(settings):
  """Whether the run evaluates during training and keeps best/; bad combinations raise."""
  tracking = bool(settings.eval_every_steps or settings.best_metric
                  or settings.early_stopping_patience)
  if tracking and not (settings.do_train and settings.do_eval):
    raise ValueError("--eval_every_steps, --best_metric and --early_stopping_patience need "
                     "--do_train and --do_eval (the dev data to score)")
  if settings.early_stopping_patience and not settings.eval_every_steps:
    raise ValueError("--early_stopping_patience counts evaluations during training: set "
                     "--eval_every_steps too")
  return tracking


def periodic_evaluation(settings, job, task, trainer, data, companions, evaluated):
  """`run_training`'s `on_evaluation`: scores the dev splits (the one evaluation path, as at
  the end), keeps the best in OUTPUT_DIR/best, says whether patience ran out. Returns it and
  the `best_checkpoint.BestKeeper`.

  `evaluated` receives each evaluation's {split: scores} under its step, so that none is
  repeated after training.
  """
  metric = settings.best_metric or getattr(job, "main_metric", lambda: "loss")()
  keeper = best_checkpoint.BestKeeper(settings.output_dir, metric,
                                      settings.early_stopping_patience, companions,
                                      chief=distribution.is_chief(trainer.strategy))
  logging.info("Evaluating every %s steps; best checkpoint by %s (%s is better) in %s",
               settings.eval_every_steps or "training's last", metric,
               "higher" if keeper.higher else "lower",
               best_checkpoint.best_dir(settings.output_dir))

  def on_evaluation(step):
    if keeper.last_evaluated_step == step:  # a resumed run: this step was scored already
      return keeper.should_stop
    scores = evaluate_splits(settings, job, task, trainer, data.eval_files)
    evaluated[step] = scores
    keeper.update(next(iter(scores.values())), trainer.model, step)  # MNLI: the matched set
    return keeper.should_stop
  return on_evaluation, keeper


def use_best(settings, job, task, trainer, data, keeper, evaluated):
  """After training that kept a better checkpoint than its last step: loads OUTPUT_DIR/best's
  weights, so that the run's final --do_eval scores and its --do_predict predictions are the
  best checkpoint's.

  A run with --best_metric means the best evaluation's model as its result, as --num_restarts
  does (`restarts`): OUTPUT_DIR/eval_results.txt (MNLI's eval_matched_results.txt and
  eval_mismatched_results.txt)
  and the returned scores become the best step's (the scores this process computed at that
  evaluation; after a resume, best/ scored again), the predictions are best/'s. What stays of
  the last step: its TensorBoard events (no event is written again) and OUTPUT_DIR's latest
  checkpoint, which a resumed run continues from and which a later run with only --do_eval or
  --do_predict on OUTPUT_DIR reads (give it --output_dir=OUTPUT_DIR/best for the best).
  """
  final_step = int(trainer.step.numpy())
  if not keeper.restore_if_earlier(trainer.model, trainer.step):
    return
  best_step = int(trainer.step.numpy())
  logging.info("Evaluating and predicting with the best checkpoint (%s, step %d: %s = %s), "
               "not the last step's weights (step %d)", keeper.directory, best_step,
               keeper.metric, keeper.state["best_value"], final_step)
  scores = evaluated.get(best_step)
  if scores is None:  # kept before a resume
    scores = evaluate_splits(settings, job, task, trainer, data.eval_files, summaries=False)
  elif distribution.is_chief(trainer.strategy):
    for split, split_scores in scores.items():  # the last evaluation wrote its own
      evaluation.write_results(settings.output_dir, evaluation.results_name(split),
                               split_scores, best_step, summaries=False)
  evaluated[best_step] = scores


def settings_from_flags(settings_class, flag_values):
  """A fine-tuning command's settings: its flags, and for the inherited ones not given,
  --output_dir's run_settings.json (`inherit_run_settings`)."""
  return inherit_run_settings(common_flags.settings_from_flags(settings_class, flag_values),
                              flag_values)


def run_or_restart(settings, make_job, record=None):
  """`run(settings, make_job(settings), record)`; with --num_restarts, `restarts.run`, which
  makes one job per restart.

  Args:
    make_job: settings -> job (a job class, or a function choosing one).
  """
  with output_lock.held(settings.output_dir, settings.distribution_strategy):
    if settings.num_restarts > 1:
      return restarts.run(settings, make_job, lambda s, job: run(s, job, record))
    return run(settings, make_job(settings), record)


def inherit_run_settings(settings, flag_values):
  """Settings whose flags were not given, from --output_dir's run record (a later
  --do_eval/--do_predict/resumed run must tokenize as training did); then --do_lower_case,
  when not given, from the model folder (`model_folder`'s one case policy: a cased folder
  trains cased without a flag)."""
  record = model_files.read_run_settings(settings.output_dir)
  source = os.path.join(settings.output_dir, model_files.RUN_SETTINGS_FILE)
  # The model types this task trains (a job's RECORDED_MODEL_TYPE: one, or a tuple of them).
  kinds = getattr(settings, "RECORDED_MODEL_TYPE", None) or ()
  kinds = (kinds,) if isinstance(kinds, str) else tuple(kinds)
  if record.model_type is None and kinds and not getattr(settings, "do_train", False):
    # Evaluating or predicting into a new --output_dir with a model trained as this task (a
    # command's OUTPUT_DIR, its best/, a folder the Python API saved): as it was trained.
    # Training anew from it (other data) takes the flags as given.
    init = _init_folder(settings)
    if init is not None and init.record.model_type in kinds:
      record = init.record
      source = os.path.join(model_files.directory_of(init.path), model_files.RUN_SETTINGS_FILE)
  stored = record.values()
  names = INHERITED_FLAGS
  same_kind = bool(record.model_type) and record.model_type in kinds
  if same_kind:
    names += getattr(settings, "RECORDED_FLAGS", ())  # the task's own, from its kind's record
  if same_kind and _trained_here(settings.output_dir):
    # What the trained head is (a classifier's problem type): a flag cannot make it another.
    for name in getattr(settings, "HEAD_FLAGS", ()):
      if (flag_values[name].present and _recorded(stored.get(name), name)
          and getattr(settings, name) != stored[name]):
        raise ValueError(f"--{name}={getattr(settings, name)} but --output_dir="
                         f"{settings.output_dir} holds a model trained with {name}="
                         f"{stored[name]} ({source}): leave --{name} out, or use a new "
                         f"--output_dir")
  inherited = {name: stored[name] for name in names
               if _recorded(stored.get(name), name) and not flag_values[name].present
               and getattr(settings, name) != stored[name]}
  if inherited:
    logging.info("From %s: %s", source, ", ".join(f"--{k}={v}" for k, v in inherited.items()))
    settings = dataclasses.replace(settings, **inherited)
  if "do_lower_case" not in inherited and not flag_values["do_lower_case"].present:
    case = folder_case(settings)
    if case is not None and case[0] != settings.do_lower_case:
      logging.info("--do_lower_case=%s: from %s", case[0], case[1])
      settings = dataclasses.replace(settings, do_lower_case=case[0])
  if "max_seq_length" not in inherited and not flag_values["max_seq_length"].present:
    settings = fitting_sequence_length(settings)
  return settings


def fitting_sequence_length(settings):
  """--max_seq_length's default, or the model's max_position_embeddings where that is fewer:
  a small model needs no flag, as on every route (`model_folder.default_sequence_length`)."""
  try:
    config, source = config_and_source(settings)
  except ValueError:
    return settings  # named where the model's config is read
  length = model_folder.default_sequence_length(config, settings.max_seq_length)
  if length != settings.max_seq_length:
    logging.info("--max_seq_length=%d: the model (%s) has max_position_embeddings=%d", length,
                 source, config.max_position_embeddings)
    settings = dataclasses.replace(settings, max_seq_length=length)
  return settings


def _recorded(value, name):
  """Whether a run record holds a value for the flag `name` (a doc_stride of 0: none)."""
  return value is not None and not (name == "doc_stride" and value == 0)


def evaluate_splits(settings, job, task, trainer, eval_files, summaries=True):
  """{split: scores} of the current weights, through the one evaluation path: the task's
  losses and metrics (`evaluation.evaluate`) plus the job's corpus scores; each written to
  `<name>_results.txt`, the log and (`summaries`) OUTPUT_DIR/<name> in TensorBoard (chief)."""
  chief = distribution.is_chief(trainer.strategy)
  results = {}
  step = int(trainer.step.numpy())
  for split, path in eval_files.items():
    scores, outputs = evaluation.evaluate(
        trainer, runner.dataset_fn(task, path, settings.eval_batch_size, False, None),
        keep_outputs=True)
    scores = dict(scores, **job.score(split, outputs), global_step=step)
    if chief:
      evaluation.write_results(settings.output_dir, evaluation.results_name(split), scores,
                               step, summaries)
    results[split] = scores
  return results


def evaluate_and_predict(settings, job, task, trainer, data, evaluated=None):
  """Scores the eval splits (unless `evaluated` holds this step's scores already), writes
  the job's predictions (chief)."""
  strategy = trainer.strategy
  chief = distribution.is_chief(strategy)
  step = int(trainer.step.numpy())
  results = {}
  if settings.do_eval:
    done = (evaluated or {}).get(step)
    results = dict(done) if done else evaluate_splits(settings, job, task, trainer,
                                                      data.eval_files)
  for split, path in (data.predict_files if settings.do_predict else {}).items():
    outputs = evaluation.predict(
        strategy, trainer.model,
        runner.dataset_fn(task, path, settings.predict_batch_size, False, None),
        keep_features=task.keep_features)
    if chief:
      written = job.write_predictions(split, outputs)
      logging.info("Predictions (%s) written to %s", split,
                   ", ".join(written or [settings.output_dir]))
  return results


def softmax(logits):
  """Probabilities over the last axis (numpy), as the original's test_results.tsv."""
  z = np.exp(logits - np.max(logits, axis=-1, keepdims=True))
  return z / np.sum(z, axis=-1, keepdims=True)
