"""int8 ONNX with a measured agreement: ONNX Runtime's dynamic quantization, calibrated.

`export --export_format=onnx --quantize=dynamic` makes every weight MatMul int8 (per output
channel; activations quantized per batch on the fly). That costs some agreement with float32,
and the cost sits in a few MatMuls (for MiniLM, a layer's FFN output MatMul alone is a fifth
of the embeddings' error: one wide activation range). With `--quantize_calibration_file`
(sample texts of the app's own kind) the export measures that cost and keeps float32 the
fewest MatMuls that bring every calibration text's outputs to a cosine of at least
`--quantize_min_cosine` to float32's:

  0. smoothing (SmoothQuant's, Xiao et al., 2022): each MatMul's input channels are divided by
     s = max|x|^0.75 / max|W row|^0.25 (the activations' maxima over the texts) and its weight
     rows multiplied by s, the same products in float32, but narrower activation ranges for
     the per-batch int8 quantization (a Mul before the MatMul; for MiniLM on SST-2 the mean
     cosine goes from 0.9915 to 0.9946, 3% slower; alpha 0.5 was worse, 0.85 and 1.0 too);
  1. everything int8: if every text agrees, done (one quantization);
  2. else each MatMul alone int8: its mean error (1 - cosine) on the texts ranks it;
  3. the k most harmful stay float32, k the smallest that agrees (a binary search).

A text's "outputs" are all the model's float outputs for it, flattened and concatenated (an
encoder's embeddings, a classifier's logits and probabilities, ...).
"""

import logging
import os
import tempfile

import numpy as np

from official_bert.serving import onnx_rewrites

BATCH = 32
SMOOTHING = 0.75  # SmoothQuant's alpha: how much of an activation's range moves to the weights


def read_texts(path, flag="--quantize_calibration_file"):
  """[(text, text_b or None)] from one text per line, a tab between a pair's two texts."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  if not tf.io.gfile.exists(path):
    raise ValueError(f"{flag}={path}: no such file")
  with tf.io.gfile.GFile(path) as f:
    lines = [line.rstrip("\r\n") for line in f]
  texts = [tuple(line.split("\t", 1)) if "\t" in line else (line, None)
           for line in lines if line.strip()]
  if not texts:
    raise ValueError(f"{flag}={path} holds no text (one text per line, or a pair with a tab)")
  return texts


def calibration_inputs(preprocessor, texts):
  """The serve_ids inputs (numpy, batches of `BATCH`) of `read_texts`' texts, packed by the
  export's text preprocessor (`text_packing.TextToInputs`)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  feeds = []
  for start in range(0, len(texts), BATCH):
    batch = texts[start:start + BATCH]
    first = tf.constant([a for a, _ in batch])
    if all(b is None for _, b in batch):
      inputs = preprocessor(first)
    else:
      inputs = preprocessor(first, tf.constant([b or "" for _, b in batch]))
    feeds.append({name: value.numpy() for name, value in inputs.items()})
  return feeds


def quantize(content, calibration=None, min_cosine=0.99):
  """(int8 .onnx bytes, info) of float32 .onnx bytes.

  calibration: serve_ids inputs (`calibration_inputs`), or None for every MatMul int8.
  info: `float_matmuls` (the names kept float32) and, calibrated, the texts' `worst_cosine`
  and `mean_cosine`.
  """
  with tempfile.TemporaryDirectory(prefix="onnx_quantize_") as tmp:
    fp32, path = os.path.join(tmp, "fp32.onnx"), os.path.join(tmp, "int8.onnx")
    with open(fp32, "wb") as f:  # the quantizer's source: smoothed when calibrated
      f.write(content if calibration is None else smooth(content, calibration))

    def int8(keep_float):
      _quantize_file(fp32, path, keep_float)
      with open(path, "rb") as f:
        return f.read()

    if calibration is None:
      return int8([]), {"float_matmuls": []}
    reference = _outputs(content, calibration)

    def cosines(model):
      got = _outputs(model, calibration)
      return np.sum(got * reference, 1) / np.maximum(
          np.linalg.norm(got, axis=1) * np.linalg.norm(reference, axis=1), 1e-30)

    def result(model, keep_float, agreement):
      return model, {"float_matmuls": list(keep_float), "calibration_texts": len(agreement),
                     "smoothing": SMOOTHING, "min_cosine": min_cosine,
                     "worst_cosine": float(agreement.min()),
                     "mean_cosine": float(agreement.mean())}

    model = int8([])
    agreement = cosines(model)
    if agreement.min() >= min_cosine:
      return result(model, [], agreement)
    matmuls = _weight_matmuls(content)
    harm = {}
    for name in matmuls:
      harm[name] = float(np.mean(1.0 - cosines(int8([m for m in matmuls if m != name]))))
    ranked = sorted(matmuls, key=lambda m: -harm[m])
    logging.info("int8 harm per MatMul (mean 1 - cosine): %s",
                 ", ".join(f"{m} {harm[m]:.2e}" for m in ranked))
    # All float32 agrees exactly, so the search ends; more float MatMuls, better agreement.
    low, high, best = 1, len(ranked), None
    while low <= high:
      k = (low + high) // 2
      model = int8(ranked[:k])
      agreement = cosines(model)
      if agreement.min() >= min_cosine:
        best, high = (model, ranked[:k], agreement), k - 1
      else:
        low = k + 1
    if best is None:  # float rounding of a fully float model, below an extreme target
      best = (content, ranked, cosines(content))
    return result(*best)


