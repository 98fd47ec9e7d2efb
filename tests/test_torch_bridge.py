"""rnnfast.torch: a drop-in torch.nn.RNN on rnnfast's kernels, checked against torch.nn.RNN
itself (outputs, h_n and the gradients of the input, hx and every parameter) in each option,
with PackedSequence input, and by torch.autograd.gradcheck."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
rt = pytest.importorskip("rnnfast.torch")
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence  # noqa: E402

D, H = 5, 7
TOL = {torch.float32: 2e-5, torch.float64: 1e-10}

CONFIGS = {
    "plain": {},
    "relu": {"nonlinearity": "relu"},
    "nobias": {"bias": False},
    "2layers": {"num_layers": 2},
    "bidir": {"bidirectional": True},
    "3layers-bidir": {"num_layers": 3, "bidirectional": True},
    "batch-first": {"batch_first": True},
    "batch-first-2layers-bidir-relu": {
        "batch_first": True,
        "num_layers": 2,
        "bidirectional": True,
        "nonlinearity": "relu",
    },
    "dropout-eval": {"num_layers": 2, "dropout": 0.5},
}


def pair(config, dtype, seed=0):
    torch.manual_seed(seed)
    ref = torch.nn.RNN(D, H, dtype=dtype, **config)
    mine = rt.from_torch(ref)
    if config.get("dropout"):
        ref.eval()
        mine.eval()
    return ref, mine


def loss_of(y, h_n):
    """A loss that reaches every output element with a different weight."""
    data = y.data if hasattr(y, "batch_sizes") else y
    w = torch.linspace(-1, 1, data.numel(), dtype=data.dtype).reshape(data.shape)
    return (data * w).sum() + (h_n.sin() * 0.5).sum()


def run(module, x, hx, x_grad=True):
    module.zero_grad()
    x = x.detach().clone().requires_grad_(x_grad)
    hx = None if hx is None else hx.detach().clone().requires_grad_(True)
    y, h_n = module(x, hx)
    loss_of(y, h_n).backward()
    grads = {name: p.grad.clone() for name, p in module.named_parameters()}
    return y.detach(), h_n.detach(), x.grad, None if hx is None else hx.grad, grads


def assert_same(mine, ref, dtype):
    tol = TOL[dtype]
    y, h_n, dx, dh, grads = mine
    y_r, h_r, dx_r, dh_r, grads_r = ref
    for name, a, b in [("y", y, y_r), ("h_n", h_n, h_r), ("dx", dx, dx_r), ("dhx", dh, dh_r)]:
        if b is None:
            assert a is None, name
            continue
        assert a.shape == b.shape and a.dtype == b.dtype, name
        scale = max(1.0, float(b.abs().max()))
        torch.testing.assert_close(a, b, rtol=tol, atol=tol * scale, msg=name)
    assert grads.keys() == grads_r.keys()
    for name in grads:
        scale = max(1.0, float(grads_r[name].abs().max()))
        torch.testing.assert_close(grads[name], grads_r[name], rtol=tol, atol=tol * scale, msg=name)


def batch(module, steps=6, size=4, dtype=torch.float32, seed=1):
    g = torch.Generator().manual_seed(seed)
    shape = (size, steps, D) if module.batch_first else (steps, size, D)
    x = torch.randn(shape, generator=g, dtype=dtype)
    rows = module.num_layers * (2 if module.bidirectional else 1)
    hx = torch.randn(rows, size, H, generator=g, dtype=dtype)
    return x, hx


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("config", CONFIGS.values(), ids=CONFIGS.keys())
@pytest.mark.parametrize("with_hx", [False, True], ids=["zeros", "hx"])
def test_matches_torch_rnn_outputs_and_gradients(config, dtype, with_hx):
    ref, mine = pair(config, dtype)
    for steps, size in ((6, 4), (1, 1)):
        x, hx = batch(ref, steps, size, dtype)
        hx = hx if with_hx else None
        assert_same(run(mine, x, hx), run(ref, x, hx), dtype)


@pytest.mark.parametrize("config", ["plain", "3layers-bidir", "batch-first-2layers-bidir-relu"])
@pytest.mark.parametrize("with_hx", [False, True], ids=["zeros", "hx"])
def test_an_input_that_needs_no_gradient(config, with_hx):
    """The data a first layer reads needs no gradient: the kernels skip dx (input_gradient=
    False), and the parameters' and hx's gradients are still torch's."""
    ref, mine = pair(CONFIGS[config], torch.float64)
    x, hx = batch(ref, 6, 4, torch.float64)
    hx = hx if with_hx else None
    got = run(mine, x, hx, x_grad=False)
    assert got[2] is None
    assert_same(got, run(ref, x, hx, x_grad=False), torch.float64)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("config", ["plain", "3layers-bidir", "batch-first-2layers-bidir-relu"])
