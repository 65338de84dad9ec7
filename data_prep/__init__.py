"""Text -> pretraining/fine-tuning TFRecords. Never imports `official_bert`."""

from data_prep import lean_startup
from data_prep import quiet_startup

# A command's process skips what TensorFlow's import loads for features no command uses.
lean_startup.skip_optional_imports()

# Before any of our modules imports TensorFlow (a no-op if it already was, or if the user set
# TF_CPP_MIN_LOG_LEVEL).
quiet_startup.quiet_tensorflow_startup()
