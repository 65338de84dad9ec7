"""The Model Garden's BERT pretraining, as the peer our training loop is compared with
(issue 24): `BertPretrainerV2` (tf_keras) loaded through their TF1 converter from the TF1
checkpoint our converter writes, trained with their optimizers (`legacy_adamw.AdamWeightDecay`,
`lamb.LAMB`), the original's losses, global-norm clipping at 1.0 and our schedule function.

Used by tests/training/test_model_garden_training_parity.py (tiny config) and
bench/bench_model_garden_training_parity.py (base size).
"""

import os

import numpy as np
import tensorflow as tf

from official_bert.interop import tf1_checkpoint
from official_bert.interop import weight_loading
from official_bert.tasks.pretraining import PretrainingTask
from official_bert.training import optimization
from official_bert.training import training_loop

EXCLUDE = list(optimization.DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY)


def batches(config, num, batch, seq, preds, seed=0):
  """`num` synthetic pretraining batches (ours' feature names): random lengths, two segments,
  predicted positions among the real tokens (some slots padding), random NSP labels."""
  rng = np.random.default_rng(seed)
  out = []
  for _ in range(num):
    lengths = rng.integers(preds + 2, seq + 1, size=batch)
    mask = (np.arange(seq)[None] < lengths[:, None]).astype(np.int32)
    ids = rng.integers(5, config.vocab_size, size=(batch, seq)).astype(np.int32) * mask
    types = ((np.arange(seq)[None] >= lengths[:, None] // 2) * mask).astype(np.int32)
    positions = np.zeros((batch, preds), np.int32)
    weights = np.zeros((batch, preds), np.float32)
    for i, n in enumerate(lengths):
      k = rng.integers(1, preds + 1)
      positions[i, :k] = np.sort(rng.choice(np.arange(1, n), size=k, replace=False))
      weights[i, :k] = 1.0
    out.append({"input_word_ids": ids, "input_mask": mask, "input_type_ids": types,
                "masked_lm_positions": positions,
                # The tokens at the positions, left in place: a copy task, so the loss falls.
                "masked_lm_ids": np.take_along_axis(ids, positions, 1) * (weights > 0),
                "masked_lm_weights": weights,
                "next_sentence_labels": rng.integers(0, 2, size=batch).astype(np.int32)})
  return out


def our_trainer(config, seq, preds, batch, optimizer, schedule, epsilon=1e-6):
  task = PretrainingTask(config, seq, preds)
  return training_loop.Trainer(
      tf.distribute.OneDeviceStrategy("/cpu:0"), task,
      lambda: optimization.create_optimizer(optimizer, schedule, epsilon=epsilon), batch)


def write_tf1(model, directory):
  """Our model's weights as a google-research TF1 checkpoint (our converter); its prefix."""
  prefix = os.path.join(directory, "tf1", "bert_model.ckpt")
  tf1_checkpoint.write_tf1_checkpoint(weight_loading.export_canonical_weights(model), prefix)
  return prefix


def _legacy_config(config):
  from official.legacy.bert import configs  # pylint: disable=import-outside-toplevel
  return configs.BertConfig(
      vocab_size=config.vocab_size, hidden_size=config.hidden_size,
      num_hidden_layers=config.num_hidden_layers,
      num_attention_heads=config.num_attention_heads,
      intermediate_size=config.intermediate_size, hidden_act="gelu",
      hidden_dropout_prob=config.hidden_dropout_prob,
      attention_probs_dropout_prob=config.attention_probs_dropout_prob,
      max_position_embeddings=config.max_position_embeddings,
      type_vocab_size=config.type_vocab_size, initializer_range=config.initializer_range)


def peer_pretrainer(config, tf1_prefix, directory):
  """Their BertPretrainerV2 + an NSP `ClassificationHead` (pooler-shaped: tanh dense on [CLS],
  then the output layer), with the TF1 checkpoint's weights: the encoder and masked-LM head
  through their converter (`tf2_bert_encoder_checkpoint_converter.convert_checkpoint`), the
  NSP head (which their converter does not know) from the same file's tensors."""
  from official.modeling import tf_utils  # pylint: disable=import-outside-toplevel
  from official.nlp.modeling import layers  # pylint: disable=import-outside-toplevel
  from official.nlp.modeling import models  # pylint: disable=import-outside-toplevel
  from official.nlp.tools import tf2_bert_encoder_checkpoint_converter as converter  # pylint: disable=import-outside-toplevel
  import tf_keras  # pylint: disable=import-outside-toplevel
  legacy = _legacy_config(config)
  v2_prefix = os.path.join(directory, "v2", "ckpt")
  converter.convert_checkpoint(legacy, v2_prefix, tf1_prefix, checkpoint_model_name="model",
                               converted_model="pretrainer")
  initializer = tf_keras.initializers.TruncatedNormal(stddev=config.initializer_range)
  head = layers.ClassificationHead(inner_dim=config.hidden_size, num_classes=2,
                                   activation="tanh", initializer=initializer,
                                   name="next_sentence")
  model = models.BertPretrainerV2(
      encoder_network=converter._create_bert_model(legacy),  # pylint: disable=protected-access
      mlm_activation=tf_utils.get_activation(legacy.hidden_act), mlm_initializer=initializer,
      classification_heads=[head])
  model(model.inputs)
  # Everything but the NSP head comes from their converter's checkpoint.
  tf.train.Checkpoint(model=model).read(tf.train.latest_checkpoint(
      os.path.dirname(v2_prefix))).expect_partial()
  reader = tf.train.load_checkpoint(tf1_prefix)
  np.testing.assert_array_equal(
      model.encoder_network.get_embedding_table().numpy(),
      reader.get_tensor("bert/embeddings/word_embeddings"))
  head.dense.kernel.assign(reader.get_tensor("bert/pooler/dense/kernel"))
  head.dense.bias.assign(reader.get_tensor("bert/pooler/dense/bias"))
  head.out_proj.kernel.assign(reader.get_tensor("cls/seq_relationship/output_weights").T)
  head.out_proj.bias.assign(reader.get_tensor("cls/seq_relationship/output_bias"))
  return model


def peer_optimizer(name, schedule, epsilon=1e-6):
  """Their optimizer by our name, with the original's settings; their own clipping off (the
  step clips, as ours)."""
  from official.modeling.optimization import lamb  # pylint: disable=import-outside-toplevel
  from official.modeling.optimization import legacy_adamw  # pylint: disable=import-outside-toplevel
  import tf_keras  # pylint: disable=import-outside-toplevel

  class Schedule(tf_keras.optimizers.schedules.LearningRateSchedule):
    def __call__(self, step):
      return schedule(step)

  if name == "lamb":
    return lamb.LAMB(Schedule(), weight_decay_rate=0.01, epsilon=epsilon,
                     exclude_from_weight_decay=EXCLUDE)
  return legacy_adamw.AdamWeightDecay(Schedule(), weight_decay_rate=0.01, epsilon=epsilon,
                                      exclude_from_weight_decay=EXCLUDE, gradient_clip_norm=0.0)


def peer_step_fn(model, optimizer):
  """One training step of the peer: the original's losses (masked-LM sum over weights + 1e-5,
  NSP mean), clipping at global norm 1.0; returns the loss."""
  @tf.function
  def step(features):
    with tf.GradientTape() as tape:
      out = model({k: features[k] for k in ("input_word_ids", "input_mask", "input_type_ids",
                                           "masked_lm_positions")}, training=True)
      log_probs = tf.nn.log_softmax(out["mlm_logits"], -1)  # [b, P, vocab]
      nll = -tf.gather(log_probs, features["masked_lm_ids"], batch_dims=2)
      weights = features["masked_lm_weights"]
      mlm = tf.reduce_sum(nll * weights) / (tf.reduce_sum(weights) + 1e-5)
      nsp = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
          tf.reshape(features["next_sentence_labels"], [-1]), out["next_sentence"]))
      loss = mlm + nsp
    pairs = [(g, v) for g, v in zip(tape.gradient(loss, model.trainable_variables),
                                    model.trainable_variables) if g is not None]
    clipped, _ = tf.clip_by_global_norm([g for g, _ in pairs], 1.0)
    optimizer.apply_gradients(zip(clipped, [v for _, v in pairs]))
    return loss
  return step


def our_step_fn(trainer):
  step = tf.function(lambda f: trainer.strategy.run(trainer._replica_train_step, args=(f,)))  # noqa: SLF001  pylint: disable=protected-access
  return lambda features: float(step(features)["loss"])
