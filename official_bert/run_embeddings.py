r"""Sentence embeddings for semantic search and similarity (Sentence-BERT): fine-tune the
encoder on text pairs so that the cosine similarity of two texts' vectors means something.

  python -m official_bert.run_embeddings --init_checkpoint=all-MiniLM-L6-v2 \
    --train_file=pairs.jsonl --dev_file=dev.jsonl --text_column=query \
    --text_b_column=answer --do_train --do_eval --output_dir=out/search

  python -m official_bert.run_embeddings --init_checkpoint=all-MiniLM-L6-v2 \
    --train_file=stsb_train.tsv --dev_file=stsb_dev.tsv --quoting=none \
    --text_column=sentence1 --text_b_column=sentence2 --score_column=score --loss=cosine \
    --max_seq_length=64 --train_batch_size=16 --do_train --do_eval --output_dir=out/sts

Files: .tsv, .csv or .jsonl (by extension), columns by header name (`--text_column`,
`--text_b_column`, optional `--score_column`; an `id` column is carried into predictions).
A .tsv/.csv is read with CSV quoting (`--quoting=csv`); `--quoting=none` reads quotes as plain
characters, as the GLUE TSVs are read (STS-B's own files need it).
`--loss`: multiple_negatives (default: (query, positive) pairs, the batch's other positives
are the negatives; `--scale` 20, `--symmetric`), cosine (cos(a, b) regressed onto the score
scaled from [--min_score, --max_score] to [0, 1], as sentence-transformers'
CosineSimilarityLoss) or contrastive (scores 1/0, `--margin`). `--pooling` mean (default), cls
or pooled; `--normalize_embeddings` (default true) is what exports and extract_features serve.

--dev_file with scores is scored as STS (Pearson and Spearman of the cosine similarity);
without, as retrieval (recall@1, recall@10 and MRR@10 of each first text's second text among
all the file's second texts). Both go to `eval_results.txt` and TensorBoard; --best_metric
defaults to spearman / mrr@10. --do_predict writes `test_predictions.tsv` (the cosine of
each pair). `export --model_type=encoder --checkpoint=OUTPUT_DIR` serves the trained
embedder (its pooling and normalization) with no other flag. It trains with
sentence-transformers' recipe (--recipe=huggingface: PyTorch's AdamW, --lr_schedule=linear,
every batch). See `tasks/embedding_job.py`.
"""

import sys

from official_bert.tasks import embedding_job
from official_bert.training import common_flags
from official_bert.training import finetuning_runner
from official_bert.training import runner


def define_flags():
  common_flags.define_flags(embedding_job.EmbeddingSettings, learning_rate=2e-5,
                            eval_batch_size=32)


def main(flag_values):
  settings = finetuning_runner.settings_from_flags(embedding_job.EmbeddingSettings,
                                                   flag_values)
  record = common_flags.flags_dict(flag_values, sys.modules[__name__])
  return finetuning_runner.run_or_restart(settings, embedding_job.EmbeddingJob, record)


def console_main():
  """The `bert-run-embeddings` command (pyproject.toml's [project.scripts])."""
  define_flags()
  runner.launch(main, ["output_dir"])


if __name__ == "__main__":
  console_main()
