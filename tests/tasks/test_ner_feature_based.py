"""run_ner --feature_based end to end on a CoNLL slice with a tiny BERT: the encoder stays
bit-identical, the BiLSTM head trains, evaluates and predicts, a later --do_predict run on the
same directory finds the head's configuration, and the export serves the same logits."""

import json
import os

from conftest import CONLL_DATA
from conftest import UNCASED_VOCAB
from conftest import need
import numpy as np
import pytest
import tensorflow as tf
from test_freezing_run import init_checkpoint
from test_glue_run_classifier import read_results
from test_glue_run_classifier import run_script
from test_glue_run_classifier import tiny_config

from data_prep.tagging import conll
from official_bert.interop import model_files
from official_bert.interop import model_folder
from official_bert.interop import weights_io
from official_bert.modeling import model_types
from official_bert.serving import exporter

pytestmark = pytest.mark.large  # trains or runs commands: `make test`, not `make test-fast`


def _conll_slice(tmp_path):
  data = tmp_path / "conll"
  data.mkdir()
  for name, lines in (("eng.train", 200), ("eng.testa", 120), ("eng.testb", 80)):
    with open(need(os.path.join(CONLL_DATA, name)), encoding="utf-8") as f:
      (data / name).write_text("".join(f.readlines()[:lines]), encoding="utf-8")
  return data


def test_feature_based_ner_trains_predicts_and_exports(tmp_path):
  data = _conll_slice(tmp_path)
  init = init_checkpoint(tmp_path)
  out = tmp_path / "out"
  common = [f"--data_dir={data}", f"--output_dir={out}", f"--init_checkpoint={init}"]
  run_script("official_bert.run_ner", tmp_path, *common, "--do_train", "--do_eval",
             "--do_predict", "--feature_based", "--layers=-1,embeddings", "--combine=weighted",
             "--lstm_units=8", "--lstm_layers=1", "--learning_rate=1e-2")
  head = json.loads((out / "head_config.json").read_text())
  assert head == {"model_type": "feature_tagger", "layers": [0, 2], "combine": "weighted",
                  "lstm_units": 8, "lstm_layers": 1}
  assert {"entity_f1", "token_accuracy"} <= set(read_results(out / "eval_results.txt"))

  before = weights_io.read_weights(init).tensors
  after = weights_io.read_weights(str(out)).tensors
  for name, value in before.items():  # BERT never changes
    np.testing.assert_array_equal(after[name], value, err_msg=name)
  assert not np.array_equal(after["cls/feature_tagger/layer_weights"], np.zeros(2))
  assert after["cls/feature_tagger/lstm_0/fw/kernel"].shape == (32, 4 * 8)

  # --do_predict alone on the directory: the head_config.json there says what the model is.
  first = (out / "test_predictions.txt").read_text()
  (out / "test_predictions.txt").unlink()
  run_script("official_bert.run_ner", tmp_path, *common, "--do_predict")
  assert (out / "test_predictions.txt").read_text() == first

  # Export: the SavedModel's serve_ids logits are the Keras model's.
  labels = list(conll.CONLL2003_LABELS)
  export_dir = str(tmp_path / "export")
  exporter.export(model_folder.read(str(out), tiny_config(tmp_path), need(UNCASED_VOCAB), True),
                  export_dir, exporter.ExportOptions("feature_tagger", max_seq_length=16,
                                                     label_names=labels))
  config = model_files.read_config(tiny_config(tmp_path))
  head_config = model_files.read_head_config(str(out / model_files.HEAD_CONFIG_FILE))
  model = model_types.build_model("feature_tagger", config, len(labels), head_config)
  weights_io.load_weights(model, str(out))
  rng = np.random.default_rng(1)
  ids = rng.integers(1000, 2000, size=(2, 16)).astype(np.int32)
  mask = np.ones_like(ids)
  mask[1, 9:] = 0
  inputs = {"input_word_ids": ids * mask, "input_mask": mask, "input_type_ids": 0 * ids}
  want = model(inputs, training=False)["logits"].numpy()
  loaded = tf.saved_model.load(export_dir)
  got = loaded.signatures["serve_ids"](**{k: tf.constant(v) for k, v in inputs.items()})
  np.testing.assert_allclose(got["logits"].numpy(), want, rtol=1e-5, atol=1e-5)
  text = loaded.signatures["serving_default"](text=tf.constant(["John lives in Berlin ."]))
  assert set(text["predicted_labels"].numpy().ravel().astype(str)) <= set(labels)


def test_feature_based_bad_flags(tmp_path):
  data = _conll_slice(tmp_path)
  for flags, words in ((["--layers=-3"], "--layers: layer -3 is out of range"),
                       (["--layers=top"], "is not a layer"),
                       (["--combine=max"], "combine")):
    proc = run_script("official_bert.run_ner", tmp_path, f"--data_dir={data}",
                      f"--output_dir={tmp_path / 'o'}", "--do_train", "--feature_based",
                      *flags, check=False)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert words in proc.stderr, proc.stderr[-2000:]
