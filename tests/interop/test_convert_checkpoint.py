"""Checkpoint conversion: TF1 <-> ours <-> Hugging Face, checked against a numpy BERT.

The TF1 checkpoint is written here with `tf.compat.v1` variables named like
google-research/bert's (with `adam_m`/`adam_v` slots and `global_step`, which must be
ignored); the reference forward pass is plain numpy, independent of the Keras model.
"""

import dataclasses
import json
import math
import os
import shutil
import subprocess
import sys

from conftest import CASED_VOCAB
from conftest import REPO
from conftest import child_pythonpath
from conftest import minilm_dir
from conftest import run_command
from conftest import tiny_model_folder
import keras
import numpy as np
import pytest
from safetensors.numpy import load_file
import tensorflow as tf

from data_prep import tokenization
import official_bert as ob
from official_bert.interop import checkpointing
from official_bert.interop import conversion
from official_bert.interop import model_files
from official_bert.interop import model_folder
from official_bert.interop import run_record
from official_bert.interop import tf1_checkpoint
from official_bert.interop import weight_names
from official_bert.interop import weights_io
from official_bert.modeling import model_types
from official_bert.modeling.bert_config import BertConfig

pytestmark = pytest.mark.large  # trains or runs commands: `make test`, not `make test-fast`

TINY = BertConfig(vocab_size=40, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
                  intermediate_size=16, max_position_embeddings=16, type_vocab_size=2,
                  hidden_act="gelu")


# ----------------------------------------------------------------------------- numpy BERT

def _gelu_tanh(x):
  return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


_erf = np.vectorize(math.erf)


def _gelu_erf(x):
  return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _layer_norm(x, gamma, beta):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + 1e-12) * gamma + beta


def reference_bert(w, config, word_ids, mask, type_ids):
  """The original BERT forward pass on TF1-named float64 weights: (sequence, pooled)."""
  act = {"gelu": _gelu_tanh, "gelu_exact": _gelu_erf}[config.hidden_act]
  w = {k: np.asarray(v, np.float64) for k, v in w.items()}
  e = "bert/embeddings/"
  seq = word_ids.shape[1]
  x = (w[e + "word_embeddings"][word_ids] + w[e + "token_type_embeddings"][type_ids]
       + w[e + "position_embeddings"][:seq])
  x = _layer_norm(x, w[e + "LayerNorm/gamma"], w[e + "LayerNorm/beta"])
  heads = config.num_attention_heads
  size = config.hidden_size // heads
  bias = (1.0 - mask[:, None, None, :]) * -10000.0
  for i in range(config.num_hidden_layers):
    p = f"bert/encoder/layer_{i}/"

    def dense(h, name, p=p):
      return h @ w[p + name + "/kernel"] + w[p + name + "/bias"]

    def split(h):
      return h.reshape(h.shape[0], seq, heads, size).transpose(0, 2, 1, 3)

    q, k, v = (split(dense(x, f"attention/self/{n}")) for n in ("query", "key", "value"))
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(size) + bias
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    context = (probs @ v).transpose(0, 2, 1, 3).reshape(x.shape)
    attention = _layer_norm(dense(context, "attention/output/dense") + x,
                            w[p + "attention/output/LayerNorm/gamma"],
                            w[p + "attention/output/LayerNorm/beta"])
    inner = act(dense(attention, "intermediate/dense"))
    x = _layer_norm(dense(inner, "output/dense") + attention, w[p + "output/LayerNorm/gamma"],
                    w[p + "output/LayerNorm/beta"])
  pooled = np.tanh(x[:, 0] @ w["bert/pooler/dense/kernel"] + w["bert/pooler/dense/bias"])
  return x, pooled


