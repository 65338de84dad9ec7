"""Tests for official_bert.training.optimization: schedule, optimizers, clipping."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from official_bert.modeling.encoder import BertEncoder
from official_bert.modeling.pretraining_model import BertPretrainingModel
from official_bert.training import optimization
from official_bert.training.optimization import WarmupLinearDecay
from official_bert.training.optimization import clip_by_global_norm
from official_bert.training.optimization import create_optimizer
from official_bert.training.optimization import uses_weight_decay
from official_bert.training.optimization import warmup_linear_decay

PEAK, WARMUP, TOTAL = 1.0, 4, 10


def original_bert_lr(step, init_lr, num_warmup_steps, num_train_steps,
                     end_lr=0.0):
  """Line-by-line transcription of google-research/bert create_optimizer."""
  decay_step = min(step, num_train_steps)  # polynomial_decay, cycle=False
  lr = (init_lr - end_lr) * (1 - decay_step / num_train_steps) ** 1.0 + end_lr
  if num_warmup_steps:
    warmup_lr = init_lr * (float(step) / float(num_warmup_steps))
    is_warmup = float(step < num_warmup_steps)
    lr = (1.0 - is_warmup) * lr + is_warmup * warmup_lr
  return lr


# step -> lr for PEAK=1, WARMUP=4, TOTAL=10: 0 at start, mid-warmup,
# last warmup step, first decayed step (jumps to 1 - 4/10), mid decay,
# end, beyond.
EXPECTED = {0: 0.0, 2: 0.5, 3: 0.75, 4: 0.6, 7: 0.3, 10: 0.0, 15: 0.0}


def test_schedule_python_values():
  for step, lr in EXPECTED.items():
    got = warmup_linear_decay(step, PEAK, WARMUP, TOTAL)
    assert isinstance(got, float)
    assert got == pytest.approx(lr, abs=1e-12)
  # end_lr is the polynomial_decay end_learning_rate.
  assert warmup_linear_decay(7, PEAK, WARMUP, TOTAL, end_lr=0.1) == (
      pytest.approx(0.9 * 0.3 + 0.1))
  assert warmup_linear_decay(10, PEAK, WARMUP, TOTAL, end_lr=0.1) == (
      pytest.approx(0.1))
  assert warmup_linear_decay(99, PEAK, WARMUP, TOTAL, end_lr=0.1) == (
      pytest.approx(0.1))
  for step in range(20):  # Also a realistic config.
    for args in ((PEAK, WARMUP, TOTAL, 0.0), (1e-4, 10000, 1000000, 0.0),
                 (5e-5, 0, 100, 0.0), (2e-5, 3, 12, 1e-6)):
      s = step * max(1, args[2] // 5)
      assert warmup_linear_decay(s, *args) == pytest.approx(
          original_bert_lr(s, *args), rel=1e-12, abs=1e-15)


def test_schedule_numpy_and_tf_values():
  steps = np.array(sorted(EXPECTED))
  want = np.array([EXPECTED[s] for s in steps])
  np_lr = warmup_linear_decay(steps, PEAK, WARMUP, TOTAL)
  assert isinstance(np_lr, np.ndarray)
  np.testing.assert_allclose(np_lr, want, atol=1e-12)
  for tf_step in (tf.constant(steps, tf.int64), tf.constant(steps, tf.int32),
                  tf.constant(steps, tf.float32)):
    tf_lr = warmup_linear_decay(tf_step, PEAK, WARMUP, TOTAL)
    assert tf.is_tensor(tf_lr) and tf_lr.dtype == tf.float32
    np.testing.assert_allclose(tf_lr.numpy(), want, atol=1e-6)
  # Inside a graph, with a variable step (what the optimizer passes).
  fn = tf.function(lambda s: warmup_linear_decay(s, PEAK, WARMUP, TOTAL))
  assert float(fn(tf.Variable(3, dtype=tf.int64))) == pytest.approx(0.75)


def test_schedule_shape_and_no_warmup():
  lrs = warmup_linear_decay(np.arange(30), 2e-4, 8, 20)
  assert lrs[0] == 0.0
  assert np.all(np.diff(lrs[:8]) > 0)  # Warmup strictly increases.
  assert np.all(np.diff(lrs[8:]) <= 0)  # Then never increases.
  assert lrs.max() < 2e-4  # Peak itself is skipped (jump to decay line).
  assert lrs[20] == 0.0 and np.all(lrs[20:] == 0.0)
  # No warmup: plain linear decay from the peak, no 0/0.
  no_warmup = warmup_linear_decay(np.arange(5), 1.0, 0, 4)
  np.testing.assert_allclose(no_warmup, [1.0, 0.75, 0.5, 0.25, 0.0])
  tf_no_warmup = warmup_linear_decay(tf.range(5), 1.0, 0, 4)
  np.testing.assert_allclose(tf_no_warmup.numpy(), no_warmup, atol=1e-7)
  with pytest.raises(ValueError, match="num_train_steps"):
    warmup_linear_decay(0, 1.0, 0, 0)
  with pytest.raises(ValueError, match="num_warmup_steps"):
    WarmupLinearDecay(1.0, -1, 10)


def test_schedule_serialization_round_trip():
  sched = WarmupLinearDecay(3e-4, 5, 50, end_lr=1e-6)
  clone = WarmupLinearDecay.from_config(sched.get_config())
  restored = keras.saving.deserialize_keras_object(
      keras.saving.serialize_keras_object(sched))
  assert isinstance(restored, WarmupLinearDecay)
  for other in (clone, restored):
    assert other.get_config() == sched.get_config()
    for step in (0, 3, 5, 27, 50, 80):
      assert float(other(step)) == pytest.approx(float(sched(step)))
      assert float(sched(step)) == pytest.approx(
          warmup_linear_decay(step, 3e-4, 5, 50, 1e-6), rel=1e-6)


def hf_linear_schedule_with_warmup(step, peak, warmup, total):
  """Transcription of transformers' get_linear_schedule_with_warmup's lr_lambda, times peak."""
  if step < warmup:
    return peak * float(step) / float(max(1, warmup))
  return peak * max(0.0, float(total - step) / float(max(1, total - warmup)))


def test_linear_schedule_is_hugging_faces():
  for warmup, total in ((6, 62), (0, 10), (4, 4)):
    for step in range(total + 3):
      want = hf_linear_schedule_with_warmup(step, 5e-5, warmup, total)
      assert warmup_linear_decay(step, 5e-5, warmup, total, schedule="linear") == (
          pytest.approx(want, abs=1e-12)), (warmup, total, step)
  sched = WarmupLinearDecay(5e-5, 6, 62, schedule="linear")
  restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(sched))
  assert restored.schedule == "linear"
  assert float(restored(tf.constant(6))) == pytest.approx(5e-5)  # no jump: the peak itself
  assert warmup_linear_decay(6, 5e-5, 6, 62) == pytest.approx(5e-5 * (1 - 6 / 62))  # "bert"
  with pytest.raises(ValueError, match="bert, linear"):
    warmup_linear_decay(0, 1.0, 0, 10, schedule="cosine")


def numpy_adamw(var, grads, lrs, wd, decay, beta_1=0.9, beta_2=0.999,
                eps=1e-6, bias_correction=True):
  """torch.optim.AdamW (bias_correction) or the original AdamWeightDecayOptimizer: decay of
  the old value, then m_hat / (sqrt(v_hat) + eps) (or m / (sqrt(v) + eps))."""
  var = var.astype(np.float64)
  m, v = np.zeros_like(var), np.zeros_like(var)
  for t, (g, lr) in enumerate(zip(grads, lrs), start=1):
    if decay:
      var = var - lr * wd * var
    m = m + (g - m) * (1 - beta_1)
    v = v + (g * g - v) * (1 - beta_2)
    if bias_correction:
      var = var - lr * (m / (1 - beta_1**t)) / (np.sqrt(v / (1 - beta_2**t)) + eps)
    else:
      var = var - lr * m / (np.sqrt(v) + eps)
  return var


@pytest.mark.parametrize("bias_correction", [True, False])
def test_adamw_matches_numpy_reference(bias_correction):
  dense = keras.layers.Dense(3, name="dense")
  dense.build((None, 4))
  norm = keras.layers.LayerNormalization(name="LayerNorm")
  norm.build((None, 3))
  rng = np.random.default_rng(0)
  for v in (norm.gamma, norm.beta, dense.bias):  # Nonzero so decay would show.
    v.assign(rng.normal(size=v.shape).astype("float32"))
  variables = [dense.kernel, dense.bias, norm.gamma, norm.beta]
  assert [v.path for v in variables] == [
      "dense/kernel", "dense/bias", "LayerNorm/gamma", "LayerNorm/beta"]
  initial = [v.numpy().copy() for v in variables]

  sched = WarmupLinearDecay(0.1, num_warmup_steps=2, num_train_steps=10)
  wd = 0.05
  opt = create_optimizer("adamw", learning_rate=sched, weight_decay=wd,
                         adam_bias_correction=bias_correction)
  assert isinstance(opt, keras.optimizers.AdamW)
  num_steps = 3
  grads = [[rng.normal(size=v.shape).astype("float32") for v in variables]
           for _ in range(num_steps)]
  for step_grads in grads:
    opt.apply([tf.constant(g) for g in step_grads], variables)
  assert int(opt.iterations) == num_steps
  # The schedule is read at iterations 0, 1, 2 (0.0, 0.05, then decay 0.08).
  lrs = [warmup_linear_decay(i, 0.1, 2, 10) for i in range(num_steps)]
  assert lrs == pytest.approx([0.0, 0.05, 0.08])
  for i, (var, init) in enumerate(zip(variables, initial)):
    want = numpy_adamw(init, [g[i] for g in grads], lrs, wd,
                       decay=(var.path == "dense/kernel"), bias_correction=bias_correction)
    # atol: the fused CPU kernel's square root is good to ~1e-5 of a step (lr ~0.1).
    np.testing.assert_allclose(var.numpy(), want, rtol=1e-5, atol=1e-5,
                               err_msg=var.path)
  # Guard: the reference really distinguishes decayed from excluded here.
  no_decay = numpy_adamw(initial[0], [g[0] for g in grads], lrs, wd, False,
                         bias_correction=bias_correction)
  assert not np.allclose(no_decay, variables[0].numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bias_correction", [True, False])
def test_fused_and_sparse_adamw_paths_match_numpy(bias_correction):
  """BertAdamW's fused kernel (dense gradients) and its plain-ops path (IndexedSlices) both
  step as the NumPy reference, with small gradients where Keras' epsilon hat would not."""
  rng = np.random.default_rng(3)
  init = [rng.normal(size=s).astype("float32") for s in ((5, 4), (4,), (6, 4))]
  sched = WarmupLinearDecay(0.1, num_warmup_steps=1, num_train_steps=6)
  grads = [[rng.normal(size=v.shape).astype("float32") * 1e-5 for v in init] for _ in range(4)]
  for g in grads:
    g[2][[0, 2, 3, 5]] = 0.0  # the table's rows 1 and 4 only, as a gather's gradient

  variables = [keras.Variable(v, name=n) for v, n in zip(init, ("kernel", "bias", "table"))]
  optimizer = create_optimizer("adamw", sched, weight_decay=0.05, exclude_from_weight_decay=(),
                               adam_bias_correction=bias_correction)
  optimizer.build(variables)
  optimizer.exclude_from_weight_decay(var_list=[variables[1]])
  step = tf.function(lambda grads: optimizer.apply(grads, variables))
  for g in grads:
    step([tf.constant(g[0]), tf.constant(g[1]),
          tf.IndexedSlices(tf.constant(g[2][[1, 4]]), tf.constant([1, 4]), tf.constant([6, 4]))])
  lrs = [warmup_linear_decay(i, 0.1, 1, 6) for i in range(4)]
  for i, name in enumerate(("kernel", "bias", "table")):
    want = numpy_adamw(init[i], [g[i] for g in grads], lrs, 0.05, decay=name != "bias",
                       bias_correction=bias_correction)
    np.testing.assert_allclose(variables[i].numpy(), want, rtol=1e-5, atol=1e-5,
                               err_msg=name)
  assert not np.allclose(variables[0].numpy(), init[0])


