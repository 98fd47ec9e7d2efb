"""rnnfast.Streams (nn.streams): many streams stepped in batches of any subset give, stream by
stream, what ``layer.step`` gives on that stream alone (each cell and option, float32 and
float64, bf16 products, the quantized copies), with resets and lengths; the store and the
caller's arrays are left as they were by every refused call."""

from __future__ import annotations

import numpy as np
import pytest
from bf16_paths import BF16_UNIT_ROUNDOFF, bf16_path  # noqa: F401
from conftest import assert_close

import rnnfast

D, H, P = 5, 7, 4
CAPACITY, STEPS = 9, 6
F32, F64 = np.float32, np.float64

# (class, constructor options): every cell, the options that change a step's equations or the
# form of its state
CASES = [
    ("RNN", {}),
    ("RNN", {"nonlinearity": "relu"}),
    ("RNN", {"alpha": 0.4}),
    ("GRU", {}),
    ("GRU", {"reset_after": False}),
    ("LSTM", {}),
    ("LSTM", {"proj_size": P}),
    ("LSTM", {"peepholes": True, "input_forget": True, "cell_clip": 0.5}),
    ("LayerNormLSTM", {}),
    ("DeepTransitionRNN", {}),
    ("GRU", {"num_layers": 2}),
    ("LSTM", {"num_layers": 2, "proj_size": P}),
    ("RNN", {"num_layers": 2, "dilation": [1, 2]}),
]
IDS = [f"{name}-{'-'.join(f'{k}={v}' for k, v in o.items()) or 'default'}" for name, o in CASES]


def _layer(name, options, dtype=F32, size=(D, H), **more):
    layer = getattr(rnnfast, name)(*size, dtype=dtype, seed=5, **options, **more).eval()
    if name == "LSTM" and options.get("peepholes"):
        weights = layer.state_dict()
        rng = np.random.default_rng(1)
        for key in weights:  # peepholes start at zeros: give them values that show
            if key.startswith("weight_peephole"):
                weights[key] = (0.3 * rng.standard_normal(weights[key].shape)).astype(dtype)
        layer.load_state_dict(weights)
    return layer


def _run(streams, layer, dtype, seed=0, resets=True):
    """STEPS steps of random subsets (random order, some reset), each checked against a loop of
    ``layer.step`` over the same streams one at a time; then the states and lengths."""
    rng = np.random.default_rng(seed)
    states = [None] * CAPACITY  # each stream's own state (None: zeros)
    lengths = np.zeros(CAPACITY, dtype=np.int64)
    for t in range(STEPS):
        k = int(rng.integers(1, CAPACITY + 1))
        ids = rng.permutation(CAPACITY)[:k]
        x = rng.standard_normal((k, layer.input_size)).astype(dtype)
        reset = rng.random(k) < 0.3 if resets else None
        got = streams.step(ids, x, reset=reset)
        for i, s in enumerate(ids):
            if reset is not None and reset[i]:
                states[s], lengths[s] = None, 0
            out, states[s] = layer.step(x[i : i + 1], states[s])
            lengths[s] += 1
            assert_close(got[i], out[0], dtype, f"step {t}, stream {s}")
    np.testing.assert_array_equal(streams.lengths, lengths)
    stepped = [s for s in range(CAPACITY) if states[s] is not None]
    if stepped:
        together = streams.state(stepped)
        for j, s in enumerate(stepped):
            alone = rnnfast.nn.streams._leaves(states[s])
            for a, b in zip(rnnfast.nn.streams._leaves(together), alone):
                assert_close(np.take(a, [j], axis=-2), b, dtype, f"state of stream {s}")


@pytest.mark.parametrize("dtype", [F32, F64], ids=["float32", "float64"])
@pytest.mark.parametrize(("name", "options"), CASES, ids=IDS)
def test_streams_step_as_each_stream_alone(name, options, dtype):
    layer = _layer(name, options, dtype)
    _run(rnnfast.Streams(layer, CAPACITY), layer, dtype)


@pytest.mark.parametrize(("name", "options"), CASES[:8], ids=IDS[:8])
def test_bf16_products_as_the_layers_own_step(name, options, bf16_path):  # noqa: F811
    layer = _layer(name, options, precision="bf16")
    _run(rnnfast.Streams(layer, CAPACITY), layer, F32, seed=1)


@pytest.mark.parametrize("mode", ["int8", "bf16"])
@pytest.mark.parametrize(
    ("name", "options"),
    [c for c in CASES[:7] if not c[1].get("peepholes")],
    ids=[i for c, i in zip(CASES[:7], IDS) if not c[1].get("peepholes")],
)
def test_quantized_copies_as_their_own_step(name, options, mode):
    # large enough for the quantized products (nn.quantized.gated.FALLBACK_WEIGHTS) wherever
    # the CPU runs them natively
    options = {**options, "proj_size": 16} if "proj_size" in options else options
    layer = rnnfast.quantize(_layer(name, options, size=(48, 48)), mode)
    assert layer.quantized == mode
    _run(rnnfast.Streams(layer, CAPACITY), layer, F32, seed=2)


