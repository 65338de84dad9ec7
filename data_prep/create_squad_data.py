r"""SQuAD v1.1 / v2.0 JSON -> the original run_squad.py's TFRecords, plus prediction metadata.

  python -m data_prep.create_squad_data --input_file=train-v1.1.json \
    --output_file=squad/train.tf_record --vocab_file=vocab.txt --do_lower_case=True \
    --max_seq_length=384 --doc_stride=128 --max_query_length=64 --is_training=True
  python -m data_prep.create_squad_data --input_file=dev-v1.1.json \
    --output_file=squad/eval.tf_record --vocab_file=vocab.txt --is_training=False

Training files hold unique_ids, input_ids, input_mask, segment_ids, start_positions,
end_positions and is_impossible (the example's flag, as the original; windows without the
answer get 0/0). Prediction files hold the first four, and `FILE.meta.jsonl` next to them
holds what maps logits back to the text (`data_prep.squad.records`). The work is
`data_prep.squad.writing.run`.
"""

from absl import flags

from data_prep import cli
from data_prep.squad import writing

# The library's defaults (`writing.Settings`) are the flags': declared once, there.
DEFAULTS = writing.Settings._field_defaults


def define_flags():
  """Called only when run as a program (see `data_prep.cli`)."""
  flags.DEFINE_string("input_file", None, "SQuAD JSON file (v1.1, or v2.0 with "
                      "--version_2_with_negative).")
  flags.DEFINE_string("output_file", None, "TFRecord to write; FILE.meta.jsonl goes next to it.")
  cli.define_tokenizer_flags(DEFAULTS["max_seq_length"], do_lower_case=DEFAULTS["do_lower_case"])
  flags.DEFINE_integer("doc_stride", DEFAULTS["doc_stride"],
                       "Paragraph tokens between window starts.")
  flags.DEFINE_integer("max_query_length", DEFAULTS["max_query_length"],
                       "Question tokens kept (longer ones are cut).")
  flags.DEFINE_bool("version_2_with_negative", DEFAULTS["version_2_with_negative"],
                    "SQuAD 2.0: unanswerable questions.")
  flags.DEFINE_bool(
      "is_training", DEFAULTS["is_training"], "Training features (answer positions) or "
      "prediction features (plus metadata to map predictions back to the text).")
  flags.DEFINE_integer(
      "num_workers", DEFAULTS["num_workers"], "Worker processes (default: all cores for "
      "inputs of 10 MB or more, else 1).")
  flags.DEFINE_string(
      "articles", DEFAULTS["articles"], "Only these articles, as a Python slice: \"0:40\", "
      "\"40:\" (default: all).")
  flags.DEFINE_string(
      "output_json_file", DEFAULTS["output_json_file"], "Also write the selected articles as "
      "a SQuAD JSON file (to score predictions on a slice with the official scripts).")
  flags.DEFINE_integer("examples_per_chunk", DEFAULTS["examples_per_chunk"],
                       "Questions per unit of work (whole paragraphs).")


def main(argv):
  del argv  # no positional arguments (`cli.launch` checks)
  cli.check_case_mismatch()
  writing.run(
      writing.Settings(**{name: getattr(flags.FLAGS, name) for name in writing.Settings._fields}))


def console_main():
  """The `bert-create-squad-data` command (pyproject.toml's [project.scripts])."""
  define_flags()
  cli.launch(main, writing.REQUIRED_FLAGS)


if __name__ == "__main__":
  console_main()
