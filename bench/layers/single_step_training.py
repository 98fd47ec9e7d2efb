"""A training step of one time step: a GRU's or LSTM's forward and backward at T = 1 (a
decoder's call inside its Python loop), against the time its arithmetic takes at the
measured roofline.

    python -m bench.layers.single_step_training [--cases T,B,D,H;...] [--cells gru,lstm]
                                                [--repeats 15] [--out PATH]

For each cell and shape (default T = 1, B = 32, D = H = 256, float32, one thread pinned to one
core), timed as medians of alternating repeats:

- ``layer``: ``y, h = layer(x); layer.backward(dy)`` in training mode, the layer's packed
  weights kept between calls (its cache: issue 41), the gradients added into ``layer.grads``;
- ``kernels``: the same two kernel calls (``_core.gated_forward`` / ``gated_backward``) with a
  weight cache, the layer's Python left out;
- ``torch``: ``nn.GRU`` / ``nn.LSTM`` forward and backward (autograd), the same shape.

``roofline`` is the call's FLOPs (forward 2 B (D + H) G H, backward twice that) over the
matmul rate NumPy and torch reach at 2048^3 on the same thread (bench.peers.compare's
roofline); the target (issue 41) is the layer within 1.3x of it. Prints the CPU, ISA and BLAS,
and writes JSON (default bench/results/single_step_training.json).
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

import rnnfast
from bench import RESULTS
from bench._common import (
    SHAPE_COLUMNS,
    add_timing_arguments,
    cell,
    cores_for,
    cpu_model,
    numpy_blas_summary,
    parse_cases,
    pinned_to,
    split_names,
    text_table,
    thread_count,
    time_alternating,
    write_json,
)
from bench.peers.compare.roofline import measure_roofline
from rnnfast import _core

TARGET = 1.3  # the layer's time over the roofline's
GATES = {"gru": 3, "lstm": 4}
LAYERS = {"gru": rnnfast.GRU, "lstm": rnnfast.LSTM}
TORCH = {"gru": torch.nn.GRU, "lstm": torch.nn.LSTM}


def flops(name, t, b, d, h):
    """A forward's and its backward's multiply-adds, times two."""
    forward = 2 * t * b * (d + h) * GATES[name] * h
    return 3 * forward


def runners(name, t, b, d, h):
    """The timed functions of one cell and shape, each a forward and backward."""
    rng = np.random.default_rng(0)
    layer = LAYERS[name](d, h, seed=0).train()
    x = rng.standard_normal((t, b, d)).astype(np.float32)
    dy = np.ones((t, b, h), np.float32)

    def layer_step():
        layer(x)
        layer.backward(dy)

    p = layer._params
    w_ih, w_hh = p["weight_ih_l0"], p["weight_hh_l0"]
    b_ih, b_hh = p["bias_ih_l0"], p["bias_hh_l0"]
    cache = _core.WeightCache()
    acts = ("tanh", "sigmoid")

    def kernels():
        y, _, _, ws = _core.gated_forward(
            name, x, None, None, w_ih, w_hh, b_ih, b_hh, None, None, *acts, True, True,
            weight_cache=cache,
        )  # fmt: skip
        _core.gated_backward(
            name, x, None, None, w_ih, w_hh, None, y, ws, dy, None, None, None, *acts, True,
            weight_cache=cache,
        )  # fmt: skip

    module = TORCH[name](d, h)
    tx = torch.from_numpy(x).requires_grad_(True)
    tdy = torch.from_numpy(dy)

    def torch_step():
        module.zero_grad(set_to_none=True)
        tx.grad = None
        module(tx)[0].backward(tdy)

    return {"layer": layer_step, "kernels": kernels, "torch": torch_step}


def measure(args, roof):
    rows = []
    with thread_count(1), pinned_to(cores_for(1)):
        for name in args.cells:
            for t, b, d, h in args.cases:
                timed = time_alternating(runners(name, t, b, d, h), args.repeats, 0.05)
                ms = {k: v["median_s"] * 1e3 for k, v in timed.items()}
                bound_ms = flops(name, t, b, d, h) / roof["matmul_gflops"] / 1e6
                row = {"cell": name, "T": t, "B": b, "D": d, "H": h}
                row.update({f"{k}_ms": v for k, v in ms.items()}, roofline_ms=bound_ms)
                row["layer_vs_roofline"] = ms["layer"] / bound_ms
                row["kernels_vs_roofline"] = ms["kernels"] / bound_ms
                row["torch_vs_layer"] = ms["torch"] / ms["layer"]
                row["met"] = row["layer_vs_roofline"] <= TARGET
                rows.append(row)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=parse_cases, default=[(1, 32, 256, 256)])
    parser.add_argument("--cells", default="gru,lstm")
    add_timing_arguments(parser, 15, 0.05, RESULTS / "single_step_training.json")
    args = parser.parse_args(argv)
    args.cells = split_names(args.cells, "--cells", tuple(LAYERS))
    with pinned_to(cores_for(1)):
        roof = measure_roofline(np.float32, 1, 5)
    rows = measure(args, roof)
    machine = f"{cpu_model()}, rnnfast {_core.active_isa()}, 1 thread, float32"
    print(f"a training step of one time step, ms (medians of {args.repeats} alternating repeats)")
    print(f"{machine}; roofline {roof['matmul_gflops']:.1f} GFLOP/s ({roof['matmul_from']})")
    print(numpy_blas_summary())
    columns = [("cell", "<5", cell("cell")), *SHAPE_COLUMNS]
    columns += [(k, ">8", cell(f"{k}_ms", ".3f")) for k in ("layer", "kernels", "torch")]
    columns += [("roofline", ">8", cell("roofline_ms", ".3f"))]
    columns += [("layer/roof", ">10", cell("layer_vs_roofline", ".2f", "x"))]
    columns += [("kernels/roof", ">12", cell("kernels_vs_roofline", ".2f", "x"))]
    columns += [("torch/layer", ">11", cell("torch_vs_layer", ".2f", "x"))]
    columns += [("<=1.3x", ">6", lambda r: "yes" if r["met"] else "no")]
    print(text_table(columns, rows))
    write_json(args.out, {"machine": machine, "roofline": roof, "rows": rows})


if __name__ == "__main__":
    main()
