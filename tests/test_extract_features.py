"""extract_features: JSON lines in the original's structure, values equal to the encoder's
layer outputs; the .npz output with a weighted sum of layers."""

import json
import subprocess
import sys

from conftest import REPO
from conftest import UNCASED_VOCAB
from conftest import need
from conftest import run_command
import keras
import numpy as np
import pytest

from data_prep.classification import features as classifier_features
from official_bert.interop import checkpointing
from official_bert.interop import model_files
from official_bert.modeling.bert_config import BertConfig
from official_bert.modeling.encoder import BertEncoder

pytestmark = pytest.mark.large  # trains or runs commands: `make test`, not `make test-fast`

CONFIG = BertConfig(vocab_size=30522, hidden_size=16, num_hidden_layers=3, num_attention_heads=2,
                    intermediate_size=32, max_position_embeddings=32, type_vocab_size=2)
LINES = ["Hello world!", "The unaffable man ||| sat down.", ""]


def _extract(tmp_path, checkpoint, output, *flags, process=False):
  """The command as `python -m` with `process`, else in this process (`run_command`)."""
  args = [f"--input_file={tmp_path / 'in.txt'}", f"--output_file={output}",
          f"--vocab_file={UNCASED_VOCAB}", f"--bert_config_file={tmp_path / 'config.json'}",
          f"--init_checkpoint={checkpoint}", "--max_seq_length=12", "--batch_size=2"] + list(flags)
  if process:
    proc = subprocess.run([sys.executable, "-m", "official_bert.extract_features"] + args,
                          cwd=REPO, capture_output=True, text=True, timeout=300)
  else:
    proc = run_command("official_bert.extract_features", *args)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return proc


def test_json_lines_and_npz_equal_the_encoder_layers(tmp_path):
  need(UNCASED_VOCAB)
  (tmp_path / "in.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")
  model_files.write_config_file(str(tmp_path / "config.json"), CONFIG)
  keras.utils.set_random_seed(3)
  encoder = BertEncoder.from_bert_config(CONFIG)
  encoder.build()
  checkpoint = checkpointing.model_checkpoint(encoder).write(str(tmp_path / "ckpt" / "model"))
  _extract(tmp_path, checkpoint, tmp_path / "out.jsonl", "--layers=-1,0", process=True)
  _extract(tmp_path, checkpoint, tmp_path / "out.npz", "--layers=-1,-2", "--pooling=sum",
           "--layer_weights=0.5,2")

  tokenizer = classifier_features.cached_tokenizer(UNCASED_VOCAB, True)
  records = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
  assert [r["linex_index"] for r in records] == [0, 1, 2]
  tokens = [[f["token"] for f in r["features"]] for r in records]
  assert tokens[0] == ["[CLS]", "hello", "world", "!", "[SEP]"]
  assert tokens[1] == ["[CLS]", "the", "una", "##ffa", "##ble", "man", "[SEP]", "sat", "down",
                       ".", "[SEP]"]
  assert tokens[2] == ["[CLS]", "[SEP]"]
  assert [layer["index"] for layer in records[1]["features"][0]["layers"]] == [-1, 0]

  for i, r in enumerate(records):
    ids = tokenizer.convert_tokens_to_ids(tokens[i])
    segments = np.cumsum([0] + [t == "[SEP]" for t in tokens[i][:-1]]).clip(0, 1)
    outputs = encoder({"input_word_ids": np.array([ids], np.int32),
                       "input_mask": np.ones([1, len(ids)], np.int32),
                       "input_type_ids": segments[None].astype(np.int32)})["encoder_outputs"]
    got = np.array([[layer["values"] for layer in f["layers"]] for f in r["features"]])
    expected = np.stack([np.asarray(outputs[-1])[0], np.asarray(outputs[0])[0]], axis=1)
    np.testing.assert_allclose(got, expected, atol=2e-5)  # JSON rounds to 6 decimals

  arrays = np.load(tmp_path / "out.npz")
  assert arrays["values"].shape == (3, 12, 1, 16)
  assert arrays["layers"].tolist() == [-1, -2]
  assert arrays["tokens"][0].tolist()[:5] == tokens[0] and arrays["input_mask"][0].sum() == 5
  ids = arrays["input_ids"][:1].astype(np.int32)
  mask = arrays["input_mask"][:1].astype(np.int32)
  outputs = encoder({"input_word_ids": ids, "input_mask": mask,
                     "input_type_ids": np.zeros_like(ids)})["encoder_outputs"]
  expected = 0.5 * np.asarray(outputs[-1]) + 2 * np.asarray(outputs[-2])
  np.testing.assert_allclose(arrays["values"][:1, :5, 0], expected[:, :5], atol=1e-5)
  # No --layers: the original's last four, within this 3-layer model's layers (not an error);
  # the original's TPU flags are accepted ("Unknown command line flag" before), and said unused.
  proc = _extract(tmp_path, checkpoint, tmp_path / "default.npz", "--use_tpu=False",
                  "--use_one_hot_embeddings=True", "--master=grpc://10.0.0.2:8470",
                  "--num_tpu_cores=8")
  assert np.load(tmp_path / "default.npz")["layers"].tolist() == [-1, -2, -3]
  assert ("--use_one_hot_embeddings=True: google-research/bert's flag, not used here" in
          proc.stderr and "--master=grpc://10.0.0.2:8470" in proc.stderr), proc.stderr[-2000:]
  assert "--num_tpu_cores" not in proc.stderr  # its default: nothing to say
