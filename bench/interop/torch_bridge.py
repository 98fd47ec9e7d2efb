"""rnnfast.torch.RNN, GRU and LSTM against torch.nn.RNN, GRU and LSTM inside a torch training loop
(issue 17's target for the RNN: at least 3x where H <= 128; issue 24's for the gated cells: at
least 2x where H <= 128 and B <= 16, T = 7, B = 1 included).

    python -m bench.interop.torch_bridge [--cell rnn|gru|lstm] [--cases "T,B,D,H;..."]
                                         [--threads 1] [--optimizer sgd|adam] [--time-major]
                                         [--repeats 7] [--min-repeat-s 0.2] [--out PATH]

One training step of the same model on each side: ``RNN(D, H, batch_first=True)`` (or the
``--cell``'s GRU or LSTM; the bridge's a ``rnnfast.torch.from_torch`` copy of torch's), a
``Linear(H, 1)`` head on every step's output, the mean squared error against a fixed target,
``loss.backward()``, ``optimizer.step()`` (torch's SGD or Adam over all the parameters) and
``zero_grad()``; float32, input (B, T, D) not requiring gradients, as a first layer's input does
not. ``--time-major``: ``batch_first=False`` (nn.RNN's default) and input (T, B, D).

Columns:

- ``torch ms`` and ``bridge ms``: medians of repeats that alternate between the two steps
  (bench/_common.py), each repeat at least --min-repeat-s long; ``ratio`` = torch / bridge.
- ``kernels ms``: the kernels the bridge's step runs (its plain stack,
  ``rnnfast.nn.recurrent.stack``'s fast path: each layer's forward and backward on NumPy arrays,
  time-major), alone, the same shapes, timed in the same alternation. ``rest ms`` = bridge -
  kernels: the head, loss, optimizer and what the bridge adds (the module's checks, the
  autograd Function, the views, the batch_first transposes).
- ``3x needs GF/s``: the floating-point rate the RNN's forward and backward (2TBG(DH + HH) per
  pass for a cell of G gate blocks, the backward twice that) would need for the bridge's step
  to be 3x torch's, beside ``sgemm GF/s``, NumPy's BLAS on a 2048 x 2048 float32 product on the
  same threads: where the first exceeds the second, 3x is out of reach of any float32 kernel.
- ``rel diff``: the relative difference of the two sides' weight_hh gradients after one
  step from the same weights.

Prints the table with the ISA, cell and thread count and writes JSON (default
bench/results/torch_bridge.json, or torch_bridge_gru.json / torch_bridge_lstm.json).
"""

from __future__ import annotations

import argparse
import platform

import numpy as np
import torch

import rnnfast
import rnnfast.torch as rt
from bench import RESULTS
from bench._common import (
    SHAPE_COLUMNS,
    cell,
    log,
    parse_cases,
    reexec_without_blas_overrides,
    relative_error,
    text_table,
    thread_count,
    time_alternating,
    write_json,
)
from rnnfast import _core
from rnnfast.nn.recurrent.stack import plain_backward, plain_forward

# T = 100, B in {1, 16, 64}, D = H in {32, 64, 128} (the target's range), then larger layers
DEFAULT_CASES = ";".join(
    [f"100,{b},{h},{h}" for h in (32, 64, 128) for b in (1, 16, 64)]
    + ["100,16,256,256", "100,64,256,256", "50,32,512,512"]
)

# torch's module of each --cell
CELLS = {"rnn": torch.nn.RNN, "gru": torch.nn.GRU, "lstm": torch.nn.LSTM}


class Model(torch.nn.Module):
    """An RNN and a Linear head on every step's output."""

    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn
        self.head = torch.nn.Linear(rnn.hidden_size, 1)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.head(y)


def make_step(model, optimizer, x, target):
    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), target)
        loss.backward()
        optimizer.step()

    return step


def optimizer_for(name, model):
    if name == "adam":
        return torch.optim.Adam(model.parameters(), lr=1e-3)
    return torch.optim.SGD(model.parameters(), lr=1e-2)


def first_gradients(ref, mine, x, target):
    """weight_hh's gradient of one step from the same weights on each side."""
    grads = []
    for model in (ref, mine):
        model.zero_grad(set_to_none=True)
        torch.nn.functional.mse_loss(model(x), target).backward()
        grads.append(model.rnn.weight_hh_l0.grad.numpy().copy())
    return relative_error(grads[1], grads[0])


def kernels_step(module, T, B):
    """The kernels the bridge's step runs for ``module`` (its plain stack,
    ``rnnfast.nn.recurrent.stack``'s fast path: each layer's forward and backward), alone on NumPy
    copies of its weights and time-major arrays (T, B, ·), x needing no gradient."""
    cell = module._plain_cell()
    layout = module._plain_layout()
    weights = [w.detach().numpy().copy() for w in module._flat_weights]
    weights = [tuple(None if i is None else weights[i] for i in row) for row in layout]
    rng = np.random.default_rng(2)
    x = rng.standard_normal((T, B, module.input_size)).astype(np.float32)
    dy = rng.standard_normal((T, B, module.hidden_size)).astype(np.float32)

    def step():
        _, _, _, records = plain_forward(cell, x, None, None, weights, True)
        plain_backward(cell, records, weights, dy, None, None, input_gradient=False)

    return step


