"""rnnfast.torch.GRU and rnnfast.torch.LSTM: drop-in torch.nn.GRU / torch.nn.LSTM on rnnfast's
kernels, checked against torch's own modules (outputs, the final states and the gradients of
the input, the initial states and every parameter) across layers, directions, batch_first,
PackedSequence and proj_size; by gradcheck; with the kernels' calls counted, so that a
fallback to torch's own forward cannot pass; and on the seed's decoder (nn.Embedding ->
GRU -> nn.Linear with teacher forcing) trained a few steps."""

from __future__ import annotations

import random
import re
import types

import numpy as np
import pytest

torch = pytest.importorskip("torch")
rt = pytest.importorskip("rnnfast.torch")
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence  # noqa: E402

from rnnfast import _core  # noqa: E402
from rnnfast.nn.recurrent import cells  # noqa: E402

# torch's own float32 LSTM with proj_size (the reference) says it leaves oneDNN
pytestmark = pytest.mark.filterwarnings("ignore:LSTM with projections is not supported")

D, H, P = 5, 7, 3
TOL = {torch.float32: 3e-5, torch.float64: 1e-10}

CELLS = {
    "gru": (torch.nn.GRU, rt.GRU, {}),
    "lstm": (torch.nn.LSTM, rt.LSTM, {}),
    "lstm-proj": (torch.nn.LSTM, rt.LSTM, {"proj_size": P}),
}
SHAPES = {
    "1layer": {},
    "2layers-bidir": {"num_layers": 2, "bidirectional": True},
}


@pytest.fixture
def kernel_calls(monkeypatch):
    """Counts the gated kernels' calls (forward and backward per cell, one per layer and
    direction) made through the rnnfast layers' cells or the bridge's plain stack
    (the stack runner's fast path, ``rnnfast.nn.recurrent.stack``: its cells call ``_core``)."""
    calls = {}
    for spec in (cells.GRUSpec, cells.LSTMSpec):
        for attr in ("_forward_function", "_backward_function"):
            original = getattr(spec, attr)
            key = f"{spec.torch_name}.{attr.split('_')[1]}"
            calls[key] = 0

            def counted(*args, _original=original, _key=key, **kwargs):
                calls[_key] += 1
                return _original(*args, **kwargs)

            monkeypatch.setattr(spec, attr, staticmethod(counted))
    core = types.SimpleNamespace(**vars(_core))
    for pass_ in ("forward", "backward"):
        original = getattr(_core, f"gated_{pass_}")

        def counted_core(cell, *args, _original=original, _pass=pass_, **kwargs):
            calls[f"{cell.upper()}.{_pass}"] += 1
            return _original(cell, *args, **kwargs)

        setattr(core, f"gated_{pass_}", counted_core)
    monkeypatch.setattr(cells, "_core", core)
    return calls


def pair(cell, config, dtype, seed=0):
    torch_cls, bridge_cls, extra = CELLS[cell]
    torch.manual_seed(seed)
    ref = torch_cls(D, H, dtype=dtype, **extra, **config)
    mine = rt.from_torch(ref)
    assert type(mine) is bridge_cls
    if config.get("dropout"):
        ref.eval()
        mine.eval()
    return ref, mine


def is_lstm(module):
    return isinstance(module, torch.nn.LSTM)


def states(module, size, dtype, seed=2, batched=True):
    """The initial state of ``module`` for a batch of ``size``: h0, or the LSTM's (h0, c0)."""
    g = torch.Generator().manual_seed(seed)
    rows = module.num_layers * (2 if module.bidirectional else 1)
    lead = (rows, size) if batched else (rows,)
    width = module.proj_size if getattr(module, "proj_size", 0) else module.hidden_size
    h0 = torch.randn(*lead, width, generator=g, dtype=dtype)
    if not is_lstm(module):
        return h0
    return h0, torch.randn(*lead, module.hidden_size, generator=g, dtype=dtype)


def as_list(state):
    return list(state) if isinstance(state, tuple) else [state]


def loss_of(y, state):
    """A loss that reaches every output element and every final state with its own weight."""
    data = y.data if hasattr(y, "batch_sizes") else y
    w = torch.linspace(-1, 1, data.numel(), dtype=data.dtype).reshape(data.shape)
    loss = (data * w).sum()
    for i, s in enumerate(as_list(state)):
        loss = loss + (s.sin() * (0.5 + i)).sum()
    return loss


