"""model_files: what a run writes beside its checkpoints is what every reader finds there."""

import dataclasses
import json
import logging
import os

import numpy as np
import pytest
import safetensors.numpy
import tensorflow as tf

from data_prep import tfrecord_io
from official_bert.interop import hf_weights
from official_bert.interop import model_files
from official_bert.interop import run_record
from official_bert.interop import tf1_checkpoint
from official_bert.modeling.bert_config import BertConfig

TINY = BertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                  intermediate_size=16)


def test_written_files_are_found_beside_a_checkpoint(tmp_path):
  vocab = tmp_path / "source_vocab.txt"
  vocab.write_text("[PAD]\n[UNK]\n")
  out = tmp_path / "out"
  out.mkdir()
  record = run_record.RunRecord.of("classifier", task="MRPC", labels=["0"])
  paths = model_files.write(str(out), TINY, str(vocab), False, record)
  assert [p.rsplit("/", 1)[1] for p in paths] == list(model_files.MODEL_FILES)
  model_files.write_labels(str(out), ["b", "a"])
  for path in (str(out), str(out / "ckpt-3")):  # the folder, or a checkpoint prefix in it
    files = model_files.beside(path)
    assert files.directory == str(out)
    assert files.bert_config == str(out / model_files.CONFIG_FILE) and files.hf_config is None
    assert files.vocab == str(out / model_files.VOCAB_FILE) and files.do_lower_case is False
    assert files.record.values() == {"task": "MRPC", "model_type": "classifier",
                                     "labels": ["0"], "do_lower_case": False}
    assert model_files.labels_beside(path) == ["b", "a"]
  assert model_files.read_config(files.bert_config) == TINY
  assert model_files.read_run_settings(str(out)) == files.record
  assert model_files.read_run_settings(str(tmp_path)) == run_record.RunRecord()
  assert model_files.labels_beside(str(tmp_path)) is None


def test_a_distilled_students_record_round_trips():
  part = run_record.DistillationPart(teacher="/models/teacher", teacher_num_layers=6,
                                     student_init="teacher_layers", teacher_layers=[0, 5],
                                     temperature=2.0, distill_weight=0.5, hidden_weight=0.0,
                                     unlabeled_examples=20000)
  record = run_record.RunRecord.of("tagger", task="NER", labels=["O", "B-PER"],
                                   distillation=dataclasses.asdict(part))
  assert record.distillation == part
  text = record.to_json()
  assert json.loads(text)["distillation"]["teacher_layers"] == [0, 5]
  assert run_record.RunRecord.from_json(text) == record
  assert "teacher" not in record.values()  # not a setting the flags take defaults from


def test_head_config_round_trip_and_errors(tmp_path):
  head = {"layers": [-1, -2], "combine": "concat", "lstm_units": 4, "lstm_layers": 1}
  assert model_files.head_config_beside(str(tmp_path)) is None
  model_files.write_head_config(str(tmp_path), head)
  path = model_files.head_config_beside(str(tmp_path / "ckpt-1"))
  assert path == str(tmp_path / model_files.HEAD_CONFIG_FILE)
  assert model_files.read_head_config(path) == head
  (tmp_path / "bad.json").write_text(json.dumps({"layers": [-1]}))
  with pytest.raises(ValueError, match="expected the keys"):
    model_files.read_head_config(str(tmp_path / "bad.json"))
  (tmp_path / "bad.json").write_text("{")
  with pytest.raises(ValueError, match="not valid JSON"):
    model_files.read_head_config(str(tmp_path / "bad.json"))


def test_labels_with_a_line_break_are_refused_and_the_record_outranks_labels_txt(tmp_path):
  """labels.txt holds one label a line: a label with a line break would come back as two
  (a run on the OUTPUT_DIR then fails), so it is refused when written. A folder's labels are
  its run record's where it has them (the Python API writes no labels.txt)."""
  with pytest.raises(ValueError, match=r"label 'line\\nbreak' holds a line break"):
    model_files.write_labels(str(tmp_path), ["pos", "line\nbreak"])
  assert not (tmp_path / model_files.LABELS_FILE).exists()
  model_files.write_labels(str(tmp_path), ["b", "a"])
  assert model_files.labels_of(str(tmp_path)) == ["b", "a"]
  record = run_record.RunRecord.of("classifier", labels=["neg, really", "pos"])
  (tmp_path / model_files.RUN_SETTINGS_FILE).write_text(record.to_json())
  assert model_files.labels_of(str(tmp_path)) == ["neg, really", "pos"]


