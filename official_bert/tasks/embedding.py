"""Sentence-embedding training (Sentence-BERT, Reimers and Gurevych 2019) as a `tasks.base.Task`.

Records hold two texts per example (`schema.embedding_pair_features`); the input pipeline
reshapes them to [2, seq] and `SentenceEmbedder` encodes each text on its own into one
vector, [batch, 2, hidden]. The loss is one of `embedding_losses.LOSSES` over the real pairs
(those with a score, for the losses that need one).

With several replicas, the multiple-negatives loss ranks each replica's pairs among that
replica's batch (as sentence-transformers without gathering across devices): a larger
per-replica batch gives more negatives.
"""

from keras import ops

from data_prep import schema
from official_bert.modeling.encoder import BertEncoder
from official_bert.modeling.sentence_embedding import SentenceEmbedder
from official_bert.tasks import base
from official_bert.tasks import embedding_losses
from official_bert.tasks import losses


def cosine_score_range(scores=None, low=0.0, high=None, hint=""):
  """The cosine loss's (low, high): a pair scored `low` trains towards cosine 0, one scored
  `high` towards 1. `high` defaults to the highest of `scores` (the training pairs'), else
  1.0; it must be above `low` (`hint` says where the range was given).

  The one rule of run_embeddings (--min_score, --max_score), `TextEmbedder.fit` and
  `EmbeddingTask(score_range=...)`.
  """
  if high is None:
    high = 1.0 if scores is None or not len(scores) else max(float(x) for x in scores)
  if not high > low:
    raise ValueError(f"the score range ({low:g}, {high:g}): the highest score must be above "
                     f"the lowest{hint}")
  return float(low), float(high)


class EmbeddingTask(base.Task):
  """Args: bert_config (None: the model is given to `build_model`'s caller); seq_length of each
  text; loss (`embedding_losses.LOSSES`); pooling and normalize (`SentenceEmbedder`); scale
  and symmetric (multiple_negatives); score_range (low, high): cosine's target is
  (score - low) / (high - low); margin (contrastive)."""

  keep_features = ("scores", "is_real_example")

  def __init__(self, bert_config, seq_length, loss="multiple_negatives", pooling="mean",
               normalize=False, scale=20.0, symmetric=False, score_range=(0.0, 1.0),
               margin=0.5, shuffle_buffer_size=10000):
    if loss not in embedding_losses.LOSSES:
      raise ValueError(f"loss={loss!r} must be one of {', '.join(embedding_losses.LOSSES)}")
    low, high = cosine_score_range(low=score_range[0], high=score_range[1])
    self.bert_config = bert_config
    self.seq_length = seq_length
    self.loss = loss
    self.pooling = pooling
    self.normalize = normalize
    self.scale = float(scale)
    self.symmetric = bool(symmetric)
    self.score_range = (float(low), float(high))
    self.margin = float(margin)
    self.features = schema.embedding_pair_features(seq_length)
    shape = (2, seq_length)
    self.shapes = {"input_word_ids": shape, "input_mask": shape, "input_type_ids": shape}
    self.shuffle_buffer_size = shuffle_buffer_size
    self.loss_name = f"{loss}_loss"

  def build_model(self):
    model = SentenceEmbedder(BertEncoder.from_bert_config(self.bert_config), self.pooling,
                             self.normalize, name="sentence_embedder")
    model.build()
    return model

  def _real(self, features):
    return ops.cast(ops.reshape(features["is_real_example"], (-1,)), "float32")  # [b]

  def _loss_weights(self, features):
    """[b]: real pairs, and for the losses that need a score, only those that have one."""
    real = self._real(features)
    if self.loss == "multiple_negatives":
      return real
    scores = ops.reshape(features["scores"], (-1,))
    return real * ops.cast(ops.isfinite(scores), "float32")

  def loss_normalizers(self, features):
    weights = self._loss_weights(features)
    return {self.loss_name: losses.count(weights, weights)}

  def loss_sums(self, features, outputs):
    pairs = ops.cast(outputs["embeddings"], "float32")  # [b, 2, hidden]
    a, b = pairs[:, 0], pairs[:, 1]
    weights = self._loss_weights(features)
    if self.loss == "multiple_negatives":
      per_pair = embedding_losses.multiple_negatives(a, b, weights, self.scale, self.symmetric)
    else:
      # NaN scores (none in the file) are zeroed before they can reach a gradient.
      scores = ops.reshape(features["scores"], (-1,))
      scores = ops.where(ops.isfinite(scores), scores, 0.0)
      if self.loss == "cosine":
        low, high = self.score_range
        per_pair = embedding_losses.cosine_similarity(a, b, (scores - low) / (high - low))
      else:
        per_pair = embedding_losses.contrastive(a, b, scores, self.margin)
    return {self.loss_name: losses.weighted_sum(per_pair, weights)}

  def metric_names(self):
    """The keys of `metric_sums`."""
    return ("in_batch_accuracy",)

  def metric_sums(self, features, outputs):
    """The share of real pairs whose second text is the nearest of the batch's (the
    multiple-negatives objective; for scored pairs, a rough signal only)."""
    pairs = ops.cast(outputs["embeddings"], "float32")
    real = self._real(features)
    hits = embedding_losses.in_batch_hits(pairs[:, 0], pairs[:, 1], real)
    return {"in_batch_accuracy": (losses.weighted_sum(hits, real), losses.count(real, real))}
