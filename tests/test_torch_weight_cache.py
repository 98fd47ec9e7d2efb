"""The torch bridge's packed weights (``rnnfast._torch_weight_cache``): one cache per layer and
direction, reused while every weight tensor keeps its ``(_version, data_ptr())``, made again
after an optimizer's step, an in-place write under ``torch.no_grad()``, ``load_state_dict`` or
``parameters_changed()``, and after a write neither sees (through ``.data`` or a NumPy view: the
forward checks the weights' bytes); the outputs then a fresh module's, bit for bit. With invalidation
disabled the same writes leave stale packs, which the outputs show."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import import_torch

from rnnfast import _core

torch = import_torch()
import rnnfast.torch as rt  # noqa: E402

T, B, D, H = 5, 4, 8, 16

MODULES = {
    "rnn_2": lambda: rt.RNN(D, H, num_layers=2),
    "gru": lambda: rt.GRU(D, H),
    "gru_bi": lambda: rt.GRU(D, H, bidirectional=True),  # the general route
    "lstm_proj": lambda: rt.LSTM(D, H, proj_size=6),
    "layer_norm_lstm": lambda: rt.LayerNormLSTM(D, H),
}


def _module(name):
    torch.manual_seed(0)
    return MODULES[name]()


def _train_step(module):
    """One forward and backward: the output and the parameters' gradients (copies)."""
    module.zero_grad()
    x = torch.randn(T, B, D, generator=torch.Generator().manual_seed(1))
    y = module(x)[0]
    y.sum().backward()
    return y.detach().clone(), [p.grad.clone() for p in module.parameters()]


def _packs_made(module):
    return sum(e[0].packs_made for e in module.__dict__["_rnnfast_weight_caches"].values())


def _fresh(module, name):
    twin = _module(name)
    twin.load_state_dict(module.state_dict())
    return twin


def _assert_same(a, b):
    torch.testing.assert_close(a[0], b[0], rtol=0, atol=0)
    for ga, gb in zip(a[1], b[1]):
        torch.testing.assert_close(ga, gb, rtol=0, atol=0)


@pytest.mark.parametrize("name", list(MODULES))
def test_a_repeated_train_step_packs_nothing_again(name):
    module = _module(name)
    first = _train_step(module)
    made = _packs_made(module)
    assert made > 0
    _assert_same(_train_step(module), first)
    assert _packs_made(module) == made
    with torch.no_grad():  # the no-grad route reads the same packs
        module(torch.randn(T, B, D))
    assert _packs_made(module) == made


def _sgd(module):
    torch.optim.SGD(module.parameters(), lr=0.1).step()


def _adam(module):
    torch.optim.Adam(module.parameters(), lr=0.01).step()


def _no_grad_copy(module):
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(p * 0.9 + 0.01)


def _load_state_dict(module):
    module.load_state_dict({k: v * 1.1 for k, v in module.state_dict().items()})


def _data_write(module):
    for p in module.parameters():
        p.data.mul_(0.5)  # .data has a version counter of its own: torch does not see it
    module.parameters_changed()


def _data_write_alone(module):
    """PyTorch's word_language_model's update (``p.data.add_``), as gradcheck writes too: no
    version counter sees it, the forward's check of the weights' bytes does."""
    for p in module.parameters():
        p.data.add_(torch.full_like(p, 1e-3))


def _one_value_through_numpy(module):
    """One weight, through a NumPy view of the memory (no tensor sees it)."""
    w = next(module.parameters()).detach().numpy()
    w.flat[7] += 0.25


WRITERS = {
    "sgd": _sgd,
    "adam": _adam,
    "no_grad_copy": _no_grad_copy,
    "load_state_dict": _load_state_dict,
    "data_and_parameters_changed": _data_write,
    "data_alone": _data_write_alone,
    "one_value_through_numpy": _one_value_through_numpy,
}


@pytest.mark.parametrize("writer", list(WRITERS))
@pytest.mark.parametrize("name", list(MODULES))
def test_every_write_invalidates_the_packs(name, writer):
    module = _module(name)
    before = _train_step(module)
    made = _packs_made(module)
    WRITERS[writer](module)
    after = _train_step(module)
    assert _packs_made(module) > made
    assert not torch.equal(after[0], before[0])
    _assert_same(after, _train_step(_fresh(module, name)))


@pytest.mark.parametrize("writer", ["sgd", "no_grad_copy", "load_state_dict", "data_alone"])
@pytest.mark.parametrize("name", list(MODULES))
def test_a_stale_cache_fails_the_check(name, writer, monkeypatch):
    """With clear() disabled the packs made before the write stay in use: the outputs then
    differ from a fresh module's, so the invalidation tests above can fail."""
    monkeypatch.setattr(_core.WeightCache, "clear", lambda self: None)
    module = _module(name)
    _train_step(module)
    WRITERS[writer](module)
    stale = _train_step(module)
    monkeypatch.undo()
    assert not torch.equal(stale[0], _train_step(_fresh(module, name))[0])


def test_double_and_back_repack():
    module = _module("gru")
    y32 = _train_step(module)[0]
    module.double()
    x = torch.randn(T, B, D, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    y64 = module(x)[0]
    module.float()
    np.testing.assert_array_equal(_train_step(module)[0].numpy(), y32.numpy())
    assert y64.dtype == torch.float64


def test_a_pickled_module_holds_no_packs():
    import pickle

    module = _module("lstm_proj")
    first = _train_step(module)
    twin = pickle.loads(pickle.dumps(module))
    assert "_rnnfast_weight_caches" not in twin.__dict__
    _assert_same(_train_step(twin), first)
