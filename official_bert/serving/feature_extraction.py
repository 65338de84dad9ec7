"""The feature-based approach's work (`python -m official_bert.extract_features`): per-token
activations of chosen encoder layers, or sentence embeddings, of a text file's lines.

Written as google-research/bert's extract_features.py wrote them (JSON lines of
{"linex_index", "features": [{"token", "layers": [{"index", "values"}]}]}), or as .npz arrays;
`--pooling=mean` writes one embedding per line, the encoder export's `mean_pooled_output`
(`modeling.sentence_embedding`), so both tools give the same vectors.
"""

import dataclasses
import io
import json
import re
from typing import Optional

from absl import logging
import numpy as np
import tensorflow as tf

from data_prep import tfrecord_io
from data_prep.classification import features as classifier_features
from official_bert.interop import model_files
from official_bert.interop import model_folder
from official_bert.interop import weight_loading
from official_bert.interop import weights_io
from official_bert.modeling import layer_selection
from official_bert.modeling import sentence_embedding
from official_bert.modeling.encoder import BertEncoder
from official_bert.training import finetuning_runner
from official_bert.training import settings as settings_lib
from official_bert.training.settings import option


@dataclasses.dataclass(frozen=True)
class ExtractSettings(settings_lib.Checked):
  input_file: Optional[str] = option(None, "Text, one example per line (`a ||| b` for pairs).")
  output_file: Optional[str] = option(None, "JSON lines, or .npz arrays.")
  # None: -1,-2,-3,-4 (the original's default), or the last layer for --pooling=mean.
  layers: Optional[tuple] = option(None, "Layers to output: -1 = last, 'embeddings', 'all' "
                                   "(default: -1,-2,-3,-4; -1 with --pooling=mean).")
  pooling: str = option("none", "Keep the layers apart, concatenate them, or add them "
                        "(weighted); mean: one vector per line, the mean over its tokens; "
                        "cls / pooled: the last layer's [CLS] vector / BERT's tanh pooler. "
                        "Default: a run_embeddings --init_checkpoint's own pooling, else none.",
                        choices=("none", "concat", "sum") + sentence_embedding.POOLINGS)
  normalize_embeddings: bool = option(
      False, "--pooling=mean/cls/pooled: L2-normalize each vector (default: a run_embeddings "
      "--init_checkpoint's own setting).")
  layer_weights: Optional[tuple] = option(None, "Weights of --pooling=sum (default: all 1).")
  bert_config_file: Optional[str] = option(None, "bert_config.json (or the HF config.json).")
  init_checkpoint: Optional[str] = option(None, "Weights: ours, TF1 or a Hugging Face folder.")
  extend_positions: bool = option(
      False, "A config with more max_position_embeddings than the checkpoint: new positions "
      "are copies of the trained ones (row i = row i mod the old length).")
  resize_vocab: bool = option(
      False, "A config with a larger vocab_size than the checkpoint: new rows start at the "
      "mean of the trained ones.")
  vocab_file: Optional[str] = option(None, "The vocabulary of the model.")
  do_lower_case: bool = option(
      True, "Lower-case input (uncased models). Default: --init_checkpoint's folder "
      "(tokenizer_config.json, run record, vocabulary), else True.")
  allow_case_mismatch: bool = option(
      False, "Extract with a --do_lower_case that contradicts --init_checkpoint's folder.")
  max_seq_length: int = option(
      128, "Tokens per example; longer inputs are cut. Not given: the model folder's run "
      "record's, else a sentence-transformers folder's (sentence_bert_config.json), else 128.",
      minimum=3)
  batch_size: int = option(8, "Examples per forward pass.", minimum=1)
  allow_random_weights: bool = option(
      False, "Extract without --init_checkpoint (random weights; for tests only).")


DEFAULT_LAYERS = ("-1", "-2", "-3", "-4")  # the original's: the last four
_PAIR = re.compile(r"^(.*) \|\|\| (.*)$")  # the original's pair syntax


