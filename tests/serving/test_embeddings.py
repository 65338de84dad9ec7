"""Sentence embeddings: the encoder export's `mean_pooled_output` and
`extract_features --pooling=mean`, on the real all-MiniLM-L6-v2 weights.

The reference uses none of our model code: the original pure-Python tokenizer, an
independent numpy BERT over the safetensors tensors (tests/numpy_bert.py) and
sentence-transformers' pooling (mean over the real tokens, then L2 normalization). The
export is made in one command from the Hugging Face folder (no --bert_config_file or
--vocab_file) and queried by a process that never imports this repository.
"""

import json
import os
import subprocess
import sys
import textwrap

from conftest import UNCASED_VOCAB
from conftest import child_pythonpath
from conftest import minilm_dir
from conftest import run_command
import numpy as np
import numpy_bert
import pytest
from safetensors.numpy import load_file

from data_prep import tokenization
from official_bert.serving import feature_extraction

pytestmark = pytest.mark.large  # trains or runs commands: `make test`, not `make test-fast`

SEQ = 32
SENTENCES = ["A man is playing a guitar.", "Someone plays an instrument on stage.",
             "The stock market fell sharply after the announcement.", "Hello world!"]
TEXTS_B = ["He sings along.", "", "Investors were worried.", ""]  # "": a single segment
HEADS = 12  # MiniLM-L6-H384's config.json


def _env(**extra):
  return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", **extra)


# ----------------------------------------------------------------------------- reference

def _original_tokenizer(vocab_file):
  """The original pure-Python WordPiece (tf-models-official's copy) where installed: it
  shares no code with the graph tokenizer inside the export; else ours."""
  try:
    from official.nlp.tools import tokenization as original  # pylint: disable=g-import-not-at-top
  except ImportError:
    original = tokenization
  return original.FullTokenizer(vocab_file, do_lower_case=True)


def _pack(model_dir, texts, texts_b=None):
  """[CLS] a [SEP] (b [SEP]) padded to SEQ, as numpy int32 inputs (no truncation needed)."""
  tokenizer = _original_tokenizer(os.path.join(model_dir, "vocab.txt"))
  rows = []
  for i, text in enumerate(texts):
    a = ["[CLS]"] + tokenizer.tokenize(text) + ["[SEP]"]
    b = tokenizer.tokenize(texts_b[i]) + ["[SEP]"] if texts_b and texts_b[i] else []
    assert len(a) + len(b) <= SEQ
    ids = tokenizer.convert_tokens_to_ids(a + b)
    pad = SEQ - len(ids)
    rows.append((ids + [0] * pad, [1] * len(ids) + [0] * pad,
                 [0] * len(a) + [1] * len(b) + [0] * pad))
  return {name: np.array([r[k] for r in rows], np.int32)
          for k, name in enumerate(("input_word_ids", "input_mask", "input_type_ids"))}


def _reference(model_dir, inputs, normalize=True):
  """sentence-transformers' all-MiniLM-L6-v2 vectors: numpy BERT, mean pooling, normalize."""
  weights = numpy_bert.from_hf_state_dict(load_file(os.path.join(model_dir,
                                                                 "model.safetensors")))
  sequence, _ = numpy_bert.numpy_bert(weights, inputs["input_word_ids"], inputs["input_mask"],
                                      inputs["input_type_ids"], HEADS,
                                      gelu=numpy_bert.gelu_erf)  # HF "gelu" is the erf form
  return numpy_bert.mean_pool(sequence, inputs["input_mask"], normalize)


# ----------------------------------------------------------------------------- fixtures

# Imports only TensorFlow (+ tensorflow_text for the tokenizer's ops), runs every signature.
_SNIPPET = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # registers the tokenizer's ops
    export_dir, texts, texts_b, ids = json.loads(sys.argv[1])
    sigs = tf.saved_model.load(export_dir).signatures
    calls = {"text": sigs["serving_default"](text=tf.constant(texts)),
             "pair": sigs["serving_pair"](text=tf.constant(texts), text_b=tf.constant(texts_b)),
             "ids": sigs["serve_ids"](**{k: tf.constant(v, tf.int32) for k, v in ids.items()})}
    out = {f"{sig}/{key}": result[key].numpy() for sig, result in calls.items()
           for key in ("mean_pooled_output", "input_word_ids") if key in result}
    out["imported_ours"] = np.array(sorted(m for m in sys.modules
                                           if m.split(".")[0] in ("official_bert", "data_prep")))
    np.savez(sys.argv[2], **out)
