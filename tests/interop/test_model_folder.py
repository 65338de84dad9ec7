"""The one model folder reader and the one run record (issue 38).

Every route to a model (the Python API's `from_preset`, `export --checkpoint` with no case
flag, `extract_features --init_checkpoint`) asks `model_folder.read`, so a cased folder is
tokenized cased by all of them, whatever kind of folder it is: Hugging Face (no
tokenizer_config.json, as `save_pretrained` of a bare BertModel writes), google-research TF1
(bert_config.json + vocab.txt only), a command's OUTPUT_DIR, or a folder the API saved.
"""

import collections
import dataclasses
import functools
import json
import logging
import os
import re
import shutil
import types

from conftest import TINY_CONFIG
from conftest import run_command
from conftest import tiny_model_folder
import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  # registers the exported tokenizer's ops

import official_bert as ob
from official_bert.api import presets
from official_bert.interop import checkpointing
from official_bert.interop import conversion
from official_bert.interop import model_files
from official_bert.interop import model_folder
from official_bert.interop import run_record
from official_bert.modeling.bert_config import BertConfig
from official_bert.modeling.encoder import BertEncoder
from official_bert.serving import exporter
from official_bert.serving import feature_extraction
from official_bert.tasks import classifier_job
from official_bert.training import finetuning_runner

pytestmark = pytest.mark.large  # trains or runs commands: `make test`, not `make test-fast`

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")
VOCABS = {"cased": os.path.join(DATA, "vocab", "cased_vocab.txt"),
          "uncased": os.path.join(DATA, "vocab", "uncased_vocab.txt")}
CONFIG = BertConfig(**dict(TINY_CONFIG, max_position_embeddings=32))
KINDS = ("hf", "tf1", "output_dir", "api_saved")


@functools.lru_cache(maxsize=None)  # one per seed: the folders only read it
def _encoder(seed):
  keras.utils.set_random_seed(seed)
  encoder = BertEncoder.from_bert_config(CONFIG, name="encoder")
  encoder.build()
  for variable in encoder.variables:  # larger than the init, so that tokens tell apart
    variable.assign(np.random.default_rng(seed).normal(
        scale=0.2, size=variable.shape).astype("float32"))
  return encoder


def make_folder(root, kind, case):
  """A tiny model folder of `kind` with the `case` ("cased"/"uncased") vocabulary and no
  file but the vocabulary saying its case (except the two kinds that always write one)."""
  path = os.path.join(str(root), f"{kind}_{case}")
  encoder = _encoder(0)
  vocab = VOCABS[case]
  if kind in ("hf", "tf1"):
    conversion.write_output(encoder, "encoder", CONFIG, path + ("" if kind == "hf" else "/"),
                            kind)
    if kind == "tf1":  # as google-research's released folders: no `checkpoint` file
      model_files.write_config(path, CONFIG)
      os.remove(os.path.join(path, "checkpoint"))
    tf.io.gfile.copy(vocab, os.path.join(path, "vocab.txt"))
  elif kind == "output_dir":  # what a run_* command leaves: a checkpoint and the model files
    os.makedirs(path)
    tf.train.CheckpointManager(checkpointing.model_checkpoint(encoder), path, 1).save()
    model_files.write(path, CONFIG, vocab, case == "uncased",
                      run_record.RunRecord.of("encoder", task="embeddings", pooling="mean"))
  else:
    presets.save(path, encoder, ob.Preprocessor(vocab, lower_case=case == "uncased"))
  return path


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
  """`tiny_model_folder`, built once: each test that edits a folder copies it
  (`_tiny_copy`)."""
  return tiny_model_folder(tmp_path_factory.mktemp("tiny") / "model")


def _tiny_copy(tiny_folder, path):
  shutil.copytree(tiny_folder, path)
  return str(path)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
  root = tmp_path_factory.mktemp("folders")
  return {(kind, case): make_folder(root, kind, case) for kind in KINDS
          for case in ("cased", "uncased")}


def test_every_route_reads_one_case_from_every_kind_of_folder(folders):
  for (kind, case), path in folders.items():
    expected = case == "uncased"
    files = sorted(os.listdir(path))
    assert ("tokenizer_config.json" in files) == (kind in ("output_dir", "api_saved")), files
    api = ob.Preprocessor.from_preset(path).lower_case
    extract = feature_extraction.embedder_settings(
        feature_extraction.ExtractSettings(init_checkpoint=path, input_file="x",
                                           output_file="y"), given=set()).do_lower_case
    assert (api, extract) == (expected,) * 2, (kind, case)
    # The export reads the folder with `model_folder.read` itself.
    assert model_folder.read(path).do_lower_case is expected


