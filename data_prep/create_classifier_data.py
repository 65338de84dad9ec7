r"""Writes GLUE classifier features to TFRecords (offline; run_classifier also caches them).

  python -m data_prep.create_classifier_data --task_name=MRPC \
    --data_dir=glue_data/MRPC --vocab_file=vocab.txt --do_lower_case=True \
    --max_seq_length=128 --output_dir=out/mrpc_data

writes `OUTPUT_DIR/<split>.tf_record` for train, the dev split(s) and the test split(s) (MNLI:
`dev_matched`, `dev_mismatched`, `test_matched`, `test_mismatched`), each with a
`<split>.tf_record.json` holding the example count, labels and guids (test guids end with
the GLUE submission index). `--data_dir` is a `glue_data/<TASK>` folder, or a TFDS data dir
holding `glue/<config>`; `--tfds_data_dir` forces TFDS.
"""

from absl import flags

from data_prep import cli
from data_prep.classification import glue_records

FLAGS = flags.FLAGS


def define_flags():
  """Called only when run as a program (see `data_prep.cli`)."""
  flags.DEFINE_string("task_name", None, "GLUE task: CoLA, SST-2, MRPC, STS-B, QQP, MNLI, "
                      "QNLI, RTE, WNLI.")
  flags.DEFINE_string("data_dir", None, "glue_data/<TASK> folder, or a TFDS data dir.")
  flags.DEFINE_string("tfds_data_dir", None, "Read TFDS glue/<config> from this data dir.")
  cli.define_tokenizer_flags(max_seq_length=128)
  flags.DEFINE_string("output_dir", None, "Where the TFRecords go.")
  flags.DEFINE_list("splits", ["train", "dev", "test"], "Splits to write.")
  flags.DEFINE_integer("max_train_examples", 0,
                       "Keep a seeded random subset of the training set (0: all).",
                       lower_bound=0)
  flags.DEFINE_integer("random_seed", 12345, "Seed of --max_train_examples.")


def main(argv):
  del argv  # no positional arguments (`cli.launch` checks)
  cli.check_case_mismatch()
  for path, meta in glue_records.write_task(
      FLAGS.task_name, FLAGS.splits, FLAGS.output_dir, FLAGS.vocab_file, FLAGS.do_lower_case,
      FLAGS.max_seq_length, FLAGS.data_dir, FLAGS.tfds_data_dir, FLAGS.max_train_examples,
      FLAGS.random_seed):
    print(f"{path}: {meta['num_examples']} examples")  # the program's output: what it wrote


def console_main():
  """The `bert-create-classifier-data` command (pyproject.toml's [project.scripts])."""
  define_flags()
  cli.launch(main, required_flags=("task_name", "vocab_file", "output_dir"))


if __name__ == "__main__":
  console_main()