def run(module, x, hx, lengths=None, enforce_sorted=False, x_grad=True):
    """Forward and backward: (output (padded), final states, dx, d initial states, grads)."""
    module.zero_grad()
    x = x.detach().clone().requires_grad_(x_grad)
    if hx is not None:
        hx = [s.detach().clone().requires_grad_(True) for s in as_list(hx)]
    arg = None if hx is None else (tuple(hx) if is_lstm(module) else hx[0])
    if lengths is None:
        y, state = module(x, arg)
    else:
        packed = pack_padded_sequence(
            x, lengths, batch_first=module.batch_first, enforce_sorted=enforce_sorted
        )
        out, state = module(packed, arg)
        assert isinstance(out, torch.nn.utils.rnn.PackedSequence)
        assert torch.equal(out.batch_sizes, packed.batch_sizes)
        y, out_lengths = pad_packed_sequence(out, batch_first=module.batch_first)
        assert torch.equal(out_lengths, lengths)
    assert isinstance(state, tuple) == is_lstm(module)
    loss_of(y, state).backward()
    grads = {name: p.grad.clone() for name, p in module.named_parameters()}
    d_states = None if hx is None else [s.grad for s in hx]
    return y.detach(), [s.detach() for s in as_list(state)], x.grad, d_states, grads


def assert_close(a, b, tol, name):
    assert a.shape == b.shape and a.dtype == b.dtype, name
    scale = max(1.0, float(b.abs().max())) if b.numel() else 1.0
    torch.testing.assert_close(a, b, rtol=tol, atol=tol * scale, msg=name)


def assert_same(mine, ref, dtype):
    tol = TOL[dtype]
    y, state, dx, d_states, grads = mine
    y_r, state_r, dx_r, d_states_r, grads_r = ref
    assert_close(y, y_r, tol, "output")
    assert len(state) == len(state_r)
    for i, (a, b) in enumerate(zip(state, state_r)):
        assert_close(a, b, tol, f"state[{i}]")
    if dx_r is None:
        assert dx is None
    else:
        assert_close(dx, dx_r, tol, "dx")
    if d_states_r is None:
        assert d_states is None
    else:
        assert len(d_states) == len(d_states_r)
        for i, (a, b) in enumerate(zip(d_states, d_states_r)):
            assert a is not None, f"d initial state[{i}]"
            assert_close(a, b, tol, f"d initial state[{i}]")
    assert grads.keys() == grads_r.keys()
    for name in grads:
        assert_close(grads[name], grads_r[name], tol, name)


def sequence(module, steps, size, dtype, seed=1):
    g = torch.Generator().manual_seed(seed)
    shape = (size, steps, D) if module.batch_first else (steps, size, D)
    return torch.randn(shape, generator=g, dtype=dtype)


@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
@pytest.mark.parametrize("batch_first", [False, True], ids=["time-major", "batch-first"])
@pytest.mark.parametrize("packed", [False, True], ids=["padded", "packed"])
def test_matches_torch_outputs_and_every_gradient(cell, shape, batch_first, packed, kernel_calls):
    dtype = torch.float64
    ref, mine = pair(cell, {**shape, "batch_first": batch_first}, dtype)
    x = sequence(ref, 6, 4, dtype)
    lengths = torch.tensor([3, 6, 1, 4]) if packed else None  # enforce_sorted=False
    for hx in (states(ref, 4, dtype), None):
        assert_same(run(mine, x, hx, lengths), run(ref, x, hx, lengths), dtype)
    name = CELLS[cell][0].__name__
    layers = shape.get("num_layers", 1) * (2 if shape.get("bidirectional") else 1)
    # two forwards and two backwards on rnnfast's kernels (one call per layer and direction;
    # torch's own modules do not call them)
    assert kernel_calls[f"{name}.forward"] == 2 * layers
    assert kernel_calls[f"{name}.backward"] == 2 * layers