def test_a_flag_that_contradicts_the_folder_is_refused_unless_allowed(folders):
  cased = folders["hf", "cased"]
  with pytest.raises(ValueError, match="vocabulary .* is cased"):
    model_folder.read(cased, do_lower_case=True)
  assert model_folder.read(cased, do_lower_case=True, allow_case_mismatch=True).do_lower_case
  with pytest.raises(ValueError, match="says do_lower_case=False"):
    model_folder.read(folders["api_saved", "cased"], do_lower_case=True)
  # The Python API's argument is the same override, named as the API names it.
  with pytest.raises(ValueError, match=r"lower_case=True but the vocabulary .* is cased.*"
                                       r"pass lower_case=False \(or pass allow_case_mismatch"):
    ob.Preprocessor.from_preset(cased, lower_case=True)
  with pytest.raises(ValueError, match="lower_case=True but .* says do_lower_case=False"):
    ob.TextEmbedder.from_preset(folders["api_saved", "cased"], lower_case=True)
  assert ob.Preprocessor.from_preset(cased, lower_case=True,
                                     allow_case_mismatch=True).lower_case is True
  assert ob.Preprocessor.from_preset(cased, lower_case=False).lower_case is False
  embedder = ob.TextEmbedder.from_preset(folders["hf", "uncased"], lower_case=True)
  assert embedder.preprocessor.lower_case is True
  # extract_features' flag is checked the same way.
  settings = feature_extraction.ExtractSettings(init_checkpoint=cased, input_file="x",
                                                output_file="y", do_lower_case=True)
  with pytest.raises(ValueError, match="is cased"):
    feature_extraction.embedder_settings(settings, given={"do_lower_case"})


def test_a_tokenizer_config_outranks_its_vocabulary_with_a_warning(folders, tmp_path, caplog):
  """A folder whose tokenizer_config.json says to lower-case a cased vocabulary: the file is
  followed (the policy's order), a warning names both, and a flag that agrees with the file
  is taken; one that agrees with the vocabulary needs --allow_case_mismatch."""
  path = tmp_path / "declared_lower"
  shutil.copytree(folders["hf", "cased"], path)
  (path / model_files.TOKENIZER_CONFIG_FILE).write_text(json.dumps({"do_lower_case": True}))
  with caplog.at_level(logging.WARNING):
    assert model_folder.read(str(path)).do_lower_case is True
  assert "says do_lower_case=True but the vocabulary" in caplog.text and "is cased" in caplog.text
  assert "pass --do_lower_case=False --allow_case_mismatch)" in caplog.text
  caplog.clear()
  with caplog.at_level(logging.WARNING):  # the API's warning names the API's arguments
    ob.Preprocessor.from_preset(str(path))
  assert "pass lower_case=False, allow_case_mismatch=True)" in caplog.text
  caplog.clear()
  with caplog.at_level(logging.WARNING):
    assert model_folder.read(str(path), do_lower_case=True).do_lower_case is True
  assert "says do_lower_case" not in caplog.text  # an explicit case: nothing to warn of
  with pytest.raises(ValueError, match="says do_lower_case=True"):
    model_folder.read(str(path), do_lower_case=False)
  assert ob.Preprocessor.from_preset(str(path)).lower_case is True
  # The file outranks its own vocabulary only: another one given is checked.
  other = tmp_path / "cased_vocab.txt"
  shutil.copy(VOCABS["cased"], other)
  with pytest.raises(ValueError, match="is cased"):
    model_folder.read(str(path), vocab_file=str(other), do_lower_case=True)


def test_the_default_sequence_length_fits_a_small_model(folders):
  """128 (384 for a question answerer) by default, but never more positions than the model
  has: a folder of a 32-position model loads with no argument."""
  path = folders["hf", "uncased"]
  assert CONFIG.max_position_embeddings == 32
  assert ob.Preprocessor.from_preset(path).sequence_length == 32
  embedder = ob.TextEmbedder.from_preset(path)
  assert embedder.preprocessor.sequence_length == 32
  assert np.asarray(embedder.encode(["a sentence longer than thirty-two pieces " * 8])).shape \
      == (1, CONFIG.hidden_size)
  # The commands' default (128) fits it too, unless a flag or the run record says.
  flag_values = dict(dict.fromkeys(exporter.FROM_RUN_SETTINGS), max_seq_length=128)
  for kind in KINDS:
    folder = model_folder.read(folders[kind, "uncased"])
    value, _ = exporter.trained_settings(folder, "encoder", flag_values, given=set())
    assert value["max_seq_length"] == 32, kind
    value, _ = exporter.trained_settings(folder, "encoder", dict(flag_values, max_seq_length=8),
                                         given={"max_seq_length"})
    assert value["max_seq_length"] == 8
    extract = feature_extraction.ExtractSettings(init_checkpoint=folders[kind, "uncased"],
                                                 input_file="x", output_file="y")
    assert feature_extraction.embedder_settings(extract, given=set()).max_seq_length == 32


