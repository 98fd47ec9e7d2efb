"""Composed layers against torch.nn.RNN: a 2-layer bidirectional stack and variable-length
batches (torch with PackedSequence), forward inference and a training step, 1 and 2 threads.

    python bench/compare_composition.py [--repeats 7] [--threads 1,2] [--out PATH]

Every case is first checked for agreement (outputs, h_n, input and weight gradients); timings
are medians per call, measured with compare.py's timing helpers (warm-up, one library after
the other). Prints a table and writes JSON (default bench/results/compare_composition.json).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare  # noqa: E402  (shared timing, thread and re-exec helpers)

rnnfast, torch = compare.rnnfast, compare.torch

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


def relative_error(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-30))


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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--min-repeat-ms", type=float, default=20.0)
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).parent / "results" / "compare_composition.json")
    args = parser.parse_args(argv)
    compare.reexec_without_blas_overrides()
    rows = []
    print(f"T={T} B={B} D={D} H={H} float32; lengths uniform in [T/4, T]; "
          f"x = torch time / rnnfast time")
    print(f"{'case':<42} {'threads':>7} {'mode':<8} {'rnnfast ms':>11} {'torch ms':>9} {'x':>6}")
    for threads in (int(t) for t in args.threads.split(",")):
        with compare.thread_count(threads):
            for name, spec in CASES.items():
                layer, module, x, lengths = make_case(*spec)
                fast, slow = rnnfast_runners(layer, x, lengths), torch_runners(module, x, lengths)
                worst = check_agreement(name, fast, slow)
                for mode, i in (("forward", 0), ("train", 1)):
                    t = compare.time_each({"rnnfast": fast[i], "torch": slow[i]}, args.repeats,
                                          args.min_repeat_ms / 1e3)
                    ms = {lib: 1e3 * v["median_s"] for lib, v in t.items()}
                    ratio = ms["torch"] / ms["rnnfast"]
                    rows.append({"case": name, "threads": threads, "mode": mode,
                                 "rnnfast_ms": ms["rnnfast"], "torch_ms": ms["torch"],
                                 "speedup": ratio, "max_relative_difference": worst})
                    print(f"{name:<42} {threads:>7} {mode:<8} {ms['rnnfast']:>11.3f} "
                          f"{ms['torch']:>9.3f} {ratio:>6.2f}", flush=True)
    met = sum(r["speedup"] >= 3.0 for r in rows)
    print(f"target >= 3x torch: {met}/{len(rows)} rows")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"shape": [T, B, D, H], "rows": rows}, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
