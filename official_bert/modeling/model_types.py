"""`--model_type` names <-> Keras models, shared by the converter and the exporter.

  type             model
  encoder          BertEncoder
  pretraining      BertPretrainingModel (MLM + NSP, or MLM only)
  classifier       BertClassifier(num_labels)
  squad            BertSpanLabeler
  tagger           BertTokenClassifier(num_labels)
  multiple_choice  BertMultipleChoice (SWAG)
  feature_tagger   BertFeatureTagger(num_labels, frozen encoder + BiLSTM; its `head_config`)

The names of each type's weights in checkpoint files, and the type a file holds, are the
interop side's (`interop.weight_names`): a model knows no file format.
"""

from official_bert.modeling import feature_tagger
from official_bert.modeling import finetuning_models
from official_bert.modeling.encoder import BertEncoder
from official_bert.modeling.pretraining_model import BertPretrainingModel
from official_bert.modeling.sentence_embedding import SentenceEmbedder

MODEL_TYPES = ("encoder", "pretraining", "classifier", "squad", "tagger", "multiple_choice",
               "feature_tagger")
NEEDS_NUM_LABELS = ("classifier", "tagger", "feature_tagger")
# The types with a task head of their own (one is not another's; encoder and pretraining are
# the pretrained model's).
HEAD_TYPES = tuple(t for t in MODEL_TYPES if t not in ("encoder", "pretraining"))


def is_other_head(trained, requested):
  """Whether `requested` names another task head than the one a model was `trained` as (a
  classifier's head read as a tagger's: the same tensors, another meaning). Its encoder, or a
  type either side does not know, is not."""
  return trained in HEAD_TYPES and requested in HEAD_TYPES and requested != trained


def skips_padding(model_type, static_shapes):
  """Whether inference of `model_type` runs the Transformer layers on the real tokens only
  (`BertEncoder.skip_padding`, `TokenPacking`): the one decision, for the Python API's
  evaluate/predict and every export.

  Not with `static_shapes` (TFLite's converter; XLA-compiled steps, which Keras compiles on
  GPUs; TPU programs), nor for squad: the original's n-best takes the top logits of every
  position, padding included, before it drops invalid spans, so the padded positions' logits
  must be the padded computation's.
  """
  return not static_shapes and model_type != "squad"


def packs_training(model, static_shapes):
  """Whether `model`'s training steps run the Transformer layers on the real tokens only
  (`BertEncoder.pack_training`): where every loss and metric reads real positions only, the
  fine-tuning models that skip padding at inference (`skips_padding`: not squad) and
  sentence embedders (their pooling masks the padding). Not with `static_shapes` (XLA, TPU
  programs); not pretraining, whose records are mostly full."""
  if isinstance(model, SentenceEmbedder):
    return not static_shapes
  model_type = model_type_of(model)
  return model_type not in (None, "encoder", "pretraining") and skips_padding(
      model_type, static_shapes)


def build_model(model_type, bert_config, num_labels=None, head_config=None, next_sentence=True):
  """A built model of `model_type` (no dropout at inference: Keras applies it only in training).

  head_config: for feature_tagger, its layers, combine, lstm_units and lstm_layers.
  next_sentence: pretraining: False for a masked-LM-only model (no next-sentence head).
  """
  if model_type not in MODEL_TYPES:
    raise ValueError(f"unknown model type {model_type!r}; expected one of {list(MODEL_TYPES)}")
  if model_type in NEEDS_NUM_LABELS and not num_labels:
    raise ValueError(f"--model_type={model_type} needs --num_labels (or --label_names)")
  encoder = BertEncoder.from_bert_config(bert_config, name="encoder")
  if model_type == "encoder":
    model = encoder
  elif model_type == "pretraining":
    model = BertPretrainingModel(encoder, next_sentence=next_sentence, name="pretraining")
  elif model_type == "classifier":
    model = finetuning_models.BertClassifier(encoder, num_labels, name="classifier")
  elif model_type == "squad":
    model = finetuning_models.BertSpanLabeler(encoder, name="squad")
  elif model_type == "multiple_choice":
    model = finetuning_models.BertMultipleChoice(encoder, name="multiple_choice")
  elif model_type == "feature_tagger":
    if not head_config:
      raise ValueError("--model_type=feature_tagger needs the head's configuration (its "
                       "layers, combine, lstm_units and lstm_layers, which run_ner "
                       "--feature_based writes beside its checkpoints)")
    model = feature_tagger.BertFeatureTagger(encoder, num_labels, name="feature_tagger",
                                             **head_config)
  else:
    model = finetuning_models.BertTokenClassifier(encoder, num_labels, name="tagger")
  model.build()
  return model


def model_type_of(model):
  """The `MODEL_TYPES` name of a model `build_model` builds, by its class; None for another."""
  for model_type, cls in (("pretraining", BertPretrainingModel),
                          ("feature_tagger", feature_tagger.BertFeatureTagger),
                          ("classifier", finetuning_models.BertClassifier),
                          ("squad", finetuning_models.BertSpanLabeler),
                          ("tagger", finetuning_models.BertTokenClassifier),
                          ("multiple_choice", finetuning_models.BertMultipleChoice),
                          ("encoder", BertEncoder)):
    if isinstance(model, cls):
      return model_type
  return None