def read_examples(path):
  """(text_a, text_b or None) per line of `path`: lines end at "\n" only, as the original
  reads them (str.splitlines would also cut at U+2028, form feeds, ..., and the rows would no
  longer be the file's lines)."""
  lines = tfrecord_io.read_text(path).split("\n")
  if lines and not lines[-1]:
    lines.pop()  # the last line's "\n"
  lines = [line.strip() for line in lines]
  return [(m.group(1), m.group(2)) if (m := _PAIR.match(line)) else (line, None) for line in lines]


def encode(examples, tokenizer, max_seq_length):
  """[n, seq] input_ids, input_mask, segment_ids of `[CLS] a [SEP] (b [SEP])`."""
  cls_id, sep_id = tokenizer.vocab["[CLS]"], tokenizer.vocab["[SEP]"]
  a = classifier_features.ragged_rows(tokenizer, [e[0] for e in examples])
  b = classifier_features.ragged_rows(tokenizer, [e[1] or "" for e in examples])
  rows = [
      # A second text of no tokens is none, as the original's `if tokens_b` (one segment).
      classifier_features.pack_pair(a[i], b[i] if e[1] is not None and len(b[i]) else None,
                                    cls_id, sep_id, max_seq_length)[:3]
      for i, e in enumerate(examples)
  ]
  return [np.stack(column) for column in zip(*rows)]


def layer_activations(encoder, input_ids, input_mask, segment_ids, layers, batch_size,
                      mean=False, normalize=False):
  """[n, seq, len(layers), hidden] float32: the chosen hidden states' values (`layers` as
  `layer_selection.parse_layers` returns them: 0 = embeddings, L = last).

  With `mean` (--pooling=mean): [n, len(layers) * hidden], each chosen layer's mean over the
  real tokens side by side (L2-normalized with `normalize`), pooled batch by batch so that a
  large input never holds every token's vectors.
  """

  @tf.function
  def forward(ids, mask, types):
    outputs = encoder({
        "input_word_ids": ids,
        "input_mask": mask,
        "input_type_ids": types
    },
                      training=False)
    states = layer_selection.hidden_states(outputs)
    chosen = tf.stack([states[i] for i in layers], axis=2)  # [b, seq, k, hidden]
    if not mean:
      return chosen
    # The mean of the concatenated layers is each layer's mean, side by side.
    flat = tf.reshape(chosen, tf.concat([tf.shape(chosen)[:2], [-1]], axis=0))
    return sentence_embedding.mean_pool(flat, mask, normalize)

  chunks = []
  for start in range(0, len(input_ids), batch_size):
    batch = [
        tf.constant(x[start:start + batch_size], tf.int32)
        for x in (input_ids, input_mask, segment_ids)
    ]
    chunks.append(forward(*batch).numpy().astype(np.float32))
  return np.concatenate(chunks)


def pool(values, pooling, weights=None):
  """[n, seq, k, h] -> as is (none), [n, seq, 1, k*h] (concat) or [n, seq, 1, h] (sum)."""
  if pooling == "concat":
    return values.reshape(values.shape[:2] + (1, -1))
  if pooling == "sum":
    w = np.ones(values.shape[2], np.float32) if weights is None else np.asarray(weights, np.float32)
    return np.einsum("nskh,k->nsh", values, w)[:, :, None, :]
  return values


def write_embeddings(path, embeddings, names):
  """--pooling=mean/cls/pooled's output: JSON lines {"linex_index", "embedding"} or .npz
  `embeddings`."""
  if path.endswith(".npz"):
    _write_npz(path, embeddings=embeddings, layers=np.array(names))
    return
  with tfrecord_io.AtomicFile(path, "w") as f:  # a failed run leaves no partial file
    for i, vector in enumerate(embeddings):
      record = {"linex_index": i, "embedding": [round(float(x), 6) for x in vector]}
      f.write(json.dumps(record) + "\n")


def _write_npz(path, **arrays):
  buffer = io.BytesIO()  # written whole through GFile, so gs:// paths work too
  np.savez(buffer, **arrays)
  with tfrecord_io.AtomicFile(path, "wb") as f:
    f.write(buffer.getvalue())