def test_from_preset_names_a_config_it_cannot_build_as_such(folders, tmp_path):
  """A Hugging Face config of another position embedding type was a FileNotFoundError (every
  error of the reader was taken for a missing file)."""
  folder = tmp_path / "relative"
  shutil.copytree(folders["hf", "uncased"], folder)
  config = json.loads((folder / "config.json").read_text())
  (folder / "config.json").write_text(json.dumps(dict(config,
                                                      position_embedding_type="relative_key")))
  with pytest.raises(ValueError, match="relative_key") as raised:
    ob.TextEmbedder.from_preset(str(folder))
  assert not isinstance(raised.value, FileNotFoundError)
  (folder / "vocab.txt").unlink()
  (folder / "config.json").write_text(json.dumps(config))
  with pytest.raises(FileNotFoundError, match="a vocabulary is required"):
    ob.TextEmbedder.from_preset(str(folder))


def test_an_embedder_of_a_sentence_transformers_folder_takes_its_length(tiny_folder, tmp_path):
  """all-MiniLM-L6-v2 embeds at 256 (sentence_bert_config.json); the API, the export and
  extract_features cut its texts at 128 (cosine 0.976 with sentence-transformers' vector of a
  200-piece text). An embedder takes the folder's length on every route; the other tasks
  keep theirs; an argument or flag wins."""
  path = _tiny_copy(tiny_folder, tmp_path / "st")
  (tmp_path / "st" / model_folder.SENTENCE_TRANSFORMERS_CONFIG).write_text(
      json.dumps({"max_seq_length": 64, "do_lower_case": False}))
  assert model_folder.embedding_sequence_length(path) == 64
  assert ob.TextEmbedder.from_preset(path).preprocessor.sequence_length == 64
  assert ob.TextEmbedder.from_preset(path, sequence_length=16).preprocessor.sequence_length == 16
  assert ob.TextClassifier.from_preset(path, num_classes=2).preprocessor.sequence_length == 128
  flag_values = dict(dict.fromkeys(exporter.FROM_RUN_SETTINGS), max_seq_length=128)
  folder = model_folder.read(path)
  assert exporter.trained_settings(folder, "encoder", flag_values, set())[0][
      "max_seq_length"] == 64
  assert exporter.trained_settings(folder, "classifier", dict(flag_values, num_labels=2),
                                   set())[0]["max_seq_length"] == 128
  extract = feature_extraction.ExtractSettings(init_checkpoint=path, input_file="x",
                                               output_file="y")
  assert feature_extraction.embedder_settings(extract, given=set()).max_seq_length == 64
  # Within the model's positions; a file it cannot read leaves the default.
  settings_file = tmp_path / "st" / model_folder.SENTENCE_TRANSFORMERS_CONFIG
  settings_file.write_text('{"max_seq_length": 512}')
  assert model_folder.embedding_sequence_length(path, folder.config) == 128
  settings_file.write_text("not json")
  assert model_folder.embedding_sequence_length(path) is None


def test_a_fine_tuning_command_fits_a_small_model_without_a_flag(folders, tmp_path):
  """run_classifier from a 32-position model, no --max_seq_length: its default 128 would not
  fit; it trains at 32. A flag given, or a run record's length, is kept."""
  flags = collections.defaultdict(lambda: types.SimpleNamespace(present=False))
  settings = classifier_job.ClassifierSettings(init_checkpoint=folders["hf", "uncased"],
                                               output_dir=str(tmp_path / "out"))
  assert settings.max_seq_length == 128
  assert finetuning_runner.inherit_run_settings(settings, flags).max_seq_length == 32
  given = dataclasses.replace(settings, max_seq_length=16)
  flags["max_seq_length"] = types.SimpleNamespace(present=True)
  assert finetuning_runner.inherit_run_settings(given, flags).max_seq_length == 16


