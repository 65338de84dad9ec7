"""The fine-tuning step against a reference computation (issue 21: a 12-point gap to keras-hub
and PyTorch came from Keras' "epsilon hat" Adam, not from the model).

A tiny classifier, dropout off, five steps of `training_loop.Trainer` with the default
optimizer. The reference, written out here: the mean cross-entropy of the same Keras model
through a plain GradientTape, `tf.clip_by_global_norm` at 1.0, the original's schedule, and
AdamW in NumPy (float64) as PyTorch's `torch.optim.AdamW` (bias-corrected) or the original
`AdamWeightDecayOptimizer` (no bias correction), with the original's decay exclusions. Each
step's loss and gradient norm, and every variable's change after five steps, must agree.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from official_bert.modeling.bert_config import BertConfig
from official_bert.tasks.classification import ClassificationTask
from official_bert.training import optimization
from official_bert.training import train_step
from official_bert.training import training_loop

CONFIG = BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=32, max_position_embeddings=16, type_vocab_size=2,
                    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
SEQ, BATCH, STEPS, LR, WD = 12, 8, 5, 1e-3, 0.01
# Warmup then decay, as run_classifier: lr(0) = 0 would hide a wrong first update.
SCHEDULE = dict(peak_lr=LR, num_warmup_steps=1, num_train_steps=8)


def batches():
  rng = np.random.default_rng(7)
  out = []
  for _ in range(STEPS):
    lengths = rng.integers(3, SEQ + 1, size=BATCH)
    mask = (np.arange(SEQ)[None] < lengths[:, None]).astype(np.int32)
    ids = rng.integers(4, CONFIG.vocab_size, size=(BATCH, SEQ)).astype(np.int32) * mask
    types = ((np.arange(SEQ)[None] >= lengths[:, None] // 2) * mask).astype(np.int32)
    out.append({"input_word_ids": ids, "input_mask": mask, "input_type_ids": types,
                "label_ids": rng.integers(0, 2, size=BATCH).astype(np.int32),
                "is_real_example": np.ones(BATCH, np.int32)})
  return out


def numpy_adamw(params, grads, lr, t, state, decayed, bias_correction, beta_1=0.9,
                beta_2=0.999, eps=1e-6):
  """One step of torch.optim.AdamW (bias_correction) or AdamWeightDecayOptimizer, float64."""
  out = []
  for i, (p, g) in enumerate(zip(params, grads)):
    m, v = state.get(i, (np.zeros_like(p), np.zeros_like(p)))
    m = beta_1 * m + (1 - beta_1) * g
    v = beta_2 * v + (1 - beta_2) * g * g
    state[i] = (m, v)
    if bias_correction:
      step = (m / (1 - beta_1**t)) / (np.sqrt(v / (1 - beta_2**t)) + eps)
    else:
      step = m / (np.sqrt(v) + eps)
    out.append(p - lr * (step + (WD * p if decayed[i] else 0.0)))
  return out


def reference_run(model, data, bias_correction):
  """[(loss, norm)] per step and the final weights, of the reference computation."""
  variables = model.trainable_variables
  decayed = [optimization.uses_weight_decay(v) for v in variables]
  params = [v.numpy().astype(np.float64) for v in variables]
  state, rows = {}, []
  loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
  for t, batch in enumerate(data, start=1):
    for v, p in zip(variables, params):
      v.assign(p.astype(np.float32))
    with tf.GradientTape() as tape:
      loss = loss_fn(batch["label_ids"], model(batch, training=True)["logits"])
    grads = tape.gradient(loss, variables)
    grads = [tf.convert_to_tensor(g) for g in grads]
    clipped, norm = tf.clip_by_global_norm(grads, 1.0)
    rows.append((float(loss), float(norm)))
    lr = optimization.warmup_linear_decay(t - 1, **SCHEDULE)
    params = numpy_adamw(params, [g.numpy().astype(np.float64) for g in clipped], lr, t, state,
                         decayed, bias_correction)
  return rows, params


def trainer_run(optimizer_fn):
  keras.utils.set_random_seed(3)
  task = ClassificationTask(CONFIG, num_labels=2, seq_length=SEQ)
  trainer = training_loop.Trainer(tf.distribute.OneDeviceStrategy("/cpu:0"), task,
                                  optimizer_fn, BATCH)
  trainer.model.dropout.rate = 0.0
  return trainer


def train(trainer, data):
  initial = [v.numpy().copy() for v in trainer.model.trainable_variables]
  step = tf.function(lambda f: trainer.strategy.run(trainer._replica_train_step, args=(f,)))  # noqa: SLF001
  rows = []
  for batch in data:
    out = step({k: tf.constant(v) for k, v in batch.items()})
    rows.append((float(out["loss"]), float(out["gradient_norm"])))
  return rows, initial


def check_against_reference(trainer, bias_correction):
  data = batches()
  rows, initial = train(trainer, data)
  final = [v.numpy() for v in trainer.model.trainable_variables]
  for v, value in zip(trainer.model.trainable_variables, initial):  # the same start
    v.assign(value)
  want_rows, want = reference_run(trainer.model, data, bias_correction)
  np.testing.assert_allclose(rows, want_rows, rtol=1e-5)
  moved = 0
  # atol: a thousandth of one step; rows whose gradient is far below epsilon move by it
  # relative to float32 rounding of the gradient (summation order differs).
  for v, start, got, expected in zip(trainer.model.trainable_variables, initial, final, want):
    np.testing.assert_allclose(got - start, expected - start, rtol=2e-4, atol=1e-3 * LR,
                               err_msg=v.path)
    moved += np.any(got != start)
  assert moved == len(final)  # every variable trained (or decayed): nothing frozen by mistake


@pytest.mark.parametrize("bias_correction", [True, False])
def test_trainer_steps_equal_reference_adamw(bias_correction):
  trainer = trainer_run(lambda: optimization.create_optimizer(
      "adamw", optimization.WarmupLinearDecay(**SCHEDULE), weight_decay=WD,
      adam_bias_correction=bias_correction))
  check_against_reference(trainer, bias_correction)


def test_keras_epsilon_hat_adam_fails_the_reference():
  """The guard: the reference sees the difference that cost 12 points (Keras' AdamW with the
  same epsilon adds it to the uncorrected sqrt(v))."""
  schedule = optimization.WarmupLinearDecay(**SCHEDULE)
  trainer = trainer_run(lambda: keras.optimizers.AdamW(schedule, weight_decay=WD,
                                                       epsilon=1e-6))
  trainer.optimizer.exclude_from_weight_decay(var_list=[
      v for v in trainer.model.trainable_variables if not optimization.uses_weight_decay(v)])
  with pytest.raises(AssertionError):
    check_against_reference(trainer, bias_correction=True)


@pytest.mark.parametrize("bias_correction,lr_schedule", [(False, "linear"), (True, "bert")])
def test_settings_reach_the_optimizer(bias_correction, lr_schedule):
  """--adam_bias_correction and --lr_schedule reach the optimizer the commands build, with
  --layerwise_lr_decay too (which once replaced the optimizer's other arguments)."""
  from official_bert.training import runner  # pylint: disable=import-outside-toplevel
  from official_bert.training import settings as settings_lib  # pylint: disable=import-outside-toplevel
  settings = settings_lib.FinetuningSettings(
      adam_bias_correction=bias_correction, lr_schedule=lr_schedule, layerwise_lr_decay=0.9,
      learning_rate=LR, train_batch_size=BATCH)
  trainer = runner.make_trainer(settings, tf.distribute.OneDeviceStrategy("/cpu:0"),
                                ClassificationTask(CONFIG, 2, SEQ), 8, 1)
  optimizer = trainer.optimizer
  assert optimizer.adam_bias_correction is bias_correction
  assert optimizer.layerwise_lr_decay == 0.9
  schedule = optimizer._learning_rate  # pylint: disable=protected-access
  assert schedule.schedule == lr_schedule
  assert float(schedule(tf.constant(1))) == pytest.approx(
      optimization.warmup_linear_decay(1, LR, 1, 8, schedule=lr_schedule))
  with pytest.raises(ValueError, match="--adam_bias_correction=False applies"):
    runner.make_trainer(settings_lib.FinetuningSettings(optimizer="lamb",
                                                        adam_bias_correction=False),
                        tf.distribute.OneDeviceStrategy("/cpu:0"),
                        ClassificationTask(CONFIG, 2, SEQ), 8, 1)


def test_optimizer_flags_checked_before_any_work(tmp_path):
  """A fine-tuning run with flags that do not go together stops before it writes anything."""
  from official_bert.tasks import classifier_job  # pylint: disable=import-outside-toplevel
  from official_bert.training import finetuning_runner  # pylint: disable=import-outside-toplevel
  settings = classifier_job.ClassifierSettings(
      train_file=str(tmp_path / "train.csv"), output_dir=str(tmp_path / "out"), do_train=True,
      optimizer="lamb", adam_bias_correction=False)
  with pytest.raises(ValueError, match="--adam_bias_correction=False applies to "
                     "--optimizer=adamw, not --optimizer=lamb"):
    finetuning_runner.run(settings, classifier_job.make_job(settings))
  assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("bias_correction", [True, False])
def test_python_api_fit_steps_equal_reference_adamw(bias_correction, monkeypatch):
  """`ob.TextClassifier.fit` takes the commands' step (`training.train_step`, the code the
  Trainer runs): same loss, optimizer, schedule and clipping (here on the same id batches,
  Keras' fit loop instead of the Trainer)."""
  from official_bert.api.backbone import Backbone  # pylint: disable=import-outside-toplevel
  from official_bert.api.preprocessor import Preprocessor  # pylint: disable=import-outside-toplevel
  from official_bert.api.text_classifier import TextClassifier  # pylint: disable=import-outside-toplevel
  keras.utils.set_random_seed(3)
  vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(35)]
  model = TextClassifier(Backbone.from_bert_config(CONFIG), Preprocessor(vocab, True, SEQ),
                         num_classes=2)
  model.network.dropout.rate = 0.0
  model.compile(learning_rate=LR, warmup_fraction=SCHEDULE["num_warmup_steps"] / 8,
                weight_decay=WD, lr_schedule="bert", adam_bias_correction=bias_correction)
  model._compile(model._scheduled_optimizer(SCHEDULE["num_train_steps"]))  # noqa: SLF001
  data = batches()
  names = ("input_word_ids", "input_mask", "input_type_ids")
  dataset = tf.data.Dataset.from_tensor_slices((
      {k: np.concatenate([b[k] for b in data]) for k in names},
      np.concatenate([b["label_ids"] for b in data]))).batch(BATCH)
  model.build()
  variables = model.network.trainable_variables
  initial = [v.numpy().copy() for v in variables]
  takers = []
  shared_apply = train_step.apply
  monkeypatch.setattr(train_step, "apply", lambda *a: takers.append("fit") or shared_apply(*a))
  keras.Model.fit(model, dataset, epochs=1, verbose=0, shuffle=False)
  assert takers  # traced through the shared step, not a copy
  final = [v.numpy() for v in variables]
  for v, value in zip(variables, initial):
    v.assign(value)
  _, want = reference_run(model.network, data, bias_correction)
  for v, start, got, expected in zip(variables, initial, final, want):
    np.testing.assert_allclose(got - start, expected - start, rtol=2e-4, atol=1e-3 * LR,
                               err_msg=v.path)
