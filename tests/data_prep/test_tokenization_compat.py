"""The original tokenization module's API (google-research/bert, as copied into tf-models-official):
every function and class against `official.nlp.tools.tokenization`, which is that module."""

import inspect
import random
import runpy
import sys

from conftest import CASED_VOCAB
from conftest import CHINESE_VOCAB
from conftest import UNCASED_VOCAB
from official.nlp.tools import tokenization as reference
import pytest

from data_prep import tokenization
from data_prep import tokenization_compat

TEXTS = [
    "", " ", "\t\n\r ", "Hello, World! How's it going?", "Unaffable unaffable UNAFFABLE",
    "Héllo Wörld! Ça va? naïve café résumé", "ñandú ÑANDÚ Ångström øre Œuvre ǈ ǉ İ Σ aΣ.",
    "Straße ﬁne ™ Ａｂｃ！ ＂quoted＂ ｶﾀｶﾅ", "中文字符测试，日本語のテキスト、한국어 텍스트 𠀀𪜀",
    "ctl\x00a\x01b\x7fc\u200bd\u200ce\u200df\ufeffg\u2060h\ufffdi",
    "line\u2028sep\u2029para\x85nel\x0bvt\x0cff\x1cfs\u00a0nbsp\u3000ideo",
    "«guillemets» „quotes“ ¿qué? ¡sí! — – … · § ¶ † ‡ ‰ ′ ″ ‹› 「」 『』 【】 ・",
    "$5.00 @user #tag ^caret `tick` ~tilde |pipe 12,345.67 3.14e-10 1/2",
    "combining e\u0301 a\u0308 \u0301alone \u0301\u0308", "emoji 😀👍🏽 👨‍👩‍👧 🇺🇸 ❤️",
    "Hello[MASK]world [CLS] [SEP] [UNK] [PAD]", "don't can't won't it's",
    "a" * 199, "b" * 200, "c" * 201, "x" * 1000 + "!", "é" * 250, "supercalifragilistic " * 3,
]
VOCABS = [(UNCASED_VOCAB, True), (UNCASED_VOCAB, False), (CASED_VOCAB, False),
          (CASED_VOCAB, True), (CHINESE_VOCAB, True)]


def _outcome(fn, *args):
  """The result, or the exception's type and message: raising is part of the behaviour."""
  try:
    return ("ok", fn(*args))
  except Exception as e:  # pylint: disable=broad-except
    return (type(e), str(e))


def _random_texts(count, seed=7):
  rng = random.Random(seed)
  blocks = [(0x0, 0x80), (0xA0, 0x250), (0x300, 0x370), (0x370, 0x530), (0x2000, 0x2070),
            (0x3000, 0x3100), (0x4E00, 0x4E40), (0xFF00, 0xFFF0), (0x1F300, 0x1F700)]
  return ["".join(chr(rng.randrange(*rng.choice(blocks))) for _ in range(rng.randint(0, 40)))
          for _ in range(count)]


def test_module_offers_the_original_api():
  sentencepiece_extras = {"preprocess_text", "encode_pieces", "encode_ids",
                          "FullSentencePieceTokenizer", "SPIECE_UNDERLINE"}  # tf-models' own
  names = {n for n, v in vars(reference).items()
           if getattr(v, "__module__", None) == reference.__name__} - sentencepiece_extras
  assert names == {
      "validate_case_matches_checkpoint", "convert_to_unicode", "printable_text", "load_vocab",
      "convert_by_vocab", "convert_tokens_to_ids", "convert_ids_to_tokens", "whitespace_tokenize",
      "FullTokenizer", "BasicTokenizer", "WordpieceTokenizer", "_is_whitespace", "_is_control",
      "_is_punctuation"}
  assert [n for n in sorted(names) if not hasattr(tokenization, n)] == []
  assert tokenization.BasicTokenizer is tokenization_compat.BasicTokenizer
  params = lambda f: {k: p.default for k, p in inspect.signature(f).parameters.items()}
  # google-research/bert's signatures (tf-models-official added split_on_punc and 400).
  assert params(tokenization.BasicTokenizer) == {"do_lower_case": True}
  assert params(tokenization.WordpieceTokenizer) == {
      "vocab": inspect.Parameter.empty, "unk_token": "[UNK]", "max_input_chars_per_word": 200}
  assert list(params(tokenization.FullTokenizer))[:2] == ["vocab_file", "do_lower_case"]
  assert params(tokenization.FullTokenizer)["do_lower_case"] is True


