"""Peak memory of rnnfast's forward and training step, each case in a fresh subprocess.

Run from the repository root:

    python -m bench.system.memory                         # T=2000, B=64, D=H=1024, float32
    python -m bench.system.memory --T 500 --D 64 --H 256  # a smaller problem

Cases (float32):

    forward_last  rnn_forward(..., return_sequences=False): only h_T is returned
    forward_seq   rnn_forward(..., return_sequences=True): y (T, B, H) is returned
    train         forward with sequences, then rnn_backward(..., dy=ones)

Each case runs in its own Python process. After a small warm-up call (libraries loaded, threads
started) the child allocates the inputs and weights (x, the four weights, and for training dy, which
the loss would hand to backward), reads its resident set size, runs the case once and reads the
peak RSS (resource.getrusage ru_maxrss). "extra" = peak RSS - RSS with the inputs in place: the
memory the call itself needed, results included. It is set against the size of the full outputs,
T*B*H*4 bytes; forward_last should need a small fraction of it (O(B*H) working memory).
Results are printed as a table and written to bench/results/memory.json.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
from pathlib import Path

from bench import REPO, RESULTS  # paths only: a child measures its own memory

CASES = ("forward_last", "forward_seq", "train")
MB = 1e6
ITEMSIZE = 4  # float32


# ----------------------------------------------------------------------------- child side


def current_rss_bytes() -> int:
    import psutil

    return psutil.Process().memory_info().rss


def peak_rss_bytes() -> int:
    usage = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return usage if sys.platform == "darwin" else usage * 1024  # Linux reports KiB


def make_inputs(T, B, D, H, with_dy, seed=0):
    """float32 inputs made in place, so that no float64 temporary raises the peak RSS early."""
    import numpy as np

    rng = np.random.default_rng(seed)
    x = np.empty((T, B, D), np.float32)
    rng.standard_normal(dtype=np.float32, out=x)
    bound = 1 / np.sqrt(H)  # torch.nn.RNN's initialisation range

    def uniform(*shape):
        return rng.uniform(-bound, bound, shape).astype(np.float32)

    inputs = {
        "x": x,
        "weight_ih": uniform(H, D),
        "weight_hh": uniform(H, H),
        "bias_ih": uniform(H),
        "bias_hh": uniform(H),
    }
    if with_dy:
        inputs["dy"] = np.ones((T, B, H), np.float32)
    return inputs


def run_case(case, inp):
    """Run one case; return the arrays it produced (kept alive until the peak is read)."""
    from rnnfast import functional

    args = (inp["x"], inp["weight_ih"], inp["weight_hh"], inp["bias_ih"], inp["bias_hh"])
    if case == "forward_last":
        return functional.rnn_forward(*args, return_sequences=False)
    if case == "forward_seq":
        return functional.rnn_forward(*args, return_sequences=True)
    y, h_n = functional.rnn_forward(*args, return_sequences=True)
    return (
        y,
        h_n,
        functional.rnn_backward(
            inp["x"],
            inp["weight_ih"],
            inp["weight_hh"],
            y,
            dy=inp["dy"],
            **functional.PLAIN_FORWARD_OPTIONS,
        ),
    )


def child(args) -> None:
    """Measure one case in this process and print one JSON line."""
    import rnnfast

    if args.threads:
        rnnfast.set_num_threads(args.threads)
    run_case(args.child, make_inputs(3, 2, 5, 4, with_dy=True))  # warm-up, tiny
    inputs = make_inputs(args.T, args.B, args.D, args.H, with_dy=args.child == "train")
    before, peak_before = current_rss_bytes(), peak_rss_bytes()
    result = run_case(args.child, inputs)
    peak = peak_rss_bytes()
    print(
        json.dumps(
            {
                "case": args.child,
                "threads": rnnfast.get_num_threads(),
                "input_bytes": sum(a.nbytes for a in inputs.values()),
                "rss_before": before,
                "peak_before": peak_before,
                "peak": peak,
                "extra": peak - before,
                "peak_rose": peak > peak_before,
            }
        )
    )
    del result


# ----------------------------------------------------------------------------- parent side


def sizes(T, B, D, H) -> dict:
    return {
        "x": T * B * D * ITEMSIZE,
        "outputs": T * B * H * ITEMSIZE,
        "weights": (H * D + H * H + 2 * H) * ITEMSIZE,
    }


def estimated_need(T, B, D, H) -> int:
    """Bytes the train case needs at most, generously: x, dy, y, dx and two more T*B*H buffers."""
    s = sizes(T, B, D, H)
    return 2 * s["x"] + 4 * s["outputs"] + 3 * s["weights"]


def fit_to_memory(args) -> None:
    """Shrink D (then T) until the train case fits in half of the available memory."""
    import psutil

    available = psutil.virtual_memory().available
    while estimated_need(args.T, args.B, args.D, args.H) > available / 2 and args.D > 64:
        args.D //= 2
    while estimated_need(args.T, args.B, args.D, args.H) > available / 2 and args.T > 100:
        args.T //= 2
    args.available_bytes = available


def measure(case, args) -> dict:
    cmd = [
        sys.executable,
        "-m",
        __spec__.name,
        "--child",
        case,
        "--T",
        str(args.T),
        "--B",
        str(args.B),
        "--D",
        str(args.D),
        "--H",
        str(args.H),
        "--threads",
        str(args.threads or 0),
    ]
    done = subprocess.run(cmd, check=False, capture_output=True, text=True, cwd=REPO)
    if done.returncode != 0:
        raise SystemExit(
            f"memory.py: case {case} failed (exit {done.returncode}):\n{done.stderr[-2000:]}"
        )
    return json.loads(done.stdout.strip().splitlines()[-1])


def print_table(results, s) -> None:
    print(
        f"{'case':<14}{'inputs MB':>11}{'RSS before MB':>15}{'peak MB':>10}{'extra MB':>10}"
        f"{'outputs MB':>12}{'extra/outputs':>15}"
    )
    for r in results:
        flag = "" if r["peak_rose"] else "  (peak did not rise: extra is an upper bound)"
        print(
            f"{r['case']:<14}{r['input_bytes'] / MB:>11.1f}{r['rss_before'] / MB:>15.1f}"
            f"{r['peak'] / MB:>10.1f}{r['extra'] / MB:>10.1f}{s['outputs'] / MB:>12.1f}"
            f"{r['extra'] / s['outputs']:>15.3f}{flag}"
        )


def print_expectations(s) -> None:
    """What each case must hold at least, for reading the table."""
    print(
        "least each case must hold: forward_last h_T only (B*H); forward_seq y "
        f"({s['outputs'] / MB:.1f} MB); train y + dx + weight grads "
        f"({(s['outputs'] + s['x'] + s['weights']) / MB:.1f} MB)"
    )


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--T", type=int, default=2000)
    ap.add_argument("--B", type=int, default=64)
    ap.add_argument("--D", type=int, default=1024)
    ap.add_argument("--H", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=0, help="rnnfast threads (0: its default)")
    ap.add_argument(
        "--cases", default=",".join(CASES), help="comma-separated subset of " + ", ".join(CASES)
    )
    ap.add_argument("--out", type=Path, default=RESULTS / "memory.json")
    ap.add_argument("--child", choices=CASES, help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.child:
        child(args)
        return
    requested = (args.T, args.D)
    fit_to_memory(args)
    s = sizes(args.T, args.B, args.D, args.H)
    print(
        f"float32, T={args.T}, B={args.B}, D={args.D}, H={args.H}: x {s['x'] / MB:.1f} MB, "
        f"weights {s['weights'] / MB:.1f} MB, full outputs T*B*H*4 = {s['outputs'] / MB:.1f} MB"
    )
    if (args.T, args.D) != requested:
        print(
            f"(reduced from T={requested[0]}, D={requested[1]} to fit "
            f"{args.available_bytes / 1e9:.1f} GB available)"
        )
    results = [measure(case, args) for case in args.cases.split(",")]
    print_table(results, s)
    print_expectations(s)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "dtype": "float32",
        "T": args.T,
        "B": args.B,
        "D": args.D,
        "H": args.H,
        "sizes_bytes": s,
        "results": results,
    }
    args.out.write_text(json.dumps(doc, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