@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("enforce_sorted", [False, True], ids=["unsorted", "sorted"])
def test_float32_and_packed_sorted(cell, enforce_sorted):
    dtype = torch.float32
    ref, mine = pair(cell, {"num_layers": 2, "bidirectional": True, "batch_first": True}, dtype)
    x = sequence(ref, 6, 4, dtype)
    hx = states(ref, 4, dtype)
    assert_same(run(mine, x, hx), run(ref, x, hx), dtype)
    lengths = torch.tensor([6, 4, 3, 1]) if enforce_sorted else torch.tensor([3, 6, 1, 4])
    got = run(mine, x, hx, lengths, enforce_sorted)
    assert_same(got, run(ref, x, hx, lengths, enforce_sorted), dtype)


@pytest.mark.parametrize("cell", CELLS)
def test_no_bias_and_an_input_that_needs_no_gradient(cell, kernel_calls):
    ref, mine = pair(cell, {"bias": False, "num_layers": 2}, torch.float64)
    x = sequence(ref, 5, 3, torch.float64)
    hx = states(ref, 3, torch.float64)
    got = run(mine, x, hx, x_grad=False)
    assert got[2] is None
    assert_same(got, run(ref, x, hx, x_grad=False), torch.float64)
    assert kernel_calls[f"{CELLS[cell][0].__name__}.backward"] == 2


@pytest.mark.parametrize("cell", CELLS)
def test_unbatched_input(cell, kernel_calls):
    ref, mine = pair(cell, {"num_layers": 2, "bidirectional": True}, torch.float64)
    x = torch.randn(5, D, dtype=torch.float64)
    hx = states(ref, None, torch.float64, batched=False)
    assert_same(run(mine, x, hx), run(ref, x, hx), torch.float64)
    assert_same(run(mine, x, None), run(ref, x, None), torch.float64)
    assert kernel_calls[f"{CELLS[cell][0].__name__}.forward"] == 8


@pytest.mark.parametrize("cell", CELLS)
def test_gradcheck(cell):
    torch.manual_seed(0)
    _, bridge_cls, extra = CELLS[cell]
    module = bridge_cls(
        3,
        4,
        num_layers=2,
        bidirectional=True,
        dtype=torch.float64,
        **{k: min(v, 2) for k, v in extra.items()},
    )
    x = torch.randn(4, 2, 3, dtype=torch.float64, requires_grad=True)
    h = [s.requires_grad_(True) for s in as_list(states(module, 2, torch.float64))]
    params = list(module.parameters())
    names = [n for n, _ in module.named_parameters()]
    lstm = is_lstm(module)

    def f(x, *rest):
        hx, weights = rest[: len(h)], rest[len(h) :]
        state = dict(zip(names, weights))
        arg = tuple(hx) if lstm else hx[0]
        y, final = torch.func.functional_call(module, state, (x, arg))
        return (y, *as_list(final))

    assert torch.autograd.gradcheck(f, (x, *h, *params), eps=1e-6, atol=1e-7)


@pytest.mark.parametrize("cell", CELLS)
def test_is_torchs_module_with_its_parameters_flatten_and_double(cell, kernel_calls):
    torch_cls, bridge_cls, extra = CELLS[cell]
    torch.manual_seed(3)
    ref = torch_cls(D, H, 2, True, True, 0.0, True, **extra)  # torch's positional signature
    torch.manual_seed(3)
    mine = bridge_cls(D, H, 2, True, True, 0.0, True, **extra)
    assert isinstance(mine, torch_cls)
    assert list(mine.state_dict()) == list(ref.state_dict())
    for name, value in ref.state_dict().items():
        assert torch.equal(mine.state_dict()[name], value)  # torch's initialisation
    assert repr(mine) == repr(ref)
    plain = rt.to_torch(mine)
    assert type(plain) is torch_cls
    mine.flatten_parameters()
    mine = mine.double()
    ref = ref.double()
    assert type(mine) is bridge_cls and next(mine.parameters()).dtype == torch.float64
    x = torch.randn(2, 4, D, dtype=torch.float64)
    assert_same(run(mine, x, None), run(ref, x, None), torch.float64)
    assert kernel_calls[f"{torch_cls.__name__}.forward"] == 4  # 2 layers x 2 directions
    # the layer's cache follows the dtype: float32 again runs on a float32 rnnfast layer
    mine.float()
    ref.float()
    y, _ = mine(x.float())
    torch.testing.assert_close(y, ref(x.float())[0], rtol=3e-5, atol=3e-5)


