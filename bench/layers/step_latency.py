"""Streaming: what one ``layer.step(x_t, state)`` call costs, and where the time goes.

    python -m bench.layers.step_latency [--shapes B,D,H;...] [--cells rnn,gru,lstm]
                                        [--dtype float32] [--repeats 15] [--out PATH]
                                        [--min-repeat-s 0.05] [--warmup-s 0.25]

For each cell and shape (default B = 1, D = H = 64, float32, one thread, pinned to one core), a
streaming loop that carries the state from call to call, timed as medians of alternating
repeats (microseconds per call):

- ``step``: the API call, ``out, state = layer.step(x, state)``;
- ``bound``: the layer's bound step alone (``layer._stepper``, a ``_core.StepFunction``: the
  weights looked up in the layer's parameter dict and checked, the output allocated, the
  kernel), i.e. ``step`` less its Python;
- ``unbound``: the kernel through the binding that takes every array and option per call
  (``_core.rnn_step`` / ``_core.gated_step``), which step() called before it was bound;
- ``call``: a trivial call into ``_core`` (``get_num_threads``), the floor of any binding;
- ``torch``: torch's cell (``nn.RNNCell`` / ``GRUCell`` / ``LSTMCell``) under ``no_grad``.

The targets (issue 25): RNN.step at most 1.0 us, GRU 1.5 us, LSTM 2.0 us at B = 1, D = H = 64.
Prints the table with the CPU and ISA, and writes JSON (default bench/results/step_latency.json).
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

import rnnfast
from bench import RESULTS
from bench._common import (
    WARMUP_S,
    cell,
    cores_for,
    cpu_model,
    parse_tuples,
    pinned_to,
    text_table,
    thread_count,
    time_alternating,
    write_json,
)
from rnnfast import _core

TARGET_US = {"rnn": 1.0, "gru": 1.5, "lstm": 2.0}
LAYERS = {"rnn": rnnfast.RNN, "gru": rnnfast.GRU, "lstm": rnnfast.LSTM}
TORCH_CELLS = {"rnn": "RNNCell", "gru": "GRUCell", "lstm": "LSTMCell"}
MIN_REPEAT_S = 0.05


def parse_shapes(text):
    """``"B,D,H;..."`` as a list of (B, D, H) tuples of positive ints."""
    return parse_tuples(text, "B,D,H", "--shapes")


class _Loop:
    """A streaming loop: each call steps from the state the previous call returned."""

    def __init__(self, step, state):
        self.step, self.state = step, state

    def __call__(self):
        self.state = self.step(self.state)


def runners(name, batch, d, h, dtype):
    """The timed functions of one cell and shape, each a streaming loop."""
    layer = LAYERS[name](d, h, dtype=dtype, seed=0).eval()
    x = np.random.default_rng(0).standard_normal((batch, d)).astype(dtype)
    _, first = layer.step(x)  # binds the step; the state every loop starts from
    bound = layer._stepper
    p, names = layer._params, layer._names[0]
    weights = [p[n] if n else None for n in names]
    if name == "rnn":

        def unbound(s):
            return _core.rnn_step(x, s, *weights, layer.nonlinearity, 1.0)

        start = first[0]
    else:
        cell_name = "gru" if name == "gru" else "lstm"
        c0 = first[1][0] if name == "lstm" else None

        def unbound(s):
            out = _core.gated_step(
                cell_name, x, s[0], s[1], *weights, None, "tanh", "sigmoid"
            )  # fmt: skip
            return out if isinstance(out, tuple) else (out, None)

        start = (first[0][0], c0) if name == "lstm" else (first[0], None)
    module = getattr(torch.nn, TORCH_CELLS[name])(d, h).to(
        torch.float64 if dtype == np.float64 else torch.float32
    )
    tx = torch.from_numpy(x)
    t_state = module(tx)

    def torch_step(s):
        with torch.no_grad():
            return module(tx, s)

    return {
        "step": _Loop(lambda s: layer.step(x, s)[1], first),
        "bound": _Loop(lambda s: bound(x, s)[1], first),
        "unbound": _Loop(unbound, start),
        "call": _core.get_num_threads,
        "torch": _Loop(torch_step, t_state),
    }


def measure(args):
    rows = []
    with thread_count(1), pinned_to(cores_for(1)):
        for name in args.cells:
            for batch, d, h in args.shapes:
                fns = runners(name, batch, d, h, args.dtype)
                t = time_alternating(fns, args.repeats, args.min_repeat_s, args.warmup_s)
                us = {k: v["median_s"] * 1e6 for k, v in t.items()}
                row = {
                    "cell": name,
                    "B": batch,
                    "D": d,
                    "H": h,
                    **{f"{k}_us": v for k, v in us.items()},
                }
                row["python_us"] = us["step"] - us["bound"]
                row["vs_torch"] = us["torch"] / us["step"]
                if (batch, d, h) == (1, 64, 64) and args.dtype == np.float32:
                    row["target_us"] = TARGET_US[name]
                    row["met"] = us["step"] <= TARGET_US[name]
                rows.append(row)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", type=parse_shapes, default=[(1, 64, 64)])
    parser.add_argument("--cells", default="rnn,gru,lstm")
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--min-repeat-s", type=float, default=MIN_REPEAT_S)
    parser.add_argument("--warmup-s", type=float, default=WARMUP_S)
    parser.add_argument("--out", default=str(RESULTS / "step_latency.json"))
    args = parser.parse_args(argv)
    args.cells = [c for c in args.cells.split(",") if c]
    unknown = [c for c in args.cells if c not in LAYERS]
    if unknown:
        raise SystemExit(f"--cells: expected some of rnn,gru,lstm, got {','.join(unknown)}")
    args.dtype = np.dtype(args.dtype).type
    rows = measure(args)
    machine = f"{cpu_model()}, rnnfast {_core.active_isa()}, 1 thread, {args.dtype.__name__}"
    print(f"step() latency, us per call (medians of {args.repeats} alternating repeats): {machine}")
    columns = [("cell", "<5", cell("cell")), ("B", ">3", cell("B")), ("D", ">4", cell("D"))]
    columns += [("H", ">4", cell("H"))]
    columns += [(k, ">8", cell(f"{k}_us", ".2f")) for k in ("step", "bound", "unbound", "call")]
    columns += [
        ("python", ">7", cell("python_us", ".2f")),
        ("torch", ">7", cell("torch_us", ".2f")),
    ]
    columns += [("torch/step", ">10", cell("vs_torch", ".1f", "x"))]
    columns += [("target", ">7", lambda r: f"{r['target_us']:.1f}" if "target_us" in r else "-")]
    columns += [("met", ">4", lambda r: ("yes" if r["met"] else "no") if "met" in r else "-")]
    print(text_table(columns, rows))
    write_json(args.out, {"machine": machine, "isa": _core.active_isa(), "rows": rows})


if __name__ == "__main__":
    main()
