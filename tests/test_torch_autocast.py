"""rnnfast.torch under ``torch.autocast("cpu", dtype=torch.bfloat16)``: the modules run
rnnfast's kernels with bf16 products (forward and backward, the backward outside the autocast
block), and their outputs and every gradient agree with torch.nn's modules under the same
autocast: the same dtypes, and values that both stay within one bound of torch's float32
result (the bound is derived below). Every bf16 path: emulated (any CPU) and each native one this CPU runs.

Bounds. bf16 keeps 8 significant bits: unit roundoff u = 2**-8. A product of two rounded
operands is off by at most 2u + u**2 relative, and rnnfast sums it in float32 (2**-24, small
beside u), so one GEMM's error is at most ~2u times the sum of its terms' magnitudes, which
for these small, random-signed problems is of the result's scale. A step's pre-activation is
two such GEMMs (input and recurrent: 2 x 2u); the gates and activations have slopes <= 1; the
error a step carries into the next is damped by the recurrent weights (default init, norm < 1
on these sizes), a geometric sum that at most doubles it: 8u of the output's scale (torch's
autocast adds u/2 for rounding its bf16 outputs, inside the factor). A gradient chains twice
the GEMMs (dh back through W_hh^T, then dW = sum over steps of dh x^T, whose T B terms are
summed in float32 but each carries the forward's error too): 16u of the gradient's scale.
Scale is the float32 result's largest magnitude (the error of a sum is relative to its terms,
not to a result that cancels; conftest's rule). Measured: outputs at most ~3u off for torch
and ~1.5u for rnnfast on these cases, gradients ~4.5u and ~2.5u.

The gradient bound assumes an activation with a continuous slope. relu's jumps at 0: a
pre-activation within ~u of 0 takes the other branch in bf16 than in float32 and moves a whole
term of a gradient (torch's own autocast was 94u off on one case here, rnnfast 54u on
another). relu's outputs are bounded as the others' (relu is 1-Lipschitz); its gradients are
held to the dtypes and to being finite (the backward kernels are tanh's but for the slope)."""

from __future__ import annotations

import pytest
from bf16_paths import BF16_UNIT_ROUNDOFF as U
from bf16_paths import bf16_path  # noqa: F401 (the fixture below)
from conftest import import_torch

torch = import_torch()
rt = pytest.importorskip("rnnfast.torch")
from torch.nn.utils.rnn import pack_padded_sequence  # noqa: E402

# torch's own LSTM with projections under autocast says it leaves oneDNN (nothing of rnnfast's)
pytestmark = [
    pytest.mark.filterwarnings("ignore:LSTM with projections:UserWarning"),
    pytest.mark.usefixtures("bf16_path"),  # emulated, and each native path this CPU runs
]

FORWARD_BOUND = 8 * U
GRADIENT_BOUND = 16 * U
D, H, T, B = 5, 8, 7, 3

CELLS = {
    "rnn-tanh": (torch.nn.RNN, {}),
    "rnn-relu": (torch.nn.RNN, {"nonlinearity": "relu"}),
    "gru": (torch.nn.GRU, {}),
    "lstm": (torch.nn.LSTM, {}),
    "lstm-proj": (torch.nn.LSTM, {"proj_size": 3}),
}
# the plain stack's route (one direction, no lengths) and the general layer's (bidirectional)
CONFIGS = {
    "plain": {},
    "2layers-batch_first": {"num_layers": 2, "batch_first": True},
    "bidirectional-2layers": {"num_layers": 2, "bidirectional": True},
}


def modules(cell, **config):
    """torch's float32 module and the bridge's with the same weights."""
    torch_cls, options = CELLS[cell]
    torch.manual_seed(0)
    ref = torch_cls(D, H, **options, **config)
    return ref, rt.from_torch(ref)


def initial_state(module, batch_shape=(B,)):
    rows = module.num_layers * (2 if module.bidirectional else 1)
    width = getattr(module, "proj_size", 0) or H
    g = torch.Generator().manual_seed(4)
    h0 = torch.randn(rows, *batch_shape, width, generator=g).requires_grad_()
    if not isinstance(module, torch.nn.LSTM):
        return h0
    return h0, torch.randn(rows, *batch_shape, H, generator=g).requires_grad_()


def flat(state):
    return list(state) if isinstance(state, tuple) else [state]


