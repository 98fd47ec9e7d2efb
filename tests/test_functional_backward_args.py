"""functional.rnn_backward cannot silently be wrong: every forward argument that changes the
gradient is a keyword without a default, so a call that forgets one fails (it used to return a
dW_hh as wrong as dW_hh is large when the forward's h0 was left out). And the mask arguments
are checked as every other argument is: TypeError or ValueError naming the argument, the
expected and the received value."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from conftest import DTYPES, PLAIN, assert_close, make_problem, numerical_gradient

from rnnfast import functional as F
from rnnfast import reference as R

T, B, D, H = 5, 3, 2, 4
REQUIRED = tuple(F.PLAIN_FORWARD_OPTIONS)


def _options(**over):
    return {**PLAIN, **over}


@pytest.fixture
def problem(rng):
    p = make_problem(rng, T, B, D, H)
    y, h_n = F.rnn_forward(**p.forward_args())
    return p, y, h_n


@pytest.mark.parametrize("fn", [F.rnn_backward, R.rnn_backward], ids=["functional", "reference"])
def test_every_gradient_changing_option_is_keyword_only_without_default(fn):
    params = inspect.signature(fn).parameters
    for name in REQUIRED:
        assert params[name].kind is inspect.Parameter.KEYWORD_ONLY, name
        assert params[name].default is inspect.Parameter.empty, name


@pytest.mark.parametrize("fn", [F.rnn_backward, R.rnn_backward], ids=["functional", "reference"])
def test_plain_forward_options_are_the_required_keywords_at_the_forwards_defaults(fn):
    """PLAIN_FORWARD_OPTIONS names exactly the keywords the backward has no default for, each
    at rnn_forward's default: the one statement the callers (bench, demo, tools, tests) use."""
    required = [
        name
        for name, p in inspect.signature(fn).parameters.items()
        if p.kind is p.KEYWORD_ONLY and p.default is p.empty
    ]
    assert sorted(required) == sorted(F.PLAIN_FORWARD_OPTIONS)
    forward = inspect.signature(F.rnn_forward).parameters
    assert {k: forward[k].default for k in required} == dict(F.PLAIN_FORWARD_OPTIONS)
    with pytest.raises(TypeError):
        F.PLAIN_FORWARD_OPTIONS["alpha"] = 0.5  # read-only: a caller cannot change it for all
    assert "PLAIN_FORWARD_OPTIONS" in F.__all__


@pytest.mark.parametrize("missing", REQUIRED)
def test_omitting_any_of_them_raises_type_error_naming_it(problem, missing):
    p, y, h_n = problem
    kwargs = {"h0": p.h0, **_options()}
    del kwargs[missing]
    with pytest.raises(TypeError, match=rf"'{missing}'"):
        F.rnn_backward(p.x, p.weight_ih, p.weight_hh, y, y, h_n, **kwargs)


def test_the_old_positional_call_is_refused(problem):
    """rnn_backward(x, w_ih, w_hh, y, dy, dh_n, h0, nonlinearity) was the old form: now h0 and
    the rest cannot be passed by position, so an old call fails instead of misreading."""
    p, y, h_n = problem
    with pytest.raises(TypeError, match="positional"):
        F.rnn_backward(p.x, p.weight_ih, p.weight_hh, y, y, h_n, p.h0, "tanh")


def test_the_issue_case_h0_left_out_now_raises(problem):
    """The silent case of issue 12: the forward ran from h0, the backward was not told."""
    p, y, h_n = problem
    with pytest.raises(TypeError, match="'h0'"):
        F.rnn_backward(p.x, p.weight_ih, p.weight_hh, y, dy=np.ones_like(y), **_options())


def test_explicit_h0_gives_the_true_gradient_and_h0_none_means_zeros(problem, rng):
    """With the forward's h0, dW_hh is the finite-difference gradient of that forward; h0=None
    explicitly is the gradient of a forward from zeros, and the two differ (the old silent error)."""
    p, y, _ = problem
    R_y = rng.standard_normal(y.shape)

    def loss(h0):
        return lambda: float(np.sum(F.rnn_forward(**{**p.forward_args(), "h0": h0})[0] * R_y))

    g = F.rnn_backward(p.x, p.weight_ih, p.weight_hh, y, R_y, h0=p.h0, **_options())
    np.testing.assert_allclose(
        g.dweight_hh, numerical_gradient(loss(p.h0), p.weight_hh), rtol=1e-6, atol=1e-8
    )
    y_zero, _ = F.rnn_forward(**{**p.forward_args(), "h0": None})
    g_zero = F.rnn_backward(p.x, p.weight_ih, p.weight_hh, y_zero, R_y, h0=None, **_options())
    np.testing.assert_allclose(
        g_zero.dweight_hh, numerical_gradient(loss(None), p.weight_hh), rtol=1e-6, atol=1e-8
    )
    assert np.max(np.abs(g.dweight_hh - g_zero.dweight_hh)) > 1e-2 * np.max(np.abs(g.dweight_hh))


# ---- the mask arguments -----------------------------------------------------------------------


def _both(p, y, **over):
    """The forward and the backward with the options overridden (forward first)."""
    yield lambda: F.rnn_forward(**p.forward_args(), **_options(**over))
    yield lambda: F.rnn_backward(p.x, p.weight_ih, p.weight_hh, y, y, h0=p.h0, **_options(**over))


