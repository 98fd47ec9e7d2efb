"""compare's quantized rows (issue 16): rnnfast's bf16 and int8 inference (rnnfast.quantize's
kernels) beside float32 rnnfast, torch and ONNX Runtime, on the float32 shapes of the run.

For each float32 shape and thread count, the forward modes (fwd_seq, fwd_last) run on weights
quantized as ``rnnfast.quantize`` stores them (nn.quantized.formats); each quantized result is
first checked against float32 rnnfast within the error bound rnnfast.quantize states
(ERROR_BOUND), then float32 rnnfast, int8 and bf16 are timed with their repeats alternating
(one thread pool, so the machine's load lands on all three alike). torch's and ORT's times are
the float32 row's, from the same run. Bytes: float32 weights, the quantized weights as stored
(data and scales) and the kernels' packed copies.

Targets (targets' form, reported, never asserted): at B = 1, H = 1024 int8 >= 3x and
bf16 >= 1.8x float32 forward; at B = 64, H = 1024 int8 >= 2x with VNNI and >= 4x with AMX (the
path the kernels chose); on every row neither is slower than float32.
"""

from __future__ import annotations

import numpy as np

from bench._common import relative_error, thread_count, time_alternating
from bench.peers.compare.shapes import Problem
from bench.peers.compare.targets import check
from rnnfast import _core, functional
from rnnfast.nn.quantized.formats import MODES, QuantizedWeight
from rnnfast.quantize import ERROR_BOUND

FORWARD_MODES = ("fwd_seq", "fwd_last")
# ||y_q - y|| / ||y|| against float32: the bound rnnfast.quantize states (tested in
# tests/test_quantize.py); a copy, so that a test can tighten it for this module alone
REL_ERROR = dict(ERROR_BOUND)


def quantized_runners(p: Problem) -> dict:
    """{mode: {"float32" | "bf16" | "int8": run}}; each run returns (y or None, h_n)."""
    bias = None if p.b_ih is None else (p.b_ih + p.b_hh).astype(np.float32)
    weights = {m: [QuantizedWeight.from_float(m, w) for w in (p.w_ih, p.w_hh)] for m in MODES}

    def runs(sequences):
        out = {
            "float32": lambda: functional.rnn_forward(
                p.x, p.w_ih, p.w_hh, p.b_ih, p.b_hh, return_sequences=sequences
            )
        }
        for m, (w_ih, w_hh) in weights.items():
            packed = (w_ih.packed, w_hh.packed)
            out[m] = lambda packed=packed: functional.quantized_rnn_forward(
                p.x, *packed, bias, return_sequences=sequences
            )
        return out

    return {"fwd_seq": runs(True), "fwd_last": runs(False)}, weights


def weight_bytes(p: Problem, weights: dict) -> dict:
    """Bytes of W_ih and W_hh: float32, and per mode as stored and as the kernels pack them."""
    out = {"float32": p.w_ih.nbytes + p.w_hh.nbytes}
    for m, ws in weights.items():
        out[m] = sum(w.nbytes for w in ws)
        out[f"{m}_packed"] = sum(w.packed.nbytes for w in ws)
    return out


def check_bound(p: Problem, mode: str, results: dict) -> dict:
    """Each quantized result's relative error against float32; abort on one above its bound."""
    index = 0 if mode == "fwd_seq" else 1
    ref = results["float32"][index]
    errors = {}
    for m in MODES:
        err = float(np.linalg.norm(results[m][index] - ref) / np.linalg.norm(ref))
        errors[m] = err
        if not err < REL_ERROR[m]:
            raise SystemExit(
                f"QUANTIZED OUT OF BOUND: {p.label} {mode} {m}: relative error {err:.3g} >= "
                f"{REL_ERROR[m]:g}; nothing timed"
            )
    errors["max_elementwise"] = {m: relative_error(results[m][index], ref) for m in MODES}
    return errors


def bench_quantized(problems: list, threads_list: list, float_rows: list, args) -> list:
    """Quantized rows for every float32 problem and thread count of the run."""
    rows = []
    for p in problems:
        for threads in threads_list:
            with thread_count(threads):
                runners, weights = quantized_runners(p)
                nbytes = weight_bytes(p, weights)
                for mode in FORWARD_MODES:
                    fns = runners[mode]
                    errors = check_bound(p, mode, {k: fn() for k, fn in fns.items()})
                    timed = time_alternating(
                        fns,
                        args.repeats,
                        args.min_repeat_s,
                        args.warmup_s,
                    )
                    peer = next(
                        (
                            r
                            for r in float_rows
                            if r["dtype"] == "float32"
                            and r["threads"] == threads
                            and r["label"] == p.label
                            and r["mode"] == mode
                        ),
                        None,
                    )
                    rows.append(quantized_row(p, threads, mode, timed, peer, nbytes, errors))
    return rows