@pytest.mark.parametrize("enforce_sorted", [False, True], ids=["unsorted", "sorted"])
def test_packed_sequence(config, dtype, enforce_sorted):
    config = CONFIGS[config]
    ref, mine = pair(config, dtype)
    x, hx = batch(ref, 6, 4, dtype)
    lengths = torch.tensor([6, 4, 3, 1]) if enforce_sorted else torch.tensor([3, 6, 1, 4])

    def packed_run(module):
        module.zero_grad()
        xx = x.detach().clone().requires_grad_(True)
        hh = hx.detach().clone().requires_grad_(True)
        packed = pack_padded_sequence(
            xx, lengths, batch_first=module.batch_first, enforce_sorted=enforce_sorted
        )
        out, h_n = module(packed, hh)
        assert isinstance(out, torch.nn.utils.rnn.PackedSequence)
        assert torch.equal(out.batch_sizes, packed.batch_sizes)
        padded, out_lengths = pad_packed_sequence(out, batch_first=module.batch_first)
        assert torch.equal(out_lengths, lengths)
        loss_of(padded, h_n).backward()
        grads = {n: p.grad.clone() for n, p in module.named_parameters()}
        return padded.detach(), h_n.detach(), xx.grad, hh.grad, grads

    assert_same(packed_run(mine), packed_run(ref), dtype)


def test_unbatched_input():
    ref, mine = pair({"num_layers": 2, "bidirectional": True}, torch.float64)
    x = torch.randn(5, D, dtype=torch.float64)
    hx = torch.randn(4, H, dtype=torch.float64)
    assert_same(run(mine, x, hx), run(ref, x, hx), torch.float64)
    assert_same(run(mine, x, None), run(ref, x, None), torch.float64)


def test_gradcheck():
    torch.manual_seed(0)
    module = rt.RNN(3, 4, num_layers=2, bidirectional=True, dtype=torch.float64)
    x = torch.randn(4, 2, 3, dtype=torch.float64, requires_grad=True)
    hx = torch.randn(4, 2, 4, dtype=torch.float64, requires_grad=True)
    params = list(module.parameters())
    names = [n for n, _ in module.named_parameters()]

    def f(x, hx, *weights):
        state = dict(zip(names, weights))
        y, h_n = torch.func.functional_call(module, state, (x, hx))
        return y, h_n

    assert torch.autograd.gradcheck(f, (x, hx, *params), eps=1e-6, atol=1e-7)


def test_is_a_torch_rnn_with_its_parameters_and_state_dict():
    torch.manual_seed(3)
    ref = torch.nn.RNN(D, H, 2, "relu", True, True, 0.0, True)
    torch.manual_seed(3)
    mine = rt.RNN(D, H, 2, "relu", True, True, 0.0, True)  # torch's positional signature
    assert isinstance(mine, torch.nn.RNN)
    assert list(mine.state_dict()) == list(ref.state_dict())
    for name, value in ref.state_dict().items():
        assert torch.equal(mine.state_dict()[name], value)  # torch's initialisation
    assert repr(mine) == repr(ref).replace("RNN(", "RNN(", 1)
    mine.load_state_dict(ref.state_dict())
    plain = rt.to_torch(mine)
    assert type(plain) is torch.nn.RNN
    for name, value in mine.state_dict().items():
        assert torch.equal(plain.state_dict()[name], value)
    with pytest.raises(TypeError, match="torch.nn.RNN"):
        rt.from_torch(torch.nn.Linear(D, H))


def kernel_parameters(module, y):
    """The arrays the kernels read as ``module``'s parameters in the call that gave ``y``:
    the plain stack's (its autograd node keeps them, ``rnnfast.nn.recurrent.stack``'s fast path) or the
    general layer's."""
    node = y.grad_fn
    if hasattr(node, "arrays"):
        names = module._flat_weights_names
        return {
            names[i]: a
            for where, arrays in zip(node.layout, node.arrays)
            for i, a in zip(where, arrays)
            if i is not None
        }
    return next(iter(module._rnnfast_layers.values()))._params


# one direction runs on the plain stack, two on the general layer
PATHS = {"plain": {"num_layers": 2}, "general": {"num_layers": 2, "bidirectional": True}}


@pytest.mark.parametrize("config", PATHS.values(), ids=PATHS.keys())
def test_parameters_are_handed_to_the_kernels_without_copies(config):
    ref, mine = pair(config, torch.float32)
    x, hx = batch(mine)
    y, h_n = mine(x.requires_grad_(True), hx)
    params = kernel_parameters(mine, y)
    assert params.keys() == dict(mine.named_parameters()).keys()
    for name, p in mine.named_parameters():
        assert np.shares_memory(params[name], p.detach().numpy()), name
    y.sum().backward()  # and backward still has its cache


def test_training_dropout_follows_torch_seed_and_eval_removes_it():
    torch.manual_seed(0)
    mine = rt.RNN(D, H, num_layers=3, dropout=0.5)
    x, _ = batch(mine)
    torch.manual_seed(7)
    a, _ = mine(x)
    torch.manual_seed(7)
    b, _ = mine(x)
    torch.manual_seed(8)
    c, _ = mine(x)
    assert torch.equal(a, b) and not torch.equal(a, c)
    mine.eval()
    ref = rt.to_torch(mine).eval()
    torch.testing.assert_close(mine(x)[0], ref(x)[0], rtol=2e-5, atol=2e-5)
    assert not torch.equal(mine(x)[0], a)
    # a training forward with dropout differentiates through the masks it drew
    mine.train()
    torch.manual_seed(1)
    xx = x.clone().requires_grad_(True)
    y, _ = mine(xx)
    y.sum().backward()
    assert torch.isfinite(xx.grad).all() and xx.grad.abs().sum() > 0


