"""`MaskedLM`: fill in `[MASK]` tokens with a masked-LM head, and go on pretraining on text.

  mlm = ob.MaskedLM.from_preset(pretraining_output_dir)
  mlm.fill_mask(["the capital of france is [MASK] ."], top_k=5)
  # [[[("paris", 0.61), ("lyon", 0.05), ...]]]: per text, per [MASK], (token, probability)
  mlm.fit(domain_texts, epochs=3, batch_size=32)   # masked-LM training on raw texts
  mlm.evaluate(held_out_texts)                     # {"loss", "masked_lm_accuracy"}
  mlm.save(path); mlm.export(export_dir)           # a folder; the pretraining SavedModel

`fill_mask` is the computation of the pretraining export (`serving.signatures`): "[MASK]" in
the text is the mask token, the head's softmax over the vocabulary, best first. `fit` is
`run_pretraining --dynamic_masking` on raw texts, masked LM only (as RoBERTa): each batch is
masked as the writer masks (`training.dynamic_masking`: `masked_lm_prob` of the real tokens,
80% [MASK], 10% a random token, 10% kept), with new masks every epoch; the loss is the
commands' (`tasks.pretraining`), the step theirs (`training.train_step`). A folder's
next-sentence head, if any, is kept for the export and not trained (its loss needs sentence
pairs), nor is the pooler only it reads (as `run_pretraining --next_sentence=False`): the
backbone given is changed so (`backbone.pooler_dense.trainable`); a task model built on the
same backbone object in this process trains its pooler only after setting it back. `evaluate`
and validation data use the same masks on every call; `fit` new ones each epoch, repeatable
with its `seed`.
"""

import math

import keras
import numpy as np
import tensorflow as tf

from official_bert.api import task_model
from official_bert.api.preprocessor import as_string_tensor
from official_bert.interop import weight_names
from official_bert.modeling.pretraining_model import BertPretrainingModel
from official_bert.serving import signatures
from official_bert.tasks.pretraining import PretrainingTask
from official_bert.training import dynamic_masking


