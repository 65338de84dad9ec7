"""data_prep.vocab.extend (and the extend_vocab command): a corpus's frequent split words into
the [unusedN] slots."""

import string
import subprocess
import sys

from conftest import REPO
import pytest

from data_prep import tokenization
from data_prep.vocab import extend

pytestmark = pytest.mark.large  # trains or runs commands: `make test`, not `make test-fast`

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ["the", "a", "patient", "was", "seen", "for", "##s", ".", ","]
LETTERS = list(string.ascii_lowercase) + ["##" + c for c in string.ascii_lowercase]
# [unused] slots sit between the special tokens and the words, as in BERT's own vocabularies.
VOCAB = SPECIAL + [f"[unused{i}]" for i in range(4)] + WORDS + LETTERS

# gastroenterology 5x, endoscopy 3x, patients 2x, colonoscopy 1x (below --min_count=2);
# "Endoscopy" appears capitalized once: lower-cased, it is the same word.
CORPUS = """The patient was seen for gastroenterology.
The patient was seen for endoscopy.

Gastroenterology patients. Gastroenterology patients.
Endoscopy, gastroenterology, endoscopy and gastroenterology.
A colonoscopy.
"""


def _write(path, text):
  path.write_text(text, encoding="utf-8")
  return str(path)


@pytest.fixture()
def files(tmp_path):
  return (_write(tmp_path / "vocab.txt", "".join(t + "\n" for t in VOCAB)),
          _write(tmp_path / "corpus.txt", CORPUS))


def test_frequent_split_words_fill_the_unused_slots_in_order(files):
  vocab_file, corpus_file = files
  lines, result = extend.extend_vocab(vocab_file, corpus_file, 3, min_count=2)
  new = [line.decode("utf-8").rstrip("\n") for line in lines]
  # Most frequent first (lower-cased); "patients" is patient ##s, the others letters.
  assert result.new_words == [("gastroenterology", 5, 16), ("endoscopy", 3, 9),
                              ("patients", 2, 2)]
  assert new[5:9] == ["gastroenterology", "endoscopy", "patients", "[unused3]"]
  # Line count and every other line unchanged: a released checkpoint's ids still hold.
  assert len(new) == len(VOCAB)
  assert new[:5] == VOCAB[:5] and new[8:] == VOCAB[8:]
  assert result.slots == [5, 6, 7]


def test_tokenizer_uses_the_new_entries_and_tokens_shrink(files, tmp_path):
  vocab_file, corpus_file = files
  lines, result = extend.extend_vocab(vocab_file, corpus_file, 3, min_count=2)
  out = tmp_path / "new_vocab.txt"
  out.write_bytes(b"".join(lines))
  old_tok = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
  new_tok = tokenization.FullTokenizer(str(out), do_lower_case=True)
  text = "Gastroenterology patients, endoscopy and colonoscopy."
  assert old_tok.tokenize(text)[:3] == ["g", "##a", "##s"]
  # Greedy longest match picks the whole-word entry over its pieces.
  assert new_tok.tokenize(text)[:6] == ["gastroenterology", "patients", ",", "endoscopy",
                                        "a", "##n"]
  assert new_tok.convert_tokens_to_ids(["gastroenterology"]) == [5]
  # The report is the corpus's real token counts with either vocabulary.
  text_lines = [t for t in CORPUS.splitlines() if t.strip()]
  before = sum(len(old_tok.tokenize(t)) for t in text_lines)
  after = sum(len(new_tok.tokenize(t)) for t in text_lines)
  assert (result.tokens_before, result.tokens_after) == (before, after)
  assert after < before
  assert result.ratio == pytest.approx(after / before)


def test_fewer_candidates_fill_fewer_slots(files):
  vocab_file, corpus_file = files
  _, result = extend.extend_vocab(vocab_file, corpus_file, 4, min_count=2)
  assert len(result.new_words) == 3 and result.slots == [5, 6, 7]
  lines, result = extend.extend_vocab(vocab_file, corpus_file, 4, min_count=4)
  assert [w for w, _, _ in result.new_words] == ["gastroenterology"]
  assert [line.decode("utf-8").rstrip("\n") for line in lines][5:7] == ["gastroenterology",
                                                                        "[unused1]"]
  # min_count=1: words seen once qualify too; ties by word ("and" before "colonoscopy").
  _, result = extend.extend_vocab(vocab_file, corpus_file, 4, min_count=1)
  assert [w for w, _, _ in result.new_words][3] == "and"


def test_cased_vocabulary_keeps_case(tmp_path):
  vocab = SPECIAL + ["[unused0]"] + LETTERS + ["G", "##G", "E", "##E"]
  vocab_file = _write(tmp_path / "vocab.txt", "".join(t + "\n" for t in vocab))
  corpus_file = _write(tmp_path / "corpus.txt", "Gastro gastro Gastro\n")
  lines, _ = extend.extend_vocab(vocab_file, corpus_file, 1, do_lower_case=False)
  assert lines[5] == b"Gastro\n"


def test_too_few_unused_slots_is_an_error(files):
  vocab_file, corpus_file = files
  with pytest.raises(ValueError, match=r"has 4 \[unusedN\] entries, fewer than "
                                       r"--num_new_tokens=5"):
    extend.extend_vocab(vocab_file, corpus_file, 5)


def test_cli_writes_the_vocab_and_reports_errors(files, tmp_path):
  vocab_file, corpus_file = files
  out = tmp_path / "sub" / "out_vocab.txt"
  cmd = [sys.executable, "-m", "data_prep.extend_vocab", f"--vocab_file={vocab_file}",
         f"--input_file={corpus_file}", "--num_new_tokens=2", f"--output_file={out}"]
  proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert out.read_text(encoding="utf-8").splitlines()[5:8] == ["gastroenterology",
                                                               "endoscopy", "[unused2]"]
  assert "WordPiece tokens before" in proc.stderr
  assert not list(out.parent.glob(".*tmp*"))  # written under a temporary name, renamed
  proc = subprocess.run(cmd[:-2] + ["--num_new_tokens=9", f"--output_file={out}"], cwd=REPO,
                        capture_output=True, text=True, timeout=300)
  assert proc.returncode == 1
  assert "fewer than --num_new_tokens=9" in proc.stderr and "Traceback" not in proc.stderr
