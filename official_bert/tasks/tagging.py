"""Token classification (NER) as a `tasks.base.Task`.

Only the first WordPiece of each word carries a label (`label_weights` 1.0); the other
pieces, [CLS], [SEP] and padding weigh 0. The loss is the cross-entropy summed over labeled
pieces divided by the number of labeled pieces in the global batch, so a batch of long
sentences weighs more than a batch of short ones, as one big batch would.

With a `head_config` the model is the feature-based `BertFeatureTagger` (frozen encoder,
chosen layers, BiLSTM) instead of fine-tuning's linear head on the last layer.
"""
from data_prep import schema
from official_bert.modeling.encoder import BertEncoder
from official_bert.modeling.feature_tagger import BertFeatureTagger
from official_bert.modeling.finetuning_models import BertTokenClassifier
from official_bert.tasks import base
from official_bert.tasks import losses


class TaggingTask(base.Task):
  """Args: bert_config; num_labels (tags, "O" included); seq_length of the records;
  head_config: `BertFeatureTagger` arguments (layers, combine, lstm_units, lstm_layers) for
  the feature-based model, or None to fine-tune."""

  keep_features = ("label_ids", "label_weights")
  # A label and a weight per position: cut with the inputs (padding weighs 0).
  token_features = base.Task.token_features + ("label_ids", "label_weights")
  position_outputs = True  # logits [b, seq, labels]

  def __init__(self, bert_config, num_labels, seq_length, shuffle_buffer_size=10000,
               head_config=None):
    self.bert_config = bert_config
    self.num_labels = num_labels
    self.features = schema.ner_features(seq_length)
    self.shuffle_buffer_size = shuffle_buffer_size
    self.head_config = head_config

  def build_model(self):
    encoder = BertEncoder.from_bert_config(self.bert_config)
    if self.head_config:
      model = BertFeatureTagger(encoder, self.num_labels, name="bert_feature_tagger",
                                **self.head_config)
    else:
      model = BertTokenClassifier(encoder, self.num_labels, name="bert_token_classifier")
    model.build()
    return model

  def loss_normalizers(self, features):
    return {"tagging_loss": losses.count(features["label_ids"], features["label_weights"])}

  def loss_sums(self, features, outputs):
    nll = losses.sparse_nll(features["label_ids"], outputs["logits"])  # [b, seq]
    return {"tagging_loss": losses.weighted_sum(nll, features["label_weights"])}

  def metric_names(self):
    return ("token_accuracy",)

  def metric_sums(self, features, outputs):
    return {"token_accuracy": losses.accuracy_sums(features["label_ids"], outputs["logits"],
                                                   features["label_weights"])}
