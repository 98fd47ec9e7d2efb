"""Deployment interop measured (issue 17): rnnfast against onnxruntime on the graph
``rnnfast.io.onnx.export`` writes of the same model, and ``rnnfast.torch.RNN`` against
``torch.nn.RNN`` inside a torch training step.

    python -m bench.interop.onnx_vs_rnnfast [--cases "T,B,D,H;..."] [--threads 1] [--repeats 7]
                                            [--min-repeat-s 0.2] [--out PATH]

1. Inference, float32, eval mode: ``RNN(D, H)`` (one layer) and ``RNN(D, H, num_layers=2,
   bidirectional=True)`` over (T, B, D) time-major input with variable lengths (lengths=True:
   the batch's lengths spread over [T/2, T]); rnnfast's call against ``InferenceSession.run``
   of the exported model (CPU provider, intra-op threads = --threads, spinning off, full
   graph optimisation). The two outputs' relative difference is shown beside the times.
2. Training step, float32: forward, a loss of y and h_n, backward (the gradients of the input,
   h0 and every parameter) of ``rnnfast.torch.RNN`` against ``torch.nn.RNN`` with the same
   weights, B x T x D batch-first input, torch's autograd around both; the input gradients'
   relative difference beside the times.

Times are medians of repeats that alternate between the two sides (bench/_common.py), each
repeat at least --min-repeat-s long; ratio = the peer's time / rnnfast's (> 1: rnnfast is
faster). Prints the tables with the ISA and thread count and writes JSON (default
bench/results/onnx_vs_rnnfast.json).
"""

from __future__ import annotations

import argparse
import platform

import numpy as np
import onnxruntime as ort
import torch

import rnnfast
import rnnfast.torch as rt
from bench import RESULTS
from bench._common import (
    SHAPE_COLUMNS,
    cell,
    log,
    parse_cases,
    relative_error,
    text_table,
    thread_count,
    time_alternating,
    write_json,
)
from rnnfast import _core
from rnnfast.io import onnx as rx

# (T, B, D, H): H <= 128 (where the kernels gain most over the peers), then larger
DEFAULT_CASES = "100,1,32,64;100,16,64,128;100,64,64,128;50,32,256,512;20,8,512,1024"


def session(model, threads):
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # ORT's pool would otherwise spin between runs and take the cores rnnfast's repeat uses
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


# the models both comparisons time: (name, rnnfast.RNN / torch.nn.RNN options)
MODELS = (
    ("RNN 1 layer", {}),
    ("RNN 2 layers bidir", {"num_layers": 2, "bidirectional": True}),
)


def row(what, model, case, timings, columns, diff):
    """One row of a table, logged: the model, its shape (T, B, D, H), rnnfast's median and the
    peer's in ms (``columns``: timing name -> row key, rnnfast's first), the peer/rnnfast ratio
    and the agreement ``diff`` (key, value)."""
    (fast_name, fast_key), (peer_name, peer_key) = columns.items()
    fast, peer = timings[fast_name]["median_s"], timings[peer_name]["median_s"]
    T, B, D, H = case
    log(f"{what} {model} T={T} B={B} D={D} H={H}: {peer / fast:.2f}x")
    return {
        "model": model,
        "T": T,
        "B": B,
        "D": D,
        "H": H,
        fast_key: fast * 1e3,
        peer_key: peer * 1e3,
        "ratio": peer / fast,
        diff[0]: diff[1],
        "timings": timings,
    }


