"""A BERT WordPiece vocabulary learned from a corpus (`learn_vocab`).

1. Words are counted with our own pre-tokenizer (`word_counts`), so the vocab is learned on
   exactly the words `FullTokenizer` will later look up.
2. tensorflow-text's WordPiece learner picks the pieces (a binary search over a count
   threshold for a vocab of at most `vocab_size` tokens, within `slack_ratio` of it).
3. The vocab is assembled: [PAD] [UNK] [CLS] [SEP] [MASK] (ids 0-4), then the learner's order;
   every character seen at least `min_char_count` times is present both as `c` and `##c`, so
   corpus text falls back to characters instead of [UNK]. The learner's result is trimmed
   (least frequent pieces first) if it is over `vocab_size`.
The output is deterministic for the same input and options; it is written atomically.
"""

import collections
import time

from absl import logging

from data_prep import tfrecord_io
from data_prep.pretraining import corpus
from data_prep.vocab import word_counts as word_counts_lib

RESERVED_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
JOINER = "##"


def char_counts(word_counts):
  counts = collections.Counter()
  for word, count in word_counts.items():
    for char in word:
      counts[char] += count
  return counts


def required_chars(word_counts, min_char_count, max_unique_chars):
  """The characters that get `c` and `##c`: the most frequent ones seen >= min_char_count."""
  ranked = sorted(char_counts(word_counts).items(), key=lambda kv: (-kv[1], kv[0]))
  kept = [c for c, n in ranked if n >= min_char_count][:max_unique_chars]
  if len(kept) < len(ranked):
    logging.info("%d of %d distinct characters are rare (< %d) or beyond max_unique_chars=%d; "
                 "words containing them will be [UNK]", len(ranked) - len(kept), len(ranked),
                 min_char_count, max_unique_chars)
  return sorted(kept)


def learner_input(word_counts, chars, min_count):
  """(word, count) pairs for the learner, most frequent first (ties by word: determinism).

  Words below min_count, or with a character outside `chars`, would only cost learning time:
  they cannot add a piece above the learner's count threshold worth having.
  """
  allowed = set(chars)
  pairs = [(w, n) for w, n in word_counts.items()
           if n >= min_count and w not in RESERVED_TOKENS and set(w) <= allowed]
  pairs.sort(key=lambda wn: (-wn[1], wn[0]))
  return pairs


def _check_room(vocab_size, chars):
  """Fails before the slow learning if the characters alone do not fit."""
  needed = len(RESERVED_TOKENS) + 2 * len(chars)
  if vocab_size < needed:
    raise ValueError(f"vocab_size={vocab_size} cannot hold the {len(RESERVED_TOKENS)} reserved "
                     f"tokens and {2 * len(chars)} character tokens (c and ##c); raise "
                     "--vocab_size or --min_char_count, or lower --max_unique_chars")


def assemble(learned, chars, vocab_size):
  """Reserved tokens, then the learned order, with every `c`/`##c`; at most vocab_size."""
  _check_room(vocab_size, chars)
  must = [c for c in chars] + [JOINER + c for c in chars]
  budget = vocab_size - len(RESERVED_TOKENS) - len(must)
  must_set = set(must)
  rest = [t for t in learned if t not in must_set and t not in RESERVED_TOKENS]
  keep = must_set | set(rest[:budget])  # learned is most frequent first: trim its tail
  vocab = list(RESERVED_TOKENS)
  seen = set(vocab)
  for token in learned + must:  # learned order; characters the learner lacked at the end
    if token in keep and token not in seen:
      vocab.append(token)
      seen.add(token)
  return vocab


def learn_vocab(files, vocab_size, do_lower_case=True, min_count=2, min_char_count=2,
                max_unique_chars=1000, max_input_tokens=100_000, num_iterations=4,
                lower_thresh=2, slack_ratio=0.05, max_token_length=50):
  """Learns a WordPiece vocab from corpus files (paths or comma-separated globs).

  Args:
    files: a list of paths, or a string of comma-separated paths/globs.
    vocab_size: the maximum number of tokens (reserved ones included).
    do_lower_case: lower-case and strip accents before counting (uncased models).
    min_count: words seen fewer times are not learner input (their characters still count).
    min_char_count: characters seen at least this often get `c` and `##c` tokens.
    max_unique_chars: at most this many (most frequent) characters get tokens.
    max_input_tokens: the learner sees at most this many distinct words (most frequent);
      bounds the learning time on big corpora.
    num_iterations, lower_thresh, slack_ratio, max_token_length: the learner's parameters.

  Returns:
    The tokens in id order.
  """
  from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner  # pylint: disable=g-import-not-at-top
  if isinstance(files, str):
    files = corpus.expand_input_patterns(files)
  for path in files:
    if not tfrecord_io.is_file(path):
      raise corpus.CorpusError(f"input file not found: {path}")
  t0 = time.time()
  word_counts = word_counts_lib.count_words(files, do_lower_case)
  if not word_counts:
    raise corpus.CorpusError(f"empty corpus: no words in {', '.join(files)}")
  chars = required_chars(word_counts, min_char_count, max_unique_chars)
  _check_room(vocab_size, chars)
  pairs = learner_input(word_counts, chars, min_count)
  logging.info("%d words, %d distinct; %d characters; learner input: %d words (count >= %d) "
               "[%.1fs]", sum(word_counts.values()), len(word_counts), len(chars), len(pairs),
               min_count, time.time() - t0)
  learned = []
  if pairs:
    t1 = time.time()
    logging.info("learning word pieces (binary search over a count threshold, %d passes "
                 "each; no progress output until done)", num_iterations)
    # The learner's own vocab holds its characters as `c` and `##c` too, so the target size
    # is the same; `assemble` trims whatever the binary search leaves over.
    learned = learner.learn(
        pairs, vocab_size, list(RESERVED_TOKENS), upper_thresh=None, lower_thresh=lower_thresh,
        num_iterations=num_iterations, max_input_tokens=max_input_tokens,
        max_token_length=max_token_length, max_unique_chars=max_unique_chars,
        slack_ratio=slack_ratio, include_joiner_token=True, joiner=JOINER)
    logging.info("learner: %d tokens in %.1fs", len(learned), time.time() - t1)
  vocab = assemble(learned, chars, vocab_size)
  logging.info("vocab: %d tokens (requested %d) in %.1fs", len(vocab), vocab_size,
               time.time() - t0)
  return vocab


def write_vocab(tokens, path):
  """One token per line, atomically (temporary file + rename)."""
  tfrecord_io.write_text(path, "".join(t + "\n" for t in tokens))


def learn_and_write(input_file, output_file, vocab_size, do_lower_case=True, **options):
  """`learn_vocab`, then `write_vocab` to output_file; logs and returns the tokens.

  Args:
    options: `learn_vocab`'s keyword arguments (min_count, min_char_count, ...).
  """
  vocab = learn_vocab(input_file, vocab_size, do_lower_case, **options)
  write_vocab(vocab, output_file)
  logging.info("Wrote %d tokens to %s", len(vocab), output_file)
  return vocab
