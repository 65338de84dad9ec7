"""ONNX export (`--export_format=onnx`): ONNX Runtime gives the SavedModel's serve_ids outputs.

Every model type is exported from a tiny model's checkpoint as model.onnx (--quantize=none);
the classifier and the encoder also with --quantize=dynamic. The .onnx runs in ONNX Runtime;
the reference is the serve_ids signature of the module the export converted (what the
SavedModel export saves), run in TensorFlow on the same inputs, at two lengths (the graph's
batch and seq are dynamic).

Tolerances on |onnx - SavedModel| <= TOL * max(1, max |SavedModel|):
  none     1e-4  both float32; only the kernels' summation order differs.
  dynamic  1e-1  int8 weights (per output channel) and activations quantized per batch on the
                 fly, one scale per tensor (ONNX Runtime's dynamic quantization of the
                 MatMuls): a few % per product on these random weights, compounding over the
                 layers; the real model's agreement (MiniLM, cosine to float32) is in
                 bench/RESULTS.md.
Integer outputs are exact in float32. Quantized, the classifier's predictions on the SST-2
fixture sentences may differ only where the float model's two logits are within the tolerance;
the count of changed predictions is asserted small. Calibrated (--quantize_calibration_file),
the export keeps float32 the MatMuls that bring its texts to --quantize_min_cosine; that test
builds a model with one MatMul that int8 weights destroy on every CPU, since the tiny random
model's own int8 error depends on the CPU's int8 kernels (with AVX-512 VNNI, all-int8 agrees
to a cosine of 0.99999; on AVX2, saturating u8s8 products, 0.998).
"""

import contextlib
import json
import os
import re

from conftest import GLUE_DATA
from conftest import UNCASED_VOCAB
from conftest import product_attention_blocks
from conftest import random_model_checkpoints
import keras
import numpy as np
import onnx
import onnxruntime as ort
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  # registers the ops of the SavedModel's text signatures

from data_prep import tokenization
from official_bert.interop import checkpointing
from official_bert.interop import model_files
from official_bert.interop import model_folder
from official_bert.modeling import model_types
from official_bert.modeling.bert_config import BertConfig
from official_bert.serving import exporter
from official_bert.serving import onnx_export
from official_bert.serving import onnx_rewrites
from official_bert.serving import text_packing

pytestmark = pytest.mark.large  # trains or runs commands: `make test`, not `make test-fast`

SEQ = 32
CONFIG = BertConfig(vocab_size=12207, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=128, max_position_embeddings=64, type_vocab_size=2)
LABELS = ["O", "B", "I"]
HEAD_CONFIG = {"layers": [-1, -2], "combine": "concat", "lstm_units": 8, "lstm_layers": 1}
TOL = {"none": 1e-4, "dynamic": 1e-1}
QUANTIZED = ("classifier", "encoder")


def _labels(model_type):
  return LABELS[:2] if model_type == "classifier" else LABELS


@pytest.fixture(scope="module", name="exported")
def _exported(tmp_path_factory):
  """{model_type: {"none" | "dynamic": export dir, "serve_ids": the reference function}}."""
  root = tmp_path_factory.mktemp("onnx")
  config_file = str(root / "bert_config.json")
  model_files.write_config_file(config_file, CONFIG)
  checkpoints = random_model_checkpoints(root, CONFIG, lambda t: len(_labels(t)), HEAD_CONFIG,
                                         scale=0.1)
  dirs = {}
  for model_type, checkpoint in checkpoints.items():
    labels = _labels(model_type)
    dirs[model_type] = {}
    # The encoder's exports at the product's 8 attention blocks: the tests' batches of 3
    # leave some empty, which ONNX Runtime must run as the product's exports have them. The
    # other types share its attention; at the tests' 2 blocks their exports take a third less.
    blocks = product_attention_blocks if model_type == "encoder" else contextlib.nullcontext
    with blocks():
      for name in ("none",) + (("dynamic",) if model_type in QUANTIZED else ()):
        dirs[model_type][name] = str(root / model_type / name)
        module = exporter.export(
            model_folder.read(checkpoint, config_file, UNCASED_VOCAB, True),
            dirs[model_type][name], exporter.ExportOptions(
                model_type, max_seq_length=SEQ,
                label_names=labels if model_type in model_types.NEEDS_NUM_LABELS else None,
                top_k=3, export_format="onnx", quantize=name,
                squad_options=({"max_query_length": 8, "doc_stride": 8}
                               if model_type == "squad" else None)))
        dirs[model_type]["serve_ids"] = module.signatures()["serve_ids"]
      dirs[model_type]["files"] = (config_file, checkpoint)
  return dirs


