"""Sentence (pair) classification and regression (GLUE, own files) as a `tasks.base.Task`.

Loss: mean cross-entropy over the real examples (`is_real_example`, 0 for padding examples
of the original's TPU files), or mean squared error with one output (STS-B). As everywhere,
the loop divides the batch's loss sum by the number of real examples in the GLOBAL batch.

Own files add `multi_label` (a sigmoid per label; the loss is the binary cross-entropy
averaged over the labels, then over the examples) and `class_weights` for single-label
classification: example i weighs w[label_i], and the normalizer is the sum of those weights
(a weighted mean, as PyTorch's CrossEntropyLoss(weight=w)), so the loss keeps its scale and
the sums/normalizers contract of `base.Task` holds across replicas and accumulation.
"""

from keras import ops

from data_prep import schema
from official_bert.modeling.encoder import BertEncoder
from official_bert.modeling.finetuning_models import BertClassifier
from official_bert.tasks import base
from official_bert.tasks import losses


class ClassificationTask(base.Task):
  """Args: bert_config; num_labels (1 with is_regression); seq_length of the records;
  problem_type (single_label, multi_label, regression; default from is_regression);
  class_weights (a weight per label, single_label only)."""

  keep_features = ("label_ids", "is_real_example")  # passed through predictions to score

  def __init__(self, bert_config, num_labels, seq_length, is_regression=False,
               shuffle_buffer_size=10000, problem_type=None, class_weights=None,
               multi_label_threshold=0.5):
    problem_type = problem_type or ("regression" if is_regression else "single_label")
    is_regression = problem_type == "regression"
    if is_regression and num_labels != 1:
      raise ValueError(f"regression takes num_labels=1, got {num_labels}")
    if class_weights is not None and (problem_type != "single_label"
                                      or len(class_weights) != num_labels):
      raise ValueError(f"class_weights: {num_labels} weights for single_label, got "
                       f"{len(class_weights)} for {problem_type}")
    self.bert_config = bert_config
    self.num_labels = num_labels
    self.is_regression = is_regression
    self.problem_type = problem_type
    self.class_weights = class_weights
    # multi_label: a label is predicted where its probability exceeds this (exact_match's
    # too, as the predictions and the final scores read them).
    self.multi_label_threshold = float(multi_label_threshold)
    if problem_type == "multi_label":
      self.features = schema.multi_label_classifier_features(seq_length, num_labels)
    else:
      self.features = schema.classifier_features(seq_length, is_regression)
    self.shuffle_buffer_size = shuffle_buffer_size
    self.loss_name = "regression_loss" if is_regression else "classification_loss"

  def build_model(self):
    model = BertClassifier(BertEncoder.from_bert_config(self.bert_config), self.num_labels,
                           name="bert_classifier")
    model.build()
    return model

  def _weights(self, features):
    return features["is_real_example"]  # [b]: 0 for the original's padding examples

  def _loss_weights(self, features):
    """[b]: is_real_example, times the class weight of the example's label if any."""
    weights = ops.cast(ops.reshape(self._weights(features), (-1,)), "float32")
    if self.class_weights is None:
      return weights
    table = ops.convert_to_tensor(self.class_weights, "float32")
    labels = ops.reshape(ops.cast(features["label_ids"], "int32"), (-1,))
    return weights * ops.take(table, labels)

  def _multi_hot(self, features, logits):
    """[b, num_labels] float32 (the pipeline squeezes a one-label vector to [b])."""
    return ops.reshape(ops.cast(features["label_ids"], "float32"), ops.shape(logits))

  def loss_normalizers(self, features):
    return {self.loss_name: losses.count(features["is_real_example"],
                                         self._loss_weights(features))}

  def loss_sums(self, features, outputs):
    logits = ops.cast(outputs["logits"], "float32")  # [b, num_labels]
    if self.is_regression:
      per_example = ops.square(logits[:, 0] - ops.cast(features["label_ids"], "float32"))
    elif self.problem_type == "multi_label":
      per_example = ops.mean(ops.binary_crossentropy(
          self._multi_hot(features, logits), logits, from_logits=True), -1)
    else:
      per_example = losses.sparse_nll(ops.reshape(features["label_ids"], (-1,)), logits)  # [b]
    return {self.loss_name: losses.weighted_sum(per_example, self._loss_weights(features))}

  def metric_names(self):
    """The keys of `metric_sums`."""
    return {"regression": ("mean_absolute_error",), "multi_label": ("exact_match",)}.get(
        self.problem_type, ("accuracy",))

  def metric_sums(self, features, outputs):
    weights = self._weights(features)
    if self.is_regression:  # never empty: the loop all-reduces this dict, which cannot be {}
      error = ops.abs(ops.cast(outputs["logits"][:, 0], "float32")
                     - ops.cast(features["label_ids"], "float32"))
      return {"mean_absolute_error": (losses.weighted_sum(error, weights),
                                      losses.count(error, weights))}
    if self.problem_type == "multi_label":  # every label right
      probabilities = ops.sigmoid(ops.cast(outputs["logits"], "float32"))
      predicted = ops.cast(probabilities > self.multi_label_threshold, "float32")
      hits = ops.all(ops.equal(predicted, self._multi_hot(features, predicted)), -1)
      return {"exact_match": (losses.weighted_sum(ops.cast(hits, "float32"), weights),
                              losses.count(hits, weights))}
    return {"accuracy": losses.accuracy_sums(features["label_ids"], outputs["logits"], weights)}
