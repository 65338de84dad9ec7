"""A batch of one sequence through XLA: the latency case of serving on a CPU.

One short sequence (a search query, a chat turn) is where a CPU spends its time between
kernels: ~400 small ops, each a dispatch by TensorFlow's executor, and MatMuls of ~12 rows.
XLA fuses the LayerNorms, GELUs, softmaxes and bias adds into a few loops and runs the whole
encoder as one program: MiniLM-L6 on an SST-2 sentence, 2 CPU threads, 11.6 -> 9.9 ms. It
does not pay at larger batches of uneven texts, where skipping the padding (`TokenPacking`)
does more than fusing (32 SST-2 sentences: 211 sentences/s packed, 133 with XLA padded),
and `TokenPacking`'s data-dependent shapes cannot be compiled; so a batch of one takes the
compiled path and every other batch the usual one (a `tf.cond` on the batch size).

XLA compiles a program per input shape, on the first request of that shape (~1.5 s for
MiniLM on 2 cores): the sequence is cut after its last real token and padded up to a multiple
of `PAD_TO_MULTIPLE` (at most to max_position_embeddings), so at most max_position_embeddings /
8 programs, and a request padded to a fixed length costs its text. Serving then needs
XLA: `tf.saved_model.load` has it; TensorFlow Serving takes
`--xla_cpu_compilation_enabled=true` on a CPU.
"""

import tensorflow as tf

from official_bert.modeling.tensorflow_only import token_packing

PAD_TO_MULTIPLE = 8


class SingleSequenceXla:
  """Runs `padded_forward` XLA-compiled for a batch of one, `otherwise` for other batches.

  Args:
    padded_forward: (word_ids, mask, type_ids, zero_padding) -> the encoder's output dict,
      computed over every position (no `TokenPacking`); zero_padding: padded positions of
      sequence_output and encoder_outputs set to 0 before the pooler reads the first.
    embed: (word_ids, type_ids) -> the embeddings [batch, seq, hidden] (`embedding_output`).
    max_length: the longest sequence it takes (max_position_embeddings).
  """

  def __init__(self, padded_forward, embed, max_length):
    self._embed = embed
    self._max_length = max_length
    # reduce_retracing: eager callers trace once for every width, not once per width.
    self._compiled = tf.function(padded_forward, jit_compile=True, autograph=False,
                                 reduce_retracing=True)

  def _single(self, word_ids, mask, type_ids, zero_padding):
    seq = tf.shape(word_ids)[1]
    length = seq
    if zero_padding:
      # Past the last real token every output is 0 (what `otherwise` gives): not computed,
      # so a request padded to a fixed length (TF-Hub preprocessors, serve_ids clients)
      # costs its text. The mask need not be a prefix.
      length = token_packing.extents(mask)[0]
    # At least one position, up to a multiple of 8: few widths, so few compiled programs.
    width = tf.minimum((tf.maximum(length, 1) + PAD_TO_MULTIPLE - 1) // PAD_TO_MULTIPLE
                       * PAD_TO_MULTIPLE, tf.maximum(self._max_length, seq))
    take = tf.minimum(width, seq)
    fit_in = lambda t: tf.pad(t[:, :take], [[0, 0], [0, width - take]])  # noqa: E731
    out = self._compiled(fit_in(word_ids), fit_in(mask), fit_in(type_ids), zero_padding)
    # [1, width, hidden] -> [1, seq, hidden]: zeros past `take` (only with zero_padding).
    fit_out = lambda x: tf.pad(x[:, :take], [[0, 0], [0, seq - take], [0, 0]])  # noqa: E731
    encoder_outputs = [fit_out(x) for x in out["encoder_outputs"]]
    # The embeddings of every position, padding included, as `otherwise` returns them.
    embedding_output = (self._embed(word_ids, type_ids) if zero_padding
                        else fit_out(out["embedding_output"]))
    return {"sequence_output": encoder_outputs[-1], "pooled_output": out["pooled_output"],
            "embedding_output": embedding_output, "encoder_outputs": encoder_outputs}

  def __call__(self, word_ids, mask, type_ids, otherwise, zero_padding):
    """The outputs of `otherwise()` (the usual path), computed compiled for a batch of one.

    zero_padding: whether `otherwise` gives 0 at the padded positions of sequence_output and
      encoder_outputs (it skips the padding); the compiled path then does the same.
    """
    word_ids, mask, type_ids = (tf.convert_to_tensor(t) for t in (word_ids, mask, type_ids))
    return tf.cond(tf.equal(tf.shape(word_ids)[0], 1),
                   lambda: self._single(word_ids, mask, type_ids, zero_padding), otherwise)
