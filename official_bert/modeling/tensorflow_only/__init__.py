"""The model's TensorFlow-only parts: `BertEncoder.skip_padding` (`token_packing`) and
`BertEncoder.xla_single_sequence` (`single_sequence_xla`), for the TensorFlow exports.

Everything else in `modeling/` is Keras 3 (`keras.ops`) and runs on every Keras backend.
"""
