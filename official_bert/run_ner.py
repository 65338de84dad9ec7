r"""CoNLL-2003 named entity recognition: token classification on the first WordPiece of a word.

  python -m official_bert.run_ner --data_dir=conll2003 --vocab_file=vocab.txt \
    --bert_config_file=bert_config.json --init_checkpoint=bert_model.ckpt \
    --do_train --do_eval --do_predict --max_seq_length=128 --train_batch_size=32 \
    --learning_rate=5e-5 --num_train_epochs=3 --output_dir=out/ner

--data_dir holds `eng.train`/`eng.testa`/`eng.testb` (IOB1, converted to IOB2) or
`train.txt`/`valid.txt`/`test.txt` (IOB2). Features are cached in `OUTPUT_DIR/<split>.tf_record`.
Outputs: `eval_results.txt` (loss, token accuracy, entity precision/recall/F1 overall and per
type, by the CoNLL definition) for the dev set (testa); with --do_predict,
`test_predictions.txt` (`word gold predicted` lines, blank line between sentences: conlleval's
input) and `test_results.txt` for the test set (testb).

Your own files instead of CoNLL-2003: `--train_file`, `--dev_file`, `--test_file` in CoNLL
columns (one token per line, blank line between sentences, `-DOCSTART-` skipped; the token in
`--token_column`, default 0, the tag in `--tag_column`, default -1). The training file's tags
are the label set, kept as written (IO, IOB1, BIO, BIOES/BILOU or plain labels; "O" first,
then sorted) and saved to `OUTPUT_DIR/labels.txt`; a later run without --train_file reads it.
A test file with one column (tokens only) is predicted, not scored: `word predicted` lines.
Entity scores use conlleval's chunk rules for every scheme (`tasks/metrics.entities`).

Feature-based (the paper's section 5.3): `--feature_based` keeps BERT frozen and trains a
BiLSTM (`--lstm_units`, `--lstm_layers`) and a classifier on the chosen layers' activations,
`--layers` (-1 = last, `embeddings`, `all`) combined by `--combine` (concat, sum, weighted,
last); e.g. the paper's best row:

  python -m official_bert.run_ner ... --feature_based --layers=-1,-2,-3,-4 --combine=concat \
    --learning_rate=1e-3

The head's architecture is written to `OUTPUT_DIR/head_config.json`, which `export
--model_type=feature_tagger` reads next to the checkpoint.
"""

import sys

from official_bert.tasks import ner_job
from official_bert.training import common_flags
from official_bert.training import finetuning_runner
from official_bert.training import runner


def define_flags():
  common_flags.define_flags(ner_job.NerSettings)


def main(flag_values):
  settings = finetuning_runner.settings_from_flags(ner_job.NerSettings, flag_values)
  record = common_flags.flags_dict(flag_values, sys.modules[__name__])
  return finetuning_runner.run_or_restart(settings, ner_job.NerJob, record)


def console_main():
  """The `bert-run-ner` command (pyproject.toml's [project.scripts])."""
  define_flags()
  runner.launch(main, ["output_dir"])


if __name__ == "__main__":
  console_main()
