"""run_ner on the user's own files: any tag scheme (BIOES here), a file to predict without
tags, a Chinese character-per-line file; bad files; and the entity rules against a
transcription of conlleval.pl for every scheme."""

import os
import random

from conftest import CHINESE_VOCAB
from conftest import CONLL_DATA
from conftest import UNCASED_VOCAB
from conftest import need
from conftest import run_command
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the exported tokenizer's ops)
from test_glue_run_classifier import read_results
from test_glue_run_classifier import run_script

from data_prep.tagging import conll
from official_bert.tasks import metrics
from official_bert.tasks import ner_job

pytestmark = pytest.mark.large  # trains or runs commands: `make test`, not `make test-fast`


def _write(path, sentences, columns=True):
  with open(path, "w", encoding="utf-8") as f:
    for s in sentences:
      for i, word in enumerate(s.words):
        f.write(f"{word}\tNN\t{s.tags[i]}\n" if columns else f"{word}\n")
      f.write("\n")
  return str(path)


def _bioes_files(tmp_path):
  source = conll.read_conll(need(os.path.join(CONLL_DATA, "eng.train")))
  sentences = [conll.Sentence(s.words, conll.iob2_to_bioes(s.tags)) for s in source]
  train = _write(tmp_path / "train.tsv", sentences[:25])
  seen = {t for s in sentences[:25] for t in s.tags}
  dev = [s for s in sentences[25:] if set(s.tags) <= seen]
  assert len(dev) >= 10
  return train, _write(tmp_path / "dev.tsv", dev), _write(tmp_path / "test.txt", dev, False), dev


def test_bioes_files_train_evaluate_and_predict_untagged(tmp_path):
  train, dev, test, dev_sentences = _bioes_files(tmp_path)
  out = tmp_path / "out"
  run_script("official_bert.run_ner", tmp_path, f"--train_file={train}", f"--dev_file={dev}",
             f"--test_file={test}", "--tag_column=2", f"--output_dir={out}", "--do_train",
             "--do_eval", "--do_predict", "--learning_rate=1e-3")
  labels = (out / "labels.txt").read_text().split()
  assert labels[0] == "O" and labels[1:] == sorted(labels[1:])
  assert {t[:2] for t in labels[1:]} <= {"B-", "I-", "E-", "S-"} and "S-PER" in labels
  assert {"entity_f1", "entity_precision", "entity_recall"} <= set(
      read_results(out / "eval_results.txt"))
  rows = [line.split() for line in (out / "test_predictions.txt").read_text().splitlines()]
  words = [w for s in dev_sentences for w in s.words]
  assert [r[0] for r in rows if r] == words
  assert all(len(r) == 2 and r[1] in labels for r in rows if r)  # `word predicted`
  # Untagged: predicted, not scored (no test_results.txt, no TensorBoard test/ folder).
  assert not (out / "test_results.txt").exists() and not (out / "test").exists()
  # --do_predict alone later: the tag set comes from OUTPUT_DIR/labels.txt.
  (out / "test_predictions.txt").unlink()
  run_script("official_bert.run_ner", tmp_path, f"--test_file={test}", f"--output_dir={out}",
             "--do_predict")
  assert [line.split()[0] for line in (out / "test_predictions.txt").read_text().splitlines()
          if line] == words
  # The trained folder as --init_checkpoint of an evaluation into a new --output_dir: read as
  # it was trained (its --max_seq_length=32, not the default 128: other windows, other scores).
  proc = run_command("official_bert.run_ner", f"--init_checkpoint={out}", f"--dev_file={dev}",
                     "--tag_column=2", f"--output_dir={tmp_path / 'evaluated'}", "--do_eval")
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert f"From {out / 'run_settings.json'}: --max_seq_length=32" in proc.stderr
  scores = [{k: v for k, v in read_results(folder / "eval_results.txt").items()
             if k != "global_step"} for folder in (tmp_path / "evaluated", out)]
  assert scores[0] == scores[1] and "entity_f1" in scores[0]


def test_chinese_characters_each_get_a_prediction(tmp_path):
  chars = "中国东丰三上下不与专"
  sentences = [conll.Sentence(list(chars[i:i + 5]), ["B-LOC", "I-LOC", "O", "O", "B-PER"])
               for i in range(0, 10, 5)] * 8
  train = _write(tmp_path / "train.txt", sentences)
  out = tmp_path / "out"
  run_script("official_bert.run_ner", tmp_path, f"--train_file={train}", f"--test_file={train}",
             "--tag_column=2", f"--vocab_file={need(CHINESE_VOCAB)}", f"--output_dir={out}",
             "--do_train", "--do_predict")
  rows = [line.split() for line in (out / "test_predictions.txt").read_text().splitlines()
          if line]
  assert [r[0] for r in rows] == [c for s in sentences for c in s.words]
  # `char gold predicted` (the test file has tags): every character gets a prediction.
  assert [r[1] for r in rows] == [t for s in sentences for t in s.tags]
  labels = (out / "labels.txt").read_text().split()
  assert all(len(r) == 3 and r[2] in labels for r in rows)
  # export from OUTPUT_DIR alone: its vocab.txt (Chinese), case setting, length and tag names.
  export_dir = tmp_path / "export"
  proc = run_command("official_bert.export", f"--checkpoint={out}", "--model_type=tagger",
                     f"--export_dir={export_dir}")
  assert proc.returncode == 0, proc.stderr[-3000:]
  served = tf.saved_model.load(str(export_dir)).signatures["serving_default"](
      text=tf.constant(["".join(s.words) for s in sentences[:2]]))
  got = served["predicted_labels"].numpy()[:, 1:6]  # after [CLS]: one character per piece
  assert [[t.decode() for t in row] for row in got] == [[r[2] for r in rows[:5]],
                                                       [r[2] for r in rows[5:10]]]


