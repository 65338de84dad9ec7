"""`TokenPacking`: a batch's real tokens as one [tokens, ...] block, for work without padding.

Every part of a BERT layer but attention's seq x seq product acts on each position alone (the
Dense projections, GELU, LayerNorm: nearly all of the FLOPs), so it can run on the real
tokens only (input_mask 1) and skip the padding a batch of uneven texts carries: SST-2's
sentences average 25 WordPieces in batches padded to about 50, so half the work.

Attention runs in blocks: the batch's sequences sorted by length and cut into
`ATTENTION_BLOCKS` groups, each unpacked to [sequences, its longest, ...], so the seq x seq
products and softmax are sized to each group's texts rather than to the batch's longest
(MiniLM on SST-2 batches of 32, 2 CPU threads: 191 -> 237 sentences/s against one block;
more blocks cost batch-1 latency for no gain). The real positions' values are those of the
padded computation (float rounding aside); a padded position comes back as 0.

The index ops have data-dependent shapes: for CPU/GPU inference graphs (exports), not for
XLA or TPU programs, which need static shapes. The gathers are `tf.gather`: keras' `take`
adds a negative-index fix-up to each (five more ops a gather, per block and layer, which
tripled tf2onnx's conversion time); these indices are never negative.
"""

from keras import ops
import tensorflow as tf

ATTENTION_BLOCKS = 8


def extents(mask):
  """Each sequence's extent: one past its last real token (any mask, not only a prefix).

  mask: int or bool [batch, seq], 1 (True) for a real token. Returns int32 [batch].
  """
  mask = ops.cast(mask, "int32") > 0
  seq = ops.shape(mask)[1]
  return ops.max(ops.where(mask, ops.arange(1, seq + 1, dtype="int32")[None], 0), axis=1,
                 initial=0)


class TokenPacking:
  """Where a batch's real tokens are, and attention's blocks of similar-length sequences.

  Args:
    mask: int or bool [batch, seq], 1 (True) for a real token.
    attention_blocks: how many groups of sequences attention runs in (some are empty when
      the batch has fewer sequences); None: `ATTENTION_BLOCKS`.
  """

  def __init__(self, mask, attention_blocks=None):
    attention_blocks = ATTENTION_BLOCKS if attention_blocks is None else attention_blocks
    mask = ops.cast(mask, "int32") > 0  # [batch, seq]
    flat = ops.reshape(mask, (-1,))  # [batch * seq]
    # The real positions in order, row by row.
    self.positions = ops.cast(ops.nonzero(flat)[0], "int32")  # [tokens]
    tokens = ops.shape(self.positions)[0]
    # For each position of the padded batch, the packed row it reads; padding reads row
    # `tokens`, which `unpack` makes a row of zeros.
    rows = ops.reshape(ops.cumsum(ops.cast(flat, "int32")) - 1, ops.shape(mask))
    self.rows = ops.where(mask, rows, tokens)  # [batch, seq]
    self._blocks(mask, tokens, attention_blocks)

  def _blocks(self, mask, tokens, count):
    batch = ops.shape(mask)[0]
    extent = extents(mask)  # [batch]
    order = ops.argsort(-extent)  # longest first
    size = (batch + count - 1) // count
    # Per block: the packed row each [sequence, position] reads (padding reads the last
    # token, masked out as a key; as a query its row is dropped) and the key mask.
    self.block_rows, self.block_masks = [], []
    self._block_real, destinations = [], []
    for b in range(count):
      members = order[b * size:(b + 1) * size]  # [n], n = 0 past the batch's end
      length = ops.max(tf.gather(extent, members), initial=0)
      rows = tf.gather(self.rows, members)[:, :length]  # [n, length]
      real_mask = rows < tokens  # [n, length]
      self.block_rows.append(ops.minimum(rows, tokens - 1))
      self.block_masks.append(real_mask)
      real = ops.cast(ops.nonzero(ops.reshape(real_mask, (-1,)))[0], "int32")
      self._block_real.append(real)  # [block tokens], into the block's [n * length]
      destinations.append(tf.gather(ops.reshape(rows, (-1,)), real))
    # merge(): concatenated blocks' rows -> packed order.
    self._merge_order = ops.scatter(
        ops.concatenate(destinations, 0)[:, None], ops.arange(tokens, dtype="int32"),
        (tokens,))

  def pack(self, x):
    """[batch, seq, ...] -> [tokens, ...], the real positions only."""
    return _flat_rows(x, self.positions)

  def unpack(self, x):
    """[tokens, ...] -> [batch, seq, ...], zeros at padding."""
    zero_row = ops.zeros((1,) + tuple(x.shape[1:]), x.dtype)
    return tf.gather(ops.concatenate([x, zero_row], 0), self.rows)

  def split(self, x):
    """[tokens, ...] -> per attention block [n, length, ...]; see `block_masks`."""
    return [tf.gather(x, rows) for rows in self.block_rows]

  def merge(self, blocks):
    """Per attention block [n, length, ...] (as `split` gives) -> [tokens, ...]."""
    real = [_flat_rows(x, positions) for x, positions in zip(blocks, self._block_real)]
    return tf.gather(ops.concatenate(real, 0), self._merge_order)


def _flat_rows(x, positions):
  """[n, length, ...] -> [positions, ...]: rows of x flattened to [n * length, ...]."""
  return tf.gather(ops.reshape(x, (-1,) + tuple(x.shape[2:])), positions)
