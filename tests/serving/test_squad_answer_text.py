"""The squad export's answer text for a span is the original `get_final_text`'s.

A model stand-in puts the start and end logits on chosen context pieces, so every span of a
context is answered; the export's text must be what run_squad's postprocessing (the
original's `get_final_text` over the span's whole words) gives for the same pieces. The
contexts hold words with [UNK] pieces beside known ones ("abc(☃)"), pieces that do not spell
their word, accents and upper case.
"""

import pytest
import tensorflow as tf

from data_prep import tokenization
from official_bert.serving import squad_answers
from official_bert.tasks import squad_postprocess

SEQ = 48
VOCAB = ("[PAD] [UNK] [CLS] [SEP] [MASK] the a cat sat on mat dog who what where . , ? ! ( ) "
         "##s ##ing play guitar man abc snow ##man cafe").split()
QUESTION = "who sat ?"
CONTEXTS = [
    "The snowman abc(☃) sat on the mat .",
    "A ☃cat sat, snowmanx ( the dog ) played.",
    "Café CAT ☃☃ (abc) the",
]


class _SpanModel:
  """Puts the best start logit on window position `start` and the best end on `end`: one
  position for every window, or one per window ([windows])."""

  def __init__(self):
    self.start = self.end = 0

  def __call__(self, inputs, training=False):
    columns = tf.range(SEQ)[None, :]
    shape = tf.shape(inputs["input_word_ids"])
    peak = lambda at: tf.broadcast_to(
        tf.where(columns == tf.reshape(at, [-1, 1]), 10.0, 0.0), shape)
    return {"start_logits": peak(self.start), "end_logits": peak(self.end)}


def _expected(context, first, last, tokenizer):
  """run_squad's text for context pieces first..last (the original's get_final_text)."""
  words = context.split()
  pieces, piece_word = [], []
  for w, word in enumerate(words):
    word_pieces = tokenizer.tokenize(word)
    pieces += word_pieces
    piece_word += [w] * len(word_pieces)
  pred_text = squad_postprocess._detokenize(pieces[first:last + 1])
  orig_text = " ".join(words[piece_word[first]:piece_word[last] + 1])
  tok_orig_text = " ".join(tokenizer.basic_tokenizer.tokenize(orig_text))
  return squad_postprocess.get_final_text(pred_text, orig_text, tok_orig_text), len(pieces)


@pytest.mark.parametrize("context", CONTEXTS)
def test_every_span_has_the_original_text(tmp_path, context):
  vocab_file = tmp_path / "vocab.txt"
  vocab_file.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
  full = tokenization.FullTokenizer(str(vocab_file), do_lower_case=True)
  model = _SpanModel()
  answerer = squad_answers.SquadAnswerer(model, full.text_tokenizer, VOCAB, SEQ, doc_stride=64,
                                         max_query_length=8, n_best_size=1)
  context_start = len(full.tokenize(QUESTION)) + 2  # [CLS] question [SEP]
  _, num_pieces = _expected(context, 0, 0, full)
  assert "[UNK]" in full.tokenize(context)
  # Every span at once: the context once per span (one window each), each window's peaks
  # on its span.
  spans = [(first, last) for first in range(num_pieces) for last in range(first, num_pieces)]
  model.start = tf.constant([context_start + first for first, _ in spans])
  model.end = tf.constant([context_start + last for _, last in spans])
  got = answerer(tf.constant([QUESTION] * len(spans)), tf.constant([context] * len(spans)))
  texts = got["answer_text"].numpy()
  starts, ends = got["answer_start"].numpy(), got["answer_end"].numpy()
  for row, (first, last) in enumerate(spans):
    expected, _ = _expected(context, first, last, full)
    assert texts[row].decode() == expected, (first, last)
    # The offsets point at the text as written (the span's words, one space between).
    assert " ".join(context[starts[row]:ends[row]].split()) == expected, (first, last)
  assert len(spans) == num_pieces * (num_pieces + 1) // 2 > 20


def test_a_v2_batch_of_contexts_without_windows_answers_null(tmp_path):
  """Empty contexts have no window; a SQuAD 2.0 batch of only such failed in a gather (the
  API's answer and the export)."""
  vocab_file = tmp_path / "vocab.txt"
  vocab_file.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
  full = tokenization.FullTokenizer(str(vocab_file), do_lower_case=True)
  answerer = squad_answers.SquadAnswerer(_SpanModel(), full.text_tokenizer, VOCAB, SEQ,
                                         max_query_length=8, version_2_with_negative=True)
  got = answerer(tf.constant([QUESTION, QUESTION]), tf.constant(["", "   "]))
  assert [t.decode() for t in got["answer_text"].numpy()] == ["", ""]
  assert got["answer_start"].numpy().tolist() == [-1, -1]
  mixed = answerer(tf.constant([QUESTION, QUESTION]), tf.constant(["", CONTEXTS[0]]))
  assert mixed["answer_text"].numpy()[0].decode() == ""