@pytest.mark.parametrize(
    "bad, exc, message",
    [
        (
            np.ones((T, B), np.float64),
            TypeError,
            r"step_mask: expected a bool .* got dtype float64",
        ),
        (np.ones((T, B), object), TypeError, r"step_mask: expected a bool"),
        (
            np.ones((B, T), bool),
            ValueError,
            rf"step_mask: expected shape \(T, B\) = \({T}, {B}\), "
            rf"got shape \({B}, {T}\)",
        ),
        (np.ones((T, B, 1), bool), ValueError, r"step_mask: expected shape"),
        (np.full((T, B), 2), ValueError, r"step_mask: expected values 0 or 1 .* got 2"),
        (np.full((T, B), -1), ValueError, r"step_mask: expected values 0 or 1"),
    ],
    ids=["float", "object", "transposed", "3d", "value-2", "value-minus-1"],
)
def test_bad_step_mask(problem, bad, exc, message):
    p, y, _ = problem
    for call in _both(p, y, step_mask=bad):
        with pytest.raises(exc, match=message):
            call()


@pytest.mark.parametrize("bad", [0, 1, "False", None, 1.0])
def test_zero_output_for_mask_must_be_a_bool(problem, bad):
    p, y, _ = problem
    for call in _both(p, y, step_mask=np.ones((T, B), bool), zero_output_for_mask=bad):
        with pytest.raises(TypeError, match="zero_output_for_mask: expected a bool"):
            call()


@pytest.mark.parametrize(
    "bad, exc, message",
    [
        (
            np.ones((B, H + 1)),
            ValueError,
            rf"recurrent_mask: expected shape \(B, H\) = \({B}, {H}\), "
            rf"got shape \({B}, {H + 1}\)",
        ),
        (np.ones((H, B)), ValueError, r"recurrent_mask: expected shape \(B, H\)"),
        (np.ones(H), ValueError, r"recurrent_mask: expected shape \(B, H\)"),
        (
            np.ones((B, H), np.float32),
            TypeError,
            r"recurrent_mask: expected a float64 array \(the layer's dtype\), got dtype float32",
        ),
        (np.ones((B, H), np.int64), TypeError, r"recurrent_mask: expected a float32 or float64"),
    ],
    ids=["wide", "transposed", "1d", "float32-vs-float64", "int"],
)
def test_bad_recurrent_mask(problem, bad, exc, message):
    p, y, _ = problem
    for call in _both(p, y, recurrent_mask=bad):
        with pytest.raises(exc, match=message):
            call()


def test_recurrent_mask_of_the_wrong_batch_with_unsorted_lengths(problem):
    """The reordering path (unsorted lengths) checks the batch before reordering."""
    p, y, _ = problem
    for call in _both(p, y, lengths=np.array([2, 5, 1]), recurrent_mask=np.ones((B + 1, H))):
        with pytest.raises(ValueError, match="recurrent_mask"):
            call()


@pytest.mark.parametrize("dtype", DTYPES)
def test_mask_layouts_and_integer_masks_give_the_same_results(dtype, rng):
    """A 0/1 integer mask is the bool mask; Fortran-order, strided and read-only masks are read
    as they are; the caller's masks are never modified."""
    p = make_problem(rng, T, B, D, H, dtype)
    keep = rng.random((T, B)) < 0.6
    drop = ((rng.random((B, H)) >= 0.3) / 0.7).astype(dtype)
    lengths = np.array([2, 5, 4])  # unsorted: the masks are reordered with the batch
    opts = _options(lengths=lengths, step_mask=keep, recurrent_mask=drop)
    y, h_n = F.rnn_forward(**p.forward_args(), **opts)
    g = F.rnn_backward(p.x, p.weight_ih, p.weight_hh, y, y, h_n, h0=p.h0, **opts)
    readonly = drop.copy()
    readonly.flags.writeable = False
    wide = np.zeros((T, 2 * B), bool)
    wide[:, ::2] = keep
    for variant in (
        {"step_mask": keep.astype(np.int64)},
        {"step_mask": keep.astype(np.uint8)},
        {"step_mask": np.asfortranarray(keep)},
        {"step_mask": wide[:, ::2]},
        {"recurrent_mask": np.asfortranarray(drop)},
        {"recurrent_mask": readonly},
    ):
        before = {k: v.copy() for k, v in variant.items()}
        opts_v = {**opts, **variant}
        y_v, h_v = F.rnn_forward(**p.forward_args(), **opts_v)
        g_v = F.rnn_backward(p.x, p.weight_ih, p.weight_hh, y, y, h_n, h0=p.h0, **opts_v)
        assert np.array_equal(y_v, y) and np.array_equal(h_v, h_n), list(variant)
        for name, a, b in zip(g._fields, g_v, g):
            assert np.array_equal(a, b), (name, list(variant))
        for k, v in variant.items():
            assert np.array_equal(v, before[k]), f"{k} was modified"
    assert_close(
        h_n,
        R.rnn_forward(
            **p.astype(np.float64).forward_args(),
            **{**opts, "recurrent_mask": drop.astype(np.float64)},
        )[1],
        dtype,
        "h_n",
    )


@pytest.mark.parametrize("module", [F, R], ids=["functional", "reference"])
@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_plain_gated_options_are_the_required_keywords_at_the_forwards_defaults(module, cell):
    """PLAIN_GRU_OPTIONS / PLAIN_LSTM_OPTIONS: the same statement for the gated backwards, in
    the kernels and in the reference alike."""
    plain = F.PLAIN_GRU_OPTIONS if cell == "gru" else F.PLAIN_LSTM_OPTIONS
    backward = getattr(module, f"{cell}_backward")
    required = [
        name
        for name, p in inspect.signature(backward).parameters.items()
        if p.kind is p.KEYWORD_ONLY and p.default is p.empty
    ]
    assert sorted(required) == sorted(plain)
    forward = inspect.signature(getattr(module, f"{cell}_forward")).parameters
    assert {k: forward[k].default for k in required} == dict(plain)
    with pytest.raises(TypeError):
        plain["h0"] = 0.0  # read-only
