"""Composed layers against torch.nn.RNN: a 2-layer bidirectional stack and variable-length
batches (torch with PackedSequence), forward inference and a training step, 1 and 2 threads.
Then the masked kernels against rnnfast's own plain kernels of the same shape (torch has no
general masks nor recurrent dropout): a Keras-style (T, B) step mask, recurrent dropout, both;
their cost over the plain layer is the figure (target: at most 10%). Then dilated layers against
the plain layer of the same shape (target: at least as fast), and a teacher-forced JordanRNN
training step against the RNN (+ Dense) step of the same D, H, O at T >= 100 (target: at least
3x faster; the GEMM flops of the two, 6 T B H (D + 2 O) and 6 T B H (D + H + O), are shown
beside it: their ratio is what the step's parallelism alone cannot beat).

    python -m bench.layers.composition [--repeats 7] [--threads 1,2]
                                       [--cases torch,masks,dilation,jordan] [--out PATH]

Every case is first checked for agreement (outputs, h_n, input and weight gradients: against
torch, or for the masked rows against rnnfast.reference); timings are medians per call,
measured with the bench scripts' timing helpers in _common.py (warm-up, one library after the
other; the masked and plain rnnfast runners alternate their repeats). Prints a table and writes
JSON (default bench/results/composition.json).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

import rnnfast
from bench import RESULTS, _common
from bench._common import relative_error
from bench.layers._jordan_step import StepCase, step_runners

T, B, D, H = 50, 32, 256, 256
CASES = {
    # name: (num_layers, bidirectional, variable lengths)
    "2-layer bidirectional": (2, True, False),
    "variable lengths": (1, False, True),
    "2-layer bidirectional, variable lengths": (2, True, True),
}
TOLERANCE = 2e-4  # float32, relative to the largest magnitude


def make_case(num_layers, bidirectional, varlen, seed=0):
    """An rnnfast layer and a torch module with the same weights, input, lengths, seeds."""
    rng = np.random.default_rng(seed)
    layer = rnnfast.RNN(D, H, num_layers=num_layers, bidirectional=bidirectional, seed=seed)
    module = layer.to_torch()
    x = rng.standard_normal((T, B, D)).astype(np.float32)
    lengths = rng.integers(T // 4, T + 1, size=B) if varlen else None
    if varlen:
        lengths[0] = T  # the padded batch is T long, as a data loader would make it
    return layer, module, x, lengths


def rnnfast_runners(layer, x, lengths):
    def forward():
        layer.eval()
        return layer(x, lengths=lengths)

    def train():
        layer.train()
        layer.zero_grad()
        y, _ = layer(x, lengths=lengths)
        dx, _ = layer.backward(np.ones_like(y))
        return y, dx, layer.grads

    return forward, train


def torch_runners(module, x, lengths):
    xt = torch.from_numpy(x)
    lt = None if lengths is None else torch.from_numpy(lengths)

    def run(inp):
        if lt is None:
            return module(inp)
        packed = torch.nn.utils.rnn.pack_padded_sequence(inp, lt, enforce_sorted=False)
        out, h_n = module(packed)
        y, _ = torch.nn.utils.rnn.pad_packed_sequence(out, total_length=T)
        return y, h_n

    def forward():
        with torch.no_grad():
            return run(xt)

    def train():
        module.zero_grad()
        inp = xt.clone().requires_grad_(True)
        y, _ = run(inp)
        y.sum().backward()
        return y, inp.grad, {k: v.grad for k, v in module.named_parameters()}

    return forward, train


def check_agreement(name, fast, slow):
    """Outputs, h_n, dx and every weight gradient of rnnfast and torch agree, or abort."""
    (y, h_n), (yt, h_nt) = fast[0](), slow[0]()
    errors = {"y": relative_error(y, yt.numpy()), "h_n": relative_error(h_n, h_nt.numpy())}
    (_, dx, grads), (_, dxt, grads_t) = fast[1](), slow[1]()
    errors["dx"] = relative_error(dx, dxt.numpy())
    for key, g in grads.items():
        errors[key] = relative_error(g, grads_t[key].numpy())
    worst = max(errors.values())
    if not worst <= TOLERANCE:
        raise SystemExit(f"DISAGREEMENT in {name}: {errors}")
    return worst


# ---- masked kernels against the plain ones (functional API, one layer) ------------------------

MASK_CASES = {
    # name: (step mask, zero_output_for_mask, recurrent dropout)
    "general mask": (True, False, False),
    "general mask, zero outputs": (True, True, False),
    "recurrent dropout": (False, False, True),
    "general mask + recurrent dropout": (True, False, True),
}
KEEP_RATE = 0.8  # of the step mask: a fifth of the steps skipped, anywhere in the sequence
RECURRENT_DROPOUT = 0.25


def make_mask_case(step_mask, zero_output_for_mask, dropout, seed=0):
    """Weights, input and the forward's options of one masked case (and of its plain twin)."""
    rng = np.random.default_rng(seed)
    bound = 1 / np.sqrt(H)
    arrays = {
        "x": rng.standard_normal((T, B, D)).astype(np.float32),
        "weight_ih": rng.uniform(-bound, bound, (H, D)).astype(np.float32),
        "weight_hh": rng.uniform(-bound, bound, (H, H)).astype(np.float32),
        "bias_ih": rng.uniform(-bound, bound, H).astype(np.float32),
        "bias_hh": rng.uniform(-bound, bound, H).astype(np.float32),
    }
    plain = dict(rnnfast.functional.PLAIN_FORWARD_OPTIONS)
    masked = dict(plain, zero_output_for_mask=zero_output_for_mask)
    if step_mask:
        masked["step_mask"] = rng.random((T, B)) < KEEP_RATE
    if dropout:
        keep = rng.random((B, H)) >= RECURRENT_DROPOUT
        masked["recurrent_mask"] = (keep / (1 - RECURRENT_DROPOUT)).astype(np.float32)
    return arrays, plain, masked


