"""The one table of activation names: ours, and their Hugging Face translations.

Kept free of Keras and TensorFlow so `bert_config` can validate a config without importing
them; `activations` maps each name to its function.

Our names follow google-research BERT, where "gelu" is the tanh approximation. Hugging Face
says "gelu" for the exact erf form (our "gelu_exact") and has several names for the tanh one.
"""

# Our name -> the name of the function in `activations` that computes it.
FUNCTION_OF = {
    "gelu": "gelu_tanh",
    "gelu_new": "gelu_tanh",  # HF's name for the tanh approximation, accepted as ours too.
    "gelu_exact": "gelu_exact",
    "relu": "relu",
    "tanh": "tanh",
    "linear": "linear",
}

NAMES = tuple(FUNCTION_OF)

# HF `hidden_act` -> ours. Every HF spelling of the tanh approximation reads as "gelu".
HF_TO_OURS = {
    "gelu": "gelu_exact",
    "gelu_new": "gelu",
    "gelu_pytorch_tanh": "gelu",
    "gelu_fast": "gelu",
    "relu": "relu",
    "tanh": "tanh",
    "linear": "linear",
}

# Ours -> the HF name written to `config.json` ("gelu_new": HF's canonical tanh spelling).
OURS_TO_HF = {
    "gelu": "gelu_new",
    "gelu_new": "gelu_new",
    "gelu_exact": "gelu",
    "relu": "relu",
    "tanh": "tanh",
    "linear": "linear",
}
