"""Losses and metrics: cross_entropy and mse_loss against torch.nn.functional (loss and gradient
by autograd) and against finite differences in float64; padding rules (lengths, mask,
ignore_index), numerical range, bad input; accuracy and perplexity.

torch is the oracle in float64 on the same (float32-valued) inputs; positions that rnnfast
excludes are given torch's ignore_index (-100) so both average over the same positions.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import DTYPES, assert_close, numerical_gradient, tol

from rnnfast import losses, metrics
from rnnfast.losses import cross_entropy, log_softmax, mse_loss

EPS = 1e-6
TORCH_IGNORE = -100
T, B, V = 5, 3, 7


def assert_loss_close(actual, expected, dtype, what="loss"):
    assert isinstance(actual, float), f"{what}: {type(actual)} is not a float"
    t = tol(dtype)
    np.testing.assert_allclose(
        actual, expected, rtol=t["rtol"], atol=t["atol"] * max(1.0, abs(expected)), err_msg=what
    )


def torch_cross_entropy(torch, logits, targets, valid, reduction, batch_first):
    """torch's loss and d_logits in float64 on the positions ``valid`` (others ignored)."""
    F = torch.nn.functional
    t_targets = torch.from_numpy(np.where(valid, targets, TORCH_IGNORE).astype(np.int64))
    t_logits = torch.tensor(np.asarray(logits, dtype=np.float64), requires_grad=True)
    if t_logits.ndim == 2:  # (B, V)
        inp, tgt = t_logits, t_targets
    elif batch_first:  # (B, T, V) -> (B, V, T)
        inp, tgt = t_logits.permute(0, 2, 1), t_targets
    else:  # (T, B, V) -> (B, V, T)
        inp, tgt = t_logits.permute(1, 2, 0), t_targets.T
    loss = F.cross_entropy(inp, tgt, reduction=reduction, ignore_index=TORCH_IGNORE)
    loss.backward()
    return loss.item(), t_logits.grad.numpy()


def _problem(rng, layout, dtype, scale=3.0):
    shape = {"BV": (B,), "TBV": (T, B), "BTV": (B, T)}[layout]
    logits = (scale * rng.standard_normal(shape + (V,))).astype(dtype)
    targets = rng.integers(0, V, size=shape)
    return logits, targets


def _lengths_valid(lengths, shape, batch_first):
    steps = shape[1] if batch_first else shape[0]
    valid = np.arange(steps)[:, None] < np.asarray(lengths)[None, :]
    return valid.T if batch_first else valid


# ---- cross_entropy against torch ----------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize(
    "exclude,layout",
    [
        (e, layout)
        for e in ["none", "ignore_index", "lengths", "mask", "all-three"]
        for layout in ["BV", "TBV", "BTV"]
        if not (layout == "BV" and e in ("lengths", "all-three"))  # lengths need (T, B) targets
    ],
)
def test_cross_entropy_matches_torch(torch, exclude, layout, reduction, dtype, rng):
    batch_first = layout == "BTV"
    logits, targets = _problem(rng, layout, dtype)
    kw = {"reduction": reduction, "batch_first": batch_first}
    valid = np.ones(targets.shape, dtype=bool)
    if exclude in ("ignore_index", "all-three"):
        targets[rng.random(targets.shape) < 0.3] = 2
        kw["ignore_index"] = 2
        valid &= targets != 2
    if exclude in ("lengths", "all-three"):
        kw["lengths"] = np.array([T, 2, 0])
        valid &= _lengths_valid(kw["lengths"], targets.shape, batch_first)
    if exclude in ("mask", "all-three"):
        kw["mask"] = rng.random(targets.shape) < 0.7
        valid &= kw["mask"]
    assert valid.any()
    logits_before, targets_before = logits.copy(), targets.copy()

    loss, d_logits = cross_entropy(logits, targets, **kw)
    expected_loss, expected_grad = torch_cross_entropy(
        torch, logits, targets, valid, reduction, batch_first
    )
    assert_loss_close(loss, expected_loss, dtype)
    assert_close(d_logits, expected_grad, dtype, "d_logits")
    assert not np.any(d_logits[~valid])
    np.testing.assert_array_equal(logits, logits_before)  # inputs are never written
    np.testing.assert_array_equal(targets, targets_before)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch_first", [False, True])
