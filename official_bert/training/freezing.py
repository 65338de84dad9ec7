"""Which weights fine-tuning trains: the whole model, the head only, or all but the lowest
layers (`--freeze_encoder`, `--freeze_layers`).

A frozen weight is made non-trainable before the optimizer is built, so it gets no gradient,
no optimizer slots and no weight decay: it is bit-identical after training. Frozen layers
still run with dropout in training, like the rest of the encoder (a feature-based model, whose
encoder is frozen by construction, runs it without).
"""

from absl import logging
import numpy as np


def freeze(model, freeze_encoder=False, freeze_layers=0):
  """Freezes `model.encoder` entirely, or its embeddings and lowest `freeze_layers` layers.

  Returns the model. Raises ValueError (naming the flag) for a model without an encoder or
  more layers than the encoder has.
  """
  if not (freeze_encoder or freeze_layers):
    return model
  encoder = getattr(model, "encoder", None)
  if encoder is None:
    raise ValueError(f"--freeze_encoder/--freeze_layers: {type(model).__name__} has no "
                     "encoder to freeze")
  num_layers = len(encoder.transformer_layers)
  if freeze_layers > num_layers:
    raise ValueError(f"--freeze_layers={freeze_layers} but the encoder has {num_layers} layers")
  if freeze_encoder:
    encoder.trainable = False
  else:
    encoder.embeddings.trainable = False
    for layer in encoder.transformer_layers[:freeze_layers]:
      layer.trainable = False
  trainable, frozen = frozen_summary(model)
  logging.info("Frozen: %s; training %d of %d parameters",
               "the whole encoder" if freeze_encoder else
               f"embeddings and layers 0..{freeze_layers - 1}", trainable, trainable + frozen)
  return model


def frozen_summary(model):
  """(trainable, frozen) parameter counts."""
  return (sum(int(np.prod(v.shape)) for v in model.trainable_weights),
          sum(int(np.prod(v.shape)) for v in model.non_trainable_weights))
