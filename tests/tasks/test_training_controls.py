"""Training controls of the fine-tuning scripts, through run_classifier on a slice of MRPC:
evaluation every N steps, the best checkpoint in OUTPUT_DIR/best (the run's final scores and
predictions), early stopping (kept across a resume), a self-contained OUTPUT_DIR (export and
--do_predict without model flags) and the cased/uncased mismatch checks."""

import glob
import json
import os
import subprocess
import sys

from conftest import CASED_VOCAB
from conftest import CHINESE_VOCAB
from conftest import UNCASED_VOCAB
from conftest import run_command
from conftest import write_vocab_and_config
import pytest
import tensorflow as tf
from test_glue_run_classifier import _glue_slice
from test_glue_run_classifier import read_results
from test_glue_run_classifier import run_script

from data_prep import tokenization
from official_bert.interop import case_check
from official_bert.interop import folder_writes
from official_bert.modeling.bert_config import BertConfig
from official_bert.training import best_checkpoint
from official_bert.training import finetuning_runner
from official_bert.training import settings as settings_lib

pytestmark = pytest.mark.large  # trains or runs commands: `make test`, not `make test-fast`


def eval_events(output_dir):
  """{step: {tag: value}} of the TensorBoard events in OUTPUT_DIR/eval."""
  events = {}
  for path in glob.glob(os.path.join(output_dir, "eval", "events.out.tfevents.*")):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        events.setdefault(event.step, {})[value.tag] = float(tf.make_ndarray(value.tensor))
  return events


def _state(output_dir):
  with open(os.path.join(output_dir, "best", "state.json"), encoding="utf-8") as f:
    return json.load(f)


def _model_tensors(prefix):
  reader = tf.train.load_checkpoint(prefix)
  return {key: reader.get_tensor(key) for key in reader.get_variable_to_shape_map()
          if key.startswith("model/") and "seed_generator" not in key}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
  """9 steps of MRPC, evaluated every 3 (default --best_metric: MRPC's F1)."""
  tmp = tmp_path_factory.mktemp("controls")
  data = _glue_slice(tmp)
  out = tmp / "out"
  proc = run_script("official_bert.run_classifier", tmp, "--task_name=MRPC", f"--data_dir={data}",
                    f"--output_dir={out}", "--do_train", "--do_eval", "--num_train_steps=9",
                    "--eval_every_steps=3", "--learning_rate=1e-3")
  return tmp, data, out, proc


def test_eval_every_steps_writes_each_evaluation(trained):
  _, _, out, proc = trained
  events = eval_events(out)
  assert sorted(events) == [3, 6, 9]  # every 3 steps and the end, nothing repeated after
  assert all({"loss", "accuracy", "f1"} <= set(tags) for tags in events.values())
  for step in (3, 6, 9):
    assert f"Evaluation at step {step}: f1 = " in proc.stderr
  # The run's final scores are the best evaluation's (best/'s), whichever step that was.
  assert (out / "eval_results.txt").read_text() == (out / "best" / "eval_results.txt").read_text()
  # Loops ended at the evaluations: a training checkpoint at each.
  assert all((out / f"ckpt-{step}.index").exists() for step in (3, 6, 9))


def test_best_holds_the_best_evaluations_checkpoint(trained):
  _, _, out, _ = trained
  events = eval_events(out)
  best_f1 = max(tags["f1"] for tags in events.values())
  best_step = min(step for step, tags in events.items() if tags["f1"] == best_f1)  # first
  state = _state(out)
  assert state["metric"] == "f1" and state["higher_is_better"]  # MRPC's main metric
  assert state["best_step"] == best_step and state["best_value"] == pytest.approx(best_f1)
  with open(out / "best" / "best_results.json", encoding="utf-8") as f:
    results = json.load(f)
  assert results["global_step"] == best_step and results["f1"] == pytest.approx(best_f1)
  best = tf.train.latest_checkpoint(str(out / "best"))
  assert best.endswith(f"ckpt-{best_step}")
  assert int(tf.train.load_checkpoint(best).get_tensor(
      "step/.ATTRIBUTES/VARIABLE_VALUE")) == best_step
  ours, training = _model_tensors(best), _model_tensors(str(out / f"ckpt-{best_step}"))
  assert ours.keys() == training.keys() and len(ours) > 10
  assert all((ours[k] == training[k]).all() for k in ours)


