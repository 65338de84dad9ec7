"""Token classification (NER) as a `tasks.Task`.

Only the first WordPiece of each word carries a label (`label_weights` 1.0); the other
pieces, [CLS], [SEP] and padding weigh 0. The loss is the cross-entropy summed over labeled
pieces divided by the number of labeled pieces in the global batch, so a batch of long
sentences weighs more than a batch of short ones, as one big batch would.
"""

import tensorflow as tf

from data_prep.tagging import features as ner_features
from official_bert.training import finetuning_input
from official_bert.tasks import base as tasks
from official_bert.modeling.encoder import BertEncoder
from official_bert.modeling.finetuning_models import BertTokenClassifier


class TaggingTask(finetuning_input.FixedLengthInputMixin, tasks.Task):
  """Args: bert_config; num_labels (tags, "O" included); seq_length of the records."""

  keep_features = ("label_ids", "label_weights")

  def __init__(self, bert_config, num_labels, seq_length, shuffle_buffer_size=10000):
    self.bert_config = bert_config
    self.num_labels = num_labels
    self.features = ner_features.ner_schema(seq_length)
    self.shuffle_buffer_size = shuffle_buffer_size

  def build_model(self):
    model = BertTokenClassifier(BertEncoder.from_bert_config(self.bert_config),
                                self.num_labels, name="bert_token_classifier")
    model.build()
    return model

  def loss_normalizers(self, features):
    return {"tagging_loss": tf.reduce_sum(tf.cast(features["label_weights"], tf.float32))}

  def loss_sums(self, features, outputs):
    nll = tf.nn.sparse_softmax_cross_entropy_with_logits(
        tf.cast(features["label_ids"], tf.int32),
        tf.cast(outputs["logits"], tf.float32))  # [b, seq]
    weights = tf.cast(features["label_weights"], tf.float32)
    return {"tagging_loss": tf.reduce_sum(nll * weights)}

  def metric_sums(self, features, outputs):
    weights = tf.cast(features["label_weights"], tf.float32)  # [b, seq]
    hits = tf.cast(tf.equal(tf.argmax(outputs["logits"], -1, output_type=tf.int32),
                            tf.cast(features["label_ids"], tf.int32)), tf.float32)
    return {"token_accuracy": (tf.reduce_sum(hits * weights), tf.reduce_sum(weights))}
