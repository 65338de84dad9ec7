"""Tokenizer parity with the reference FullTokenizer (tf-models-official), ids for ids."""

import random

from conftest import CASED_VOCAB
from conftest import CHINESE_VOCAB
from conftest import REAL_CASED_VOCAB
from conftest import REAL_UNCASED_VOCAB
from conftest import UNCASED_VOCAB
from conftest import corpus_slice
from conftest import need
from conftest import vocab_ids
from official.nlp.tools import tokenization as reference
import pytest
import tensorflow as tf

from data_prep import tokenization

ADVERSARIAL = [
    "", " ", "\t\n\r ", "Héllo Wörld! Ça va? naïve café résumé",
    "İSTANBUL ΟΔΥΣΣΕΥΣ Σ ΣΑ aΣ. Ελληνικά", "Straße ǅemal ﬁne ™ Ａｂｃ！ ＂quoted＂ ｶﾀｶﾅ",
    "中文字符测试，日本語のテキスト、한국어 텍스트 𠀀𪜀", "emoji 😀👍🏽 family 👨‍👩‍👧 flags 🇺🇸🇫🇷 ❤️",
    "ctl\x00a\x01b\x7fc\u200bd\u200ce\u200df\ufeffg\u2060h", "zero\u200bwidth\u200bjoiner",
    "line\u2028sep\u2029para\x85nel\x0bvt\x0cff\x1cfs\u00a0nbsp\u3000ideo",
    "a" * 199, "b" * 200, "c" * 201, "d" * 399 + " " + "é" * 250, "x" * 1000 + "!",
    "Hello[MASK]world [CLS] [SEP] [UNK] [PAD]", "$5.00 @user #tag ^caret `tick` ~tilde |pipe",
    "\ufffdreplacement\ufffd", "combining e\u0301 a\u0308 \u0301alone", "ℌ𝔢𝔩𝔩𝔬 ①②③ ㍿ ﷺ",
    "Kelvin \u212a Angstrom \u212b Ohm \u2126 \u1fef\u037e\u0387", "\ue000private\U000F0000use",
    "unassigned\U000E0001tag", "don't can't won't it's", "unaffable supercalifragilistic",
    "ñandú ÑANDÚ Ångström ÅNGSTRÖM øre Œuvre ǈ ǉ", "Ⱥ ȿ ɐ ſ ẞ ß ﬀ", "12,345.67 3.14e-10 1/2",
]


def _reference(vocab_file, lower, max_chars=200):
  ref = reference.FullTokenizer(vocab_file, do_lower_case=lower)
  # tf-models-official raised the original's 200-character word limit to 400.
  ref.wordpiece_tokenizer.max_input_chars_per_word = max_chars
  return ref


def _ref_ids(ref, texts):
  return [ref.convert_tokens_to_ids(ref.tokenize(t)) for t in texts]


# The vocabulary slices in tests/data (see conftest), and the full vocabularies in ../shared.
CONFIGS = [(UNCASED_VOCAB, True), (UNCASED_VOCAB, False), (CASED_VOCAB, False),
           (CASED_VOCAB, True)]
REAL_CONFIGS = [(REAL_UNCASED_VOCAB, True), (REAL_UNCASED_VOCAB, False),
                (REAL_CASED_VOCAB, False), (REAL_CASED_VOCAB, True)]


@pytest.mark.parametrize("vocab_file,lower", REAL_CONFIGS)
def test_parity_on_real_corpus_slice(vocab_file, lower):
  """Real data: 400 KB of the Gutenberg corpus with the full vocabularies (../shared)."""
  lines = corpus_slice(400_000, start=7_000_000).split("\n")
  ref = _reference(need(vocab_file), lower)
  ours = tokenization.FullTokenizer(vocab_file, do_lower_case=lower)
  expected = _ref_ids(ref, lines)
  got = ours.tokenize_to_ids_batch(lines)
  assert sum(len(x) for x in expected) > 50_000
  mismatches = [(l, e, g) for l, e, g in zip(lines, expected, got) if e != g]
  assert not mismatches, mismatches[:3]


