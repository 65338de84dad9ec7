"""A released vocabulary's `[unusedN]` slots filled with a corpus's own frequent words
(`extend_vocab`); only those lines change, so the vocabulary's size and every other id stay.

Candidates are the corpus's words (counted by `word_counts`, as WordPiece later looks them
up) that the vocabulary splits into more than one piece or maps to [UNK]; the most frequent
fill the slots in file order. WordPiece is greedy longest-match-first, so a whole-word entry
always wins over its pieces: each new word becomes one token.
"""

import collections
import re

from absl import logging

from data_prep import tfrecord_io
from data_prep.pretraining import corpus
from data_prep.vocab import word_counts as word_counts_lib

UNUSED = re.compile(r"\[unused\d+\]")
_WORDS_PER_CALL = 8192  # distinct words tokenized per graph call

# tokens_before/after: the corpus's WordPiece tokens with the old / new vocabulary.
# new_words: (word, count, pieces with the old vocabulary), in slot order.
Result = collections.namedtuple(
    "Result", ["new_words", "slots", "tokens_before", "tokens_after", "ratio"])


def unused_slots(tokens):
  """Line indices (= ids) of the `[unusedN]` entries, in file order."""
  return [i for i, t in enumerate(tokens) if UNUSED.fullmatch(t)]


def piece_counts(tokens, words, do_lower_case):
  """WordPiece tokens per word (the tokenizer's exact rules: [UNK] counts 1) -> list of int."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top  (TF only where needed)

  from data_prep import tokenization  # pylint: disable=g-import-not-at-top
  tokenizer = tokenization.TextTokenizer(tokens, lower_case=do_lower_case)
  out = []
  for start in range(0, len(words), _WORDS_PER_CALL):
    # A normalized word normalizes to itself, so each text is that one word again.
    batch = tf.constant(words[start:start + _WORDS_PER_CALL], dtype=tf.string)
    out.extend(tokenizer.tokenize(batch).row_lengths().numpy().tolist())
  return out


def choose_words(word_counts, pieces, vocab, num_new_tokens, min_count):
  """The most frequent words (ties by word) split into pieces or [UNK]: (word, count, n).

  A word that is not an entry itself is either split or, as one piece, [UNK]. Words longer
  than the tokenizer's limit stay [UNK] whatever the vocabulary holds: never candidates.
  """
  from data_prep import tokenization  # pylint: disable=g-import-not-at-top
  limit = tokenization.DEFAULT_MAX_CHARS_PER_WORD
  candidates = [(w, c, n) for (w, c), n in zip(word_counts.items(), pieces)
                if c >= min_count and w not in vocab and len(w) <= limit]
  candidates.sort(key=lambda wcn: (-wcn[1], wcn[0]))
  return candidates[:num_new_tokens]


def extend_vocab(vocab_file, input_file, num_new_tokens, do_lower_case=True, min_count=2):
  """Fills `[unusedN]` slots with the corpus's frequent split words.

  Args:
    vocab_file: the WordPiece vocabulary (one token per line).
    input_file: corpus file(s): comma-separated paths/globs, one sentence or paragraph per
      line (blank lines are document breaks; they hold no words either way).
    num_new_tokens: slots to fill at most.
    do_lower_case: the vocabulary's case handling (as its checkpoint was trained).
    min_count: words seen fewer times are never added.

  Returns:
    (the new vocabulary's raw lines, a `Result`).

  Raises:
    ValueError: fewer `[unusedN]` slots than num_new_tokens, or a bad file (named).
  """
  if num_new_tokens < 1:
    raise ValueError(f"--num_new_tokens={num_new_tokens}: must be >= 1")
  if min_count < 1:
    raise ValueError(f"--min_count={min_count}: must be >= 1")
  from data_prep import tokenization  # pylint: disable=g-import-not-at-top  (TF: main only)
  lines, tokens = tokenization.read_vocab_lines(vocab_file)
  slots = unused_slots(tokens)
  if len(slots) < num_new_tokens:
    raise ValueError(f"{vocab_file} has {len(slots)} [unusedN] entries, fewer than "
                     f"--num_new_tokens={num_new_tokens}; lower --num_new_tokens")
  files = corpus.expand_input_patterns(input_file)
  word_counts = word_counts_lib.count_words(files, do_lower_case)
  if not word_counts:
    raise corpus.CorpusError(f"empty corpus: no words in {', '.join(files)}")
  vocab = set(tokens)
  pieces = piece_counts(tokens, list(word_counts), do_lower_case)
  chosen = choose_words(word_counts, pieces, vocab, num_new_tokens, min_count)
  if len(chosen) < num_new_tokens:
    logging.warning("only %d word(s) seen >= %d times are split by %s; filled %d of the "
                    "%d requested slots", len(chosen), min_count, vocab_file, len(chosen),
                    num_new_tokens)
  new_tokens = list(tokens)
  new_lines = list(lines)
  for slot, (word, _, _) in zip(slots, chosen):
    new_tokens[slot] = word
    ending = lines[slot][len(lines[slot].rstrip(b"\r\n")):]  # "\n", "\r\n" or none (last)
    new_lines[slot] = word.encode("utf-8") + ending
  after = piece_counts(new_tokens, list(word_counts), do_lower_case)
  counts = list(word_counts.values())
  before_total = sum(c * n for c, n in zip(counts, pieces))
  after_total = sum(c * n for c, n in zip(counts, after))
  result = Result(chosen, slots[:len(chosen)], before_total, after_total,
                  after_total / max(before_total, 1))
  logging.info("%d new whole-word tokens in [unusedN] slots (of %d free); the corpus's %d "
               "words: %d WordPiece tokens before, %d after (x%.4f, %.2f%% fewer)",
               len(chosen), len(slots), sum(counts), before_total, after_total, result.ratio,
               100 * (1 - result.ratio))
  for word, count, n in chosen[:20]:
    logging.info("  %-24s seen %d times, was %d pieces", word, count, n)
  return new_lines, result


def extend_and_write(output_file, vocab_file, input_file, num_new_tokens, do_lower_case=True,
                     min_count=2):
  """`extend_vocab`, then the new vocabulary written atomically to output_file; logs and
  returns the `Result`."""
  lines, result = extend_vocab(vocab_file, input_file, num_new_tokens, do_lower_case, min_count)
  with tfrecord_io.AtomicFile(output_file, "wb") as f:
    f.write(b"".join(lines))
  logging.info("Wrote %s: %d new tokens; corpus tokens %d -> %d (x%.4f)", output_file,
               len(result.new_words), result.tokens_before, result.tokens_after, result.ratio)
  return result