def functional_runners(arrays, opts):
    """forward (every output) and train (forward, then backward from dy = ones) of one layer."""
    F = rnnfast.functional
    a = arrays
    dy = np.ones((T, B, H), np.float32)

    def forward():
        return F.rnn_forward(
            a["x"], a["weight_ih"], a["weight_hh"], a["bias_ih"], a["bias_hh"], **opts
        )

    def train():
        y, _ = forward()
        return y, F.rnn_backward(a["x"], a["weight_ih"], a["weight_hh"], y, dy, **opts)

    return forward, train


def check_masked_against_reference(name, arrays, opts):
    """Outputs, h_n and every gradient of the masked kernels against the NumPy reference."""
    ref = rnnfast.reference
    up = {k: v.astype(np.float64) for k, v in arrays.items()}
    ref_opts = dict(
        opts,
        recurrent_mask=None
        if opts["recurrent_mask"] is None
        else opts["recurrent_mask"].astype(np.float64),
    )
    _, train = functional_runners(arrays, opts)
    y, g = train()
    _, h_n = functional_runners(arrays, opts)[0]()
    y_ref, h_ref = ref.rnn_forward(**up, **ref_opts)
    g_ref = ref.rnn_backward(
        up["x"],
        up["weight_ih"],
        up["weight_hh"],
        y.astype(np.float64),
        np.ones((T, B, H)),
        **ref_opts,
    )
    errors = {"y": relative_error(y, y_ref), "h_n": relative_error(h_n, h_ref)}
    errors.update({k: relative_error(a, b) for k, a, b in zip(g._fields, g, g_ref)})
    worst = max(errors.values())
    if not worst <= TOLERANCE:
        raise SystemExit(f"DISAGREEMENT in {name}: {errors}")
    return worst


def timed_ms(timer, fns: dict, args) -> dict:
    """Median milliseconds per call of each function, timed by _common.time_each or
    _common.time_alternating."""
    t = timer(fns, args.repeats, args.min_repeat_ms / 1e3)
    return {k: 1e3 * v["median_s"] for k, v in t.items()}


def add_row(rows, name, threads, mode, ms: dict, figure: tuple, worst: float) -> None:
    """One JSON row, and its table line: the two times in ms's order, then the figure."""
    key, value, text = figure
    rows.append(
        {
            "case": name,
            "threads": threads,
            "mode": mode,
            **{f"{lib}_ms": t for lib, t in ms.items()},
            key: value,
            "max_relative_difference": worst,
        }
    )
    first, second = ms.values()
    print(f"{name:<42} {threads:>7} {mode:<8} {first:>11.3f} {second:>9.3f} {text}", flush=True)