@pytest.mark.parametrize("name", ["_is_whitespace", "_is_control", "_is_punctuation"])
def test_character_predicates_match_on_every_code_point_and_bad_input(name):
  ours, theirs = getattr(tokenization, name), getattr(reference, name)
  bad = [cp for cp in range(sys.maxunicode + 1) if ours(chr(cp)) != theirs(chr(cp))]
  assert bad == []
  for arg in ["", "ab", " \t", "\t\n", 5, None, b"a"]:  # the original raises TypeError
    assert _outcome(ours, arg) == _outcome(theirs, arg), repr(arg)


@pytest.mark.parametrize("fn", ["convert_to_unicode", "printable_text"])
def test_convert_to_unicode_and_printable_text(fn):
  ours, theirs = getattr(tokenization, fn), getattr(reference, fn)
  for arg in ["héllo", "", "Hello".encode(), "naïve 中文".encode(), b"bad \xff\xfe utf-8 \xc3",
              b"", bytearray(b"x"), None, 3, ["a"], memoryview(b"a")]:
    assert _outcome(ours, arg) == _outcome(theirs, arg), repr(arg)
  assert ours(b"caf\xc3\xa9 \xff") == "café "  # invalid bytes dropped ("ignore")
  with pytest.raises(ValueError, match="Unsupported string type: <class 'int'>"):
    ours(3)


def test_whitespace_tokenize():
  for text in TEXTS + ["  a  b\u3000c\u2028d\x1ce  ", "\u00a0"]:
    assert tokenization.whitespace_tokenize(text) == reference.whitespace_tokenize(text)


@pytest.mark.parametrize("lower", [True, False])
def test_basic_tokenizer_parity(lower):
  ours = tokenization.BasicTokenizer(do_lower_case=lower)
  theirs = reference.BasicTokenizer(do_lower_case=lower)
  texts = TEXTS + _random_texts(2000)
  for text in texts:
    assert ours.tokenize(text) == theirs.tokenize(text), ascii(text)
  for text in TEXTS:  # bytes in, as the original accepts
    assert ours.tokenize(text.encode()) == theirs.tokenize(text.encode())
  assert _outcome(ours.tokenize, 5) == _outcome(theirs.tokenize, 5)
  # The private helpers forks call directly.
  for text in TEXTS[:16]:
    for helper in ["_run_strip_accents", "_run_split_on_punc", "_tokenize_chinese_chars",
                   "_clean_text"]:
      assert getattr(ours, helper)(text) == getattr(theirs, helper)(text), (helper, text)
  for cp in [0x4E00, 0x9FFF, 0x3400, 0x20000, 0x2CEAF, 0xF900, 0x2FA1F, 0xAC00, 0x3042, 65]:
    assert ours._is_chinese_char(cp) == theirs._is_chinese_char(cp)  # pylint: disable=protected-access


def test_basic_tokenizer_reads_do_lower_case_at_each_call():
  tok = tokenization.BasicTokenizer(do_lower_case=True)
  assert tok.tokenize("Héllo") == ["hello"]
  tok.do_lower_case = False
  assert tok.tokenize("Héllo") == ["Héllo"]


@pytest.mark.parametrize("vocab_file,lower", VOCABS)
def test_wordpiece_tokenizer_parity(vocab_file, lower):
  vocab = tokenization.load_vocab(vocab_file)
  ours = tokenization.WordpieceTokenizer(vocab=vocab)
  theirs = reference.WordpieceTokenizer(vocab=reference.load_vocab(vocab_file),
                                        max_input_chars_per_word=200)  # its default is 400
  basic = reference.BasicTokenizer(do_lower_case=lower)
  words = [w for t in TEXTS + _random_texts(300) for w in basic.tokenize(t)]
  for word in words:
    assert ours.tokenize(word) == theirs.tokenize(word), word
  for text in TEXTS:  # raw text: splits on whitespace only, punctuation stays in the word
    assert ours.tokenize(text) == theirs.tokenize(text), ascii(text)
    assert ours.tokenize(text.encode()) == theirs.tokenize(text.encode())


