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
"""

import os
import sys

from absl import flags

from data_prep.classification import features as classifier_features
from data_prep.tagging import conll
from data_prep.tagging import features as ner_features
from official_bert.training import finetuning_runner
from official_bert.tasks import metrics
from official_bert.training import runner
from official_bert.tasks.tagging import TaggingTask

flags.DEFINE_string("data_dir", None, "Folder with the CoNLL-2003 files (either spelling).")
finetuning_runner.define_flags(default_batch_size=32, default_lr=5e-5, default_seq=128)
FLAGS = flags.FLAGS
LABELS = list(conll.CONLL2003_LABELS)


class NerJob:
  """CoNLL data, entity scores and prediction files for `finetuning_runner.run`."""

  def __init__(self, flag_values):
    self.flags = flag_values
    self.sentences = {}
    self.windows = {}

  def _write(self, split, vocab):
    fv = self.flags
    path = conll.split_path(fv.data_dir, split)
    sentences = conll.read_conll(path, LABELS)
    if split == "train":
      sentences = classifier_features.subsample(sentences, fv.max_train_examples, fv.random_seed)
    self.sentences[split] = sentences
    key = {"source": os.path.abspath(path), "vocab_file": os.path.abspath(vocab),
           "do_lower_case": fv.do_lower_case, "max_seq_length": fv.max_seq_length,
           "num_sentences": len(sentences), "seed": fv.random_seed, "labels": LABELS}

    def build():
      tokenizer = classifier_features.cached_tokenizer(vocab, fv.do_lower_case)
      columns, windows = ner_features.convert_sentences(sentences, LABELS, fv.max_seq_length,
                                                        tokenizer)
      return ner_features.ner_schema(fv.max_seq_length), columns, {"windows": windows}

    record = os.path.join(fv.output_dir, f"{split}.tf_record")
    meta = classifier_features.cached_tfrecord(record, key, build)
    self.windows[split] = meta["windows"]
    return record, meta["num_examples"]

  def prepare(self, flag_values):
    return finetuning_runner.prepare_splits(flag_values, self._write)

  def make_task(self, bert_config):
    return TaggingTask(bert_config, len(LABELS), self.flags.max_seq_length)

  def _tags(self, split, predictions):
    return ner_features.predictions_to_tags(predictions["logits"], predictions["label_weights"],
                                            self.windows[split], self.sentences[split], LABELS)

  def score(self, split, predictions):
    scores = metrics.entity_scores([s.tags for s in self.sentences[split]],
                                   self._tags(split, predictions))
    flat = {f"entity_{k}": v for k, v in scores.items() if k != "per_type"}
    for kind, values in scores["per_type"].items():
      flat.update({f"{kind}_{k}": v for k, v in values.items()})
    return flat

  def write_predictions(self, split, predictions):
    tags = self._tags(split, predictions)
    with open(os.path.join(self.flags.output_dir, f"{split}_predictions.txt"), "w",
              encoding="utf-8") as f:
      for sentence, predicted in zip(self.sentences[split], tags):
        f.writelines(f"{w} {g} {p}\n" for w, g, p in zip(sentence.words, sentence.tags,
                                                          predicted))
        f.write("\n")
    finetuning_runner.write_results(self.flags.output_dir, split,
                                    self.score(split, predictions), step=0)


def run(flag_values):
  return finetuning_runner.run(flag_values, NerJob(flag_values), sys.modules[__name__])


if __name__ == "__main__":
  runner.launch(run, ["data_dir", "output_dir"])