def inference_rows(cases, threads, repeats, min_repeat_s):
    rows = []
    for name, config in MODELS:
        for T, B, D, H in cases:
            rng = np.random.default_rng(0)
            layer = rnnfast.RNN(D, H, seed=0, **config).eval()
            x = rng.standard_normal((T, B, D)).astype(np.float32)
            lengths = rng.integers(max(1, T // 2), T + 1, size=B)
            lengths[0] = T
            sess = session(rx.export(layer, None, lengths=True), threads)
            feeds = {"x": x, "lengths": lengths}
            y_fast, _ = layer(x, lengths=lengths)
            y_ort, _ = sess.run(None, feeds)
            err = relative_error(y_ort, y_fast)
            fns = {
                "rnnfast": lambda: layer(x, lengths=lengths),
                "onnxruntime": lambda: sess.run(None, feeds),
            }
            t = time_alternating(fns, repeats, min_repeat_s)
            columns = {"rnnfast": "rnnfast_ms", "onnxruntime": "onnxruntime_ms"}
            rows.append(row("inference", name, (T, B, D, H), t, columns, ("rel_diff", err)))
    return rows


def training_rows(cases, threads, repeats, min_repeat_s):
    rows = []
    for name, config in MODELS:
        for T, B, D, H in cases:
            torch.manual_seed(0)
            ref = torch.nn.RNN(D, H, batch_first=True, **config)
            mine = rt.from_torch(ref)
            g = torch.Generator().manual_seed(1)
            x = torch.randn(B, T, D, generator=g).requires_grad_(True)
            rows_h = ref.num_layers * (2 if ref.bidirectional else 1)
            h0 = torch.randn(rows_h, B, H, generator=g).requires_grad_(True)

            def step(module):
                module.zero_grad(set_to_none=True)
                x.grad = h0.grad = None
                y, h_n = module(x, h0)
                (y.square().mean() + h_n.sum()).backward()
                return x.grad

            err = relative_error(step(mine).numpy(), step(ref).numpy())
            t = time_alternating(
                {"rnnfast.torch": lambda: step(mine), "torch.nn.RNN": lambda: step(ref)},
                repeats,
                min_repeat_s,
            )
            columns = {"rnnfast.torch": "rnnfast_torch_ms", "torch.nn.RNN": "torch_ms"}
            rows.append(row("training", name, (T, B, D, H), t, columns, ("rel_diff_dx", err)))
    return rows


def table(rows, fast_key, peer_key, fast_name, peer_name, diff_key):
    columns = [("model", "<20", cell("model")), *SHAPE_COLUMNS]
    columns += [(f"{fast_name} ms", ">16", cell(fast_key, ".3f"))]
    columns += [(f"{peer_name} ms", ">16", cell(peer_key, ".3f"))]
    columns += [
        ("ratio", ">7", cell("ratio", ".2f", "x")),
        ("rel diff", ">9", cell(diff_key, ".1e")),
    ]
    return text_table(columns, rows)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default=DEFAULT_CASES, help="T,B,D,H;... (default: %(default)s)")
    parser.add_argument("--threads", type=int, default=1, help="threads per library (default 1)")
    parser.add_argument("--repeats", type=int, default=7, help="alternating repeats (default 7)")
    parser.add_argument("--min-repeat-s", type=float, default=0.2, help="seconds per repeat")
    parser.add_argument("--skip", choices=["inference", "training"], action="append", default=[])
    parser.add_argument("--out", default=str(RESULTS / "onnx_vs_rnnfast.json"))
    args = parser.parse_args(argv)
    cases = parse_cases(args.cases)
    isa = _core.active_isa()
    header = (
        f"rnnfast {rnnfast.__version__} ISA {isa}, threads {args.threads}, onnxruntime "
        f"{ort.__version__}, torch {torch.__version__}, {platform.processor() or platform.machine()}"
    )
    print(header)
    result = {"isa": isa, "threads": args.threads, "header": header}
    with thread_count(args.threads):
        if "inference" not in args.skip:
            rows = inference_rows(cases, args.threads, args.repeats, args.min_repeat_s)
            result["inference"] = rows
            print("\nInference, float32, lengths: rnnfast vs onnxruntime on the exported graph")
            print(table(rows, "rnnfast_ms", "onnxruntime_ms", "rnnfast", "onnxruntime", "rel_diff"))
        if "training" not in args.skip:
            rows = training_rows(cases, args.threads, args.repeats, args.min_repeat_s)
            result["training"] = rows
            print("\nTraining step (forward + backward), float32, batch_first, h0:")
            print(
                table(
                    rows,
                    "rnnfast_torch_ms",
                    "torch_ms",
                    "rnnfast.torch",
                    "torch.nn.RNN",
                    "rel_diff_dx",
                )
            )
    write_json(args.out, result)


if __name__ == "__main__":
    main()