def test_cross_entropy_lengths_equal_the_prefix_mask(batch_first, dtype, rng):
    logits, targets = _problem(rng, "BTV" if batch_first else "TBV", dtype)
    lengths = np.array([1, T, 3])
    mask = _lengths_valid(lengths, targets.shape, batch_first)
    a = cross_entropy(logits, targets, lengths=lengths, batch_first=batch_first)
    b = cross_entropy(logits, targets, mask=mask, batch_first=batch_first)
    assert a[0] == b[0]
    np.testing.assert_array_equal(a[1], b[1])


def test_cross_entropy_of_padded_steps_is_the_loss_of_the_kept_steps(rng):
    """Padding excluded by lengths gives exactly the loss of the unpadded rows (mean over the
    kept tokens), whatever the padded logits and targets hold."""
    logits, targets = _problem(rng, "BTV", np.float64)
    lengths = np.array([T, 2, 4])
    padded_logits = logits.copy()
    padded_targets = targets.copy()
    for b, n in enumerate(lengths):
        padded_logits[b, n:] = 1e6 * rng.standard_normal((T - n, V))
        padded_targets[b, n:] = 10_000  # out of range but excluded
    kept_logits = np.concatenate([logits[b, :n] for b, n in enumerate(lengths)])
    kept_targets = np.concatenate([targets[b, :n] for b, n in enumerate(lengths)])
    expected, _ = cross_entropy(kept_logits, kept_targets)
    loss, d = cross_entropy(padded_logits, padded_targets, lengths=lengths, batch_first=True)
    assert loss == pytest.approx(expected, rel=1e-14)
    assert np.all(np.isfinite(d))


@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize(
    "exclude,layout",
    [
        ("none", "BV"),
        ("none", "TBV"),
        ("none", "BTV"),
        ("lengths-mask-ignore", "TBV"),
        ("lengths-mask-ignore", "BTV"),
    ],
)
def test_cross_entropy_gradient_fd(exclude, layout, reduction, rng):
    batch_first = layout == "BTV"
    logits, targets = _problem(rng, layout, np.float64, scale=1.0)
    kw = {"reduction": reduction, "batch_first": batch_first}
    if exclude != "none":
        kw.update(lengths=np.array([T, 3, 1]), mask=rng.random(targets.shape) < 0.8, ignore_index=0)
    _, grad = cross_entropy(logits, targets, **kw)
    numeric = numerical_gradient(lambda: cross_entropy(logits, targets, **kw)[0], logits, EPS)
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("dtype", DTYPES)
def test_cross_entropy_gradient_rows_sum_to_zero_and_dtype(dtype, rng):
    logits, targets = _problem(rng, "TBV", dtype)
    loss, d = cross_entropy(logits, targets, reduction="sum")
    assert d.dtype == dtype and d.shape == logits.shape
    assert isinstance(loss, float)
    np.testing.assert_allclose(d.sum(axis=-1), 0, atol=10 * tol(dtype)["atol"])


# ---- numerical range ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("scale", [1e2, 1e4])
@pytest.mark.parametrize("vocab", [2, 50_000])
def test_cross_entropy_stays_finite_for_large_logits_and_vocabularies(
    torch, vocab, scale, dtype, rng
):
    logits = (scale * rng.standard_normal((4, vocab))).astype(dtype)
    targets = rng.integers(0, vocab, size=4)
    targets[0] = np.argmax(logits[0])  # a confident hit: loss ~0
    targets[1] = np.argmin(logits[1])  # a confident miss: loss ~ the logit range
    loss, d = cross_entropy(logits, targets)
    assert math.isfinite(loss) and np.all(np.isfinite(d))
    expected_loss, expected_grad = torch_cross_entropy(
        torch, logits, targets, np.ones(4, bool), "mean", False
    )
    assert_loss_close(loss, expected_loss, dtype)
    assert_close(d, expected_grad, dtype, "d_logits")