def test_output_dir_exports_and_predicts_without_model_flags(trained):
  tmp, data, out, _ = trained
  for directory in (out, out / "best"):
    for name in ("bert_config.json", "vocab.txt", "tokenizer_config.json", "run_settings.json"):
      assert (directory / name).exists(), directory / name
  settings = json.loads((out / "run_settings.json").read_text())
  assert settings == {"version": 2, "task": "MRPC", "model_type": "classifier",
                      "labels": ["0", "1"], "num_labels": 2, "max_seq_length": 32,
                      "do_lower_case": True,
                      "classifier": {"problem_type": "single_label", "text_pairs": True}}
  export_dir = tmp / "exported"
  proc = run_command("official_bert.export", f"--checkpoint={out / 'best'}",
                     f"--export_dir={export_dir}")  # the model type from the run record
  assert proc.returncode == 0, proc.stderr[-3000:]
  info = json.loads((export_dir / "assets.extra" / "export_info.json").read_text())
  assert info["label_names"] == ["0", "1"] and info["max_seq_length"] == 32
  assert info["checkpoint"].endswith(f"ckpt-{_state(out)['best_step']}")
  proc = run_command("official_bert.run_classifier", "--task_name=MRPC", f"--data_dir={data}",
                     f"--output_dir={out}", "--do_predict")
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert len((out / "MRPC.tsv").read_text().splitlines()) == 11


def test_a_run_with_another_config_in_a_trained_output_dir_is_refused(trained):
  """Another --bert_config_file (fewer layers) in a trained OUTPUT_DIR "resumed": the layers
  both had were restored, the others dropped without a word, and bert_config.json and the
  latest checkpoint became the smaller model's."""
  tmp, data, out, _ = trained
  config = json.loads((out / "bert_config.json").read_text())
  other = tmp / "one_layer.json"
  other.write_text(json.dumps(dict(config, num_hidden_layers=1)))
  before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
  proc = run_command("official_bert.run_classifier", "--task_name=MRPC", f"--data_dir={data}",
                     f"--output_dir={out}", f"--bert_config_file={other}", "--do_train",
                     "--num_train_steps=12")
  assert proc.returncode == 1
  assert (f"--output_dir={out} holds a model trained with another config than {other} "
          f"(num_hidden_layers {config['num_hidden_layers']} vs 1)") in proc.stderr, (
              proc.stderr[-2000:])
  assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before


def test_early_stopping_keeps_patience_across_a_resume(tmp_path):
  data = _glue_slice(tmp_path, train=24, dev=8, test=1)
  out = tmp_path / "out"
  # min:global_step never improves after the first evaluation: patience 2 stops at step 9.
  # A cased vocabulary with lower-casing passes only with --allow_case_mismatch.
  flags = ["--task_name=MRPC", f"--data_dir={data}", f"--output_dir={out}", "--do_train",
           "--do_eval", "--eval_every_steps=3", "--best_metric=min:global_step",
           "--early_stopping_patience=2", f"--vocab_file={CASED_VOCAB}",
           "--allow_case_mismatch"]
  run_script("official_bert.run_classifier", tmp_path, *flags, "--num_train_steps=6")
  state = _state(out)
  assert (state["best_step"], state["evaluations_without_improvement"]) == (3, 1)
  assert not state["stopped_early"]
  # "Interrupted" at step 6; resumed with a longer budget: one more evaluation without
  # improvement ends it (a run that forgot the count would go on to step 12).
  proc = run_script("official_bert.run_classifier", tmp_path, *flags, "--num_train_steps=30")
  assert "Early stopping at step 9" in proc.stderr
  # best/ came from the first process: scored again for the final results, no new event.
  assert "with the best checkpoint" in proc.stderr
  assert read_results(out / "eval_results.txt")["global_step"] == "3"
  assert tf.train.latest_checkpoint(str(out)).endswith("ckpt-9")
  state = _state(out)
  assert state["stopped_early"] and state["best_step"] == 3
  assert state["evaluations_without_improvement"] == 2 and sorted(eval_events(out)) == [3, 6, 9]
  assert tf.train.latest_checkpoint(str(out / "best")).endswith("ckpt-3")