""")


@pytest.fixture(scope="module", name="minilm")
def _minilm(tmp_path_factory):
  """Exports MiniLM with one command and extracts mean features from its folder (both
  commands); returns the paths and the fresh process's outputs of every signature."""
  model_dir = minilm_dir()
  root = tmp_path_factory.mktemp("minilm")
  lines = root / "lines.txt"
  lines.write_text("\n".join(SENTENCES + [f"{a} ||| {b}" for a, b in zip(SENTENCES, TEXTS_B)
                                          if b]) + "\n", encoding="utf-8")
  export_dir = root / "export"
  # The commands through their launchers, in this process; the export is then queried by a
  # process of its own (`_SNIPPET`).
  for name, *args in (
      ("export", f"--checkpoint={model_dir}", "--model_type=encoder", "--normalize_embeddings",
       f"--max_seq_length={SEQ}", f"--export_dir={export_dir}"),
      ("extract_features", f"--input_file={lines}", f"--output_file={root / 'embeddings.jsonl'}",
       f"--init_checkpoint={model_dir}", "--pooling=mean", "--normalize_embeddings",
       f"--max_seq_length={SEQ}")):
    done = run_command(f"official_bert.{name}", *args)
    assert done.returncode == 0, f"{name}: {done.stderr[-3000:]}"
  ids = _pack(model_dir, SENTENCES)
  proc = subprocess.run(
      [sys.executable, "-c", _SNIPPET,
       json.dumps([str(export_dir), SENTENCES, TEXTS_B, {k: v.tolist() for k, v in ids.items()}]),
       str(root / "out.npz")], cwd=str(root), env=_env(PYTHONPATH=child_pythonpath()),
      capture_output=True, text=True, timeout=600, check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return {"model_dir": model_dir, "root": root, "export_dir": export_dir, "lines": lines,
          "outputs": dict(np.load(root / "out.npz"))}


# ----------------------------------------------------------------------------- tests

def test_export_equals_numpy_sentence_transformers_reference(minilm):
  """Every signature's mean_pooled_output: the reference vectors to 1e-5, unit length."""
  outputs, model_dir = minilm["outputs"], minilm["model_dir"]
  assert outputs["imported_ours"].size == 0, outputs["imported_ours"]
  for sig, inputs in (("text", _pack(model_dir, SENTENCES)),
                      ("pair", _pack(model_dir, SENTENCES, TEXTS_B)),
                      ("ids", _pack(model_dir, SENTENCES))):
    if sig != "ids":  # the export's in-graph tokenizer packs as the original does, padded
      packed = outputs[f"{sig}/input_word_ids"]  # to the longest text (a multiple of 8)
      width = packed.shape[1]
      assert width % 8 == 0 and not inputs["input_mask"][:, width:].any()
      np.testing.assert_array_equal(packed, inputs["input_word_ids"][:, :width])
    got = outputs[f"{sig}/mean_pooled_output"]
    assert got.shape == (len(SENTENCES), 384)
    np.testing.assert_allclose(got, _reference(model_dir, inputs), atol=1e-5, rtol=0,
                               err_msg=sig)
    np.testing.assert_allclose(np.linalg.norm(got, axis=-1), 1.0, atol=1e-6)
  # The point of it: the guitar sentences are nearer each other than to the stock market.
  vectors = outputs["text/mean_pooled_output"]
  similarity = vectors @ vectors.T
  assert similarity[0, 1] > similarity[0, 2] + 0.2, similarity

  # Settings from the folder: config.json, vocab.txt, tokenizer_config.json's case.
  extra = minilm["export_dir"] / "assets.extra"
  info = json.loads((extra / "export_info.json").read_text())
  assert info["normalize_embeddings"] is True and info["do_lower_case"] is True
  assert json.loads((extra / "bert_config.json").read_text())["hidden_act"] == "gelu_exact"
  assert (minilm["export_dir"] / "assets" / "vocab.txt").read_bytes() == (
      open(os.path.join(model_dir, "vocab.txt"), "rb").read())


def test_extract_features_mean_equals_the_export(minilm):
  """--pooling=mean --normalize_embeddings: one JSON line per input line, the export's
  vectors (single texts: serving_default; `a ||| b` lines: serving_pair)."""
  records = [json.loads(line)
             for line in (minilm["root"] / "embeddings.jsonl").read_text().splitlines()]
  pairs = [i for i, b in enumerate(TEXTS_B) if b]
  assert [r["linex_index"] for r in records] == list(range(len(SENTENCES) + len(pairs)))
  assert set(records[0]) == {"linex_index", "embedding"}
  got = np.array([r["embedding"] for r in records])
  outputs = minilm["outputs"]
  want = np.concatenate([outputs["text/mean_pooled_output"],
                         outputs["pair/mean_pooled_output"][pairs]])
  np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)  # JSON rounds to 6 decimals


