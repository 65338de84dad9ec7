"""SavedModel export: raw text in, the in-process model's outputs out, in a fresh process.

Every model type is exported once (module fixture) from a tiny model's checkpoint; the
SavedModels are then queried by processes that never import this repository: a Python
snippet (`tf.saved_model.load` + tensorflow_text ops), `saved_model_cli show` and
`saved_model_cli run` (its own code, with tensorflow_text's ops registered first: the in-graph
tokenizer needs them, as TensorFlow Serving builds include them). The expected outputs come
from the Keras models directly, on inputs tokenized and packed in Python the original way.
"""

import json
import os
import subprocess
import sys
import textwrap

from conftest import child_pythonpath
from conftest import run_command
from conftest import write_vocab_and_config
from conftest import xla_compiled_calls
import keras
import numpy as np
import numpy_bert
import pytest
import tensorflow as tf

from data_prep import quiet_startup
from data_prep import tokenization
from official_bert.interop import checkpointing
from official_bert.interop import model_folder
from official_bert.interop import tf1_checkpoint
from official_bert.interop import weight_loading
from official_bert.interop import weight_names
from official_bert.interop import weights_io
from official_bert.modeling import model_types
from official_bert.modeling.bert_config import BertConfig
from official_bert.serving import exporter
from official_bert.serving import text_packing

pytestmark = pytest.mark.large  # trains or runs commands: `make test`, not `make test-fast`

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEQ = 16
SQUAD_OPTIONS = {"doc_stride": 3, "max_query_length": 5, "n_best_size": 16,
                 "max_answer_length": 5}
# "[", "mask" and "]" are in the vocabulary: a tokenizer that split "[MASK]" would not fail.
VOCAB = ("[PAD] [UNK] [CLS] [SEP] [MASK] the a module provides functions for working with "
         "regular expressions is cat sat on mat dog who what where . , ? ! ##s ##ing re "
         "##gular play guitar man [ ] mask sentence another one two three").split()
CONFIG = BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=2,
                    num_attention_heads=2, intermediate_size=32, max_position_embeddings=64,
                    type_vocab_size=2, hidden_act="gelu")
TEXTS = ["The [MASK] module provides functions for working with regular expressions.",
         "A cat sat on the mat", "", "[MASK][MASK] who?",
         "one two three one two three one two three one two three one two three"]
TEXTS_B = ["Another sentence.", "", "what is it", "the dog [MASK] .", "a mat"]
LABELS = ["neg", "pos"]
HEAD_SEEDS = {"pretraining": 1, "classifier": 2, "squad": 3, "tagger": 4, "encoder": 1}


def _env():
  return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=child_pythonpath())


# ----------------------------------------------------------------------------- reference

def _python_ids(tokenizer, text):
  """The original tokenizer's ids, with the literal "[MASK]" kept as the mask token."""
  ids = []
  for i, piece in enumerate(text.split("[MASK]")):
    if i:
      ids.append(VOCAB.index("[MASK]"))
    ids.extend(tokenizer.convert_tokens_to_ids(tokenizer.tokenize(piece)))
  return ids


def _truncate_seq_pair(tokens_a, tokens_b, max_length):
  """google-research/bert run_classifier.py, verbatim."""
  while True:
    total_length = len(tokens_a) + len(tokens_b)
    if total_length <= max_length:
      break
    if len(tokens_a) > len(tokens_b):
      tokens_a.pop()
    else:
      tokens_b.pop()


def _python_pack(a, b=None):
  a, b = list(a), list(b or [])
  if b:
    _truncate_seq_pair(a, b, SEQ - 3)
  else:
    a = a[:SEQ - 2]
  ids = [2] + a + [3] + (b + [3] if b else [])
  types = [0] * (len(a) + 2) + [1] * (len(b) + 1 if b else 0)
  pad = SEQ - len(ids)
  return ids + [0] * pad, [1] * len(ids) + [0] * pad, types + [0] * pad


def _python_inputs(texts, texts_b=None):
  tokenizer = tokenization.FullTokenizer(_vocab_file(), do_lower_case=True)
  rows = [_python_pack(_python_ids(tokenizer, t),
                       _python_ids(tokenizer, texts_b[i]) if texts_b else None)
          for i, t in enumerate(texts)]
  return {name: np.array([r[k] for r in rows], np.int32)
          for k, name in enumerate(("input_word_ids", "input_mask", "input_type_ids"))}