def reference_heads(w, config, sequence, pooled, positions):
  """(masked-LM logits at `positions`, next-sentence logits), as the original heads."""
  act = {"gelu": _gelu_tanh, "gelu_exact": _gelu_erf}[config.hidden_act]
  w = {k: np.asarray(v, np.float64) for k, v in w.items()}
  c = "cls/predictions/"
  h = np.take_along_axis(sequence, positions[..., None], axis=1)
  h = act(h @ w[c + "transform/dense/kernel"] + w[c + "transform/dense/bias"])
  h = _layer_norm(h, w[c + "transform/LayerNorm/gamma"], w[c + "transform/LayerNorm/beta"])
  mlm = h @ w["bert/embeddings/word_embeddings"].T + w[c + "output_bias"]
  s = "cls/seq_relationship/"
  nsp = pooled @ w[s + "output_weights"].T + w[s + "output_bias"]
  return mlm, nsp


# ----------------------------------------------------------------------------- helpers

def _random_weights(config, seed=0):
  """{canonical name: float32 array} for a pretraining model of `config` (not Keras init)."""
  rng = np.random.default_rng(seed)
  model = model_types.build_model("pretraining", config)
  out = {}
  for name, variable in weight_names.model_weight_pairs(model):
    scale = 1.0 if name.endswith("gamma") else 0.3
    base = 1.0 if name.endswith("gamma") else 0.0
    out[name] = (base + scale * rng.standard_normal(variable.shape)).astype(np.float32)
  return out


def write_original_tf1_checkpoint(prefix, weights):
  """A checkpoint as google-research/bert's run_pretraining.py leaves it: every variable by its
  graph name, plus Adam slots and global_step (filled with junk: they must be ignored)."""
  with tf.Graph().as_default():
    for name, value in weights.items():
      tf.compat.v1.Variable(value, name=name)
      tf.compat.v1.Variable(np.full_like(value, 1e6), name=name + "/adam_m")
      tf.compat.v1.Variable(np.full_like(value, -1e6), name=name + "/adam_v")
    step = tf.compat.v1.train.get_or_create_global_step()
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      session.run(step.assign(1000))
      tf.compat.v1.train.Saver().save(session, prefix)
  return prefix


def _inputs(seq=6):
  return {"input_word_ids": np.array([[2, 7, 9, 4, 3, 0], [2, 11, 4, 3, 12, 3]], np.int32),
          "input_mask": np.array([[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1]], np.int32),
          "input_type_ids": np.array([[0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 1, 1]], np.int32)}


def _model_outputs(model, inputs, positions):
  features = dict(inputs, masked_lm_positions=positions)
  out = model(features, training=False)
  encoded = model.encoder(inputs, training=False)
  return (np.asarray(encoded["sequence_output"]), np.asarray(encoded["pooled_output"]),
          np.asarray(out["masked_lm_logits"]), np.asarray(out["next_sentence_logits"]))


# ----------------------------------------------------------------------------- tests

def test_ours_to_tf1_to_ours_is_exact(tmp_path):
  model = model_types.build_model("pretraining", TINY)
  ours = checkpointing.model_checkpoint(model).write(str(tmp_path / "ours" / "ckpt-7"))
  model_files.write_config(str(tmp_path / "ours"), TINY)
  conversion.convert(ours, "ours", str(tmp_path / "tf1") + "/", "tf1")  # a prefix
  conversion.convert(str(tmp_path / "tf1"), "tf1", str(tmp_path / "back") + "/", "ours")

  expected = weights_io.read_weights(ours).tensors
  back = weights_io.read_weights(str(tmp_path / "back")).tensors
  names = {n for n, _ in weight_names.model_weight_pairs(model)}
  assert names <= set(expected) and names <= set(back)
  for name in names:
    np.testing.assert_array_equal(back[name], expected[name], err_msg=name)

  # The TF1 file holds exactly the original's names and is readable by a TF1 Saver.
  prefix = tf.train.latest_checkpoint(str(tmp_path / "tf1"))
  assert prefix.endswith("bert_model.ckpt")
  assert {n for n, _ in tf.train.list_variables(prefix)} == names
  with tf.Graph().as_default():
    variables = {n: tf.compat.v1.get_variable(n, shape=expected[n].shape, use_resource=False)
                 for n in sorted(names)}
    with tf.compat.v1.Session() as session:
      tf.compat.v1.train.Saver(variables).restore(session, prefix)
      for name in ("bert/encoder/layer_1/attention/self/key/kernel",
                   "cls/seq_relationship/output_weights"):
        np.testing.assert_array_equal(session.run(variables[name]), expected[name])
  assert model_files.read_config(str(tmp_path / "tf1" / "bert_config.json")) == TINY