def test_fused_adamw_updates_every_mirrored_replica():
  """Under MirroredStrategy (on the test process's two logical CPUs, conftest) the fused
  update must write each device's copy."""
  strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
  with strategy.scope():
    kernel = keras.Variable(np.full((3, 2), 0.5, "float32"), name="kernel")
    bias = keras.Variable(np.full((2,), 0.5, "float32"), name="bias")
    opt = optimization.create_optimizer("adamw", 0.1, weight_decay=0.1)
    opt._all_reduce_sum_gradients = list  # pylint: disable=protected-access  (as in Trainer)
    opt.build([kernel, bias])
  grads = {"kernel": np.arange(6, dtype="float32").reshape(3, 2) - 2.0,
           "bias": np.array([1.0, -3.0], "float32")}
  constants = [tf.constant(grads["kernel"]), tf.constant(grads["bias"])]
  step = tf.function(lambda: strategy.run(lambda: opt.apply(constants, [kernel, bias])))
  for _ in range(3):
    step()
  for name, variable in (("kernel", kernel), ("bias", bias)):
    copies = [t.numpy() for t in strategy.experimental_local_results(variable.value)]
    assert len(copies) == 2, name
    want = numpy_adamw(np.full(grads[name].shape, 0.5), [grads[name]] * 3, [0.1] * 3, 0.1,
                       decay=name == "kernel")
    for copy in copies:
      np.testing.assert_allclose(copy, want, rtol=1e-5, atol=1e-6, err_msg=name)


