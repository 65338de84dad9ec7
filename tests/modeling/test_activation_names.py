"""The one activation-name table: ours, HF's, and the functions behind them."""

import numpy as np
import pytest

from official_bert.modeling import activation_names
from official_bert.modeling import activations
from official_bert.modeling.bert_config import BertConfig


def test_every_name_has_a_function_and_every_translation_a_name():
  assert set(activations.ACTIVATIONS) == set(activation_names.NAMES)
  assert set(activation_names.HF_TO_OURS.values()) <= set(activation_names.NAMES)
  assert set(activation_names.OURS_TO_HF) == set(activation_names.NAMES)
  assert set(activation_names.OURS_TO_HF.values()) <= set(activation_names.HF_TO_OURS)


@pytest.mark.parametrize("ours", activation_names.NAMES)
def test_ours_to_hf_and_back_computes_the_same_function(ours):
  back = activation_names.HF_TO_OURS[activation_names.OURS_TO_HF[ours]]
  x = np.linspace(-3, 3, 13).astype(np.float32)
  np.testing.assert_array_equal(np.asarray(activations.get_activation(back)(x)),
                                np.asarray(activations.get_activation(ours)(x)))


def test_hf_gelu_is_our_exact_gelu():
  assert activation_names.HF_TO_OURS["gelu"] == "gelu_exact"
  assert activation_names.OURS_TO_HF["gelu"] == "gelu_new"


def test_config_validates_against_the_table():
  for name in activation_names.NAMES:
    assert BertConfig(vocab_size=4, hidden_act=name).hidden_act == name
  with pytest.raises(ValueError, match="hidden_act"):
    BertConfig(vocab_size=4, hidden_act="swish")
