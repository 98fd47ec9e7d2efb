"""rnnfast.torch under PyTorch's compilers (``rnnfast._torch_ops``): ``torch.compile(...,
fullgraph=True)`` runs the bridge's modules as the registered custom operators
``rnnfast::layer_forward`` / ``layer_backward`` with no graph break, forward and training
equal to eager mode and to torch's own modules; ``torch.export`` exports them (inference);
``torch.jit.script`` / ``trace``, a PackedSequence under fullgraph or export, and a double
backward under compile raise errors that say what to do. Compiling is slow: a few small cases,
most on the ``aot_eager`` backend (AOTAutograd with the operators' fake implementations and
autograd formula, without Inductor's code generation), one on Inductor."""

from __future__ import annotations

import re
import subprocess
import sys
import warnings

import pytest
from conftest import import_torch

torch = import_torch()
rt = pytest.importorskip("rnnfast.torch")
from torch.nn.utils.rnn import pack_padded_sequence  # noqa: E402

from rnnfast import _torch_ops  # noqa: E402

with warnings.catch_warnings():
    # torch's own import-time DeprecationWarning (torch.utils.mkldnn's torch.jit.script_method),
    # raised while Inductor first loads; nothing of rnnfast's
    warnings.simplefilter("ignore", DeprecationWarning)
    import torch._inductor.compile_fx  # noqa: E402, F401

D, H, V = 5, 7, 11
TOL = {torch.float32: 2e-5, torch.float64: 1e-10}
TORCH = {"rnn": torch.nn.RNN, "gru": torch.nn.GRU, "lstm": torch.nn.LSTM}
TORCH_RECURRENCE = re.compile(r"\b(lstm|gru|rnn_tanh|rnn_relu)\(")


class Recorder:
    """A torch.compile backend that keeps each graph's code, then runs ``backend``."""

    def __init__(self, backend="aot_eager"):
        self.backend, self.codes = backend, []

    def __call__(self, gm, example_inputs):
        self.codes.append(gm.code)
        return torch._dynamo.lookup_backend(self.backend)(gm, example_inputs)

    def calls(self, op="rnnfast.layer_forward"):
        return sum(code.count(op) for code in self.codes)

    def torch_recurrences(self):
        """Calls of torch's own recurrences (torch.lstm, _VF.gru, ...) in the graphs."""
        return sum(len(TORCH_RECURRENCE.findall(code)) for code in self.codes)


class Model(torch.nn.Module):
    """The lecture notes' char-RNN shape: Embedding -> recurrent layer -> Linear."""

    def __init__(self, rnn, dtype):
        super().__init__()
        self.emb = torch.nn.Embedding(V, D, dtype=dtype)
        self.rnn = rnn
        width = rnn.hidden_size * (2 if rnn.bidirectional else 1)
        if getattr(rnn, "proj_size", 0):
            width = rnn.proj_size * (2 if rnn.bidirectional else 1)
        self.out = torch.nn.Linear(width, V, dtype=dtype)

    def forward(self, ids, hx=None):
        y, state = self.rnn(self.emb(ids), hx)
        states = state if isinstance(state, tuple) else (state,)
        return self.out(y), states


def loss_of(model, ids, hx=None):
    logits, states = model(ids, hx)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), ids.reshape(-1))
    return loss + sum((s.sin() * (i + 1)).sum() for i, s in enumerate(states))


def gradients(model, ids, hx=None):
    model.zero_grad()
    leaves = [] if hx is None else list(hx if isinstance(hx, tuple) else (hx,))
    loss = loss_of(model, ids, hx)
    loss.backward()
    return [loss.detach()] + [p.grad.clone() for p in model.parameters()] + [s.grad for s in leaves]


def models(cell, dtype=torch.float64, **config):
    """(torch's model, the same weights on the bridge)."""
    torch.manual_seed(0)
    ref = Model(TORCH[cell](D, H, dtype=dtype, **config), dtype)
    mine = Model(rt.from_torch(ref.rnn), dtype)
    mine.load_state_dict(ref.state_dict())
    return ref, mine


def state(cell, rows, batch, dtype=torch.float64, width=H):
    g = torch.Generator().manual_seed(5)
    h0 = torch.randn(rows, batch, width, generator=g, dtype=dtype, requires_grad=True)
    if cell != "lstm":
        return h0
    return h0, torch.randn(rows, batch, H, generator=g, dtype=dtype, requires_grad=True)


def ids(batch_first, steps=6, batch=3):
    g = torch.Generator().manual_seed(2)
    return torch.randint(0, V, (batch, steps) if batch_first else (steps, batch), generator=g)


