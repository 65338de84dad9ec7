"""The Python API (`import official_bert as ob`): Keras models that take raw text.

  presets.py            what `from_preset(path)` reads and `save(path)` writes
  preprocessor.py       `Preprocessor`: strings (or pairs) -> the encoder's id tensors
  backbone.py           `Backbone`: the encoder, with `enable_lora`
  task_model.py         `TaskModel`: fit/evaluate/predict on raw text, compile, save, export
  text_classifier.py    `TextClassifier`
  token_tagger.py       `TokenTagger`
  question_answerer.py  `QuestionAnswerer`
  text_embedder.py      `TextEmbedder`
  masked_lm.py          `MaskedLM`
  files.py              `read_file`: a user's TSV/CSV/JSONL file as fit's x and y
The commands train the same models with the same losses (`tasks/`), optimizer and schedule
(`training/optimization.py`) and preprocessing (`data_prep`, `serving/text_packing.py`).
"""
