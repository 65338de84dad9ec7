"""Text -> pretraining/fine-tuning TFRecords. Never imports `official_bert`."""
