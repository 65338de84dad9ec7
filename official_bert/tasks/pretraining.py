"""Masked LM + next sentence prediction as a `Task`, as the original run_pretraining.py.

Two departures, each a flag of run_pretraining and off by default: `next_sentence=False` (no
next-sentence head, loss or metrics: masked LM only) and `masking` (records written unmasked,
`--masking=none`, masked per batch in the input pipeline: `training.dynamic_masking`).
"""

from data_prep import schema
from official_bert.modeling.encoder import BertEncoder
from official_bert.modeling.pretraining_model import BertPretrainingModel
from official_bert.tasks import base
from official_bert.tasks import losses
from official_bert.training import dynamic_masking
from official_bert.training import input_pipeline


class PretrainingTask(base.Task):
  """Masked-LM loss over the real predictions (+1e-5) plus next-sentence loss per example.

  Args:
    next_sentence: False for masked-LM-only pretraining (no NSP head, loss or metrics).
    masking: a `dynamic_masking.MaskingOptions` to read `--masking=none` records and mask
      them in the input pipeline; None reads records masked offline (the original).
  """

  loss_epsilons = {"masked_lm_loss": 1e-5, "next_sentence_loss": 0.0}

  def __init__(self, bert_config, seq_length, max_predictions_per_seq,
               shuffle_buffer_size=10000, next_sentence=True, masking=None):
    self.bert_config = bert_config
    self.seq_length = seq_length
    self.max_predictions_per_seq = max_predictions_per_seq
    self.next_sentence = next_sentence
    self.masking = masking
    if masking is None:
      self.features = schema.pretraining_features(seq_length, max_predictions_per_seq)
    else:
      self.features = schema.unmasked_pretraining_features(seq_length)
    self.shuffle_buffer_size = shuffle_buffer_size

  def build_model(self):
    encoder = BertEncoder.from_bert_config(self.bert_config)
    model = BertPretrainingModel(encoder, next_sentence=self.next_sentence,
                                 name="bert_pretraining")
    model.build()
    return model

  def build_dataset(self, input_patterns, per_replica_batch_size, is_training,
                    input_context=None, seed=None, skip_examples=0):
    """`Task.build_dataset`, after checking the records are of the kind the flags expect."""
    dynamic_masking.check_record_kind(input_pipeline.expand_patterns(input_patterns),
                                      self.masking is not None)
    return super().build_dataset(input_patterns, per_replica_batch_size, is_training,
                                 input_context=input_context, seed=seed,
                                 skip_examples=skip_examples)

  def batch_transform(self, input_context=None):
    """With dynamic masking, each batch is masked as a function of (seed, pipeline, element
    index in the stream), so a resumed run masks exactly as the uninterrupted one."""
    if self.masking is None:
      return None
    pipeline_id = input_context.input_pipeline_id if input_context else 0
    return dynamic_masking.batch_masker(self.masking, pipeline_id)

  def input_id_limits(self):
    return dict(super().input_id_limits(),
                masked_lm_ids=("vocab_size", self.bert_config.vocab_size))

  def loss_normalizers(self, features):
    out = {"masked_lm_loss": losses.count(features["masked_lm_ids"],
                                          features["masked_lm_weights"])}
    if self.next_sentence:
      out["next_sentence_loss"] = losses.count(features["next_sentence_labels"])
    return out

  def loss_sums(self, features, outputs):
    mlm_nll = losses.sparse_nll(features["masked_lm_ids"],
                                outputs["masked_lm_logits"])  # [b, P]
    out = {"masked_lm_loss": losses.weighted_sum(mlm_nll, features["masked_lm_weights"])}
    if self.next_sentence:
      nsp_nll = losses.sparse_nll(features["next_sentence_labels"],
                                  outputs["next_sentence_logits"])  # [b]
      out["next_sentence_loss"] = losses.weighted_sum(nsp_nll)
    return out

  def metric_names(self):
    """The keys of `metric_sums`."""
    return ("masked_lm_accuracy",) + (("next_sentence_accuracy",) if self.next_sentence else ())

  def metric_sums(self, features, outputs):
    out = {"masked_lm_accuracy": losses.accuracy_sums(
        features["masked_lm_ids"], outputs["masked_lm_logits"], features["masked_lm_weights"])}
    if self.next_sentence:
      out["next_sentence_accuracy"] = losses.accuracy_sums(
          features["next_sentence_labels"], outputs["next_sentence_logits"])
    return out