def test_the_case_the_input_states_travels_with_it(tmp_path):
  """A folder whose tokenizer_config.json keeps the case of a vocabulary too small to tell
  (read by the vocabulary alone, it would be lower-cased): every output says the same."""
  model = model_types.build_model("encoder", TINY)
  source = tmp_path / "source"
  conversion.write_output(model, "encoder", TINY, str(source), "hf")
  (source / "vocab.txt").write_text("\n".join(
      ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "Hello", "hello"] +
      [f"w{i}" for i in range(TINY.vocab_size - 7)]) + "\n")
  model_files.write_tokenizer_config(str(source), False)
  for fmt in ("tf1", "ours", "hf"):
    conversion.convert(str(source), "hf", str(tmp_path / fmt) + "/", fmt)
    assert model_folder.read(str(tmp_path / fmt)).do_lower_case is False, fmt
  # The input's tokenizer_config.json travels whole; converting in place replaces the model
  # (with overwrite, as any folder with files) and keeps the file.
  own = {"do_lower_case": False, "model_max_length": 512}
  (source / model_files.TOKENIZER_CONFIG_FILE).write_text(json.dumps(own))
  with pytest.raises(ValueError, match="is not empty"):
    conversion.convert(str(source), "hf", str(source) + "/", "hf")
  conversion.convert(str(source), "hf", str(source) + "/", "tf1", overwrite=True)
  assert json.loads((source / model_files.TOKENIZER_CONFIG_FILE).read_text()) == own
  assert weights_io.read_weights(str(source)).format == "tf1"  # the HF weights replaced
  assert not (source / "model.safetensors").exists()
  # Nothing stated, nothing written: the output is read as the input was.
  os.remove(source / model_files.TOKENIZER_CONFIG_FILE)
  conversion.convert(str(source), "tf1", str(tmp_path / "plain") + "/", "ours")
  assert not (tmp_path / "plain" / model_files.TOKENIZER_CONFIG_FILE).exists()


def test_a_cased_release_converted_to_hugging_face_says_it_is_cased(tmp_path):
  """google-research's cased releases have no tokenizer_config.json; a Hugging Face folder
  without one is lower-cased by transformers' BertTokenizer. The vocabulary's case is written
  for a Hugging Face output (ours and TF1 outputs are read by the vocabulary as the input)."""
  tokens = open(CASED_VOCAB, encoding="utf-8").read().splitlines()
  config = dataclasses.replace(TINY, vocab_size=len(tokens))
  release = tmp_path / "cased_L-2_H-8_A-2"
  conversion.write_output(model_types.build_model("encoder", config), "encoder", config,
                          str(release) + "/", "tf1")
  shutil.copy(CASED_VOCAB, release / "vocab.txt")
  model_files.write_config_file(str(release / "bert_config.json"), config)
  conversion.convert(str(release), "tf1", str(tmp_path / "hf") + "/", "hf")
  assert json.loads((tmp_path / "hf" / model_files.TOKENIZER_CONFIG_FILE).read_text())[
      "do_lower_case"] is False
  conversion.convert(str(release), "tf1", str(tmp_path / "ours") + "/", "ours")
  assert not (tmp_path / "ours" / model_files.TOKENIZER_CONFIG_FILE).exists()
  assert model_folder.read(str(tmp_path / "ours")).do_lower_case is False