def json_lines(values, tokens, lengths, layer_names):
  """The original's JSON objects, one per example."""
  for i, (row, length) in enumerate(zip(values, lengths)):
    yield {
        "linex_index":
            i,
        "features": [{
            "token":
                tokens[i][t],
            "layers": [{
                "index": name,
                "values": [round(float(x), 6) for x in row[t, k]]
            } for k, name in enumerate(layer_names)]
        } for t in range(length)]
    }


def _parse_list(flag, values, kind):
  """`values` parsed as `kind` (int or float), or a ValueError naming the flag and value."""
  parsed = []
  for value in values:
    try:
      parsed.append(kind(value))
    except ValueError:
      raise ValueError(f"--{flag}: {value!r} is not a{'n integer' if kind is int else ' number'} "
                       f"(e.g. --{flag}={'-1,-2' if kind is int else '0.5,0.5'})") from None
  return parsed


def layer_names(values, num_layers):
  """The JSON `index` of each chosen layer: the integer given (`all` as -L..-1), or
  "embeddings"."""
  names = []
  for value in values:
    text = str(value).strip().lower()
    if text == "all":
      names.extend(range(-num_layers, 0))
    elif text in (layer_selection.EMBEDDINGS, "emb"):
      names.append(layer_selection.EMBEDDINGS)
    else:
      names.append(int(text))
  return names


def embedder_settings(settings, given):
  """`settings` with --init_checkpoint's case (`model_folder`'s one policy, checked against
  the folder when --do_lower_case is `given`), its run record's max_seq_length (else one the
  model takes: `model_folder.default_sequence_length`), and a run_embeddings folder's pooling
  and normalize_embeddings (its run record) where those flags are not `given`: its tokens and
  vectors are the export's."""
  if not settings.init_checkpoint:
    return settings
  if "do_lower_case" in given:
    if not settings.allow_case_mismatch:
      model_folder.read(settings.init_checkpoint, None, settings.vocab_file,
                        settings.do_lower_case,
                        names=model_folder.Names(path="--init_checkpoint"),
                        require_config=False, require_vocab=False)
  else:
    case, source = finetuning_runner.folder_case(settings)
    if case != settings.do_lower_case:
      logging.info("--do_lower_case=%s: from %s", case, source)
      settings = dataclasses.replace(settings, do_lower_case=case)
  record = model_files.beside(settings.init_checkpoint).record
  if "max_seq_length" not in given:
    embedding = model_folder.embedding_sequence_length(settings.init_checkpoint)
    if not record.max_seq_length and embedding:  # a sentence-transformers folder's
      logging.info("--max_seq_length=%d: from its %s", embedding,
                   model_folder.SENTENCE_TRANSFORMERS_CONFIG)
      settings = dataclasses.replace(settings, max_seq_length=embedding)
      settings = finetuning_runner.fitting_sequence_length(settings)
    elif not record.max_seq_length:
      settings = finetuning_runner.fitting_sequence_length(settings)
    elif record.max_seq_length != settings.max_seq_length:
      logging.info("--max_seq_length=%d: from its run record", record.max_seq_length)
      settings = dataclasses.replace(settings, max_seq_length=record.max_seq_length)
  stored = record.values()
  if stored.get("model_type") != "encoder" or "pooling" not in stored:
    return settings
  trained = {"pooling": stored["pooling"],
             "normalize_embeddings": bool(stored.get("normalize_embeddings"))}
  trained = {k: v for k, v in trained.items() if k not in given}
  if "pooling" in given and settings.pooling not in sentence_embedding.POOLINGS:
    trained.pop("normalize_embeddings", None)  # per-token features: nothing to normalize
  if trained:
    logging.info("From %s's run settings: %s", settings.init_checkpoint, trained)
  return dataclasses.replace(settings, **trained)


def sentence_vectors(encoder, input_ids, input_mask, segment_ids, pooling, batch_size,
                     normalize):
  """--pooling=cls/pooled: [n, hidden], one vector per line (`sentence_embedding.pool`)."""

  @tf.function
  def forward(ids, mask, types):
    outputs = encoder({"input_word_ids": ids, "input_mask": mask, "input_type_ids": types},
                      training=False)
    return sentence_embedding.pool(outputs, mask, pooling, normalize)

  return np.concatenate([
      forward(*[tf.constant(x[start:start + batch_size], tf.int32)
                for x in (input_ids, input_mask, segment_ids)]).numpy().astype(np.float32)
      for start in range(0, len(input_ids), batch_size)])