def test_log_softmax_is_stable():
    x = np.array([[1e4, 0.0, -1e4], [0.0, 0.0, 0.0], [-1e300, 0.0, 1e300]])
    out = log_softmax(x)
    assert np.all(np.isfinite(out[:2])) and out[2, 2] == 0.0
    np.testing.assert_allclose(out[0], [0.0, -1e4, -2e4])
    np.testing.assert_allclose(out[1], np.log(1 / 3) * np.ones(3))
    np.testing.assert_allclose(
        np.exp(log_softmax(np.arange(6.0).reshape(2, 3), axis=0)).sum(0), 1.0
    )


# ---- nothing counts -----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("how", ["lengths", "mask", "ignore_index", "empty"])
def test_cross_entropy_with_no_counted_position_is_zero(how, reduction, dtype, rng):
    logits, targets = _problem(rng, "TBV", dtype)
    kw = {"reduction": reduction}
    if how == "lengths":
        kw["lengths"] = np.zeros(B, dtype=np.int64)
    elif how == "mask":
        kw["mask"] = np.zeros(targets.shape, dtype=bool)
    elif how == "ignore_index":
        targets[...] = -1
        kw["ignore_index"] = -1
    else:
        logits, targets = logits[:0], targets[:0]
    loss, d = cross_entropy(logits, targets, **kw)
    assert loss == 0.0
    assert d.shape == logits.shape and d.dtype == dtype
    assert not np.any(d)
    if how != "empty":
        assert math.isnan(
            metrics.accuracy(logits, targets, **{k: v for k, v in kw.items() if k != "reduction"})
        )


# ---- bad input ----------------------------------------------------------------------------------


def test_cross_entropy_bad_input():
    logits = np.zeros((3, 2, 4))
    targets = np.zeros((3, 2), dtype=np.int64)
    with pytest.raises(TypeError, match="targets"):
        cross_entropy(logits, targets.astype(np.float64))
    with pytest.raises(TypeError, match="logits"):
        cross_entropy(logits.astype(np.int64), targets)
    for shape in [(2, 3), (3,), (3, 2, 4), (3, 2, 1)]:
        with pytest.raises(
            ValueError,
            match=r"targets.*\(3, 2\).*" + str(shape).replace("(", r"\(").replace(")", r"\)"),
        ):
            cross_entropy(logits, np.zeros(shape, dtype=np.int64))
    for bad in (4, -1, 100):
        t = targets.copy()
        t[1, 1] = bad
        with pytest.raises(ValueError, match=r"targets.*\[0, 4\)"):
            cross_entropy(logits, t)
    for reduction in ("none", "Mean", None, "avg"):
        with pytest.raises(ValueError, match="reduction"):
            cross_entropy(logits, targets, reduction=reduction)
    with pytest.raises(ValueError, match="mask"):
        cross_entropy(logits, targets, mask=np.ones((2, 3), dtype=bool))
    with pytest.raises(ValueError, match="mask"):
        cross_entropy(logits, targets, mask=np.ones((3, 2)))
    with pytest.raises(ValueError, match="lengths"):
        cross_entropy(logits, targets, lengths=np.array([1, 2, 3]))
    with pytest.raises((TypeError, ValueError), match="lengths"):
        cross_entropy(logits, targets, lengths=np.array([1.0, 2.0]))
    for lengths in ([-1, 2], [1, 4]):  # each in [0, T] = [0, 3]
        with pytest.raises(ValueError, match=r"lengths.*\[0, 3\]"):
            cross_entropy(logits, targets, lengths=np.array(lengths))
        with pytest.raises(ValueError, match="lengths"):
            metrics.accuracy(logits, targets, lengths=np.array(lengths))
    with pytest.raises(ValueError, match="lengths"):
        cross_entropy(
            logits.swapaxes(0, 1), targets.T, lengths=np.array([1, 4]), batch_first=True
        )  # T = 3 along axis 1
    with pytest.raises(ValueError, match="lengths"):
        cross_entropy(logits[0], targets[0], lengths=np.array([1, 2]))