def tiny_encoder(num_layers=2):
  enc = BertEncoder(vocab_size=30, hidden_size=8, num_hidden_layers=num_layers,
                    num_attention_heads=2, intermediate_size=16,
                    max_position_embeddings=16, type_vocab_size=2)
  enc.build()
  return enc


def decay_factor(opt, lr, wd):
  """A zero-gradient step's factor: AdamW decays by lr * wd; in LAMB the decay is the whole
  update, which the trust ratio ||var|| / ||wd * var|| scales to lr."""
  return 1 - lr if isinstance(opt, optimization.BertLamb) else 1 - lr * wd


def decayed_by_one_step(opt, variables, lr, wd):
  """Paths changed by a zero-gradient step (Adam/LAMB updates are exactly 0
  then, so only the weight decay moves variables), checking the factor."""
  before = [v.numpy().copy() for v in variables]
  opt.apply([tf.zeros_like(v) for v in variables], variables)
  changed = []
  for v, b in zip(variables, before):
    if not np.array_equal(v.numpy(), b):
      np.testing.assert_allclose(v.numpy(), b * decay_factor(opt, lr, wd), rtol=1e-6)
      changed.append(v.path)
  return changed


def one_step(opt, variables, gradient):
  """Builds `opt`, applies one step of `gradient(v)` to each variable, and returns each
  variable beside its value before the step (a copy: the step changes it in place)."""
  opt.build(variables)
  before = [np.array(v.numpy()) for v in variables]
  opt.apply([gradient(v) for v in variables], variables)
  return list(zip(variables, before))


