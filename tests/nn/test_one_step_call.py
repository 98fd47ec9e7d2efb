"""A layer call of one step of a batch of one in eval mode runs on the layer's bound step
(RNN.__call__, where nn.recurrent.plain_calls.nothing_around_cells says so): the same
results and forms as the general path (forced here with ``lengths``, which the shortcut never takes), y apart from h_n, and every
call it must not take (training, Keras forms, options around the cell, several layers or
directions, stateful, bf16) left to the general path."""

from __future__ import annotations

import numpy as np
import pytest

import rnnfast
from rnnfast.nn.recurrent.rnn_streaming import bind_step

D, H, P = 5, 7, 4

CASES = [
    ("RNN", {}),
    ("RNN", {"nonlinearity": "relu", "alpha": 0.5}),
    ("GRU", {}),
    ("GRU", {"reset_after": False, "bias": False}),
    ("LSTM", {}),
    ("LSTM", {"proj_size": P}),
]
IDS = [f"{name}-{'-'.join(f'{k}={v}' for k, v in o.items()) or 'default'}" for name, o in CASES]


class _CountingStep:
    """The layer's bound step, counting the calls it served (to see which path a call took;
    a layer without a bound step has a stand-in that declines every call)."""

    def __init__(self, bound):
        self.bound, self.calls = bound, 0

    def __call__(self, x_t, state):
        result = self.bound(x_t, state)
        self.calls += result is not None
        return result


def _layer(name, options, dtype=np.float32, **more):
    layer = getattr(rnnfast, name)(D, H, dtype=dtype, seed=3, **options, **more).eval()
    layer._stepper = _CountingStep(bind_step(layer))
    return layer


def _parts(result):
    y, state = result
    return [y, *state] if isinstance(state, tuple) else [y, state]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("name,options", CASES, ids=IDS)
def test_one_step_call_is_the_general_paths_result(name, options, batch_first, dtype):
    layer = _layer(name, options, dtype, batch_first=batch_first)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 1, D)).astype(dtype)
    state = None
    for _ in range(3):  # carrying the state from call to call, as a decoder does
        fast = layer(x, state)
        general = layer(x, state, lengths=np.array([1]))
        for got, want in zip(_parts(fast), _parts(general)):
            assert got.shape == want.shape and got.dtype == want.dtype
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        assert not np.shares_memory(fast[0], _parts(fast)[1])  # y is not h_n
        state = fast[1]
    assert layer._stepper.calls == 3


@pytest.mark.parametrize(
    "name,options,training",
    [
        ("GRU", {}, True),  # training keeps what backward reads
        ("GRU", {"return_sequences": True}, False),  # Keras's forms
        ("RNN", {"go_backwards": True}, False),
        ("LSTM", {"num_layers": 2}, False),
        ("LSTM", {"bidirectional": True}, False),
        ("GRU", {"stateful": True}, False),
        ("RNN", {"num_layers": 2, "residual": True}, False),
        ("GRU", {"precision": "bf16"}, False),
    ],
)
def test_other_calls_take_the_general_path(name, options, training, monkeypatch):
    if options.get("precision") == "bf16":
        monkeypatch.setattr(rnnfast._core, "bf16_unavailable_reason", lambda: "", raising=False)
        try:
            layer = _layer(name, options)
        except RuntimeError:
            pytest.skip("bf16 products do not run on this CPU")
    else:
        layer = _layer(name, options)
    layer.train(training)
    x = np.random.default_rng(1).standard_normal((1, 1, D)).astype(np.float32)
    layer(x)
    assert layer._stepper.calls == 0


def test_the_shortcut_follows_option_changes():
    layer = _layer("GRU", {})
    x = np.ones((1, 1, D), np.float32)
    layer(x)
    assert layer._stepper.calls == 1
    layer.go_backwards = True  # options are read at each call
    layer(x)
    layer.go_backwards = False
    layer.return_sequences = True  # Keras's form: the output alone
    y = layer(x)
    assert isinstance(y, np.ndarray) and y.shape == (1, 1, H)
    assert layer._stepper.calls == 1


def test_bad_input_is_named_by_the_general_path():
    layer = _layer("LSTM", {})
    with pytest.raises((TypeError, ValueError), match="h0"):
        layer(np.ones((1, 1, D), np.float32), np.ones((2, 1, H), np.float32))
    with pytest.raises((TypeError, ValueError), match="x"):
        layer(np.ones((1, 1, D + 1), np.float32))
