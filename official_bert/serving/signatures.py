"""What each exported model type computes, and the tf.Modules that `exporter` saves.

Signatures of a single-file export (`--export_format=single`):
  serving_default(text)          text: string [batch]; one segment per example.
  serving_pair(text, text_b)     two segments; an empty `text_b` gives that example a single
                                 segment (`[CLS] text [SEP]`, as `serving_default`).
  serve_ids(input_word_ids, input_mask, input_type_ids)   int32 [batch, seq], any seq up to
                                 max_position_embeddings; no tokenization in the graph.

A multiple_choice (SWAG) export has instead:
  serving_default(text, choices) text: string [batch], the context (SWAG: sent1); choices:
                                 string [batch, num_choices], each a full continuation (SWAG:
                                 sent2 + " " + ending); every (text, choice) is one pair, packed
                                 as serving_pair does, to [batch, num_choices, seq].
  serve_ids(input_word_ids, input_mask, input_type_ids)   int32 [batch, num_choices, seq].

A squad export has instead (`squad_answers.py`: the context windowed in the graph as
create_squad_data does, answers as run_squad --do_predict writes them):
  serving_default(question, context), serving_pair(text=question, text_b=context) -> per
    question: answer_text [b] string, answer_start/answer_end [b] int32 (code point offsets
    into the context, end exclusive; -1 for no answer), score [b] (start + end logit), and
    the n-best: nbest_text, nbest_start, nbest_end, nbest_score, nbest_probability
    [b, n_best_size + 1] ("" / -1 / -1e9 / 0 padded); a v2.0 model also no_answer_score
    (the lowest [CLS] score of any window) and null_score_diff (null - best span).
  serve_ids as above: start_logits, end_logits of given windows.

The text signatures tokenize in the graph (`text_packing.TextToInputs`; "[MASK]" in the text
is the mask token), pack a batch to its longest input rounded up to a multiple of 8 (never
beyond `max_seq_length`, `PAD_TO_MULTIPLE`; a squad export's windows stay at `max_seq_length`,
see `squad_answers`), so `s` below is that width, and also return the packed `input_word_ids`,
`input_mask`, `input_type_ids` and the WordPiece strings `tokens` [batch, seq], so that a
client can map a SQuAD span or a tag back to text. Outputs per model type (both kinds):
  encoder      sequence_output [b, s, hidden], pooled_output [b, hidden],
               mean_pooled_output [b, hidden]: the mean of sequence_output over the real
                 tokens (input_mask 1), a sentence embedding; unit length when exported with
                 --normalize_embeddings (`modeling.sentence_embedding`);
               sentence_embedding [b, hidden]: the embedder's vector, by --pooling (mean,
                 cls or pooled; a run_embeddings model's own), normalized as above
  pretraining  masked_lm_positions [b, M] int32: the positions of the [MASK] tokens of each
                 example in order, -1 padded; M = most [MASK]s of an example in the batch;
               masked_lm_top_ids [b, M, k] int32, masked_lm_top_tokens [b, M, k] string,
               masked_lm_top_probabilities [b, M, k] float: the k most probable tokens at each
                 [MASK] (softmax over the vocabulary), best first; padding rows are id 0,
                 token "" and probability 0;
               next_sentence_probabilities [b, 2], next_sentence_logits [b, 2]: index 0 =
                 "text_b follows text" (the original's label 0); not for a masked-LM-only
                 checkpoint (run_pretraining --next_sentence=False), which has no such head;
               serve_ids adds mlm_logits [b, s, vocab] at every position.
  classifier   by its problem type (`classifier_outputs`): single-label logits,
               probabilities [b, labels], predicted_ids [b] int32 (+ predicted_labels [b] with
               label names); multi-label logits, probabilities (sigmoid), predicted [b, labels]
               int32 (+ predicted_labels [b], the chosen names joined, in the text signatures);
               regression logits [b, 1], score [b]. With --doc_stride the text signatures
               classify long texts in windows and add num_windows [b].
  squad        start_logits [b, s], end_logits [b, s]
  tagger       logits [b, s, labels], probabilities [b, s, labels], predicted_ids [b, s] int32
               (+ predicted_labels [b, s] with label names); feature_tagger the same
  multiple_choice  logits [b, choices], probabilities [b, choices] (softmax over the choices),
               predicted_ids [b] int32: the best choice
"""