def test_final_scores_and_predictions_come_from_the_best_checkpoint(tmp_path):
  data = _glue_slice(tmp_path, train=24, dev=8, test=4)
  out = tmp_path / "out"
  # min:global_step: the first evaluation (step 3) stays the best; training goes on to 6.
  proc = run_script("official_bert.run_classifier", tmp_path, "--task_name=MRPC",
                    f"--data_dir={data}", f"--output_dir={out}", "--do_train", "--do_eval",
                    "--do_predict", "--num_train_steps=6", "--eval_every_steps=3",
                    "--best_metric=min:global_step", "--learning_rate=1e-3")
  assert "with the best checkpoint" in proc.stderr and "step 3:" in proc.stderr
  events = eval_events(out)
  assert sorted(events) == [3, 6] and events[3]["loss"] != events[6]["loss"]  # weights moved
  assert read_results(out / "eval_results.txt")["global_step"] == "3"
  assert tf.train.latest_checkpoint(str(out)).endswith("ckpt-6")  # resuming goes on from 6
  # The predictions are those of a --do_predict run on best/ alone.
  again = run_command("official_bert.run_classifier", "--task_name=MRPC", f"--data_dir={data}",
                      f"--output_dir={out / 'best'}", "--do_predict")
  assert again.returncode == 0, again.stderr[-3000:]
  ours = (out / "test_results.tsv").read_text()
  assert len(ours.splitlines()) == 4 and ours == (out / "best" / "test_results.tsv").read_text()
  # A later --do_predict on OUTPUT_DIR reads the last checkpoint, and says where the best is.
  last = run_command("official_bert.run_classifier", "--task_name=MRPC", f"--data_dir={data}",
                     f"--output_dir={out}", "--do_predict")
  assert last.returncode == 0, last.stderr[-3000:]
  assert (f"{out / 'best'} holds the best checkpoint of the training (ckpt-3); this run reads "
          f"the last (step 6): give --output_dir={out / 'best'} for the best") in last.stderr


def test_cased_vocabulary_with_lower_casing_stops_before_training(tmp_path):
  data = _glue_slice(tmp_path, train=3, dev=3, test=1)
  out = tmp_path / "out"
  proc = run_script("official_bert.run_classifier", tmp_path, "--task_name=MRPC",
                    f"--data_dir={data}", f"--output_dir={out}", "--do_train",
                    f"--vocab_file={CASED_VOCAB}", check=False)
  assert proc.returncode == 1 and "Traceback" not in proc.stderr
  assert (f"--do_lower_case=True but the vocabulary {CASED_VOCAB} is cased" in proc.stderr
          and "--do_lower_case=False" in proc.stderr and "--allow_case_mismatch" in proc.stderr)
  assert not glob.glob(str(out / "*.tf_record")) and not tf.train.latest_checkpoint(str(out))


def test_vocabulary_case_is_told_from_its_entries():
  assert case_check.vocabulary_is_cased(tokenization.load_vocab_tokens(CASED_VOCAB))
  assert case_check.vocabulary_is_cased(tokenization.load_vocab_tokens(UNCASED_VOCAB)) is False
  # bert-base-chinese is uncased; its "<S>", "<T>" do not make it cased.
  assert case_check.vocabulary_is_cased(tokenization.load_vocab_tokens(CHINESE_VOCAB)) is False
  assert case_check.vocabulary_is_cased(["[CLS]", "的", "是"]) is None  # nothing to tell by
  with pytest.raises(ValueError, match="vocabulary .* is uncased.*--do_lower_case=True"):
    case_check.check(False, vocab_file=UNCASED_VOCAB)
  case_check.check(False, vocab_file=CASED_VOCAB)
  case_check.check(True, vocab_file=UNCASED_VOCAB)