def smooth(content, feeds, alpha=SMOOTHING):
  """float32 .onnx bytes with each weight MatMul's input scaled down per channel and its
  weight rows scaled up by the same s (module doc); MatMuls that read one input share its s."""
  import onnx  # pylint: disable=g-import-not-at-top
  from onnx import numpy_helper  # pylint: disable=g-import-not-at-top
  import onnxruntime as ort  # pylint: disable=g-import-not-at-top
  model = onnx.load_from_string(content)
  graph = model.graph
  weights = {t.name: t for t in graph.initializer}
  readers = onnx_rewrites.consumers_of(graph)
  by_input = {}  # {activation: [MatMul]}; a weight read elsewhere too is left alone
  for node in graph.node:
    if node.op_type == "MatMul" and node.input[1] in weights and len(readers[node.input[1]]) == 1:
      by_input.setdefault(node.input[0], []).append(node)
  if not by_input:
    return content
  probe = onnx.load_from_string(content)
  probe.graph.output.extend(onnx.helper.make_empty_tensor_value_info(x) for x in by_input)
  session = ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
  names = list(by_input)
  peak = {x: 0.0 for x in names}  # [channels] max |x| over every text
  for feed in feeds:
    for x, value in zip(names, session.run(names, feed)):
      peak[x] = np.maximum(peak[x], np.abs(value.reshape(-1, value.shape[-1])).max(0))
  for x, nodes in by_input.items():
    kernels = [numpy_helper.to_array(weights[n.input[1]]) for n in nodes]  # [in, out] each
    rows = np.max([np.abs(k).max(1) for k in kernels], 0)  # [in]
    scale = (np.maximum(peak[x], 1e-5) ** alpha /
             np.maximum(rows, 1e-5) ** (1 - alpha)).astype(np.float32)
    for node, kernel in zip(nodes, kernels):
      weights[node.input[1]].CopyFrom(numpy_helper.from_array(
          (kernel * scale[:, None]).astype(np.float32), node.input[1]))
    inverse = numpy_helper.from_array(1.0 / scale, f"{x}/smoothing")
    graph.initializer.append(inverse)
    smoothed = f"{x}/smoothed"
    readers_of_x = {n.name for n in nodes}
    first = min(i for i, n in enumerate(graph.node) if n.name in readers_of_x)
    graph.node.insert(first, onnx.helper.make_node("Mul", [x, inverse.name], [smoothed],
                                                   name=f"{x}/smooth"))
    for node in nodes:
      node.input[0] = smoothed
  return model.SerializeToString()


def _weight_matmuls(content):
  """The names of the MatMul nodes whose second input is a constant weight."""
  import onnx  # pylint: disable=g-import-not-at-top
  graph = onnx.load_from_string(content).graph
  weights = {t.name for t in graph.initializer}
  return [n.name for n in graph.node if n.op_type == "MatMul" and n.input[1] in weights]


def _outputs(content, feeds):
  """[texts, values]: each text's float outputs, flattened and concatenated."""
  import onnxruntime as ort  # pylint: disable=g-import-not-at-top
  session = ort.InferenceSession(content, providers=["CPUExecutionProvider"])
  names = sorted(o.name for o in session.get_outputs() if o.type == "tensor(float)")
  rows = []
  for feed in feeds:
    values = session.run(names, feed)
    batch = len(values[0])
    rows.append(np.concatenate([v.reshape(batch, -1) for v in values], 1))
  width = max(r.shape[1] for r in rows)  # per-position outputs: batches differ in seq
  return np.concatenate([np.pad(r, ((0, 0), (0, width - r.shape[1]))) for r in rows])


def _quantize_file(fp32, int8, keep_float):
  """ONNX Runtime's dynamic quantization of the file `fp32` to `int8`, MatMuls only."""
  from onnxruntime.quantization import QuantType  # pylint: disable=g-import-not-at-top
  from onnxruntime.quantization import quantize_dynamic  # pylint: disable=g-import-not-at-top
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
                     op_types_to_quantize=["MatMul"], nodes_to_exclude=list(keep_float))
  finally:
    quiet.removeFilter(hide)
