"""Shared tolerances, fixtures and problem generators of the rnnfast test suite.

The NumPy reference (``rnnfast.reference``) is the oracle; float32 kernel results are compared
with the reference computed in float64 on the same float32-valued inputs.
"""

from __future__ import annotations

import os
import threading
import zlib

# The kernels' OpenMP threads spin-wait for a while after each call and OpenBLAS's threads do
# the same after each matmul of the reference; on a machine with few cores the two pools take
# turns starving each other (the reference ran ~50x slower here). The oracle needs no threads.
# Set before NumPy is first imported; an explicit setting in the environment wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# Keras, the second oracle, runs on the torch backend (read when keras is first imported).
os.environ.setdefault("KERAS_BACKEND", "torch")

import numpy as np
import pytest

import rnnfast
from rnnfast import _core, functional, reference

# ---- tolerances: the one place they are stated -------------------------------------------------
# Used through assert_close, which scales atol by the largest magnitude of the expected array:
# the rounding error of a sum is relative to the size of its terms, not to a result that cancels.
TOL = {
    np.float32: {"rtol": 5e-5, "atol": 5e-6},
    np.float64: {"rtol": 5e-12, "atol": 5e-13},
}

DTYPES = [np.float32, np.float64]
ACTIVATIONS = ["tanh", "relu"]
ISAS = _core.supported_isas()


def tol(dtype):
    return TOL[np.dtype(dtype).type]


def assert_close_any_dtype(actual, expected, dtype, what=""):
    """assert_close's tolerances for ``dtype`` (atol scaled by the largest expected magnitude)
    without its dtype check: for results of any dtype, both of them rnnfast's (a batch and its
    sequences one at a time, a container and its layers by hand)."""
    t = tol(dtype)
    actual, expected = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    scale = max(1.0, float(np.max(np.abs(expected)))) if expected.size else 1.0
    np.testing.assert_allclose(
        actual, expected, rtol=t["rtol"], atol=t["atol"] * scale, err_msg=what
    )


def assert_close(actual, expected, dtype, what=""):
    """``actual`` (a kernel result of ``dtype``) matches ``expected`` within TOL[dtype]."""
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    assert actual.dtype == np.dtype(dtype), f"{what}: dtype {actual.dtype} != {np.dtype(dtype)}"
    t = tol(dtype)
    finite = expected[np.isfinite(expected)]
    scale = max(1.0, float(np.max(np.abs(finite)))) if finite.size else 1.0
    np.testing.assert_allclose(
        actual.astype(np.float64),
        expected.astype(np.float64),
        rtol=t["rtol"],
        atol=t["atol"] * scale,
        err_msg=what,
    )


# ---- finite differences -------------------------------------------------------------------------


def central_difference(loss, array, idx, eps=1e-6):
    """``(loss() at array[idx] + eps - loss() at array[idx] - eps) / (2 eps)``, the element
    changed in place and restored. A layer's parameter is written inside
    ``rnnfast.writable_parameters`` (the layers compute from the arrays themselves there)."""
    with rnnfast.writable_parameters(array):
        old = array[idx]
        array[idx] = old + eps
        plus = loss()
        array[idx] = old - eps
        minus = loss()
        array[idx] = old
    return (plus - minus) / (2 * eps)


def numerical_gradient(loss, array, eps=1e-6):
    """Central differences of ``loss()`` with respect to every element of ``array``, in
    float64 (central_difference at each)."""
    grad = np.zeros_like(array, dtype=np.float64)
    with rnnfast.writable_parameters(array):  # one block: the layers repack once, after it
        for idx in np.ndindex(array.shape):
            grad[idx] = central_difference(loss, array, idx, eps)
    return grad


# ---- sweeps -------------------------------------------------------------------------------------