def test_two_forwards_then_backward_keep_their_own_caches():
    ref, mine = pair({"bidirectional": True}, torch.float64)
    x1, hx = batch(ref, dtype=torch.float64, seed=1)
    x2, _ = batch(ref, dtype=torch.float64, seed=2)
    grads = []
    for module in (mine, ref):
        module.zero_grad()
        a = x1.clone().requires_grad_(True)
        b = x2.clone().requires_grad_(True)
        ya, _ = module(a, hx)
        yb, _ = module(b, hx)
        (ya.square().sum() + yb.sum()).backward()
        grads.append([a.grad, b.grad] + [p.grad.clone() for p in module.parameters()])
    for g_mine, g_ref in zip(*grads):
        torch.testing.assert_close(g_mine, g_ref, rtol=1e-10, atol=1e-10)


def test_no_grad_forward_and_a_frozen_module():
    ref, mine = pair({"num_layers": 2}, torch.float64)
    x, hx = batch(ref, dtype=torch.float64)
    with torch.no_grad():
        y, h_n = mine(x, hx)
        y_r, h_r = ref(x, hx)
    torch.testing.assert_close(y, y_r, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(h_n, h_r, rtol=1e-10, atol=1e-10)
    for p in mine.parameters():
        p.requires_grad_(False)
    xx = x.clone().requires_grad_(True)
    y, _ = mine(xx)
    y.sum().backward()
    assert xx.grad is not None and all(p.grad is None for p in mine.parameters())


def test_convert_replaces_nn_rnn_in_place_and_trains_as_torch():
    torch.manual_seed(0)

    def model():
        torch.manual_seed(0)
        return torch.nn.Sequential(
            torch.nn.Linear(D, D), torch.nn.RNN(D, H, batch_first=True, num_layers=2)
        )

    ref, net = model(), model()
    rnn = net[1]
    params_before = [id(p) for p in net.parameters()]
    assert rt.convert(net) is net
    assert type(net[1]) is rt.RNN and net[1] is rnn
    assert [id(p) for p in net.parameters()] == params_before
    x = torch.randn(3, 6, D)
    target = torch.randn(3, 6, H)
    for module in (ref, net):
        opt = torch.optim.SGD(module.parameters(), lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            y, _ = module[1](module[0](x))
            torch.nn.functional.mse_loss(y, target).backward()
            opt.step()
    for (name, a), (_, b) in zip(ref.named_parameters(), net.named_parameters()):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6, msg=name)


def test_tensors_the_kernels_do_not_take_run_torch():
    torch.manual_seed(0)
    mine = rt.RNN(D, H).to(torch.bfloat16)
    ref = rt.to_torch(mine)
    x = torch.randn(4, 2, D, dtype=torch.bfloat16)
    try:
        expected = ref(x)
    except RuntimeError as exc:  # a torch build without bfloat16 RNNs on the CPU
        pytest.skip(str(exc))
    got = mine(x)
    assert torch.equal(got[0], expected[0]) and torch.equal(got[1], expected[1])


def test_bad_shapes_raise_as_torch():
    mine = rt.RNN(D, H)
    with pytest.raises(ValueError, match="Expected input to be 2D or 3D"):
        mine(torch.randn(2, 3, 4, D))
    with pytest.raises(RuntimeError, match="input.size\\(-1\\) must be equal to input_size"):
        mine(torch.randn(4, 2, D + 1))
    with pytest.raises(RuntimeError, match="Expected hidden size"):
        mine(torch.randn(4, 2, D), torch.randn(1, 3, H))


@pytest.mark.parametrize("config", PATHS.values(), ids=PATHS.keys())
def test_a_training_forward_keeps_the_input_uncopied(config):
    """No copy of a contiguous CPU float input: the kernels' training record is the tensor's
    own memory (torch's version check guards it instead, below)."""
    ref, mine = pair(config, torch.float32)
    x, hx = batch(ref)
    y, _ = mine(x, hx)
    if hasattr(y.grad_fn, "records"):  # the plain stack's record of layer 0
        fed, h0 = y.grad_fn.records[0].x, y.grad_fn.records[0].h0
    else:  # the general layer's of (layer 0, direction 0)
        record = y.grad_fn.rnnfast_cache[2].layers[0][0][0][0]
        fed, h0 = record.fed, record.h0
    assert np.shares_memory(fed, x.numpy())
    assert np.shares_memory(h0, hx.numpy())


@pytest.mark.parametrize("changed", ["x", "hx"])
def test_an_in_place_change_before_backward_raises_as_with_nn_rnn(changed):
    for module in pair({}, torch.float64):
        x, hx = batch(module, dtype=torch.float64)
        y, h_n = module(x, hx)
        with torch.no_grad():
            {"x": x, "hx": hx}[changed].add_(1.0)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            loss_of(y, h_n).backward()