def test_wordpiece_tokenizer_per_call_settings():
  """Any container as vocab, an unk_token absent from it, limits changed after construction."""
  vocab = {"un", "##aff", "##able", "a", "##a"}
  for unk in ["[UNK]", "<unk>"]:
    for limit in [3, 9, 10, 200, 400]:
      ours = tokenization.WordpieceTokenizer(vocab, unk_token=unk, max_input_chars_per_word=limit)
      theirs = reference.WordpieceTokenizer(vocab, unk_token=unk, max_input_chars_per_word=limit)
      for text in ["unaffable", "unaffablex", "aaaa aaaaaaaaaa", "", " un  a ", "a" * 300]:
        assert ours.tokenize(text) == theirs.tokenize(text), (unk, limit, text)
  tok = tokenization.WordpieceTokenizer(vocab)
  assert tok.tokenize("a" * 201) == ["[UNK]"]
  tok.max_input_chars_per_word = 400
  tok.unk_token = "?"
  vocab.discard("un")
  assert tok.tokenize("a" * 201) == ["a"] + ["##a"] * 200
  assert tok.tokenize("unaffable") == ["?"]


def test_load_vocab_and_convert_helpers(tmp_path):
  tricky = tmp_path / "vocab.txt"
  tricky.write_bytes("[PAD]\r\n[UNK]\n  hello  \n\nworld\nhello\n\u3000x\u00a0\n##s\nlast".encode())
  for vocab_file in [UNCASED_VOCAB, CASED_VOCAB, CHINESE_VOCAB, str(tricky)]:
    ours, theirs = tokenization.load_vocab(vocab_file), reference.load_vocab(vocab_file)
    assert type(ours) is type(theirs) and list(ours.items()) == list(theirs.items())
  inv = {v: k for k, v in ours.items()}
  for items in [["hello", "world", "##s"], [], ["missing"]]:
    assert (_outcome(tokenization.convert_tokens_to_ids, ours, items)
            == _outcome(reference.convert_tokens_to_ids, theirs, items))
    assert (_outcome(tokenization.convert_by_vocab, ours, items)
            == _outcome(reference.convert_by_vocab, theirs, items))
  for ids in [[0, 1, 5, 7], [], [99]]:
    assert (_outcome(tokenization.convert_ids_to_tokens, inv, ids)
            == _outcome(reference.convert_ids_to_tokens, inv, ids))


@pytest.mark.parametrize("vocab_file,lower", VOCABS)
def test_full_tokenizer_parity(vocab_file, lower):
  ours = tokenization.FullTokenizer(vocab_file=vocab_file, do_lower_case=lower)
  theirs = reference.FullTokenizer(vocab_file=vocab_file, do_lower_case=lower)
  theirs.wordpiece_tokenizer.max_input_chars_per_word = 200  # the original's limit
  assert ours.vocab == theirs.vocab and ours.inv_vocab == theirs.inv_vocab
  for text in TEXTS + [t.encode() for t in TEXTS[:8]]:
    tokens = ours.tokenize(text)
    assert tokens == theirs.tokenize(text), ascii(text)
    assert ours.convert_tokens_to_ids(tokens) == theirs.convert_tokens_to_ids(tokens)
    ids = theirs.convert_tokens_to_ids(tokens)
    assert ours.convert_ids_to_tokens(ids) == theirs.convert_ids_to_tokens(ids)
    # The original's two stages, run by hand through the attributes, give the same tokens.
    assert [p for w in ours.basic_tokenizer.tokenize(text)
            for p in ours.wordpiece_tokenizer.tokenize(w)] == tokens
  for method, arg in [("convert_tokens_to_ids", ["no-such-token"]),
                      ("convert_ids_to_tokens", [10**9]), ("tokenize", 5)]:
    assert _outcome(getattr(ours, method), arg) == _outcome(getattr(theirs, method), arg)


CHECKPOINTS = [
    None, "", "bert_model.ckpt", "/models/bert_model.ckpt", "/tmp/model.ckpt-1000",
    "/models/uncased_L-12_H-768_A-12/bert_model.ckpt",
    "gs://bucket/uncased_L-24_H-1024_A-16/bert_model.ckpt",
    "/m/cased_L-12_H-768_A-12/bert_model.ckpt", "cased_L-24_H-1024_A-16/bert_model.ckpt",
    "/m/multilingual_L-12_H-768_A-12/bert_model.ckpt",
    "/m/multi_cased_L-12_H-768_A-12/bert_model.ckpt",
    "/m/chinese_L-12_H-768_A-12/bert_model.ckpt",
    "/m/uncased_L-12_H-768_A-12/bert_model.ckpt.index",
    "/m/cased_L-12_H-768_A-12/bert_model.ckpt-100000",
    "/m/cased_L-12_H-768_A-12/bert_modelXckpt",  # the original's unescaped "."
    "/m/my_cased_L-12_H-768_A-12/bert_model.ckpt", "/m/cased_L-12_H-768_A-12/model.ckpt",
    "/m/uncased_L-12_H-768_A-12.v2/bert_model.ckpt",
    "/m/wwm_uncased_L-24_H-1024_A-16/bert_model.ckpt",
    "/m/uncased_L-12_H-768_A-12/sub/bert_model.ckpt",
]


