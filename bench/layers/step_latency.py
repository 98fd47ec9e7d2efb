"""Streaming: what one ``layer.step(x_t, state)`` call costs, and where the time goes.

    python -m bench.layers.step_latency [--shapes B,D,H;...] [--cells rnn,gru,lstm]
                                        [--dtype float32] [--repeats 15] [--out PATH]
                                        [--min-repeat-s 0.05] [--warmup-s 0.25]

For each cell and shape (default B = 1, D = H = 64, float32, one thread, pinned to one core), a
streaming loop that carries the state from call to call (a tight loop of 64 steps per timed
call, as a user's loop, so the harness adds no Python of its own), timed as medians of
alternating repeats (microseconds per step):

- ``step``: the API call, ``out, state = layer.step(x, state)``;
- ``bound``: the layer's bound step alone (``layer._stepper``, a ``_core.StepFunction``: the
  weights looked up in the layer's parameter dict and checked, the output allocated, the
  kernel), i.e. ``step`` less its Python;
- ``unbound``: the kernel through the binding that takes every array and option per call
  (``_core.rnn_step`` / ``_core.gated_step``), which step() called before it was bound;
- ``call``: a trivial call into ``_core`` (``get_num_threads``), the floor of any binding;
- ``torch``: torch's cell (``nn.RNNCell`` / ``GRUCell`` / ``LSTMCell``), its parameters
  without gradients (no graph, as under ``no_grad``);
- ``layer(x)``: a call of the layer on one step, ``y, state = layer(x_t[None], state)`` (eval
  mode), and ``call/step`` its cost over the step's (issue 41's target: at most 2x).

The targets (issue 25): RNN.step at most 1.0 us, GRU 1.5 us, LSTM 2.0 us at B = 1, D = H = 64;
a layer call of one step at most 2x the step (issue 41).
Prints the table with the CPU and ISA, and writes JSON (default bench/results/step_latency.json).
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

import rnnfast
from bench import RESULTS
from bench._common import (
    add_timing_arguments,
    cell,
    cores_for,
    cpu_model,
    parse_tuples,
    pinned_to,
    split_names,
    text_table,
    thread_count,
    time_alternating,
    write_json,
)
from rnnfast import _core

TARGET_US = {"rnn": 1.0, "gru": 1.5, "lstm": 2.0}
CALL_TARGET = 2.0  # a layer call of one step, over the step (issue 41)
LAYERS = {"rnn": rnnfast.RNN, "gru": rnnfast.GRU, "lstm": rnnfast.LSTM}
TORCH_CELLS = {"rnn": "RNNCell", "gru": "GRUCell", "lstm": "LSTMCell"}
MIN_REPEAT_S = 0.05


def parse_shapes(text):
    """``"B,D,H;..."`` as a list of (B, D, H) tuples of positive ints."""
    return parse_tuples(text, "B,D,H", "--shapes")


# Steps per timed call: each call is a tight streaming loop, as a user's, so that the harness's
# own Python (a method and a lambda per step: 0.1-0.2 us) is not in the figures.
STEPS_PER_CALL = 64


class _Loop:
    """STEPS_PER_CALL steps of a streaming loop, each from the state the one before returned:
    ``fn(x, state)`` gives ``(out, state)`` (``pair``) or the state alone."""

    def __init__(self, fn, x, state, pair=True):
        self.fn, self.x, self.state, self.pair = fn, x, state, pair

    def __call__(self):
        fn, x, s = self.fn, self.x, self.state
        if self.pair:
            for _ in range(STEPS_PER_CALL):
                s = fn(x, s)[1]
        else:
            for _ in range(STEPS_PER_CALL):
                s = fn(x, s)
        self.state = s


def _calls(fn):
    """STEPS_PER_CALL calls of fn() with no arguments (the floor of any binding)."""

    def run():
        for _ in range(STEPS_PER_CALL):
            fn()

    return run


def runners(name, batch, d, h, dtype):
    """The timed functions of one cell and shape, each a streaming loop."""
    layer = LAYERS[name](d, h, dtype=dtype, seed=0).eval()
    x = np.random.default_rng(0).standard_normal((batch, d)).astype(dtype)
    _, first = layer.step(x)  # binds the step; the state every loop starts from
    bound = layer._stepper
    p, names = layer._params, layer._names[0]
    weights = [p[n] if n else None for n in names]
    if name == "rnn":

        def unbound(x, s):
            return _core.rnn_step(x, s, *weights, layer.nonlinearity, 1.0)

        start = first[0]
    else:
        cell_name = "gru" if name == "gru" else "lstm"
        c0 = first[1][0] if name == "lstm" else None

        def unbound(x, s):
            out = _core.gated_step(
                cell_name, x, s[0], s[1], *weights, None, "tanh", "sigmoid"
            )  # fmt: skip
            return out if isinstance(out, tuple) else (out, None)

        start = (first[0][0], c0) if name == "lstm" else (first[0], None)
    module = getattr(torch.nn, TORCH_CELLS[name])(d, h).to(
        torch.float64 if dtype == np.float64 else torch.float32
    )
    module.requires_grad_(False)  # no graph, as under no_grad
    tx = torch.from_numpy(x)
    x_seq = x[None]  # (1, B, D): a call of one step

    def layer_call(x, s):
        return layer(x_seq, s)

    return {
        "layer_call": _Loop(layer_call, x, first),
        "step": _Loop(layer.step, x, first),
        "bound": _Loop(bound, x, first),
        "unbound": _Loop(unbound, x, start, pair=False),
        "call": _calls(_core.get_num_threads),
        "torch": _Loop(module, tx, module(tx), pair=False),
    }


def measure(args):
    rows = []
    with thread_count(1), pinned_to(cores_for(1)):
        for name in args.cells:
            for batch, d, h in args.shapes:
                fns = runners(name, batch, d, h, args.dtype)
                t = time_alternating(fns, args.repeats, args.min_repeat_s, args.warmup_s)
                us = {k: v["median_s"] * 1e6 / STEPS_PER_CALL for k, v in t.items()}
                row = {
                    "cell": name,
                    "B": batch,
                    "D": d,
                    "H": h,
                    **{f"{k}_us": v for k, v in us.items()},
                }
                row["python_us"] = us["step"] - us["bound"]
                row["vs_torch"] = us["torch"] / us["step"]
                row["call_vs_step"] = us["layer_call"] / us["step"]
                row["call_met"] = row["call_vs_step"] <= CALL_TARGET
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
    add_timing_arguments(parser, 15, MIN_REPEAT_S, RESULTS / "step_latency.json")
    args = parser.parse_args(argv)
    args.cells = split_names(args.cells, "--cells", tuple(LAYERS))
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
    columns += [("layer(x)", ">8", cell("layer_call_us", ".2f"))]
    columns += [("call/step", ">9", cell("call_vs_step", ".2f", "x"))]
    columns += [("<=2x", ">5", lambda r: "yes" if r["call_met"] else "no")]
    print(text_table(columns, rows))
    write_json(args.out, {"machine": machine, "isa": _core.active_isa(), "rows": rows})


if __name__ == "__main__":
    main()
