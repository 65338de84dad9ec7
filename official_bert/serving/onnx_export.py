"""ONNX export of the `serve_ids` signature (`export --export_format=onnx`), for ONNX Runtime.

DIR/model.onnx takes int32 `input_word_ids`, `input_mask`, `input_type_ids` [batch, seq]
(multiple_choice: [batch, num_choices, seq]), batch and seq both dynamic (seq up to the
model's max_position_embeddings; pad a batch to its longest text, as the SavedModel's text
signatures do), and returns the SavedModel's `serve_ids` outputs under the same names. The app
tokenizes with DIR/vocab.txt, as for TFLite: the in-graph tokenizer (tensorflow-text's
normalization, regex split and WordPiece kernels) has no ONNX operators, and an ONNX Runtime
extension library would be a second tokenizer to keep exact.

Converted from the traced TensorFlow function by tf2onnx (opset `OPSET`), so the graph is the
SavedModel's, not a second model definition; `onnx_rewrites` then lets ONNX Runtime fuse
its LayerNorms, Dense MatMuls and GELUs (the same values). --quantize=dynamic
then applies ONNX Runtime's dynamic quantization: int8 weights per output channel, activations
quantized on the fly per batch, float outputs.
"""

import logging
import os
import tempfile

import tensorflow as tf

from official_bert.serving import onnx_rewrites
from official_bert.serving import signatures

QUANTIZE_MODES = ("none", "dynamic")
MODEL_FILE = "model.onnx"
SIGNATURE = "serve_ids"
# 17: LayerNormalization is one operator; ONNX Runtime 1.16+ runs it.
OPSET = 17


def input_shape(model_type):
  """The shape of each input (None: dynamic)."""
  return [None, None, None] if model_type == "multiple_choice" else [None, None]


def convert(module, model_type, quantize="none"):
  """(.onnx bytes, export info) of a `signatures.ServingModule`'s serve_ids."""
  # Imported here: only this export needs them, and tf2onnx's import is slow.
  import tf2onnx  # pylint: disable=g-import-not-at-top

  specs = [tf.TensorSpec(input_shape(model_type), tf.int32, name=name)
           for name in signatures.INPUT_NAMES]
  serve_ids = tf.function(module.signatures()[SIGNATURE].python_function,
                          input_signature=specs, autograph=False)
  outputs = sorted(serve_ids.get_concrete_function().structured_outputs)
  proto, _ = tf2onnx.convert.from_function(serve_ids, input_signature=specs, opset=OPSET)
  onnx_rewrites.rewrite_for_onnx_runtime(proto)
  content = proto.SerializeToString()
  if quantize == "dynamic":
    content = _quantize_dynamic(content)
  info = {"input_shape": [-1 if d is None else d for d in input_shape(model_type)],
          "outputs": outputs, "opset": OPSET, "quantize": quantize}
  return content, info


def _quantize_dynamic(content):
  """int8 weights of the MatMuls (ONNX Runtime's quantizer reads and writes files)."""
  from onnxruntime.quantization import QuantType  # pylint: disable=g-import-not-at-top
  from onnxruntime.quantization import quantize_dynamic  # pylint: disable=g-import-not-at-top
  with tempfile.TemporaryDirectory(prefix="onnx_export_") as tmp:
    fp32, int8 = os.path.join(tmp, "fp32.onnx"), os.path.join(tmp, "int8.onnx")
    with open(fp32, "wb") as f:
      f.write(content)
    # MatMul only: the embedding tables stay float (a quantized Gather costs accuracy and
    # saves no time). Per output channel: MiniLM's SST-2 sentence embeddings keep a mean
    # cosine of 0.991 to float32 (0.958 with one scale per matrix; bench/RESULTS.md).
    # Its "consider pre-processing" warning (symbolic shape inference, for graphs whose
    # weights' shapes are unknown) is not news for this graph: left out of the user's log.
    quiet = logging.getLogger()
    hide = lambda record: not record.getMessage().startswith("Please consider")
    quiet.addFilter(hide)
    try:
      quantize_dynamic(fp32, int8, weight_type=QuantType.QInt8, per_channel=True,
                       op_types_to_quantize=["MatMul"])
    finally:
      quiet.removeFilter(hide)
    with open(int8, "rb") as f:
      return f.read()
