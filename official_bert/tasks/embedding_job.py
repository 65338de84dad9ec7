"""run_embeddings' settings and job for `finetuning_runner`: sentence-embedding training on
text pairs (`data_prep.embeddings.pairs`), scored on a dev file of scored pairs (STS: Pearson
and Spearman of the cosine similarity) or of query/positive pairs (retrieval: recall@1,
recall@10 and MRR@10 of each query's positive among all the file's second texts).

The command-line reference is run_embeddings' docstring.
"""

import dataclasses
from typing import Optional

from data_prep import schema
from data_prep.classification import features as classifier_features
from data_prep.embeddings import pairs
from official_bert.interop import model_files
from official_bert.interop import run_record
from official_bert.modeling import sentence_embedding
from official_bert.tasks import embedding
from official_bert.tasks import embedding_losses
from official_bert.tasks import file_splits
from official_bert.tasks import metrics
from official_bert.tasks.embedding import EmbeddingTask
from official_bert.training import finetuning_runner
from official_bert.training import settings as settings_lib
from official_bert.training.settings import option


@dataclasses.dataclass(frozen=True)
class EmbeddingSettings(file_splits.DelimitedFilesSettings):
  """Text pairs in .tsv/.csv/.jsonl files (columns by header name)."""

  # sentence-transformers' recipe: PyTorch's AdamW, linear decay, every batch.
  recipe: str = option(
      "huggingface", "The training recipe as a whole (docs/optimizers.md): 'huggingface' "
      "(sentence-transformers': PyTorch's AdamW, --lr_schedule=linear, each epoch's last "
      "partial batch) or 'original' (google-research/bert's).",
      choices=tuple(settings_lib.RECIPES))

  text_column: str = option("text", "Column (header name, JSON key) of the first text.")
  text_b_column: str = option("text_b", "Column of the second text (the positive, for "
                              "--loss=multiple_negatives).")
  score_column: Optional[str] = option(
      None, "Column of the pair's gold score: a similarity (--loss=cosine; STS-B's 0-5) or "
      "1/0 for similar/dissimilar (--loss=contrastive). A dev file with it is scored by "
      "correlation, without it by retrieval.")
  loss: str = option(
      "multiple_negatives", "multiple_negatives: the other pairs' second texts are each "
      "pair's negatives (positive pairs, no score); cosine: cos(a, b) regressed onto the "
      "score scaled to [0, 1]; contrastive: similar pairs pulled together, dissimilar ones "
      "pushed past --margin.", choices=embedding_losses.LOSSES)
  scale: float = option(20.0, "multiple_negatives: the cosine similarities' scale (inverse "
                        "temperature).", above=0.0)
  symmetric: bool = option(False, "multiple_negatives: also rank the first texts for each "
                           "second text, averaging both directions.")
  margin: float = option(0.5, "contrastive: dissimilar pairs are pushed this far apart in "
                         "cosine distance.", above=0.0)
  min_score: float = option(0.0, "cosine: the score that means unrelated (target 0).")
  max_score: Optional[float] = option(
      None, "cosine: the score that means the same (target 1; default: the training file's "
      "highest score).")
  pooling: str = option("mean", "One vector per text: the mean of the last layer over the "
                        "real tokens (sentence-transformers'), its [CLS] vector, or BERT's "
                        "tanh pooler.", choices=sentence_embedding.POOLINGS)
  normalize_embeddings: bool = option(
      True, "Exports and extract_features give unit-length vectors (a dot product is then "
      "the cosine similarity). Training compares directions either way.")