def sweep(axes, seed, extra=4):
    """The product of ``axes`` (a dict of name -> values) as pytest params: a seeded subset
    that takes every value of every axis at least once (plus ``extra`` random cases) runs by
    default; the other cases are marked ``full`` (``python -m pytest -m full`` runs them).
    Each param is a dict of one value per axis, its id ``name=value-...``."""
    import itertools
    import random

    names = list(axes)
    cases = list(itertools.product(*(axes[n] for n in names)))
    rand = random.Random(seed)
    chosen = set()
    shuffled = [rand.sample(range(len(axes[n])), len(axes[n])) for n in names]
    for i in range(max(len(v) for v in axes.values())):
        chosen.add(tuple(axes[n][s[i % len(s)]] for n, s in zip(names, shuffled)))
    chosen.update(rand.sample(cases, min(extra, len(cases))))
    params = []
    for case in cases:
        values = dict(zip(names, case))
        case_id = "-".join(f"{n}={getattr(v, '__name__', v)}" for n, v in values.items())
        marks = () if case in chosen else (pytest.mark.full,)
        params.append(pytest.param(values, id=case_id, marks=marks))
    return params


# ---- fixtures -----------------------------------------------------------------------------------


@pytest.fixture(params=ISAS)
def isa(request):
    """Run the test with the kernels of one supported ISA; restore the previous ISA after."""
    previous = _core.active_isa()
    _core.set_active_isa(request.param)
    try:
        assert _core.active_isa() == request.param
        yield request.param
    finally:
        _core.set_active_isa(previous)