def suffix(path):
  return path.split("/", 1)[1]


LAYER_KERNELS = ["attention_self/query/kernel", "attention_self/key/kernel",
                 "attention_self/value/kernel",
                 "attention_output_dense/kernel", "intermediate_dense/kernel",
                 "output_dense/kernel"]
LAYER_EXCLUDED = [
    "attention_self/query/bias", "attention_self/key/bias",
    "attention_self/value/bias", "attention_output_dense/bias",
    "attention_output_layer_norm/gamma", "attention_output_layer_norm/beta",
    "intermediate_dense/bias", "output_dense/bias",
    "output_layer_norm/gamma", "output_layer_norm/beta"]


@pytest.mark.parametrize("name", ["adamw", "lamb"])
def test_which_encoder_variables_are_decayed(name):
  enc = tiny_encoder(num_layers=2)
  variables = enc.trainable_variables
  opt = create_optimizer(name, learning_rate=0.1, weight_decay=0.01)
  decayed = [suffix(p) for p in decayed_by_one_step(opt, variables, 0.1, 0.01)]
  want_decayed = ["embeddings/word_embeddings/embeddings",
                  "embeddings/position_embeddings/embeddings",
                  "embeddings/token_type_embeddings/embeddings"]
  want_excluded = ["embeddings/layer_norm/gamma", "embeddings/layer_norm/beta"]
  for i in range(2):
    want_decayed += [f"transformer_layer_{i}/{k}" for k in LAYER_KERNELS]
    want_excluded += [f"transformer_layer_{i}/{k}" for k in LAYER_EXCLUDED]
  want_decayed.append("pooler_dense/kernel")
  want_excluded.append("pooler_dense/bias")
  assert decayed == want_decayed
  assert len(decayed) == 16 and len(want_excluded) == 23
  excluded = [suffix(v.path) for v in variables
              if suffix(v.path) not in decayed]
  assert excluded == want_excluded
  assert all(p.endswith(("/kernel", "/embeddings")) for p in decayed)
  assert all(p.endswith(("/bias", "/gamma", "/beta")) for p in excluded)
  # The public predicate agrees with what the optimizer did.
  assert [suffix(v.path) for v in variables if uses_weight_decay(v)] == decayed


