"""The dtypes rnnfast.torch's outputs and gradients take under ``torch.autocast("cpu",
dtype=torch.bfloat16)`` are torch's own modules' under the same autocast, case by case:
each cell (proj_size too), float32 and bfloat16 input, no state, float32, bfloat16 and mixed
states, padded and packed input, unbatched, and torch's oneDNN LSTM switched off. The rules
are written out in ``rnnfast._torch_autocast``; this is where they meet torch."""

from __future__ import annotations

import itertools

import pytest
from bf16_paths import bf16_emulated  # noqa: F401 (the fixture below)
from conftest import import_torch

torch = import_torch()
rt = pytest.importorskip("rnnfast.torch")
from torch.nn.utils.rnn import pack_padded_sequence  # noqa: E402

pytestmark = [
    pytest.mark.filterwarnings("ignore:LSTM with projections:UserWarning"),
    pytest.mark.usefixtures("bf16_emulated"),  # the dtypes do not depend on the path
]

F32, BF16 = torch.float32, torch.bfloat16
D, H, T, B = 3, 4, 5, 2
CELLS = {
    "rnn": (torch.nn.RNN, {}),
    "gru": (torch.nn.GRU, {}),
    "lstm": (torch.nn.LSTM, {}),
    "lstm-proj": (torch.nn.LSTM, {"proj_size": 2}),
}
# (h_0's dtype, c_0's dtype), None for no state
STATES = [None, (F32, F32), (BF16, BF16), (BF16, F32), (F32, BF16)]


def modules(cell):
    torch_cls, options = CELLS[cell]
    torch.manual_seed(0)
    ref = torch_cls(D, H, num_layers=2, **options)
    return ref, rt.from_torch(ref)


def state(module, dtypes, batch_shape):
    if dtypes is None:
        return None
    width = getattr(module, "proj_size", 0) or H
    h0 = torch.randn(2, *batch_shape, width).to(dtypes[0]).requires_grad_()
    if not isinstance(module, torch.nn.LSTM):
        return h0
    return h0, torch.randn(2, *batch_shape, H).to(dtypes[1]).requires_grad_()


def dtypes_of(module, x, hx, packed):
    """The dtypes of the call's outputs and of the gradients of x and the states."""
    leaves = [x, *([] if hx is None else hx if isinstance(hx, tuple) else [hx])]
    inp = pack_padded_sequence(x, torch.tensor([T, 3])) if packed else x
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y, state = module(inp, hx)
    outputs = [y.data if packed else y, *(state if isinstance(state, tuple) else [state])]
    grads = torch.autograd.grad(sum(o.float().sum() for o in outputs), leaves)
    return [o.dtype for o in outputs], [g.dtype for g in grads]


CASES = [
    (cell, dtype, states, form)
    for cell, dtype, states, form in itertools.product(
        CELLS, [F32, BF16], STATES, ["padded", "packed", "unbatched"]
    )
    # the RNN and the GRU have one state: its two dtypes, h_0's, are the cases above
    if cell.startswith("lstm") or states is None or states[0] == states[1]
]


def case_id(case):
    cell, dtype, states, form = case
    hx = "no-hx" if states is None else "hx-" + "-".join(str(d)[6:] for d in states)
    return f"{cell}-{str(dtype)[6:]}-{hx}-{form}"


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_dtypes_are_torchs(case):
    cell, dtype, states, form = case
    ref, mine = modules(cell)
    batch_shape = () if form == "unbatched" else (B,)
    x = torch.randn(T, *batch_shape, D).to(dtype).requires_grad_()
    hx = state(ref, states, batch_shape)
    packed = form == "packed"
    assert dtypes_of(mine, x, hx, packed) == dtypes_of(ref, x, hx, packed)


@pytest.mark.parametrize("cell", ["lstm", "lstm-proj"])
@pytest.mark.parametrize("dtype", [F32, BF16], ids=["f32", "bf16"])
def test_dtypes_are_torchs_without_onednn(cell, dtype):
    """torch's padded LSTM leaves oneDNN (whose bf16 outputs are all bfloat16) when it is off."""
    ref, mine = modules(cell)
    x = torch.randn(T, B, D).to(dtype).requires_grad_()
    hx = state(ref, (BF16, F32), (B,))
    # (torch.backends.mkldnn.flags() warns about TF32 on Intel GPUs: the switch alone)
    before, torch.backends.mkldnn.enabled = torch.backends.mkldnn.enabled, False
    try:
        assert dtypes_of(mine, x, hx, False) == dtypes_of(ref, x, hx, False)
        assert dtypes_of(mine, x, None, False) == dtypes_of(ref, x, None, False)
    finally:
        torch.backends.mkldnn.enabled = before