def test_original_tf1_checkpoint_matches_numpy_reference(tmp_path):
  weights = _random_weights(TINY)
  prefix = write_original_tf1_checkpoint(str(tmp_path / "orig" / "bert_model.ckpt"), weights)
  model_files.write_config(str(tmp_path / "orig"), TINY)
  assert "global_step" in dict(tf.train.list_variables(prefix))

  model_type, written = conversion.convert(prefix, "tf1", str(tmp_path / "ours") + "/",
                                                   "ours")
  assert model_type == "pretraining"  # inferred from cls/predictions/*
  inputs, positions = _inputs(), np.array([[1, 3], [2, 4]], np.int32)
  sequence, pooled = reference_bert(weights, TINY, inputs["input_word_ids"],
                                    inputs["input_mask"], inputs["input_type_ids"])
  mlm, nsp = reference_heads(weights, TINY, sequence, pooled, positions)
  real = inputs["input_mask"].astype(bool)
  for path in (prefix, written):  # the original file directly, and after conversion
    model = model_types.build_model("pretraining", TINY)
    weights_io.load_weights(model, path)
    got = _model_outputs(model, inputs, positions)
    np.testing.assert_allclose(got[0][real], sequence[real], atol=1e-5, rtol=0)
    np.testing.assert_allclose(got[1], pooled, atol=1e-5, rtol=0)
    np.testing.assert_allclose(got[2], mlm, atol=1e-4, rtol=0)
    np.testing.assert_allclose(got[3], nsp, atol=1e-5, rtol=0)


def test_minilm_round_trips_hf_ours_tf1_hf(tmp_path):
  source = minilm_dir()
  conversion.convert(source, "hf", str(tmp_path / "ours") + "/", "ours")
  conversion.convert(str(tmp_path / "ours"), "ours", str(tmp_path / "tf1") + "/", "tf1")
  conversion.convert(str(tmp_path / "tf1"), "tf1", str(tmp_path / "hf"), "hf")

  original = load_file(os.path.join(source, "model.safetensors"))
  final = load_file(str(tmp_path / "hf" / "model.safetensors"))
  # position_ids is a constant buffer HF rebuilds; it is not a weight.
  assert set(final) == set(original) - {"embeddings.position_ids"}
  for name, value in final.items():
    assert value.dtype == original[name].dtype
    np.testing.assert_array_equal(value, original[name], err_msg=name)

  config = model_files.read_config(str(tmp_path / "ours" / "bert_config.json"))
  assert config.hidden_act == "gelu_exact"  # HF "gelu" is the erf form
  hf_config = json.load(open(tmp_path / "hf" / "config.json", encoding="utf-8"))
  assert hf_config["hidden_act"] == "gelu" and hf_config["architectures"] == ["BertModel"]
  assert os.path.isfile(tmp_path / "tf1" / "vocab.txt")

  # The converted TF1 checkpoint gives the source weights' outputs (numpy, erf GELU).
  tokenizer = tokenization.FullTokenizer(os.path.join(source, "vocab.txt"), True)
  rows = [tokenizer.convert_tokens_to_ids(["[CLS]"] + tokenizer.tokenize(s) + ["[SEP]"])
          for s in ("A man is playing a guitar.", "The stock market fell sharply today!")]
  seq = max(map(len, rows))
  ids = np.array([r + [0] * (seq - len(r)) for r in rows], np.int32)
  mask = (ids > 0).astype(np.int32)
  inputs = {"input_word_ids": ids, "input_mask": mask, "input_type_ids": np.zeros_like(ids)}
  model = model_types.build_model("encoder", config)
  weights_io.load_weights(model, str(tmp_path / "tf1"))
  out = model(inputs, training=False)
  canonical = {weight_names.hf_to_tf1_name(k)[0]: (v.T if weight_names.hf_to_tf1_name(k)[1]
                                                   else v)
               for k, v in original.items() if weight_names.hf_to_tf1_name(k)}
  sequence, pooled = reference_bert(canonical, config, ids, mask, inputs["input_type_ids"])
  real = mask.astype(bool)
  np.testing.assert_allclose(np.asarray(out["sequence_output"])[real], sequence[real],
                             atol=1e-4, rtol=0)
  np.testing.assert_allclose(np.asarray(out["pooled_output"]), pooled, atol=1e-4, rtol=0)


def _cli(args):
  return subprocess.Popen(
      [sys.executable, "-m", "official_bert.convert_checkpoint"] + args, cwd=REPO,
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=child_pythonpath(REPO)))