def run(settings):
  """Extracts and writes `settings.output_file`; returns the values written."""
  if not settings.init_checkpoint and not settings.allow_random_weights:
    raise ValueError("--init_checkpoint is required: features of random weights mean nothing "
                     "(pass --allow_random_weights to extract them anyway)")
  mean = settings.pooling == "mean"
  one_vector = settings.pooling in ("cls", "pooled")
  if settings.normalize_embeddings and not (mean or one_vector):
    raise ValueError("--normalize_embeddings applies to --pooling=mean, cls or pooled "
                     "(sentence embeddings)")
  if one_vector and (settings.layers or settings.layer_weights):
    raise ValueError(f"--pooling={settings.pooling} is one vector of the last layer: "
                     "--layers and --layer_weights do not apply")
  if settings.layer_weights and mean:
    raise ValueError("--layer_weights applies to --pooling=sum; --pooling=mean gives each "
                     "chosen layer's mean side by side")
  config = finetuning_runner.model_config(settings)
  # The default (the last four) within a smaller model's layers.
  chosen = settings.layers or (("-1",) if mean or one_vector else tuple(
      layer for layer in DEFAULT_LAYERS if -int(layer) <= config.num_hidden_layers))
  layers = layer_selection.parse_layers(chosen, config.num_hidden_layers)
  given = layer_names(chosen, config.num_hidden_layers)
  weights = (_parse_list("layer_weights", settings.layer_weights, float)
             if settings.layer_weights else None)
  if weights is not None and len(weights) != len(layers):
    raise ValueError(f"--layer_weights has {len(weights)} values for {len(layers)} layers")
  vocab = finetuning_runner.vocab_file(settings)
  tokenizer = classifier_features.cached_tokenizer(vocab, settings.do_lower_case)
  # Its ids are its lines' numbers (a repeated token keeps the last): the last id + 1 lines.
  model_folder.check_vocab_fits(max(tokenizer.inv_vocab, default=-1) + 1, config, vocab)
  examples = read_examples(settings.input_file)
  if not examples:
    raise ValueError(f"{settings.input_file}: no lines")
  ids, mask, segments = encode(examples, tokenizer, settings.max_seq_length)
  encoder = BertEncoder.from_bert_config(config)
  encoder.build()
  if settings.init_checkpoint:
    path = weights_io.load_weights(encoder, settings.init_checkpoint, require_heads=False,
                                   adaptation=weight_loading.Adaptation(
                                       settings.resize_vocab, settings.extend_positions))
    logging.info("Read the encoder's weights from %s", path)
  if one_vector:
    embeddings = sentence_vectors(encoder, ids, mask, segments, settings.pooling,
                                  settings.batch_size, settings.normalize_embeddings)
    write_embeddings(settings.output_file, embeddings, [settings.pooling])
    return embeddings
  if mean:
    embeddings = layer_activations(encoder, ids, mask, segments, layers, settings.batch_size,
                                   mean=True, normalize=settings.normalize_embeddings)
    write_embeddings(settings.output_file, embeddings, given)
    return embeddings
  values = pool(layer_activations(encoder, ids, mask, segments, layers, settings.batch_size),
                settings.pooling, weights)
  names = given if settings.pooling == "none" else [",".join(map(str, given))]
  lengths = mask.sum(axis=1)
  tokens = [tokenizer.convert_ids_to_tokens(row[:n].tolist()) for row, n in zip(ids, lengths)]
  if settings.output_file.endswith(".npz"):
    padded = np.array([t + [""] * (ids.shape[1] - len(t)) for t in tokens], dtype=str)
    _write_npz(settings.output_file,
               values=values,
               tokens=padded,
               input_ids=ids,
               input_mask=mask,
               layers=np.array(given))
  else:
    with tfrecord_io.AtomicFile(settings.output_file, "w") as f:
      for record in json_lines(values, tokens, lengths, names):
        f.write(json.dumps(record) + "\n")
  return values