import contextlib

import tensorflow as tf

from official_bert.modeling import sentence_embedding
from official_bert.serving import classifier_outputs
from official_bert.serving import text_packing

INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")
_TEXT = tf.TensorSpec([None], tf.string, name="text")
_TEXT_B = tf.TensorSpec([None], tf.string, name="text_b")
_QUESTION = tf.TensorSpec([None], tf.string, name="question")
_CONTEXT = tf.TensorSpec([None], tf.string, name="context")
_IDS = {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in INPUT_NAMES}
_CHOICES = tf.TensorSpec([None, None], tf.string, name="choices")
# Text signatures pad a batch to its longest input rounded up to this: a short request does
# no work on padding, and few distinct widths keep the kernels' shape caches warm.
PAD_TO_MULTIPLE = 8
_CHOICE_IDS = {name: tf.TensorSpec([None, None, None], tf.int32, name=name)
               for name in INPUT_NAMES}


class _Untracked:
  """Holds Python state out of the SavedModel's object graph (tf.Module tracks attributes).

  The model's variables are saved through `model_variables`; tracking the Keras object
  itself would also serialize Keras internals that a TF-only loader has no use for.
  """

  def __init__(self, **kwargs):
    self.__dict__.update(kwargs)


# ONNX Runtime's LayerNorm (a GlobalAveragePool) takes no [b, 0, hidden]: where no row has a
# [MASK], an ONNX export's masked-LM head runs on one padding slot (TFLite's converter, in
# turn, takes no slice to 0 slots: the other exports keep the head on `width` slots).
_MASK_SLOTS_AT_LEAST = [False]


@contextlib.contextmanager
def at_least_one_mask_slot():
  """Functions traced inside run the masked-LM head on at least one slot (`onnx_export`)."""
  _MASK_SLOTS_AT_LEAST[0] = True
  try:
    yield
  finally:
    _MASK_SLOTS_AT_LEAST[0] = False


def _masked_lm_predictions(model, sequence_output, word_ids, mask_id, vocab, top_k):
  """Top-k tokens at every [MASK] of each example (see the module doc)."""
  is_mask = tf.equal(word_ids, mask_id)
  # The k-th [MASK] of a row goes to slot k of that row; other slots stay -1.
  slot = tf.cumsum(tf.cast(is_mask, tf.int32), axis=1) - 1  # [b, s]
  where = tf.cast(tf.where(is_mask), tf.int32)  # [num_masks, 2]: (row, position)
  # Most masks in a row; 0 for no mask or no row (an empty batch packs to [0, 0]).
  width = tf.maximum(tf.reduce_max(tf.reshape(slot[:, -1:] + 1, [-1])), 0)
  # ONNX: the head runs on at least one slot (a padding one where no row has a [MASK]), then
  # keeps `width` (`at_least_one_mask_slot`).
  slots = tf.maximum(width, 1) if _MASK_SLOTS_AT_LEAST[0] else width
  positions = tf.tensor_scatter_nd_update(
      tf.fill(tf.stack([tf.shape(word_ids)[0], slots]), -1),
      tf.stack([where[:, 0], tf.gather_nd(slot, where)], axis=1), where[:, 1])  # [b, M]
  logits = model.masked_lm_head(sequence_output, tf.maximum(positions, 0),
                                model.encoder.embeddings.embedding_table)  # [b, M, vocab]
  if _MASK_SLOTS_AT_LEAST[0]:
    logits, positions = logits[:, :width], positions[:, :width]
  # expand_dims, not valid[..., None], and padding tokens gathered from an extra "" entry
  # rather than a string select: both keep the graph to TFLite builtins (`tflite_export`).
  valid = tf.expand_dims(positions >= 0, -1)  # [b, M, 1]
  probabilities, ids = tf.math.top_k(tf.nn.softmax(tf.cast(logits, tf.float32)), k=top_k)
  ids = tf.where(valid, ids, 0)
  tokens = tf.gather(tf.concat([vocab, [""]], 0), tf.where(valid, ids, tf.size(vocab)))
  return {
      "masked_lm_positions": positions,
      "masked_lm_top_ids": ids,
      "masked_lm_top_tokens": tokens,
      "masked_lm_top_probabilities": tf.where(valid, probabilities, 0.0),
  }


