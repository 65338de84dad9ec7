r"""Pretraining side by side with the Model Garden at base size: our loop vs `BertPretrainerV2`
with their optimizer, the same initial weights (our TF1 converter, then theirs) and batches.

  python bench/bench_model_garden_training_parity.py [--steps=50 --seq=64 --batch=4]

Prints each variant's largest relative loss difference over the steps, the first and last
losses, and each side's seconds per step. Dropout is off (random masks cannot be shared).
Variants: LAMB at epsilon 1e-6 (theirs is the paper's, as ours); AdamW at epsilon 1e-12,
where their Keras-style "epsilon hat" and our PyTorch form coincide; AdamW at the original's
1e-6, where they differ by design. The shared peer code is tests/model_garden_peer.py (the
tiny-config test is tests/training/test_model_garden_training_parity.py).
"""

import argparse
import datetime
import os
import sys
import tempfile
import time

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, _REPO)
sys.path.insert(0, os.path.join(_REPO, "tests"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import keras  # noqa: E402
import machine  # noqa: E402  # bench/machine.py, beside this script
import model_garden_peer as peer_lib  # noqa: E402  # tests/model_garden_peer.py
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from official_bert.modeling.bert_config import BertConfig  # noqa: E402
from official_bert.training import optimization  # noqa: E402

VARIANTS = (("lamb", 1e-6), ("adamw", 1e-12), ("adamw", 1e-6))


def parse_args():
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--steps", type=int, default=50)
  p.add_argument("--seq", type=int, default=64)
  p.add_argument("--preds", type=int, default=10)
  p.add_argument("--batch", type=int, default=4)
  p.add_argument("--learning_rate", type=float, default=1e-4)
  p.add_argument("--layers", type=int, default=12)
  return p.parse_args()


def timed_losses(step_fn, data):
  out = []
  start = time.time()
  for features in data:
    out.append(float(step_fn({k: tf.constant(v) for k, v in features.items()})))
  return np.array(out), (time.time() - start) / len(data)


def main():
  args = parse_args()
  tf.config.threading.set_intra_op_parallelism_threads(2)
  config = BertConfig(vocab_size=30522, hidden_size=768, num_hidden_layers=args.layers,
                      num_attention_heads=12, intermediate_size=3072,
                      max_position_embeddings=512, type_vocab_size=2, hidden_act="gelu",
                      hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
  schedule = optimization.WarmupLinearDecay(args.learning_rate, args.steps // 10, args.steps)
  data = peer_lib.batches(config, args.steps, args.batch, args.seq, args.preds)
  rows = []
  for name, epsilon in VARIANTS:
    keras.utils.set_random_seed(1)
    trainer = peer_lib.our_trainer(config, args.seq, args.preds, args.batch, name, schedule,
                                   epsilon)
    work = tempfile.mkdtemp(prefix="bench_mg_parity_")
    peer = peer_lib.peer_pretrainer(config, peer_lib.write_tf1(trainer.model, work), work)
    ours, ours_s = timed_losses(peer_lib.our_step_fn(trainer), data)
    theirs, theirs_s = timed_losses(
        peer_lib.peer_step_fn(peer, peer_lib.peer_optimizer(name, schedule, epsilon)), data)
    rel = np.abs(ours - theirs) / np.abs(theirs)
    rows.append((name, epsilon, rel.max(), int(rel.argmax()) + 1, ours[0], ours[-1], theirs[-1],
                 ours_s, theirs_s))
    print(rows[-1], flush=True)
    del trainer, peer
  print(f"\nRun {datetime.datetime.now():%Y-%m-%d %H:%M} on {machine.cpu_model()}, "
        f"{os.cpu_count()} cores; `{' '.join(sys.argv)}`: BERT-base shape "
        f"({args.layers} layers), seq {args.seq}, {args.preds} predictions, batch "
        f"{args.batch}, {args.steps} steps, peak lr {args.learning_rate}, 10% warmup\n")
  print("| optimizer | epsilon | max relative loss difference (step) | loss step 1 | "
        "last loss ours / theirs | s/step ours / theirs |")
  print("|---|---|---|---|---|---|")
  for name, eps, rel, at, first, last, last_theirs, ours_s, theirs_s in rows:
    print(f"| {name} | {eps:g} | {rel:.2e} ({at}) | {first:.4f} | {last:.4f} / "
          f"{last_theirs:.4f} | {ours_s:.2f} / {theirs_s:.2f} |")


if __name__ == "__main__":
  main()
