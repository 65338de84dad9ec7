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

import dataclasses
import os
from typing import Optional

import tensorflow as tf

from data_prep import schema
from data_prep.classification import features as classifier_features
from data_prep.tagging import conll
from data_prep.tagging import features as ner_features
from official_bert.tasks import metrics
from official_bert.tasks.tagging import TaggingTask
from official_bert.training import common_flags
from official_bert.training import evaluation
from official_bert.training import finetuning_runner
from official_bert.training import settings as settings_lib
from official_bert.training.settings import option


@dataclasses.dataclass(frozen=True)
class NerSettings(settings_lib.FinetuningSettings):
  data_dir: Optional[str] = option(None, "Folder with the CoNLL-2003 files (either spelling).")


def define_flags():
  common_flags.define_flags(NerSettings)


LABELS = list(conll.CONLL2003_LABELS)


class NerJob:
  """CoNLL data, entity scores and prediction files for `finetuning_runner.run`."""

  def __init__(self, settings):
    self.settings = settings
    self.sentences = {}
    self.windows = {}

  def _write(self, split, vocab):
    s = self.settings
    path = conll.split_path(s.data_dir, split)
    sentences = conll.read_conll(path, LABELS)
    if split == "train":
      sentences = classifier_features.subsample(sentences, s.max_train_examples, s.random_seed)
    self.sentences[split] = sentences
    key = {
        "source": os.path.abspath(path),
        "vocab_file": os.path.abspath(vocab),
        "do_lower_case": s.do_lower_case,
        "max_seq_length": s.max_seq_length,
        "num_sentences": len(sentences),
        "seed": s.random_seed,
        "labels": LABELS
    }

    def build():
      tokenizer = classifier_features.cached_tokenizer(vocab, s.do_lower_case)
      columns, windows = ner_features.convert_sentences(sentences, LABELS, s.max_seq_length,
                                                        tokenizer)
      return schema.ner_features(s.max_seq_length), columns, {"windows": windows}

    record = os.path.join(s.output_dir, f"{split}.tf_record")
    meta = classifier_features.cached_tfrecord(record, key, build)
    self.windows[split] = meta["windows"]
    return record, meta["num_examples"]

  def prepare(self):
    return finetuning_runner.prepare_splits(self.settings, self._write)

  def make_task(self, bert_config):
    return TaggingTask(bert_config, len(LABELS), self.settings.max_seq_length)

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
    path = os.path.join(self.settings.output_dir, f"{split}_predictions.txt")
    with tf.io.gfile.GFile(path, "w") as f:
      for sentence, predicted in zip(self.sentences[split], tags):
        f.write("".join(
            f"{w} {g} {p}\n" for w, g, p in zip(sentence.words, sentence.tags, predicted)))
        f.write("\n")
    evaluation.write_results(self.settings.output_dir,
                             split,
                             self.score(split, predictions),
                             step=0)


if __name__ == "__main__":
  define_flags()
  finetuning_runner.launch(NerJob, NerSettings, ["data_dir", "output_dir"])
