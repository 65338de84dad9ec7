r"""Queries an exported pretraining SavedModel with raw text: top tokens at every [MASK].

  python -m official_bert.demo_query --export_dir=build/demo/export \
    --text="The [MASK] module provides functions for working with regular expressions."

This is what a serving client sees: it imports only TensorFlow and tensorflow-text (whose
ops the in-graph tokenizer uses; importing it registers them), never this repository's code,
and needs no vocabulary file: the SavedModel tokenizes the text and returns the predicted
tokens as strings (`official_bert.serving.signatures` documents the outputs).
"""

import os
import runpy
import sys

# TensorFlow's C++ start-up noise (on a machine without a GPU, an ERROR "failed call to cuInit")
# is set off before TensorFlow is imported, by the rule of every command here
# (`data_prep.quiet_startup`). Its file is run, not imported: a client needs none of this
# repository, and without it keeps TensorFlow's own logging.
_QUIET_STARTUP = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "data_prep",
                              "quiet_startup.py")
if os.path.exists(_QUIET_STARTUP):
  runpy.run_path(_QUIET_STARTUP)["quiet_tensorflow_startup"]()

from absl import app  # noqa: E402
from absl import flags  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_text  # noqa: E402,F401  # registers the tokenizer's ops


def define_flags():
  """Defines the flags; called only when run as a program, so importing this module
  (tests, other tools) never clashes with flags of the same name elsewhere."""
  flags.DEFINE_string("export_dir", None, "A SavedModel from `export --model_type=pretraining`.")
  flags.DEFINE_multi_string(
      "text", ["The [MASK] module provides functions for working with regular expressions."],
      "Sentences with [MASK] tokens (repeat the flag for several).")


FLAGS = flags.FLAGS


class NotAPretrainingExport(ValueError):
  """--export_dir is no SavedModel, or not one of `export --model_type=pretraining`."""


def query(export_dir, texts):
  """Returns, per text, [(position, [(token, probability), ...]), ...] for each [MASK]."""
  if not (tf.io.gfile.exists(os.path.join(export_dir, "saved_model.pb"))
          or tf.io.gfile.exists(os.path.join(export_dir, "saved_model.pbtxt"))):
    raise NotAPretrainingExport(f"--export_dir={export_dir}: no SavedModel there (an "
                                f"`export --model_type=pretraining` folder)")
  serve = tf.saved_model.load(export_dir).signatures.get("serving_default")
  outputs = sorted(serve.structured_outputs) if serve is not None else []
  if "masked_lm_top_tokens" not in outputs:
    raise NotAPretrainingExport(f"--export_dir={export_dir} is not a pretraining export (its "
                                f"outputs: {', '.join(outputs) or 'none'}): export with "
                                f"--model_type=pretraining")
  out = serve(text=tf.constant(texts))
  positions = out["masked_lm_positions"].numpy()
  tokens = out["masked_lm_top_tokens"].numpy()
  probabilities = out["masked_lm_top_probabilities"].numpy()
  results = []
  for row in range(len(texts)):
    masks = []
    for slot, position in enumerate(positions[row]):
      if position < 0:  # padding: this text has fewer [MASK]s than the longest one
        continue
      masks.append((int(position), [
          (t.decode("utf-8"), float(p)) for t, p in zip(tokens[row, slot], probabilities[row, slot])
      ]))
    results.append(masks)
  return results


def main(argv):
  del argv
  if not FLAGS.export_dir:
    raise app.UsageError("--export_dir is required")
  try:
    results = query(FLAGS.export_dir, FLAGS.text)
  except NotAPretrainingExport as e:
    sys.exit(f"E {e}")  # one line on stderr, exit status 1
  for text, masks in zip(FLAGS.text, results):
    print(f"\n{text}")
    if not masks:
      print("  (no [MASK] in the text)")
    for i, (position, top) in enumerate(masks, start=1):
      shown = "  ".join(f"{token} {p:.3f}" for token, p in top)
      print(f"  [MASK] #{i} (position {position}): {shown}")


if __name__ == "__main__":
  define_flags()
  app.run(main)