def run(module, x, hx, autocast):
    """The outputs (output, h_n[, c_n]) and the gradients of a loss reading all of them (of x,
    the given states and every parameter), the backward outside the autocast block."""
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        y, state = module(x, hx)
    outputs = [y, *flat(state)]
    g = torch.Generator().manual_seed(7)
    loss = sum((o.float() * torch.randn(o.shape, generator=g)).sum() for o in outputs)
    leaves = [x, *([] if hx is None else flat(hx)), *module.parameters()]
    grads = torch.autograd.grad(loss, leaves)
    return outputs, grads


def error(got, want):
    """The largest difference, in units of the float32 result's scale."""
    got, want = got.detach().double(), want.detach().double()
    return float((got - want).abs().max()) / max(float(want.abs().max()), 1e-30)


def assert_within(got, want, bound, what):
    assert error(got, want) <= bound, f"{what}: {error(got, want) / U:.2f}u > {bound / U:.0f}u"


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("given_state", [False, True], ids=["no-hx", "hx"])
def test_outputs_and_gradients_match_torch_autocast(cell, config, given_state):
    ref, mine = modules(cell, **CONFIGS[config])
    shape = (B, T, D) if ref.batch_first else (T, B, D)
    x = torch.randn(shape, generator=torch.Generator().manual_seed(1)).requires_grad_()
    hx = initial_state(ref) if given_state else None
    want, want_grads = run(ref, x, hx, autocast=False)  # float32, the yardstick
    theirs, their_grads = run(ref, x, hx, autocast=True)
    ours, our_grads = run(mine, x, hx, autocast=True)
    assert [o.dtype for o in ours] == [o.dtype for o in theirs]
    assert [g.dtype for g in our_grads] == [g.dtype for g in their_grads]
    for i, (a, b, w) in enumerate(zip(ours, theirs, want)):
        assert_within(b, w, FORWARD_BOUND, f"torch's output {i}")
        assert_within(a, w, FORWARD_BOUND, f"rnnfast's output {i}")
    # bf16 products did run: float32 kernels would be ~1e-6 off, bf16 ones ~u
    assert max(error(a, w) for a, w in zip(our_grads, want_grads)) > U / 16
    if cell == "rnn-relu":  # no bound holds across relu's jump (see the module's documentation)
        assert all(bool(g.isfinite().all()) for g in our_grads)
        return
    for i, (a, b, w) in enumerate(zip(our_grads, their_grads, want_grads)):
        assert_within(b, w, GRADIENT_BOUND, f"torch's gradient {i}")
        assert_within(a, w, GRADIENT_BOUND, f"rnnfast's gradient {i}")


@pytest.mark.parametrize("cell", ["rnn-tanh", "gru", "lstm"])
def test_unbatched_input_matches_torch_autocast(cell):
    ref, mine = modules(cell)
    x = torch.randn(T, D, generator=torch.Generator().manual_seed(1)).requires_grad_()
    want, want_grads = run(ref, x, None, autocast=False)
    theirs, _ = run(ref, x, None, autocast=True)
    ours, our_grads = run(mine, x, None, autocast=True)
    assert [o.dtype for o in ours] == [o.dtype for o in theirs]
    for a, w in zip(ours, want):
        assert_within(a, w, FORWARD_BOUND, "output")
    for a, w in zip(our_grads, want_grads):
        assert_within(a, w, GRADIENT_BOUND, "gradient")


@pytest.mark.parametrize("input_dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("cell", ["rnn-tanh", "gru", "lstm", "lstm-proj"])
def test_packed_sequence_matches_torch_autocast(cell, input_dtype):
    ref, mine = modules(cell, bidirectional=True)
    padded = torch.randn(T, B, D, generator=torch.Generator().manual_seed(1)).to(input_dtype)
    lengths = torch.tensor([4, T, 2])  # not sorted: enforce_sorted=False

    def run_packed(module, x, autocast):
        packed = pack_padded_sequence(x, lengths, enforce_sorted=False)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            y, state = module(packed)
        outputs = [y.data, *flat(state)]
        g = torch.Generator().manual_seed(7)
        loss = sum((o.float() * torch.randn(o.shape, generator=g)).sum() for o in outputs)
        return outputs, torch.autograd.grad(loss, [x, *module.parameters()])

    x = padded.requires_grad_()
    want, want_grads = run_packed(ref, padded.float().detach().requires_grad_(), False)
    theirs, their_grads = run_packed(ref, x, True)
    ours, our_grads = run_packed(mine, x, True)
    assert [o.dtype for o in ours] == [o.dtype for o in theirs]
    assert [g.dtype for g in our_grads] == [g.dtype for g in their_grads]
    for a, w in zip(ours, want):
        assert_within(a, w, FORWARD_BOUND, "output")
    for a, w in zip(our_grads, want_grads):
        assert_within(a, w, GRADIENT_BOUND, "gradient")