def test_pretraining_heads_decay_like_original():
  model = BertPretrainingModel(tiny_encoder(num_layers=1))
  model.build()
  heads = [v for v in model.trainable_variables
           if v.path.startswith(model.name)]
  opt = create_optimizer("adamw", learning_rate=0.1, weight_decay=0.01)
  decayed = set(decayed_by_one_step(opt, model.trainable_variables, 0.1, 0.01))
  got = {suffix(v.path): v.path in decayed for v in heads}
  # Original: cls/predictions/output_bias and the LayerNorm excluded,
  # transform kernel and cls/seq_relationship/output_weights decayed.
  assert got == {
      "masked_lm_head/output_bias": False,
      "masked_lm_head/transform_dense/kernel": True,
      "masked_lm_head/transform_dense/bias": False,
      "masked_lm_head/transform_layer_norm/gamma": False,
      "masked_lm_head/transform_layer_norm/beta": False,
      "next_sentence_head/output_weights": True,
      "next_sentence_head/output_bias": False,
  }


def test_lamb_step_changes_variables():
  dense = keras.layers.Dense(3, name="dense")
  dense.build((None, 4))
  variables = [dense.kernel, dense.bias]
  before = [v.numpy().copy() for v in variables]
  opt = create_optimizer("LAMB", learning_rate=WarmupLinearDecay(0.01, 0, 10))
  assert isinstance(opt, optimization.BertLamb)
  assert opt.weight_decay == pytest.approx(0.01)
  assert opt.epsilon == pytest.approx(1e-6)
  rng = np.random.default_rng(1)
  opt.apply([tf.constant(rng.normal(size=v.shape), tf.float32)
             for v in variables], variables)
  for v, b in zip(variables, before):
    assert np.all(np.isfinite(v.numpy()))
    assert not np.allclose(v.numpy(), b), v.path


