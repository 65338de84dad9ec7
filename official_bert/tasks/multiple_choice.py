"""Multiple choice (SWAG) as a `tasks.Task`: softmax over the choices' [CLS] scores.

Records hold each example's choices flattened ([num_choices * seq]); the input pipeline
reshapes them to [num_choices, seq], and `BertMultipleChoice` encodes every choice as its
own `[CLS] context [SEP] ending [SEP]` sequence.
"""

import tensorflow as tf

from data_prep.multiple_choice import swag
from official_bert.training import finetuning_input
from official_bert.tasks import base as tasks
from official_bert.modeling.encoder import BertEncoder
from official_bert.modeling.finetuning_models import BertMultipleChoice


class MultipleChoiceTask(finetuning_input.FixedLengthInputMixin, tasks.Task):
  """Args: bert_config; num_choices; seq_length of each choice."""

  keep_features = ("label_ids",)

  def __init__(self, bert_config, seq_length, num_choices=swag.NUM_CHOICES,
               shuffle_buffer_size=10000):
    self.bert_config = bert_config
    self.num_choices = num_choices
    self.features = swag.swag_schema(seq_length, num_choices)
    shape = (num_choices, seq_length)
    self.shapes = {"input_word_ids": shape, "input_mask": shape, "input_type_ids": shape}
    self.shuffle_buffer_size = shuffle_buffer_size

  def build_model(self):
    model = BertMultipleChoice(BertEncoder.from_bert_config(self.bert_config),
                               name="bert_multiple_choice")
    model.build()
    return model

  def loss_normalizers(self, features):
    return {"multiple_choice_loss": tf.cast(tf.shape(features["label_ids"])[0], tf.float32)}

  def loss_sums(self, features, outputs):
    nll = tf.nn.sparse_softmax_cross_entropy_with_logits(
        tf.cast(features["label_ids"], tf.int32),
        tf.cast(outputs["logits"], tf.float32))  # [b]
    return {"multiple_choice_loss": tf.reduce_sum(nll)}

  def metric_sums(self, features, outputs):
    hits = tf.cast(tf.equal(tf.argmax(outputs["logits"], -1, output_type=tf.int32),
                            tf.cast(features["label_ids"], tf.int32)), tf.float32)
    return {"accuracy": (tf.reduce_sum(hits), tf.cast(tf.size(hits), tf.float32))}
