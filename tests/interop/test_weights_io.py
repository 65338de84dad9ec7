"""The one reader/loader (`weights_io`): every format into a tiny model, damaged files, ram://."""

import json
import logging
import os
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf

from official_bert.interop import checkpointing
from official_bert.interop import hf_weights
from official_bert.interop import model_files
from official_bert.interop import tf1_checkpoint
from official_bert.interop import weight_names
from official_bert.interop import weights_io
from official_bert.modeling import model_types
from official_bert.modeling.bert_config import BertConfig

TINY = BertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                  intermediate_size=12, max_position_embeddings=8, type_vocab_size=2)


def _source_model():
  """A pretraining model whose weights differ from any fresh initialization."""
  model = model_types.build_model("pretraining", TINY)
  rng = np.random.default_rng(3)
  for _, variable in weight_names.model_weight_pairs(model):
    variable.assign(rng.standard_normal(variable.shape).astype(np.float32))
  return model


def _weights(model):
  return {n: v.numpy() for n, v in weight_names.model_weight_pairs(model)}


def _write_all(model, root):
  """The same weights as ours, TF1 (with Adam slots and a step) and HF: {format: directory}."""
  ours = checkpointing.model_checkpoint(model).write(os.path.join(root, "ours", "ckpt-3"))
  tf1_checkpoint.write_checkpoint_state(ours)
  tensors = _weights(model)
  junk = {n + "/adam_m": np.full_like(v, 1e6) for n, v in tensors.items()}
  tf1_checkpoint.write_tf1_checkpoint(dict(tensors, **junk),
                                      os.path.join(root, "tf1", "bert_model.ckpt"),
                                      global_step=7)
  hf_weights.save_hf_weights(model, os.path.join(root, "hf", "model.safetensors"),
                             prefix="bert.")
  return {fmt: os.path.join(root, fmt) for fmt in ("ours", "tf1", "hf")}


@pytest.fixture(scope="module", name="written")
def _written(tmp_path_factory):
  keras.utils.set_random_seed(0)
  model = _source_model()
  return _weights(model), _write_all(model, str(tmp_path_factory.mktemp("formats")))


@pytest.mark.parametrize("fmt", ["ours", "tf1", "hf"])
def test_each_format_loads_the_same_weights(written, fmt):
  expected, dirs = written
  weights = weights_io.read_weights(dirs[fmt])
  assert weights.format == fmt
  assert set(weights.tensors) == set(expected)  # no optimizer, step or seed state
  model = model_types.build_model("pretraining", TINY)
  source = weights_io.load_weights(model, dirs[fmt])
  assert source == weights.source
  for name, value in _weights(model).items():
    np.testing.assert_array_equal(value, expected[name], err_msg=f"{fmt}: {name}")


def test_a_folder_without_a_checkpoint_file_reads_its_one_checkpoint(written, tmp_path):
  """google-research's released folders have bert_model.ckpt.* and no `checkpoint` file."""
  _, dirs = written
  release = tmp_path / "uncased_L-1_H-8_A-2"
  release.mkdir()
  for name in os.listdir(dirs["tf1"]):
    if name.startswith("bert_model.ckpt-7."):
      tf.io.gfile.copy(os.path.join(dirs["tf1"], name),
                       str(release / name.replace("bert_model.ckpt-7", "bert_model.ckpt")))
  weights = weights_io.read_weights(str(release))
  assert weights.source == str(release / "bert_model.ckpt") and weights.format == "tf1"
  for name in os.listdir(release):  # a second checkpoint: which one is not guessed
    tf.io.gfile.copy(str(release / name), str(release / name.replace(".ckpt", ".ckpt-2")))
  with pytest.raises(ValueError, match="2 checkpoints .* no `checkpoint` file"):
    weights_io.read_weights(str(release))
  # A `checkpoint` file naming one that is gone: an error, not the other one.
  for name in os.listdir(release):
    if name.startswith("bert_model.ckpt-2."):
      os.remove(release / name)
  (release / "checkpoint").write_text('model_checkpoint_path: "bert_model.ckpt-2"\n')
  with pytest.raises(FileNotFoundError, match=r"bert_model.ckpt-2\) that is not in"):
    weights_io.read_weights(str(release))
  # Copied from where google-research's run_classifier wrote it (an absolute --output_dir):
  # the prefix of that name here.
  (release / "checkpoint").write_text(
      'model_checkpoint_path: "/home/someone/mrpc_output/bert_model.ckpt"\n'
      'all_model_checkpoint_paths: "/home/someone/mrpc_output/bert_model.ckpt"\n')
  # ... without TensorFlow's "ERROR ... Couldn't match files for checkpoint" first.
  seen = []
  handler = logging.Handler()
  handler.emit = seen.append
  logging.getLogger("tensorflow").addHandler(handler)
  try:
    assert weights_io.read_weights(str(release)).source == str(release / "bert_model.ckpt")
  finally:
    logging.getLogger("tensorflow").removeHandler(handler)
  assert not [r for r in seen if r.levelno >= logging.ERROR], [r.getMessage() for r in seen]
  # ... also where that absolute path still holds a checkpoint (the original run's folder,
  # since trained again): the copy's own weights, not those.
  for name in os.listdir(release):
    if name.startswith("bert_model.ckpt."):
      shutil.copy(release / name, release / name.replace("bert_model.ckpt", "bert_model.ckpt-7"))
  elsewhere = os.path.join(dirs["tf1"], "bert_model.ckpt-7")
  assert os.path.exists(elsewhere + ".index")
  (release / "checkpoint").write_text(f'model_checkpoint_path: "{elsewhere}"\n')
  assert weights_io.read_weights(str(release)).source == str(release / "bert_model.ckpt-7")
  assert model_files.latest_checkpoint(str(release)) == str(release / "bert_model.ckpt-7")