def quantized_row(p, threads, mode, timed, peer, nbytes, errors) -> dict:
    base = timed["float32"]["median_s"]
    peers = {}
    if peer is not None:
        for lib in ("torch", "ort"):
            if lib in peer["libs"]:
                t = peer["libs"][lib]["median_ms"] / 1e3
                peers[lib] = {m: t / timed[m]["median_s"] for m in MODES}
    return {
        "dtype": "float32",
        "threads": threads,
        "label": p.label,
        "shape": dict(zip("TBDH", p.shape)),
        "mode": mode,
        "median_ms": {k: t["median_s"] * 1e3 for k, t in timed.items()},
        "speedup_over_float32": {m: base / timed[m]["median_s"] for m in MODES},
        "speedup_over_peer": peers,
        "paths": {m: _core.quantized_path(m) for m in MODES},
        "bytes": nbytes,
        "relative_error": errors,
    }


def quantized_targets(rows: list) -> list:
    """Issue 16's speed targets on the quantized rows."""
    out = []
    for r in rows:
        # targets.check reads a row's threads, label and mode
        x = r["speedup_over_float32"]
        B, H = r["shape"]["B"], r["shape"]["H"]
        for m in MODES:
            out.append(check(f"{m} never slower than float32 forward", r, x[m], 1.0, x[m] >= 1.0))
        if H == 1024 and B == 1:
            out.append(
                check("int8 >= 3x float32 at B=1, H=1024", r, x["int8"], 3.0, x["int8"] >= 3.0)
            )
            out.append(
                check("bf16 >= 1.8x float32 at B=1, H=1024", r, x["bf16"], 1.8, x["bf16"] >= 1.8)
            )
        if H == 1024 and B == 64:
            path = r["paths"]["int8"]
            goal = 4.0 if path == "amx" else 2.0 if "vnni" in path else None
            if goal is not None:
                out.append(
                    check(
                        f"int8 >= {goal:g}x float32 at B=64, H=1024 ({path})",
                        r,
                        x["int8"],
                        goal,
                        x["int8"] >= goal,
                    )
                )
    return out


def print_quantized(rows: list) -> None:
    """One table: per shape, thread count and mode, float32 / int8 / bf16 times, the speed-ups
    over float32 rnnfast, torch and ORT, the paths and the weights' bytes."""
    if not rows:
        return
    paths = rows[0]["paths"]
    print()
    print(
        f"quantized forward (rnnfast.quantize's kernels; int8 path {paths['int8']}, bf16 path "
        f"{paths['bf16']}); x = float32 rnnfast time / quantized time; torch x, ort x = their "
        "float32 time / the quantized time; MiB = W_ih + W_hh stored (packed)"
    )
    head = (
        f"{'shape':<18}{'thr':>4} {'mode':<9}{'f32 ms':>9}{'int8 ms':>9}{'x':>6}"
        f"{'bf16 ms':>9}{'x':>6}{'torch x i8/bf':>15}{'ort x i8/bf':>13}"
        f"{'f32 MiB':>9}{'int8 MiB':>15}{'bf16 MiB':>15}"
    )
    print(head)
    mib = 1 << 20
    for r in rows:
        t, x, b = r["median_ms"], r["speedup_over_float32"], r["bytes"]

        def pair(lib):
            s = r["speedup_over_peer"].get(lib)
            return "-" if s is None else f"{s['int8']:.2f}/{s['bf16']:.2f}"

        print(
            f"{r['label']:<18}{r['threads']:>4} {r['mode']:<9}{t['float32']:>9.3f}"
            f"{t['int8']:>9.3f}{x['int8']:>6.2f}{t['bf16']:>9.3f}{x['bf16']:>6.2f}"
            f"{pair('torch'):>15}{pair('ort'):>13}{b['float32'] / mib:>9.2f}"
            f"{b['int8'] / mib:>7.2f} ({b['int8_packed'] / mib:.2f})"
            f"{b['bf16'] / mib:>7.2f} ({b['bf16_packed'] / mib:.2f})"
        )