@pytest.mark.parametrize("case", ["cased", "uncased"])
@pytest.mark.parametrize("kind", KINDS)
def test_every_route_gives_the_same_tokens_and_vectors(folders, kind, case, tmp_path):
  """`from_preset`, `export --checkpoint` and `extract_features` (no case or length flag:
  each route's default length fits the 32-position model) tokenize a folder of each kind
  alike and give the same vectors (1e-5)."""
  path = folders[kind, case]
  texts = ["Hello World", "hello world"]
  embedder = ob.TextEmbedder.from_preset(path, pooling="mean", normalize=True)
  api = embedder.encode(texts)
  if case == "cased":
    assert np.abs(api[0] - api[1]).max() > 1e-3  # the two texts differ
  else:
    np.testing.assert_allclose(api[0], api[1], atol=1e-6)  # lower-cased alike

  export_dir = tmp_path / "export"
  proc = run_command("official_bert.export", f"--checkpoint={path}", "--model_type=encoder",
                     f"--export_dir={export_dir}", "--normalize_embeddings")
  assert proc.returncode == 0, proc.stderr
  served = tf.saved_model.load(str(export_dir)).signatures["serving_default"](
      text=tf.constant(texts))
  np.testing.assert_allclose(served["sentence_embedding"].numpy(), api, atol=1e-5)

  (tmp_path / "texts.txt").write_text("\n".join(texts) + "\n")
  for pooling, out in (("mean", "vectors.jsonl"), ("none", "tokens.jsonl")):
    proc = run_command("official_bert.extract_features", f"--init_checkpoint={path}",
                       f"--input_file={tmp_path / 'texts.txt'}",
                       f"--output_file={tmp_path / out}", f"--pooling={pooling}", "--layers=-1",
                       *(["--normalize_embeddings"] if pooling == "mean" else []))
    assert proc.returncode == 0, proc.stderr
  lines = [json.loads(line) for line in (tmp_path / "vectors.jsonl").read_text().splitlines()]
  np.testing.assert_allclose([line["embedding"] for line in lines], api, atol=1e-5)
  lines = [json.loads(line) for line in (tmp_path / "tokens.jsonl").read_text().splitlines()]
  tokens = [[f["token"] for f in line["features"]] for line in lines]
  first = ["Hello", "World"] if case == "cased" else ["hello", "world"]
  assert tokens == [["[CLS]"] + first + ["[SEP]"], ["[CLS]", "hello", "world", "[SEP]"]]


def test_the_run_record_round_trips_and_reads_version_1():
  record = run_record.RunRecord.of("classifier", task="SST-2", max_seq_length=64,
                                   labels=["0", "1"], num_labels=2,
                                   problem_type="single_label", text_pairs=False)
  assert record.classifier.problem_type == "single_label" and record.part is record.classifier
  again = run_record.RunRecord.from_json(record.to_json())
  assert again == record and json.loads(record.to_json())["version"] == run_record.VERSION
  # Version 1 (before the type): one flat object; its fields find their part.
  old = {"task": "SQuAD", "model_type": "squad", "doc_stride": 128, "n_best_size": 20,
         "max_seq_length": 384, "do_lower_case": True}
  read = run_record.RunRecord.from_json(json.dumps(old))
  assert read.squad.doc_stride == 128 and read.max_seq_length == 384
  assert read.values() == old
  with pytest.raises(ValueError, match="no field \\['pooling'\\]"):
    run_record.RunRecord.of("classifier", pooling="mean")
  with pytest.raises(ValueError, match="run_settings.json: not valid JSON"):
    run_record.RunRecord.from_json("{", source="run_settings.json")


@pytest.mark.parametrize("edit,message", [
    ({"do_lower_case": "false"}, 'do_lower_case should be true or false, got "false"'),
    ({"labels": "neg,pos"}, 'labels should be a list, got "neg,pos"'),
    ({"labels": [["neg"], ["pos"]]}, "labels should be a list of label names"),
    ({"max_seq_length": "64"}, 'max_seq_length should be a whole number, got "64"'),
    ({"classifier": "single_label"}, "classifier should be a JSON object"),
    ({"classifier": {"text_pairs": "yes"}}, 'classifier.text_pairs should be true or false'),
    ({"version": 99}, "version 99, written by a newer official-bert"),
    ({"labels": [0, 1]}, "labels should be a list of label names (strings"),
    ({"model_type": ["classifier"]}, 'model_type should be a string, got ["classifier"]'),
    ({"version": "two"}, 'version should be a whole number from 1, got "two"'),
    ({"distillation": {"teacher_layers": 3}}, "distillation.teacher_layers should be a list"),
])
def test_a_hand_edited_record_of_the_wrong_type_is_refused_naming_the_file(tiny_folder, tmp_path,
                                                                           edit, message):
  """A string "false" would read as true (lower-casing a cased model), "neg,pos" as seven
  labels; a record from a newer version as this one's: each is an error naming the file and
  the field, and a folder with it does not load as something else."""
  record = json.loads(run_record.RunRecord.of(
      "classifier", task="own_files", max_seq_length=32, do_lower_case=False,
      labels=["neg", "pos"], num_labels=2, problem_type="single_label").to_json())
  record.update(edit)
  folder = tmp_path / "model"
  _tiny_copy(tiny_folder, folder)
  (folder / model_files.RUN_SETTINGS_FILE).write_text(json.dumps(record))
  with pytest.raises(ValueError, match=re.escape(message)) as e:
    run_record.RunRecord.from_json(json.dumps(record), source="run_settings.json")
  assert str(e.value).startswith("run_settings.json: ")
  with pytest.raises(ValueError, match=re.escape(message)) as e:
    ob.TextClassifier.from_preset(str(folder))
  assert str(folder / model_files.RUN_SETTINGS_FILE) in str(e.value)
  # A newer version is not damaged: nothing to remove, official-bert to upgrade.
  assert ("remove it to read the folder as a pretrained model" in str(e.value)) is (
      "newer" not in message)