def torch_table(args, rows):
    print("lengths uniform in [T/4, T]; x = torch time / rnnfast time")
    print(f"{'case':<42} {'threads':>7} {'mode':<8} {'rnnfast ms':>11} {'torch ms':>9} {'x':>6}")
    for threads in args.threads:
        with _common.thread_count(threads):
            for name, spec in CASES.items():
                layer, module, x, lengths = make_case(*spec)
                fast, slow = rnnfast_runners(layer, x, lengths), torch_runners(module, x, lengths)
                worst = check_agreement(name, fast, slow)
                for mode, i in (("forward", 0), ("train", 1)):
                    fns = {"rnnfast": fast[i], "torch": slow[i]}
                    ms = timed_ms(_common.time_each, fns, args)
                    ratio = ms["torch"] / ms["rnnfast"]
                    add_row(
                        rows, name, threads, mode, ms, ("speedup", ratio, f"{ratio:>6.2f}"), worst
                    )
    met = sum(r["speedup"] >= 3.0 for r in rows)
    print(f"target >= 3x torch: {met}/{len(rows)} rows")


def masks_table(args, rows):
    print(
        f"\nmasked kernels vs plain, one layer (functional API); step mask keeps "
        f"{KEEP_RATE:.0%} of steps, recurrent dropout p = {RECURRENT_DROPOUT}; "
        f"overhead = masked / plain - 1"
    )
    print(
        f"{'case':<42} {'threads':>7} {'mode':<8} {'masked ms':>11} {'plain ms':>9} {'overhead':>9}"
    )
    for threads in args.threads:
        with _common.thread_count(threads):
            for name, spec in MASK_CASES.items():
                arrays, plain, masked = make_mask_case(*spec)
                worst = check_masked_against_reference(name, arrays, masked)
                fast_plain = functional_runners(arrays, plain)
                fast_masked = functional_runners(arrays, masked)
                for mode, i in (("forward", 0), ("train", 1)):
                    fns = {"plain": fast_plain[i], "masked": fast_masked[i]}
                    t = timed_ms(_common.time_alternating, fns, args)
                    ms = {"masked": t["masked"], "plain": t["plain"]}
                    overhead = ms["masked"] / ms["plain"] - 1.0
                    figure = ("overhead", overhead, f"{100 * overhead:>+8.1f}%")
                    add_row(rows, name, threads, mode, ms, figure, worst)
    met = sum(r["overhead"] <= 0.10 for r in rows)
    print(f"target overhead <= 10%: {met}/{len(rows)} rows")


# ---- dilated layers against the plain layer of the same shape --------------------------------

DILATIONS = {
    # name: dilation (an int, or one per layer of a 4-layer stack)
    "dilation 2": 2,
    "dilation 4": 4,
    "dilation 10 (T/5 steps per chain)": 10,
    "4-layer stack, dilations 1, 2, 4, 8": [1, 2, 4, 8],
}


def dilation_table(args, rows):
    """A dilated layer does the plain layer's FLOPs in T/d sequential steps of d*B rows: the
    figure is dilated time / plain time (target: at most 1)."""
    print(
        "\ndilated layer vs the plain layer of the same T, B, D, H (and layers); x = plain / dilated"
    )
    print(f"{'case':<42} {'threads':>7} {'mode':<8} {'dilated ms':>11} {'plain ms':>9} {'x':>6}")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((T, B, D)).astype(np.float32)
    for threads in args.threads:
        with _common.thread_count(threads):
            for name, dilation in DILATIONS.items():
                layers = 4 if isinstance(dilation, list) else 1
                dilated = rnnfast.RNN(D, H, num_layers=layers, dilation=dilation, seed=0)
                plain = rnnfast.RNN(D, H, num_layers=layers, seed=0)
                worst = check_dilated_chains(dilated, x) if layers == 1 else 0.0
                fast_d, fast_p = rnnfast_runners(dilated, x, None), rnnfast_runners(plain, x, None)
                for mode, i in (("forward", 0), ("train", 1)):
                    fns = {"plain": fast_p[i], "dilated": fast_d[i]}
                    t = timed_ms(_common.time_alternating, fns, args)
                    ms = {"dilated": t["dilated"], "plain": t["plain"]}
                    ratio = ms["plain"] / ms["dilated"]
                    add_row(
                        rows, name, threads, mode, ms, ("speedup", ratio, f"{ratio:>6.2f}"), worst
                    )
    met = sum(r["speedup"] >= 1.0 for r in rows)
    print(f"target dilated at least as fast as plain: {met}/{len(rows)} rows")


def check_dilated_chains(layer, x):
    """A one-layer dilated output equals torch.nn.RNN run on each interleaved subsequence."""
    module = rnnfast.RNN(D, H, seed=0).to_torch()
    module.load_state_dict({k: torch.from_numpy(v) for k, v in layer.state_dict().items()})
    layer.eval()
    y, _ = layer(x)
    d = layer.dilation
    worst = 0.0
    with torch.no_grad():
        for j in range(d):
            yt, _ = module(torch.from_numpy(np.ascontiguousarray(x[j::d])))
            worst = max(worst, relative_error(y[j::d], yt.numpy()))
    if not worst <= TOLERANCE:
        raise SystemExit(f"DISAGREEMENT in dilation {d}: {worst}")
    return worst


