"""CoNLL-2003 reader (IOB1 -> IOB2), NER features (labels on first pieces, windows), the loss."""

import collections
import os

from conftest import CONLL_DATA
from conftest import SHARED_DATA
from conftest import UNCASED_VOCAB
from conftest import need
import numpy as np
import pytest

from data_prep.classification import features as classifier_features
from data_prep.tagging import conll
from data_prep.tagging import features as ner_features
from official_bert.modeling.bert_config import BertConfig
from official_bert.tasks import metrics
from official_bert.tasks.tagging import TaggingTask

CONLL = CONLL_DATA  # the first sentences of each file (tests/data)
REAL_CONLL = os.path.join(SHARED_DATA, "conll2003")
LABELS = list(conll.CONLL2003_LABELS)


def test_iob1_to_iob2_hand_worked():
  assert conll.iob1_to_iob2(["I-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-LOC", "I-ORG"]) == [
      "B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC", "B-ORG"]
  iob2 = ["B-PER", "I-PER", "B-PER", "O", "B-MISC"]
  assert conll.iob1_to_iob2(iob2) == iob2  # IOB2 is left as it is


def _dev_files(folder):
  iob1 = conll.read_conll(need(os.path.join(folder, "eng.testa")))
  iob2 = conll.read_conll(need(os.path.join(folder, "valid.txt")))
  counts = collections.Counter(kind for s in iob1 for kind, _, _ in metrics.entities(s.tags))
  return iob1, iob2, counts


def test_original_iob1_files_equal_the_iob2_copies():
  iob1, iob2, counts = _dev_files(CONLL)  # the first 60 sentences of each
  assert len(iob1) == len(iob2) == 60
  assert iob1 == iob2
  assert counts == {"LOC": 33, "MISC": 8, "ORG": 56, "PER": 40}
  assert sum(len(s.words) for s in iob1) == 890
  assert conll.split_path(CONLL, "dev").endswith("eng.testa")


def test_full_dev_set_has_the_published_counts():
  """Real data: the whole of ../shared's eng.testa and valid.txt."""
  iob1, iob2, counts = _dev_files(REAL_CONLL)
  assert len(iob1) == len(iob2) == 3250
  assert iob1 == iob2
  assert counts == {"LOC": 1837, "MISC": 922, "ORG": 1341, "PER": 1842}  # published counts
  assert sum(len(s.words) for s in iob1) == 51362


def test_bad_lines_name_file_and_line(tmp_path):
  path = tmp_path / "bad.txt"
  path.write_text("-DOCSTART- -X- O O\n\nEU NNP I-NP I-ORG\nrejects VBZ I-VP B-FOO\n")
  with pytest.raises(ValueError, match=r"bad.txt:4: unknown tag 'B-FOO'; known labels: "
                     r"\['O', 'B-PER'"):
    conll.read_conll(str(path))
  path.write_text("EU NNP I-NP I-ORG\nlonely\n")
  with pytest.raises(ValueError, match="bad.txt:2"):
    conll.read_conll(str(path))


@pytest.fixture(scope="module")
def tokenizer():
  return classifier_features.cached_tokenizer(need(UNCASED_VOCAB), True)


def test_labels_on_first_pieces_and_windows(tokenizer):
  sentences = [conll.Sentence(["Unaffable", "EU", "man"], ["B-PER", "I-PER", "O"]),
               conll.Sentence(["a"] * 7, ["O", "B-LOC", "I-LOC", "O", "O", "B-ORG", "O"])]
  cols, windows = ner_features.convert_sentences(sentences, LABELS, 6, tokenizer)
  # "unaffable" -> una ##ffa ##ble: labeled at "una" only.
  assert tokenizer.convert_ids_to_tokens(cols["input_ids"][0].tolist()) == [
      "[CLS]", "una", "##ffa", "##ble", "eu", "[SEP]"]
  assert cols["label_ids"][0].tolist() == [0, 1, 0, 0, 2, 0]
  assert cols["label_weights"][0].tolist() == [0, 1, 0, 0, 1, 0]
  # "man" no longer fits: a second window; 7 one-piece words -> windows of 4, 3.
  assert windows == [(0, 0, 2), (0, 2, 3), (1, 0, 4), (1, 4, 7)]
  assert cols["input_mask"].sum(axis=1).tolist() == [6, 3, 6, 5]
  # Predicting the gold labels gives back every word's tag.
  logits = np.eye(len(LABELS))[cols["label_ids"]]  # [n, seq, labels]
  tags = ner_features.predictions_to_tags(logits, cols["label_weights"], windows, sentences,
                                          LABELS)
  assert tags == [s.tags for s in sentences]


def test_tagging_loss_ignores_unweighted_pieces():
  config = BertConfig(vocab_size=30, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                      intermediate_size=32, max_position_embeddings=16, type_vocab_size=2)
  task = TaggingTask(config, 3, 4)
  logits = np.zeros([1, 4, 3], np.float32)
  logits[0, 1] = [0, 9, 0]  # right, weighted
  logits[0, 2] = [9, 0, 0]  # wrong, but weight 0
  features = {"label_ids": np.array([[0, 1, 2, 0]]),
              "label_weights": np.array([[0, 1, 0, 0]], np.float32)}
  assert float(task.loss_normalizers(features)["tagging_loss"]) == 1.0
  assert float(task.loss_sums(features, {"logits": logits})["tagging_loss"]) < 1e-3
  num, den = task.metric_sums(features, {"logits": logits})["token_accuracy"]
  assert (float(num), float(den)) == (1.0, 1.0)


def test_iob2_to_bioes():
  tags = ["B-PER", "I-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC", "O", "B-ORG", "I-MISC"]
  assert conll.iob2_to_bioes(tags) == ["B-PER", "I-PER", "E-PER", "O", "S-LOC", "B-LOC",
                                       "E-LOC", "O", "S-ORG", "E-MISC"]
  assert conll.iob2_to_bioes([]) == []