def test_lamb_equals_model_garden_lamb():
  """Our LAMB steps as `official.modeling.optimization.lamb.LAMB` (the oracle): decay inside
  the trust-ratio-scaled update, no decay and no ratio for the excluded LayerNorm and bias,
  ratio 1 for an all-zero variable."""
  from official.modeling.optimization import lamb  # pylint: disable=import-outside-toplevel
  dense = keras.layers.Dense(3, name="dense")
  dense.build((None, 4))
  norm = keras.layers.LayerNormalization(name="LayerNorm")
  norm.build((None, 3))
  zero = keras.layers.Dense(2, name="zero", kernel_initializer="zeros")
  zero.build((None, 3))
  ours = [dense.kernel, dense.bias, norm.gamma, norm.beta, zero.kernel]
  rng = np.random.default_rng(5)
  for v in ours[1:4]:
    v.assign(rng.normal(size=v.shape).astype("float32"))
  names = ["dense/kernel", "dense/bias", "LayerNorm/gamma", "LayerNorm/beta", "zero/kernel"]
  theirs = [tf.Variable(v.numpy(), name=n) for v, n in zip(ours, names)]
  grads = [[rng.normal(size=v.shape).astype("float32") for v in ours] for _ in range(4)]
  for g in grads:
    g[4][:] = 0.0  # a variable that stays 0: both norms 0, ratio 1
  opt = create_optimizer("lamb", learning_rate=0.05, weight_decay=0.1)
  oracle = lamb.LAMB(learning_rate=0.05, weight_decay_rate=0.1,
                     exclude_from_weight_decay=list(
                         optimization.DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY))
  for g in grads:
    opt.apply([tf.constant(x) for x in g], ours)
    oracle.apply_gradients(zip([tf.constant(x) for x in g], theirs))
  for a, b, name in zip(ours, theirs, names):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
  # Guard: Keras' own Lamb (decay outside, ratio everywhere) is measurably different.
  keras_vars = [keras.Variable(v.numpy()) for v in theirs]
  stock = keras.optimizers.Lamb(0.05, weight_decay=0.1, epsilon=1e-6)
  stock.apply([tf.constant(x) for x in grads[0]], keras_vars)
  assert not np.allclose(keras_vars[0].numpy(), ours[0].numpy(), atol=1e-3)


def test_optimizer_config_round_trip():
  opt = create_optimizer("adamw", learning_rate=WarmupLinearDecay(1e-4, 10, 100),
                         exclude_from_weight_decay=("bias",), adam_bias_correction=False)
  assert opt.global_clipnorm is None and opt.clipnorm is None
  restored = keras.optimizers.deserialize(keras.optimizers.serialize(opt))
  assert type(restored) is optimization.BertAdamW
  assert restored.adam_bias_correction is False
  assert create_optimizer("adamw").adam_bias_correction is True  # PyTorch's AdamW by default
  assert restored.exclude_from_weight_decay_patterns == ("bias",)
  assert isinstance(restored._learning_rate, WarmupLinearDecay)
  assert restored._learning_rate.get_config() == (
      opt._learning_rate.get_config())
  assert restored.weight_decay == pytest.approx(0.01)


def test_bad_names_and_clipping_args():
  with pytest.raises(ValueError, match="adamw, lamb") as err:
    create_optimizer("sgd")
  assert "'sgd'" in str(err.value)
  for arg in ("clipnorm", "global_clipnorm", "clipvalue"):
    with pytest.raises(ValueError, match="clip_by_global_norm"):
      create_optimizer("adamw", **{arg: 1.0})
  assert create_optimizer("adamw", optimizer_name="bert_adam").name == (
      "bert_adam")
  with pytest.raises(ValueError, match="applies to adamw"):
    create_optimizer("lamb", adam_bias_correction=False)


