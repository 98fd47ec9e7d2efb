"""End-to-end training time of the examples against their PyTorch twins.

Each example in examples/ (names, charlm, sunspots) has a twin in bench/ that trains the same
model on the same data with the same hyper-parameters in PyTorch; both end with a line
``RESULT <metric>=<value> ... time_s=<seconds>`` (time_s covers the same work on both sides:
loading, training, evaluation; not the plots). This runs each pair alternately, ``--repeats``
times, and reports the medians and the time ratio (rnnfast / PyTorch; the target is <= 0.5).

    python bench/examples_vs_torch.py [--repeats 3] [--only names charlm sunspots] [--data ROOT]

Each script uses its defaults but ``--data``: both sides use every core (rnnfast's default
threads; the twins' ``--threads 2``). ``--data ROOT`` is the datasets root given to every
script (default: ../shared/data where it is beside the checkout, else rnnfast.datasets' lookup).
Needs torch and tqdm.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAIRS = {
    "names": ("examples/names.py", "bench/torch_names.py", "test_accuracy"),
    "charlm": ("examples/charlm.py", "bench/torch_charlm.py", "val_perplexity"),
    "sunspots": ("examples/sunspots.py", "bench/torch_sunspots.py", "test_rmse"),
}


SHARED = ROOT.parent / "shared" / "data"


def result_line(script: str, cwd: str, data) -> dict:
    """The key=value pairs of the script's RESULT line (it runs with its defaults)."""
    extra = ["--data", str(data)] if data is not None else []
    out = subprocess.run(
        [sys.executable, str(ROOT / script), *extra],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    line = next(ln for ln in reversed(out.stdout.splitlines()) if ln.startswith("RESULT "))
    return {k: float(v) for k, v in (field.split("=") for field in line.split()[1:])}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", nargs="+", choices=list(PAIRS), default=list(PAIRS))
    parser.add_argument(
        "--data",
        type=Path,
        default=SHARED if SHARED.is_dir() else None,
        help="the datasets root given to every script",
    )
    args = parser.parse_args(argv)
    print(f"{os.cpu_count()} cores; medians of {args.repeats} alternating runs of each pair")
    print(
        f"{'example':10s} {'metric':>15s} {'rnnfast':>9s} {'torch':>9s} "
        f"{'rnnfast s':>10s} {'torch s':>9s} {'ratio':>6s}  target <= 0.5"
    )
    with tempfile.TemporaryDirectory() as cwd:  # the examples' plots land here
        for name in args.only:
            ours, twin, metric = PAIRS[name]
            runs = {"rnnfast": [], "torch": []}
            for _ in range(args.repeats):
                runs["rnnfast"].append(result_line(ours, cwd, args.data))
                runs["torch"].append(result_line(twin, cwd, args.data))
            med = {
                side: {k: statistics.median(r[k] for r in rs) for k in (metric, "time_s")}
                for side, rs in runs.items()
            }
            ratio = med["rnnfast"]["time_s"] / med["torch"]["time_s"]
            times = {side: ", ".join(f"{r['time_s']:.1f}" for r in rs) for side, rs in runs.items()}
            print(
                f"{name:10s} {metric:>15s} {med['rnnfast'][metric]:9.4f} "
                f"{med['torch'][metric]:9.4f} {med['rnnfast']['time_s']:10.1f} "
                f"{med['torch']['time_s']:9.1f} {ratio:6.2f}  {'met' if ratio <= 0.5 else 'MISSED'}"
                f"   (rnnfast {times['rnnfast']}; torch {times['torch']})"
            )


if __name__ == "__main__":
    main()
