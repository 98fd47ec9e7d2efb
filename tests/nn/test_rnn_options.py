"""nn/recurrent/rnn_options.py: the recurrent layers' options are properties of the layer class itself,
each check written once (no mixin classes: ``LSTM.__mro__`` stays short), checked on assignment
as at construction; the Elman layer's step is a function of the layer (nn/recurrent/rnn_streaming.py)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import rnnfast
from rnnfast.nn.recurrent import rnn_options
from rnnfast.nn.recurrent.rnn import RecurrentLayer


@pytest.mark.parametrize("cls", [rnnfast.RNN, rnnfast.GRU, rnnfast.LSTM, rnnfast.DeepTransitionRNN])
def test_a_recurrent_layer_is_at_most_six_classes(cls):
    assert len(cls.__mro__) <= 6, [c.__name__ for c in cls.__mro__]


def test_the_options_every_recurrent_layer_has_are_one_property():
    assert RecurrentLayer.batch_first is rnnfast.JordanRNN.batch_first is rnn_options.BATCH_FIRST
    assert RecurrentLayer.nonlinearity is rnnfast.JordanRNN.nonlinearity
    assert rnnfast.LSTM.activation is rnnfast.nn.LSTMCell.activation


@pytest.mark.parametrize("cls", [rnnfast.RNN, rnnfast.GRU, rnnfast.LSTM])
def test_assignment_is_checked_as_construction(cls):
    layer = cls(3, 4, num_layers=2, bidirectional=True)
    with pytest.raises(ValueError, match="merge_mode"):
        layer.merge_mode = "max"
    with pytest.raises(ValueError, match="merge_mode"):
        cls(3, 4, num_layers=2, bidirectional=True, merge_mode="max")
    with pytest.raises(TypeError):
        layer.go_backwards = 1
    with pytest.raises(AttributeError, match="fixed at construction"):
        layer.hidden_size = 5
    layer.merge_mode = "sum"
    assert layer.merge_mode == "sum" and layer._options().merge_mode == "sum"
    layer.dilation = [1, 2]
    assert layer.dilation == [1, 2] and layer._dilations == (1, 2)


def test_the_dropout_warning_points_at_the_callers_line():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        layer = rnnfast.RNN(3, 4, dropout=0.5)
        layer.dropout = 0.25
    assert [w.filename for w in caught] == [__file__, __file__]


def test_an_option_change_drops_the_bound_step():
    layer = rnnfast.RNN(3, 4)
    x = np.zeros((2, 3), np.float32)
    layer.step(x)
    assert layer._stepper is not None
    layer.nonlinearity = "relu"
    assert layer._stepper is None
    out, _ = layer.step(x)
    assert out.shape == (2, 4)