# ---- teacher-forced JordanRNN against the RNN of the same size ----------------------------------

JORDAN_CASES = {
    # name: (T, B, D, H, O)
    f"T=100 B={B} D={D} H={H} O=32": (100, B, D, H, 32),
    "T=100 B=32 D=32 H=256 O=32": (100, 32, 32, 256, 32),
    "T=100 B=32 D=32 H=512 O=32": (100, 32, 32, 512, 32),
    "T=1000 B=1 D=32 H=128 O=32": (1000, 1, 32, 128, 32),
}


def check_jordan(case):
    """The JordanRNN's teacher-forced outputs against its equation in float64,
    h_t = tanh(W_ih x_t + W_yh y_{t-1} + b_h), y_t = W_ho h_t + b_o."""
    p = {k: v.astype(np.float64) for k, v in case.jordan.state_dict().items()}
    case.jordan.eval()
    y = case.jordan(case.packed)
    case.jordan.train()
    D = case.x.shape[2]
    rows = case.packed.astype(np.float64)
    h = np.tanh(rows[..., :D] @ p["weight_ih"].T + rows[..., D:] @ p["weight_yh"].T + p["bias_h"])
    worst = relative_error(y, h @ p["weight_ho"].T + p["bias_o"])
    if not worst <= TOLERANCE:
        raise SystemExit(f"DISAGREEMENT in the JordanRNN's teacher-forced forward: {worst}")
    return worst


def jordan_table(args, rows):
    """One training step (forward, MSE, backward, Adam), _jordan_step's runners (jordan_vs_rnn.py's): the
    figure is RNN time / JordanRNN time (target: at least 3)."""
    print(
        "\nteacher-forced JordanRNN vs RNN + Dense of the same D, H, O, one training step; "
        "x = RNN / JordanRNN; flops x = RNN flops / JordanRNN flops"
    )
    print(
        f"{'case':<42} {'threads':>7} {'mode':<8} {'Jordan ms':>11} {'RNN ms':>9} {'x':>6} "
        f"{'flops x':>8}"
    )
    for threads in args.threads:
        with _common.thread_count(threads):
            for name, shape in JORDAN_CASES.items():
                steps, batch, d, h, o = shape
                case = StepCase(*shape)
                worst = check_jordan(case)
                fns = step_runners(*shape, case=case)
                t = timed_ms(_common.time_alternating, fns, args)
                ms = {"jordan": t["JordanRNN"], "rnn": t["RNN + Dense"]}
                ratio = ms["rnn"] / ms["jordan"]
                flops = (d + h + o) / (d + 2 * o)
                figure = ("speedup", ratio, f"{ratio:>6.2f} {flops:>8.2f}")
                add_row(rows, name, threads, "train", ms, figure, worst)
                rows[-1]["flop_ratio"] = flops
    met = sum(r["speedup"] >= 3.0 for r in rows)
    print(f"target JordanRNN step >= 3x the RNN's: {met}/{len(rows)} rows")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--min-repeat-ms", type=float, default=20.0)
    parser.add_argument("--out", type=Path, default=RESULTS / "composition.json")
    parser.add_argument(
        "--cases",
        default="torch,masks,dilation,jordan",
        help="which tables, comma-separated: torch (composition vs torch), masks (masked "
        "kernels vs plain), dilation (dilated layers vs plain), jordan (teacher-forced "
        "JordanRNN vs RNN training step)",
    )
    args = parser.parse_args(argv)
    args.threads = [int(t) for t in args.threads.split(",")]
    return args


def main(argv=None):
    args = parse_args(argv)
    _common.reexec_without_blas_overrides()
    tables = set(args.cases.split(","))
    rows, mask_rows, dilation_rows, jordan_rows = [], [], [], []
    print(f"T={T} B={B} D={D} H={H} float32; isa {rnnfast._core.active_isa()}")
    if "torch" in tables:
        torch_table(args, rows)
    if "masks" in tables:
        masks_table(args, mask_rows)
    if "dilation" in tables:
        dilation_table(args, dilation_rows)
    if "jordan" in tables:
        jordan_table(args, jordan_rows)
    doc = {"shape": [T, B, D, H], "isa": rnnfast._core.active_isa()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    doc.update(rows=rows, mask_rows=mask_rows, dilation_rows=dilation_rows, jordan_rows=jordan_rows)
    args.out.write_text(json.dumps(doc, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
