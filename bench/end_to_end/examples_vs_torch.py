"""End-to-end training time of the examples against their PyTorch twins.

Each example in examples/ (names, charlm, sunspots) has a twin in this folder that trains the same
model on the same data with the same hyper-parameters in PyTorch; both end with a line
``RESULT <metric>=<value> ... time_s=<seconds>`` (time_s covers the same work on both sides:
loading, training, evaluation; not the plots). This runs each pair alternately, ``--repeats``
times, and reports the medians and the time ratio (rnnfast / PyTorch; the target is <= 0.5).

    python -m bench.end_to_end.examples_vs_torch [--repeats 3] [--only names charlm sunspots]
                                                 [--data ROOT]

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

from bench import REPO, SHARED_DATA

# each example (examples/<name>.py; its twin: torch_<name>.py of this folder) and its metric
PAIRS = {"names": "test_accuracy", "charlm": "val_perplexity", "sunspots": "test_rmse"}


def result_line(command: list, cwd, data) -> dict:
    """The key=value pairs of the RESULT line of ``python <command>`` (its defaults but
    ``--data``), run in ``cwd``."""
    extra = ["--data", str(data)] if data is not None else []
    out = subprocess.run(
        [sys.executable, *command, *extra],
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
        default=SHARED_DATA if SHARED_DATA.is_dir() else None,
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
            metric = PAIRS[name]
            example = [str(REPO / "examples" / f"{name}.py")]
            twin = ["-m", f"bench.end_to_end.torch_{name}"]
            runs = {"rnnfast": [], "torch": []}
            for _ in range(args.repeats):
                runs["rnnfast"].append(result_line(example, cwd, args.data))
                # the twin runs from the repository root, where ``bench`` is found; it leaves
                # no file behind
                runs["torch"].append(result_line(twin, REPO, args.data))
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
