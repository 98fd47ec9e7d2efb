"""Bad, odd and extreme input: clear exceptions, never a crash, never a silently wrong answer,
never a modified user array, and a failed call leaves the layer as it was."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from conftest import ACTIVATIONS, DTYPES, PLAIN, assert_close, make_problem, reference_forward
from hypothesis import given, settings
from hypothesis import strategies as st

import rnnfast
from rnnfast import functional as F

T, B, D, H = 5, 3, 4, 7


@pytest.fixture
def problem(rng):
    return make_problem(rng, T, B, D, H, np.float32)


def _layer(p, **kw):
    layer = rnnfast.RNN(D, H, dtype=p.x.dtype, **kw)
    layer.load_state_dict(p.state_dict())
    return layer


def _snapshot(layer):
    return (
        {k: v.copy() for k, v in layer.named_parameters()},
        {k: v.copy() for k, v in layer.grads.items()},
    )


def _assert_unchanged(layer, snapshot):
    params, grads = snapshot
    for k, v in layer.named_parameters():
        assert np.array_equal(v, params[k]), k
    assert set(layer.grads) == set(grads)
    for k, v in layer.grads.items():
        assert np.array_equal(v, grads[k]), k


# ---- shapes ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(B, D), (T, B, D, 1), (T * B * D,)])
def test_x_wrong_ndim(problem, shape):
    x = np.zeros(shape, np.float32)
    args = problem.forward_args()
    args["x"] = x
    with pytest.raises(ValueError, match=r"x: .*" + re.escape(str(shape))):
        F.rnn_forward(**args)
    if len(shape) == 2:
        return  # the layer takes (T, D) as one unbatched sequence, as torch (nn/test_rnn_conformance.py)
    with pytest.raises(ValueError, match=r"x: .*" + re.escape(str(shape))):
        _layer(problem)(x)


def test_x_input_size_mismatch(problem):
    x = np.zeros((T, B, D + 1), np.float32)
    args = problem.forward_args()
    args["x"] = x
    with pytest.raises(ValueError, match=r"x: .*\(5, 3, 5\)"):
        F.rnn_forward(**args)
    with pytest.raises(ValueError, match=r"x: .*\(5, 3, 5\)"):
        _layer(problem)(x)


def test_h0_batch_mismatch(problem):
    args = problem.forward_args()
    args["h0"] = np.zeros((B + 1, H), np.float32)
    with pytest.raises(ValueError, match=r"h0: .*\(4, 7\)"):
        F.rnn_forward(**args)
    with pytest.raises(ValueError, match=r"h0: .*\(1, 4, 7\)"):
        _layer(problem)(problem.x, np.zeros((1, B + 1, H), np.float32))


@pytest.mark.parametrize(
    "h0_shape", [(B, H), (2, B, H), (1, B, H + 1), (1, 1, B, H)], ids=lambda s: str(s)
)
def test_layer_h0_must_be_1_b_h(problem, h0_shape):
    with pytest.raises(ValueError, match=r"h0: .*" + re.escape(str(h0_shape))):
        _layer(problem)(problem.x, np.zeros(h0_shape, np.float32))


@pytest.mark.parametrize(
    "name, shape",
    [
        ("weight_hh", (H + 1, H + 1)),
        ("weight_hh", (H, H + 1)),
        ("weight_hh", (H,)),
        ("bias_ih", (H + 1,)),
        ("bias_hh", (H - 1,)),
        ("bias_ih", (1, H)),
        ("h0", (B, H + 1)),
    ],
)
def test_hidden_size_mismatch(problem, name, shape):
    args = problem.forward_args()
    args[name] = np.zeros(shape, np.float32)
    with pytest.raises(ValueError, match=name + r": .*" + re.escape(str(shape))):
        F.rnn_forward(**args)


@pytest.mark.parametrize(
    "name, shape", [("y", (T, B, H + 1)), ("dy", (T + 1, B, H)), ("dh_n", (1, B, H))]
)
def test_backward_shape_mismatch(problem, name, shape):
    y, _ = F.rnn_forward(**problem.forward_args())
    kwargs = {"y": y, "dy": np.ones_like(y), "dh_n": np.ones((B, H), np.float32), "h0": problem.h0}
    kwargs[name] = np.zeros(shape, np.float32)
    with pytest.raises(ValueError, match=name + r": .*" + re.escape(str(shape))):
        F.rnn_backward(problem.x, problem.weight_ih, problem.weight_hh, **kwargs, **PLAIN)


# ---- types --------------------------------------------------------------------------------------

BAD_KINDS = [np.int64, np.int32, np.uint8, object, np.str_, np.bool_, np.complex64]


@pytest.mark.parametrize("kind", BAD_KINDS, ids=lambda k: np.dtype(k).name)
def test_non_float_input_is_a_type_error(problem, kind):
    x = problem.x.astype(kind)
    args = problem.forward_args()
    args["x"] = x
    with pytest.raises(TypeError, match="x"):
        F.rnn_forward(**args)
    with pytest.raises(TypeError, match="x"):
        _layer(problem)(x)
    args = problem.forward_args()
    args["weight_ih"] = problem.weight_ih.astype(kind)
    with pytest.raises(TypeError, match="weight_ih"):
        F.rnn_forward(**args)
    with pytest.raises(TypeError, match="h0"):
        _layer(problem)(problem.x, problem.h0[None].astype(kind))


@pytest.mark.parametrize(
    "layer_dtype, input_dtype",
    [
        (layer, other)
        for layer in DTYPES
        for other in (np.float16, np.float32, np.float64, np.longdouble)
        if np.dtype(other) != np.dtype(layer)
    ],
    ids=lambda d: np.dtype(d).name,
)
def test_other_float_dtype_is_a_type_error_naming_both(rng, layer_dtype, input_dtype):
    p = make_problem(rng, T, B, D, H, layer_dtype)
    layer = _layer(p)
    want, got = np.dtype(layer_dtype).name, np.dtype(input_dtype).name
    pattern = rf"(?=.*\b{got}\b)(?=.*\b{want}\b)"
    with pytest.raises(TypeError, match=pattern):
        layer(p.x.astype(input_dtype))
    with pytest.raises(TypeError, match=pattern):
        layer(p.x, p.h0[None].astype(input_dtype))
    y, _ = layer(p.x)
    with pytest.raises(TypeError, match=pattern):
        layer.backward(y.astype(input_dtype))
    args = p.forward_args()
    args["x"] = p.x.astype(input_dtype)
    with pytest.raises(TypeError, match=pattern):
        F.rnn_forward(**args)
    args = p.forward_args()
    args["weight_hh"] = p.weight_hh.astype(input_dtype)
    with pytest.raises(TypeError, match=pattern):
        F.rnn_forward(**args)


@pytest.mark.parametrize("dtype", [np.float16, np.int32, "complex128"])
def test_layer_dtype_must_be_float32_or_float64(dtype):
    with pytest.raises(TypeError, match="dtype"):
        rnnfast.RNN(D, H, dtype=dtype)


@pytest.mark.parametrize("nonlinearity", ["sigmoid", "Tanh", "", None, 1])
def test_bad_nonlinearity(problem, nonlinearity):
    with pytest.raises(ValueError, match="nonlinearity"):
        F.rnn_forward(**problem.forward_args(), nonlinearity=nonlinearity)
    y, _ = F.rnn_forward(**problem.forward_args())
    with pytest.raises(ValueError, match="nonlinearity"):
        F.rnn_backward(
            problem.x,
            problem.weight_ih,
            problem.weight_hh,
            y,
            dy=y,
            h0=problem.h0,
            **dict(PLAIN, nonlinearity=nonlinearity),
        )
    with pytest.raises(ValueError, match="nonlinearity"):
        rnnfast.RNN(D, H, nonlinearity=nonlinearity)


# ---- the training cache ---------------------------------------------------------------------------


def test_backward_before_any_forward(problem):
    layer = _layer(problem)
    snapshot = _snapshot(layer)
    with pytest.raises(RuntimeError, match="backward"):
        layer.backward(np.ones((T, B, H), np.float32))
    _assert_unchanged(layer, snapshot)


def test_second_backward_after_one_forward(problem):
    layer = _layer(problem)
    y, _ = layer(problem.x)
    layer.backward(np.ones_like(y))
    snapshot = _snapshot(layer)
    with pytest.raises(RuntimeError, match="backward"):
        layer.backward(np.ones_like(y))
    _assert_unchanged(layer, snapshot)


def test_backward_after_eval_forward(problem):
    layer = _layer(problem).eval()
    y, _ = layer(problem.x)
    with pytest.raises(RuntimeError, match="backward"):
        layer.backward(np.ones_like(y))
    # A training forward followed by eval() leaves nothing to differentiate either.
    layer.train()
    y, _ = layer(problem.x)
    layer.eval()
    with pytest.raises(RuntimeError, match="backward"):
        layer.backward(np.ones_like(y))


# ---- absurd sizes ---------------------------------------------------------------------------------


@pytest.mark.parametrize("sizes", [(-1, H), (0, H), (D, 0), (D, -5)])
def test_non_positive_sizes(sizes):
    with pytest.raises(ValueError, match="size"):
        rnnfast.RNN(*sizes)


@pytest.mark.parametrize("sizes", [(2.5, H), (D, "7"), (True, H)])
def test_non_integer_sizes(sizes):
    with pytest.raises(TypeError, match="size"):
        rnnfast.RNN(*sizes)


def test_huge_layer_is_refused_not_crashed():
    with pytest.raises((MemoryError, ValueError)):
        rnnfast.RNN(2**40, 2**40)


def test_huge_broadcast_input_is_refused_not_allocated():
    """A (10^8, 10^4, 1) broadcast view (4 TB if made real) is refused with MemoryError or
    ValueError. Run in a child process whose address space is capped, so that a wrong answer
    is a failed test rather than an exhausted machine or a crash of the test run."""
    code = textwrap.dedent(
        """
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = 6 * 2**30 if hard == resource.RLIM_INFINITY else min(6 * 2**30, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
        import numpy as np
        from rnnfast import functional as F
        x = np.broadcast_to(np.zeros((1, 1, 1), np.float32), (10**8, 10**4, 1))
        w_ih = np.full((2, 1), 0.5, np.float32)
        w_hh = np.full((2, 2), 0.5, np.float32)
        for return_sequences in (True, False):  # with and without the (10^8, 10^4, 2) output
            try:
                F.rnn_forward(x, w_ih, w_hh, return_sequences=return_sequences)
            except (MemoryError, ValueError) as exc:
                print("refused:", type(exc).__name__)
            else:
                print("accepted")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("refused:") == 2 and "accepted" not in done.stdout, done.stdout


# ---- layouts: strided, Fortran, read-only, byte-swapped ------------------------------------------


def _strided(a):
    big = np.zeros((2 * a.shape[0],) + a.shape[1:], a.dtype)
    big[::2] = a
    view = big[::2]
    assert not view.flags.c_contiguous or a.shape[0] <= 1
    return view


def _fortran(a):
    out = np.asfortranarray(a)
    assert out.ndim < 2 or not out.flags.c_contiguous
    return out


def _read_only(a):
    out = a.copy()
    out.setflags(write=False)
    return out


def _byte_swapped(a):
    out = a.astype(a.dtype.newbyteorder(">" if sys.byteorder == "little" else "<"))
    assert not out.dtype.isnative
    return out


LAYOUTS = {
    "strided": _strided,
    "fortran": _fortran,
    "readonly": _read_only,
    "byteswapped": _byte_swapped,
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("dtype", DTYPES)
def test_layouts_give_the_same_results_functional(rng, dtype, layout):
    p = make_problem(rng, T, B, D, H, dtype)
    dy = rng.standard_normal((T, B, H)).astype(dtype)
    dh_n = rng.standard_normal((B, H)).astype(dtype)
    y, h_n = F.rnn_forward(**p.forward_args())
    g = F.rnn_backward(p.x, p.weight_ih, p.weight_hh, y, dy, dh_n, h0=p.h0, **PLAIN)

    f = LAYOUTS[layout]
    q = type(p)({k: f(v) for k, v in p.items()})
    y2, h_n2 = F.rnn_forward(**q.forward_args())
    assert np.array_equal(y2, y) and np.array_equal(h_n2, h_n)
    g2 = F.rnn_backward(q.x, q.weight_ih, q.weight_hh, f(y), f(dy), f(dh_n), h0=q.h0, **PLAIN)
    for name, a, b in zip(g._fields, g2, g):
        assert a.dtype == np.dtype(dtype) and np.array_equal(a, b), name


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
def test_layouts_give_the_same_results_layer(rng, dtype, batch_first, layout):
    p = make_problem(rng, T, B, D, H, dtype)
    x = p.x.swapaxes(0, 1).copy() if batch_first else p.x
    h0 = p.h0[None]
    dy = rng.standard_normal(x.shape[:2] + (H,)).astype(dtype)
    dh_n = rng.standard_normal((1, B, H)).astype(dtype)

    layer = _layer(p, batch_first=batch_first)
    y, h_n = layer(x, h0)
    dx, dh0 = layer.backward(dy, dh_n)

    f = LAYOUTS[layout]
    other = rnnfast.RNN(D, H, batch_first=batch_first, dtype=dtype)
    other.load_state_dict({k: f(v) for k, v in p.state_dict().items()})
    y2, h_n2 = other(f(x), f(h0))
    dx2, dh02 = other.backward(f(dy), f(dh_n))
    assert np.array_equal(y2, y) and np.array_equal(h_n2, h_n)
    assert np.array_equal(dx2, dx) and np.array_equal(dh02, dh0)
    for k in layer.grads:
        assert np.array_equal(other.grads[k], layer.grads[k]), k


NDIMS = {"x": 3, "weight_ih": 2, "weight_hh": 2, "bias_ih": 1, "bias_hh": 1, "h0": 2}
NDIMS.update(y=3, dy=3, dh_n=2)


@st.composite
def _layout(draw, ndim):
    """Steps per axis (negative too), memory order, byte order and writeability of a view."""
    steps = draw(st.tuples(*[st.sampled_from([1, 2, 3, -1, -2])] * ndim))
    return steps, draw(st.booleans()), draw(st.booleans()), draw(st.booleans())


def _view(a, layout):
    """A view of a new buffer laid out as ``layout`` says, holding the values of ``a``."""
    steps, fortran, swapped, read_only = layout
    big = np.zeros([n * abs(s) for n, s in zip(a.shape, steps)], a.dtype)
    window = big[tuple(slice(None, None, s) for s in steps)][tuple(slice(0, n) for n in a.shape)]
    window[...] = a
    if fortran:
        window = np.asfortranarray(window)
    if swapped:
        window = _byte_swapped(window)
    if read_only:
        window.setflags(write=False)
    assert np.array_equal(window, a)
    return window


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(
    dtype=st.sampled_from(DTYPES),
    sizes=st.tuples(st.integers(0, 6), st.integers(0, 5), st.integers(1, 7), st.integers(1, 9)),
    seed=st.integers(0, 2**32 - 1),
    layouts=st.fixed_dictionaries({name: _layout(ndim) for name, ndim in NDIMS.items()}),
)
def test_any_strides_and_orders_give_the_same_results(dtype, sizes, seed, layouts):
    T, B, D, H = sizes
    p = make_problem(np.random.default_rng(seed), T, B, D, H, dtype)
    dy = np.linspace(-1, 1, T * B * H).reshape(T, B, H).astype(dtype)
    y, h_n = F.rnn_forward(**p.forward_args())
    g = F.rnn_backward(p.x, p.weight_ih, p.weight_hh, y, dy=dy, dh_n=h_n, h0=p.h0, **PLAIN)

    args = {k: _view(v, layouts[k]) for k, v in p.forward_args().items()}
    y2, h_n2 = F.rnn_forward(**args)
    assert np.array_equal(y2, y) and np.array_equal(h_n2, h_n)
    g2 = F.rnn_backward(
        args["x"],
        args["weight_ih"],
        args["weight_hh"],
        _view(y, layouts["y"]),
        dy=_view(dy, layouts["dy"]),
        dh_n=_view(h_n, layouts["dh_n"]),
        h0=args["h0"],
        **PLAIN,
    )
    for name, a, b in zip(g._fields, g2, g):
        assert np.array_equal(a, b), name


def test_array_likes_are_accepted(rng):
    p = make_problem(rng, T, B, D, H, np.float64)
    y, h_n = F.rnn_forward(**p.forward_args())
    y2, h_n2 = F.rnn_forward(
        p.x.tolist(),
        p.weight_ih,
        p.weight_hh.tolist(),
        tuple(p.bias_ih),
        p.bias_hh,
        p.h0.tolist(),
    )
    assert np.array_equal(y2, y) and np.array_equal(h_n2, h_n)
    layer = _layer(p)
    y3, _ = layer(p.x.tolist(), p.h0[None].tolist())
    assert np.array_equal(y3, y)


# ---- empty sequences and batches ------------------------------------------------------------------


@pytest.mark.parametrize("with_h0", [True, False], ids=["h0", "noh0"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_zero_length_sequence(rng, dtype, with_h0, isa):
    p = make_problem(rng, 0, B, D, H, dtype, h0=with_h0)
    y, h_n = F.rnn_forward(**p.forward_args())
    assert y.shape == (0, B, H) and y.dtype == np.dtype(dtype)
    expected_h = p.h0 if with_h0 else np.zeros((B, H), dtype)
    assert h_n.shape == (B, H) and np.array_equal(h_n, expected_h)
    _, h_last = F.rnn_forward(**p.forward_args(), return_sequences=False)
    assert np.array_equal(h_last, expected_h)

    dh_n = rng.standard_normal((B, H)).astype(dtype)
    g = F.rnn_backward(
        p.x, p.weight_ih, p.weight_hh, y, dy=np.zeros_like(y), dh_n=dh_n, h0=p.h0, **PLAIN
    )
    assert g.dx.shape == (0, B, D)
    assert np.array_equal(g.dh0, dh_n)
    assert np.array_equal(g.dweight_ih, np.zeros((H, D), dtype))
    assert np.array_equal(g.dweight_hh, np.zeros((H, H), dtype))
    assert np.array_equal(g.dbias, np.zeros(H, dtype))
    g = F.rnn_backward(p.x, p.weight_ih, p.weight_hh, y, h0=p.h0, **PLAIN)
    assert np.array_equal(g.dh0, np.zeros((B, H), dtype))

    layer = _layer(p)
    y, h_n = layer(p.x, p.h0[None] if with_h0 else None)
    assert y.shape == (0, B, H) and np.array_equal(h_n, expected_h[None])
    dx, dh0 = layer.backward(np.zeros_like(y), dh_n[None])
    assert dx.shape == (0, B, D) and np.array_equal(dh0, dh_n[None])
    for k, v in layer.grads.items():
        assert not v.any(), k


@pytest.mark.parametrize("dtype", DTYPES)
def test_empty_batch(rng, dtype, isa):
    p = make_problem(rng, T, 0, D, H, dtype)
    y, h_n = F.rnn_forward(**p.forward_args())
    assert y.shape == (T, 0, H) and h_n.shape == (0, H)
    g = F.rnn_backward(p.x, p.weight_ih, p.weight_hh, y, dy=y, h0=p.h0, **PLAIN)
    assert g.dx.shape == (T, 0, D) and g.dh0.shape == (0, H)
    assert np.array_equal(g.dweight_ih, np.zeros((H, D), dtype))
    assert np.array_equal(g.dweight_hh, np.zeros((H, H), dtype))
    assert np.array_equal(g.dbias, np.zeros(H, dtype))

    layer = _layer(p)
    y, h_n = layer(p.x)
    assert y.shape == (T, 0, H) and h_n.shape == (1, 0, H)
    dx, dh0 = layer.backward(y)
    assert dx.shape == (T, 0, D) and dh0.shape == (1, 0, H)
    for k, v in layer.grads.items():
        assert not v.any(), k


# ---- non-finite and extreme values -----------------------------------------------------------------


@pytest.mark.parametrize("nonlinearity", ACTIVATIONS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_nan_propagates_as_in_the_reference(rng, dtype, nonlinearity, isa):
    p = make_problem(rng, T, 6, D, 19, dtype)
    p.x[1, 2, 0] = np.nan
    p.x[3, 0, 3] = np.nan
    y, h_n = F.rnn_forward(**p.forward_args(), nonlinearity=nonlinearity)
    y_ref, h_ref = reference_forward(p, nonlinearity)
    assert np.isnan(y_ref).any() and not np.isnan(y_ref).all()
    assert np.array_equal(np.isnan(y), np.isnan(y_ref))
    assert np.array_equal(np.isnan(h_n), np.isnan(h_ref))
    assert_close(np.nan_to_num(y), np.nan_to_num(y_ref), dtype, "finite part of y")


@pytest.mark.parametrize("scale", [1e30, -1e30])
@pytest.mark.parametrize("dtype", DTYPES)
def test_huge_inputs_saturate_tanh(rng, dtype, scale, isa):
    p = make_problem(rng, T, B, D, 19, dtype)
    p.x[...] = scale * np.sign(p.x)
    y, _ = F.rnn_forward(**p.forward_args())
    assert np.isfinite(y).all()
    assert np.array_equal(np.abs(y), np.ones_like(y))
    y_ref, _ = reference_forward(p, "tanh")
    assert np.array_equal(y, y_ref.astype(dtype))
    g = F.rnn_backward(p.x, p.weight_ih, p.weight_hh, y, dy=np.ones_like(y), h0=p.h0, **PLAIN)
    for name, a in zip(g._fields, g):
        assert not np.isnan(a).any(), name


# ---- user arrays are never modified ----------------------------------------------------------------


@pytest.mark.parametrize("nonlinearity", ACTIVATIONS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_user_arrays_are_not_modified(rng, dtype, nonlinearity):
    p = make_problem(rng, T, B, D, H, dtype)
    dy = rng.standard_normal((T, B, H)).astype(dtype)
    dh_n = rng.standard_normal((B, H)).astype(dtype)
    originals = {k: v.copy() for k, v in p.items()}
    dy0, dh_n0 = dy.copy(), dh_n.copy()

    y, _ = F.rnn_forward(**p.forward_args(), nonlinearity=nonlinearity)
    F.rnn_forward(**p.forward_args(), nonlinearity=nonlinearity, return_sequences=False)
    y0 = y.copy()
    F.rnn_backward(
        p.x,
        p.weight_ih,
        p.weight_hh,
        y,
        dy,
        dh_n,
        h0=p.h0,
        **dict(PLAIN, nonlinearity=nonlinearity),
    )
    assert np.array_equal(y, y0)

    sd = p.state_dict()
    layer = rnnfast.RNN(D, H, nonlinearity=nonlinearity, dtype=dtype)
    layer.load_state_dict(sd)
    h0 = p.h0[None]
    ly, _ = layer(p.x, h0)
    ly0 = ly.copy()
    layer.backward(dy, dh_n[None])
    assert np.array_equal(ly, ly0)
    # The layer holds copies: training it does not write into the arrays it was loaded from.
    with rnnfast.writable_parameters(layer):  # as an optimizer writes them
        for param in layer.parameters():
            param += 1
    for k, v in p.items():
        assert np.array_equal(v, originals[k]), k
    assert np.array_equal(dy, dy0) and np.array_equal(dh_n, dh_n0)


def test_state_dict_returns_copies(problem):
    layer = _layer(problem)
    sd = layer.state_dict()
    for v in sd.values():
        v[...] = 123
    for k, v in layer.named_parameters():
        assert np.array_equal(v, problem.state_dict()[k]), k


@pytest.mark.parametrize("changed", ["x", "h0", "y"])
def test_gradients_do_not_depend_on_later_changes_to_user_arrays(rng, changed):
    """Between forward and backward the caller may reuse its input buffers (the next batch
    arrives in the same array) or edit the outputs it was given; the gradients must still be
    those of the forward that ran."""
    p = make_problem(rng, T, B, D, H, np.float64)
    dy = rng.standard_normal((T, B, H))
    expected_layer = _layer(p)
    expected_layer(p.x.copy(), p.h0[None].copy())
    expected_dx, expected_dh0 = expected_layer.backward(dy)

    layer = _layer(p)
    x, h0 = p.x.copy(), p.h0[None].copy()
    y, _ = layer(x, h0)
    if changed == "y":
        # The training output is handed out read-only: editing it in place is refused loudly.
        with pytest.raises(ValueError, match="read-only"):
            y[...] = 0.25
    else:
        {"x": x, "h0": h0}[changed][...] = 0.25
    dx, dh0 = layer.backward(dy)
    assert np.array_equal(dx, expected_dx)
    assert np.array_equal(dh0, expected_dh0)
    for k in layer.grads:
        assert np.array_equal(layer.grads[k], expected_layer.grads[k]), k


# ---- a failed call leaves everything as it was ----------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        {"dy": np.ones((T, B, H + 1), np.float32)},
        {"dy": np.ones((T + 1, B, H), np.float32)},
        {"dy": np.ones((T, B, H), np.float64)},
        {"dy": np.ones((T, B, H), np.int32)},
        {"dy": np.ones((T, B, H), np.float32), "dh_n": np.ones((B, H), np.float32)},
        {"dy": np.ones((T, B, H), np.float32), "dh_n": np.ones((1, B + 1, H), np.float32)},
    ],
    ids=["dy-H", "dy-T", "dy-float64", "dy-int", "dh_n-2d", "dh_n-B"],
)
def test_failed_backward_leaves_layer_and_cache_intact(problem, bad):
    layer = _layer(problem)
    # Gradients already accumulated from an earlier pair, so "unchanged" is not just "zero".
    layer(problem.x, problem.h0[None])
    layer.backward(np.ones((T, B, H), np.float32))
    layer(problem.x, problem.h0[None])
    snapshot = _snapshot(layer)
    with pytest.raises((ValueError, TypeError)):
        layer.backward(**bad)
    _assert_unchanged(layer, snapshot)

    # The cache survived: the proper backward still works and adds exactly this forward's grads.
    dy = np.full((T, B, H), 0.5, np.float32)
    dx, dh0 = layer.backward(dy)
    fresh = _layer(problem)
    fresh(problem.x, problem.h0[None])
    fdx, fdh0 = fresh.backward(dy)
    assert np.array_equal(dx, fdx) and np.array_equal(dh0, fdh0)
    for k in layer.grads:
        assert np.array_equal(layer.grads[k], snapshot[1][k] + fresh.grads[k]), k


def test_failed_forward_keeps_the_previous_cache(problem):
    layer = _layer(problem)
    layer(problem.x, problem.h0[None])
    snapshot = _snapshot(layer)
    with pytest.raises(ValueError):
        layer(np.zeros((T, B, D + 1), np.float32))
    with pytest.raises(TypeError):
        layer(problem.x.astype(np.float64))
    _assert_unchanged(layer, snapshot)
    dy = np.ones((T, B, H), np.float32)
    dx, _ = layer.backward(dy)
    fresh = _layer(problem)
    fresh(problem.x, problem.h0[None])
    assert np.array_equal(dx, fresh.backward(dy)[0])


def _bad_state_dicts(p):
    sd = p.state_dict()
    cases = {}
    cases["last-key-misshaped"] = dict(sd, bias_hh_l0=np.zeros(H + 1, np.float32))
    cases["first-key-misshaped"] = dict(sd, weight_ih_l0=np.zeros((H, D + 1), np.float32))
    cases["missing"] = {k: v for k, v in sd.items() if k != "weight_hh_l0"}
    cases["extra"] = dict(sd, weight_ih_l1=np.zeros((H, H), np.float32))
    cases["strings"] = dict(sd, bias_hh_l0=np.array(["a"] * H))
    cases["not-a-mapping"] = list(sd.values())
    return cases


@pytest.mark.parametrize(
    "case",
    ["last-key-misshaped", "first-key-misshaped", "missing", "extra", "strings", "not-a-mapping"],
)
def test_failed_load_state_dict_changes_nothing(rng, problem, case):
    layer = rnnfast.RNN(D, H, seed=1)
    x = problem.x
    layer(x)
    layer.backward(np.ones((T, B, H), np.float32))
    snapshot = _snapshot(layer)
    # Valid new values for every key but one bad entry: nothing may be half-loaded.
    new = make_problem(rng, T, B, D, H, np.float32)
    bad = _bad_state_dicts(new)[case]
    bad_copy = {k: v.copy() for k, v in bad.items()} if isinstance(bad, dict) else None
    with pytest.raises((ValueError, TypeError)):
        layer.load_state_dict(bad)
    _assert_unchanged(layer, snapshot)
    if bad_copy is not None:
        for k, v in bad.items():
            assert np.array_equal(v, bad_copy[k]), k


def test_load_state_dict_error_messages_name_the_key(problem):
    layer = _layer(problem)
    cases = _bad_state_dicts(problem)
    with pytest.raises(ValueError, match=r"bias_hh_l0.*\(7,\).*\(8,\)"):
        layer.load_state_dict(cases["last-key-misshaped"])
    with pytest.raises(ValueError, match="missing.*weight_hh_l0"):
        layer.load_state_dict(cases["missing"])
    with pytest.raises(ValueError, match="unexpected.*weight_ih_l1"):
        layer.load_state_dict(cases["extra"])
