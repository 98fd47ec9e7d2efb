"""ISA dispatch and threads: every ISA agrees with every other, thread counts agree, a given
thread count is bitwise reproducible, and the configuration API behaves."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from conftest import (
    ACTIVATIONS,
    DTYPES,
    ISAS,
    assert_close,
    kernel_backward,
    make_problem,
    reference_backward,
    reference_forward,
)

import rnnfast
from rnnfast import _core
from rnnfast import functional as F

# Shapes big enough for the kernels to use two threads (the work per step decides), split in
# both ways: by blocks of hidden units (many panels), and by batch rows (a single panel, H=5).
SHAPES = [(20, 16, 100, 256), (3, 3000, 3, 5), (50, 3, 17, 33)]
SHAPE_IDS = [f"T{T}-B{B}-D{D}-H{H}" for T, B, D, H in SHAPES]


def _run(p, nonlinearity, dy, dh_n):
    """Forward and backward through the functional API: (y, h_n, *grads)."""
    y, h_n = F.rnn_forward(**p.forward_args(), nonlinearity=nonlinearity)
    g = kernel_backward(p, y, dy, dh_n, nonlinearity=nonlinearity)
    return (y, h_n) + tuple(g)


NAMES = ("y", "h_n") + F.RNNGrads._fields


def _problem(rng, shape, dtype):
    T, B, _, H = shape
    p = make_problem(rng, *shape, dtype)
    dy = rng.standard_normal((T, B, H)).astype(dtype)
    dh_n = rng.standard_normal((B, H)).astype(dtype)
    return p, dy, dh_n


def _check_reference(results, p, nonlinearity, dy, dh_n, dtype):
    y = results[0]
    y_ref, h_ref = reference_forward(p, nonlinearity)
    ref = (y_ref, h_ref) + tuple(reference_backward(p, y, dy, dh_n, nonlinearity))
    for name, got, want in zip(NAMES, results, ref):
        assert_close(got, want, dtype, name)


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("nonlinearity", ACTIVATIONS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_isa_agrees_with_every_other(dtype, nonlinearity, shape, rng):
    p, dy, dh_n = _problem(rng, shape, dtype)
    previous = _core.active_isa()
    by_isa = {}
    try:
        for name in ISAS:
            _core.set_active_isa(name)
            assert _core.active_isa() == name
            by_isa[name] = _run(p, nonlinearity, dy, dh_n)
    finally:
        _core.set_active_isa(previous)
    for a, b in itertools.combinations(ISAS, 2):
        for name, got, want in zip(NAMES, by_isa[a], by_isa[b]):
            assert_close(got, want.astype(np.float64), dtype, f"{name}: {a} vs {b}")
    for name in ISAS:
        _check_reference(by_isa[name], p, nonlinearity, dy, dh_n, dtype)


def test_set_active_isa_rejects_unknown_names():
    previous = _core.active_isa()
    with pytest.raises(ValueError, match="isa"):
        _core.set_active_isa("no-such-isa")
    assert _core.active_isa() == previous
    assert set(ISAS) <= set(_core.compiled_isas())
    assert ISAS[0] == "baseline"
    assert previous in ISAS


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("nonlinearity", ACTIVATIONS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_thread_counts_agree(dtype, nonlinearity, shape, isa, rng):
    p, dy, dh_n = _problem(rng, shape, dtype)
    with rnnfast.threads(1):
        one = _run(p, nonlinearity, dy, dh_n)
    with rnnfast.threads(2):
        two = _run(p, nonlinearity, dy, dh_n)
    for name, a, b in zip(NAMES, one, two):
        assert_close(b, a.astype(np.float64), dtype, f"{name}: 2 threads vs 1")
    _check_reference(two, p, nonlinearity, dy, dh_n, dtype)


@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_same_thread_count_is_bitwise_reproducible(dtype, shape, n_threads, isa, rng):
    p, dy, dh_n = _problem(rng, shape, dtype)
    with rnnfast.threads(n_threads):
        first = _run(p, "tanh", dy, dh_n)
        second = _run(p, "tanh", dy, dh_n)
    for name, a, b in zip(NAMES, first, second):
        assert np.array_equal(a, b), name


def test_set_num_threads_validates(restore_threads):
    with pytest.raises(ValueError, match="n"):
        rnnfast.set_num_threads(0)
    with pytest.raises(ValueError):
        rnnfast.set_num_threads(-3)
    with pytest.raises(TypeError):
        rnnfast.set_num_threads(2.0)
    with pytest.raises(TypeError):
        rnnfast.set_num_threads(True)
    assert rnnfast.get_num_threads() == restore_threads
    rnnfast.set_num_threads(3)
    assert rnnfast.get_num_threads() == 3


def test_threads_context_manager_restores(restore_threads):
    rnnfast.set_num_threads(2)
    with rnnfast.threads(1):
        assert rnnfast.get_num_threads() == 1
        with rnnfast.threads(3):
            assert rnnfast.get_num_threads() == 3
        assert rnnfast.get_num_threads() == 1
    assert rnnfast.get_num_threads() == 2
    with pytest.raises(RuntimeError, match="inside"), rnnfast.threads(1):
        raise RuntimeError("inside")
    assert rnnfast.get_num_threads() == 2
    with pytest.raises(ValueError), rnnfast.threads(0):
        pass  # pragma: no cover
    assert rnnfast.get_num_threads() == 2


def test_default_thread_count_is_positive():
    assert isinstance(rnnfast.get_num_threads(), int)
    assert rnnfast.get_num_threads() >= 1


def test_show_config_mentions_isa_and_threads(isa, restore_threads, capsys):
    rnnfast.set_num_threads(3)
    text = rnnfast.show_config()
    printed = capsys.readouterr().out
    assert text in printed
    assert rnnfast.__version__ in text
    isa_line = next(line for line in text.splitlines() if "isa in use" in line)
    assert isa_line.split(":", 1)[1].strip() == isa
    threads_line = next(line for line in text.splitlines() if line.startswith("threads"))
    assert threads_line.split(":", 1)[1].split()[0] == "3"
    for name in _core.compiled_isas():
        assert name in text


def test_show_config_says_where_bf16_products_run(isa):
    # the line follows the active ISA: a path on the avx512 kernels with AVX512-BF16, else
    # "none" with the reason (which names the active ISA)
    line = next(x for x in rnnfast.show_config().splitlines() if x.startswith("bf16 products"))
    path = _core.bf16_products_path()
    if path:
        assert line.split(":", 1)[1].strip().startswith(path)
    else:
        assert "none: " in line and f"'{isa}'" in line