def test_bad_own_files(tmp_path):
  train, dev, _, _ = _bioes_files(tmp_path)
  bad_dev = tmp_path / "bad_dev.tsv"
  bad_dev.write_text(open(dev, encoding="utf-8").read() + "Foo\tNN\tB-NEW\n", encoding="utf-8")
  ragged = tmp_path / "ragged.tsv"
  ragged.write_text("EU\tNN\tS-ORG\nrejects\tO\n", encoding="utf-8")
  empty = tmp_path / "empty.tsv"
  empty.write_text("\n\n", encoding="utf-8")
  lines = len(open(dev, encoding="utf-8").read().splitlines()) + 1
  for flags, words in (([f"--dev_file={bad_dev}", "--do_eval"],
                        f"bad_dev.tsv:{lines}: unknown tag 'B-NEW'"),
                       ([f"--dev_file={ragged}", "--do_eval"],
                        "ragged.tsv:2: 2 columns where the file's first line has 3"),
                       ([f"--dev_file={empty}", "--do_eval"], "empty.tsv: no sentences")):
    proc = run_script("official_bert.run_ner", tmp_path, f"--train_file={train}",
                      "--tag_column=2", f"--output_dir={tmp_path / 'o'}", "--do_train", *flags,
                      check=False)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert words in proc.stderr, proc.stderr[-2000:]


def conlleval_counts(gold, guessed):
  """(correct, gold, guessed) chunk counts, transcribed from conlleval.pl's main loop
  (startOfChunk/endOfChunk and the `inCorrect` state), token by token."""

  def split(tag):
    if tag == "O":
      return "O", ""
    prefix, _, kind = tag.partition("-")
    if prefix in "BIESLU" and kind and len(prefix) == 1:
      return {"L": "E", "U": "S"}.get(prefix, prefix), kind
    return "I", tag

  def end_of_chunk(prev, tag, prev_type, kind):
    end = False
    if prev == "B" and tag in ("B", "S", "O"):
      end = True
    if prev == "I" and tag in ("B", "S", "O"):
      end = True
    if prev in ("E", "S"):
      end = True
    if prev != "O" and prev != "." and prev_type != kind:
      end = True
    return end

  def start_of_chunk(prev, tag, prev_type, kind):
    start = tag in ("B", "S")
    if prev in ("E", "S", "O") and tag in ("E", "I"):
      start = True
    if tag != "O" and tag != "." and prev_type != kind:
      start = True
    return start

  correct = found_gold = found_guessed = 0
  in_correct = False
  last_gold, last_guessed, last_gold_type, last_guessed_type = "O", "O", "", ""
  for g_tag, p_tag in list(zip(gold, guessed)) + [("O", "O")]:
    g, g_type = split(g_tag)
    p, p_type = split(p_tag)
    if in_correct:
      g_end = end_of_chunk(last_gold, g, last_gold_type, g_type)
      p_end = end_of_chunk(last_guessed, p, last_guessed_type, p_type)
      if g_end and p_end and last_guessed_type == last_gold_type:
        in_correct = False
        correct += 1
      elif g_end != p_end or g_type != p_type:
        in_correct = False
    g_start = start_of_chunk(last_gold, g, last_gold_type, g_type)
    p_start = start_of_chunk(last_guessed, p, last_guessed_type, p_type)
    if g_start and p_start and g_type == p_type:
      in_correct = True
    found_gold += g_start
    found_guessed += p_start
    last_gold, last_guessed, last_gold_type, last_guessed_type = g, p, g_type, p_type
  return correct, found_gold, found_guessed


def test_entity_rules_equal_conlleval_for_every_scheme():
  rng = random.Random(0)
  schemes = {"IOB2": ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"],
             "IO": ["O", "I-PER", "I-LOC"], "BIOES": ["O", "B-PER", "I-PER", "E-PER", "S-PER",
                                                      "B-LOC", "E-LOC", "S-LOC"],
             "BILOU": ["O", "B-X", "I-X", "L-X", "U-X", "U-Y"], "plain": ["O", "PER", "LOC"]}
  for name, tags in schemes.items():
    for _ in range(300):
      n = rng.randint(1, 12)
      gold = [rng.choice(tags) for _ in range(n)]
      guess = [rng.choice(tags) for _ in range(n)]
      want = conlleval_counts(gold, guess)
      g, p = metrics.entities(gold), metrics.entities(guess)
      assert (len(g & p), len(g), len(p)) == want, (name, gold, guess)


def test_records_are_written_again_when_the_file_changes(tmp_path):
  """NER's cached records are keyed on the file itself (`features.source_key`, as every job's
  records from a user's file): an edit that keeps the number of sentences is seen."""
  train = tmp_path / "train.tsv"
  train.write_text("the\tB-X\ncat\tO\n\n", encoding="utf-8")
  settings = ner_job.NerSettings(train_file=str(train), tag_column=1, max_seq_length=8,
                                 output_dir=str(tmp_path / "out"), do_train=True)

  def label_ids():
    job = ner_job.NerJob(settings)
    job.labels = ["O", "B-X"]
    record, count = job._write("train", UNCASED_VOCAB)
    return count, [list(e.features.feature["label_ids"].int64_list.value) for e in map(
        tf.train.Example.FromString, (r.numpy() for r in tf.data.TFRecordDataset(record)))]

  assert label_ids() == (1, [[0, 1, 0, 0, 0, 0, 0, 0]])
  train.write_text("the\tO\ncat\tB-X\n\n", encoding="utf-8")
  os.utime(train, ns=(1, 1))  # even with an older time stamp
  assert label_ids() == (1, [[0, 0, 1, 0, 0, 0, 0, 0]])