def _expected(model_type, model, inputs, top_k=3):
  """The named outputs, computed with the Keras model (and numpy for top-k)."""
  if model_type == "encoder":
    out = model(inputs, training=False)
    want = {k: np.asarray(out[k]) for k in ("sequence_output", "pooled_output")}
    want["mean_pooled_output"] = numpy_bert.mean_pool(want["sequence_output"],
                                                      inputs["input_mask"])
    return want
  if model_type == "pretraining":
    is_mask = inputs["input_word_ids"] == VOCAB.index("[MASK]")
    width = max(1, is_mask.sum(1).max())
    positions = np.full([len(is_mask), width], -1, np.int32)
    for row, cols in enumerate(is_mask):
      where = np.flatnonzero(cols)
      positions[row, :len(where)] = where
    out = model(dict(inputs, masked_lm_positions=np.maximum(positions, 0)), training=False)
    probs = tf.nn.softmax(out["masked_lm_logits"]).numpy()
    top = np.argsort(-probs, axis=-1, kind="stable")[..., :top_k]
    top = np.where(positions[..., None] >= 0, top, 0)
    return {"masked_lm_positions": positions[:, :is_mask.sum(1).max()],
            "masked_lm_top_ids": top[:, :is_mask.sum(1).max()],
            "next_sentence_probabilities": tf.nn.softmax(out["next_sentence_logits"]).numpy()}
  out = {k: np.asarray(v) for k, v in model(inputs, training=False).items()}
  if model_type in ("classifier", "tagger"):
    out["probabilities"] = tf.nn.softmax(out["logits"]).numpy()
    out["predicted_ids"] = out["logits"].argmax(-1)
  return out


# ----------------------------------------------------------------------------- fixtures

_STATE = {}


def _vocab_file():
  return _STATE["vocab_file"]


@pytest.fixture(scope="module", name="exported")
def _exported(tmp_path_factory):
  """Exports every model type; returns {name: (export dir, Keras model)}."""
  root = tmp_path_factory.mktemp("export")
  vocab_file, config_file = write_vocab_and_config(root, VOCAB, CONFIG)
  _STATE["vocab_file"] = vocab_file
  models, checkpoints = {}, {}
  for model_type in ("pretraining", "classifier", "squad", "tagger"):
    keras.utils.set_random_seed(HEAD_SEEDS[model_type])
    model = model_types.build_model(model_type, CONFIG, num_labels=len(LABELS) if
                                    model_type == "classifier" else 3)
    models[model_type] = model
    if model_type == "pretraining":  # the original's format, to export from TF1 names too
      checkpoints[model_type] = tf1_checkpoint.write_tf1_checkpoint(
          weight_loading.export_canonical_weights(model), str(root / "tf1" / "bert_model.ckpt"))
    else:
      checkpoints[model_type] = checkpointing.model_checkpoint(model).write(
          str(root / model_type / "ckpt-1"))
  models["encoder"] = models["pretraining"].encoder
  checkpoints["encoder"] = checkpoints["pretraining"]
  dirs = {}
  folder = lambda checkpoint: model_folder.read(checkpoint, config_file, vocab_file, True)
  for model_type in ("encoder", "pretraining", "classifier", "squad", "tagger"):
    dirs[model_type] = str(root / model_type / "export")
    # The pretraining export's requests of one text (demo_query, saved_model_cli run) run
    # XLA-compiled: its batch-1 checks are those of `--xla_single_sequence`.
    exporter.export(folder(checkpoints[model_type]), dirs[model_type], exporter.ExportOptions(
        model_type, max_seq_length=SEQ, top_k=3, squad_options=SQUAD_OPTIONS,
        label_names=LABELS if model_type == "classifier" else None,
        num_labels=3 if model_type == "tagger" else None,
        xla_single_sequence=model_type == "pretraining"))
  dirs["hub"] = str(root / "hub")
  exporter.export(folder(checkpoints["encoder"]), dirs["hub"], exporter.ExportOptions(
      "encoder", max_seq_length=SEQ, top_k=3, export_format="hub_pair",
      normalize_embeddings=True))
  _STATE.update(root=root, config_file=config_file, checkpoints=checkpoints)
  return {name: (dirs[name], models.get(name)) for name in dirs}


