"""`--model_type` names -> Keras models, shared by the converter and the exporter.

  type          model                            TF1 names of its weights
  encoder       BertEncoder                      bert/*
  pretraining   BertPretrainingModel (MLM + NSP) bert/*, cls/predictions/*, cls/seq_relationship/*
  classifier    BertClassifier(num_labels)       bert/*, output_weights, output_bias
  squad         BertSpanLabeler                  bert/*, cls/squad/*
  tagger        BertTokenClassifier(num_labels)  bert/*, cls/token_classifier/*
  multiple_choice  BertMultipleChoice (SWAG)     bert/*, cls/multiple_choice/*
  feature_tagger   BertFeatureTagger(num_labels, frozen encoder + BiLSTM; its `head_config`)
                                                 bert/*, cls/feature_tagger/*
"""

from official_bert.interop import model_files
from official_bert.modeling import feature_tagger
from official_bert.modeling import finetuning_models
from official_bert.modeling.encoder import BertEncoder
from official_bert.modeling.pretraining_model import BertPretrainingModel

MODEL_TYPES = ("encoder", "pretraining", "classifier", "squad", "tagger", "multiple_choice",
               "feature_tagger")
NEEDS_NUM_LABELS = ("classifier", "tagger", "feature_tagger")


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
      raise ValueError(f"--model_type=feature_tagger needs the head's configuration "
                       f"({model_files.HEAD_CONFIG_FILE}, written by run_ner --feature_based)")
    model = feature_tagger.BertFeatureTagger(encoder, num_labels, name="feature_tagger",
                                             **head_config)
  else:
    model = finetuning_models.BertTokenClassifier(encoder, num_labels, name="tagger")
  model.build()
  return model


def infer_model_type(tensor_names):
  """The model type a checkpoint's tensor names fit best (for `--model_type` left unset)."""
  names = set(tensor_names)
  if any(n.startswith("cls/predictions/") for n in names):
    return "pretraining"
  if any(n.startswith("cls/squad/") for n in names):
    return "squad"
  if any(n.startswith(feature_tagger.TF1_SCOPE) for n in names):
    return "feature_tagger"
  if any(n.startswith("cls/token_classifier/") for n in names):
    return "tagger"
  if any(n.startswith("cls/multiple_choice/") for n in names):
    return "multiple_choice"
  if "output_weights" in names:
    return "classifier"
  return "encoder"


def num_labels_in(tensors, model_type):
  """The number of labels of a classifier/tagger head stored in `tensors`, or None."""
  name = {"classifier": "output_bias", "tagger": "cls/token_classifier/output_bias",
          "feature_tagger": feature_tagger.TF1_SCOPE + "output_bias"}.get(model_type)
  return int(tensors[name].shape[0]) if name in tensors else None