def test_clip_by_global_norm_vs_numpy():
  a = np.array([[3.0, 0.0], [0.0, 4.0]], np.float32)  # norm 5
  b = np.array([12.0], np.float32)  # norm 12 -> global norm 13
  clipped, norm = clip_by_global_norm([tf.constant(a), None, tf.constant(b)],
                                      clip_norm=1.0)
  assert float(norm) == pytest.approx(13.0)
  assert clipped[1] is None
  np.testing.assert_allclose(clipped[0].numpy(), a / 13.0, rtol=1e-6)
  np.testing.assert_allclose(clipped[2].numpy(), b / 13.0, rtol=1e-6)
  joint = np.sqrt(sum(np.sum(c.numpy() ** 2) for c in clipped if c is not None))
  assert joint == pytest.approx(1.0, rel=1e-6)
  # Under the threshold: unchanged, norm still reported.
  small, small_norm = clip_by_global_norm([tf.constant(a)], clip_norm=10.0)
  assert float(small_norm) == pytest.approx(5.0)
  np.testing.assert_allclose(small[0].numpy(), a)
  # Random case against numpy's formula g * c / max(norm, c).
  rng = np.random.default_rng(2)
  gs = [rng.normal(size=s).astype(np.float32) for s in [(5, 3), (7,), (2, 2)]]
  want_norm = np.sqrt(sum(np.sum(g.astype(np.float64) ** 2) for g in gs))
  out, got_norm = clip_by_global_norm([tf.constant(g) for g in gs], 2.0)
  assert float(got_norm) == pytest.approx(want_norm, rel=1e-6)
  for o, g in zip(out, gs):
    np.testing.assert_allclose(o.numpy(), g * 2.0 / max(want_norm, 2.0),
                               rtol=1e-5)
  # Nothing to clip.
  none, zero = clip_by_global_norm([None, None])
  assert none == [None, None] and float(zero) == 0.0


def test_layerwise_lr_scale_formula():
  L = 12
  assert optimization.layer_depth("clf/encoder/embeddings/word_embeddings/embeddings", L) == 0
  assert optimization.layer_depth("clf/encoder/transformer_layer_0/query/kernel", L) == 1
  assert optimization.layer_depth("clf/encoder/transformer_layer_11/output_dense/bias", L) == 12
  assert optimization.layer_depth("clf/encoder/pooler_dense/kernel", L) == 12
  assert optimization.layer_depth("clf/head/output_weights", L) == 12
  for depth, path in ((0, "e/embeddings/x"), (4, "e/transformer_layer_3/x"), (12, "head/x")):
    assert optimization.layerwise_lr_scale(path, L, 0.95) == pytest.approx(0.95 ** (L - depth))


@pytest.mark.parametrize("name", ["adamw", "lamb"])
def test_layerwise_lr_decay_scales_each_layers_step(name):
  """Zero gradients: each step is the decay alone, lr_l * wd * var (LAMB: lr_l * var, the
  ratio normalizes the decay), so every variable's change shows its layer's learning rate
  (and the decay exclusions)."""
  from official_bert.modeling import finetuning_models
  model = finetuning_models.BertClassifier(tiny_encoder(num_layers=3), 2)
  model.build()
  lr, wd, decay = 0.1, 0.5, 0.5
  opt = create_optimizer(name, learning_rate=lr, weight_decay=wd, layerwise_lr_decay=decay,
                         num_layers=3)
  for v, old in one_step(opt, model.trainable_variables, tf.zeros_like):
    scale = decay ** (3 - optimization.layer_depth(v.path, 3))
    rate = 1 - decay_factor(opt, lr * scale, wd) if uses_weight_decay(v) else 0.0
    np.testing.assert_allclose(v.numpy(), old - old * rate, rtol=1e-6, atol=1e-7,
                               err_msg=v.path)
  assert create_optimizer(name, layerwise_lr_decay=0.9, num_layers=3).get_config()[
      "layerwise_lr_decay"] == 0.9
  with pytest.raises(ValueError, match="num_layers"):
    create_optimizer(name, layerwise_lr_decay=0.9)


def test_layerwise_lr_decay_with_gradients_adamw():
  """Adam's first step moves each weight by about lr (g / |g|): here lr times the layer factor."""
  encoder = tiny_encoder(num_layers=2)
  opt = create_optimizer("adamw", learning_rate=0.01, weight_decay=0.0, layerwise_lr_decay=0.8,
                         num_layers=2)
  for v, old in one_step(opt, encoder.trainable_variables, tf.ones_like):
    want = 0.01 * 0.8 ** (2 - optimization.layer_depth(v.path, 2))
    np.testing.assert_allclose(old - v.numpy(), want, rtol=1e-4, err_msg=v.path)