class EmbeddingJob(file_splits.FileSplitsJob):
  """Pair files' records, scores and predictions for `finetuning_runner.run`."""

  def __init__(self, settings):
    super().__init__(settings)
    self.score_range = None

  def _read(self, split):
    s = self.settings
    need_scores = split == "train" and s.loss != "multiple_negatives"
    data = pairs.read_pairs(self._path(split), s.text_column, s.text_b_column, s.score_column,
                            need_scores, s.quoting)
    if need_scores and s.loss == "contrastive":
      pairs.check_binary(data.examples, self._path(split), data.lines)
    return data

  def _score_range(self):
    """cosine's (low, high): --min_score, and --max_score or the training file's highest
    score (a run that only evaluates: training's, else the dev file's)."""
    s = self.settings
    high = s.max_score
    stored = model_files.read_run_settings(s.output_dir).get("score_range")
    if high is None and "train" not in self.data and stored:
      return tuple(stored)  # an evaluation of a trained run: training's range
    # The training file's highest score, else (evaluation only) the dev file's.
    split = "train" if "train" in self.data else "dev"
    scores = None
    if high is None and split in self.data and self.data[split].has_labels:
      scores = pairs.score_range(self.data[split].examples, self._path(split))
    return embedding.cosine_score_range(scores, s.min_score, high,
                                        " (--min_score, --max_score)")

  def prepare(self):
    s = self.settings
    if s.do_train:
      self.data["train"] = self._read("train")
    if s.do_eval and s.dev_file:
      self.data["dev"] = self._read("dev")
    self.score_range = self._score_range() if s.loss == "cosine" else (0.0, 1.0)
    return finetuning_runner.prepare_splits(s, self._write)

  def _write(self, split, vocab):
    s = self.settings
    examples = self._examples(split)

    def build():
      tokenizer = classifier_features.cached_tokenizer(vocab, s.do_lower_case)
      columns = pairs.convert_pairs(examples, self.data[split].has_labels, s.max_seq_length,
                                    tokenizer)
      return schema.embedding_pair_features(s.max_seq_length), columns, {}

    record, meta = self._cached_records(
        split, vocab, examples, build, columns=[s.text_column, s.text_b_column, s.score_column],
        kind="embedding_pairs")
    return record, meta["num_examples"]

  def make_task(self, bert_config):
    s = self.settings
    return EmbeddingTask(bert_config, s.max_seq_length, s.loss, s.pooling,
                         s.normalize_embeddings, s.scale, s.symmetric, self.score_range,
                         s.margin)

  def _dev_has_scores(self):
    s = self.settings
    if "dev" not in self.data and s.dev_file:
      self.data["dev"] = self._read("dev")
    return "dev" in self.data and self.data["dev"].has_labels

  def main_metric(self):
    """--best_metric's default: Spearman's correlation (STS), else MRR@10 (retrieval)."""
    return "spearman" if self._dev_has_scores() else "mrr@10"

  def run_record(self):
    """For OUTPUT_DIR/run_settings.json: export and extract_features serve this embedder."""
    s = self.settings
    return run_record.RunRecord.of("encoder", task="embeddings", pooling=s.pooling,
                                   normalize_embeddings=s.normalize_embeddings, loss=s.loss,
                                   score_range=list(self.score_range))

  def score(self, split, predictions):
    real = predictions["is_real_example"].reshape(-1) > 0
    vectors = predictions["embeddings"][real]  # [n, 2, hidden]
    data = self.data[split]
    if data.has_labels:
      return metrics.similarity_scores(vectors[:, 0], vectors[:, 1],
                                       predictions["scores"][real].reshape(-1))
    return metrics.pair_retrieval_scores(vectors[:, 0], vectors[:, 1],
                                         [e.text_b for e in data.examples])

  def write_predictions(self, split, predictions):
    """`<split>_predictions.tsv`: a header, then one row per pair in the file's order: its id
    (if the file has one) and the cosine similarity of its two texts; scored if the file has
    scores. Returns the paths written."""
    real = predictions["is_real_example"].reshape(-1) > 0
    vectors = predictions["embeddings"][real]
    cos = metrics.pair_cosines(vectors[:, 0], vectors[:, 1])
    return self._write_prediction_rows(split, predictions, ["cosine_similarity"],
                                       [[f"{c:.6f}"] for c in cos])
