"""Property-based tests (hypothesis, derandomized): rnnfast.functional equals rnnfast.reference
on random shapes, dtypes, strides and options; random garbage only ever raises
TypeError / ValueError / MemoryError."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import PLAIN, assert_close

from rnnfast import functional as F
from rnnfast import reference

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

SETTINGS = settings(
    derandomize=True,
    max_examples=80,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)


def _layout(a, how):
    """The same values in another memory layout (the kernels must not care)."""
    if a is None or a.ndim == 0:
        return a
    if how == "strided":
        big = np.zeros(a.shape[:-1] + (a.shape[-1] * 2,), dtype=a.dtype)
        big[..., 1::2] = a
        return big[..., 1::2]
    if how == "transposed":
        return np.ascontiguousarray(a.T).T
    if how == "reversed":
        return np.ascontiguousarray(a[::-1])[::-1]
    return a


@st.composite
def problems(draw):
    T = draw(st.integers(0, 6))
    B = draw(st.integers(0, 4))
    D = draw(st.integers(1, 9))
    H = draw(st.integers(1, 9))
    nonlinearity = draw(st.sampled_from(["tanh", "relu"]))
    # relu in float64 only: a float32 pre-activation near 0 may round to the other side
    dtype = (
        np.float64 if nonlinearity == "relu" else draw(st.sampled_from([np.float32, np.float64]))
    )
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    bound = 1.0 / np.sqrt(H)
    u = lambda *s: rng.uniform(-bound, bound, size=s).astype(dtype)
    p = {
        "x": rng.standard_normal((T, B, D)).astype(dtype),
        "weight_ih": u(H, D),
        "weight_hh": u(H, H),
        "bias_ih": u(H) if draw(st.booleans()) else None,
        "bias_hh": u(H) if draw(st.booleans()) else None,
        "h0": rng.uniform(-1, 1, (B, H)).astype(dtype) if draw(st.booleans()) else None,
    }
    lengths = None
    if draw(st.booleans()):
        lengths = rng.integers(0, T + 1, size=B)
    alpha = draw(st.sampled_from([1.0, 1.0, 0.5, 0.05]))
    layouts = {k: draw(st.sampled_from(["plain", "strided", "transposed", "reversed"])) for k in p}
    return p, nonlinearity, dtype, lengths, alpha, layouts


@SETTINGS
@given(problems())
def test_forward_and_backward_equal_the_reference(prob):
    p, nonlinearity, dtype, lengths, alpha, layouts = prob
    args = {k: _layout(v, layouts[k]) for k, v in p.items()}
    before = {k: None if v is None else v.copy() for k, v in args.items()}
    y, h_n = F.rnn_forward(**args, nonlinearity=nonlinearity, lengths=lengths, alpha=alpha)
    q = {k: None if v is None else v.astype(np.float64) for k, v in p.items()}
    ry, rh = reference.rnn_forward(**q, nonlinearity=nonlinearity, lengths=lengths, alpha=alpha)
    assert_close(y, ry, dtype, "y")
    assert_close(h_n, rh, dtype, "h_n")
    _, h_only = F.rnn_forward(
        **args, nonlinearity=nonlinearity, lengths=lengths, alpha=alpha, return_sequences=False
    )
    assert np.array_equal(h_only, h_n)

    rng = np.random.default_rng(y.size)
    dy = rng.standard_normal(y.shape).astype(dtype)
    dh_n = rng.standard_normal(h_n.shape).astype(dtype)
    g = F.rnn_backward(
        args["x"],
        args["weight_ih"],
        args["weight_hh"],
        _layout(y, "strided"),
        dy,
        dh_n,
        h0=args["h0"],
        **dict(PLAIN, nonlinearity=nonlinearity, lengths=lengths, alpha=alpha),
    )
    up = lambda a: None if a is None else np.asarray(a, np.float64)
    # the reference differentiates at the kernel's own y (relu's mask then agrees exactly)
    r = reference.rnn_backward(
        q["x"],
        q["weight_ih"],
        q["weight_hh"],
        up(y),
        up(dy),
        up(dh_n),
        h0=q["h0"],
        **dict(PLAIN, nonlinearity=nonlinearity, lengths=lengths, alpha=alpha),
    )
    for name, got, want in zip(g._fields, g, r):
        assert_close(got, want, dtype, name)
    for k, v in args.items():  # inputs unchanged
        assert v is None or np.array_equal(v, before[k])


@SETTINGS
@given(problems())
def test_step_equals_one_step_of_forward(prob):
    p, nonlinearity, dtype, _, alpha, layouts = prob
    if p["x"].shape[0] == 0 or p["x"].shape[1] == 0:
        return
    h = (
        p["h0"]
        if p["h0"] is not None
        else np.zeros((p["x"].shape[1], p["weight_hh"].shape[0]), dtype)
    )
    got = F.rnn_step(
        _layout(p["x"][0], layouts["x"]),
        _layout(h, layouts["h0"]),
        p["weight_ih"],
        p["weight_hh"],
        p["bias_ih"],
        p["bias_hh"],
        nonlinearity,
        alpha,
    )
    y, _ = F.rnn_forward(
        p["x"][:1],
        p["weight_ih"],
        p["weight_hh"],
        p["bias_ih"],
        p["bias_hh"],
        h,
        nonlinearity,
        alpha=alpha,
    )
    assert_close(got, y[0].astype(np.float64), dtype, "h_next")


# ---- garbage in: only TypeError / ValueError / MemoryError ---------------------------------------

ANY_DTYPE = st.one_of(
    hnp.scalar_dtypes(), st.sampled_from([np.dtype(object), np.dtype(">f8"), np.dtype(">f4")])
)
ANY_ARRAY = hnp.arrays(ANY_DTYPE, hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4))
GARBAGE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=5),
    st.complex_numbers(),
    st.lists(st.floats(), max_size=4),
    st.binary(max_size=4),
    ANY_ARRAY,
    st.builds(object),
    st.lists(st.lists(st.one_of(st.integers(), st.text(max_size=2)), max_size=3), max_size=3),
)
ARG = st.one_of(GARBAGE, GARBAGE, st.just("valid"))


@SETTINGS
@given(
    x=ARG,
    w_ih=ARG,
    w_hh=ARG,
    b=ARG,
    h0=ARG,
    lengths=ARG,
    nonlinearity=st.one_of(st.sampled_from(["tanh", "relu"]), GARBAGE),
    alpha=st.one_of(st.floats(), GARBAGE),
    rs=st.booleans(),
)
def test_garbage_only_raises_type_or_value_errors(
    x, w_ih, w_hh, b, h0, lengths, nonlinearity, alpha, rs
):
    valid = {
        "x": np.zeros((2, 3, 4)),
        "w_ih": np.zeros((5, 4)),
        "w_hh": np.zeros((5, 5)),
        "b": np.zeros(5),
        "h0": np.zeros((3, 5)),
        "lengths": np.array([2, 1, 0]),
    }
    pick = lambda name, v: valid[name] if isinstance(v, str) and v == "valid" else v
    with np.errstate(all="ignore"):
        try:
            F.rnn_forward(
                pick("x", x),
                pick("w_ih", w_ih),
                pick("w_hh", w_hh),
                pick("b", b),
                None,
                pick("h0", h0),
                nonlinearity,
                rs,
                pick("lengths", lengths),
                alpha,
            )
        except (TypeError, ValueError, MemoryError):
            pass


@SETTINGS
@given(x=ANY_ARRAY, w=ANY_ARRAY)
def test_garbage_arrays_to_step_and_backward(x, w):
    for call in (
        lambda: F.rnn_step(x, w, w, w),
        lambda: F.rnn_backward(x, w, w, x, x, w, h0=w, **PLAIN),
        lambda: F.rnn_forward(x, w, w),
    ):
        with np.errstate(all="ignore"):
            try:
                call()
            except (TypeError, ValueError, MemoryError):
                pass
