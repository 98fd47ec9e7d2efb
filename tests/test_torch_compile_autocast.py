"""rnnfast.torch under ``torch.compile`` inside ``torch.autocast("cpu", dtype=torch.bfloat16)``:
the registered operators (``_torch_ops``) run the kernels with bf16 products, forward and
backward (their ``precision`` argument: the backward runs outside the block), with no graph
break, the outputs in torch's dtypes; the result is the eager bridge's under autocast. Float16
autocast runs torch's own forward there too, with the AutocastFallbackWarning given while
Dynamo traces. Compiling is slow: a few small cases on the ``aot_eager`` backend."""

from __future__ import annotations

import warnings

import pytest
from bf16_paths import bf16_path  # noqa: F401 (the fixture below)
from conftest import import_torch

torch = import_torch()
rt = pytest.importorskip("rnnfast.torch")
from torch import _dynamo  # noqa: E402 (after the skip where torch is missing)

pytestmark = pytest.mark.usefixtures("bf16_path")  # emulated, and each native path this CPU runs

D, H, T, B = 3, 5, 6, 2


@pytest.fixture(autouse=True)
def fresh_dynamo():
    """Each test compiles from scratch: Dynamo keeps at most 8 compiles of one code object (the
    bridge's forward) and reuses them, which would hide the fallback's trace-time warning."""
    _dynamo.reset()
    yield
    _dynamo.reset()


CASES = {
    "gru-2layers-hx": ("GRU", {"num_layers": 2}, True),
    "lstm-proj-batch_first": ("LSTM", {"proj_size": 2, "batch_first": True}, False),
    "rnn-bidirectional-hx": ("RNN", {"bidirectional": True}, True),
}


class Recorder:
    """A torch.compile backend that keeps each graph's code, then runs aot_eager."""

    def __init__(self):
        self.codes = []

    def __call__(self, gm, example_inputs):
        self.codes.append(gm.code)
        return _dynamo.lookup_backend("aot_eager")(gm, example_inputs)

    def count(self, op):
        return sum(code.count(op) for code in self.codes)


def call(module, x, hx):
    """Outputs and the gradients of x, the states and the parameters; backward outside."""
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y, state = module(x, hx)
    states = list(state) if isinstance(state, tuple) else [state]
    leaves = [x, *([] if hx is None else hx if isinstance(hx, tuple) else [hx])]
    leaves += list(module.parameters())
    loss = sum(((o.float() * (i + 1)).sin()).sum() for i, o in enumerate([y, *states]))
    return [y, *states], torch.autograd.grad(loss, leaves)


@pytest.mark.parametrize("case", CASES)
def test_compiled_under_autocast_is_the_eager_bridge(case):
    name, options, given_state = CASES[case]
    torch.manual_seed(0)
    mine = getattr(rt, name)(D, H, **options)
    batch_first = options.get("batch_first", False)
    x = torch.randn((B, T, D) if batch_first else (T, B, D), requires_grad=True)
    hx = None
    if given_state:
        rows = mine.num_layers * (2 if mine.bidirectional else 1)
        hx = torch.randn(rows, B, H, dtype=torch.bfloat16, requires_grad=True)
    recorder = Recorder()
    compiled = torch.compile(mine, backend=recorder, fullgraph=True)
    got, got_grads = call(compiled, x, hx)
    want, want_grads = call(mine, x, hx)
    assert recorder.count("rnnfast.layer_forward") == mine.num_layers * (1 + mine.bidirectional)
    assert [o.dtype for o in got] == [o.dtype for o in want]
    # the same kernels and products; the eager general layer (bidirectional) may sum in
    # another order: float32's rounding
    for a, b in zip([*got, *got_grads], [*want, *want_grads]):
        a, b = a.detach(), b.detach()
        assert a.dtype == b.dtype
        # a bf16 output is rounded after the sums: one float32 difference may round across
        # a bf16 step (2**-8 relative)
        tol = 2**-8 if a.dtype == torch.bfloat16 else 2e-5
        torch.testing.assert_close(a, b, rtol=tol, atol=tol * float(b.abs().max()))


def test_float16_autocast_under_compile_runs_torchs_forward_with_a_warning():
    torch.manual_seed(0)
    mine = rt.GRU(D, H)
    ref = rt.to_torch(mine)
    x = torch.randn(T, B, D)
    recorder = Recorder()
    compiled = torch.compile(mine, backend=recorder, fullgraph=True)
    with torch.autocast("cpu", dtype=torch.float16):
        with pytest.warns(rt.AutocastFallbackWarning, match=r"bf16 only"):
            got, _ = compiled(x)
        want, _ = ref(x)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            compiled(x)  # the compiled graph runs without tracing again: no warning
    assert recorder.count("rnnfast.layer_forward") == 0
    assert got.dtype == want.dtype
    torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_the_forward_operator_with_bf16_products_passes_opcheck():
    g = torch.Generator().manual_seed(3)

    def randn(*shape):
        return torch.randn(*shape, generator=g, requires_grad=True)

    args = ("lstm", "tanh", randn(4, 2, D), randn(2, 2), randn(2, H), randn(4 * H, D))
    args += (randn(4 * H, 2), randn(4 * H), randn(4 * H), randn(2, H), True, "bf16")
    torch.library.opcheck(torch.ops.rnnfast.layer_forward.default, args)
