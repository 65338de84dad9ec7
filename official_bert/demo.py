r"""The two glue steps of `make demo` around run_pretraining.

  python -m official_bert.demo --stage=config --vocab_file=V --bert_config_file=OUT.json
  python -m official_bert.demo --stage=report --output_dir=MODEL_DIR \
    --train_input_file=TRAIN --eval_input_file=HELDOUT --vocab_file=V

`config` writes the tiny configuration with the vocabulary's size. `report` puts the held-out
masked-LM accuracy next to the best a model without context can do (always predicting the
token most frequent among the training data's masked tokens), shows the accuracy curve from
TensorBoard, and says where the logs and checkpoints are. It exits non-zero if the model did
not beat the baseline.
"""

import collections
import glob
import json
import os

from absl import flags
import numpy as np
import tensorflow as tf

from data_prep import cli
from data_prep import tfrecord_io
from data_prep import tokenization
from data_prep.pretraining import records_view

# The repository's configs/tiny.json, wherever the command runs from (README: "from any
# folder").
_TINY_CONFIG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            "configs", "tiny.json")


def define_flags():
  flags.DEFINE_enum("stage", None, ["config", "report"], "Which step.")
  flags.DEFINE_string("vocab_file", None, "The demo vocabulary.")
  flags.DEFINE_string("base_config", _TINY_CONFIG, "Model dimensions to start from.")
  flags.DEFINE_string("bert_config_file", None, "Where `config` writes the model config.")
  flags.DEFINE_string("output_dir", None, "run_pretraining's --output_dir.")
  flags.DEFINE_string("train_input_file", None, "Training TFRecords (glob).")
  flags.DEFINE_string("eval_input_file", None, "Held-out TFRecords (glob).")
  flags.DEFINE_integer("max_seq_length", 128, "Sequence length of the files.")
  flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked positions per sequence.")


def _read(path):
  with tf.io.gfile.GFile(path) as f:
    return f.read()


def write_config(base_config, vocab_file, path):
  config = json.loads(_read(base_config))
  config["vocab_size"] = len(tokenization.load_vocab_tokens(vocab_file))
  tfrecord_io.write_text(path, json.dumps(config, indent=2, sort_keys=True))
  print(f"model config: {path} ({config['num_hidden_layers']} layers, hidden "
        f"{config['hidden_size']}, vocab {config['vocab_size']})")


def _masked_labels(pattern):
  paths = sorted(glob.glob(pattern))
  f = records_view.read_instances(paths, flags.FLAGS.max_seq_length,
                                  flags.FLAGS.max_predictions_per_seq)
  return f["masked_lm_ids"][f["masked_lm_weights"] > 0]


def most_frequent_token_baseline(train_pattern, eval_pattern):
  """(token id, accuracy on the held-out masked tokens of always predicting it)."""
  token = collections.Counter(_masked_labels(train_pattern).tolist()).most_common(1)[0][0]
  return token, float(np.mean(_masked_labels(eval_pattern) == token))


def accuracy_curve(output_dir):
  """(step, masked_lm_accuracy) from the training TensorBoard logs."""
  points = []
  for path in glob.glob(os.path.join(output_dir, "train", "events*")):
    for record in tf.data.TFRecordDataset(path):
      event = tf.compat.v1.Event.FromString(record.numpy())
      for value in event.summary.value:
        if value.tag == "masked_lm_accuracy":
          points.append((event.step, float(tf.make_ndarray(value.tensor))))
  return sorted(points)


def report():
  results_file = os.path.join(flags.FLAGS.output_dir, "eval_results.txt")
  results = dict(line.split(" = ") for line in _read(results_file).splitlines())
  accuracy = float(results["masked_lm_accuracy"])
  token, baseline = most_frequent_token_baseline(flags.FLAGS.train_input_file,
                                                 flags.FLAGS.eval_input_file)
  inv_vocab = tokenization.load_vocab_tokens(flags.FLAGS.vocab_file)
  curve = accuracy_curve(flags.FLAGS.output_dir)
  print("masked LM accuracy while training (step: accuracy):")
  shown = curve[::max(1, len(curve) // 8)]
  for step, value in shown + ([curve[-1]] if curve and shown[-1] != curve[-1] else []):
    print(f"  {step:6d}: {value:.3f}")
  print(f"held-out masked LM accuracy after {results['global_step']} steps: {accuracy:.3f} "
        f"(always predicting {inv_vocab[token]!r}, the most frequent masked token: "
        f"{baseline:.3f}; {accuracy / max(baseline, 1e-9):.1f}x)")
  print(f"next sentence accuracy: {float(results['next_sentence_accuracy']):.3f}")
  print(f"checkpoints: {flags.FLAGS.output_dir}/ckpt-*")
  print(f"TensorBoard: tensorboard --logdir={flags.FLAGS.output_dir}")
  if accuracy <= baseline:
    raise ValueError("the model did not beat the most-frequent-token baseline")


def main(argv):
  del argv
  if flags.FLAGS.stage == "config":
    write_config(flags.FLAGS.base_config, flags.FLAGS.vocab_file, flags.FLAGS.bert_config_file)
  else:
    report()


if __name__ == "__main__":
  define_flags()
  cli.launch(main, required_flags=("stage", "vocab_file"))
