"""Sentence (pair) classification and regression (GLUE) as a `tasks.Task`.

Loss: mean cross-entropy over the real examples (`is_real_example`, 0 for padding examples
of the original's TPU files), or mean squared error with one output (STS-B). As everywhere,
the loop divides the batch's loss sum by the number of real examples in the GLOBAL batch.
"""

import tensorflow as tf

from data_prep.classification import features as classifier_features
from official_bert.training import finetuning_input
from official_bert.tasks import base as tasks
from official_bert.modeling.encoder import BertEncoder
from official_bert.modeling.finetuning_models import BertClassifier


class ClassificationTask(finetuning_input.FixedLengthInputMixin, tasks.Task):
  """Args: bert_config; num_labels (1 with is_regression); seq_length of the records."""

  keep_features = ("label_ids", "is_real_example")  # passed through predictions to score

  def __init__(self, bert_config, num_labels, seq_length, is_regression=False,
               shuffle_buffer_size=10000):
    if is_regression and num_labels != 1:
      raise ValueError(f"regression takes num_labels=1, got {num_labels}")
    self.bert_config = bert_config
    self.num_labels = num_labels
    self.is_regression = is_regression
    self.features = classifier_features.classifier_schema(seq_length, is_regression)
    self.shuffle_buffer_size = shuffle_buffer_size
    self.loss_name = "regression_loss" if is_regression else "classification_loss"

  def build_model(self):
    model = BertClassifier(BertEncoder.from_bert_config(self.bert_config), self.num_labels,
                           name="bert_classifier")
    model.build()
    return model

  def _weights(self, features):
    return tf.cast(features["is_real_example"], tf.float32)  # [b]

  def loss_normalizers(self, features):
    return {self.loss_name: tf.reduce_sum(self._weights(features))}

  def loss_sums(self, features, outputs):
    logits = tf.cast(outputs["logits"], tf.float32)  # [b, num_labels]
    if self.is_regression:
      per_example = tf.square(logits[:, 0] - tf.cast(features["label_ids"], tf.float32))
    else:
      per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(
          tf.cast(features["label_ids"], tf.int32), logits)  # [b]
    return {self.loss_name: tf.reduce_sum(per_example * self._weights(features))}

  def metric_sums(self, features, outputs):
    weights = self._weights(features)
    if self.is_regression:  # never empty: the loop all-reduces this dict, which cannot be {}
      error = tf.abs(tf.cast(outputs["logits"][:, 0], tf.float32)
                     - tf.cast(features["label_ids"], tf.float32))
      return {"mean_absolute_error": (tf.reduce_sum(error * weights), tf.reduce_sum(weights))}
    hits = tf.cast(tf.equal(tf.argmax(outputs["logits"], -1, output_type=tf.int32),
                            tf.cast(features["label_ids"], tf.int32)), tf.float32)
    return {"accuracy": (tf.reduce_sum(hits * weights), tf.reduce_sum(weights))}