def test_a_prefix_a_file_of_it_and_the_safetensors_file_also_work(written):
  _, dirs = written
  prefix = os.path.join(dirs["tf1"], "bert_model.ckpt-7")
  for path in (prefix, prefix + ".index", prefix + ".data-00000-of-00001"):
    assert weights_io.read_weights(path).source == prefix
  hf_file = os.path.join(dirs["hf"], "model.safetensors")
  weights = weights_io.read_weights(hf_file)
  assert weights.source == hf_file and weights.hf_prefix == "bert."


def test_warm_start_of_a_classifier_from_hf_keeps_the_new_head(written):
  expected, dirs = written
  keras.utils.set_random_seed(1)
  classifier = model_types.build_model("classifier", TINY, 3)
  head_before = classifier.projection.output_weights.numpy().copy()
  with pytest.raises(ValueError, match="output_weights"):
    weights_io.load_weights(classifier, dirs["hf"])  # strict: no random head
  weights_io.load_weights(classifier, dirs["hf"], require_heads=False)
  for name, value in _weights(classifier).items():
    if name.startswith("bert/"):
      np.testing.assert_array_equal(value, expected[name], err_msg=name)
  np.testing.assert_array_equal(classifier.projection.output_weights.numpy(), head_before)


def test_a_head_of_another_label_set_says_how_to_start_from_the_encoder(tmp_path):
  """A classifier fine-tuned for 2 labels, loaded into one of 3: refused, and the message
  gives the conversion that keeps the encoder alone (an encoder that differs gets no such
  hint)."""
  keras.utils.set_random_seed(2)
  two = model_types.build_model("classifier", TINY, 2)
  prefix = checkpointing.model_checkpoint(two).write(str(tmp_path / "two" / "ckpt-1"))
  with pytest.raises(ValueError, match=r"Mis-shaped tensors \(2\):[\s\S]*trained for another "
                     r"set of labels[\s\S]*convert_checkpoint --input=.*ckpt-1 "
                     r"--input_format=FORMAT --output=ENCODER_DIR/ --output_format=ours "
                     r"--model_type=encoder"):
    weights_io.load_weights(model_types.build_model("classifier", TINY, 3), prefix)
  wider = BertConfig(**dict(TINY.to_dict(), intermediate_size=16))
  with pytest.raises(ValueError, match="Mis-shaped") as e:
    weights_io.load_weights(model_types.build_model("classifier", wider, 2), prefix)
  assert "another set of labels" not in str(e.value)


def _copy_checkpoint(prefix, target):
  for file in tf.io.gfile.glob(prefix + ".*"):
    tf.io.gfile.copy(file, target + file[len(prefix):], overwrite=True)
  return target