def assert_all_close(got, expected, dtype=torch.float64):
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b, rtol=TOL[dtype], atol=TOL[dtype])


@pytest.mark.parametrize(
    "cell, config, given_state",
    [
        ("rnn", {"batch_first": True}, False),
        ("gru", {"bidirectional": True, "num_layers": 2}, True),
        ("lstm", {"num_layers": 2, "proj_size": 3, "batch_first": True}, True),
    ],
)
def test_compiled_training_equals_eager_and_torch(cell, config, given_state):
    ref, mine = models(cell, **config)
    x = ids(config.get("batch_first", False))
    rows = config.get("num_layers", 1) * (2 if config.get("bidirectional") else 1)
    hx = state(cell, rows, 3, width=config.get("proj_size") or H) if given_state else None
    recorder = Recorder()
    compiled = torch.compile(mine, fullgraph=True, backend=recorder)
    got = gradients(compiled, x, hx)
    # the graph holds rnnfast's operators: one per layer and direction
    assert recorder.calls() == rows
    assert recorder.torch_recurrences() == 0
    assert_all_close(got, gradients(mine, x, hx))  # eager, the autograd.Function route
    assert_all_close(got, gradients(ref, x, hx))  # torch's own modules


def test_inductor_trains_the_lstm_language_model():
    """The default backend (Inductor), float32: a 2-layer LSTM language model, two SGD steps."""
    ref, mine = models("lstm", dtype=torch.float32, num_layers=2)
    compiled = torch.compile(mine, fullgraph=True)
    # in this process: no pool of compile workers to start (seconds on a busy machine)
    patch = torch._inductor.config.patch(compile_threads=1)
    x = ids(False, steps=5, batch=4)
    with patch:
        for model in (ref, compiled):
            opt = torch.optim.SGD(model.parameters(), lr=0.5)
            for _ in range(2):
                opt.zero_grad()
                loss_of(model, x).backward()
                opt.step()
        for a, b in zip(mine.parameters(), ref.parameters()):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
        with torch.no_grad():
            torch.testing.assert_close(compiled(x)[0], ref(x)[0], rtol=1e-4, atol=1e-5)


def test_compiled_inference_unbatched_with_state():
    """no_grad (the workspace is not kept), eval mode, an unbatched sequence and a given
    state."""
    torch.manual_seed(0)
    ref = torch.nn.GRU(D, H, num_layers=2, dtype=torch.float64).eval()
    mine = rt.from_torch(ref)
    x = torch.randn(6, D, dtype=torch.float64)
    h0 = torch.randn(2, H, dtype=torch.float64)
    recorder = Recorder()
    compiled = torch.compile(mine, fullgraph=True, backend=recorder)
    with torch.no_grad():
        got, expected = compiled(x, h0), ref(x, h0)
    assert recorder.calls() == 2
    assert_all_close(got, expected)


def test_dropout_between_layers_draws_torchs_masks():
    """Training dropout between layers under compile is torch's functional dropout on torch's
    generator: on aot_eager (torch's RNG), the masks of torch's own module."""
    torch.manual_seed(0)
    ref = torch.nn.LSTM(D, H, num_layers=3, dropout=0.5, dtype=torch.float64)
    mine = rt.from_torch(ref)
    x = torch.randn(6, 3, D, dtype=torch.float64, requires_grad=True)
    compiled = torch.compile(mine, fullgraph=True, backend="aot_eager")
    results = []
    for module in (ref, compiled):
        torch.manual_seed(7)
        y, (h_n, c_n) = module(x)
        grads = torch.autograd.grad(y.sum(), [x, *module.parameters()])
        results.append([y, h_n, c_n, *grads])
    assert_all_close(*results)


def test_packed_sequence_graph_breaks_or_raises():
    torch.manual_seed(0)
    mine = rt.LSTM(D, H, dtype=torch.float64)
    x = torch.randn(4, 3, D, dtype=torch.float64)
    packed = pack_padded_sequence(x, [4, 3, 2])
    torch._dynamo.reset()  # no compiled code of the module's forward from other tests
    with pytest.raises(torch._dynamo.exc.Unsupported, match="pass a padded tensor"):
        torch.compile(mine, fullgraph=True, backend="aot_eager")(packed)
    # without fullgraph: a graph break, and the eager route's result
    torch._dynamo.reset()
    got = torch.compile(mine, backend="aot_eager")(packed)[0].data
    torch.testing.assert_close(got, mine(packed)[0].data, rtol=0, atol=0)

    class Packed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = mine

        def forward(self, x):
            return self.rnn(pack_padded_sequence(x, [4, 3, 2]))[0].data

    with pytest.raises(RuntimeError, match="PackedSequence.*pass a padded tensor"):
        torch.export.export(Packed(), (x,))