def _inputs(model_type, seed, seq):
  rng = np.random.default_rng(seed)
  shape = [2, 3, seq] if model_type == "multiple_choice" else [3, seq]
  lengths = rng.integers(4, seq + 1, size=shape[:-1])
  positions = np.arange(seq)
  mask = (positions < lengths[..., None]).astype(np.int32)
  ids = rng.integers(1000, 3000, size=shape).astype(np.int32)
  ids[rng.random(shape) < 0.15] = 103  # [MASK]
  ids[..., 0] = 101  # [CLS]
  types = ((positions >= lengths[..., None] // 2) & (mask > 0)).astype(np.int32)
  return {"input_word_ids": np.where(mask > 0, ids, 0).astype(np.int32), "input_mask": mask,
          "input_type_ids": types}


def _session(export_dir):
  options = ort.SessionOptions()
  options.intra_op_num_threads = 1
  return ort.InferenceSession(os.path.join(export_dir, onnx_export.MODEL_FILE), options,
                              providers=["CPUExecutionProvider"])


def _run(session, inputs):
  names = [o.name for o in session.get_outputs()]
  return dict(zip(names, session.run(names, inputs)))


@pytest.mark.parametrize("model_type", model_types.MODEL_TYPES)
def test_onnx_gives_the_saved_models_serve_ids_outputs(model_type, exported):
  dirs = exported[model_type]
  serve_ids = dirs["serve_ids"]
  for quantize in [q for q in TOL if q in dirs]:
    session = _session(dirs[quantize])
    assert sorted(i.name for i in session.get_inputs()) == sorted(
        ["input_word_ids", "input_mask", "input_type_ids"])
    for seed, seq in ((0, SEQ), (1, 11)):  # any length up to the maximum
      inputs = _inputs(model_type, seed, seq)
      want = {k: v.numpy() for k, v in serve_ids(**{k: tf.constant(v)
                                                    for k, v in inputs.items()}).items()}
      got = _run(session, inputs)
      assert sorted(got) == sorted(want), "every serve_ids output, under the same names"
      for name, value in want.items():
        assert got[name].shape == value.shape, (quantize, name)
        if value.dtype.kind == "f":
          np.testing.assert_allclose(got[name], value, rtol=0,
                                     atol=TOL[quantize] * max(1.0, float(np.abs(value).max())),
                                     err_msg=f"{model_type} {quantize} {name}")
        elif value.dtype == object:  # strings: ONNX Runtime gives str, TensorFlow bytes
          np.testing.assert_array_equal(got[name].astype(str), value.astype(str),
                                        err_msg=f"{model_type} {quantize} {name}")
        elif quantize == "none":
          np.testing.assert_array_equal(got[name], value, err_msg=f"{model_type} {name}")

def _matmul_weight_types(export_dir):
  """{ONNX data type name: count} of the initializers that MatMuls read (directly, or through
  a DequantizeLinear / DynamicQuantizeLinear-fed MatMulInteger)."""
  model = onnx.load(os.path.join(export_dir, onnx_export.MODEL_FILE))
  initializers = {t.name: t for t in model.graph.initializer}
  counts = {}
  for node in model.graph.node:
    if node.op_type in ("MatMul", "MatMulInteger"):
      for name in node.input:
        if name in initializers and len(initializers[name].dims) == 2:
          kind = onnx.TensorProto.DataType.Name(initializers[name].data_type)
          counts[kind] = counts.get(kind, 0) + 1
  return counts


def test_a_pretraining_export_takes_batches_without_a_mask_and_empty_ones(exported):
  """ONNX Runtime's LayerNorm took no [b, 0, hidden]: a batch without [MASK] (and an empty
  one) failed; now each gives 0 slots, as the SavedModel does."""
  session = _session(exported["pretraining"]["none"])
  inputs = _inputs("pretraining", 2, SEQ)
  inputs["input_word_ids"] = np.where(inputs["input_word_ids"] == 103, 1000,
                                      inputs["input_word_ids"]).astype(np.int32)
  for batch in (inputs, {k: v[:0] for k, v in inputs.items()}):
    got = _run(session, batch)
    want = exported["pretraining"]["serve_ids"](**{k: tf.constant(v) for k, v in batch.items()})
    b = len(batch["input_mask"])
    assert got["masked_lm_positions"].shape == (b, 0)
    assert got["masked_lm_top_probabilities"].shape == (b, 0, 3)
    np.testing.assert_allclose(got["next_sentence_logits"], want["next_sentence_logits"].numpy(),
                               atol=1e-4)


@pytest.mark.parametrize("model_type", QUANTIZED)
def test_dynamic_quantization_makes_the_matmul_weights_int8(model_type, exported):
  dirs = exported[model_type]
  floats = _matmul_weight_types(dirs["none"])
  assert set(floats) == {"FLOAT"} and floats["FLOAT"] >= 6 * CONFIG.num_hidden_layers, floats
  assert _matmul_weight_types(dirs["dynamic"]) == {"INT8": floats["FLOAT"]}
  sizes = {q: os.path.getsize(os.path.join(dirs[q], onnx_export.MODEL_FILE))
           for q in ("none", "dynamic")}
  assert sizes["dynamic"] < sizes["none"], sizes  # the float32 embedding tables stay


def test_int8_classifier_predicts_the_sst2_sentences_as_float(exported):
  sentences = _sst2_sentences()
  vocab = tokenization.load_vocab_tokens(UNCASED_VOCAB)
  pack = text_packing.TextToInputs(tokenization.TextTokenizer(vocab), vocab, SEQ, 8)
  inputs = {k: v.numpy() for k, v in pack(tf.constant(sentences)).items()}
  dirs = exported["classifier"]
  fp32, int8 = _run(_session(dirs["none"]), inputs), _run(_session(dirs["dynamic"]), inputs)
  margin = np.abs(np.diff(fp32["logits"], axis=-1))[:, 0]
  changed = fp32["predicted_ids"] != int8["predicted_ids"]
  tol = TOL["dynamic"] * max(1.0, float(np.abs(fp32["logits"]).max()))
  assert (margin[changed] < 2 * tol).all(), "only near-ties may change"
  assert changed.sum() <= max(1, len(sentences) // 20), (changed.sum(), len(sentences))
  cosine = np.sum(fp32["logits"] * int8["logits"]) / (np.linalg.norm(fp32["logits"]) *
                                                       np.linalg.norm(int8["logits"]))
  assert cosine > 0.99


@pytest.mark.parametrize("model_type", QUANTIZED)
def test_graph_is_rewritten_for_onnx_runtimes_fusions(model_type, exported):
  """LayerNorms as single ops, Dense MatMuls on their 3-D input, GELU's erf(x / sqrt(2))."""
  for quantize in ("none", "dynamic"):
    graph = onnx.shape_inference.infer_shapes(onnx.load(os.path.join(
        exported[model_type][quantize], onnx_export.MODEL_FILE))).graph
    ops = [n.op_type for n in graph.node]
    # The embeddings' LayerNorm, and two per layer.
    assert ops.count("LayerNormalization") == 1 + 2 * CONFIG.num_hidden_layers, quantize
    assert "GlobalAveragePool" not in ops and "Sqrt" not in ops, quantize
    producer = {o: n for n in graph.node for o in n.output}
    # CONFIG's "gelu" is the tanh approximation (no Erf); the exact one: the test below.
    erfs = [n for n in graph.node if n.op_type == "Erf"]
    assert all(producer[n.input[0]].op_type == "Div" for n in erfs), quantize
    # No Tensordot flattening of [..., in] to [-1, in] before a MatMul (quantized: before its
    # input's DynamicQuantizeLinear); attention's [tokens, heads, size] -> [tokens, hidden]
    # is a real reshape.
    initializers = {t.name: onnx.numpy_helper.to_array(t) for t in graph.initializer}
    last_axis = {v.name: v.type.tensor_type.shape.dim[-1].dim_value for v in graph.value_info
                 if v.type.tensor_type.shape.dim}
    flattened = [producer.get(n.input[0]) for n in graph.node
                 if n.op_type in ("MatMul", "DynamicQuantizeLinear")]
    flattened = [n for n in flattened if n is not None and n.op_type == "Reshape" and
                 n.input[1] in initializers and initializers[n.input[1]].tolist()[:1] == [-1]
                 and initializers[n.input[1]].size == 2
                 and last_axis.get(n.input[0]) == initializers[n.input[1]][1]]
    assert not flattened, (quantize, [n.name for n in flattened])


def test_exact_gelu_divides_by_sqrt2_with_the_same_values():
  """TensorFlow's folded x * 0.70710677 before the Erf becomes x / sqrt(2)."""
  h = onnx.helper
  constants = {"half": 0.5, "one": 1.0, "rsqrt2": 0.70710677}
  graph = h.make_graph(
      [h.make_node("Mul", ["half", "x"], ["half_x"]), h.make_node("Mul", ["x", "rsqrt2"], ["s"]),
       h.make_node("Erf", ["s"], ["e"]), h.make_node("Add", ["one", "e"], ["e1"]),
       h.make_node("Mul", ["half_x", "e1"], ["y"])], "gelu",
      [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [None, 8])],
      [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [None, 8])],
      [onnx.numpy_helper.from_array(np.array(v, np.float32), k) for k, v in constants.items()])
  model = h.make_model(graph, opset_imports=[h.make_opsetid("", onnx_export.OPSET)])
  x = np.random.default_rng(0).normal(size=(4, 8)).astype(np.float32) * 3
  run = lambda m: ort.InferenceSession(m.SerializeToString(), providers=[
      "CPUExecutionProvider"]).run(["y"], {"x": x})[0]
  want = run(model)
  assert onnx_rewrites.divide_gelu_by_sqrt2(model) == 1
  assert [n.op_type for n in model.graph.node] == ["Mul", "Div", "Erf", "Add", "Mul"]
  assert "rsqrt2" not in [t.name for t in model.graph.initializer]  # unread now
  np.testing.assert_allclose(run(model), want, rtol=1e-6, atol=1e-6)


def test_export_info_and_files(exported):
  for quantize in ("none", "dynamic"):
    d = exported["classifier"][quantize]
    assert sorted(os.listdir(d)) == ["assets.extra", "model.onnx", "vocab.txt"]
    with open(os.path.join(d, "assets.extra", "export_info.json")) as f:
      info = json.load(f)
    assert info["export_format"] == "onnx"
    want = {"input_shape": [-1, -1], "opset": onnx_export.OPSET, "quantize": quantize,
            "outputs": sorted(o.name for o in _session(d).get_outputs())}
    if quantize == "dynamic":  # without calibration texts, every MatMul is int8
      want["quantization"] = {"float_matmuls": []}
    assert info["onnx"] == want


def _sst2_sentences():
  with open(os.path.join(GLUE_DATA, "SST-2", "dev.tsv"), encoding="utf-8") as f:
    return [line.split("\t")[0] for line in f][1:]


# The calibration test's encoder: N(0, 0.1) weights, but in the last layer's FFN the first two
# intermediate units are one (same weights, same bias) and the output MatMul's weight rows 0
# and 1 are +FRAGILE and -FRAGILE: in float32 they cancel exactly. int8 per output channel
# puts each column's step at ~FRAGILE / 127 (smoothing moves little of it), so every other
# weight of the matrix rounds to 0 and the FFN's output is lost: weight rounding, the same on
# every CPU, whichever int8 kernels run it (saturating or exact, the other weights are gone).
FRAGILE = 1000.0
FRAGILE_LAYER = CONFIG.num_hidden_layers - 1
FRAGILE_MATMUL = re.compile(rf"transformer_layer_{FRAGILE_LAYER}[^/]*/output_dense[^/]*/MatMul$")


def _fragile_encoder_checkpoint(root):
  keras.utils.set_random_seed(0)
  model = model_types.build_model("encoder", CONFIG, len(LABELS), None)
  rng = np.random.default_rng(0)
  values = {v.path: rng.normal(scale=0.1, size=v.shape).astype("float32")
            for v in model.variables}
  ffn = f"encoder/transformer_layer_{FRAGILE_LAYER}/"
  values[ffn + "intermediate_dense/kernel"][:, 1] = values[ffn + "intermediate_dense/kernel"][:, 0]
  values[ffn + "intermediate_dense/bias"][1] = values[ffn + "intermediate_dense/bias"][0]
  values[ffn + "output_dense/kernel"][:2] = [[FRAGILE], [-FRAGILE]]
  for variable in model.variables:
    variable.assign(values[variable.path])
  return checkpointing.model_checkpoint(model).write(str(root / "fragile" / "ckpt-1"))


def test_calibrated_int8_keeps_the_fewest_harmful_matmuls_float(exported, tmp_path):
  """--quantize_calibration_file: every calibration text's outputs reach the cosine, with the
  one MatMul whose int8 weights destroy it (`FRAGILE`) kept float32, and only it."""
  config_file = exported["encoder"]["files"][0]
  checkpoint = _fragile_encoder_checkpoint(tmp_path)
  texts = tmp_path / "calibration.txt"
  texts.write_text("\n".join(_sst2_sentences()) + "\n", encoding="utf-8")

  folder = model_folder.read(checkpoint, config_file, UNCASED_VOCAB, True)

  def export(min_cosine):
    out = str(tmp_path / f"int8_{min_cosine}")
    exporter.export(folder, out, exporter.ExportOptions(
        "encoder", max_seq_length=SEQ, export_format="onnx", quantize="dynamic",
        calibration_file=str(texts), min_cosine=min_cosine))
    with open(os.path.join(out, "assets.extra", "export_info.json")) as f:
      return out, json.load(f)["onnx"]["quantization"]

  _, all_int8 = export(0.5)
  # ~0.95 on every CPU; the other MatMuls' own int8 error is ~1e-5 (VNNI) to ~2e-3 (AVX2).
  assert all_int8["float_matmuls"] == [] and all_int8["worst_cosine"] < 0.99, all_int8
  # A target between all-int8's worst text and 1: the fragile MatMul must stay float32, and
  # it alone brings the texts there.
  target = 1.0 - (1.0 - all_int8["worst_cosine"]) / 4
  out, mixed = export(target)
  kept = mixed["float_matmuls"]
  assert len(kept) == 1 and FRAGILE_MATMUL.search(kept[0]), mixed
  assert mixed["calibration_texts"] == len(_sst2_sentences())
  assert mixed["worst_cosine"] >= target > all_int8["worst_cosine"], mixed
  total = sum(_matmul_weight_types(exported["encoder"]["none"]).values())
  assert _matmul_weight_types(out) == {"FLOAT": len(kept), "INT8": total - len(kept)}
  # Checked independently: the file's outputs on the texts, against float32's.
  vocab = tokenization.load_vocab_tokens(UNCASED_VOCAB)
  pack = text_packing.TextToInputs(tokenization.TextTokenizer(vocab), vocab, SEQ, 8)
  inputs = {k: v.numpy() for k, v in pack(tf.constant(_sst2_sentences())).items()}
  fp32 = str(tmp_path / "fp32")
  exporter.export(folder, fp32, exporter.ExportOptions("encoder", max_seq_length=SEQ,
                                                       export_format="onnx", quantize="none"))
  want, got = _run(_session(fp32), inputs), _run(_session(out), inputs)
  flat = lambda outputs: np.concatenate(
      [outputs[k].reshape(len(inputs["input_mask"]), -1) for k in sorted(outputs)
       if outputs[k].dtype == np.float32], 1)
  a, b = flat(want), flat(got)
  cosine = np.sum(a * b, 1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
  assert cosine.min() >= target - 1e-6, (cosine.min(), target)


def test_calibration_and_xla_flags_are_checked(exported, tmp_path):
  config_file, checkpoint = exported["classifier"]["files"]
  folder = model_folder.read(checkpoint, config_file, UNCASED_VOCAB, True)
  texts = tmp_path / "texts.txt"
  texts.write_text("a text\n", encoding="utf-8")
  common = dict(max_seq_length=SEQ, num_labels=2)
  for kwargs, message in (
      (dict(export_format="tflite", quantize="dynamic", calibration_file=str(texts)),
       "calibrates --export_format=onnx --quantize=dynamic"),
      (dict(export_format="onnx", quantize="dynamic", calibration_file=str(tmp_path / "no")),
       "--quantize_calibration_file=.*no: no such file"),
      (dict(export_format="onnx", quantize="dynamic", calibration_file=str(texts),
            min_cosine=1.5), r"--quantize_min_cosine=1.5 must be in \(0, 1\]"),
      (dict(export_format="onnx", xla_single_sequence=True),
       "--xla_single_sequence compiles a SavedModel's .*--export_format=onnx")):
    with pytest.raises(ValueError, match=message):
      exporter.export(folder, str(tmp_path / "out"),
                      exporter.ExportOptions("classifier", **common, **kwargs))
  empty = tmp_path / "empty.txt"
  empty.write_text("\n \n", encoding="utf-8")
  with pytest.raises(ValueError, match="holds no text"):
    exporter.export(folder, str(tmp_path / "out"), exporter.ExportOptions(
        "classifier", export_format="onnx", quantize="dynamic", calibration_file=str(empty),
        **common))


def test_quantize_modes_are_checked_per_format():
  exporter.check_quantize("onnx", "dynamic")
  exporter.check_quantize("tflite", "float16")
  with pytest.raises(ValueError, match="--quantize=float16 is not one of --export_format=onnx"):
    exporter.check_quantize("onnx", "float16")
  with pytest.raises(ValueError, match="--export_format=pt: expected one of"):
    exporter.check_quantize("pt", "none")
