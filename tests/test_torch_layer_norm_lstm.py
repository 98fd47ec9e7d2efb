"""rnnfast.torch.LayerNormLSTM against torchaudio's _CustomLSTM(layer_norm=True), written here
from its equations (torchaudio is not installable beside torch 2.13): the same state_dict
keys, forward(input (T, B, D), state [h, c] or None) -> (output, [h, c]), every gradient."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import rnnfast.torch as rt  # noqa: E402

TOL = {torch.float32: 1e-5, torch.float64: 1e-10}


class CustomLSTM(torch.nn.Module):
    """torchaudio.models.rnnt._CustomLSTM with layer_norm=True, from its equations: x2g
    without bias, p2g without bias, g_norm over 4H, c_norm over H (eps 1e-5), gates i, f,
    g, o; returns (output, [h, c])."""

    def __init__(self, input_dim, hidden_dim):
        super().__init__()
        self.x2g = torch.nn.Linear(input_dim, 4 * hidden_dim, bias=False)
        self.p2g = torch.nn.Linear(hidden_dim, 4 * hidden_dim, bias=False)
        self.c_norm = torch.nn.LayerNorm(hidden_dim, eps=1e-5)
        self.g_norm = torch.nn.LayerNorm(4 * hidden_dim, eps=1e-5)
        self.hidden_dim = hidden_dim

    def forward(self, input, state):
        if state is None:
            B = input.size(1)
            h = torch.zeros(B, self.hidden_dim, dtype=input.dtype)
            c = torch.zeros(B, self.hidden_dim, dtype=input.dtype)
        else:
            h, c = state
        outputs = []
        for gates in self.x2g(input).unbind(0):
            gates = self.g_norm(gates + self.p2g(h))
            i, f, g, o = gates.chunk(4, 1)
            c = self.c_norm(f.sigmoid() * c + i.sigmoid() * g.tanh())
            h = o.sigmoid() * c.tanh()
            outputs.append(h)
        return torch.stack(outputs, dim=0), [h, c]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("T,B,D,H", [(1, 1, 3, 1), (5, 3, 4, 17), (4, 2, 6, 33)])
@pytest.mark.parametrize("with_state", [False, True])
def test_matches_custom_lstm(dtype, T, B, D, H, with_state):
    torch.manual_seed(T + H)
    ref = CustomLSTM(D, H).to(dtype)
    with torch.no_grad():  # norms away from their ones and zeros
        for p in (ref.g_norm.weight, ref.c_norm.weight):
            p.uniform_(0.5, 1.5)
        for p in (ref.g_norm.bias, ref.c_norm.bias):
            p.uniform_(-0.3, 0.3)
    ours = rt.LayerNormLSTM(D, H).to(dtype)
    assert list(ours.state_dict()) == list(ref.state_dict())
    ours.load_state_dict(ref.state_dict())
    x = torch.randn(T, B, D, dtype=dtype)
    state = [torch.randn(B, H, dtype=dtype) for _ in range(2)] if with_state else None
    results = []
    for module in (ref, ours):
        xi = x.clone().requires_grad_()
        si = None if state is None else [s.clone().requires_grad_() for s in state]
        y, (h, c) = module(xi, si)
        assert isinstance(module(xi, si)[1], list)
        gy, gh, gc = (torch.ones_like(v) * w for v, w in ((y, 0.3), (h, -0.7), (c, 1.1)))
        torch.autograd.backward([y, h, c], [gy * torch.arange(T).view(T, 1, 1), gh, gc])
        grads = [xi.grad] + ([s.grad for s in si] if si else [])
        grads += [p.grad for p in module.parameters()]
        results.append([y, h, c, *grads])
    tol = TOL[dtype]
    if H == 1 and dtype == torch.float32:
        # c's norm over one unit: (u - mean) is exactly 0 here, torch's float32 kernel leaves
        # ~1e-5 of rounding in c_norm.weight's gradient
        tol = 3e-5
    for want, got in zip(*results):
        torch.testing.assert_close(got.detach(), want.detach(), rtol=tol, atol=tol)


def test_refused_options():
    with pytest.raises(ValueError, match="layer_norm=False"):
        rt.LayerNormLSTM(3, 4, layer_norm=False)
    with pytest.raises(ValueError, match="layer_norm_epsilon"):
        rt.LayerNormLSTM(3, 4, layer_norm_epsilon=1e-3)
    assert np.isclose(rt.LayerNormLSTM(3, 4).g_norm.eps, 1e-5)
