"""Multiple choice (SWAG) as a `tasks.base.Task`: softmax over the choices' [CLS] scores.

Records hold each example's choices flattened ([num_choices * seq]); the input pipeline
reshapes them to [num_choices, seq], and `BertMultipleChoice` encodes every choice as its
own `[CLS] context [SEP] ending [SEP]` sequence.
"""


from data_prep import schema
from official_bert.modeling.encoder import BertEncoder
from official_bert.modeling.finetuning_models import BertMultipleChoice
from official_bert.tasks import base
from official_bert.tasks import losses


class MultipleChoiceTask(base.Task):
  """Args: bert_config; num_choices; seq_length of each choice."""

  keep_features = ("label_ids",)

  def __init__(self, bert_config, seq_length, num_choices=schema.SWAG_NUM_CHOICES,
               shuffle_buffer_size=10000):
    self.bert_config = bert_config
    self.num_choices = num_choices
    self.features = schema.swag_features(seq_length, num_choices)
    shape = (num_choices, seq_length)
    self.shapes = {"input_word_ids": shape, "input_mask": shape, "input_type_ids": shape}
    self.shuffle_buffer_size = shuffle_buffer_size

  def build_model(self):
    model = BertMultipleChoice(BertEncoder.from_bert_config(self.bert_config),
                               name="bert_multiple_choice")
    model.build()
    return model

  def loss_normalizers(self, features):
    return {"multiple_choice_loss": losses.count(features["label_ids"])}

  def loss_sums(self, features, outputs):
    nll = losses.sparse_nll(features["label_ids"], outputs["logits"])  # [b]
    return {"multiple_choice_loss": losses.weighted_sum(nll)}

  def metric_sums(self, features, outputs):
    return {"accuracy": losses.accuracy_sums(features["label_ids"], outputs["logits"])}