@pytest.mark.parametrize("bidirectional", [False, True], ids=["plain", "general"])
def test_parameters_are_handed_to_the_kernels_without_copies(bidirectional):
    config = {"num_layers": 2, "bidirectional": bidirectional}
    ref, mine = pair("lstm-proj", config, torch.float32)
    x = sequence(ref, 4, 2, torch.float32).requires_grad_(True)
    y, (h_n, c_n) = mine(x, states(ref, 2, torch.float32))
    if bidirectional:  # the general layer's parameters
        params = next(iter(mine._rnnfast_layers.values()))._params
    else:  # the plain stack's (rnnfast.nn.recurrent.stack's fast path), kept by its autograd node
        names, node = mine._flat_weights_names, y.grad_fn
        params = {
            names[i]: a
            for where, arrays in zip(node.layout, node.arrays)
            for i, a in zip(where, arrays)
            if i is not None
        }
    assert params.keys() == dict(mine.named_parameters()).keys()
    for name, p in mine.named_parameters():
        assert np.shares_memory(params[name], p.detach().numpy()), name
    (y.sum() + h_n.sum() + c_n.sum()).backward()


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_training_dropout_follows_torch_seed_and_eval_removes_it(cell):
    _, bridge_cls, _ = CELLS[cell]
    torch.manual_seed(0)
    mine = bridge_cls(D, H, num_layers=3, dropout=0.5)
    x = sequence(mine, 6, 4, torch.float32)
    torch.manual_seed(7)
    a, _ = mine(x)
    torch.manual_seed(7)
    b, _ = mine(x)
    torch.manual_seed(8)
    c, _ = mine(x)
    assert torch.equal(a, b) and not torch.equal(a, c)
    mine.eval()
    ref = rt.to_torch(mine).eval()
    torch.testing.assert_close(mine(x)[0], ref(x)[0], rtol=3e-5, atol=3e-5)
    mine.train()
    torch.manual_seed(1)
    xx = x.clone().requires_grad_(True)
    y, _ = mine(xx)
    y.sum().backward()
    assert torch.isfinite(xx.grad).all() and xx.grad.abs().sum() > 0


@pytest.mark.parametrize("cell", CELLS)
def test_no_grad_forward(cell):
    ref, mine = pair(cell, {"num_layers": 2, "bidirectional": True}, torch.float64)
    x = sequence(ref, 5, 3, torch.float64)
    hx = states(ref, 3, torch.float64)
    with torch.no_grad():
        y, state = mine(x, hx)
        y_r, state_r = ref(x, hx)
    torch.testing.assert_close(y, y_r, rtol=1e-10, atol=1e-10)
    for a, b in zip(as_list(state), as_list(state_r)):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("changed", [0, 1], ids=["h0", "c0"])
def test_an_in_place_change_of_a_state_before_backward_raises_as_torch(changed):
    for module in pair("lstm", {}, torch.float64):
        x = sequence(module, 4, 2, torch.float64)
        hx = states(module, 2, torch.float64)
        y, (h_n, c_n) = module(x.requires_grad_(True), hx)
        with torch.no_grad():
            hx[changed].add_(1.0)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            (y.sum() + h_n.sum() + c_n.sum()).backward()


def test_bad_shapes_raise_as_torch():
    for cell in ("gru", "lstm"):
        ref, mine = pair(cell, {}, torch.float32)
        for bad in (
            torch.randn(2, 3, 4, D),
            torch.randn(4, 2, D + 1),
        ):
            with pytest.raises((ValueError, RuntimeError)) as expected:
                ref(bad)
            with pytest.raises(type(expected.value), match=re.escape(str(expected.value))):
                mine(bad)
    _, lstm = pair("lstm", {}, torch.float32)
    with pytest.raises(RuntimeError, match="Expected hidden\\[0\\] size"):
        lstm(torch.randn(4, 2, D), (torch.randn(1, 3, H), torch.randn(1, 2, H)))
    with pytest.raises(RuntimeError, match="hx and cx should also be 2-D"):
        lstm(torch.randn(4, D), (torch.randn(1, 2, H), torch.randn(1, 2, H)))


