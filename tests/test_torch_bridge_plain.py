"""rnnfast.torch's plain stack (``rnnfast.nn.recurrent.stack``'s fast path): which calls take it, and
that it reads the module's parameters as they are at every call (an optimizer's in-place step,
a replaced parameter, ``.double()``, ``flatten_parameters()``), guards what its backward reads
by torch's version check and leaves unused outputs' gradients out, all checked against
torch's own modules."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
rt = pytest.importorskip("rnnfast.torch")
from torch.nn.utils.rnn import pack_padded_sequence  # noqa: E402

D, H, P = 5, 7, 3
TORCH = {"rnn": torch.nn.RNN, "gru": torch.nn.GRU, "lstm": torch.nn.LSTM}
TOL = 1e-10  # float64


@pytest.fixture
def plain_calls(monkeypatch):
    """Counts the plain stack's forwards (the bridge's calls that take it)."""
    calls = []
    original = rt.plain_forward

    def counted(*args, **kwargs):
        calls.append(args[0].kind)
        return original(*args, **kwargs)

    monkeypatch.setattr(rt, "plain_forward", counted)
    return calls


def pair(cell, **config):
    torch.manual_seed(0)
    ref = TORCH[cell](D, H, dtype=torch.float64, **config)
    return ref, rt.from_torch(ref)


def sequence(module, steps=6, size=3, seed=1):
    g = torch.Generator().manual_seed(seed)
    shape = (size, steps, D) if module.batch_first else (steps, size, D)
    return torch.randn(shape, generator=g, dtype=torch.float64)


def outputs_and_grads(module, x, hx=None):
    module.zero_grad()
    y, state = module(x, hx)
    states = state if isinstance(state, tuple) else (state,)
    loss = (y * y.detach().cos()).sum() + sum(
        (s.sin() * (i + 1)).sum() for i, s in enumerate(states)
    )
    loss.backward()
    return [y.detach(), *(s.detach() for s in states)] + [p.grad for p in module.parameters()]


def assert_same(module, ref, x, hx=None):
    for a, b in zip(outputs_and_grads(module, x, hx), outputs_and_grads(ref, x, hx), strict=True):
        torch.testing.assert_close(a, b, rtol=TOL, atol=TOL)


PLAIN = {
    "rnn-relu": ("rnn", {"nonlinearity": "relu"}),
    "gru-2layers-batch-first": ("gru", {"num_layers": 2, "batch_first": True}),
    "lstm-proj-nobias": ("lstm", {"proj_size": P, "bias": False}),
    "lstm-2layers": ("lstm", {"num_layers": 2}),
}


@pytest.mark.parametrize("cell, config", PLAIN.values(), ids=PLAIN.keys())
def test_unidirectional_calls_without_lengths_take_the_plain_stack(cell, config, plain_calls):
    ref, mine = pair(cell, **config)
    x = sequence(mine)
    assert_same(mine, ref, x)
    with torch.no_grad():
        torch.testing.assert_close(mine(x)[0], ref(x)[0], rtol=TOL, atol=TOL)
    unbatched = x[0] if mine.batch_first else x[:, 0]
    torch.testing.assert_close(mine(unbatched)[0], ref(unbatched)[0], rtol=TOL, atol=TOL)
    kind = {"rnn": "elman"}.get(cell, cell)
    assert plain_calls == [kind] * 3


def test_what_the_plain_stack_does_not_run_takes_the_general_layer(plain_calls):
    ref, mine = pair("lstm", bidirectional=True)
    assert_same(mine, ref, sequence(mine))
    ref, mine = pair("gru")
    packed = pack_padded_sequence(sequence(mine), torch.tensor([6, 2, 4]), enforce_sorted=False)
    mine(packed)[0].data.sum().backward()
    _, mine = pair("rnn", num_layers=2, dropout=0.5)  # training: masks between the layers
    mine(sequence(mine))
    mine.eval()  # no masks: plain again
    mine(sequence(mine))
    with pytest.warns(UserWarning, match="dropout"):  # torch's: one layer, nothing to act on
        _, mine = pair("gru", dropout=0.5)
    mine(sequence(mine))
    assert plain_calls == ["elman", "gru"]


@pytest.mark.parametrize("cell", TORCH)
def test_the_parameters_are_read_as_they_are_at_every_call(cell):
    ref, mine = pair(cell, num_layers=2)
    x = sequence(mine)
    assert_same(mine, ref, x)
    # an optimizer's in-place step on both sides
    for module in (ref, mine):
        torch.optim.SGD(module.parameters(), lr=0.5).step()
    assert_same(mine, ref, x)
    # a parameter replaced, and one's data swapped under the same Parameter
    for module in (ref, mine):
        module.weight_hh_l1 = torch.nn.Parameter(module.weight_hh_l1.detach() * 0.5)
        module.bias_ih_l0.data = module.bias_ih_l0.detach() + 1.0
        module.flatten_parameters()
    assert_same(mine, ref, x)
    # float32 and back to float64: new parameters each time
    mine.float()
    ref.float()
    y32 = mine(x.float())[0]
    torch.testing.assert_close(y32, ref(x.float())[0], rtol=3e-5, atol=3e-5)
    mine.double()
    ref.double()
    assert_same(mine, ref, x)


@pytest.mark.parametrize("cell", TORCH)
def test_an_optimizer_step_between_forward_and_backward_raises_as_torch(cell):
    for module in pair(cell):
        y, _ = module(sequence(module))
        with torch.no_grad():
            module.weight_hh_l0.add_(0.01)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()


@pytest.mark.parametrize("bidirectional", [False, True], ids=["plain", "general"])
@pytest.mark.parametrize("cell", TORCH)
def test_an_in_place_change_of_the_output_leaves_the_gradients_as_torch(cell, bidirectional):
    """Backward reads the kernels' own output: the caller's is a copy (as torch's float64
    modules, an in-place activation after the RNN keeps the gradients right)."""
    ref, mine = pair(cell, bidirectional=bidirectional)
    x = sequence(mine)
    got = []
    for module in (mine, ref):
        module.zero_grad()
        y, _ = module(x)
        torch.nn.functional.relu(y, inplace=True).sum().backward()
        got.append([p.grad for p in module.parameters()])
    for a, b in zip(*got, strict=True):
        torch.testing.assert_close(a, b, rtol=TOL, atol=TOL)


@pytest.mark.parametrize("used", ["y", "h_n", "c_n"])
def test_a_loss_of_one_output_alone(used):
    """The outputs a loss does not read send no gradient (None, not zeros) to the kernels."""
    ref, mine = pair("lstm", num_layers=2, batch_first=True)
    x = sequence(mine)
    got = []
    for module in (mine, ref):
        module.zero_grad()
        xx = x.clone().requires_grad_(True)
        y, (h_n, c_n) = module(xx)
        {"y": y, "h_n": h_n, "c_n": c_n}[used].sin().sum().backward()
        got.append([xx.grad] + [p.grad for p in module.parameters()])
    for a, b in zip(*got, strict=True):
        torch.testing.assert_close(a, b, rtol=TOL, atol=TOL)


def test_the_layers_weights_follow_the_parameter_names():
    """The positions of each layer's weights among the module's flat weights are kept per
    list of names: another list (here the same weights in reverse) is read afresh."""
    ref, mine = pair("lstm", num_layers=2, proj_size=P)
    x = sequence(mine)
    assert_same(mine, ref, x)
    order = list(reversed(range(len(mine._flat_weights_names))))
    mine._flat_weights_names = [mine._flat_weights_names[i] for i in order]
    mine._flat_weights = [mine._flat_weights[i] for i in order]
    assert_same(mine, ref, x)