# A fresh interpreter that imports only TensorFlow (+ tensorflow_text for the ops) and runs
# every signature; it also runs demo_query.py's `query` from its file, the multiple-choice
# export, and saved_model_cli's own main(): `show` before tensorflow_text is imported (the
# plain command works as is: docs/export.md), `run` after it.
_SNIPPET = textwrap.dedent("""
    import contextlib, io, json, runpy, sys
    from absl import flags
    import numpy as np
    import tensorflow as tf
    from tensorflow.python.tools.saved_model_cli import main as saved_model_cli
    def cli(args):
      sys.argv = ["saved_model_cli", *args]
      try:
        saved_model_cli()
      except SystemExit as e:
        if e.code:
          raise
      flags.FLAGS.unparse_flags()
    def imported_ours():
      return np.array(sorted(m for m in sys.modules
                             if m.split(".")[0] in ("official_bert", "data_prep")))
    dirs, texts, texts_b, ids, demo_query = json.loads(sys.argv[1]), *json.loads(sys.argv[2])
    out_file, run_args, choices_args = sys.argv[3], sys.argv[4], sys.argv[5]
    assert "tensorflow_text" not in sys.modules
    show = io.StringIO()
    with contextlib.redirect_stdout(show):
      cli(["show", "--dir", dirs["pretraining"], "--all"])
    with open("show.txt", "w") as f:
      f.write(show.getvalue())
    import tensorflow_text  # registers the tokenizer's ops
    out = {}
    for name, d in dirs.items():
      if name == "hub":
        pre = tf.saved_model.load(d + "/preprocessor")
        enc = tf.saved_model.load(d + "/encoder")
        packed = pre(tf.constant(texts))
        encoded = enc(packed)
        out["hub/pre/input_word_ids"] = packed["input_word_ids"].numpy()
        out["hub/pair/input_type_ids"] = pre.pair(tf.constant(texts), tf.constant(texts_b))[
            "input_type_ids"].numpy()
        out["hub/enc/pooled_output"] = encoded["pooled_output"].numpy()
        out["hub/enc/num_layers"] = np.array(len(encoded["encoder_outputs"]))
        out["hub/enc/mean_pooled_output"] = encoded["mean_pooled_output"].numpy()
        sig = enc.signatures["serving_default"](**packed)
        out["hub/sig/encoder_outputs"] = sig["encoder_outputs"].numpy()
        out["hub/sig/mean_pooled_output"] = sig["mean_pooled_output"].numpy()
        continue
      sigs = tf.saved_model.load(d).signatures
      calls = {"pair": sigs["serving_pair"](text=tf.constant(texts), text_b=tf.constant(texts_b)),
               "ids": sigs["serve_ids"](**{k: tf.constant(v, tf.int32) for k, v in ids.items()})}
      if name == "squad":  # (question, context): the texts_b are the contexts
        calls["answer"] = sigs["serving_default"](question=tf.constant(texts),
                                                  context=tf.constant(texts_b))
      else:
        calls["text"] = sigs["serving_default"](text=tf.constant(texts))
      for sig, result in calls.items():
        for key, value in result.items():
          value = value.numpy()
          out[f"{name}/{sig}/{key}"] = value.astype(bytes) if value.dtype == object else value
    query = runpy.run_path(demo_query)["query"]
    out["demo"] = np.array(json.dumps(query(dirs["pretraining"], texts[:1])))
    errors = []
    for d in (dirs["classifier"], dirs["pretraining"] + "/missing"):
      try:
        query(d, texts[:1])
      except ValueError as e:
        errors.append(str(e))
    out["demo_errors"] = np.array(errors)
    out["imported_ours"] = imported_ours()
    np.savez(out_file, **out)

    # The multiple-choice export: text [b] + choices [b, n] -> a score per choice.
    export_dir, texts, choices, ids = json.loads(choices_args)
    sigs = tf.saved_model.load(export_dir).signatures
    out = {"sigs": np.array(sorted(sigs.keys()))}
    text = sigs["serving_default"](text=tf.constant(texts), choices=tf.constant(choices))
    by_ids = sigs["serve_ids"](**{k: tf.constant(v, tf.int32) for k, v in ids.items()})
    out.update({"text/" + k: v.numpy() for k, v in text.items()})
    out.update({"ids/" + k: v.numpy() for k, v in by_ids.items()})
    out["tokens"] = out.pop("text/tokens").astype(bytes)
    out["imported_ours"] = imported_ours()
    np.savez("choices.npz", **out)
    cli(json.loads(run_args))  # `run`, with tensorflow_text's ops
""")


