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
quantized on the fly per batch, float outputs; calibrated on sample texts, the fewest MatMuls
that bring them to a given cosine stay float32 (`onnx_quantization`).
"""

import contextlib
import os

import tensorflow as tf

from official_bert.serving import onnx_quantization
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


def convert(module, model_type, quantize="none", calibration=None, min_cosine=0.99):
  """(.onnx bytes, export info) of a `signatures.ServingModule`'s serve_ids.

  calibration, min_cosine: for --quantize=dynamic, `onnx_quantization.quantize`'s.
  """
  # Imported here: only this export needs them, and tf2onnx's import is slow.
  import tf2onnx  # pylint: disable=g-import-not-at-top

  specs = [tf.TensorSpec(input_shape(model_type), tf.int32, name=name)
           for name in signatures.INPUT_NAMES]
  serve_ids = tf.function(module.serve_ids_in_graph,
                          input_signature=specs, autograph=False)
  with signatures.at_least_one_mask_slot():  # traced here, for ONNX Runtime
    outputs = sorted(serve_ids.get_concrete_function().structured_outputs)
    with _optimizer_errors_raised():
      proto, _ = tf2onnx.convert.from_function(serve_ids, input_signature=specs, opset=OPSET)
  onnx_rewrites.rewrite_for_onnx_runtime(proto)
  content = proto.SerializeToString()
  info = {"input_shape": [-1 if d is None else d for d in input_shape(model_type)],
          "outputs": outputs, "opset": OPSET, "quantize": quantize}
  if quantize == "dynamic":
    content, info["quantization"] = onnx_quantization.quantize(content, calibration, min_cosine)
  return content, info


@contextlib.contextmanager
def _optimizer_errors_raised():
  """tf2onnx's graph optimizer, with an optimizer's failure raised rather than caught: to
  catch it, tf2onnx copies the whole graph before each of its passes (hundreds of deep
  copies, a third of a conversion's time); every pass succeeds on our graphs."""
  name = "TF2ONNX_CATCH_ERRORS"
  before = os.environ.get(name)
  os.environ[name] = "FALSE"
  try:
    yield
  finally:
    if before is None:
      del os.environ[name]
    else:
      os.environ[name] = before
