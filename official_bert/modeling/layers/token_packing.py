"""`TokenPacking`: a batch's real tokens as one [tokens, ...] block, for work without padding.

Every part of a BERT layer but attention's seq x seq product acts on each position alone (the
Dense projections, GELU, LayerNorm: nearly all of the FLOPs), so it can run on the real
tokens only (input_mask 1) and skip the padding a batch of uneven texts carries: SST-2's
sentences average 25 WordPieces in batches padded to about 50, so half the work. Attention
unpacks its projections to [batch, seq, ...], masks padded keys as usual and packs the context
back. The real positions' values are those of the padded computation (float rounding aside);
a padded position comes back as 0.

The index ops have data-dependent shapes: for CPU/GPU inference graphs (exports), not for
XLA or TPU programs, which need static shapes.
"""

from keras import ops


class TokenPacking:
  """Where a batch's real tokens are.

  Args:
    mask: int or bool [batch, seq], 1 (True) for a real token.
  """

  def __init__(self, mask):
    shape = ops.shape(mask)  # [batch, seq]
    flat = ops.reshape(ops.cast(mask, "int32") > 0, (-1,))  # [batch * seq]
    # The real positions in order, row by row.
    self.positions = ops.cast(ops.nonzero(flat)[0], "int32")  # [tokens]
    # For each position of the padded batch, the packed row it reads. Padding reads row
    # `tokens`, a row of zeros (`rows`), or the last real row before it (`rows_or_first`,
    # row 0 before the first), for values that attention masks out anyway.
    rows = ops.cumsum(ops.cast(flat, "int32")) - 1
    num_tokens = ops.shape(self.positions)[0]
    self.rows = ops.reshape(ops.where(flat, rows, num_tokens), shape)  # [batch, seq]
    self.rows_or_first = ops.reshape(ops.maximum(rows, 0), shape)  # [batch, seq]

  def pack(self, x):
    """[batch, seq, ...] -> [tokens, ...], the real positions only."""
    flat = ops.reshape(x, (-1,) + tuple(x.shape[2:]))  # [batch * seq, ...]
    return ops.take(flat, self.positions, axis=0)

  def unpack(self, x, pad_with_zeros=True):
    """[tokens, ...] -> [batch, seq, ...]: zeros at padding, or without `pad_with_zeros` a
    real token's values there (no copy of x; for keys and values attention masks out)."""
    if not pad_with_zeros:
      return ops.take(x, self.rows_or_first, axis=0)
    zero_row = ops.zeros((1,) + tuple(x.shape[1:]), x.dtype)
    return ops.take(ops.concatenate([x, zero_row], 0), self.rows, axis=0)