def test_extract_features_mean_npz_and_several_layers(minilm, tmp_path):
  """.npz `embeddings` [lines, hidden]: the unnormalized reference for the default (last)
  layer; several --layers give each layer's mean side by side, in --layers order."""
  model_dir = minilm["model_dir"]
  common = dict(input_file=str(minilm["lines"]), init_checkpoint=model_dir, pooling="mean",
                max_seq_length=SEQ)
  last = tmp_path / "last.npz"
  feature_extraction.run(feature_extraction.ExtractSettings(output_file=str(last), **common))
  both = tmp_path / "both.npz"
  feature_extraction.run(feature_extraction.ExtractSettings(output_file=str(both),
                                                            layers=("-2", "-1"), **common))
  arrays = np.load(last)
  assert arrays["layers"].tolist() == [-1]
  want = _reference(model_dir, _pack(model_dir, SENTENCES), normalize=False)
  np.testing.assert_allclose(arrays["embeddings"][:len(SENTENCES)], want, atol=1e-5, rtol=0)
  arrays_both = np.load(both)
  assert arrays_both["layers"].tolist() == [-2, -1]
  assert arrays_both["embeddings"].shape == (arrays["embeddings"].shape[0], 2 * 384)
  np.testing.assert_allclose(arrays_both["embeddings"][:, 384:], arrays["embeddings"],
                             atol=1e-6, rtol=0)


_TINY_HF_CONFIG = {"vocab_size": 30522, "hidden_size": 16, "num_hidden_layers": 1,
                   "num_attention_heads": 2, "intermediate_size": 32, "hidden_act": "gelu",
                   "max_position_embeddings": 128, "type_vocab_size": 2}


def test_bad_input_is_one_clear_message(tmp_path):
  """Exit status 1, the flag named, no traceback; checked before any model is built (in this
  process, through the commands' launcher; their exit status from a shell is checked above)."""
  hf_no_vocab = tmp_path / "hf_no_vocab"  # an HF folder without its vocab.txt
  hf_no_vocab.mkdir()
  (hf_no_vocab / "model.safetensors").write_bytes(b"")
  (hf_no_vocab / "config.json").write_text(json.dumps(_TINY_HF_CONFIG))
  config = tmp_path / "bert_config.json"
  config.write_text(json.dumps(dict(_TINY_HF_CONFIG, hidden_dropout_prob=0.1,
                                    attention_probs_dropout_prob=0.1, initializer_range=0.02)))
  lines = tmp_path / "lines.txt"
  lines.write_text("hello\n")
  extract = ["official_bert.extract_features", f"--input_file={lines}",
             f"--output_file={tmp_path / 'out.jsonl'}", f"--bert_config_file={config}",
             f"--vocab_file={UNCASED_VOCAB}", "--allow_random_weights"]
  export = ["official_bert.export", "--model_type=encoder", f"--export_dir={tmp_path / 'e'}"]
  cases = {
      "--layer_weights applies to --pooling=sum": extract + ["--pooling=mean",
                                                             "--layer_weights=1,2"],
      "--normalize_embeddings applies to --pooling=mean": extract + ["--normalize_embeddings"],
      f"--checkpoint={tmp_path / 'ours' / 'ckpt-1'} does not exist": export + [
          f"--checkpoint={tmp_path / 'ours' / 'ckpt-1'}", f"--vocab_file={UNCASED_VOCAB}"],
      "--vocab_file is required": export + [f"--checkpoint={hf_no_vocab}"],
      "--normalize_embeddings applies to an encoder's mean_pooled_output": [
          "official_bert.export", "--model_type=classifier", "--normalize_embeddings",
          f"--checkpoint={hf_no_vocab}", f"--vocab_file={UNCASED_VOCAB}",
          f"--export_dir={tmp_path / 'e'}"],
  }
  for message, args in cases.items():  # in-process, through each command's launcher
    proc = run_command(*args)
    rc, err = proc.returncode, proc.stderr
    assert rc == 1 and message in err and "Traceback" not in err, (message, err[-3000:])
  assert not (tmp_path / "e").exists() and not (tmp_path / "out.jsonl").exists()