def test_a_damaged_record_or_case_file_is_an_error_not_a_pretrained_folder(tiny_folder, tmp_path):
  folder = tmp_path / "model"
  _tiny_copy(tiny_folder, folder)
  for text in ("{", "", "[1, 2]"):
    (folder / model_files.RUN_SETTINGS_FILE).write_text(text)
    with pytest.raises(ValueError, match=r"run_settings.json: (not valid JSON|expected a JSON)"):
      model_folder.read(str(folder))
  (folder / model_files.RUN_SETTINGS_FILE).unlink()
  for text, problem in (('{"do_lower_case": "false"}',
                         re.escape('do_lower_case should be true or false, got "false"')),
                        ("{", r"not valid JSON \(.+\)"),
                        ("[true]", "expected a JSON object, got list")):
    (folder / model_files.TOKENIZER_CONFIG_FILE).write_text(text)
    with pytest.raises(ValueError, match=re.escape(
        f"{folder / model_files.TOKENIZER_CONFIG_FILE}: ") + problem +
                       re.escape(". Correct it, or remove it")):
      ob.Preprocessor.from_preset(str(folder))


def test_export_takes_the_model_type_from_the_run_record(folders):
  read = {kind: model_folder.read(folders[kind, "cased"]) for kind in ("output_dir", "hf")}
  assert exporter.model_type_of(read["output_dir"], None) == "encoder"
  assert exporter.model_type_of(read["hf"], "encoder") == "encoder"
  with pytest.raises(ValueError, match="--model_type is required: .* no run record"):
    exporter.model_type_of(read["hf"], None)
  # A trained head exported as another kind: "trained for another set of labels" at best.
  classifier = dataclasses.replace(read["output_dir"],
                                   record=run_record.RunRecord.of("classifier"))
  assert exporter.model_type_of(classifier, "encoder") == "encoder"
  assert exporter.model_type_of(classifier, "classifier") == "classifier"
  with pytest.raises(ValueError, match=r"--model_type=tagger but --checkpoint=.* was trained "
                     r"as a classifier \(its run_settings.json\)"):
    exporter.model_type_of(classifier, "tagger")
  # --label_names renames the trained labels; the same names in another order are refused.
  labelled = dataclasses.replace(classifier, labels=["neg", "pos"])
  flag_values = dict(dict.fromkeys(exporter.FROM_RUN_SETTINGS), max_seq_length=16)
  value, _ = exporter.trained_settings(labelled, "classifier",
                                       dict(flag_values, label_names=["bad", "good"]),
                                       given={"label_names"})
  assert value["label_names"] == ["bad", "good"]
  with pytest.raises(ValueError, match=r"--label_names=pos,neg: .* trained with these labels "
                     r"in another order, \['neg', 'pos'\]"):
    exporter.trained_settings(labelled, "classifier",
                              dict(flag_values, label_names=["pos", "neg"]),
                              given={"label_names"})


def test_a_folder_with_only_tokenizer_json_says_what_to_save(folders, tmp_path):
  path = tmp_path / "fast_tokenizer_only"
  shutil.copytree(folders["hf", "uncased"], path)
  os.remove(path / "vocab.txt")
  (path / "tokenizer.json").write_text("{}")
  with pytest.raises(ValueError, match=r"no vocab.txt beside it \(its tokenizer.json is not "
                                       r"read: .*save_vocabulary"):
    model_folder.read(str(path))
  with pytest.raises(FileNotFoundError, match="^a vocabulary is required: from_preset"):
    ob.Preprocessor.from_preset(str(path))  # the API's message names no flag

