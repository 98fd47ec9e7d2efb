"""Double backward through the PyTorch bridge (``create_graph=True``, a gradient penalty):
the second-order gradients of every parameter, the input and the initial states equal
torch.nn's modules' on the same weights, for each cell over both of the bridge's routes (the
plain stack and the general layer: bidirectional, PackedSequence) and unbatched input;
gradgradcheck passes; dropout between layers in training, which torch's recurrence cannot
repeat, raises an error that names the fix. A first-order backward still runs the kernels."""

from __future__ import annotations

import pytest
from conftest import import_torch

torch = import_torch()
rt = pytest.importorskip("rnnfast.torch")
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence  # noqa: E402

from rnnfast.nn.recurrent import stack as _plain_stack  # noqa: E402

CELLS = {
    "rnn-tanh": (torch.nn.RNN, rt.RNN, {}),
    "rnn-relu": (torch.nn.RNN, rt.RNN, {"nonlinearity": "relu"}),
    "gru": (torch.nn.GRU, rt.GRU, {}),
    "lstm": (torch.nn.LSTM, rt.LSTM, {}),
    "lstm-proj": (torch.nn.LSTM, rt.LSTM, {"proj_size": 2}),
}
ROUTES = {
    "plain": {},
    "plain-2layers-batch_first": {"num_layers": 2, "batch_first": True},
    "general-bidirectional": {"bidirectional": True},
    "general-2layers-bidir-batch_first": {
        "num_layers": 2,
        "bidirectional": True,
        "batch_first": True,
    },
}
D, H, T, B = 3, 4, 5, 2


def _pair(name, options):
    """torch.nn's module and the bridge's with the same float64 weights."""
    torch_cls, bridge_cls, cell_options = CELLS[name]
    torch.manual_seed(0)
    ref = torch_cls(D, H, **cell_options, **options).double()
    mine = bridge_cls(D, H, **cell_options, **options).double()
    mine.load_state_dict(ref.state_dict())
    return ref, mine


def _initial_state(module, batch_shape):
    rows = module.num_layers * (2 if module.bidirectional else 1)
    width = module.proj_size if getattr(module, "proj_size", 0) else H
    h0 = torch.randn(rows, *batch_shape, width, dtype=torch.double)
    if not isinstance(module, torch.nn.LSTM):
        return h0
    return h0, torch.randn(rows, *batch_shape, H, dtype=torch.double)


def _leaves(state):
    parts = state if isinstance(state, tuple) else (state,)
    return tuple(s.clone().requires_grad_() for s in parts)


