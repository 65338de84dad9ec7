"""TFLite export (`--export_format=tflite`): the .tflite gives the SavedModel's serve_ids outputs.

Every model type is exported once (module fixture) from a tiny model's checkpoint as .tflite
unquantized, and with each --quantize where the graphs differ (`QUANTIZED`); the .tflite runs
in the LiteRT interpreter (`ai_edge_litert`, builtin ops only: no Flex delegate). The
reference ("SavedModel" below) is the exported module's serve_ids in TensorFlow, the function
a SavedModel export saves, on the same padded inputs.

Tolerances, per output, on |tflite - SavedModel| <= TOL * max(1, max |SavedModel|):
  none     1e-4  both float32; only the kernels' summation order differs (XNNPACK vs TF).
  float16  5e-3  weights rounded to float16 (11-bit mantissa: 2.4e-4 relative each), computed
                 in float32; the rounding errors of every layer add up.
  dynamic  5e-2  weights int8 per channel (a step of 1/127 of the channel's largest weight)
                 and, in the hybrid kernels, activations rounded to int8 per row on the fly:
                 about 1% per matrix product, compounding over the layers.
Measured on these models: at most 6e-7, 5e-4 and 1.7e-2 of that scale. Integer outputs are
exact for none; quantized, a predicted id is compared where the SavedModel's best logit leads
the next by more than twice the tolerance, and every id must be the .tflite's own argmax.
The real-model accuracy cost of the quantization (MiniLM on SST-2) is in bench/RESULTS.md.
"""

import json
import os
import subprocess
import sys

from ai_edge_litert.interpreter import Interpreter
from conftest import child_pythonpath
from conftest import random_model_checkpoints
from conftest import run_command
from conftest import write_vocab_and_config
import numpy as np
import pytest
import tensorflow as tf

from official_bert.interop import model_folder
from official_bert.modeling import model_types
from official_bert.modeling.bert_config import BertConfig
from official_bert.serving import exporter
from official_bert.serving import tflite_export

pytestmark = pytest.mark.large  # trains or runs commands: `make test`, not `make test-fast`

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEQ = 16
# Padded with filler words so the embedding table (vocab x hidden) is large enough for the
# converter to quantize (it leaves tensors under 1024 elements in float32).
VOCAB = ("[PAD] [UNK] [CLS] [SEP] [MASK] the a cat sat on mat dog who what . , ?".split() +
         [f"w{i}" for i in range(80)])
MASK_ID = VOCAB.index("[MASK]")
CONFIG = BertConfig(vocab_size=len(VOCAB), hidden_size=64, num_hidden_layers=2,
                    num_attention_heads=2, intermediate_size=128, max_position_embeddings=32,
                    type_vocab_size=2, hidden_act="gelu")
LABELS = ["O", "B", "I"]
HEAD_CONFIG = {"layers": [-1, -2], "combine": "concat", "lstm_units": 32, "lstm_layers": 2}
TOL = {"none": 1e-4, "float16": 5e-3, "dynamic": 5e-2}
# Every model type converts unquantized; the quantized modes on the graphs that differ in what
# the converter quantizes: the encoder (its Dense body, shared by every head), the pretraining
# head (the output layer tied to the embedding table) and the feature tagger (LSTM). The other
# heads are one Dense layer on that body.
QUANTIZED = ("encoder", "pretraining", "feature_tagger")
CASES = [(model_type, quantize) for quantize in tflite_export.QUANTIZE_MODES
         for model_type in model_types.MODEL_TYPES
         if quantize == "none" or model_type in QUANTIZED]


def _modes(model_type):
  return [q for t, q in CASES if t == model_type]
NUM_CHOICES = 3
# The exported module's SQuAD text signatures need room for a context at this short SEQ.
SQUAD_OPTIONS = {"max_query_length": 6, "doc_stride": 4}
_PATHS = {}  # the fixture's files, for the tests that export again


def _env():
  return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=child_pythonpath(REPO))


def _label_names(model_type):
  return LABELS if model_type in model_types.NEEDS_NUM_LABELS else None


@pytest.fixture(scope="module", name="exported")
def _exported(tmp_path_factory):
  """{model_type: {"none" | "dynamic" | "float16": dir, "serve_ids": the reference}}."""
  root = tmp_path_factory.mktemp("tflite")
  vocab_file, config_file = write_vocab_and_config(root, VOCAB, CONFIG)
  checkpoints = random_model_checkpoints(root, CONFIG, lambda _: len(LABELS), HEAD_CONFIG)
  dirs = {}
  for model_type, checkpoint in checkpoints.items():
    dirs[model_type] = {}
    for name in _modes(model_type):
      dirs[model_type][name] = str(root / model_type / name)
      module = exporter.export(
          model_folder.read(checkpoint, config_file, vocab_file, True), dirs[model_type][name],
          exporter.ExportOptions(
              model_type, max_seq_length=SEQ, label_names=_label_names(model_type), top_k=3,
              export_format="tflite", quantize=name,
              squad_options=SQUAD_OPTIONS if model_type == "squad" else None))
      if name == "none":  # the reference: the module's serve_ids, what a SavedModel saves
        dirs[model_type]["serve_ids"] = module.signatures()["serve_ids"]
  _PATHS.update(root=root, vocab_file=vocab_file, config_file=config_file)
  return dirs