def test_released_checkpoint_name_and_tokenizer_config_are_checked(tmp_path):
  with pytest.raises(ValueError, match="uncased_L-12_H-768_A-12.*--allow_case_mismatch"):
    case_check.check(False, "models/uncased_L-12_H-768_A-12/bert_model.ckpt")
  hf = tmp_path / "hf"  # a Hugging Face folder whose tokenizer keeps case
  hf.mkdir()
  (hf / "model.safetensors").write_bytes(b"")
  (hf / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))

  def settings(**kw):
    return settings_lib.FinetuningSettings(init_checkpoint=str(hf), vocab_file=CASED_VOCAB,
                                           output_dir=str(tmp_path / "out"), **kw)

  with pytest.raises(ValueError, match=r"--do_lower_case=True but .*tokenizer_config.json says "
                     r"do_lower_case=False: pass --do_lower_case=False"):
    finetuning_runner.check_case(settings(do_lower_case=True, allow_case_mismatch=False))
  finetuning_runner.check_case(settings(do_lower_case=True, allow_case_mismatch=True))
  finetuning_runner.check_case(settings(do_lower_case=False))


def test_a_run_reads_its_model_folder_once(tmp_path, monkeypatch):
  """Config, vocabulary and case come from one read of --init_checkpoint; a changed file
  there is read again."""
  folder = tmp_path / "model"
  folder.mkdir()
  tokens = tokenization.load_vocab_tokens(CASED_VOCAB)
  write_vocab_and_config(str(folder), tokens, BertConfig(
      vocab_size=len(tokens), hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
      intermediate_size=16, max_position_embeddings=64))
  reads = []
  real_read = finetuning_runner.model_folder.read
  monkeypatch.setattr(finetuning_runner.model_folder, "read",
                      lambda *a, **k: reads.append(a[0]) or real_read(*a, **k))
  settings = settings_lib.FinetuningSettings(init_checkpoint=str(folder), do_lower_case=False,
                                             max_seq_length=32,
                                             output_dir=str(tmp_path / "out"))
  assert finetuning_runner.model_config(settings).hidden_size == 8
  assert finetuning_runner.vocab_file(settings) == str(folder / "vocab.txt")
  assert finetuning_runner.folder_case(settings)[0] is False  # a cased vocabulary
  finetuning_runner.check_case(settings)
  assert reads == [str(folder)]
  (folder / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
  assert finetuning_runner.folder_case(settings) == (True, str(folder /
                                                               "tokenizer_config.json"))
  assert len(reads) == 2


def test_bad_combinations_of_training_controls():
  base = {"output_dir": "x", "do_train": True}
  with pytest.raises(ValueError, match="need --do_train and --do_eval"):
    finetuning_runner.check_training_controls(
        settings_lib.FinetuningSettings(eval_every_steps=5, **base))
  with pytest.raises(ValueError, match="--early_stopping_patience .* --eval_every_steps"):
    finetuning_runner.check_training_controls(
        settings_lib.FinetuningSettings(early_stopping_patience=2, do_eval=True, **base))
  assert not finetuning_runner.check_training_controls(
      settings_lib.FinetuningSettings(do_eval=True, **base))


def test_best_metric_direction_follows_the_metrics_last_word():
  """Losses and errors are lower-is-better; a per-class key of a label named like one (an
  NER type's error_f1, a classifier's f1_loss) is a score, higher-is-better; min:/max: say
  it outright."""
  for spec, higher in (("loss", False), ("masked_lm_loss", False), ("mean_absolute_error", False),
                       ("accuracy", True), ("entity_f1", True), ("error_f1", True),
                       ("loss_recall", True), ("mse_precision", True), ("f1_loss", True),
                       ("recall_error", True), ("max:loss", True),
                       ("min:f1", False)):
    assert best_checkpoint.parse_metric(spec)[1] == higher, spec


def test_a_killed_runs_half_built_best_folder_is_removed(tmp_path):
  """best/ is built beside as .best.tmp-PID and swapped in; a run killed meanwhile leaves that
  folder (a copy of the weights), which the next build removes."""
  proc = subprocess.Popen([sys.executable, "-c", "pass"])
  proc.wait()  # its id now names no process
  half = tmp_path / f".best.tmp-{proc.pid}"
  (half / "sub").mkdir(parents=True)
  (half / "ckpt-1.index").write_bytes(b"half")
  folder_writes.replace_own_folder(
      str(tmp_path / "best"), lambda d: (tmp_path / os.path.basename(d) / "x").write_text("x"))
  assert sorted(os.listdir(tmp_path)) == ["best"] and os.listdir(tmp_path / "best") == ["x"]
