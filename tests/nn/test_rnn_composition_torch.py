"""Stacked, bidirectional, variable-length RNN against torch.nn.RNN: forward y and h_n and every
gradient (dx, dh0, every parameter), over num_layers x bidirectional x nonlinearity x
batch_first x h0 x lengths (2 x 2 x 2 x 2 x 2 x 3 layer counts = 96 cases), in float64."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close

import rnnfast

T, B, D, H = 5, 3, 4, 6
F64 = np.float64


def _torch_reference(torch, layer, x, h0, lengths, dy, dh_n):
    """Output, h_n and gradients of torch.nn.RNN with the layer's parameters."""
    module = torch.nn.RNN(
        layer.input_size,
        layer.hidden_size,
        num_layers=layer.num_layers,
        nonlinearity=layer.nonlinearity,
        batch_first=layer.batch_first,
        bidirectional=layer.bidirectional,
        dtype=torch.float64,
    )
    module.load_state_dict({k: torch.from_numpy(v) for k, v in layer.state_dict().items()})
    xt = torch.tensor(x, requires_grad=True)
    h0t = None if h0 is None else torch.tensor(h0, requires_grad=True)
    if lengths is None:
        out, h_n = module(xt, h0t)
    else:
        packed = torch.nn.utils.rnn.pack_padded_sequence(
            xt, torch.tensor(lengths), batch_first=layer.batch_first, enforce_sorted=False
        )
        out, h_n = module(packed, h0t)
        out, _ = torch.nn.utils.rnn.pad_packed_sequence(
            out, batch_first=layer.batch_first, total_length=T
        )
    loss = (out * torch.from_numpy(dy)).sum() + (h_n * torch.from_numpy(dh_n)).sum()
    loss.backward()
    grads = {k: p.grad.numpy() for k, p in module.named_parameters()}
    return (
        out.detach().numpy(),
        h_n.detach().numpy(),
        xt.grad.numpy(),
        None if h0t is None else h0t.grad.numpy(),
        grads,
    )


@pytest.mark.parametrize("use_lengths", [False, True], ids=["full", "lengths"])
@pytest.mark.parametrize("use_h0", [False, True], ids=["noh0", "h0"])
@pytest.mark.parametrize("batch_first", [False, True], ids=["TBD", "BTD"])
@pytest.mark.parametrize("nonlinearity", ["tanh", "relu"])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
@pytest.mark.parametrize("num_layers", [1, 2, 3])
def test_matches_torch(
    torch, rng, num_layers, bidirectional, nonlinearity, batch_first, use_h0, use_lengths
):
    dirs = 2 if bidirectional else 1
    layer = rnnfast.RNN(
        D,
        H,
        num_layers=num_layers,
        nonlinearity=nonlinearity,
        batch_first=batch_first,
        bidirectional=bidirectional,
        dtype=F64,
        seed=int(rng.integers(1 << 30)),
    )
    shape = (B, T, D) if batch_first else (T, B, D)
    x = rng.standard_normal(shape)
    h0 = rng.uniform(-1, 1, (num_layers * dirs, B, H)) if use_h0 else None
    # torch cannot pack empty sequences: lengths >= 1 here (zero lengths are tested elsewhere)
    lengths = np.array([T, 2, 1 + rng.integers(T)]) if use_lengths else None
    y_shape = shape[:2] + (dirs * H,)
    dy = rng.standard_normal(y_shape)
    dh_n = rng.standard_normal((num_layers * dirs, B, H))

    y, h_n = layer(x, h0, lengths=lengths)
    dx, dh0 = layer.backward(dy, dh_n)
    ty, th_n, tdx, tdh0, tgrads = _torch_reference(torch, layer, x, h0, lengths, dy, dh_n)

    assert_close(y, ty, F64, "y")
    assert_close(h_n, th_n, F64, "h_n")
    assert_close(dx, tdx, F64, "dx")
    if use_h0:
        assert_close(dh0, tdh0, F64, "dh0")
    assert list(layer.grads) == list(tgrads)
    for k, g in tgrads.items():
        assert_close(layer.grads[k], g, F64, k)