@pytest.mark.parametrize("vocab_file,lower", CONFIGS + [(CHINESE_VOCAB, True)])
def test_parity_on_adversarial_text(vocab_file, lower):
  ref = _reference(need(vocab_file), lower)
  ours = tokenization.FullTokenizer(vocab_file, do_lower_case=lower)
  for text in ADVERSARIAL:
    assert ours.tokenize_to_ids_batch([text])[0] == _ref_ids(ref, [text])[0], repr(text)
    assert ours.tokenize(text) == ref.tokenize(text), repr(text)


@pytest.mark.parametrize("lower", [True, False])
def test_parity_on_every_bmp_character_and_random_mixtures(lower):
  """Each BMP character inside and beside a word, plus random strings from many scripts."""
  texts = [f"a{chr(cp)}b {chr(cp)} {chr(cp)}Z" for cp in range(0x10000)
           if not 0xD800 <= cp <= 0xDFFF]
  rng = random.Random(7)
  blocks = [(0x20, 0x7F), (0xA0, 0x250), (0x300, 0x370), (0x370, 0x530), (0x590, 0x700),
            (0x900, 0x980), (0x1E00, 0x2070), (0x2100, 0x2200), (0x3000, 0x3100),
            (0x4E00, 0x4E40), (0xAC00, 0xAC20), (0xFB00, 0xFB50), (0xFF00, 0xFFF0),
            (0x10400, 0x10600), (0x1D400, 0x1D500), (0x1F300, 0x1F700), (0x0, 0x20)]
  for _ in range(3000):
    texts.append("".join(chr(rng.randrange(*rng.choice(blocks)))
                         for _ in range(rng.randint(0, 30))))
  ref = _reference(need(UNCASED_VOCAB), lower)
  ours = tokenization.FullTokenizer(UNCASED_VOCAB, do_lower_case=lower)
  got = ours.tokenize_to_ids_batch(texts)
  bad = [t for t, g in zip(texts, got) if g != _ref_ids(ref, [t])[0]]
  assert not bad, [ascii(t) for t in bad[:5]]


def test_max_chars_per_word_is_configurable():
  ref = reference.FullTokenizer(need(UNCASED_VOCAB), do_lower_case=True)  # its default: 400
  ours = tokenization.FullTokenizer(UNCASED_VOCAB, True, max_input_chars_per_word=400)
  for text in ["ab" * 150, "ab" * 199 + " x", "ab" * 201]:
    assert ours.tokenize(text) == ref.tokenize(text)
  default = tokenization.FullTokenizer(UNCASED_VOCAB, True)
  assert default.tokenize("a" * 201) == ["[UNK]"]
  assert default.tokenize("a" * 200) != ["[UNK]"]


def test_lowercase_gap_characters_follow_python(tmp_path):
  """Capitals newer than TF's ICU tables are lower-cased like Python's str.lower()."""
  gaps = tokenization._lowercase_gaps()  # pylint: disable=protected-access
  if not gaps:
    pytest.skip("TF lower-cases like this Python")
  upper = sorted(gaps)[:3]
  lowered = [gaps[c] for c in upper]
  vocab = tmp_path / "vocab.txt"
  vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "x"] + lowered
                             + ["##" + l for l in lowered]) + "\n", encoding="utf-8")
  ref = reference.FullTokenizer(str(vocab), do_lower_case=True)
  ours = tokenization.FullTokenizer(str(vocab), do_lower_case=True)
  text = " ".join(upper) + " x" + "".join(upper) + " " + "".join(lowered)
  assert ours.tokenize(text) == ref.tokenize(text)
  assert "[UNK]" not in ours.tokenize(text)


