"""SQuAD span prediction as a `tasks.base.Task`: model, input pipeline, loss and metrics.

Loss as the original run_squad.py: per example the mean of the start and end position
cross-entropies over the whole sequence, (CE(start) + CE(end)) / 2, averaged over the
examples of the global batch (the loop divides the sums by the number of examples).
"""


from data_prep import schema
from official_bert.modeling.encoder import BertEncoder
from official_bert.modeling.finetuning_models import BertSpanLabeler
from official_bert.tasks import base
from official_bert.tasks import losses


class SquadTask(base.Task):
  """Start/end logits over the window; `build_model` makes a `BertSpanLabeler`."""

  loss_epsilons = {"span_loss": 0.0}
  keep_features = ("unique_ids",)  # passed through predictions to map logits to windows
  # Never cut: the original's span loss is a softmax over every position of the window,
  # padding included, so a shorter batch would change the loss (the logits at real tokens
  # stay the same). And start/end logits have a position axis (`position_outputs`).
  token_features = ()
  position_outputs = True

  def __init__(self, bert_config, seq_length, shuffle_buffer_size=10000):
    self.bert_config = bert_config
    self.seq_length = seq_length
    self.shuffle_buffer_size = shuffle_buffer_size

  def build_model(self):
    encoder = BertEncoder.from_bert_config(self.bert_config)
    model = BertSpanLabeler(encoder, name="bert_span_labeler")
    model.build()
    return model

  def record_features(self, is_training):
    # Training windows carry answer positions; prediction windows only their unique id.
    return schema.squad_features(self.seq_length, is_training)

  # Prediction windows carry no answer positions: evaluated during training (run_squad
  # --eval_every_steps), they have no loss or span metrics, only the job's official scores.
  def loss_normalizers(self, features):
    if "start_positions" not in features:
      return {}
    return {"span_loss": losses.count(features["start_positions"])}

  def loss_sums(self, features, outputs):
    if "start_positions" not in features:
      return {}
    start = losses.sparse_nll(features["start_positions"], outputs["start_logits"])  # [b]
    end = losses.sparse_nll(features["end_positions"], outputs["end_logits"])  # [b]
    return {"span_loss": losses.weighted_sum((start + end) / 2.0)}

  def metric_names(self):
    return ("start_accuracy", "end_accuracy", "span_accuracy")

  def metric_sums(self, features, outputs):
    if "start_positions" not in features:
      return {}
    n = losses.count(features["start_positions"])
    start_hit = losses.argmax_hits(features["start_positions"], outputs["start_logits"])
    end_hit = losses.argmax_hits(features["end_positions"], outputs["end_logits"])
    return {"start_accuracy": (losses.weighted_sum(start_hit), n),
            "end_accuracy": (losses.weighted_sum(end_hit), n),
            "span_accuracy": (losses.weighted_sum(start_hit * end_hit), n)}