@pytest.mark.parametrize("do_lower_case", [True, False, 1, 0, None])
def test_validate_case_matches_checkpoint(do_lower_case):
  raised = []
  for path in CHECKPOINTS:
    ours = _outcome(tokenization.validate_case_matches_checkpoint, do_lower_case, path)
    assert ours == _outcome(reference.validate_case_matches_checkpoint, do_lower_case, path), path
    if ours[0] is ValueError:
      raised.append(path)
  # Released names of the other casing; the regex needs no end anchor, and "." is any char.
  assert raised == ([CHECKPOINTS[i] for i in (7, 8, 10, 13, 14)] if do_lower_case else
                    [CHECKPOINTS[i] for i in (5, 6, 9, 11, 12)])
  assert (_outcome(tokenization.validate_case_matches_checkpoint, do_lower_case, 5)
          == _outcome(reference.validate_case_matches_checkpoint, do_lower_case, 5))


def test_validate_case_message():
  with pytest.raises(ValueError) as info:
    tokenization.validate_case_matches_checkpoint(
        False, "/m/uncased_L-12_H-768_A-12/bert_model.ckpt")
  assert str(info.value) == (
      "You passed in `--do_lower_case=False` with "
      "`--init_checkpoint=/m/uncased_L-12_H-768_A-12/bert_model.ckpt`. However, "
      "`uncased_L-12_H-768_A-12` seems to be a lowercased model, so you should pass in "
      "`--do_lower_case=True` so that the fine-tuning matches how the model was pre-training. "
      "If this error is wrong, please just comment out this check.")


# A script written against the original module (run_classifier / run_squad style); only the
# import line differs between the two runs.
SCRIPT = """
import {module} as tokenization

tokenization.validate_case_matches_checkpoint(True, "/m/uncased_L-12_H-768_A-12/bert_model.ckpt")
vocab = tokenization.load_vocab(VOCAB)
tokenizer = tokenization.FullTokenizer(vocab_file=VOCAB, do_lower_case=True)
text_a = tokenization.convert_to_unicode(b"Hello, World! The caf\\xc3\\xa9 is unaffable.")
text_b = tokenization.convert_to_unicode("Second segment: \\u4e2d\\u6587 text")
tokens = ["[CLS]"] + tokenizer.tokenize(text_a) + ["[SEP]"] + tokenizer.tokenize(text_b)
tokens.append("[SEP]")
input_ids = tokenizer.convert_tokens_to_ids(tokens)
log = " ".join([tokenization.printable_text(x) for x in tokens])
back = tokenization.convert_ids_to_tokens(tokenizer.inv_vocab, input_ids)
doc_tokens = tokenization.whitespace_tokenize("  The  quick\\tbrown fox. ")
sub_tokens = [t for w in doc_tokens for t in tokenizer.tokenize(w)]
ws = [tokenization._is_whitespace(c) for c in " a\\u3000\\t"]
ctl = [tokenization._is_control(c) for c in "\\x00\\u200ba\\n"]
punct = [tokenization._is_punctuation(c) for c in "a,$\\u00bf"]
basic = tokenization.BasicTokenizer(do_lower_case=True)
tok_text = " ".join(basic.tokenize("The Caf\\u00e9's answer"))
wordpiece = tokenization.WordpieceTokenizer(vocab=vocab)
pieces = wordpiece.tokenize("unaffable hello")
RESULT = (len(vocab), tokens, input_ids, log, back, sub_tokens, ws, ctl, punct, tok_text, pieces)
"""


def test_script_written_for_the_original_runs_unchanged(tmp_path):
  results = []
  for module in ["official.nlp.tools.tokenization", "data_prep.tokenization"]:
    path = tmp_path / f"script_{len(results)}.py"
    path.write_text(SCRIPT.format(module=module), encoding="utf-8")
    results.append(runpy.run_path(str(path), init_globals={"VOCAB": UNCASED_VOCAB})["RESULT"])
  assert results[1] == results[0]
  assert results[1][1][:4] == ["[CLS]", "hello", ",", "world"]
