"""What an exported classifier returns, for each problem type, and long texts in windows.

`run_classifier` trains three kinds of classifier (`--problem_type`); the export serves each
the way `--do_predict` scores it, so a served model and `test_predictions.tsv` agree:
  single_label  probabilities = softmax(logits); predicted_ids = argmax; predicted_labels
  multi_label   probabilities = sigmoid(logits) per label; predicted [b, labels] int32 is
                probability > threshold (`--multi_label_threshold`, as training's metrics);
                the text signatures add predicted_labels [b]: the chosen labels joined by
                `--label_separator` ("" when none), as the predictions file writes them
  regression    score [b] = the single logit
With `--doc_stride` (`run_classifier`'s windows, `data_prep.classification.windows`), the text
signatures cut a first text longer than the sequence into overlapping windows, run them all
in one batch and average each text's windows: logits and probabilities are the windows'
means (prediction averages probabilities, so the argmax is taken on them) and `num_windows`
[b] says how many there were; the packed inputs returned are each text's first window.
"""

import collections

import tensorflow as tf

PROBLEM_TYPES = ("single_label", "multi_label", "regression")

# How a classifier export serves: run_classifier's --problem_type, --multi_label_threshold,
# --label_separator and --doc_stride (0: no windows, the text is truncated).
Options = collections.namedtuple("Options", ["problem_type", "threshold", "separator",
                                             "doc_stride"],
                                 defaults=["single_label", 0.5, ",", 0])


def problem_type_of(stored_problem_type, num_labels, label_names):
  """A trained classifier's problem type: the one recorded, else regression for one
  unnamed output (run_classifier on STS-B records none), else single_label."""
  if stored_problem_type:
    return stored_problem_type
  return "regression" if num_labels == 1 and not label_names else "single_label"


def check_problem_type(problem_type, num_labels):
  if problem_type not in PROBLEM_TYPES:
    raise ValueError(f"--problem_type={problem_type} must be one of {', '.join(PROBLEM_TYPES)}")
  if problem_type == "regression" and num_labels not in (None, 1):
    raise ValueError(f"--problem_type=regression has one output, not --num_labels={num_labels}")


def check_threshold(threshold, name="--multi_label_threshold"):
  """A multi-label threshold is a probability in (0, 1] (at 0 every label is predicted)."""
  if not 0.0 < float(threshold) <= 1.0:
    raise ValueError(f"{name}={threshold}: expected a probability above 0 and at most 1")


def outputs_from_logits(logits, problem_type, label_names=None, threshold=0.5):
  """The named outputs of logits [b, labels] (module doc); ids only, no joined strings."""
  if problem_type == "regression" or (problem_type == "single_label" and logits.shape[-1] == 1):
    return {"logits": logits, "score": logits[:, 0]}
  if problem_type == "multi_label":
    probabilities = tf.sigmoid(logits)
    return {"logits": logits, "probabilities": probabilities,
            "predicted": tf.cast(probabilities > threshold, tf.int32)}
  result = {"logits": logits, "probabilities": tf.nn.softmax(logits)}
  return with_predictions(result, label_names)


def with_predictions(result, label_names):
  """Single-label: predicted_ids from the probabilities (+ predicted_labels with names)."""
  result["predicted_ids"] = tf.argmax(result["probabilities"], -1, output_type=tf.int32)
  return with_label_names(result, label_names)


def with_label_names(outputs, label_names):
  """predicted_labels: the names of predicted_ids (classifier and tagger), with names only."""
  if label_names:
    outputs["predicted_labels"] = tf.gather(tf.constant(label_names), outputs["predicted_ids"])
  return outputs


def joined_labels(predicted, label_names, separator):
  """[b, labels] 0/1 -> [b] string: the chosen label names joined by `separator`."""
  names = tf.broadcast_to(tf.constant(label_names), tf.shape(predicted))
  return tf.strings.reduce_join(tf.ragged.boolean_mask(names, predicted > 0), axis=1,
                                separator=separator)


def window_inputs(segment_a, segment_b, seq_length, doc_stride, pack):
  """Each first text in windows, as `windows.windowed_columns` cuts them.

  Args:
    segment_a: RaggedTensor int64 [batch, (tokens)], the texts to cut.
    segment_b: RaggedTensor int64 [batch, (tokens)] or None; an empty row = no second text.
      It is kept whole in every window, cut to (seq_length - 3) // 2 if both do not fit.
    pack: (segment_a, segment_b) -> inputs, `text_packing.TextToInputs.pack`.

  Returns:
    (inputs: dict of int32 [windows, seq_length or less], owner: int [windows], the example of each
    window in example order).
  """
  len_a = segment_a.row_lengths()  # [batch]
  if segment_b is None:
    segment_b = tf.RaggedTensor.from_row_lengths(tf.zeros([0], tf.int64), tf.zeros_like(len_a))
  len_b = segment_b.row_lengths()
  has_b = len_b > 0
  seq = tf.constant(seq_length, tf.int64)
  keep_b = tf.where(has_b & (len_a + len_b > seq - 3), tf.minimum(len_b, (seq - 3) // 2), len_b)
  room = tf.where(has_b, seq - 3 - keep_b, seq - 2)  # tokens of the first text per window
  stride = tf.minimum(tf.constant(doc_stride, tf.int64), room)
  excess = tf.maximum(len_a - room, 0)
  num_windows = tf.where(excess > 0, (excess + stride - 1) // stride + 1, 1)  # [batch]
  owner = tf.repeat(tf.range(tf.size(len_a, out_type=tf.int64)), num_windows)  # [windows]
  k = tf.ragged.range(num_windows).flat_values  # window number within its example
  start = tf.minimum(k * tf.gather(stride, owner), tf.gather(excess, owner))
  length = tf.minimum(tf.gather(room, owner), tf.gather(len_a, owner) - start)
  first = tf.gather(segment_a.row_starts(), owner) + start
  index = tf.ragged.range(first, first + length)
  windows_a = index.with_flat_values(tf.gather(segment_a.flat_values, index.flat_values))
  b_first = tf.gather(segment_b.row_starts(), owner)
  index_b = tf.ragged.range(b_first, b_first + tf.gather(keep_b, owner))
  windows_b = index_b.with_flat_values(tf.gather(segment_b.flat_values, index_b.flat_values))
  return pack(windows_a, windows_b), owner


def average_windows(outputs, owner, batch_size, problem_type, label_names, threshold):
  """Per-window outputs -> per-example: means of logits and probabilities (module doc)."""
  mean = lambda x: tf.math.unsorted_segment_mean(x, owner, batch_size)
  result = {"logits": mean(outputs["logits"])}
  if "score" in outputs:
    result["score"] = mean(outputs["score"])
    return result
  result["probabilities"] = mean(outputs["probabilities"])
  if problem_type == "multi_label":
    result["predicted"] = tf.cast(result["probabilities"] > threshold, tf.int32)
    return result
  return with_predictions(result, label_names)
