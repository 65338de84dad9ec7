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
MiniLM on 2 cores): the sequence is padded up to a multiple of `PAD_TO_MULTIPLE` (at most to
max_position_embeddings), so at most max_position_embeddings / 8 programs. Serving then needs
XLA: `tf.saved_model.load` has it; TensorFlow Serving takes
`--xla_cpu_compilation_enabled=true` on a CPU.
"""

import tensorflow as tf

PAD_TO_MULTIPLE = 8


class SingleSequenceXla:
  """Runs `padded_forward` XLA-compiled for a batch of one, `otherwise` for other batches.

  Args:
    padded_forward: (word_ids, mask, type_ids) -> the encoder's output dict, computed over
      every position (no `TokenPacking`).
    max_length: the longest sequence it takes (max_position_embeddings).
  """

  def __init__(self, padded_forward, max_length):
    self._padded_forward = padded_forward
    self._max_length = max_length
    self._compiled = tf.function(self._forward, jit_compile=True, autograph=False)

  def _forward(self, word_ids, mask, type_ids, zero_padding):
    out = self._padded_forward(word_ids, mask, type_ids)
    if zero_padding:  # as `TokenPacking.unpack` leaves the padded positions
      keep = tf.cast(mask, out["sequence_output"].dtype)[..., None]  # [1, seq, 1]
      out["encoder_outputs"] = [x * keep for x in out["encoder_outputs"]]
      out["sequence_output"] = out["encoder_outputs"][-1]
    return out

  def _single(self, word_ids, mask, type_ids, zero_padding):
    seq = tf.shape(word_ids)[1]
    extra = tf.maximum(tf.minimum((-seq) % PAD_TO_MULTIPLE, self._max_length - seq), 0)
    pad = [[0, 0], [0, extra]]
    out = self._compiled(tf.pad(word_ids, pad), tf.pad(mask, pad), tf.pad(type_ids, pad),
                         zero_padding)
    # [1, seq + extra, hidden] -> [1, seq, hidden]
    cut = lambda x: x[:, :seq]  # noqa: E731
    return {"sequence_output": cut(out["sequence_output"]),
            "pooled_output": out["pooled_output"],
            "embedding_output": cut(out["embedding_output"]),
            "encoder_outputs": [cut(x) for x in out["encoder_outputs"]]}

  def __call__(self, word_ids, mask, type_ids, otherwise, zero_padding):
    """The outputs of `otherwise()` (the usual path), computed compiled for a batch of one.

    zero_padding: the compiled path's padded positions of sequence_output and
      encoder_outputs are 0, as `otherwise`'s are when it skips the padding.
    """
    word_ids, mask, type_ids = (tf.convert_to_tensor(t) for t in (word_ids, mask, type_ids))
    return tf.cond(tf.equal(tf.shape(word_ids)[0], 1),
                   lambda: self._single(word_ids, mask, type_ids, zero_padding), otherwise)