def _truncate(path):
  """Keeps the first tenth, as an interrupted copy would."""
  with open(path, "rb") as f:
    data = f.read()
  with open(path, "wb") as f:
    f.write(data[:len(data) // 10])


@pytest.mark.parametrize("damaged", [".data-00000-of-00001", ".index"])
def test_a_truncated_checkpoint_names_the_file(written, tmp_path, damaged):
  _, dirs = written
  prefix = _copy_checkpoint(tf.train.latest_checkpoint(dirs["ours"]), str(tmp_path / "ckpt"))
  _truncate(prefix + damaged)
  with pytest.raises(ValueError, match="truncated or corrupt") as e:
    weights_io.read_weights(prefix)
  assert prefix + damaged in str(e.value)


def test_a_truncated_safetensors_file_names_the_file(written, tmp_path):
  _, dirs = written
  path = str(tmp_path / "model.safetensors")
  tf.io.gfile.copy(os.path.join(dirs["hf"], "model.safetensors"), path)
  _truncate(path)
  with pytest.raises(ValueError, match="truncated or corrupt") as e:
    weights_io.read_weights(path)
  assert path in str(e.value)


def test_a_text_file_is_not_a_checkpoint(tmp_path):
  path = tmp_path / "vocab.txt"
  path.write_text("[PAD]\n[UNK]\n")
  with pytest.raises(ValueError, match="is not a checkpoint") as e:
    weights_io.read_weights(str(path))
  assert str(path) in str(e.value)
  with pytest.raises(FileNotFoundError, match="no checkpoint at"):
    weights_io.read_weights(str(tmp_path / "nothing"))
  with pytest.raises(FileNotFoundError, match="no checkpoint in directory"):
    weights_io.read_weights(str(tmp_path))
  # PyTorch's pytorch_model.bin, sharded safetensors: named, with the way to one file.
  for name in ("pytorch_model.bin", "model-00001-of-00002.safetensors"):
    (tmp_path / name).write_bytes(b"weights")
  with pytest.raises(FileNotFoundError, match=r"it holds model-00001-of-00002.safetensors, "
                     r"pytorch_model.bin, which are not read: one model.safetensors is"):
    weights_io.read_weights(str(tmp_path))


def test_a_checkpoint_without_bert_weights_is_refused(tmp_path):
  prefix = tf.train.Checkpoint(v=tf.Variable(1.0)).write(str(tmp_path / "other"))
  with pytest.raises(ValueError, match="holds no BERT weights"):
    weights_io.read_weights(prefix)


def test_reads_and_writes_through_gfile_on_ram_filesystem(written):
  expected, _ = written
  model = model_types.build_model("pretraining", TINY)
  weights_io.load_weights(model, written[1]["ours"])
  ours = checkpointing.model_checkpoint(model).write("ram://weights_io_test/ours/ckpt")
  tf1_checkpoint.write_checkpoint_state(ours)
  hf_weights.save_hf_weights(model, "ram://weights_io_test/hf/model.safetensors")
  for path, fmt in ((ours, "ours"), ("ram://weights_io_test/ours", "ours"),
                    ("ram://weights_io_test/hf", "hf")):
    weights = weights_io.read_weights(path)
    assert weights.format == fmt, path
    for name, value in expected.items():
      np.testing.assert_array_equal(weights.tensors[name], value, err_msg=f"{path}: {name}")


def test_model_files_finds_what_travels_with_the_weights(written, tmp_path):
  _, dirs = written
  directory = tmp_path / "hf_model"
  directory.mkdir()
  tf.io.gfile.copy(os.path.join(dirs["hf"], "model.safetensors"),
                   str(directory / "model.safetensors"))
  (directory / "config.json").write_text(json.dumps(hf_weights.hf_config_dict(TINY, "BertModel")))
  (directory / "vocab.txt").write_text("[PAD]\n")
  (directory / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))
  for path in (str(directory), str(directory / "model.safetensors")):
    files = model_files.beside(path)
    assert files.hf_config == str(directory / "config.json")
    assert files.vocab == str(directory / "vocab.txt")
    assert files.do_lower_case is False and files.bert_config is None
  assert hf_weights.load_hf_config(files.hf_config) == TINY
  assert model_files.beside(dirs["tf1"]).vocab is None


@pytest.mark.parametrize("name, ignored", [
    ("bert/pooler/dense/kernel/adam_m", True), ("cls/predictions/output_bias/Adam_1", True),
    ("global_step", True), ("beta1_power", True), ("loss_scale", True),
    ("bert/x/lamb_v", True), ("dropout/seed_generator/state", True),
    ("bert/pooler/dense/kernel", False), ("output_weights", False)])
def test_one_ignore_list_for_training_state(name, ignored):
  assert weights_io.is_training_state(name) is ignored


def test_a_folder_without_weights_points_to_its_best_model(tmp_path):
  """A --num_restarts run's OUTPUT_DIR holds its model files, and its model in best/."""
  (tmp_path / "run" / "best").mkdir(parents=True)
  (tmp_path / "run" / "bert_config.json").write_text("{}")
  with pytest.raises(FileNotFoundError, match=r"no checkpoint in directory .*run .*its best/ "
                                              r"holds the model .*: read .*run/best$"):
    weights_io.read_weights(str(tmp_path / "run"))


def test_a_model_garden_checkpoint_is_named_as_one(tmp_path):
  """The TF Model Garden's BertEncoder saved with tf.train.Checkpoint: "holds no BERT weights
  ... is it a BERT checkpoint?" did not say what it is or where to go."""
  networks = pytest.importorskip("official.nlp.modeling.networks")
  encoder = networks.BertEncoder(vocab_size=30, hidden_size=8, num_layers=1,
                                 num_attention_heads=2, max_sequence_length=8, inner_dim=16)
  prefix = tf.train.Checkpoint(encoder=encoder).write(str(tmp_path / "ckpt"))
  with pytest.raises(ValueError, match=r"TF2 object-based checkpoint of another model .*"
                     r"layer_with_weights.*google-research/bert's TF1 release"):
    weights_io.read_weights(prefix)