def model_outputs(model, model_type, inputs, mask_id, vocab, top_k=5, label_names=None,
                  all_mlm_logits=False, normalize_embeddings=False, classifier=None,
                  pooling="mean"):
  """The named outputs of `model_type` (module doc) for packed int32 inputs.

  classifier: a `classifier_outputs.Options` (problem type and threshold) for a classifier.
  """
  if model_type == "encoder":
    return _encoder_outputs(model, inputs, normalize_embeddings, pooling)
  if model_type == "pretraining":
    out = model.encoder(inputs, training=False)
    result = _masked_lm_predictions(model, out["sequence_output"], inputs["input_word_ids"],
                                    mask_id, vocab, top_k)
    if model.next_sentence_head is not None:  # None: a masked-LM-only model
      nsp_logits = model.next_sentence_head(out["pooled_output"])
      result.update(next_sentence_logits=nsp_logits,
                    next_sentence_probabilities=tf.nn.softmax(nsp_logits))
    if all_mlm_logits:
      word_ids = inputs["input_word_ids"]
      every = tf.tile(tf.range(tf.shape(word_ids)[1])[None], [tf.shape(word_ids)[0], 1])
      result["mlm_logits"] = model.masked_lm_head(
          out["sequence_output"], every, model.encoder.embeddings.embedding_table)
    return result
  out = model(inputs, training=False)
  if model_type == "squad":
    return {"start_logits": out["start_logits"], "end_logits": out["end_logits"]}
  logits = out["logits"]
  if model_type == "classifier":
    options = classifier or classifier_outputs.Options()
    return classifier_outputs.outputs_from_logits(logits, options.problem_type, label_names,
                                                  options.threshold)
  result = {"logits": logits, "predicted_ids": tf.argmax(logits, -1, output_type=tf.int32)}
  result["probabilities"] = tf.nn.softmax(logits)
  return classifier_outputs.with_label_names(result, label_names)


def _encoder_outputs(encoder, inputs, normalize_embeddings, pooling, out=None):
  """An encoder's outputs plus its sentence embeddings (`sentence_embedding.pool`)."""
  out = out or encoder(inputs, training=False)
  mask = inputs["input_mask"]
  return {"sequence_output": out["sequence_output"], "pooled_output": out["pooled_output"],
          "mean_pooled_output": sentence_embedding.mean_pool(out["sequence_output"], mask,
                                                             normalize_embeddings),
          "sentence_embedding": sentence_embedding.pool(out, mask, pooling,
                                                        normalize_embeddings)}


