"""Stateless, thread-safe recurrent kernels over one layer and one direction: the Elman cell
(:mod:`.elman`), its deep-transition form (:mod:`.deep`: an MLP of k layers inside the step) and
the gated cells, GRU and LSTM (:mod:`.gated`; with quantized weights :mod:`.quantized_gated`).

Arrays in, arrays out; nothing is cached (but the packed weights a caller keeps in a
:class:`WeightCache`, passed as ``weight_cache=``), so calls from many threads at once are
safe. The kernels run in C++ with the GIL released.
"""

from .._core import WeightCache
from .deep import (
    DeepTransitionGrads,
    DeepTransitionOutput,
    deep_transition_backward,
    deep_transition_forward,
    deep_transition_step,
)
from .elman import (
    PLAIN_FORWARD_OPTIONS,
    RNNGrads,
    quantized_rnn_forward,
    quantized_rnn_step,
    rnn_backward,
    rnn_forward,
    rnn_step,
)
from .gated import (
    PLAIN_GRU_OPTIONS,
    PLAIN_LSTM_OPTIONS,
    GatedOutput,
    GRUGrads,
    LSTMGrads,
    gru_backward,
    gru_forward,
    gru_step,
    lstm_backward,
    lstm_forward,
    lstm_step,
)
from .layer_norm_lstm import (
    LayerNormLSTMGrads,
    layer_norm_lstm_backward,
    layer_norm_lstm_forward,
    layer_norm_lstm_step,
)
from .lstm_forms import LSTMFormGrads, lstm_form_backward, lstm_form_forward, lstm_form_step
from .quantized_gated import quantized_gated_forward, quantized_gated_step

__all__ = [
    "WeightCache",
    "PLAIN_FORWARD_OPTIONS",
    "rnn_forward",
    "rnn_backward",
    "rnn_step",
    "RNNGrads",
    "deep_transition_forward",
    "deep_transition_backward",
    "deep_transition_step",
    "DeepTransitionOutput",
    "DeepTransitionGrads",
    "quantized_rnn_forward",
    "quantized_rnn_step",
    "PLAIN_GRU_OPTIONS",
    "PLAIN_LSTM_OPTIONS",
    "GatedOutput",
    "GRUGrads",
    "LSTMGrads",
    "gru_forward",
    "gru_backward",
    "gru_step",
    "lstm_forward",
    "lstm_backward",
    "lstm_step",
    "LayerNormLSTMGrads",
    "layer_norm_lstm_forward",
    "layer_norm_lstm_backward",
    "layer_norm_lstm_step",
    "LSTMFormGrads",
    "lstm_form_forward",
    "lstm_form_backward",
    "lstm_form_step",
    "quantized_gated_forward",
    "quantized_gated_step",
]