def test_cli_reports_missing_misshaped_and_extra_tensors(tmp_path):
  """One file with a missing and a mis-shaped tensor (an error naming both: a process, for the
  exit status), one with an extra tensor (a warning naming it: in this process, through the
  command's launcher, while the other runs)."""
  weights = _random_weights(TINY)
  bad = dict(weights, **{"bert/pooler/dense/kernel": np.zeros([8, 4], np.float32)})
  del bad["bert/encoder/layer_1/output/dense/kernel"]
  extra = dict(weights, **{"bert/encoder/layer_2/output/dense/bias": np.zeros([8], np.float32)})
  args = {}
  for name, tensors in (("bad", bad), ("extra", extra)):
    prefix = tf1_checkpoint.write_tf1_checkpoint(tensors, str(tmp_path / name / "model.ckpt"))
    model_files.write_config(str(tmp_path / name), TINY)
    args[name] = [f"--input={prefix}", "--input_format=tf1", "--output_format=ours",
                  f"--output={tmp_path / name / 'out'}/"]
  proc = _cli(args["bad"])
  extra_run = run_command("official_bert.convert_checkpoint", *args["extra"])
  out, err = proc.communicate(timeout=300)
  results = {"bad": (proc.returncode, out, err),
             "extra": (extra_run.returncode, extra_run.stdout, extra_run.stderr)}

  rc, _, err = results["bad"]
  assert rc != 0, err
  assert "Missing tensors (1): ['bert/encoder/layer_1/output/dense/kernel']" in err, err
  assert "bert/pooler/dense/kernel: file has (8, 4), model expects (8, 8)" in err, err
  assert not os.path.exists(tmp_path / "bad" / "out")  # nothing written
  rc, out, err = results["extra"]
  assert rc == 0, err  # extra tensors are a warning, not an error
  assert "ignoring 1 tensor(s)" in err and "bert/encoder/layer_2/output/dense/bias" in err, err
  assert "Wrote pretraining weights" in out


def _files(folder):
  return {name: (folder / name).read_bytes() for name in os.listdir(folder)
          if (folder / name).is_file()}


def test_an_output_folder_with_files_is_refused_unless_overwrite(tmp_path):
  """Nothing of a folder that holds files is changed without --overwrite (a prefix in a run's
  OUTPUT_DIR used to rewrite its `checkpoint` and config); with it, the user's files stay."""
  model = model_types.build_model("encoder", TINY)
  source = tmp_path / "hf"
  conversion.write_output(model, "encoder", TINY, str(source), "hf")
  run = tmp_path / "run"
  conversion.convert(str(source), "hf", str(run) + "/", "ours")
  (run / "notes.txt").write_text("mine")
  before = _files(run)
  with pytest.raises(ValueError, match=r"is not empty.*--overwrite.*end it with /"):
    conversion.convert(str(source), "hf", str(run / "as_ours"), "ours")  # a prefix in run/
  with pytest.raises(ValueError, match=r"is not empty.*--overwrite"):
    conversion.convert(str(source), "hf", str(run), "tf1")
  assert _files(run) == before and sorted(os.listdir(run)) == sorted(before)
  conversion.convert(str(source), "hf", str(run), "tf1", overwrite=True)
  assert (run / "notes.txt").read_text() == "mine"
  assert not [n for n in os.listdir(run) if n.startswith("ckpt-0")]  # the old model replaced
  assert weights_io.read_weights(str(run)).format == "tf1"
  # A path that does not exist yet is a prefix in a new folder; the folder holds it whole.
  _, written = conversion.convert(str(source), "hf", str(tmp_path / "new" / "model.ckpt"),
                                  "tf1")
  assert written == str(tmp_path / "new" / "model.ckpt")
  assert weights_io.read_weights(str(tmp_path / "new")).source == written