def test_cross_entropy_out_of_range_targets_at_excluded_positions_are_allowed(torch, rng):
    logits, targets = _problem(rng, "TBV", np.float64)
    mask = rng.random(targets.shape) < 0.5
    mask[0, 0] = True
    targets[~mask] = V + 5
    loss, d = cross_entropy(logits, targets, mask=mask)
    expected_loss, expected_grad = torch_cross_entropy(torch, logits, targets, mask, "mean", False)
    assert_loss_close(loss, expected_loss, np.float64)
    assert_close(d, expected_grad, np.float64, "d_logits")
    # torch's own convention: ignore_index=-100 with such targets
    targets[~mask] = TORCH_IGNORE
    loss2, d2 = cross_entropy(logits, targets, ignore_index=TORCH_IGNORE)
    assert loss2 == loss
    np.testing.assert_array_equal(d2, d)


# ---- mse_loss ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("shape", [(1,), (17,), (4, 3), (5, 3, 2)])
def test_mse_loss_matches_torch(torch, shape, reduction, dtype, rng):
    pred = rng.standard_normal(shape).astype(dtype)
    target = rng.standard_normal(shape).astype(dtype)
    before = pred.copy(), target.copy()
    loss, d = mse_loss(pred, target, reduction)
    tp = torch.tensor(pred.astype(np.float64), requires_grad=True)
    expected = torch.nn.functional.mse_loss(
        tp, torch.from_numpy(target.astype(np.float64)), reduction=reduction
    )
    expected.backward()
    assert_loss_close(loss, expected.item(), dtype)
    assert_close(d, tp.grad.numpy(), dtype, "d_pred")
    np.testing.assert_array_equal(pred, before[0])
    np.testing.assert_array_equal(target, before[1])


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_mse_loss_gradient_fd(reduction, rng):
    pred = rng.standard_normal((4, 3))
    target = rng.standard_normal((4, 3))
    _, d = mse_loss(pred, target, reduction=reduction)
    numeric = numerical_gradient(lambda: mse_loss(pred, target, reduction)[0], pred, EPS)
    np.testing.assert_allclose(d, numeric, rtol=1e-6, atol=1e-9)


def test_mse_loss_bad_input():
    with pytest.raises(ValueError, match=r"target.*\(3, 2\).*\(2, 3\)"):
        mse_loss(np.zeros((3, 2)), np.zeros((2, 3)))
    with pytest.raises(ValueError, match="reduction"):
        mse_loss(np.zeros(3), np.zeros(3), reduction="none")
    assert mse_loss(np.ones(3), [1, 1, 1]) == (0.0, pytest.approx(np.zeros(3)))


# ---- metrics --------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["BV", "TBV", "BTV"])
def test_accuracy(layout, rng):
    logits, targets = _problem(rng, layout, np.float32)
    hits = np.argmax(logits, axis=-1) == targets
    assert metrics.accuracy(logits, targets) == pytest.approx(hits.mean())
    assert metrics.accuracy(logits, np.argmax(logits, axis=-1)) == 1.0
    mask = rng.random(targets.shape) < 0.6
    mask.flat[0] = True
    assert metrics.accuracy(logits, targets, mask=mask) == pytest.approx(hits[mask].mean())
    if layout != "BV":
        batch_first = layout == "BTV"
        lengths = np.array([1, 4, 2])
        valid = _lengths_valid(lengths, targets.shape, batch_first)
        got = metrics.accuracy(logits, targets, lengths=lengths, batch_first=batch_first)
        assert got == pytest.approx(hits[valid].mean())
    ignored = np.where(hits, 0, targets)  # ignore id 0: the hits rewritten to 0 drop out
    kept = ignored != 0
    if kept.any():
        got = metrics.accuracy(logits, ignored, ignore_index=0)
        expected = float(np.mean((np.argmax(logits, -1) == ignored)[kept]))
        assert got == pytest.approx(expected)


