"""`TextEmbedder`: one vector per text, as the encoder export's `sentence_embedding`; trained
on text pairs as `run_embeddings` (Sentence-BERT).

  embedder = ob.TextEmbedder.from_preset(minilm_path)             # mean pooling, unit length
  vectors = embedder.encode(["a sentence", ...], batch_size=32)   # numpy [n, hidden]
  scores = vectors @ vectors.T                                    # cosine similarities

  embedder.fit((queries, answers), epochs=1, batch_size=32)      # in-batch negatives
  embedder.compile(loss="cosine", learning_rate=2e-5)            # scored pairs instead
  embedder.fit((first, second), scores, batch_size=16)
  embedder.evaluate_similarity((first, second), scores)          # {"pearson", "spearman"}
  embedder.evaluate_retrieval((queries, answers))                # {"recall@1", ..., "mrr@10"}

pooling: "mean" (the mean over real tokens: sentence-transformers' definition,
`modeling.sentence_embedding`), "cls" (the last layer's [CLS] vector) or "pooled" (BERT's
tanh pooler over [CLS]). The losses (`compile(loss=...)`) are `tasks.embedding`'s, the
commands': multiple_negatives (scale, symmetric), cosine (score_range: default 0 to the
highest score of the fit) and contrastive (margin).
"""

import math

import keras
import numpy as np
import tensorflow as tf

from official_bert.api import task_model
from official_bert.api.preprocessor import as_string_tensor
from official_bert.interop import model_folder
from official_bert.modeling import sentence_embedding
from official_bert.modeling.sentence_embedding import SentenceEmbedder
from official_bert.tasks import embedding
from official_bert.tasks import embedding_losses
from official_bert.tasks import metrics
from official_bert.tasks.embedding import EmbeddingTask

POOLINGS = sentence_embedding.POOLINGS
_LOSS_DEFAULTS = {"loss": "multiple_negatives", "scale": 20.0, "symmetric": False,
                  "margin": 0.5, "score_range": None}