def test_a_stream_resets_to_a_given_state_and_keeps_the_others():
    layer = _layer("LSTM", {"proj_size": P})
    streams = rnnfast.Streams(layer, CAPACITY)
    rng = np.random.default_rng(3)
    streams.step(np.arange(CAPACITY), rng.standard_normal((CAPACITY, D)).astype(F32))
    before = streams.state()
    h = rng.standard_normal((1, 2, P)).astype(F32)
    c = rng.standard_normal((1, H)).astype(F32)  # without the batch axis: for both streams
    streams.reset([6, 2], state=(h, c))
    got_h, got_c = streams.state([6, 2])
    np.testing.assert_array_equal(got_h, h)
    np.testing.assert_array_equal(got_c, np.broadcast_to(c[:, None], (1, 2, H)))
    np.testing.assert_array_equal(streams.lengths[[6, 2, 0]], [0, 0, 1])
    others = [s for s in range(CAPACITY) if s not in (2, 6)]
    for a, b in zip(streams.state(others), before):
        np.testing.assert_array_equal(a, b[:, others])
    x = rng.standard_normal((1, D)).astype(F32)
    out, _ = layer.step(x, (h[:, 1:], c[:, None]))
    assert_close(streams.step([2], x)[0], out[0], F32)
    streams.reset()
    assert not streams.lengths.any()
    assert not any(a.any() for a in streams.state())


def test_an_empty_subset_steps_nothing():
    streams = rnnfast.Streams(_layer("GRU", {}), CAPACITY)
    out = streams.step(np.array([], dtype=np.int64), np.empty((0, D), F32))
    assert out.shape == (0, H) and out.dtype == F32
    assert not streams.lengths.any()


def _check_refused(streams, call, error, *words):
    """``call`` raises ``error`` naming ``words``, and changes neither states nor lengths."""
    states, lengths = streams.state(), streams.lengths
    with pytest.raises(error) as caught:
        call()
    for word in words:
        assert word in str(caught.value)
    for a, b in zip(rnnfast.nn.streams._leaves(streams.state()), [*states]):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(streams.lengths, lengths)


def test_bad_arguments_are_refused_by_name():
    streams = rnnfast.Streams(_layer("LSTM", {}), CAPACITY)
    x = np.ones((3, D), F32)
    streams.step([0, 1, 2], x)
    _check_refused(streams, lambda: streams.step([1, 4, 1], x), ValueError, "ids", "distinct", "1")
    _check_refused(streams, lambda: streams.step([1, 4, CAPACITY], x), ValueError, "ids", "[0, 9)")
    _check_refused(streams, lambda: streams.step([1, -1, 2], x), ValueError, "ids", "-1")
    huge = np.array([1, 2**63 + 5, 2], dtype=np.uint64)  # would wrap to a negative intp
    _check_refused(streams, lambda: streams.step(huge, x), ValueError, "ids", str(2**63 + 5))
    _check_refused(streams, lambda: streams.step([1.0, 2.0, 3.0], x), TypeError, "ids", "integer")
    _check_refused(streams, lambda: streams.step([[1, 2, 3]], x), ValueError, "ids", "(1, 3)")
    _check_refused(streams, lambda: streams.step([1, 2], x), ValueError, "x", "(2, 5)", "(3, 5)")
    _check_refused(streams, lambda: streams.step([1, 2, 3], x.astype(F64)), TypeError, "x")
    _check_refused(
        streams, lambda: streams.step([1, 2, 3], x, reset=[True]), ValueError, "reset", "(3,)"
    )
    _check_refused(streams, lambda: streams.step([1, 2, 3], x, reset=[0.5] * 3), TypeError, "reset")
    _check_refused(
        streams, lambda: streams.reset([1], state=np.ones((1, 1, H), F32)), TypeError, "state"
    )
    bad = (np.ones((1, 2, H), F32), np.ones((1, 3, H), F32))
    _check_refused(streams, lambda: streams.reset([1, 2], state=bad), ValueError, "state part 1")
    _check_refused(streams, lambda: streams.state([3, 3]), ValueError, "ids")


def test_the_callers_arrays_are_not_written():
    streams = rnnfast.Streams(_layer("GRU", {}), CAPACITY)
    ids = np.array([5, 3, 8], dtype=np.int32)
    x = np.asfortranarray(np.random.default_rng(4).standard_normal((3, D)).astype(F32))
    reset = np.array([True, False, True])
    for a in (ids, x, reset):
        a.flags.writeable = False
    copies = [a.copy() for a in (ids, x, reset)]
    streams.step(ids, x, reset=reset)
    for a, b in zip((ids, x, reset), copies):
        np.testing.assert_array_equal(a, b)


class _OutputOnly:
    input_size = D

    def step(self, x_t, y_prev=None):
        return np.zeros((x_t.shape[0], H), F32)


def test_layers_that_cannot_stream_are_refused():
    with pytest.raises(ValueError, match="bidirectional"):
        rnnfast.Streams(_layer("GRU", {"bidirectional": True}), 4)
    with pytest.raises(ValueError, match="stateful"):
        rnnfast.Streams(_layer("GRU", {"stateful": True}), 4)
    with pytest.raises(TypeError, match="layer"):
        rnnfast.Streams(rnnfast.Linear(D, H), 4)
    with pytest.raises(TypeError, match=r"\(out_t, state_next\)"):
        rnnfast.Streams(_OutputOnly(), 4)  # as JordanRNN.step: y_t alone, no state
    with pytest.raises(ValueError, match="capacity"):
        rnnfast.Streams(_layer("RNN", {}), 0)
    with pytest.raises(TypeError, match="capacity"):
        rnnfast.Streams(_layer("RNN", {}), 4.0)