def sgemm_rate(repeats, min_repeat_s):
    a = np.random.default_rng(3).standard_normal((2048, 2048)).astype(np.float32)
    t = time_alternating({"sgemm": lambda: a @ a}, repeats, min_repeat_s)
    return 2 * 2048**3 / t["sgemm"]["median_s"] / 1e9


def row(T, B, D, H, args):
    torch.manual_seed(0)
    batch_first = not args.time_major
    ref = Model(CELLS[args.cell](D, H, batch_first=batch_first))
    mine = Model(rt.from_torch(ref.rnn))
    mine.head.load_state_dict(ref.head.state_dict())
    g = torch.Generator().manual_seed(1)
    x = torch.randn((B, T, D) if batch_first else (T, B, D), generator=g)
    target = torch.randn((B, T, 1) if batch_first else (T, B, 1), generator=g)
    diff = first_gradients(ref, mine, x, target)
    fns = {
        "torch": make_step(ref, optimizer_for(args.optimizer, ref), x, target),
        "bridge": make_step(mine, optimizer_for(args.optimizer, mine), x, target),
        "kernels": kernels_step(mine.rnn, T, B),
    }
    t = time_alternating(fns, args.repeats, args.min_repeat_s)
    torch_s, bridge_s, kernels_s = (t[k]["median_s"] for k in ("torch", "bridge", "kernels"))
    gates = {"rnn": 1, "gru": 3, "lstm": 4}[args.cell]
    # forward, and a backward of twice its work
    flops = 3 * 2 * T * B * gates * (D * H + H * H)
    return {
        "T": T,
        "B": B,
        "D": D,
        "H": H,
        "torch_ms": torch_s * 1e3,
        "bridge_ms": bridge_s * 1e3,
        "ratio": torch_s / bridge_s,
        "kernels_ms": kernels_s * 1e3,
        "rest_ms": (bridge_s - kernels_s) * 1e3,
        "gflops_for_3x": 3 * flops / torch_s / 1e9,
        "rel_diff_dweight_hh": diff,
        "timings": t,
    }


def table(rows, sgemm):
    columns = [
        *SHAPE_COLUMNS,
        ("torch ms", ">9", cell("torch_ms", ".3f")),
        ("bridge ms", ">9", cell("bridge_ms", ".3f")),
        ("ratio", ">7", cell("ratio", ".2f", "x")),
        ("kernels ms", ">10", cell("kernels_ms", ".3f")),
        ("rest ms", ">8", cell("rest_ms", ".3f")),
        ("3x needs GF/s", ">13", cell("gflops_for_3x", ".0f")),
        ("rel diff", ">9", cell("rel_diff_dweight_hh", ".1e")),
    ]
    sgemm_line = f"sgemm 2048^3 float32 (NumPy's BLAS, same threads): {sgemm:.0f} GF/s"
    return text_table(columns, rows) + "\n" + sgemm_line


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cell", choices=list(CELLS), default="rnn", help="default rnn")
    parser.add_argument("--cases", default=DEFAULT_CASES, help="T,B,D,H;... (default: %(default)s)")
    parser.add_argument("--threads", type=int, default=1, help="threads per library (default 1)")
    parser.add_argument("--optimizer", choices=["sgd", "adam"], default="sgd")
    parser.add_argument("--time-major", action="store_true", help="batch_first=False input")
    parser.add_argument("--repeats", type=int, default=7, help="alternating repeats (default 7)")
    parser.add_argument("--min-repeat-s", type=float, default=0.2, help="seconds per repeat")
    parser.add_argument("--out", default=None, help="JSON path (default bench/results/...)")
    args = parser.parse_args(argv)
    if args.out is None:
        suffix = "" if args.cell == "rnn" else f"_{args.cell}"
        args.out = str(RESULTS / f"torch_bridge{suffix}.json")
    if args.threads < 1 or args.repeats < 1 or args.min_repeat_s <= 0:
        raise SystemExit("--threads and --repeats: positive ints; --min-repeat-s: positive")
    cases = parse_cases(args.cases)
    isa = _core.active_isa()
    header = (
        f"rnnfast {rnnfast.__version__} ISA {isa}, cell {args.cell}, threads {args.threads}, "
        f"torch {torch.__version__}, optimizer {args.optimizer}, "
        f"{'time-major' if args.time_major else 'batch_first'}, "
        f"{platform.processor() or platform.machine()}"
    )
    print(header, flush=True)
    rows = []
    with thread_count(args.threads):
        sgemm = sgemm_rate(args.repeats, args.min_repeat_s)
        for T, B, D, H in cases:
            rows.append(row(T, B, D, H, args))
            log(f"T={T} B={B} D={D} H={H}: {rows[-1]['ratio']:.2f}x")
    name = args.cell.upper()
    print(f"\nTraining step ({name} + Linear head, MSE, backward, optimizer step), float32:")
    print(table(rows, sgemm))
    result = {"isa": isa, "cell": args.cell, "threads": args.threads, "header": header}
    result["sgemm_gflops"] = sgemm
    result["rows"] = rows
    write_json(args.out, result)


if __name__ == "__main__":
    reexec_without_blas_overrides()  # before the first timing (main() runs in tests too)
    main()
