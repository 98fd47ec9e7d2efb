"""rnnfast's threads beside the other thread pools of a process: its own concurrent calls share
one budget, threadpoolctl lists and limits it, and it shares one OpenMP runtime with PyTorch.
docs/threads.rst ("Threads beside NumPy and PyTorch") documents what these tests hold to."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import run_threads

import rnnfast
from rnnfast import _core
from rnnfast import functional as F

threadpoolctl = pytest.importorskip("threadpoolctl")


def _big_problem(seed=0, T=60, B=64, D=64, H=256):
    """Large enough that a lone call uses every thread of the budget (threads_for)."""
    rng = np.random.default_rng(seed)
    return (
        rng.standard_normal((T, B, D)).astype(np.float32),
        (rng.uniform(-1, 1, (H, D)) / 16).astype(np.float32),
        (rng.uniform(-1, 1, (H, H)) / 16).astype(np.float32),
    )


def _forward_backward(x, w_ih, w_hh):
    y, h_n = F.rnn_forward(x, w_ih, w_hh)
    return (y, h_n) + tuple(
        F.rnn_backward(
            x,
            w_ih,
            w_hh,
            y,
            y,
            None,
            **F.PLAIN_FORWARD_OPTIONS,
        )
    )


def _rnnfast_info():
    found = [i for i in threadpoolctl.threadpool_info() if i["user_api"] == "rnnfast"]
    assert len(found) == 1, f"threadpoolctl lists rnnfast {len(found)} times"
    return found[0]


def test_threadpoolctl_lists_rnnfast_with_its_budget(restore_threads):
    rnnfast.set_num_threads(3)
    info = _rnnfast_info()
    assert info["num_threads"] == 3
    assert os.path.realpath(info["filepath"]) == os.path.realpath(_core.__file__)
    assert info["version"] == rnnfast.__version__


def test_threadpool_limits_caps_rnnfast_and_restores_it(restore_threads):
    rnnfast.set_num_threads(2)
    with threadpoolctl.threadpool_limits(1):
        assert rnnfast.get_num_threads() == 1
    assert rnnfast.get_num_threads() == 2
    with threadpoolctl.threadpool_limits(1, user_api="rnnfast"):
        assert rnnfast.get_num_threads() == 1
    # limiting the other pools leaves rnnfast's budget alone
    with threadpoolctl.threadpool_limits(1, user_api="blas"):
        assert rnnfast.get_num_threads() == 2
    with threadpoolctl.threadpool_limits(1, user_api="openmp"):
        assert rnnfast.get_num_threads() == 2
    assert rnnfast.get_num_threads() == 2


def test_results_do_not_depend_on_the_limit(restore_threads):
    problem = _big_problem(1)
    rnnfast.set_num_threads(2)
    free = _forward_backward(*problem)
    with threadpoolctl.threadpool_limits(1):
        limited = _forward_backward(*problem)
    for a, b in zip(free, limited):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("budget", [2, 4])
def test_concurrent_calls_never_exceed_the_budget(restore_threads, budget):
    """8 Python threads calling kernels at once share the budget: their OpenMP helper threads
    together stay within budget - 1 (each caller's own thread does work too), where each taking a
    full team would start 8 * (budget - 1). Results equal serial calls whatever share a call got."""
    rnnfast.set_num_threads(budget)
    problems = [_big_problem(seed) for seed in range(4)]
    layer = rnnfast.Linear(256, 96, seed=3)
    inputs = np.random.default_rng(5).standard_normal((512, 256)).astype(np.float32)

    _core.peak_helper_threads(reset=True)
    serial = [_forward_backward(*p) for p in problems]
    dense = layer(inputs)
    assert _core.peak_helper_threads() == budget - 1, "a lone call should use the whole budget"

    intervals = [None] * 8

    def work(i):
        start = time.perf_counter()
        out = (
            _forward_backward(*problems[i % 4])
            if i % 2 == 0
            else (_forward_backward(*problems[i % 4]) + (layer(inputs),))
        )
        intervals[i] = (start, time.perf_counter())
        return out

    _core.peak_helper_threads(reset=True)
    concurrent = run_threads(work, 8)
    assert _core.peak_helper_threads() <= budget - 1
    assert _core.helper_threads_in_use() == 0, "a finished call kept its threads"
    # the calls did run at the same time, so the bound above was put to the test
    overlap = min(e for _, e in intervals) - max(s for s, _ in intervals)
    assert overlap > 0 or sum(e - s for s, e in intervals) > 1.5 * (
        max(e for _, e in intervals) - min(s for s, _ in intervals)
    )
    for i, got in enumerate(concurrent):
        for a, b in zip(got, serial[i % 4] + ((dense,) if i % 2 else ())):
            assert np.array_equal(a, b), f"thread {i}"


def test_a_thread_waiting_on_another_gets_the_budget_back(restore_threads):
    rnnfast.set_num_threads(2)
    problem = _big_problem(2)
    run_threads(lambda i: _forward_backward(*problem), 4)
    _core.peak_helper_threads(reset=True)
    _forward_backward(*problem)  # alone again: the whole budget
    assert _core.peak_helper_threads() == 1


@pytest.mark.parametrize("first", ["torch", "rnnfast"])
def test_rnnfast_and_torch_use_one_openmp_runtime(torch, first):
    """Whichever is imported first, one libgomp serves both (the dynamic linker shares it by
    its soname), so their OpenMP teams are one pool of threads, not two."""
    order = ["torch", "rnnfast"] if first == "torch" else ["rnnfast", "torch"]
    script = (
        f"import {order[0]}, {order[1]}, threadpoolctl\n"
        "print(sum(i['user_api'] == 'openmp' for i in threadpoolctl.threadpool_info()))"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "1", out.stdout + out.stderr


def test_interleaved_with_torch_and_numpy_pools(torch, restore_threads):
    """A loop that alternates PyTorch ops (its intra-op OpenMP team), NumPy matmuls (OpenBLAS's
    pthreads) and rnnfast kernels computes the same as each alone and leaves every pool's
    setting as it found it."""
    rnnfast.set_num_threads(2)
    torch_threads = torch.get_num_threads()
    torch.set_num_threads(2)  # the session fixture keeps torch on one thread; use its pool here
    try:
        _interleave(torch)
    finally:
        torch.set_num_threads(torch_threads)


def _interleave(torch):
    problem = _big_problem(4)
    alone = _forward_backward(*problem)
    a = np.random.default_rng(6).standard_normal((300, 300))
    ta = torch.from_numpy(a)
    np_alone, torch_alone = a @ a, (ta @ ta).numpy()
    for _ in range(3):
        t_out = (ta @ ta).numpy()
        n_out = a @ a
        got = _forward_backward(*problem)
        assert np.array_equal(t_out, torch_alone)
        assert np.array_equal(n_out, np_alone)
        for x, y in zip(got, alone):
            assert np.array_equal(x, y)
    assert torch.get_num_threads() == 2
    assert rnnfast.get_num_threads() == 2


def test_rnnfast_in_threads_while_torch_runs(torch, restore_threads):
    """PyTorch working in one Python thread while rnnfast runs in others: both correct."""
    rnnfast.set_num_threads(2)
    problem = _big_problem(7)
    alone = _forward_backward(*problem)
    m = torch.randn(256, 256, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    want = m @ m

    def work(i):
        if i == 0:
            return [bool(torch.equal(m @ m, want)) for _ in range(20)]
        return _forward_backward(*problem)

    results = run_threads(work, 4)
    assert all(results[0])
    for got in results[1:]:
        for x, y in zip(got, alone):
            assert np.array_equal(x, y)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity (Linux)")
def test_a_team_squeezed_onto_one_core_backs_off_to_one_thread():
    """A process pinned to one CPU but told to use 2 threads: the team's step barriers stall
    (a teammate is always off the core), so after two such regions in a row rnnfast backs off
    to one thread for a while, with the same results. Run in a fresh process: the affinity must be
    set before OpenMP starts its threads."""
    script = """
import os
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
import numpy as np, rnnfast
from rnnfast import _core
from rnnfast import functional as F
rnnfast.set_num_threads(2)
rng = np.random.default_rng(0)
x = rng.standard_normal((200, 32, 64)).astype(np.float32)
w_ih = (rng.uniform(-1, 1, (256, 64)) / 16).astype(np.float32)
w_hh = (rng.uniform(-1, 1, (256, 256)) / 16).astype(np.float32)
y_first, _ = F.rnn_forward(x, w_ih, w_hh)
y2, _ = F.rnn_forward(x, w_ih, w_hh)
backoff = _core.contention_backoff_seconds()
y_again, _ = F.rnn_forward(x, w_ih, w_hh)
_core.clear_contention_backoff()
with rnnfast.threads(1):
    y1, _ = F.rnn_forward(x, w_ih, w_hh)
print(backoff > 0, np.array_equal(y_first, y1), np.array_equal(y2, y1),
      np.array_equal(y_again, y1), _core.contention_backoff_seconds() == 0.0)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True"] * 5, out.stdout + out.stderr


def test_another_library_named_core_is_not_taken_for_rnnfast(tmp_path):
    """threadpoolctl matches libraries by file name, and other packages have modules named
    _core too: one without rnnfast's exported functions is skipped, not listed or crashed on."""
    import ctypes
    import shutil

    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build a stand-in library")
    source = tmp_path / "fake.c"
    source.write_text("int some_other_function(void) { return 7; }\n")
    library = tmp_path / "_core.cpython-fake.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    ctypes.CDLL(str(library))  # loaded into the process, as another package's module would be
    info = _rnnfast_info()  # exactly one rnnfast entry, and it is ours
    assert os.path.realpath(info["filepath"]) == os.path.realpath(_core.__file__)
    assert not any(
        os.path.realpath(i["filepath"]) == os.path.realpath(library)
        for i in threadpoolctl.threadpool_info()
    )