@pytest.fixture
def rng(request):
    """A generator seeded from the test's id, so every test case draws its own fixed data."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def import_torch():
    """torch, or a skip when it is missing; a failure instead when RNNFAST_REQUIRE_TORCH=1 (CI)."""
    if os.environ.get("RNNFAST_REQUIRE_TORCH") == "1":
        import torch

        return torch
    return pytest.importorskip("torch")


@pytest.fixture(scope="session")
def keras(torch):
    """Keras 3 on the torch backend (the second oracle of Keras's semantics), or a skip when
    it is missing; a failure instead when RNNFAST_REQUIRE_TORCH=1 (CI)."""
    if os.environ.get("RNNFAST_REQUIRE_TORCH") == "1":
        import keras
    else:
        keras = pytest.importorskip("keras")
    if keras.backend.backend() != "torch":
        pytest.fail(f"keras runs on the {keras.backend.backend()} backend; set KERAS_BACKEND=torch")
    return keras


@pytest.fixture(scope="session")
def torch():
    """The torch module on one thread (its OpenMP pool would compete with the kernels')."""
    torch = import_torch()
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield torch
    torch.set_num_threads(previous)


@pytest.fixture
def restore_threads():
    """Restore rnnfast's thread count after a test that changes it."""
    previous = rnnfast.get_num_threads()
    yield previous
    rnnfast.set_num_threads(previous)


def run_threads(work, n):
    """Run work(i) for i < n in n threads started together; results in order, errors re-raised."""
    results = [None] * n
    errors = []
    barrier = threading.Barrier(n)

    def target(i):
        try:
            barrier.wait()
            results[i] = work(i)
        except BaseException as exc:  # pragma: no cover - reported below  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=target, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


# ---- problems -----------------------------------------------------------------------------------


class Problem(dict):
    """x (T, B, D), weight_ih (H, D), weight_hh (H, H), bias_ih, bias_hh (H,) or None,
    h0 (B, H) or None, all of one dtype; attribute access for brevity."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def astype(self, dtype):
        return Problem({k: None if v is None else v.astype(dtype) for k, v in self.items()})

    def forward_args(self):
        return {
            "x": self.x,
            "weight_ih": self.weight_ih,
            "weight_hh": self.weight_hh,
            "bias_ih": self.bias_ih,
            "bias_hh": self.bias_hh,
            "h0": self.h0,
        }

    def state_dict(self):
        sd = {"weight_ih_l0": self.weight_ih, "weight_hh_l0": self.weight_hh}
        if self.bias_ih is not None:
            sd.update(bias_ih_l0=self.bias_ih, bias_hh_l0=self.bias_hh)
        return sd


def make_problem(rng, T, B, D, H, dtype=np.float64, *, h0=True, bias=True, x_scale=1.0):
    """A random problem with PyTorch's initialisation U(-1/sqrt(H), 1/sqrt(H)) for the
    parameters, x ~ N(0, x_scale^2) and h0 ~ U(-1, 1). ``bias`` may be True, False, "ih"
    or "hh" (only that bias)."""
    bound = 1.0 / np.sqrt(H)

    def u(*shape):
        return rng.uniform(-bound, bound, size=shape).astype(dtype)

    p = Problem(
        x=(x_scale * rng.standard_normal((T, B, D))).astype(dtype),
        weight_ih=u(H, D),
        weight_hh=u(H, H),
        bias_ih=u(H) if bias in (True, "ih") else None,
        bias_hh=u(H) if bias in (True, "hh") else None,
        h0=rng.uniform(-1.0, 1.0, size=(B, H)).astype(dtype) if h0 else None,
    )
    return p


def preactivations(p, nonlinearity):
    """The pre-activations z_t (T, B, H) of problem ``p`` in float64, from the reference."""
    q = p.astype(np.float64)
    y, _ = reference.rnn_forward(**q.forward_args(), nonlinearity=nonlinearity)
    B = q.x.shape[1]
    H = q.weight_hh.shape[0]
    h_prev = np.concatenate([(np.zeros((1, B, H)) if q.h0 is None else q.h0[None]), y[:-1]], axis=0)
    z = q.x @ q.weight_ih.T + h_prev @ q.weight_hh.T
    for b in (q.bias_ih, q.bias_hh):
        if b is not None:
            z = z + b
    return z


def make_problem_away_from_kink(rng, T, B, D, H, dtype=np.float64, *, margin=1e-3, **kw):
    """make_problem, redrawn until no pre-activation is within ``margin`` of zero, so that relu's
    derivative is the same for every oracle (and for finite differences)."""
    for _ in range(1000):
        p = make_problem(rng, T, B, D, H, dtype, **kw)
        if np.min(np.abs(preactivations(p, "relu"))) > margin:
            return p
    raise AssertionError("could not draw a problem away from relu's kink")


def reference_forward(p, nonlinearity):
    """Reference forward of problem ``p`` in float64."""
    return reference.rnn_forward(**p.astype(np.float64).forward_args(), nonlinearity=nonlinearity)


# rnn_backward's required keywords besides h0 (functional.PLAIN_FORWARD_OPTIONS without it): the
# tests pass h0 explicitly at each call. Override with dict(PLAIN, lengths=...).
PLAIN = {k: v for k, v in functional.PLAIN_FORWARD_OPTIONS.items() if k != "h0"}


def kernel_backward(p, y, dy, dh_n, **options):
    """``functional.rnn_backward`` of problem ``p`` from its forward's ``y``, with PLAIN's
    options overridden by ``options`` (``nonlinearity=``, ``lengths=``, ...)."""
    return functional.rnn_backward(
        p.x, p.weight_ih, p.weight_hh, y, dy=dy, dh_n=dh_n, h0=p.h0, **dict(PLAIN, **options)
    )


def gradients_by_name(g):
    """An ``RNNGrads`` keyed by the names of the problem's arrays (one dbias serves both
    biases), for comparing each with a numerical gradient of that array."""
    return {
        "x": g.dx,
        "h0": g.dh0,
        "weight_ih": g.dweight_ih,
        "weight_hh": g.dweight_hh,
        "bias_ih": g.dbias,
        "bias_hh": g.dbias,
    }


def reference_backward(p, y, dy, dh_n, nonlinearity):
    """Reference BPTT in float64 from the given outputs ``y`` (pass the kernel's own y, upcast:
    relu's derivative mask then matches the kernel's exactly)."""
    q = p.astype(np.float64)
    up = lambda a: None if a is None else np.asarray(a, dtype=np.float64)
    return reference.rnn_backward(
        q.x,
        q.weight_ih,
        q.weight_hh,
        up(y),
        up(dy),
        up(dh_n),
        h0=q.h0,
        **dict(PLAIN, nonlinearity=nonlinearity),
    )
