"""Masked LM + next sentence prediction as a `Task`, as the original run_pretraining.py."""

from data_prep import schema
from official_bert.modeling.encoder import BertEncoder
from official_bert.modeling.pretraining_model import BertPretrainingModel
from official_bert.tasks import base
from official_bert.tasks import losses


class PretrainingTask(base.Task):
  """Masked-LM loss over the real predictions (+1e-5) plus next-sentence loss per example."""

  loss_epsilons = {"masked_lm_loss": 1e-5, "next_sentence_loss": 0.0}

  def __init__(self, bert_config, seq_length, max_predictions_per_seq,
               shuffle_buffer_size=10000):
    self.bert_config = bert_config
    self.seq_length = seq_length
    self.max_predictions_per_seq = max_predictions_per_seq
    self.features = schema.pretraining_features(seq_length, max_predictions_per_seq)
    self.shuffle_buffer_size = shuffle_buffer_size

  def build_model(self):
    encoder = BertEncoder.from_bert_config(self.bert_config)
    model = BertPretrainingModel(encoder, name="bert_pretraining")
    model.build()
    return model

  def input_id_limits(self):
    return dict(super().input_id_limits(),
                masked_lm_ids=("vocab_size", self.bert_config.vocab_size))

  def loss_normalizers(self, features):
    return {"masked_lm_loss": losses.count(features["masked_lm_ids"],
                                           features["masked_lm_weights"]),
            "next_sentence_loss": losses.count(features["next_sentence_labels"])}

  def loss_sums(self, features, outputs):
    mlm_nll = losses.sparse_nll(features["masked_lm_ids"],
                                outputs["masked_lm_logits"])  # [b, P]
    nsp_nll = losses.sparse_nll(features["next_sentence_labels"],
                                outputs["next_sentence_logits"])  # [b]
    return {"masked_lm_loss": losses.weighted_sum(mlm_nll, features["masked_lm_weights"]),
            "next_sentence_loss": losses.weighted_sum(nsp_nll)}

  def metric_sums(self, features, outputs):
    return {"masked_lm_accuracy": losses.accuracy_sums(
                features["masked_lm_ids"], outputs["masked_lm_logits"],
                features["masked_lm_weights"]),
            "next_sentence_accuracy": losses.accuracy_sums(
                features["next_sentence_labels"], outputs["next_sentence_logits"])}