class ServingModule(tf.Module):
  """A whole model behind text and id signatures (`signatures()`).

  Args:
    model: the built Keras model of `model_type` (weights loaded).
    model_type: one of `model_types.MODEL_TYPES`.
    preprocessor: a `text_packing.TextToInputs`.
    vocab: token list (for `tokens` and `masked_lm_top_tokens`).
    top_k: predictions per [MASK] (pretraining).
    label_names: optional label strings (classifier, tagger).
    squad_answerer: for squad, a `squad_answers.SquadAnswerer`: the text signatures then take
      (question, context) and return answers over the whole context.
    classifier: for a classifier, a `classifier_outputs.Options`.
  """

  def __init__(self, model, model_type, preprocessor, vocab, top_k=5, label_names=None,
               normalize_embeddings=False, squad_answerer=None, classifier=None,
               pooling="mean"):
    super().__init__(name=f"bert_{model_type}")
    self._static = _Untracked(model=model, model_type=model_type, vocab=list(vocab),
                              top_k=min(int(top_k), len(vocab)),
                              label_names=list(label_names) if label_names else None,
                              normalize_embeddings=bool(normalize_embeddings), pooling=pooling,
                              squad_answerer=squad_answerer,
                              classifier=classifier or classifier_outputs.Options())
    # The variables the traced functions read must be tracked to be saved.
    self.model_variables = [getattr(v, "value", v) for v in model.variables]
    self.preprocessor = preprocessor
    # The model on packed ids, one function that every signature calls: traced and saved
    # once, not once per signature (a third of the export's tracing, the SavedModel's graph
    # and its load time). Only pretraining's serve_ids (mlm_logits) has its own.
    ids = _CHOICE_IDS if model_type == "multiple_choice" else _IDS
    self._static.model_functions = {
        all_mlm_logits: tf.function(
            lambda inputs, all_mlm_logits=all_mlm_logits: self._model_outputs(
                inputs, all_mlm_logits), input_signature=[dict(ids)], autograph=False)
        for all_mlm_logits in (False, True)}

  def _model_outputs(self, inputs, all_mlm_logits):
    st = self._static
    return model_outputs(st.model, st.model_type, inputs, self.preprocessor.mask_id,
                         tf.constant(st.vocab), st.top_k, st.label_names, all_mlm_logits,
                         normalize_embeddings=st.normalize_embeddings,
                         classifier=st.classifier, pooling=st.pooling)

  def _outputs(self, inputs, all_mlm_logits=False):
    all_mlm_logits = all_mlm_logits and self._static.model_type == "pretraining"
    return dict(self._static.model_functions[all_mlm_logits](inputs))

  def _from_text(self, inputs):
    outputs = self._outputs(inputs)
    return self._with_text_outputs(outputs, inputs)

  def _with_text_outputs(self, outputs, inputs):
    st = self._static
    outputs.update(inputs)
    outputs["tokens"] = tf.gather(tf.constant(st.vocab), inputs["input_word_ids"])
    if "predicted" in outputs and st.label_names:  # multi-label: the names, joined
      outputs["predicted_labels"] = classifier_outputs.joined_labels(
          outputs["predicted"], st.label_names, st.classifier.separator)
    return outputs

  def _windowed(self, text, text_b=None):
    """A classifier with --doc_stride: every window of each text, averaged per text."""
    st, pre = self._static, self.preprocessor
    segment_b = None if text_b is None else pre.tokenize(text_b)
    inputs, owner = classifier_outputs.window_inputs(
        pre.tokenize(text), segment_b, pre.seq_length, st.classifier.doc_stride, pre.pack)
    batch = tf.shape(text, out_type=tf.int64)[0]
    options = st.classifier
    outputs = classifier_outputs.average_windows(self._outputs(inputs), owner, batch,
                                                 options.problem_type, st.label_names,
                                                 options.threshold)
    outputs["num_windows"] = tf.math.bincount(tf.cast(owner, tf.int32),
                                              minlength=tf.cast(batch, tf.int32), dtype=tf.int32)
    windows = tf.range(tf.size(owner, out_type=tf.int64))
    first = tf.math.unsorted_segment_min(windows, owner, batch)  # each text's first window
    return self._with_text_outputs(outputs, {k: tf.gather(v, first) for k, v in inputs.items()})

  def _serving_default(self, text):
    if self._static.classifier.doc_stride and self._static.model_type == "classifier":
      return self._windowed(text)
    return self._from_text(self.preprocessor(text))

  def _serving_pair(self, text, text_b):
    if self._static.classifier.doc_stride and self._static.model_type == "classifier":
      tf.debugging.assert_equal(tf.shape(text), tf.shape(text_b),
                                message="text and text_b must have the same batch size")
      return self._windowed(text, text_b)
    return self._from_text(self.preprocessor(text, text_b))

  def _answer(self, question, context):
    return self._static.squad_answerer(question, context)

  def _answer_pair(self, text, text_b):
    return self._static.squad_answerer(text, text_b)

  def _serving_choices(self, text, choices):
    shape = tf.shape(choices)  # [batch, num_choices]
    flat = self.preprocessor(tf.repeat(text, shape[1]), tf.reshape(choices, [-1]))  # [b*n, s]
    return self._from_text({name: tf.reshape(value, tf.concat([shape, [-1]], 0))
                            for name, value in flat.items()})  # each [batch, num_choices, seq]

  def _serve_ids(self, input_word_ids, input_mask, input_type_ids):
    inputs = {"input_word_ids": input_word_ids, "input_mask": input_mask,
              "input_type_ids": input_type_ids}
    return self._outputs(inputs, all_mlm_logits=True)

  def serve_ids_in_graph(self, input_word_ids, input_mask, input_type_ids):
    """serve_ids' outputs, the model traced into the caller's graph at the caller's shapes
    rather than called as the shared function (the TFLite converter needs static shapes)."""
    inputs = {"input_word_ids": input_word_ids, "input_mask": input_mask,
              "input_type_ids": input_type_ids}
    return self._model_outputs(inputs, all_mlm_logits=True)

  def signatures(self):
    """{name: tf.function} for `tf.saved_model.save(..., signatures=...)`.

    Deliberately not attributes of the module: a tf.function attribute is saved a second
    time as a restorable Python function, doubling the SavedModel and its load time, and
    clients of this export use the signatures.
    """
    if self._static.model_type == "multiple_choice":
      text = {"serving_default": (self._serving_choices, [_TEXT, _CHOICES])}
      ids = _CHOICE_IDS
    elif self._static.squad_answerer is not None:
      text = {"serving_default": (self._answer, [_QUESTION, _CONTEXT]),
              "serving_pair": (self._answer_pair, [_TEXT, _TEXT_B])}
      ids = _IDS
    else:
      text = {"serving_default": (self._serving_default, [_TEXT]),
              "serving_pair": (self._serving_pair, [_TEXT, _TEXT_B])}
      ids = _IDS
    functions = dict(text, serve_ids=(self._serve_ids, [ids[name] for name in INPUT_NAMES]))
    return {name: tf.function(fn, input_signature=spec, autograph=False)
            for name, (fn, spec) in functions.items()}


