r"""The feature-based approach: per-token activations of chosen encoder layers, no fine-tuning.

  python -m official_bert.extract_features --input_file=input.txt --output_file=out.jsonl \
    --vocab_file=vocab.txt --bert_config_file=bert_config.json \
    --init_checkpoint=bert_model.ckpt --layers=-1,-2,-3,-4 --max_seq_length=128 \
    --batch_size=8

Input: one text per line, or a pair `text a ||| text b`. Output, as google-research/bert's
extract_features.py, one JSON object per line:
  {"linex_index": 0, "features": [{"token": "[CLS]", "layers": [{"index": -1,
                                   "values": [0.1, ...]}, ...]}, ...]}
(`index` counts from the last layer, -1, or is "embeddings" for the embedding output, which
`--layers=embeddings` selects; `all` selects every Transformer layer; values rounded to 6
decimals), or with
`--output_file=*.npz` arrays `values` [lines, seq, layers, hidden] (float32), `tokens`,
`input_ids`, `input_mask` [lines, seq] and `layers`. `--pooling=concat` or `sum` replaces the
chosen layers by their concatenation or (`--layer_weights`-)weighted sum, the paper's best
feature-based NER variants; the JSON then has one layer entry, its `index` naming the layers.
--init_checkpoint: ours, google-research TF1, or a Hugging Face model folder.

Sentence embeddings, `--pooling=mean`: one vector per line, the mean over its real tokens
([CLS] and [SEP] included, padding not) of the last layer by default, as sentence-transformers
models (all-MiniLM-L6-v2, ...) are used; `--normalize_embeddings` scales it to unit length.
Several --layers give each layer's mean side by side, in --layers order ([lines, k * hidden];
normalized as one vector). Output: JSON lines {"linex_index": 0, "embedding": [0.1, ...]}
(6 decimals), or .npz arrays `embeddings` [lines, hidden] (float32) and `layers`. The values
are the encoder export's `mean_pooled_output` (`modeling.sentence_embedding`).
`--pooling=cls` / `pooled`: the last layer's [CLS] vector / BERT's tanh pooler instead. A
run_embeddings OUTPUT_DIR as --init_checkpoint brings its pooling and normalization (the
export's `sentence_embedding`) unless --pooling / --normalize_embeddings are given.
"""

from official_bert.serving import feature_extraction
from official_bert.training import common_flags
from official_bert.training import runner


def main(flag_values):
  settings = common_flags.settings_from_flags(feature_extraction.ExtractSettings, flag_values)
  given = {name for name in ("pooling", "normalize_embeddings", "do_lower_case",
                             "max_seq_length")
           if flag_values[name].present}
  return feature_extraction.run(feature_extraction.embedder_settings(settings, given))


def console_main():
  """The `bert-extract-features` command (pyproject.toml's [project.scripts])."""
  common_flags.define_flags(feature_extraction.ExtractSettings, original_only=(
      "use_tpu", "use_one_hot_embeddings", "master", "num_tpu_cores"))
  runner.launch(main, ["input_file", "output_file"])


if __name__ == "__main__":
  console_main()