@pytest.mark.parametrize("layout", ["BV", "TBV", "BTV"])
def test_perplexity_is_exp_of_mean_cross_entropy(torch, layout, rng):
    logits, targets = _problem(rng, layout, np.float64)
    loss, _ = cross_entropy(logits, targets)
    assert metrics.perplexity(logits, targets) == pytest.approx(math.exp(loss), rel=1e-14)
    expected, _ = torch_cross_entropy(
        torch, logits, targets, np.ones(targets.shape, bool), "mean", layout == "BTV"
    )
    assert metrics.perplexity(logits, targets) == pytest.approx(math.exp(expected), rel=1e-12)
    if layout != "BV":
        kw = {"lengths": np.array([2, 5, 1]), "batch_first": layout == "BTV"}
        assert metrics.perplexity(logits, targets, **kw) == pytest.approx(
            math.exp(cross_entropy(logits, targets, **kw)[0]), rel=1e-14
        )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("vocab", [1, 2, 7, 1000])
def test_uniform_logits_give_perplexity_vocab(vocab, dtype, rng):
    logits = np.full((4, 3, vocab), 2.5, dtype=dtype)
    targets = rng.integers(0, vocab, size=(4, 3))
    assert metrics.perplexity(logits, targets) == pytest.approx(vocab, rel=10 * tol(dtype)["rtol"])
    loss, _ = cross_entropy(logits, targets)
    assert loss == pytest.approx(math.log(vocab), abs=10 * tol(dtype)["atol"])


def test_perfect_predictions_give_perplexity_one():
    targets = np.array([[0, 3], [2, 1]])
    logits = 1e3 * np.eye(4)[targets]
    assert metrics.perplexity(logits, targets) == pytest.approx(1.0)
    assert metrics.accuracy(logits, targets) == 1.0


def test_accuracy_bad_input():
    logits = np.zeros((4, 3, 5))
    for shape in [(3,), (3, 4), (4, 3, 5), (4,)]:  # some of them broadcast against (4, 3)
        with pytest.raises(ValueError, match=r"targets.*\(4, 3\)"):
            metrics.accuracy(logits, np.zeros(shape, dtype=np.int64))
    with pytest.raises(TypeError, match="targets"):
        metrics.accuracy(logits, np.zeros((4, 3)))


def test_public_names():
    assert set(losses.__all__) == {
        "binary_cross_entropy",
        "categorical_cross_entropy",
        "cross_entropy",
        "log_softmax",
        "mse_loss",
    }
    assert set(metrics.__all__) == {"accuracy", "accuracy_counts", "perplexity"}


# ---- the fused C++ softmax cross-entropy kernel --------------------------------------------------


def _softmax_xent_float64(logits, targets, weights):
    """The kernel's contract computed in float64 NumPy: (sum w * -log p[target], w * (p - 1hot))."""
    x = logits.astype(np.float64)
    shifted = x - x.max(axis=1, keepdims=True)
    log_sum = np.log(np.exp(shifted).sum(axis=1))
    p = np.exp(shifted - log_sum[:, None])
    rows = np.arange(len(x))
    grad = p.copy()
    grad[rows, targets] -= 1.0
    grad *= weights[:, None]
    loss = float(np.sum(weights * (log_sum - shifted[rows, targets])))
    return loss, grad


