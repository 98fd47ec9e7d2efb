"""The layer forms the mixed-precision tests run: every recurrent cell and its options."""

from __future__ import annotations

import rnnfast


def layer_forms(P):
    """name -> (layer class, options); ``P`` the projected LSTM's size."""
    return {
        "rnn-tanh": (rnnfast.RNN, {"nonlinearity": "tanh"}),
        "rnn-relu": (rnnfast.RNN, {"nonlinearity": "relu"}),
        "gru": (rnnfast.GRU, {}),
        "gru-reset_before": (rnnfast.GRU, {"reset_after": False}),
        "lstm": (rnnfast.LSTM, {}),
        "lstm-proj": (rnnfast.LSTM, {"proj_size": P}),
        "deep_transition": (rnnfast.DeepTransitionRNN, {"transition_layers": 3}),
        "layer_norm_lstm": (rnnfast.LayerNormLSTM, {}),
    }
