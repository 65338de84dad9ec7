"""Keras 3 layers of the BERT model."""

from official_bert.modeling.layers.attention import BertSelfAttention
from official_bert.modeling.layers.embeddings import BertEmbeddings
from official_bert.modeling.layers.heads import MaskedLMHead
from official_bert.modeling.layers.heads import NextSentenceHead
from official_bert.modeling.layers.transformer_block import TransformerBlock

__all__ = [
    "BertEmbeddings",
    "BertSelfAttention",
    "MaskedLMHead",
    "NextSentenceHead",
    "TransformerBlock",
]
