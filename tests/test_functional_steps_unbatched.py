"""The functional streaming steps take torch's cells' unbatched form: x_t (D,) with states
(H,) give 1-D states, and a state left out (None) is zeros, as ``torch.nn.RNNCell``,
``GRUCell`` and ``LSTMCell`` (the second oracle) compute them; batched and unbatched states
do not mix silently."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import import_torch

import rnnfast.functional as F

torch = import_torch()
# torch's own float32 LSTM with proj_size (the oracle of the projected step) says it leaves oneDNN
pytestmark = pytest.mark.filterwarnings("ignore:LSTM with projections is not supported")

D, H, R = 3, 5, 2
TOL = {np.float32: 2e-6, np.float64: 1e-13}


def _cell(kind, dtype):
    torch.manual_seed(0)
    if kind == "lstm-proj":  # torch's cell has no projection: the layer's one step is the oracle
        module = torch.nn.LSTM(D, H, proj_size=R)
    else:
        module = {"rnn": torch.nn.RNNCell, "gru": torch.nn.GRUCell, "lstm": torch.nn.LSTMCell}[
            kind
        ](D, H)
    return module.double() if dtype == np.float64 else module


def _weights(module, dtype):
    return [p.detach().numpy().astype(dtype) for p in module.parameters()]


def _torch_step(kind, module, x, states):
    x = torch.from_numpy(x)
    given = [None if s is None else torch.from_numpy(s) for s in states]
    with torch.no_grad():
        if kind == "lstm-proj":
            h0 = torch.zeros(1, R, dtype=x.dtype) if given[0] is None else given[0][None]
            c0 = torch.zeros(1, H, dtype=x.dtype) if given[1] is None else given[1][None]
            _, (h, c) = module(x[None], (h0, c0))
            return h[0].numpy(), c[0].numpy()
        if kind == "lstm":
            hx = None if given[0] is None else (given[0], given[1])
            return tuple(t.numpy() for t in module(x, hx))
        return module(x, given[0]).numpy()


def _step(kind, x, states, weights):
    if kind == "rnn":
        return F.rnn_step(x, states[0], *weights)
    if kind == "gru":
        return F.gru_step(x, states[0], *weights)
    if kind == "lstm":
        return F.lstm_step(x, *states, *weights)
    w_ih, w_hh, b_ih, b_hh, w_hr = weights
    return F.lstm_step(x, *states, w_ih, w_hh, b_ih, b_hh, weight_hr=w_hr)


def _state_shapes(kind):
    return {"rnn": (H,), "gru": (H,), "lstm": (H, H), "lstm-proj": (R, H)}[kind]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", ["rnn", "gru", "lstm", "lstm-proj"])
def test_unbatched_step_is_torchs_cell(kind, dtype, rng):
    module = _cell(kind, dtype)
    weights = _weights(module, dtype)
    x = rng.standard_normal(D).astype(dtype)
    states = [rng.standard_normal(w).astype(dtype) for w in _state_shapes(kind)]
    before = [x.copy(), *(s.copy() for s in states)]
    for given in (states, [None] * len(states)):
        got = _step(kind, x, given, weights)
        want = _torch_step(kind, module, x, given)
        for g, w in zip(
            got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)
        ):
            assert g.shape == w.shape and g.dtype == dtype
            np.testing.assert_allclose(g, w, rtol=TOL[dtype], atol=TOL[dtype])
    # the batch of one gives the same numbers, with the batch axis
    batched = _step(kind, x[None], [s[None] for s in states], weights)
    unbatched = _step(kind, x, states, weights)
    for b, u in zip(
        batched if isinstance(batched, tuple) else (batched,),
        unbatched if isinstance(unbatched, tuple) else (unbatched,),
    ):
        np.testing.assert_array_equal(b[0], u)
    for a, b in zip(before, [x, *states]):  # the caller's arrays are untouched
        np.testing.assert_array_equal(a, b)


def test_batched_state_with_unbatched_input_names_the_fix():
    weights = _weights(_cell("gru", np.float64), np.float64)
    with pytest.raises(
        ValueError, match=r"h: expected 1 dimension \(5,\).*got shape \(1, 5\).*x_t\[None\]"
    ):
        F.gru_step(np.zeros(D), np.zeros((1, H)), *weights)


def test_none_state_of_a_batch_is_zeros(rng):
    module = _cell("rnn", np.float64)
    weights = _weights(module, np.float64)
    x = rng.standard_normal((4, D))
    np.testing.assert_allclose(
        F.rnn_step(x, None, *weights), F.rnn_step(x, np.zeros((4, H)), *weights), rtol=0, atol=0
    )
