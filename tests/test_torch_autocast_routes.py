"""Which route a call of rnnfast.torch takes under ``torch.autocast("cpu")``: bf16 products in
the forward and in the backward that runs later, outside the block (both of the bridge's
routes); the thread's products restored after (float32 calls outside autocast are
bit-identical to what they were); torch's own forward, with an AutocastFallbackWarning that
says why and what to do, for what the bf16 products cannot run (float16 autocast, a CPU
without bf16 products, a float64 module); double backward recomputed under torch's own
autocast; a training loop with torch.optim under autocast."""

from __future__ import annotations

import numpy as np
import pytest
from bf16_paths import BF16_UNIT_ROUNDOFF as U
from bf16_paths import bf16_path  # noqa: F401 (the fixture below)
from conftest import import_torch

torch = import_torch()
rt = pytest.importorskip("rnnfast.torch")

import rnnfast.precision  # noqa: E402
from rnnfast import _torch_autocast  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:LSTM with projections:UserWarning")
BOTH_PATHS = pytest.mark.usefixtures("bf16_path")  # emulated, and each native path this CPU runs

D, H, T, B = 3, 6, 5, 2
# the plain stack's route and the general layer's
ROUTES = {"plain": {}, "general": {"bidirectional": True}}


def pair(name, dtype=torch.float32, **options):
    torch.manual_seed(0)
    ref = getattr(torch.nn, name)(D, H, dtype=dtype, **options)
    return ref, rt.from_torch(ref)


def outputs_and_grads(module, x):
    y, state = module(x)
    states = list(state) if isinstance(state, tuple) else [state]
    loss = sum((o.float() * (i + 1)).sum() for i, o in enumerate([y, *states]))
    return [y, *states, *torch.autograd.grad(loss, [x, *module.parameters()])]


@BOTH_PATHS
@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("name", ["RNN", "GRU", "LSTM"])
def test_outside_autocast_is_bit_identical(name, route):
    _, mine = pair(name, **ROUTES[route])
    x = torch.randn(T, B, D, requires_grad=True)
    before = outputs_and_grads(mine, x)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y, _ = mine(x)
    y.float().sum().backward()
    assert _torch_autocast.thread_products() == "float32"
    after = outputs_and_grads(mine, x)
    assert all(a.dtype == torch.float32 for a in after)
    for a, b in zip(after, before):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


@BOTH_PATHS
@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("name", ["RNN", "GRU", "LSTM"])
def test_backward_outside_the_block_runs_bf16_products(name, route, monkeypatch):
    _, mine = pair(name, **ROUTES[route])
    x = torch.randn(T, B, D, requires_grad=True)
    seen = []

    def spy(run):
        def wrapper(*args, **kwargs):
            seen.append(_torch_autocast.thread_products())
            return run(*args, **kwargs)

        return wrapper

    if route == "plain":
        monkeypatch.setattr(rt, "plain_backward", spy(rt.plain_backward))
    else:
        with torch.no_grad():
            mine(x)  # makes the module's rnnfast layer, whose backward the spy wraps
        layer = mine._rnnfast_layer(np.float32)
        monkeypatch.setattr(layer, "backward", spy(layer.backward))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y, _ = mine(x)
    assert _torch_autocast.thread_products() == "float32"
    y.float().sum().backward()
    assert seen == ["bf16"]
    assert _torch_autocast.thread_products() == "float32"


@BOTH_PATHS
def test_a_failed_call_restores_the_threads_products():
    _, mine = pair("LSTM")
    with torch.autocast("cpu", dtype=torch.bfloat16), pytest.raises(RuntimeError):
        mine(torch.randn(T, B, D + 1))  # torch's own message for the input size
    assert _torch_autocast.thread_products() == "float32"


def fallback_matches_torch(name, dtype, module_dtype=torch.float32, match=""):
    ref, mine = pair(name, dtype=module_dtype)
    x = torch.randn(T, B, D, dtype=module_dtype)
    with torch.autocast("cpu", dtype=dtype):
        want = ref(x)
        with pytest.warns(rt.AutocastFallbackWarning, match=match):
            got = mine(x)
    assert got[0].dtype == want[0].dtype
    torch.testing.assert_close(got[0], want[0], rtol=0, atol=0)


@BOTH_PATHS
@pytest.mark.parametrize("name", ["RNN", "GRU"])  # torch's LSTM has no float16 on the CPU
def test_float16_autocast_runs_torchs_forward_with_a_warning(name):
    fallback_matches_torch(name, torch.float16, match=r"bf16 only.*dtype=torch.bfloat16")


@pytest.mark.parametrize("name", ["RNN", "GRU", "LSTM"])
def test_without_bf16_products_runs_torchs_forward_with_a_warning(name, monkeypatch):
    monkeypatch.setattr(rnnfast.precision, "bf16_available", lambda: False)
    fallback_matches_torch(name, torch.bfloat16, match=r"this CPU runs no bf16 products")


@BOTH_PATHS
def test_a_float64_module_runs_torchs_forward_with_a_warning():
    fallback_matches_torch("GRU", torch.bfloat16, torch.float64, match=r"call module.float\(\)")


@BOTH_PATHS
@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("name", ["RNN", "GRU", "LSTM"])
def test_double_backward_recomputes_under_torchs_autocast(name, route):
    """A gradient penalty: the second-order gradients are torch's own under autocast (the
    recompute is torch's recurrence under torch.autocast; see _torch_recompute), up to the
    first-order gradient arriving through rnnfast's output cast."""

    def penalty_grads(module):
        x = torch.randn(T, B, D, generator=torch.Generator().manual_seed(1))
        x.requires_grad_()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y, _ = module(x)
        (dx,) = torch.autograd.grad(y.float().square().sum(), x, create_graph=True)
        return torch.autograd.grad(dx.square().sum(), list(module.parameters()))

    ref, mine = pair(name, **ROUTES[route])
    for got, want in zip(penalty_grads(mine), penalty_grads(ref)):
        scale = float(want.abs().max())
        assert float((got - want).abs().max()) <= 16 * U * scale


class Tagger(torch.nn.Module):
    """Embedding -> LSTM (2 layers) -> GRU (bidirectional) -> Linear, from ``recurrent``."""

    def __init__(self, recurrent):
        super().__init__()
        self.emb = torch.nn.Embedding(12, 8)
        self.lstm = recurrent.LSTM(8, 16, num_layers=2, batch_first=True)
        self.gru = recurrent.GRU(16, 8, bidirectional=True, batch_first=True)
        self.out = torch.nn.Linear(16, 12)

    def forward(self, ids):
        y, _ = self.lstm(self.emb(ids))
        y, _ = self.gru(y)
        return self.out(y)


def train(recurrent, steps=40):
    """The losses of training a Tagger under autocast bf16 with Adam."""
    torch.manual_seed(0)
    model = Tagger(recurrent)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    ids = torch.randint(0, 12, (8, 10))
    target = (ids * 5 + 1) % 12  # a per-token mapping the tagger can learn
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(ids)
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 12), target.reshape(-1))
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert all(p.dtype == torch.float32 for p in model.parameters())
    return losses


@BOTH_PATHS
def test_training_under_autocast_decreases_the_loss_as_torchs():
    ours, theirs = train(rt), train(torch.nn)
    assert ours[-1] < 0.5 * ours[0], ours
    # the same descent as torch's own modules under autocast (measured: 1e-4 apart after 40
    # steps; bf16 rounding differs step by step, so not to the bit)
    assert abs(ours[-1] - theirs[-1]) < 0.05 * theirs[-1], (ours[-1], theirs[-1])