def test_labels_file_edited_by_hand(tmp_path):
  (tmp_path / model_files.LABELS_FILE).write_bytes(b"b\r\n\r\na\r\n")  # Windows line ends
  assert model_files.labels_beside(str(tmp_path)) == ["b", "a"]
  (tmp_path / model_files.LABELS_FILE).write_bytes(b"b\n\xff\n")
  with pytest.raises(ValueError, match=r"labels.txt:2:1: not valid UTF-8"):
    model_files.labels_beside(str(tmp_path))


def test_weight_side_files_are_written_atomically(tmp_path, monkeypatch):
  """safetensors, config.json and a TF1 `checkpoint` state go through the atomic writer: the
  target does not exist while its bytes are written, and no temporary name is left."""
  written = []
  write = tfrecord_io.AtomicFile.write

  def spy(self, data):
    written.append((os.path.basename(self.path), os.path.exists(self.path)))
    write(self, data)

  monkeypatch.setattr(tfrecord_io.AtomicFile, "write", spy)
  out = tmp_path / "model"
  hf_weights.write_safetensors({"w": np.arange(3, dtype=np.float32)},
                               str(out / "model.safetensors"))
  model_files.write_hf_config(str(out), {"hidden_size": 8})
  tf1_checkpoint.write_checkpoint_state(str(out / "bert_model.ckpt"))
  assert sorted(written) == [("checkpoint", False), ("config.json", False),
                             ("model.safetensors", False)]
  assert sorted(os.listdir(out)) == ["checkpoint", "config.json", "model.safetensors"]
  assert safetensors.numpy.load_file(str(out / "model.safetensors"))["w"].tolist() == [0, 1, 2]
  assert json.loads((out / "config.json").read_text()) == {"hidden_size": 8}
  state = tf.train.get_checkpoint_state(str(out))
  assert state.model_checkpoint_path == str(out / "bert_model.ckpt")


def test_others_files_are_those_a_run_would_replace_where_no_run_is(tmp_path):
  """A user's vocab.txt or a Hugging Face model in a new --output_dir: a fine-tuning run
  replaced the vocabulary (and its tokenizer_config.json) and wrote its checkpoint beside the
  other model, which export then read."""
  folder = tmp_path / "out"
  folder.mkdir()
  for name in ("vocab.txt", "model.safetensors", "notes.txt", "labels.txt"):
    (folder / name).write_text("mine")
  assert model_files.others_files(str(folder)) == ["labels.txt", "model.safetensors",
                                                    "vocab.txt"]
  # The run's own --vocab_file there is read as it is, not replaced.
  assert model_files.others_files(str(folder), (str(folder / "vocab.txt"), None)) == [
      "labels.txt", "model.safetensors"]
  assert model_files.others_files(str(tmp_path / "new")) == []
  (folder / model_files.RUN_SETTINGS_FILE).write_text("{}")  # a run's folder (one that failed)
  assert model_files.others_files(str(folder)) == []
  # A run that wrote its labels and stopped (a bad dev file) left a run's folder: its rerun
  # may go on.
  stopped = tmp_path / "stopped"
  stopped.mkdir()
  model_files.write_labels(str(stopped), ["neg", "pos"])
  assert (stopped / "labels.txt").read_text() == "neg\npos\n"
  assert model_files.others_files(str(stopped)) == []
  assert model_files.read_run_settings(str(stopped)) == run_record.RunRecord()


def test_a_tokenizer_config_that_normalizes_otherwise_is_warned_of_once(tmp_path, caplog):
  """Hugging Face's strip_accents=false with do_lower_case=true (some non-English uncased
  models): "Café" became "cafe" here, "café" there, without a word."""
  (tmp_path / "tokenizer_config.json").write_text(
      json.dumps({"do_lower_case": True, "strip_accents": False}))
  with caplog.at_level(logging.WARNING):
    for _ in range(2):
      assert model_files.beside(str(tmp_path)).do_lower_case is True
  said = [r.getMessage() for r in caplog.records if "strip_accents=false" in r.getMessage()]
  assert len(said) == 1 and "tokenize differently from the Hugging Face tokenizer" in said[0]
  caplog.clear()
  other = tmp_path / "plain"
  other.mkdir()
  (other / "tokenizer_config.json").write_text(
      json.dumps({"do_lower_case": True, "strip_accents": None}))
  with caplog.at_level(logging.WARNING):
    model_files.beside(str(other))
  assert "tokenize differently" not in caplog.text
