"""official_bert: a Keras 3 (TensorFlow backend) reimplementation of BERT.

Modules are imported explicitly by callers (e.g. ``from official_bert.modeling.encoder
import BertEncoder``) so that importing the package itself stays cheap and does not pull in
TensorFlow; it only quiets TensorFlow's C++ start-up logs first (`data_prep.quiet_startup`).
"""

from data_prep import quiet_startup

quiet_startup.quiet_tensorflow_startup()
