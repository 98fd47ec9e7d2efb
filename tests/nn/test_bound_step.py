"""step()'s hot path, the layer's step bound once (``_core.StepFunction``, nn.recurrent.rnn_streaming's
``_bind_step``): the same results as the general path and the NumPy reference for every cell and
option it takes, the weights read live (in place and rebound), options changed after the first
step, copies and pickles, quantized copies, and every argument it declines handed to the
general path (which converts it or names the problem)."""

from __future__ import annotations

import copy
import pickle
import sys

import numpy as np
import pytest
from conftest import assert_close

import rnnfast
from rnnfast import _core, reference

B, D, H, P = 3, 5, 7, 4
F32, F64 = np.float32, np.float64

# (class, constructor options): every cell and option the bound step runs
CASES = [
    ("RNN", {}),
    ("RNN", {"nonlinearity": "relu"}),
    ("RNN", {"alpha": 0.3}),
    ("RNN", {"bias": False}),
    ("GRU", {}),
    ("GRU", {"reset_after": False}),
    ("GRU", {"bias": False, "recurrent_activation": "hard_sigmoid"}),
    ("LSTM", {}),
    ("LSTM", {"proj_size": P}),
    ("LSTM", {"activation": "relu", "bias": False}),
]
IDS = [f"{name}-{'-'.join(f'{k}={v}' for k, v in o.items()) or 'default'}" for name, o in CASES]


def _layer(name, options, dtype=F32, **more):
    return getattr(rnnfast, name)(D, H, dtype=dtype, seed=3, **options, **more).eval()


def _state(name, layer, rng, dtype):
    """A random state in the step's API form: (1, B, R) arrays, the LSTM's pair."""
    R = layer.proj_size if name == "LSTM" and layer.proj_size else H
    h = rng.standard_normal((1, B, R)).astype(dtype)
    if name != "LSTM":
        return h
    return h, rng.standard_normal((1, B, H)).astype(dtype)


def _fortran(state):
    """The same state laid out in Fortran order: the bound step declines it."""
    if isinstance(state, tuple):
        return tuple(np.asfortranarray(s) for s in state)
    return np.asfortranarray(state)