def test_full_tokenizer_interface():
  tok = tokenization.FullTokenizer(need(UNCASED_VOCAB), do_lower_case=True)
  assert tok.tokenize("Unaffable!") == ["una", "##ffa", "##ble", "!"]
  ids = tok.convert_tokens_to_ids(["[CLS]", "una", "##ffa", "##ble", "[SEP]"])
  # Ids are line numbers: 101, 14477, 20961, 3468, 102 in the full vocab; the slice keeps the
  # first 3000 lines in place.
  assert ids == [101] + vocab_ids(UNCASED_VOCAB, ["una", "##ffa", "##ble"]) + [102]
  assert tok.convert_ids_to_tokens(ids) == ["[CLS]", "una", "##ffa", "##ble", "[SEP]"]
  assert tok.vocab["[MASK]"] == 103 and tok.inv_vocab[103] == "[MASK]"
  with open(UNCASED_VOCAB, encoding="utf-8") as f:
    assert len(tok.vocab) == len(f.read().splitlines())  # 30522 in the full vocab
  assert tok.tokenize(b"Hello") == ["hello"]  # bytes are decoded as UTF-8
  assert tok.tokenize_to_ids_batch([]) == []
  ids, splits = tok.encode_batch(["hello world", "", "hi"])
  assert splits.tolist() == [0, 2, 2, 3]
  assert ids.tolist() == vocab_ids(UNCASED_VOCAB, ["hello", "world", "hi"])
  assert tok.split_words_batch(["Hello, WORLD!"]) == [["hello", ",", "world", "!"]]


def test_in_graph_tokenizer_in_tf_function_and_dataset():
  tokens = tokenization.load_vocab_tokens(need(UNCASED_VOCAB))
  module = tokenization.TextTokenizer(tokens, lower_case=True)
  fn = tf.function(module.tokenize, input_signature=[tf.TensorSpec([None], tf.string)])
  out = fn(tf.constant(["Hello world!", "naïve"]))
  hello_world = vocab_ids(UNCASED_VOCAB, ["hello", "world", "!"])  # 7592, 2088, 999 in full
  assert out.to_list() == [hello_world, vocab_ids(UNCASED_VOCAB, ["naive"])]
  ds = tf.data.Dataset.from_tensor_slices(["Hello world!"]).batch(1).map(module.tokenize)
  assert next(iter(ds)).to_list() == [hello_world]


def test_vocab_errors(tmp_path):
  with pytest.raises(FileNotFoundError, match="no_such_vocab"):
    tokenization.FullTokenizer(str(tmp_path / "no_such_vocab.txt"))
  empty = tmp_path / "empty.txt"
  empty.write_text("")
  with pytest.raises(ValueError, match="empty"):
    tokenization.load_vocab_tokens(str(empty))
  bad = tmp_path / "bad.txt"
  bad.write_bytes(b"[UNK]\n\xff\xfe\n")
  with pytest.raises(ValueError, match=r"bad.txt:2"):
    tokenization.load_vocab_tokens(str(bad))
  no_unk = tmp_path / "no_unk.txt"
  no_unk.write_text("[PAD]\nhello\n")
  with pytest.raises(ValueError, match=r"\[UNK\]"):
    tokenization.FullTokenizer(str(no_unk))
  with pytest.raises(ValueError, match=r"\[MASK\]"):
    tokenization.check_special_tokens({"[UNK]": 0}, "v.txt")


def test_repeated_and_blank_vocab_entries_resolve_like_the_original(tmp_path):
  vocab = tmp_path / "vocab.txt"
  vocab.write_text("[PAD]\n[UNK]\nhello\n   \nworld\nhello\n##s\n", encoding="utf-8")
  ref = reference.FullTokenizer(str(vocab), do_lower_case=True)
  ours = tokenization.FullTokenizer(str(vocab), do_lower_case=True)
  for text in ["hello worlds", "hellos", "world hello"]:
    assert (ours.tokenize_to_ids_batch([text])[0]
            == ref.convert_tokens_to_ids(ref.tokenize(text)))
