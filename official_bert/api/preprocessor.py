"""`Preprocessor`: raw text -> the encoder's inputs, the tokenization of our writers and exports.

A Keras layer around `serving.text_packing.TextToInputs` (TensorFlow ops, so it runs inside
`tf.data` and inside exported SavedModels):

  pre = ob.Preprocessor.from_preset(path, sequence_length=128)
  pre(["a text", ...])                       # [CLS] a [SEP]
  pre((["first", ...], ["second", ...]))     # [CLS] a [SEP] b [SEP], truncated longest-first
  -> {"input_word_ids", "input_mask", "input_type_ids"}: int32 [batch, sequence_length]
"""

import os
import tempfile
import weakref

import keras
import numpy as np
import tensorflow as tf

from data_prep import tokenization
from official_bert.api import presets
from official_bert.interop import model_folder
from official_bert.serving import text_packing


def as_string_tensor(texts, what="x"):
  """A list, numpy array, pandas Series or tensor of strings -> string Tensor [n]."""
  if isinstance(texts, (str, bytes)):
    texts = [texts]
  if hasattr(texts, "to_numpy"):  # pandas
    texts = texts.to_numpy()
  if not tf.is_tensor(texts):
    array = np.asarray(texts, dtype=object)
    if array.ndim != 1:
      raise ValueError(f"{what}: expected a list of strings, got shape {array.shape}")
    bad = [i for i, t in enumerate(array) if not isinstance(t, (str, bytes))]
    if bad:
      raise ValueError(f"{what}[{bad[0]}] is {type(array[bad[0]]).__name__}, not a string")
    # Bytes as the original's convert_to_unicode reads them (UTF-8, bad bytes dropped):
    # numpy's astype(str) decoded them as ASCII, an error on any other byte.
    texts = [t.decode("utf-8", "ignore") if isinstance(t, bytes) else t for t in array]
    texts = np.array(texts, dtype=object) if texts else np.zeros([0], str)
  return tf.convert_to_tensor(texts, tf.string)


@keras.saving.register_keras_serializable(package="official_bert")
class Preprocessor(keras.layers.Layer):
  """Strings, or a (first, second) pair of string batches, -> dict of int32 [batch, seq].

  Args:
    vocabulary: the token list in id order, or a vocab.txt path.
    lower_case: the model's do_lower_case.
    sequence_length: the padded length of every output.
  """

  def __init__(self, vocabulary, lower_case=True, sequence_length=128, **kwargs):
    kwargs.setdefault("trainable", False)
    super().__init__(**kwargs)
    # Python lists of strings in, not float tensors (as keras-hub's preprocessing layers).
    self._allow_non_tensor_positional_args = True
    self._convert_input_args = False
    self._vocab_file = None
    if isinstance(vocabulary, (str, os.PathLike)):
      self._vocab_file = os.fspath(vocabulary)
      vocabulary = tokenization.load_vocab_tokens(self._vocab_file)
    self.vocabulary = list(vocabulary)
    self.lower_case = bool(lower_case)
    text_packing.check_packed_length(sequence_length, "sequence_length")
    self.sequence_length = int(sequence_length)
    tokenization.check_special_tokens({t: i for i, t in enumerate(self.vocabulary)},
                                      "the vocabulary")
    self.tokenizer = tokenization.TextTokenizer(self.vocabulary, lower_case=self.lower_case)
    self.text_to_inputs = text_packing.TextToInputs(self.tokenizer, self.vocabulary,
                                                     self.sequence_length)
    # The tokenizer's graph, traced once per layer: every tf.data pipeline (each fit, evaluate
    # and predict builds one) and every eager call then calls it, not rebuilding its ops.
    # (Two attributes, not a dict: a SavedModel of the layer saves each as a function.)
    texts = tf.TensorSpec([None], tf.string)
    self._traced_single = tf.function(self.text_to_inputs, input_signature=[texts],
                                     autograph=False)
    self._traced_pair = tf.function(self.text_to_inputs, input_signature=[texts, texts],
                                   autograph=False)
    self.built = True

  @classmethod
  def from_preset(cls, path, sequence_length=None, lower_case=None, allow_case_mismatch=False,
                  **kwargs):
    """`sequence_length`: 128, or the model's max_position_embeddings where that is fewer.
    `lower_case`: the folder's case unless given (refused where the folder contradicts it,
    unless `allow_case_mismatch`)."""
    preset = presets.load(path, read_weights=False, lower_case=lower_case,
                          allow_case_mismatch=allow_case_mismatch)
    if sequence_length is None:
      sequence_length = model_folder.default_sequence_length(preset.config)
    preset.config.check_sequence_length(sequence_length, "sequence_length", path)
    return cls(preset.vocab_file, preset.do_lower_case, sequence_length, **kwargs)

  @property
  def vocab_file(self):
    """A vocab.txt of `vocabulary` (the one read, else written once to a temporary file):
    for the writers and `save`."""
    if self._vocab_file is None:
      with tempfile.NamedTemporaryFile("w", suffix="_vocab.txt", delete=False,
                                       encoding="utf-8") as f:
        f.write("".join(token + "\n" for token in self.vocabulary))
      self._vocab_file = f.name
      weakref.finalize(self, os.remove, f.name)  # gone with this layer
    return self._vocab_file

  def call(self, inputs):
    if isinstance(inputs, (tuple, list)) and len(inputs) == 2 and not isinstance(
        inputs[0], (str, bytes)):
      texts = [as_string_tensor(t, f"x[{i}]") for i, t in enumerate(inputs)]
      sizes = [t.shape[0] if t.shape.rank else None for t in texts]
      if None not in sizes and sizes[0] != sizes[1]:
        raise ValueError(f"Preprocessor: {sizes[0]} first texts but {sizes[1]} second texts "
                         f"(a pair's two lists go text by text)")
    else:
      texts = [as_string_tensor(inputs)]
    if all(t.shape.rank == 1 for t in texts):  # [batch]: the traced graph
      return (self._traced_single if len(texts) == 1 else self._traced_pair)(*texts)
    return self.text_to_inputs(*texts)

  def compute_output_spec(self, inputs):
    if keras.backend.backend() != "tensorflow":
      # Only TensorFlow's graph carries strings: on JAX and PyTorch a string keras.Input
      # builds, then fails in fit with "Invalid dtype: object" (and leaves JAX's model broken).
      raise ValueError(
          f"Preprocessor in a functional model on string inputs needs the TensorFlow backend "
          f"(KERAS_BACKEND={keras.backend.backend()}: its tensors hold no strings). Call the "
          f"preprocessor on the data instead, e.g. dataset.map(lambda x, y: (preprocessor(x), "
          f"y)), and give the model the ids: keras.Input(shape=({self.sequence_length},), "
          f"dtype='int32', name=...) for input_word_ids, input_mask and input_type_ids")
    # One KerasTensor per output: a functional graph tells outputs apart by object, so three
    # names sharing one tensor fed the word ids to every encoder input.
    return {name: keras.KerasTensor((None, self.sequence_length), dtype="int32")
            for name in ("input_word_ids", "input_mask", "input_type_ids")}

  def get_config(self):
    config = super().get_config()
    config.update(vocabulary=self.vocabulary, lower_case=self.lower_case,
                  sequence_length=self.sequence_length)
    return config