@keras.saving.register_keras_serializable(package="official_bert")
class MaskedLM(task_model.TaskModel):
  """Args: a `Backbone`, a `Preprocessor`; `next_sentence` (keep a next-sentence head, as
  the folder loaded has one); `masked_lm_prob` and `max_predictions_per_seq` (default:
  ceil(masked_lm_prob * sequence_length), the original's 20 at 128) mask `fit`'s texts."""

  model_type = "pretraining"

  def __init__(self, backbone, preprocessor, next_sentence=False, masked_lm_prob=0.15,
               max_predictions_per_seq=None, **kwargs):
    if not 0.0 < masked_lm_prob < 1.0:
      raise ValueError(f"masked_lm_prob={masked_lm_prob} must be in (0, 1)")
    network = BertPretrainingModel(backbone, next_sentence=next_sentence, name="pretraining")
    if network.next_sentence_head is not None:  # no sentence pairs to train it on: it and
      network.next_sentence_head.trainable = False  # the pooler it reads stay as loaded
      backbone.pooler_dense.trainable = False
    max_predictions_per_seq = int(
        max_predictions_per_seq or math.ceil(masked_lm_prob * preprocessor.sequence_length))
    task = PretrainingTask(backbone.bert_config, preprocessor.sequence_length,
                           max_predictions_per_seq, next_sentence=False)
    super().__init__(network, preprocessor, task, **kwargs)
    self.next_sentence = bool(next_sentence)
    self.masked_lm_prob = float(masked_lm_prob)
    self.max_predictions_per_seq = max_predictions_per_seq
    # One entry per model id: a checkpoint may have more ids than vocab.txt has tokens.
    vocab = list(preprocessor.vocabulary)
    size = backbone.vocab_size
    self._vocab = tf.constant(vocab[:size] + [f"[id {i}]" for i in range(len(vocab), size)])

  @classmethod
  def preset_arguments(cls, path, preset, stored, kwargs):
    """A pretraining checkpoint (ours, TF1, an HF BertForPreTraining/MaskedLM folder, a
    saved MaskedLM); an error if it has no masked-LM head. Its next-sentence head, if any,
    loads too."""
    names = list(preset.weights.tensors)
    if not any(n.startswith(weight_names.MLM_SCOPE) for n in names):
      raise ValueError(f"{preset.weights.source} has no masked-LM head "
                       f"({weight_names.MLM_SCOPE}*): MaskedLM needs a pretraining checkpoint")
    if kwargs.get("next_sentence") is None:
      kwargs["next_sentence"] = not weight_names.is_masked_lm_only(names)
    return kwargs, True

  def get_config(self):
    return dict(super().get_config(), next_sentence=self.next_sentence,
                masked_lm_prob=self.masked_lm_prob,
                max_predictions_per_seq=self.max_predictions_per_seq)

  # --- Keras ----------------------------------------------------------------------------------

  def call(self, inputs, training=None):
    return self.network(inputs, training=training)  # {"masked_lm_logits"[, ...]}

  def loss_features(self, x, y, sample_weight):
    return x  # the masked batch holds its own labels (masked_lm_ids, masked_lm_weights)

  # --- data -------------------------------------------------------------------------------

  def fit(self, x=None, y=None, *args, validation_data=None, **kwargs):
    """`TaskModel.fit` on raw texts; `validation_data` may be texts too."""
    if validation_data is not None and not isinstance(validation_data, (tf.data.Dataset,
                                                                        tuple)):
      validation_data = (validation_data, None)
    return super().fit(x, y, *args, validation_data=validation_data, **kwargs)

  def _dataset(self, x, y, batch_size, shuffle=False, seed=None, training=False):
    """Masked batches. Training: masks from `seed` (None: NumPy's generator, which
    `keras.utils.set_random_seed` seeds), new each epoch. Otherwise (evaluate, validation)
    the same masks on every call: from `seed`, else 0."""
    if seed is None:
      seed = int(np.random.randint(2**31 - 1)) if training else 0
    if isinstance(x, tf.data.Dataset):
      if y is not None:
        raise ValueError("y must be None when x is a tf.data.Dataset of texts")
      return self._masked(super().map_batches(x), seed, training).prefetch(
          task_model.AUTOTUNE)
    if y is not None:
      raise ValueError("MaskedLM: y must be None (the masked tokens of x are the labels)")
    texts = as_string_tensor(x, "x")
    batches = task_model.batches((texts,), batch_size, shuffle, seed)
    return self._masked(super().map_batches(batches), seed, training).prefetch(
        task_model.AUTOTUNE)

  def make_dataset(self, x, y=None, batch_size=32, shuffle=False, seed=None):
    """Raw texts -> masked batches (the labels are the masked tokens: no `y`)."""
    return self._dataset(x, y, batch_size, shuffle, seed)

  def _masked(self, batches, seed, new_each_pass):
    """Batches of ids -> masked as the writer masks: a [2] stateless seed per batch, drawn
    again each pass over the data when `new_each_pass` (new masks every epoch)."""
    # The [CLS]/[SEP]/[MASK] ids and the replacement-id bound (ids with a token: a padded
    # vocab_size has ids without) as run_pretraining --dynamic_masking takes them.
    options = dynamic_masking.options_from_vocab(
        self.preprocessor.vocab_file, self.backbone.vocab_size,
        max_predictions_per_seq=self.max_predictions_per_seq,
        masked_lm_prob=self.masked_lm_prob, seed=int(seed))
    seeds = tf.data.Dataset.random(seed=options.seed,
                                   rerandomize_each_iteration=new_each_pass).batch(2)
    return tf.data.Dataset.zip(batches, seeds).map(
        lambda batch, s: (dynamic_masking.mask_batch(batch[0], options, s),) + batch[1:],
        num_parallel_calls=task_model.AUTOTUNE)

  # --- inference ------------------------------------------------------------------------------

  def fill_mask(self, texts, top_k=5, batch_size=32):
    """Per text, per `[MASK]` in order, the `top_k` (token, probability) pairs; for one string,
    its list alone (as a fill-mask pipeline gives), and [] for no texts."""
    task_model.check_batch_size(batch_size)
    self.warn_if_untrained("fill_mask")
    single = isinstance(texts, str)
    texts = as_string_tensor(texts, "texts")
    result = []
    for start in range(0, int(texts.shape[0]), batch_size):
      inputs = self.preprocessor(texts[start:start + batch_size])
      with task_model.outputs_for_tensorflow_ops():
        out = signatures.model_outputs(task_model.HostOutputs(self.network), "pretraining",
                                       inputs, self.preprocessor.text_to_inputs.mask_id,
                                       self._vocab, top_k)
      positions = out["masked_lm_positions"].numpy()
      tokens = out["masked_lm_top_tokens"].numpy()
      probabilities = out["masked_lm_top_probabilities"].numpy()
      for row in range(positions.shape[0]):
        result.append([[(t.decode("utf-8"), float(p))
                        for t, p in zip(tokens[row, m], probabilities[row, m])]
                       for m in range(positions.shape[1]) if positions[row, m] >= 0])
    return result[0] if single else result

  def predict(self, x, batch_size=32, verbose=None, *, top_k=5):
    """`fill_mask` of a batch (Keras' predict: a list of texts, not one string or none):
    what a masked LM predicts is its [MASK] tokens."""
    del verbose  # Keras' argument: nothing to show
    self._check_inputs(x, None, "predict", batch_size)
    return self.fill_mask(x, top_k=top_k, batch_size=batch_size)
