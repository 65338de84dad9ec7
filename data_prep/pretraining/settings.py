"""A pretraining-data run's settings (the `create_pretraining_data` flags) and their checks,
shared by the local writer (`writer`) and the Beam pipeline (`beam_pipeline`).

Errors name the flags, not the options behind them: the user typed flags.
"""

import collections

from absl import logging

from data_prep.pretraining import chinese_words
from data_prep.pretraining import instances as instances_lib

# The one declaration of the defaults: the command's flags take theirs from here.
_DEFAULTS = {
    "do_lower_case": True, "do_whole_word_mask": False, "max_seq_length": 128,
    "max_predictions_per_seq": 20, "random_seed": 12345, "dupe_factor": 10,
    "masked_lm_prob": 0.15, "short_seq_prob": 0.1,
    "num_workers": None,  # all cores
    "num_output_shards": 1, "gzip_compress": False, "use_v2_feature_names": False,
    "errors": "strict", "chunk_size_mb": 1.0, "min_docs_per_chunk": 32, "read_range_mb": 64.0,
    "next_sentence": True, "cross_document": False, "packing": "sentences", "masking": "offline",
    "chinese_word_segmenter": "none"}
Settings = collections.namedtuple("Settings", ["input_file", "output_file", "vocab_file",
                                               *_DEFAULTS], defaults=tuple(_DEFAULTS.values()))


def instance_options(settings, tokenizer):
  """The instance algorithm's options from the run's settings (local writer and Beam alike)."""
  opts = instances_lib.InstanceOptions(
      max_seq_length=settings.max_seq_length,
      max_predictions_per_seq=settings.max_predictions_per_seq,
      masked_lm_prob=settings.masked_lm_prob, short_seq_prob=settings.short_seq_prob,
      dupe_factor=settings.dupe_factor, do_whole_word_mask=settings.do_whole_word_mask,
      random_seed=settings.random_seed, vocab_size=len(tokenizer.inv_vocab),
      cls_id=tokenizer.vocab["[CLS]"], sep_id=tokenizer.vocab["[SEP]"],
      mask_id=tokenizer.vocab["[MASK]"],
      continuation_ids=tuple(i for t, i in tokenizer.vocab.items() if t.startswith("##")),
      use_v2_feature_names=settings.use_v2_feature_names,
      next_sentence=settings.next_sentence, cross_document=settings.cross_document,
      masking=settings.masking, packing=settings.packing)
  try:
    opts.validate()
  except ValueError as e:  # name the flags, not the options
    raise ValueError(f"--{e}") from None
  _check_recipe(settings)
  return opts


def _check_recipe(settings):
  """The masked-LM-only / dynamic-masking / Chinese flags together; logs what goes unused."""
  segmenter = chinese_words.check_segmenter(settings.chinese_word_segmenter)
  if segmenter != "none" and not (settings.do_whole_word_mask or settings.masking == "none"):
    raise ValueError(f"--chinese_word_segmenter={segmenter} groups characters into words for "
                     "whole-word masking: add --do_whole_word_mask (or --masking=none, which "
                     "writes the word starts for the input pipeline)")
  if settings.packing == "tokens" and not settings.next_sentence:
    logging.info("--packing=tokens: sequences run on across documents and are cut every "
                 "--max_seq_length - 2 tokens; --short_seq_prob and --cross_document are not "
                 "used")
    _warn_unused(settings, ("short_seq_prob", "cross_document"), "--packing=tokens", "")
  if settings.masking == "none":
    logging.info("--masking=none: nothing is masked here; --max_predictions_per_seq, "
                 "--masked_lm_prob and --do_whole_word_mask are not used (run_pretraining "
                 "--dynamic_masking takes them)")
    _warn_unused(settings, ("masked_lm_prob", "max_predictions_per_seq",
                            "do_whole_word_mask"), "--masking=none",
                 "; give them to run_pretraining --dynamic_masking")
    if settings.dupe_factor > 1:
      logging.info("--masking=none with --dupe_factor=%d: the passes differ only in their "
                   "%s; the input pipeline draws new masks every epoch, so 1 is usually "
                   "enough", settings.dupe_factor,
                   "pairs" if settings.next_sentence else "short sequences")


def _warn_unused(settings, names, why, advice):
  """A warning naming the flags of `names` set to other than their defaults, which `why`
  leaves unused: a value the user chose that would otherwise vanish."""
  chosen = [f"--{name}={getattr(settings, name)}" for name in names
            if getattr(settings, name) != _DEFAULTS[name]]
  if chosen:
    logging.warning("%s: %s not used here%s", why, " and ".join(chosen) +
                    (" is" if len(chosen) == 1 else " are"), advice)


def check_ranges(settings):
  """The run's own sizes (the instance options check theirs): named before any work."""
  if settings.num_workers is not None and settings.num_workers < 1:
    raise ValueError(f"--num_workers={settings.num_workers} must be >= 1 (unset: all cores)")
  if not settings.chunk_size_mb > 0:
    raise ValueError(f"--chunk_size_mb={settings.chunk_size_mb} must be > 0")
  if settings.min_docs_per_chunk < 1:
    raise ValueError(f"--min_docs_per_chunk={settings.min_docs_per_chunk} must be >= 1")