def _penalised_grads(module, x, state, packed_lengths=None):
    """The gradients of (output**2).sum() + (d output.sum() / d inputs)**2 summed: a gradient
    penalty, which differentiates the first backward."""
    x = x.clone().requires_grad_()
    leaves = None if state is None else _leaves(state)
    hx = None if leaves is None else (leaves if len(leaves) == 2 else leaves[0])
    inp = x
    if packed_lengths is not None:
        inp = pack_padded_sequence(x, packed_lengths, enforce_sorted=False)
    out, h_n = module(inp, hx)
    if packed_lengths is not None:
        out, _ = pad_packed_sequence(out, total_length=x.shape[0])
    wrt = (x, *(leaves or ()))
    first = torch.autograd.grad(out.sum(), wrt, create_graph=True)
    h_last = h_n[0] if isinstance(h_n, tuple) else h_n
    loss = (out**2).sum() + (h_last**3).sum() + sum((g**2).sum() for g in first)
    params = list(module.parameters())
    return torch.autograd.grad(loss, [*wrt, *params])


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("name", CELLS)
def test_second_order_gradients_equal_torchs(name, route):
    options = ROUTES[route]
    ref, mine = _pair(name, options)
    torch.manual_seed(1)
    shape = (B, T, D) if options.get("batch_first") else (T, B, D)
    x = torch.randn(*shape, dtype=torch.double)
    for state in (None, _initial_state(ref, (B,))):
        expected = _penalised_grads(ref, x, state)
        got = _penalised_grads(mine, x, state)
        for e, g in zip(expected, got):
            torch.testing.assert_close(g, e, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("name", ["rnn-tanh", "gru", "lstm-proj"])
def test_second_order_gradients_of_a_packed_sequence(name):
    ref, mine = _pair(name, {"bidirectional": True})
    torch.manual_seed(2)
    x = torch.randn(T, 3, D, dtype=torch.double)
    lengths = torch.tensor([2, 5, 3])
    state = _initial_state(ref, (3,))
    expected = _penalised_grads(ref, x, state, lengths)
    got = _penalised_grads(mine, x, state, lengths)
    for e, g in zip(expected, got):
        torch.testing.assert_close(g, e, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("name", ["rnn-tanh", "lstm"])
def test_second_order_gradients_of_unbatched_input(name, bidirectional):
    ref, mine = _pair(name, {"bidirectional": bidirectional})
    torch.manual_seed(3)
    x = torch.randn(T, D, dtype=torch.double)
    state = _initial_state(ref, ())
    for e, g in zip(_penalised_grads(ref, x, state), _penalised_grads(mine, x, state)):
        torch.testing.assert_close(g, e, rtol=1e-9, atol=1e-10)


def test_the_issues_gradient_penalty():
    """The report's program: the recurrent weights' gradient was 5.52 where torch's is 6.94."""
    norms = []
    for cls in (torch.nn.RNN, rt.RNN):
        torch.manual_seed(0)
        layer = cls(3, 4).double()
        x = torch.randn(5, 2, 3, dtype=torch.double, requires_grad=True)
        out = layer(x)[0]
        (g,) = torch.autograd.grad(out.sum(), x, create_graph=True)
        ((out**2).sum() + (g**2).sum()).backward()
        norms.append(layer.weight_hh_l0.grad.norm())
    torch.testing.assert_close(norms[1], norms[0], rtol=1e-10, atol=0)


@pytest.mark.parametrize("name", CELLS)
def test_gradgradcheck(name):
    _, mine = _pair(name, {"num_layers": 2})
    torch.manual_seed(4)
    x = torch.randn(3, 2, D, dtype=torch.double, requires_grad=True)
    state = _leaves(_initial_state(mine, (2,)))

    def outputs(x, *state):
        out, h_n = mine(x, state if len(state) == 2 else state[0])
        return (out, *(h_n if isinstance(h_n, tuple) else (h_n,)))

    assert torch.autograd.gradgradcheck(outputs, (x, *state))


def test_dropout_between_layers_in_training_raises_with_the_fix():
    _, mine = _pair("gru", {"num_layers": 2, "dropout": 0.5})
    x = torch.randn(T, B, D, dtype=torch.double, requires_grad=True)
    out, _ = mine.train()(x)
    with pytest.raises(RuntimeError, match=r"dropout=0.5 between layers.*to_torch"):
        torch.autograd.grad(out.sum(), x, create_graph=True)
    # in eval mode there is no dropout: the second-order gradients are torch's
    ref, mine = _pair("gru", {"num_layers": 2, "dropout": 0.5})
    ref.eval(), mine.eval()
    for e, g in zip(_penalised_grads(ref, x, None), _penalised_grads(mine, x, None)):
        torch.testing.assert_close(g, e, rtol=1e-9, atol=1e-10)


def test_a_first_order_backward_still_runs_the_kernels(monkeypatch):
    calls = []
    original = _plain_stack.plain_backward
    monkeypatch.setattr(rt, "plain_backward", lambda *a, **k: calls.append(1) or original(*a, **k))
    _, mine = _pair("lstm", {})
    x = torch.randn(T, B, D, dtype=torch.double, requires_grad=True)
    mine(x)[0].sum().backward()
    assert calls == [1]
    x.grad = None
    out = mine(x)[0]
    torch.autograd.grad(out.sum(), x, create_graph=True)
    assert calls == [1]  # create_graph: torch's recurrence, differentiable twice