@pytest.fixture(scope="module", name="choices")
def _choices(exported):
  """A multiple-choice model (SWAG), its export and the inputs the fresh process sends it:
  {model, export_dir, texts, choices, inputs}."""
  del exported  # for the vocabulary, config and root it writes
  root = _STATE["root"]
  keras.utils.set_random_seed(6)
  model = model_types.build_model("multiple_choice", CONFIG)
  rng = np.random.default_rng(6)
  for variable in model.trainable_variables:  # larger than the init's 0.02, so choices score apart
    variable.assign(rng.normal(scale=0.3, size=variable.shape).astype("float32"))
  checkpoint = checkpointing.model_checkpoint(model).write(str(root / "mc" / "ckpt-1"))
  assert weight_names.infer_model_type(weights_io.read_weights(checkpoint).tensors) == (
      "multiple_choice")
  export_dir = str(root / "mc" / "export")
  exporter.export(model_folder.read(checkpoint, _STATE["config_file"], _vocab_file(), True),
                  export_dir, exporter.ExportOptions("multiple_choice", max_seq_length=SEQ))
  texts = TEXTS[:3]
  choices = [[TEXTS_B[i], TEXTS_B[(i + 1) % len(TEXTS_B)], "a dog [MASK] ."] for i in range(3)]
  flat = _python_inputs([t for t in texts for _ in range(3)], [c for row in choices for c in row])
  inputs = {name: value.reshape(3, 3, SEQ) for name, value in flat.items()}
  return dict(model=model, export_dir=export_dir, texts=texts, choices=choices, inputs=inputs)


