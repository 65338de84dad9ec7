r"""Raw text -> BERT pretraining TFRecords (masked LM + next sentence), streaming and parallel.

Same flags, defaults and output schema as google-research/bert's `create_pretraining_data.py`:

  python -m data_prep.create_pretraining_data \
    --input_file=corpus/*.txt --output_file=out/pretrain.tfrecord \
    --vocab_file=vocab.txt --do_lower_case=True --max_seq_length=128 \
    --max_predictions_per_seq=20 --masked_lm_prob=0.15 --random_seed=12345 --dupe_factor=5

Newer recipes, each a flag (the original's behaviour and output stay the default):
  - `--next_sentence=False`: masked LM only; contiguous sentences packed into one segment
    (`pretraining.packing`), `--cross_document=True` across documents with a [SEP] between;
    `--packing=tokens` cuts the text at token granularity instead (every sequence full);
  - `--masking=none`: unmasked records with `word_starts` (`schema.unmasked_pretraining_features`)
    for `run_pretraining --dynamic_masking`;
  - `--chinese_word_segmenter=jieba`: whole-word masking groups the characters of each
    Chinese word (`pretraining.chinese_words`).

How it differs from the original (which holds the whole corpus and all instances in memory):
  - documents are indexed (pass 1) and processed in chunks of about `--chunk_size_mb` of text;
    memory depends on the chunk size, not the corpus size;
  - a "random next sentence" comes from another document of the same chunk; a chunk is a
    uniform random sample of the whole corpus, drawn by a seeded hash of each document's
    position (file, byte offset; `pretraining.chunking`), so, as in the original, the random
    document is uniform over the corpus;
  - instances are shuffled within a chunk (the original shuffles all of them);
  - `--num_workers` processes build instances; the output is byte-identical for any number of
    workers (each chunk has its own seeded random streams);
  - files are written under a temporary name and renamed only when complete.

With `--runner=NAME` (DirectRunner, DataflowRunner, FlinkRunner, SparkRunner, ...) the same
algorithm runs as an Apache Beam pipeline (`pretraining.beam_pipeline`) and writes the same
multiset of records; every argument that is not one of this program's flags is a Beam
pipeline option (--direct_num_workers, --temp_location, --project, --region, ...), and one that
is neither (a misspelled flag) is an error, not an option Beam would drop with a warning.
"""

from absl import flags

from data_prep import cli
from data_prep.pretraining import chinese_words
from data_prep.pretraining import instances as instances_lib
from data_prep.pretraining import writer

FLAGS = flags.FLAGS
REQUIRED_FLAGS = ("input_file", "output_file", "vocab_file")
# The library's defaults (`pretraining.settings.Settings`) are the flags': declared once, there.
DEFAULTS = writer.Settings._field_defaults


def define_flags():
  """Called only when run as a program (see `data_prep.cli`)."""
  d = DEFAULTS
  flags.DEFINE_string("input_file", None, "Input raw text file(s): comma-separated, globs allowed.")
  flags.DEFINE_string("output_file", None, "Output TFRecord file(s), comma-separated.")
  cli.define_tokenizer_flags(d["max_seq_length"], do_lower_case=d["do_lower_case"])
  flags.DEFINE_bool("do_whole_word_mask", d["do_whole_word_mask"],
                    "Mask whole words instead of word pieces.")
  flags.DEFINE_integer("max_predictions_per_seq", d["max_predictions_per_seq"],
                       "Maximum masked LM predictions per sequence.")
  flags.DEFINE_integer("random_seed", d["random_seed"], "Random seed for data generation.")
  flags.DEFINE_integer("dupe_factor", d["dupe_factor"],
                       "Passes over the data (with different masks).")
  flags.DEFINE_float("masked_lm_prob", d["masked_lm_prob"], "Masked LM probability.")
  flags.DEFINE_float("short_seq_prob", d["short_seq_prob"],
                     "Probability of a shorter than maximum target length.")
  flags.DEFINE_integer("num_workers", d["num_workers"], "Worker processes (default: all "
                       "cores); with --runner, passed to Beam (Dataflow's initial number of "
                       "workers).")
  flags.DEFINE_integer("num_output_shards", d["num_output_shards"],
                       "With one --output_file, write OUTPUT-00000-of-0000N ... shards.")
  flags.DEFINE_bool("gzip_compress", d["gzip_compress"], "Write GZIP-compressed TFRecord files.")
  flags.DEFINE_bool("use_v2_feature_names", d["use_v2_feature_names"],
                    "Name features input_word_ids/input_type_ids (Model Garden v2 names).")
  flags.DEFINE_enum("errors", d["errors"], ["strict", "replace"],
                    "Non-UTF-8 input: stop with the file and line (strict), or use U+FFFD.")
  flags.DEFINE_float("chunk_size_mb", d["chunk_size_mb"],
                     "Text per chunk; bounds memory per worker.")
  flags.DEFINE_integer("min_docs_per_chunk", d["min_docs_per_chunk"],
                       "Documents per chunk on average at least, so random next sentences "
                       "have a choice.")
  flags.DEFINE_float("read_range_mb", d["read_range_mb"],
                     "With --runner: input files are read in byte ranges of this size, in "
                     "parallel (a range owns the documents that start in it).")
  flags.DEFINE_bool("next_sentence", d["next_sentence"],
                    "Sentence pairs for next-sentence prediction (the original). False: "
                    "contiguous sentences packed into one segment, labels written as 0.")
  flags.DEFINE_bool("cross_document", d["cross_document"],
                    "With --next_sentence=False: a sequence may run on into the next "
                    "document, with a [SEP] between the two (RoBERTa's FULL-SENTENCES).")
  flags.DEFINE_enum("packing", d["packing"], list(instances_lib.PACKING),
                    "With --next_sentence=False: sentences (whole sentences, as RoBERTa) or "
                    "tokens (the text, documents running on with a [SEP] between, cut every "
                    "--max_seq_length - 2 tokens, as Hugging Face's group_texts: full "
                    "sequences, no padding).")
  flags.DEFINE_enum("masking", d["masking"], list(instances_lib.MASKING),
                    "offline: mask now (the original); none: write the unmasked ids and "
                    "word_starts, for run_pretraining --dynamic_masking.")
  flags.DEFINE_enum("chinese_word_segmenter", d["chinese_word_segmenter"],
                    list(chinese_words.SEGMENTERS),
                    "jieba: whole-word masking (and word_starts) group the characters of "
                    "each Chinese word (Chinese-BERT-wwm).")


def main(argv):
  """argv[1:]: the arguments that are not our flags, i.e. Beam's pipeline options."""
  cli.check_case_mismatch()
  settings = writer.Settings(**{name: getattr(FLAGS, name) for name in writer.Settings._fields})
  writer.run(settings, beam_args=argv[1:])


def console_main():
  """The `bert-create-pretraining-data` command (pyproject.toml's [project.scripts])."""
  define_flags()
  cli.launch(main, REQUIRED_FLAGS, pass_through_unknown=True)


if __name__ == "__main__":
  console_main()