def test_double_backward_under_compile_raises():
    mine = rt.RNN(D, H, dtype=torch.float64)
    x = torch.randn(4, 3, D, dtype=torch.float64, requires_grad=True)
    y, _ = torch.compile(mine, fullgraph=True, backend="aot_eager")(x)
    (g,) = torch.autograd.grad(y.square().sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="double backward"):
        g.sum().backward()


def test_export_runs_the_operators():
    torch.manual_seed(0)
    ref = Model(torch.nn.LSTM(D, H, num_layers=2, dtype=torch.float64), torch.float64).eval()
    mine = Model(rt.from_torch(ref.rnn), torch.float64).eval()
    mine.load_state_dict(ref.state_dict())
    x = ids(False)
    hx = tuple(s.detach() for s in state("lstm", 2, 3))
    program = torch.export.export(mine, (x, hx))
    assert program.graph_module.code.count("rnnfast.layer_forward") == 2
    assert not TORCH_RECURRENCE.search(program.graph_module.code)
    with torch.no_grad():
        got, expected = program.module()(x, hx), ref(x, hx)
    assert_all_close([got[0], *got[1]], [expected[0], *expected[1]])


def test_torchscript_raises_naming_the_alternatives():
    x = torch.randn(4, 3, D)
    with warnings.catch_warnings():
        # torch.jit.script / trace are deprecated in torch itself (a DeprecationWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(RuntimeError, match="GRU cannot be scripted.*torch.compile.*to_torch"):
            torch.jit.script(torch.nn.Sequential(rt.GRU(D, H)))
        with pytest.raises(RuntimeError, match=r"RNN cannot be traced.*torch\.export.*nn\.RNN "):
            torch.jit.trace(torch.nn.Sequential(rt.RNN(D, H, nonlinearity="relu")), (x,))


def test_the_operators_pass_opcheck():
    """torch.library.opcheck: the schema, the fake (meta) implementations against the real
    ones, the autograd registration, AOTAutograd with dynamic shapes."""
    g = torch.Generator().manual_seed(3)

    def randn(*shape, grad=True):
        return torch.randn(*shape, generator=g, dtype=torch.float64, requires_grad=grad)

    x = randn(4, 2, D)
    for cell, gates, proj in (("elman", 1, 0), ("gru", 3, 0), ("lstm", 4, 3)):
        out = proj or H
        h0 = randn(2, out)
        c0 = randn(2, H) if cell == "lstm" else None
        w_hr = randn(proj, H) if proj else None
        args = (cell, "tanh", x, h0, c0, randn(gates * H, D), randn(gates * H, out))
        args += (randn(gates * H), randn(gates * H), w_hr, True)
        torch.library.opcheck(torch.ops.rnnfast.layer_forward.default, args)
        # the backward operator runs inside the forward's autograd formula, without a graph
        # (it has no autograd formula of its own: a double backward says so)
        fixed = [a.detach() if isinstance(a, torch.Tensor) else a for a in args]
        y, _, _, workspace = torch.ops.rnnfast.layer_forward(*fixed)
        back = (cell, "tanh", *fixed[2:7], w_hr if w_hr is None else w_hr.detach(), y, workspace)
        back += (randn(4, 2, out, grad=False), randn(2, out, grad=False), None, True, True)
        torch.library.opcheck(torch.ops.rnnfast.layer_backward.default, back)


def test_eager_calls_keep_the_autograd_function_route(monkeypatch):
    def refuse(*args):
        raise AssertionError("eager mode called the custom operator")

    monkeypatch.setattr(_torch_ops, "layer_forward", refuse)
    mine = rt.LSTM(D, H)
    assert not _torch_ops.compiling(mine)
    y, _ = mine(torch.randn(4, 3, D))
    y.sum().backward()


def test_importing_the_bridge_lets_dynamo_trace_it_without_loading_dynamo():
    """``import rnnfast.torch`` does not load Dynamo (a second); Dynamo's allow_rnn is set as
    it loads."""
    code = (
        "import sys, rnnfast.torch\n"
        "assert 'torch._dynamo' not in sys.modules\n"
        "import torch._dynamo\n"
        "assert torch._dynamo.config.allow_rnn\n"
    )
    subprocess.run([sys.executable, "-W", "error", "-c", code], check=True, timeout=120)