@pytest.fixture(scope="module", name="fresh")
def _fresh(exported, choices, tmp_path_factory):
  """Runs the fresh-process checks (one process: each start imports TensorFlow); returns
  their results."""
  tmp = tmp_path_factory.mktemp("fresh")
  dirs = {name: d for name, (d, _) in exported.items()}
  ids = _python_inputs(TEXTS[:2])
  run_args = ["run", "--dir", dirs["pretraining"], "--tag_set", "serve", "--signature_def",
              "serving_default", "--input_exprs", f"text={json.dumps(TEXTS[:1])}",
              "--outdir", str(tmp / "cli")]
  proc = subprocess.run(
      [sys.executable, "-c", _SNIPPET, json.dumps(dirs),
       json.dumps([TEXTS, TEXTS_B, {k: v.tolist() for k, v in ids.items()},
                   os.path.join(REPO, "official_bert", "demo_query.py")]),
       str(tmp / "out.npz"), json.dumps(run_args),
       json.dumps([choices["export_dir"], choices["texts"], choices["choices"],
                   {k: v[:2].tolist() for k, v in choices["inputs"].items()}])],
      cwd=str(tmp), env=_env(),
      capture_output=True, text=True, timeout=400, check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return {"show": (tmp / "show.txt").read_text(), "outputs": dict(np.load(tmp / "out.npz")),
          "choices": dict(np.load(tmp / "choices.npz")), "cli_dir": tmp / "cli"}


# ----------------------------------------------------------------------------- tests

def _check(got, want, what, mask=None):
  """`want`'s outputs in `got`; with `mask` (the inputs' input_mask [batch, seq]), the
  outputs per position ([batch, seq, ...]) at the real tokens only: an export runs the layers
  on those alone (`TokenPacking`), its padded positions are 0 (a head's output of 0)."""
  for key, value in want.items():
    assert key in got, f"{what}: no output {key!r} (have {sorted(got)})"
    actual, value = got[key], np.asarray(value)
    if mask is not None and value.shape[:2] == np.shape(mask):
      actual, value = actual[mask == 1], value[mask == 1]
    if np.issubdtype(value.dtype, np.floating):
      np.testing.assert_allclose(actual, value, atol=1e-5, rtol=0, err_msg=f"{what} {key}")
    else:
      np.testing.assert_array_equal(actual, value, err_msg=f"{what} {key}")


@pytest.mark.parametrize("model_type", ["encoder", "pretraining", "classifier", "squad",
                                        "tagger"])
def test_signatures_give_the_in_process_models_outputs(model_type, exported, fresh):
  outputs = fresh["outputs"]
  model = exported[model_type][1]
  for sig, inputs in (("text", _python_inputs(TEXTS)),
                      ("pair", _python_inputs(TEXTS, TEXTS_B)),
                      ("ids", _python_inputs(TEXTS[:2]))):
    if model_type == "squad" and sig != "ids":
      continue  # answers over windows: test_squad_text_signatures_answer_from_the_context
    prefix = f"{model_type}/{sig}/"
    got = {k[len(prefix):]: v for k, v in outputs.items() if k.startswith(prefix)}
    if sig != "ids":  # text signatures return the packed inputs and their WordPieces
      _check(got, inputs, prefix)
      np.testing.assert_array_equal(got["tokens"].astype(str),
                                    np.array(VOCAB)[inputs["input_word_ids"]])
    _check(got, _expected(model_type, model, inputs), prefix, inputs["input_mask"])
    if model_type == "encoder":
      assert (got["sequence_output"][inputs["input_mask"] == 0] == 0).all(), prefix
    if model_type == "classifier":
      np.testing.assert_array_equal(got["predicted_labels"].astype(str),
                                    np.array(LABELS)[got["predicted_ids"]])
  if model_type == "pretraining":
    assert outputs["pretraining/ids/mlm_logits"].shape == (2, SEQ, len(VOCAB))
    # Padding slots of examples with fewer [MASK]s than the batch's most.
    got = outputs["pretraining/text/masked_lm_top_probabilities"]
    positions = outputs["pretraining/text/masked_lm_positions"]
    assert positions.shape == (len(TEXTS), 2)
    assert (got[positions < 0] == 0).all() and (got[positions >= 0] > 0).all()


def test_squad_text_signatures_answer_from_the_context(fresh):
  outputs = fresh["outputs"]
  answer = {k[len("squad/answer/"):]: v for k, v in outputs.items()
            if k.startswith("squad/answer/")}
  pair = {k[len("squad/pair/"):]: v for k, v in outputs.items() if k.startswith("squad/pair/")}
  assert sorted(answer) == sorted(pair)
  for key, value in answer.items():
    np.testing.assert_array_equal(value, pair[key], err_msg=key)
  width = SQUAD_OPTIONS["n_best_size"] + 1
  assert answer["nbest_text"].shape == (len(TEXTS), width)
  spans = 0
  for i, context in enumerate(TEXTS_B):
    text = answer["answer_text"][i].decode()
    start, end = answer["answer_start"][i], answer["answer_end"][i]
    if start < 0:  # no window, or no valid span among the top starts/ends: the original's
      assert (text, end) == ("empty", -1)  # "empty"
      assert context or answer["nbest_text"][i, 1] == b""
      continue
    spans += 1
    assert context[start:end] == text, (context, start, end, text)
    assert answer["nbest_text"][i, 0].decode() == text
    probs = answer["nbest_probability"][i]
    np.testing.assert_allclose(probs.sum(), 1.0, rtol=1e-5)
    assert (np.diff(answer["nbest_score"][i][probs > 0]) <= 0).all()
  assert spans >= 2


def test_an_empty_batch_of_texts_gives_empty_outputs(exported):
  """The pretraining export failed on no text (a concat of [0, 0] and [1, 1]); every type
  gives empty outputs."""
  for model_type in ("pretraining", "classifier", "tagger", "encoder"):
    sigs = tf.saved_model.load(exported[model_type][0]).signatures
    out = sigs["serving_default"](text=tf.constant([], tf.string))
    assert all(v.shape[0] == 0 for v in out.values()), (model_type, out)
    out = sigs["serving_pair"](text=tf.constant([], tf.string), text_b=tf.constant([], tf.string))
    assert all(v.shape[0] == 0 for v in out.values()), (model_type, out)


def test_saved_model_cli_show_lists_signatures(fresh):
  out = fresh["show"]
  for name in ("serving_default", "serving_pair", "serve_ids"):
    assert f"signature_def['{name}']" in out, out
  for name in ("inputs['text']", "inputs['text_b']", "inputs['input_word_ids']",
               "outputs['masked_lm_top_tokens']", "outputs['next_sentence_probabilities']",
               "outputs['mlm_logits']"):
    assert name in out, out


def test_saved_model_cli_run_on_a_raw_sentence(exported, fresh):
  # String outputs are object arrays in saved_model_cli's .npy files (written by this test).
  got = {name[:-len(".npy")]: np.load(fresh["cli_dir"] / name, allow_pickle=True)
         for name in os.listdir(fresh["cli_dir"])}
  assert "masked_lm_top_tokens" in got and "next_sentence_probabilities" in got, sorted(got)
  inputs = _python_inputs(TEXTS[:1])
  _check(got, inputs, "saved_model_cli")
  _check(got, _expected("pretraining", exported["pretraining"][1], inputs), "saved_model_cli")
  # A batch of one: XLA-compiled in this export (--xla_single_sequence), here in
  # saved_model_cli's plain TensorFlow; not in the others.
  with open(os.path.join(exported["pretraining"][0], "assets.extra", "export_info.json"),
            encoding="utf-8") as f:
    assert json.load(f)["xla_single_sequence"] is True
  for model_type, compiled in (("pretraining", True), ("encoder", False)):
    signature = tf.saved_model.load(exported[model_type][0]).signatures["serving_default"]
    assert bool(xla_compiled_calls(signature.graph)) == compiled, model_type


def test_hub_pair(exported, fresh):
  outputs = fresh["outputs"]
  inputs = _python_inputs(TEXTS)
  np.testing.assert_array_equal(outputs["hub/pre/input_word_ids"], inputs["input_word_ids"])
  np.testing.assert_array_equal(outputs["hub/pair/input_type_ids"],
                                _python_inputs(TEXTS, TEXTS_B)["input_type_ids"])
  encoder = exported["encoder"][1]
  want = encoder(inputs, training=False)
  np.testing.assert_allclose(outputs["hub/enc/pooled_output"], want["pooled_output"],
                             atol=1e-5, rtol=0)
  assert int(outputs["hub/enc/num_layers"]) == CONFIG.num_hidden_layers
  real = inputs["input_mask"] == 1  # the export skips padding (`_check`)
  np.testing.assert_allclose(np.moveaxis(outputs["hub/sig/encoder_outputs"], 1, 2)[real],
                             np.stack(want["encoder_outputs"], axis=2)[real], atol=1e-5, rtol=0)
  # Exported with --normalize_embeddings: unit-length means over the real tokens.
  mean = numpy_bert.mean_pool(np.asarray(want["sequence_output"]), inputs["input_mask"],
                              normalize=True)
  for key in ("hub/enc/mean_pooled_output", "hub/sig/mean_pooled_output"):
    np.testing.assert_allclose(outputs[key], mean, atol=1e-5, rtol=0, err_msg=key)
  with open(os.path.join(exported["hub"][0], "encoder", "assets.extra", "export_info.json"),
            encoding="utf-8") as f:
    assert json.load(f)["normalize_embeddings"] is True


def test_demo_query_needs_only_tensorflow(exported, fresh):
  outputs = fresh["outputs"]
  assert outputs["imported_ours"].size == 0, outputs["imported_ours"]
  (masks,) = json.loads(str(outputs["demo"]))
  want = _expected("pretraining", exported["pretraining"][1], _python_inputs(TEXTS[:1]))
  assert [position for position, _ in masks] == [2]
  assert [token for token, _ in masks[0][1]] == [VOCAB[i] for i in want["masked_lm_top_ids"][0, 0]]
  # Another model's export, or no export: what it is, not a KeyError or OSError traceback.
  other, missing = outputs["demo_errors"].tolist()
  assert other.startswith(f"--export_dir={exported['classifier'][0]} is not a pretraining "
                          f"export (its outputs: ") and "--model_type=pretraining" in other
  assert missing == (f"--export_dir={exported['pretraining'][0]}/missing: no SavedModel there "
                     f"(an `export --model_type=pretraining` folder)")


def test_demo_query_prints_no_tensorflow_startup_noise(exported):
  """As `make demo` runs it (a file, no TF_CPP_MIN_LOG_LEVEL): the answers, and on a machine
  without a GPU no CUDA error (`data_prep.quiet_startup`'s rule)."""
  env = {k: v for k, v in _env().items() if k != "TF_CPP_MIN_LOG_LEVEL"}
  proc = subprocess.run(
      [sys.executable, os.path.join(REPO, "official_bert", "demo_query.py"),
       f"--export_dir={exported['pretraining'][0]}", f"--text={TEXTS[0]}"],
      cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "[MASK] #1 (position 2):" in proc.stdout
  if not quiet_startup.has_nvidia_driver():
    noise = [n for n in ("cuInit", "cuda", "CUDA", "cpu_feature_guard") if n in proc.stderr]
    assert not noise, proc.stderr[-3000:]


def test_export_cli_refuses_a_checkpoint_without_the_head(exported):
  """A classifier head absent from a pretraining checkpoint: the export command refuses it
  (through its launcher, in this process) and writes nothing."""
  del exported  # for the files it writes
  no_head = _STATE["root"] / "no_head"
  proc = run_command("official_bert.export", f"--bert_config_file={_STATE['config_file']}",
                     f"--checkpoint={_STATE['checkpoints']['pretraining']}",
                     f"--vocab_file={_vocab_file()}", "--model_type=classifier",
                     "--num_labels=2", f"--max_seq_length={SEQ}", f"--export_dir={no_head}")
  assert proc.returncode == 1, proc.stderr[-3000:]
  err = proc.stderr
  assert "Missing tensors (2)" in err and "output_weights" in err and "output_bias" in err, err
  assert "Traceback" not in err and not os.path.exists(no_head)


def test_truncation_is_the_originals_truncate_seq_pair():
  lengths = [(a, b, budget) for a in range(12) for b in range(12) for budget in range(1, 11)]
  len_a, len_b, budgets = (tf.constant(c, tf.int64) for c in zip(*lengths))
  keep_a, keep_b = text_packing.truncated_pair_lengths(len_a, len_b, budgets)
  for (a, b, budget), got_a, got_b in zip(lengths, keep_a.numpy(), keep_b.numpy()):
    tokens_a, tokens_b = list(range(a)), list(range(b))
    _truncate_seq_pair(tokens_a, tokens_b, budget)
    assert (got_a, got_b) == (len(tokens_a), len(tokens_b)), (a, b, budget)


def test_multiple_choice_export_scores_every_choice(choices, fresh):
  """SWAG: text [b] + choices [b, n] strings -> one score per choice, as the Keras model."""
  got, inputs = fresh["choices"], choices["inputs"]
  assert list(got["sigs"]) == ["serve_ids", "serving_default"]
  assert got["imported_ours"].size == 0, got["imported_ours"]
  logits = choices["model"](inputs, training=False)["logits"].numpy()  # [3, 3]
  assert logits.shape == (3, 3) and np.ptp(logits) > 1e-3  # the choices do score differently
  for name, value in inputs.items():  # (text, choice) packed as a pair, per choice
    np.testing.assert_array_equal(got["text/" + name], value, err_msg=name)
  np.testing.assert_array_equal(got["tokens"].astype(str),
                                np.array(VOCAB)[inputs["input_word_ids"]])
  np.testing.assert_allclose(got["text/logits"], logits, atol=1e-5, rtol=0)
  np.testing.assert_allclose(got["text/probabilities"], tf.nn.softmax(logits).numpy(), atol=1e-6)
  np.testing.assert_array_equal(got["text/predicted_ids"], logits.argmax(-1))
  np.testing.assert_allclose(got["ids/logits"], logits[:2], atol=1e-5, rtol=0)
