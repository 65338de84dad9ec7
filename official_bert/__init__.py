"""official_bert: a Keras 3 (TensorFlow backend) reimplementation of BERT.

Modules are imported explicitly by callers (e.g. ``from official_bert.encoder
import BertEncoder``) so that importing the package itself stays cheap and does
not pull in TensorFlow.
"""