def test_a_training_runs_folder_is_not_converted_into(tmp_path):
  """Its checkpoints hold the optimizer's state: --overwrite would replace them all, and the
  run could not resume."""
  model = model_types.build_model("encoder", TINY)
  source = tmp_path / "hf"
  conversion.write_output(model, "encoder", TINY, str(source), "hf")
  run = tmp_path / "run"
  state = tf.train.Checkpoint(optimizer=tf.train.Checkpoint(m=tf.Variable(1.0)))
  tf.train.CheckpointManager(state, str(run), max_to_keep=2, checkpoint_name="ckpt").save()
  before = _files(run)
  with pytest.raises(ValueError, match=r"run holds a training run's checkpoints \(ckpt-1, with "
                     r"its optimizer's state\).*Choose another --output"):
    conversion.convert(str(source), "hf", str(run) + "/", "tf1", overwrite=True)
  assert _files(run) == before


def test_a_tf1_checkpoint_in_an_output_dir_is_named_as_such(tmp_path):
  """A google-research model folder given as --output_dir: its checkpoint is not a run's to
  resume (it was reported as missing the very variables it holds)."""
  model = model_types.build_model("encoder", TINY)
  conversion.write_output(model, "encoder", TINY, str(tmp_path / "bert_model.ckpt"), "tf1")
  keeper = checkpointing.CheckpointKeeper(str(tmp_path), model, keras.optimizers.Adam(),
                                          tf.Variable(0, dtype=tf.int64))
  with pytest.raises(ValueError, match=r"bert_model.ckpt is a TF1 \(name-based\) checkpoint.*"
                     r"pass --init_checkpoint=.*bert_model.ckpt with a new --output_dir"):
    keeper.restore_or_initialize()


def test_a_trained_folder_converts_with_its_record_and_labels(tmp_path):
  """A classifier's folder converted to TF1 and back still says what it is: it loads (and so
  exports) with no labels or model type given."""
  labels = ["négatif", "pos,itif", "中立"]
  classifier = ob.TextClassifier.from_preset(tiny_model_folder(tmp_path / "base"),
                                             labels=labels, sequence_length=8)
  classifier.save(str(tmp_path / "trained"))
  conversion.convert(str(tmp_path / "trained"), "ours", str(tmp_path / "tf1") + "/", "tf1")
  conversion.convert(str(tmp_path / "tf1"), "tf1", str(tmp_path / "back") + "/", "ours")
  texts = ["hello world", "the cat"]
  for name in ("tf1", "back"):
    folder = model_folder.read(str(tmp_path / name))
    assert folder.record.model_type == "classifier" and folder.labels == labels, name
    again = ob.TextClassifier.from_preset(str(tmp_path / name))
    assert again.labels == labels
    np.testing.assert_allclose(again.predict(texts), classifier.predict(texts), atol=1e-6)
  # Another head (here none): the record of the classifier does not come along.
  conversion.convert(str(tmp_path / "trained"), "ours", str(tmp_path / "enc") + "/", "tf1",
                     model_type="encoder")
  assert model_folder.read(str(tmp_path / "enc")).record.model_type is None


def test_a_trained_head_is_not_converted_as_another_kind(tmp_path):
  """A classifier's output_weights written as a tagger's (the same names and shapes, another
  meaning): refused by the input's run record, as export refuses it."""
  source = tmp_path / "classifier"
  conversion.write_output(model_types.build_model("classifier", TINY, 2), "classifier", TINY,
                          str(source) + "/", "ours")
  model_files.write_config_file(str(source / "bert_config.json"), TINY)
  (source / model_files.RUN_SETTINGS_FILE).write_text(
      run_record.RunRecord.of("classifier", num_labels=2).to_json())
  with pytest.raises(ValueError, match=r"--model_type=tagger but --input=.* was trained as a "
                     r"classifier"):
    conversion.convert(str(source), "ours", str(tmp_path / "tagger") + "/", "ours",
                       model_type="tagger", num_labels=2)
  assert not (tmp_path / "tagger").exists()
  model_type, _ = conversion.convert(str(source), "ours", str(tmp_path / "encoder") + "/",
                                     "ours", model_type="encoder")
  assert model_type == "encoder"
