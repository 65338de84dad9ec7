"""Text -> pretraining/fine-tuning TFRecords. Never imports `official_bert`."""

from data_prep import quiet_startup

# Before any of our modules imports TensorFlow (a no-op if it already was, or if the user set
# TF_CPP_MIN_LOG_LEVEL).
quiet_startup.quiet_tensorflow_startup()