def _inputs(model_type, seed):
  """Padded ids: [CLS] first, a [SEP], some [MASK]s, a second segment, rows of other lengths."""
  rng = np.random.default_rng(seed)
  shape = {"feature_tagger": [1, SEQ], "multiple_choice": [2, NUM_CHOICES, SEQ]}.get(
      model_type, [3, SEQ])
  ids = rng.integers(5, len(VOCAB), size=shape).astype(np.int32)
  lengths = rng.integers(4, SEQ + 1, size=shape[:-1])
  positions = np.arange(SEQ)
  ids[rng.random(shape) < 0.15] = MASK_ID
  ids[..., 0] = VOCAB.index("[CLS]")
  mask = (positions < lengths[..., None]).astype(np.int32)
  types = ((positions >= lengths[..., None] // 2) & (mask > 0)).astype(np.int32)
  return {"input_word_ids": np.where(mask > 0, ids, 0).astype(np.int32), "input_mask": mask,
          "input_type_ids": types}


_REFERENCE = {}  # (model type, seed) -> serve_ids' outputs on _inputs(model_type, seed)


def _reference_outputs(dirs, model_type, inputs, seed):
  if (model_type, seed) not in _REFERENCE:
    out = dirs[model_type]["serve_ids"](**{k: tf.constant(v) for k, v in inputs.items()})
    _REFERENCE[(model_type, seed)] = {k: v.numpy() for k, v in out.items()}
  return _REFERENCE[(model_type, seed)]


def _tflite_runner(export_dir):
  interpreter = Interpreter(model_path=os.path.join(export_dir, tflite_export.MODEL_FILE))
  return interpreter, interpreter.get_signature_runner(tflite_export.SIGNATURE)


def _check_ids(model_type, quantize, got, want, atol):
  """Integer outputs: exact in float32; quantized, where the reference is not a near-tie."""
  if "predicted_ids" in want:
    np.testing.assert_array_equal(got["predicted_ids"], got["logits"].argmax(-1))
    top2 = np.sort(want["logits"], axis=-1)[..., -2:]
    clear = top2[..., 1] - top2[..., 0] > 2 * atol if quantize != "none" else True
    np.testing.assert_array_equal(np.where(clear, got["predicted_ids"], 0),
                                  np.where(clear, want["predicted_ids"], 0), err_msg=model_type)
  if model_type == "pretraining":
    np.testing.assert_array_equal(got["masked_lm_positions"], want["masked_lm_positions"])
    if quantize == "none":
      np.testing.assert_array_equal(got["masked_lm_top_ids"], want["masked_lm_top_ids"])


def _check_strings(model_type, got):
  """String outputs are the .tflite's own ids looked up, as in the SavedModel."""
  if "predicted_labels" in got:
    np.testing.assert_array_equal(got["predicted_labels"].astype(str),
                                  np.array(LABELS)[got["predicted_ids"]])
  if model_type == "pretraining":
    tokens = np.where(got["masked_lm_positions"][..., None] >= 0,
                      np.array(VOCAB)[got["masked_lm_top_ids"]], "")
    np.testing.assert_array_equal(got["masked_lm_top_tokens"].astype(str), tokens)


@pytest.mark.parametrize("model_type,quantize", CASES, ids=[f"{t}-{q}" for t, q in CASES])
def test_tflite_gives_the_saved_models_serve_ids_outputs(model_type, quantize, exported):
  dirs = exported[model_type]
  interpreter, runner = _tflite_runner(dirs[quantize])
  assert list(interpreter.get_signature_list()) == ["serve_ids"]  # no text signature
  for seed in range(2):
    inputs = _inputs(model_type, seed)
    want = _reference_outputs(exported, model_type, inputs, seed)
    got = runner(**inputs)
    assert sorted(got) == sorted(want), "every serve_ids output, under the same names"
    for name, value in want.items():
      assert got[name].shape == value.shape, name
      if np.issubdtype(value.dtype, np.floating):
        scale = max(1.0, float(np.abs(value).max()))
        np.testing.assert_allclose(got[name], value, rtol=0, atol=TOL[quantize] * scale,
                                   err_msg=f"{model_type} {quantize} {name}")
    _check_ids(model_type, quantize, got, want, TOL[quantize])
    _check_strings(model_type, got)


@pytest.mark.parametrize("model_type", model_types.MODEL_TYPES)
def test_tflite_files_and_shapes(model_type, exported):
  dirs = exported[model_type]
  sizes = {q: os.path.getsize(os.path.join(dirs[q], tflite_export.MODEL_FILE))
           for q in _modes(model_type)}
  # int8 weights are a quarter, float16 a half of float32; the rest of the file (graph,
  # string tables, the small tensors left in float32) is a large share at this size.
  if "dynamic" in sizes:
    assert sizes["dynamic"] < 0.5 * sizes["none"], sizes
    assert sizes["float16"] < 0.7 * sizes["none"], sizes
  for quantize in _modes(model_type):
    d = dirs[quantize]
    assert sorted(os.listdir(d)) == ["assets.extra", "model.tflite", "vocab.txt"]
    with open(os.path.join(d, "vocab.txt"), encoding="utf-8") as f:
      assert f.read().split("\n")[:-1] == VOCAB
    with open(os.path.join(d, "assets.extra", "export_info.json")) as f:
      info = json.load(f)
    batch = 1 if model_type == "feature_tagger" else -1
    shape = [batch, -1, SEQ] if model_type == "multiple_choice" else [batch, SEQ]
    assert info["tflite"] == {"signature": "serve_ids", "input_shape": shape,
                              "outputs": sorted(_tflite_runner(d)[1].get_output_details()),
                              "quantize": quantize}
    assert info["export_format"] == "tflite" and info["max_seq_length"] == SEQ
    assert os.path.exists(os.path.join(d, "assets.extra", "bert_config.json"))
    details = _tflite_runner(d)[1].get_input_details()
    assert sorted(details) == ["input_mask", "input_type_ids", "input_word_ids"]
    for detail in details.values():
      assert list(detail["shape_signature"]) == shape and detail["dtype"] == np.int32


def test_a_failing_tflite_export_leaves_the_previous_one(exported, monkeypatch):
  paths = _PATHS
  target = exported["classifier"]["none"]
  with open(os.path.join(target, tflite_export.MODEL_FILE), "rb") as f:
    before = f.read()

  def fail(*args, **kwargs):
    raise RuntimeError("conversion failed")

  monkeypatch.setattr(tflite_export, "convert", fail)
  with pytest.raises(RuntimeError, match="conversion failed"):
    exporter.export(
        model_folder.read(str(paths["root"] / "classifier" / "ckpt-1"), paths["config_file"],
                          paths["vocab_file"], True), target,
        exporter.ExportOptions("classifier", max_seq_length=SEQ, label_names=LABELS,
                               export_format="tflite", quantize="dynamic", overwrite=True))
  with open(os.path.join(target, tflite_export.MODEL_FILE), "rb") as f:
    assert f.read() == before
  assert not [n for n in os.listdir(os.path.dirname(target)) if n.startswith(".")]


def test_cli_exports_and_refuses_bad_quantize(exported, tmp_path):
  paths = _PATHS
  module = "official_bert.export"
  flags = [f"--bert_config_file={paths['config_file']}",
           f"--checkpoint={paths['root'] / 'classifier' / 'ckpt-1'}",
           f"--vocab_file={paths['vocab_file']}", "--model_type=classifier",
           f"--label_names={','.join(LABELS)}", f"--max_seq_length={SEQ}"]
  # The export in a process of its own; the refused flags through the command's launcher,
  # in this process, while it runs.
  proc = subprocess.Popen([sys.executable, "-m", module, *flags, "--export_format=tflite",
                           "--quantize=float16", f"--export_dir={tmp_path / 'ok'}"],
                          cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)
  bad_value = run_command(module, *flags, "--export_format=tflite", "--quantize=int4",
                          f"--export_dir={tmp_path / 'bad_value'}")
  not_tflite = run_command(module, *flags, "--quantize=dynamic",
                           f"--export_dir={tmp_path / 'not_tflite'}")
  _, err = proc.communicate(timeout=400)
  assert proc.returncode == 0, err[-3000:]
  inputs = _inputs("classifier", 0)
  got = _tflite_runner(str(tmp_path / "ok"))[1](**inputs)
  want = _reference_outputs(exported, "classifier", inputs, 0)
  np.testing.assert_allclose(got["logits"], want["logits"], rtol=0,
                             atol=TOL["float16"] * max(1, np.abs(want["logits"]).max()))
  err = bad_value.stderr
  assert bad_value.returncode == 1 and "--quantize=int4" in err and "none|dynamic|float16" in err, (
      err[-3000:])
  err = not_tflite.stderr
  assert not_tflite.returncode == 1 and ("--quantize=dynamic is not one of "
                                         "--export_format=single's: none" in err), err
  assert "Traceback" not in err
  assert not os.path.exists(tmp_path / "bad_value") and not os.path.exists(tmp_path / "not_tflite")
