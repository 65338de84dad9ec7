"""The SQuAD metadata file between the writer (`writing`) and `official_bert.tasks.squad_job`.

The TFRecord features are `schema.squad_features`. Next to each TFRecord goes a JSON-lines
metadata file, `FILE.meta.jsonl` (`metadata_path`). Its first line is a header: the settings,
the number of examples and features, the reader's counts. Prediction files (`is_training`
false) go on with what maps a window's logits back to the original text, stored once per
paragraph instead of once per window:
  {"paragraph": k, "doc_tokens": [...], "sub_tokens": [...], "tok_to_orig": [...]}
  {"example": i, "qas_id": "...", "question": "...", "paragraph": k, "query_tokens": [...]}
  {"feature": unique_id, "example": i, "doc_span_index": j, "doc_start": s,
   "doc_length": n, "max_context": "0011..1"}
`read_metadata` rebuilds the original's per-window `tokens`, `token_to_orig_map` and
`token_is_max_context` from them (`InputFeatures`).

Like `data_prep.schema`, no TensorFlow at module level (worker processes import it).
"""

import dataclasses
import hashlib
import json
from typing import Dict, List

from data_prep import tfrecord_io

FORMAT = "official_bert.squad_features/1"
UNIQUE_ID_BASE = 1000000000  # the original's first unique_id


def vocab_fingerprint(vocab_file):
  """The SHA-256 of a vocabulary file's bytes: the header says which vocabulary the ids are
  of, wherever the file has moved since."""
  return hashlib.sha256(tfrecord_io.gfile().GFile(vocab_file, "rb").read()).hexdigest()


def metadata_path(tfrecord_path):
  return tfrecord_path + ".meta.jsonl"


@dataclasses.dataclass
class Example:
  example_index: int
  qas_id: str
  question_text: str
  doc_tokens: List[str]  # the paragraph's whitespace words (shared between its questions)


@dataclasses.dataclass
class InputFeatures:
  """One window, with the original `InputFeatures` fields postprocessing needs."""
  unique_id: int
  example_index: int
  doc_span_index: int
  tokens: List[str]  # [CLS] query [SEP] window [SEP], unpadded
  token_to_orig_map: Dict[int, int]  # position in `tokens` -> word in doc_tokens
  token_is_max_context: Dict[int, bool]  # position -> is this the word's best window


@dataclasses.dataclass
class Metadata:
  header: dict
  examples: List[Example]
  features: List[InputFeatures]


def read_metadata(path, header_only=False):
  """Reads `FILE.meta.jsonl`; ValueError naming the file if it is not one of ours."""
  try:
    f = tfrecord_io.open_file(path, "r")
  except FileNotFoundError:
    raise ValueError(f"{path}: metadata file not found (written by data_prep.create_squad_data "
                     "next to its --output_file)") from None
  with f:
    try:
      header = json.loads(f.readline() or "null")
    except json.JSONDecodeError as e:
      raise ValueError(f"{path}: not a SQuAD features metadata file ({e})") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
      raise ValueError(f"{path}: not a SQuAD features metadata file (format "
                       f"{header.get('format') if isinstance(header, dict) else None!r}, "
                       f"expected {FORMAT!r})")
    if header_only:
      return Metadata(header, [], [])
    paragraphs, examples, query_tokens, features = {}, [], [], []
    for line in f:
      rec = json.loads(line)
      if "feature" in rec:
        features.append(_window(rec, query_tokens))
      elif "example" in rec:
        para = paragraphs[rec["paragraph"]]
        examples.append(Example(rec["example"], rec["qas_id"], rec["question"],
                                para["doc_tokens"]))
        query_tokens.append((rec["query_tokens"], para))
      else:
        paragraphs[rec["paragraph"]] = rec
  return Metadata(header, examples, features)


def _window(rec, query_tokens):
  """The original's per-window fields from the paragraph-level ones.

  Example: query ["who", "?"] (doc_offset 3), doc_start 10, doc_length 2: tokens =
  [CLS] who ? [SEP] sub_tokens[10] sub_tokens[11] [SEP]; token_to_orig_map = {3:
  tok_to_orig[10], 4: tok_to_orig[11]}; token_is_max_context = {3: max_context[0] == "1", ...}.
  """
  query, para = query_tokens[rec["example"]]
  start, length = rec["doc_start"], rec["doc_length"]
  offset = len(query) + 2
  tokens = ["[CLS]"] + query + ["[SEP]"] + para["sub_tokens"][start:start + length] + ["[SEP]"]
  to_orig = para["tok_to_orig"][start:start + length]
  bits = rec["max_context"]
  return InputFeatures(
      unique_id=rec["feature"], example_index=rec["example"],
      doc_span_index=rec["doc_span_index"], tokens=tokens,
      token_to_orig_map={offset + i: w for i, w in enumerate(to_orig)},
      token_is_max_context={offset + i: b == "1" for i, b in enumerate(bits)})