@keras.saving.register_keras_serializable(package="official_bert")
class TextEmbedder(task_model.TaskModel):
  """Args: a `Backbone`, a `Preprocessor`, `pooling` (POOLINGS) and `normalize` (unit L2)."""

  model_type = "encoder"

  def __init__(self, backbone, preprocessor, pooling="mean", normalize=True, **kwargs):
    if pooling != "pooled":
      # The vectors never read [CLS]'s pooler: it gets no gradient (as the tagger's), and no
      # weight decay either, on every backend (JAX's and TensorFlow's zero gradients decayed it,
      # PyTorch's missing ones did not, so saved folders differed).
      backbone.pooler_dense.trainable = False
    network = SentenceEmbedder(backbone, pooling, normalize, name="embedder")
    super().__init__(network, preprocessor, _task(_LOSS_DEFAULTS), **kwargs)
    self._loss_options = dict(_LOSS_DEFAULTS)
    self.pooling = pooling
    self.normalize = bool(normalize)

  @classmethod
  def folder_sequence_length(cls, preset):
    """A sentence-transformers folder's length (all-MiniLM-L6-v2: 256): its vectors."""
    return model_folder.embedding_sequence_length(preset.path, preset.config)

  @classmethod
  def preset_arguments(cls, path, preset, stored, kwargs):
    """A saved TextEmbedder or a run_embeddings OUTPUT_DIR brings its pooling and
    normalization (defaults: mean, normalized); the encoder's weights load, nothing else."""
    if kwargs.get("pooling") is None:
      kwargs["pooling"] = stored.get("pooling") or "mean"
    if kwargs.get("normalize") is None:
      kwargs["normalize"] = stored.get("normalize_embeddings", True)
    return kwargs, None

  def validation_x_y(self, data):
    """fit's validation_data: what `x` takes, a (first, second) pair of texts, or with scores
    ((first, second), scores), or a Dataset."""
    first = data[0] if isinstance(data, tuple) and len(data) == 2 else None
    with_scores = isinstance(first, (tuple, list)) and len(first) == 2 and not isinstance(
        first[0], (str, bytes))  # first is itself the (first, second) pair of text lists
    if first is not None and not with_scores:
      return data, None
    return super().validation_x_y(data)

  # --- Keras ----------------------------------------------------------------------------------

  def call(self, inputs, training=None):
    return self.network(inputs, training=training)["embeddings"]

  def compile(self, optimizer=None, loss="multiple_negatives", metrics=None, scale=20.0,
              symmetric=False, margin=0.5, score_range=None, **kwargs):
    """`TaskModel.compile` (learning_rate=..., warmup_fraction=...) with one of the
    commands' losses by name (`embedding_losses.LOSSES`); a Keras loss object is Keras'."""
    if isinstance(loss, str) and loss in embedding_losses.LOSSES:
      self._loss_options = dict(loss=loss, scale=float(scale), symmetric=bool(symmetric),
                                margin=float(margin),
                                score_range=tuple(score_range) if score_range else None)
      self.task = _task(self._loss_options)
      loss = None
    super().compile(optimizer, loss, metrics, **kwargs)

  def get_compile_config(self):
    config = super().get_compile_config()
    if config and "bert_optimizer" in config:
      config = dict(config, embedding_loss=dict(self._loss_options))
    return config

  def compile_from_config(self, config):
    if "bert_optimizer" in config:
      self.compile(**config["bert_optimizer"], **config.get("embedding_loss", {}))
      if config.get("optimizer_built"):  # slots to load the file's optimizer state into
        self._build_optimizer()
    else:
      super().compile_from_config(config)

  def _task_batch(self, x, y, y_pred, sample_weight):
    return self.loss_features(x, y, sample_weight), {"embeddings": y_pred}

  def get_config(self):
    return dict(super().get_config(), pooling=self.pooling, normalize=self.normalize)

  # --- data -------------------------------------------------------------------------------

  def _pair_texts(self, x):
    if not (isinstance(x, tuple) and len(x) == 2):
      raise ValueError("x must be a (first_texts, second_texts) pair of text lists: "
                       "(query, positive) pairs, or pairs with scores in y")
    first, second = as_string_tensor(x[0], "x[0]"), as_string_tensor(x[1], "x[1]")
    if first.shape[0] != second.shape[0]:
      raise ValueError(f"x: {first.shape[0]} first texts but {second.shape[0]} second texts")
    return first, second

  def _scores(self, y, n):
    loss = self._loss_options["loss"]
    if y is None:
      if loss != "multiple_negatives":
        raise ValueError(f"loss={loss!r} needs a score per pair: fit(x, y=scores)")
      return np.full([n], math.nan, np.float32)
    y = np.asarray(list(y.to_numpy()) if hasattr(y, "to_numpy") else list(y), np.float32)
    if y.shape != (n,):
      raise ValueError(f"y has {y.size} scores for {n} pairs")
    if not np.isfinite(y).all():
      raise ValueError(f"y[{int(np.argmin(np.isfinite(y)))}] is not a number")
    if loss == "contrastive" and not np.isin(y, (0.0, 1.0)).all():
      bad = int(np.argmin(np.isin(y, (0.0, 1.0))))
      raise ValueError(f"y[{bad}] = {y[bad]:g}: the contrastive loss takes 1 (similar) or 0 "
                       "(dissimilar)")
    return y

  def _pairs(self, texts):
    """(first, second) [b] strings -> features [b, 2, seq], each text packed on its own."""
    first, second = self.preprocessor(texts[0]), self.preprocessor(texts[1])
    return self.trimmed({name: tf.stack([first[name], second[name]], axis=1)
                         for name in first})

  def make_dataset(self, x, y=None, batch_size=32, shuffle=False, seed=None):
    if not isinstance(x, tuple):  # texts to encode
      texts = as_string_tensor(x)
      return self.map_batches(task_model.batches((texts,), batch_size, False, None))
    texts = self._pair_texts(x)
    scores = self._scores(y, int(texts[0].shape[0]))
    dataset = task_model.batches((texts, scores), batch_size, shuffle, seed)
    return dataset.map(lambda t, s: (self._pairs(t), s), num_parallel_calls=task_model.AUTOTUNE)

  def map_batches(self, dataset):
    """A dataset of raw (texts,) batches, or ((first, second)[, scores]) batches."""
    def features(x, *rest):
      return (self._pairs(x) if isinstance(x, tuple) else self.trimmed(self.preprocessor(x)),
              ) + rest
    return dataset.map(features, num_parallel_calls=task_model.AUTOTUNE)

  def loss_features(self, x, y, sample_weight):
    ops = keras.ops
    n = ops.shape(x["input_word_ids"])[:1]
    scores = ops.full(n, math.nan) if y is None else ops.cast(y, "float32")
    real = (ops.ones(n, "float32") if sample_weight is None
            else ops.cast(sample_weight, "float32"))
    return {"scores": scores, "is_real_example": real}

  def fit(self, x=None, y=None, *args, **kwargs):
    """Trains on (first, second) text pairs, with scores `y` for the cosine and contrastive
    losses; the loss is `compile`'s (default: multiple_negatives)."""
    if not isinstance(x, tf.data.Dataset):
      self._pair_texts(x)  # a plain list of texts is for `encode`, not for training
    if not self.compiled:
      self.compile()
    o = self._loss_options
    if y is not None and o["loss"] == "multiple_negatives":
      raise ValueError(
          "fit: y holds a score per pair, but the loss is multiple_negatives (in-batch "
          "negatives), which takes (query, positive) pairs and no scores. For scored pairs "
          "(STS-style similarities) call compile(loss='cosine') first (or "
          "compile(loss='contrastive') for 1/0 labels); for in-batch negatives leave y out")
    if o["loss"] == "cosine" and not o["score_range"] and y is not None:
      # 0 to the highest score of y, as run_embeddings without --max_score.
      self.task = _task(o, embedding.cosine_score_range(
          np.asarray(list(y), np.float32), hint=" of y: give compile(score_range=(low, high))"))
    return super().fit(x, y, *args, **kwargs)

  # --- embeddings and their scores ------------------------------------------------------------

  def encode(self, texts, batch_size=32):
    """numpy float32 [n, hidden]: one embedding per text; [hidden] for one string, as
    sentence-transformers' `encode` gives (and [0, hidden] for no texts)."""
    task_model.check_batch_size(batch_size)
    if isinstance(texts, tf.data.Dataset):  # of text batches, as predict takes
      return np.asarray(self.predict_logits(texts, batch_size), np.float32)
    single = isinstance(texts, (str, bytes))
    texts = as_string_tensor(texts, "texts")
    if int(texts.shape[0]) == 0:
      return np.zeros([0, self.backbone.hidden_size], np.float32)
    embeddings = np.asarray(self.predict_logits(texts, batch_size), np.float32)
    return embeddings[0] if single else embeddings

  def predict(self, x, batch_size=32, verbose=None):
    """`encode` of a batch (Keras' predict: a list of texts, not one string or none): the
    texts' embeddings [n, hidden]."""
    del verbose  # Keras' argument: nothing to show
    self._check_inputs(x, None, "predict", batch_size)
    return self.encode(x, batch_size)

  def evaluate_similarity(self, x, y, batch_size=32):
    """STS: Pearson and Spearman correlation of the pairs' cosine similarity with `y`."""
    first, second = self._pair_texts(x)
    gold = np.asarray(list(y), np.float64)
    if gold.shape != (int(first.shape[0]),):
      raise ValueError(f"evaluate_similarity: {int(first.shape[0])} pairs but y holds "
                       f"{gold.size} scores (one per pair)")
    return metrics.similarity_scores(self.encode(first, batch_size),
                                     self.encode(second, batch_size), gold)

  def evaluate_retrieval(self, x, batch_size=32):
    """Retrieval: recall@1, recall@10 and MRR@10 of each first text's second text among all
    the distinct second texts (as run_embeddings' dev file without scores)."""
    first, second = self._pair_texts(x)
    return metrics.pair_retrieval_scores(self.encode(first, batch_size),
                                         self.encode(second, batch_size),
                                         [t.decode("utf-8") for t in second.numpy()])

  # --- files -------------------------------------------------------------------------------

  def run_settings(self):
    return dict(super().run_settings(), pooling=self.pooling,
                normalize_embeddings=self.normalize)

  def export_arguments(self, options):
    """The `export --model_type=encoder` SavedModel (raw text in): its `sentence_embedding`
    is `encode`'s; `mean_pooled_output` is normalized as this embedder."""
    options = dict(options)
    options.setdefault("normalize_embeddings", self.normalize)
    options.setdefault("pooling", self.pooling)
    return super().export_arguments(options)


def _task(options, score_range=None):
  """The loss of `compile`'s options (the model is the embedder's: no config needed)."""
  return EmbeddingTask(None, 1, options["loss"], scale=options["scale"],
                       symmetric=options["symmetric"], margin=options["margin"],
                       score_range=score_range or options["score_range"] or (0.0, 1.0))
