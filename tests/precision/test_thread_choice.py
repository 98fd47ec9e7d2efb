"""The products are the calling thread's choice for the span of a call: restored after it, an
exception included, and never seen by a float32 call on another thread meanwhile (bit for
bit)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import run_threads

import rnnfast
from rnnfast import _core, functional, optim, training
from rnnfast.nn._mixed_precision import chosen_precision


@pytest.fixture(autouse=True)
def emulated(emulated_products):
    """bf16 products on any CPU (the test switch)."""


def _restored():
    return _core.thread_products() == "float32" and chosen_precision() is None


def test_a_layer_call_restores_the_choice_after_it(rng):
    layer = rnnfast.LSTM(3, 4, precision="bf16")
    x = rng.standard_normal((5, 2, 3)).astype(np.float32)
    y, _ = layer(x)
    assert _restored()
    layer.backward(np.ones_like(y))
    assert _restored()
    layer.eval().step(x[0])
    assert _restored()


def test_the_choice_is_restored_after_an_exception_in_the_kernels(rng, monkeypatch):
    """A kernel that raises inside a bf16 forward (here a stand-in for one), a step of the
    wrong shape, a loss that raises inside fit(precision="bf16"): the thread is back to
    float32 products, and no model choice is left behind."""
    x = rng.standard_normal((5, 2, 3)).astype(np.float32)
    layer = rnnfast.RNN(3, 4, precision="bf16")

    def failing(*args, **kwargs):
        assert _core.thread_products() == "bf16"  # raised inside the block
        raise RuntimeError("a kernel fails")

    with monkeypatch.context() as patch:
        patch.setattr(functional, "rnn_forward", failing)
        with pytest.raises(RuntimeError, match="a kernel fails"):
            layer(x)
    assert _restored()
    with pytest.raises(ValueError):
        layer.eval().step(np.zeros((2, 5), np.float32))
    assert _restored()

    model = rnnfast.Sequential([rnnfast.GRU(3, 1, return_sequences=False, batch_first=True)])

    def loss(out, target, mask=None):
        assert _core.thread_products() == "bf16" and chosen_precision() == "bf16"
        raise ArithmeticError("a loss fails")

    with pytest.raises(ArithmeticError):
        training.fit(
            model, x.swapaxes(0, 1), np.zeros((2, 1), np.float32), loss=loss,
            optimizer=optim.SGD(model, lr=0.1), verbose=0, precision="bf16",
        )  # fmt: skip
    assert _restored()


@pytest.mark.parametrize("cls", [rnnfast.RNN, rnnfast.GRU, rnnfast.LSTM])
def test_a_float32_call_on_another_thread_stays_float32_bit_for_bit(cls, num_threads, rng):
    """Thread 0 trains a bf16 layer (forward, backward, step) over and over while thread 1
    runs the float32 layer: thread 1's results are those of the float32 layer alone, bit for
    bit, every time; thread 0's are bf16's."""
    x = rng.standard_normal((7, 3, 5)).astype(np.float32)
    fast = cls(5, 6, seed=2, precision="bf16")
    plain = cls(5, 6, seed=2)

    def run(layer):
        y, _ = layer(x)
        dx, _ = layer.backward(np.ones_like(y))
        return y, dx

    alone = run(plain)
    in_bf16 = run(fast)
    assert not np.array_equal(alone[0], in_bf16[0])

    def work(i):  # the two threads start together (run_threads) and overlap for 30 rounds
        return [run(fast if i == 0 else plain) for _ in range(30)]

    done = run_threads(work, 2)
    for y, dx in done[1]:
        np.testing.assert_array_equal(y, alone[0])
        np.testing.assert_array_equal(dx, alone[1])
    for y, _ in done[0]:
        np.testing.assert_array_equal(y, in_bf16[0])


def test_a_fit_in_bf16_leaves_another_thread_s_calls_float32(rng):
    """fit(precision="bf16") on one thread (a model's choice, every kernel call of its steps)
    while another thread calls a float32 layer: bit for bit the float32 layer's results."""
    x = rng.standard_normal((8, 6, 3)).astype(np.float32)
    y = rng.standard_normal((8, 1)).astype(np.float32)
    plain = rnnfast.GRU(3, 4, seed=1).eval()
    alone, _ = plain(x.swapaxes(0, 1))
    model = rnnfast.Sequential(
        [rnnfast.GRU(3, 4, batch_first=True, return_sequences=False), rnnfast.Dense(4, 1)]
    )

    def work(i):
        if i == 0:
            return training.fit(
                model, x, y, loss="mse", optimizer=optim.Adam(model, lr=1e-2), epochs=20,
                batch_size=2, verbose=0, precision="bf16",
            )  # fmt: skip
        return [plain(x.swapaxes(0, 1))[0] for _ in range(40)]

    _, outputs = run_threads(work, 2)
    for out in outputs:
        np.testing.assert_array_equal(out, alone)
    assert _restored()