def _reference(name, layer, x, state):
    """step() by the NumPy reference: (out (B, R), the states as a tuple of (B, .) arrays)."""
    p = layer.state_dict()
    w = [p.get(f"{n}_l0") for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
    if name == "RNN":
        _, h = reference.rnn_forward(
            x[None], *w, h0=state[0], nonlinearity=layer.nonlinearity, alpha=layer.alpha
        )
        return h, (h,)
    opts = dict(activation=layer.activation, recurrent_activation=layer.recurrent_activation)
    if name == "GRU":
        h = reference.gru_step(x, state[0], *w, reset_after=layer.reset_after, **opts)
        return h, (h,)
    h, c = reference.lstm_step(x, *state, *w, weight_hr=p.get("weight_hr_l0"), **opts)
    return h, (h, c)


def _parts(state):
    """A step's returned state as a tuple of (B, .) arrays."""
    return tuple(s[0] for s in state) if isinstance(state, tuple) else (state[0],)


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("name, options", CASES, ids=IDS)
def test_bound_step_equals_the_general_path_and_the_reference(name, options, dtype, rng):
    layer = _layer(name, options, dtype)
    x = rng.standard_normal((B, D)).astype(dtype)
    state = _state(name, layer, rng, dtype)
    out, new = layer.step(x, state)
    assert isinstance(layer._stepper, _core.StepFunction)  # the hot path ran
    out_general, new_general = layer.step(x, _fortran(state))
    np.testing.assert_array_equal(out, out_general)
    for a, b in zip(_parts(new), _parts(new_general)):
        np.testing.assert_array_equal(a, b)
    expected_out, expected_states = _reference(name, layer, x, _parts(state))
    assert_close(out, expected_out, dtype, "out_t")
    for a, b in zip(_parts(new), expected_states):
        assert_close(a, b, dtype, "state")
    np.testing.assert_array_equal(out, _parts(new)[0])  # out_t is the new h
    # from zeros (state None) as from an explicit zero state
    zeros = tuple(np.zeros_like(s) for s in state) if name == "LSTM" else np.zeros_like(state)
    out0, _ = layer.step(x)
    np.testing.assert_array_equal(out0, layer.step(x, _fortran(zeros))[0])


@pytest.mark.parametrize("name, options", CASES[::3], ids=IDS[::3])
def test_steps_over_a_sequence_give_the_forward(name, options, rng):
    layer = _layer(name, options, F64)
    xs = rng.standard_normal((6, B, D))
    y, _ = layer(xs)
    state = None
    for t in range(len(xs)):
        out, state = layer.step(xs[t], state)
        assert_close(out, y[t], F64, f"step {t}")


@pytest.mark.parametrize("name", ["RNN", "GRU", "LSTM"])
def test_weights_are_read_live_in_place_and_rebound(name, rng):
    layer = _layer(name, {})
    twin = _layer(name, {})
    x = rng.standard_normal((B, D)).astype(F32)
    layer.step(x)  # binds the step
    with rnnfast.writable_parameters(layer, twin):  # an optimizer's in-place update
        for key, value in layer._params.items():
            value *= 0.5
            twin._params[key][...] = value
    np.testing.assert_array_equal(layer.step(x)[0], twin.step(x, _fortran(_zero(twin, name)))[0])
    # a parameter rebound to another array (the torch bridge points them at its tensors)
    key = next(k for k in layer._params if k.startswith("weight_hh"))
    layer._params[key] = np.ascontiguousarray(-layer._params[key])
    with twin.writable_parameters():
        twin._params[key][...] = layer._params[key]
    np.testing.assert_array_equal(layer.step(x)[0], twin.step(x, _fortran(_zero(twin, name)))[0])
    # rebound to the wrong shape: the general path names it
    layer._params[key] = np.zeros((2, 2), F32)
    with pytest.raises(ValueError, match="weight_hh"):
        layer.step(x)


def _zero(layer, name):
    """A zero state in the step's API form, for a batch of B."""
    R = layer.proj_size if name == "LSTM" and layer.proj_size else H
    h = np.zeros((1, B, R), layer.dtype)
    return (h, np.zeros((1, B, H), layer.dtype)) if name == "LSTM" else h


@pytest.mark.parametrize(
    "name, option, value",
    [
        ("RNN", "nonlinearity", "relu"),
        ("RNN", "alpha", 0.5),
        ("GRU", "activation", "relu"),
        ("LSTM", "recurrent_activation", "hard_sigmoid"),
    ],
)
def test_an_option_changed_after_the_first_step_is_what_the_next_step_runs(
    name, option, value, rng
):
    layer = _layer(name, {})
    x = rng.standard_normal((B, D)).astype(F32)
    layer.step(x)
    setattr(layer, option, value)
    np.testing.assert_array_equal(layer.step(x)[0], _layer(name, {option: value}).step(x)[0])


@pytest.mark.parametrize("name", ["RNN", "GRU", "LSTM"])
def test_stateful_and_dilated_layers_step_on_the_general_path(name, rng):
    layer = _layer(name, {})
    x = rng.standard_normal((B, D)).astype(F32)
    first, state = layer.step(x)
    second = layer.step(x, state)[0]
    layer.stateful = True  # it carries its state: the general path
    np.testing.assert_array_equal(layer.step(x)[0], first)
    np.testing.assert_array_equal(layer.step(x)[0], second)
    assert not isinstance(layer._stepper, _core.StepFunction)
    layer.stateful = False
    np.testing.assert_array_equal(layer.step(x)[0], first)
    assert isinstance(layer._stepper, _core.StepFunction)
    layer.dilation = 2
    out, rings = layer.step(x)
    assert not isinstance(layer._stepper, _core.StepFunction)
    np.testing.assert_array_equal(out, first)


@pytest.mark.parametrize("name", ["RNN", "GRU", "LSTM"])
def test_copies_and_pickles_bind_their_own_step(name, rng):
    layer = _layer(name, {"proj_size": P} if name == "LSTM" else {})
    x = rng.standard_normal((B, D)).astype(F32)
    out, _ = layer.step(x)
    for twin in (copy.deepcopy(layer), pickle.loads(pickle.dumps(layer)), copy.copy(layer)):
        assert twin._stepper is None or twin._stepper is layer._stepper
        np.testing.assert_array_equal(twin.step(x)[0], out)
    twin = copy.deepcopy(layer)
    assert not any(value.flags.writeable for value in twin._params.values())  # read-only too
    with twin.writable_parameters():
        for value in twin._params.values():  # the copy's parameters, not the original's
            value[...] = 0
    assert not np.array_equal(twin.step(x)[0], out)
    np.testing.assert_array_equal(layer.step(x)[0], out)


@pytest.mark.parametrize("name", ["RNN", "GRU", "LSTM"])
def test_a_quantized_copy_steps_on_its_own_kernels(name, rng):
    layer = _layer(name, {})
    x = rng.standard_normal((B, D)).astype(F32)
    out, _ = layer.step(x)
    q = rnnfast.quantize(layer, "int8")
    q_out, _ = q.step(x)
    assert not isinstance(q._stepper, _core.StepFunction)
    assert not np.array_equal(q_out, out)  # int8 weights: not the float step's bits
    np.testing.assert_allclose(q_out, out, atol=0.05)
    np.testing.assert_allclose(q_out, q(x[None])[0][0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["RNN", "GRU", "LSTM"])
def test_declined_arguments_are_converted_or_named(name, rng):
    layer = _layer(name, {})
    x = rng.standard_normal((B, D))
    with pytest.raises(TypeError, match="x_t: expected a float32 array"):
        layer.step(x)  # float64 for a float32 layer: named, with the fix
    x32 = x.astype(F32)
    strided = np.repeat(x32, 2, axis=1)[:, ::2]  # a view with a stride: copied, then stepped
    np.testing.assert_array_equal(layer.step(strided)[0], layer.step(x32)[0])
    before = x32.copy()
    with pytest.raises(ValueError, match="x_t"):
        layer.step(x32[:, :2])
    with pytest.raises((ValueError, TypeError), match="h|state"):
        layer.step(x32, np.zeros((1, B + 1, H), F32) if name != "LSTM" else np.zeros(3, F32))
    np.testing.assert_array_equal(x32, before)  # user arrays are never modified
    bound = layer._stepper
    assert bound(x32[:, :2], None) is None
    assert bound(x32.astype(F64), None) is None
    assert bound([[0.0] * D], None) is None
    assert bound(np.asfortranarray(np.ones((B, D), F32)), None) is None
    assert bound(x32, "state") is None


@pytest.mark.parametrize("name", ["RNN", "GRU", "LSTM"])
def test_the_bound_call_checks_its_form_and_keeps_no_reference(name, rng):
    """The bound step is the type's own call slot (no pybind11 dispatch): a wrong number of
    arguments, keywords or an uninitialised object are TypeErrors, and a call holds on to
    nothing (the output is a view of the new state, which owns the memory)."""
    layer = _layer(name, {})
    x = rng.standard_normal((B, D)).astype(F32)
    state = layer.step(x)[1]
    bound = layer._stepper
    with pytest.raises(TypeError, match=r"2 arguments \(x_t, state\), got 1"):
        bound(x)
    with pytest.raises(TypeError, match="by position"):
        bound(x_t=x, state=state)
    with pytest.raises(TypeError, match="not initialised"):
        _core.StepFunction.__new__(_core.StepFunction)(x, None)
    refs_x = sys.getrefcount(x)
    refs_state = sys.getrefcount(state)
    for _ in range(100):
        out, state_next = bound(x, state)
    after = (sys.getrefcount(x), sys.getrefcount(state))
    assert after == (refs_x, refs_state)
    first = state_next[0] if name == "LSTM" else state_next
    assert out.base is first and out.flags.c_contiguous and out.flags.writeable
    np.testing.assert_array_equal(out, first[0])


@pytest.mark.parametrize("name", ["RNN", "GRU", "LSTM", "GRUCell", "LSTMCell"])
def test_new_parameters_start_on_a_cache_line_and_copies_step_alike(name, rng):
    """A new layer's parameters start on 64-byte boundaries (the step's vector loads then never
    straddle two cache lines); a deep copy's arrays have NumPy's own alignment, and its steps
    give the same bits."""
    layer = getattr(rnnfast, name)(32, 48, seed=3)  # every row of W a whole number of lines
    if not name.endswith("Cell"):
        layer.eval()
    assert all(p.ctypes.data % 64 == 0 for p in layer._params.values())
    if name.endswith("Cell"):
        return
    twin = copy.deepcopy(layer)
    shifted = {}
    for key, p in twin._params.items():  # rebound to storage 16 bytes past a cache line
        buffer = np.empty(p.nbytes + 80, np.uint8)
        start = (16 - buffer.ctypes.data) % 64
        shifted[key] = buffer[start : start + p.nbytes].view(p.dtype).reshape(p.shape)
        shifted[key][...] = p
    twin._params.update(shifted)
    twin._stepper = None
    x = rng.standard_normal((B, 32)).astype(F32)
    out, state = layer.step(x)
    out_twin, state_twin = twin.step(x)
    np.testing.assert_array_equal(out, out_twin)
    np.testing.assert_array_equal(layer.step(x, state)[0], twin.step(x, state_twin)[0])
