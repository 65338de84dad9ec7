"""TensorFlow Lite export of the `serve_ids` signature (`export --export_format=tflite`).

DIR/model.tflite has one signature, `serve_ids`: int32 `input_word_ids`, `input_mask`,
`input_type_ids` in, the SavedModel's `serve_ids` outputs out under the same names, all of
them (the string outputs `predicted_labels` and `masked_lm_top_tokens` are builtin GATHERs
from a string table). Only TFLite builtin ops: the plain LiteRT interpreter runs it, with no
Flex delegate and no custom ops.

Shapes: seq is fixed to --max_seq_length (pad as the SavedModel's text signatures do); the
batch is dynamic ([-1, seq]; a signature runner resizes to what it is given), except for
feature_tagger, whose batch is 1: the Keras LSTM's while loop becomes TFLite tensor-list ops
only when every shape but the loop's is static. multiple_choice: [batch, num_choices, seq],
num_choices dynamic too.

--quantize: none (float32), dynamic (int8 weights, dynamic-range: float activations, int8
kernels where the activations are quantized on the fly), float16 (float16 weights, computed
in float32). The text signatures are not converted: the tokenizer's ops are not TFLite
builtins (docs/export.md, "On-device models").
"""

import tempfile

import tensorflow as tf

from official_bert.serving import signatures

QUANTIZE_MODES = ("none", "dynamic", "float16")
MODEL_FILE = "model.tflite"
SIGNATURE = "serve_ids"
# Model types whose graph converts only at a static batch (see the module doc).
_FIXED_BATCH = {"feature_tagger": 1}


def input_shape(model_type, max_seq_length):
  """The shape of each input (None: dynamic)."""
  batch = _FIXED_BATCH.get(model_type)
  if model_type == "multiple_choice":
    return [batch, None, max_seq_length]
  return [batch, max_seq_length]


def convert(module, model_type, max_seq_length, quantize="none"):
  """(.tflite bytes, export info) of a `signatures.ServingModule`'s serve_ids."""
  specs = [tf.TensorSpec(input_shape(model_type, max_seq_length), tf.int32, name=name)
           for name in signatures.INPUT_NAMES]
  # The SavedModel's serve_ids, traced again at the fixed seq length.
  serve_ids = tf.function(module.serve_ids_in_graph,
                          input_signature=specs, autograph=False)
  concrete = serve_ids.get_concrete_function()  # traced once, saved as is
  outputs = sorted(concrete.structured_outputs)
  # Through a SavedModel rather than from_concrete_functions: that keeps the signature's
  # name and its input and output names in the .tflite. Only the variables serve_ids reads
  # are saved: the whole module would save (and the converter load) the text signatures'
  # tokenizer too, a third of the conversion's time.
  holder = tf.Module()
  holder.model_variables = module.model_variables
  with tempfile.TemporaryDirectory(prefix="tflite_export_") as tmp:
    tf.saved_model.save(holder, tmp, signatures={SIGNATURE: concrete})
    converter = tf.lite.TFLiteConverter.from_saved_model(tmp, signature_keys=[SIGNATURE])
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    if quantize != "none":
      converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if quantize == "float16":
      converter.target_spec.supported_types = [tf.float16]
    content = converter.convert()
  info = {"signature": SIGNATURE,
          "input_shape": [-1 if d is None else d for d in input_shape(model_type, max_seq_length)],
          "outputs": outputs, "quantize": quantize}
  return content, info
