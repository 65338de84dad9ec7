"""Sentence (pair) classification and regression (GLUE) as a `tasks.Task`.

Loss: mean cross-entropy over the real examples (`is_real_example`, 0 for padding examples
of the original's TPU files), or mean squared error with one output (STS-B). As everywhere,
the loop divides the batch's loss sum by the number of real examples in the GLOBAL batch.
"""

import tensorflow as tf

from data_prep import schema
from official_bert.modeling.encoder import BertEncoder
from official_bert.modeling.finetuning_models import BertClassifier
from official_bert.tasks import base
from official_bert.tasks import losses


class ClassificationTask(base.Task):
  """Args: bert_config; num_labels (1 with is_regression); seq_length of the records."""

  keep_features = ("label_ids", "is_real_example")  # passed through predictions to score

  def __init__(self, bert_config, num_labels, seq_length, is_regression=False,
               shuffle_buffer_size=10000):
    if is_regression and num_labels != 1:
      raise ValueError(f"regression takes num_labels=1, got {num_labels}")
    self.bert_config = bert_config
    self.num_labels = num_labels
    self.is_regression = is_regression
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

  def loss_normalizers(self, features):
    return {self.loss_name: losses.count(features["label_ids"], self._weights(features))}

  def loss_sums(self, features, outputs):
    logits = tf.cast(outputs["logits"], tf.float32)  # [b, num_labels]
    if self.is_regression:
      per_example = tf.square(logits[:, 0] - tf.cast(features["label_ids"], tf.float32))
    else:
      per_example = losses.sparse_nll(features["label_ids"], logits)  # [b]
    return {self.loss_name: losses.weighted_sum(per_example, self._weights(features))}

  def metric_sums(self, features, outputs):
    weights = self._weights(features)
    if self.is_regression:  # never empty: the loop all-reduces this dict, which cannot be {}
      error = tf.abs(tf.cast(outputs["logits"][:, 0], tf.float32)
                     - tf.cast(features["label_ids"], tf.float32))
      return {"mean_absolute_error": (losses.weighted_sum(error, weights),
                                      losses.count(error, weights))}
    return {"accuracy": losses.accuracy_sums(features["label_ids"], outputs["logits"], weights)}