def test_convert_swaps_gru_and_lstm_in_place_and_trains_as_torch(kernel_calls):
    class Mine(torch.nn.LSTM):  # a subclass: its own forward, left as it is
        pass

    def model():
        torch.manual_seed(0)
        return torch.nn.Sequential(
            torch.nn.Linear(D, D),
            torch.nn.GRU(D, H, batch_first=True, num_layers=2),
            torch.nn.LSTM(H, H, batch_first=True, proj_size=P),
            Mine(P, 4, batch_first=True),
        )

    ref, net = model(), model()
    gru, lstm = net[1], net[2]
    params_before = [id(p) for p in net.parameters()]
    assert rt.convert(net) is net
    assert type(net[1]) is rt.GRU and net[1] is gru
    assert type(net[2]) is rt.LSTM and net[2] is lstm
    assert type(net[3]) is Mine
    assert [id(p) for p in net.parameters()] == params_before
    x = torch.randn(3, 6, D)
    target = torch.randn(3, 6, 4)

    def forward(module, x):
        y, _ = module[1](module[0](x))
        y, _ = module[2](y)
        return module[3](y)[0]

    for module in (ref, net):
        opt = torch.optim.SGD(module.parameters(), lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            torch.nn.functional.mse_loss(forward(module, x), target).backward()
            opt.step()
    for (name, a), (_, b) in zip(ref.named_parameters(), net.named_parameters()):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6, msg=name)
    assert kernel_calls["GRU.forward"] == 6 and kernel_calls["GRU.backward"] == 6
    assert kernel_calls["LSTM.forward"] == 3 and kernel_calls["LSTM.backward"] == 3


def test_tensors_the_kernels_do_not_take_run_torch(kernel_calls):
    torch.manual_seed(0)
    mine = rt.GRU(D, H).to(torch.bfloat16)
    ref = rt.to_torch(mine)
    x = torch.randn(4, 2, D, dtype=torch.bfloat16)
    try:
        expected = ref(x)
    except RuntimeError as exc:  # a torch build without bfloat16 RNNs on the CPU
        pytest.skip(str(exc))
    got = mine(x)
    assert torch.equal(got[0], expected[0]) and torch.equal(got[1], expected[1])
    assert kernel_calls["GRU.forward"] == 0


# ---- the seed's decoder: nn.Embedding -> GRU -> nn.Linear with teacher forcing ------------

V, E, HD = 11, 6, 16


class Decoder(torch.nn.Module):
    def __init__(self, gru_class):
        super().__init__()
        self.embed = torch.nn.Embedding(V, E)
        self.gru = gru_class(E, HD, batch_first=True)
        self.out = torch.nn.Linear(HD, V)

    def forward(self, h, targets, teacher_forcing, rng):
        """Step by step from a start token; each next input is the target (teacher forcing,
        with probability ``teacher_forcing``) or the model's own argmax."""
        batch, steps = targets.shape
        token = torch.zeros(batch, dtype=torch.long)
        logits = []
        for t in range(steps):
            y, h = self.gru(self.embed(token)[:, None], h)
            step_logits = self.out(y[:, 0])
            logits.append(step_logits)
            forced = rng.random() < teacher_forcing
            token = targets[:, t] if forced else step_logits.argmax(-1)
        return torch.stack(logits, 1)


def test_the_seeds_decoder_trains_with_the_gradients_of_nn_gru(kernel_calls):
    torch.manual_seed(0)
    ref = Decoder(torch.nn.GRU)
    mine = Decoder(torch.nn.GRU)
    mine.load_state_dict(ref.state_dict())
    rt.convert(mine)
    assert type(mine.gru) is rt.GRU
    g = torch.Generator().manual_seed(5)
    targets = torch.randint(1, V, (4, 7), generator=g)
    context = torch.randn(1, 4, HD, generator=g)
    histories = []
    for model in (ref, mine):
        rng = random.Random(0)  # the same teacher-forcing draws
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        history = []
        for _ in range(4):
            opt.zero_grad()
            logits = model(context, targets, 0.5, rng)
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))
            loss.backward()
            history.append(
                (loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()})
            )
            opt.step()
        histories.append(history)
    for (loss_r, grads_r), (loss, grads) in zip(*histories):
        torch.testing.assert_close(loss, loss_r, rtol=1e-5, atol=1e-6)
        for name in grads_r:
            torch.testing.assert_close(grads[name], grads_r[name], rtol=1e-4, atol=1e-6, msg=name)
    assert histories[1][-1][0] < histories[1][0][0]  # it learns
    assert kernel_calls["GRU.forward"] == 4 * 7 and kernel_calls["GRU.backward"] == 4 * 7