@pytest.mark.parametrize("classes", [1, 3, 8, 17, 65, 1000])
@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_kernel_matches_float64_on_every_isa(isa, dtype, classes, rng):
    from rnnfast import _core

    logits = (rng.standard_normal((37, classes)) * 4).astype(dtype)
    logits[3, : classes // 2] = -1e4  # far below the max: exp underflows to 0, not garbage
    targets = rng.integers(0, classes, 37)
    weights = rng.uniform(0, 1, 37).astype(dtype)
    weights[5] = 0.0
    targets[5] = 10**9  # an unweighted row's target is never read
    loss, grad = _core.softmax_cross_entropy(logits, targets, weights)
    want_loss, want_grad = _softmax_xent_float64(
        logits, np.where(weights > 0, targets, 0), weights.astype(np.float64)
    )
    assert_loss_close(loss, want_loss, dtype)
    assert_close(grad, want_grad, dtype, "grad")
    assert not np.any(grad[5])


@pytest.mark.parametrize("special", [np.nan, np.inf, -np.inf])
def test_softmax_kernel_non_finite_logits_like_numpy(isa, special, rng):
    """A row with NaN or +inf is all NaN (NumPy's x - max gives NaN there); -inf entries get
    probability 0 and the rest of the row is finite."""
    from rnnfast import _core

    logits = rng.standard_normal((4, 9))
    logits[1, 4] = special
    loss, grad = _core.softmax_cross_entropy(logits, np.array([0, 0, 1, 2]), np.ones(4))
    with np.errstate(all="ignore"):
        want_loss, want_grad = _softmax_xent_float64(logits, np.array([0, 0, 1, 2]), np.ones(4))
    assert np.array_equal(np.isnan(grad), np.isnan(want_grad))
    assert np.isnan(loss) == np.isnan(want_loss)
    fin = np.isfinite(want_grad)
    np.testing.assert_allclose(grad[fin], want_grad[fin], rtol=1e-12, atol=1e-15)


def test_softmax_kernel_result_does_not_depend_on_threads(restore_threads, rng):
    import rnnfast
    from rnnfast import _core

    logits = rng.standard_normal((3000, 300)).astype(np.float32)
    targets = rng.integers(0, 300, 3000)
    weights = np.full(3000, 1 / 3000, np.float32)
    out = []
    for n in (1, 2, 3):
        rnnfast.set_num_threads(n)
        out.append(_core.softmax_cross_entropy(logits, targets, weights))
    for loss, grad in out[1:]:
        assert loss == out[0][0]
        assert np.array_equal(grad, out[0][1])


def test_softmax_kernel_refuses_bad_targets_without_reading_them():
    from rnnfast import _core

    logits = np.zeros((2, 3))
    for bad in (3, -1):
        with pytest.raises(ValueError, match="targets"):
            _core.softmax_cross_entropy(logits, np.array([0, bad]), np.ones(2))
    with pytest.raises(TypeError, match="targets"):
        _core.softmax_cross_entropy(logits, np.array([0, 1], np.int32), np.ones(2))
    with pytest.raises(TypeError, match="weights"):
        _core.softmax_cross_entropy(logits, np.array([0, 1]), np.ones(2, np.float32))
    with pytest.raises(ValueError, match="logits"):
        _core.softmax_cross_entropy(np.zeros(3), np.array([0]), np.ones(1))


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_cross_entropy_on_time_major_logits_and_half_precision(dtype, rng):
    """Batch-first logits laid out time-major in memory (a batch_first RNN -> Linear) give the
    same as a contiguous copy; float16 is computed in float32, its gradient float16."""
    base = rng.standard_normal((6, 4, 5)).astype(dtype)  # (T, B, V) in memory
    view = base.swapaxes(0, 1)
    targets = rng.integers(0, 5, (4, 6))
    mask = rng.random((4, 6)) > 0.3
    loss, grad = cross_entropy(view, targets, mask=mask)
    want_loss, want_grad = cross_entropy(np.ascontiguousarray(view), targets, mask=mask)
    assert grad.dtype == np.dtype(dtype) and grad.shape == view.shape
    assert loss == pytest.approx(want_loss, rel=1e-6)
    np.testing.assert_allclose(
        grad.astype(np.float64), want_grad.astype(np.float64), rtol=1e-6, atol=1e-7
    )