class HubPreprocessor(tf.Module):
  """TF-Hub-style preprocessor: `__call__(text)` -> dict of int32 [batch, seq_length].

  Also `pair(text, text_b)` and `tokenize(text)` -> RaggedTensor; signatures
  `serving_default` (text) and `serving_pair` (text, text_b).
  """

  def __init__(self, preprocessor):
    super().__init__(name="bert_preprocessor")
    self.preprocessor = preprocessor

  @tf.function(input_signature=[_TEXT], autograph=False)
  def __call__(self, text):
    return self.preprocessor(text)

  @tf.function(input_signature=[_TEXT, _TEXT_B], autograph=False)
  def pair(self, text, text_b):
    return self.preprocessor(text, text_b)

  @tf.function(input_signature=[_TEXT], autograph=False)
  def tokenize(self, text):
    return self.preprocessor.tokenize(text)

  def signatures(self):
    return {"serving_default": self.__call__, "serving_pair": self.pair}


class HubEncoder(tf.Module):
  """TF-Hub-style encoder: `__call__(dict of input_word_ids, input_mask, input_type_ids)` ->
  dict of `pooled_output`, `sequence_output`, `encoder_outputs` (a list, one per layer) and
  `mean_pooled_output` and `sentence_embedding` (as the single export's).

  Its `serving_default` signature takes the three int32 inputs by name and returns
  `encoder_outputs` stacked as [batch, num_layers, seq, hidden] (signatures cannot return
  lists; batch first so TF Serving can split the batch).
  """

  def __init__(self, encoder, normalize_embeddings=False, pooling="mean"):
    super().__init__(name="bert_encoder")
    self._static = _Untracked(model=encoder, normalize_embeddings=bool(normalize_embeddings),
                              pooling=pooling)
    self.model_variables = [getattr(v, "value", v) for v in encoder.variables]

  @tf.function(input_signature=[dict(_IDS)], autograph=False)
  def __call__(self, inputs):
    st = self._static
    out = st.model(inputs, training=False)
    return dict(_encoder_outputs(st.model, inputs, st.normalize_embeddings, st.pooling, out),
                encoder_outputs=list(out["encoder_outputs"]))

  @tf.function(input_signature=[_IDS["input_word_ids"], _IDS["input_mask"],
                                _IDS["input_type_ids"]], autograph=False)
  def serving_default(self, input_word_ids, input_mask, input_type_ids):
    out = self.__call__({"input_word_ids": input_word_ids, "input_mask": input_mask,
                         "input_type_ids": input_type_ids})
    out["encoder_outputs"] = tf.stack(out["encoder_outputs"], axis=1)
    return out

  def signatures(self):
    return {"serving_default": self.serving_default}


def make_preprocessor(tokenizer, vocab, seq_length, pad_to_multiple=None):
  return text_packing.TextToInputs(tokenizer, vocab, seq_length, pad_to_multiple)
