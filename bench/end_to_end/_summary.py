"""What examples_vs_torch.py makes of its runs: the lines it reads from a run's output, the
figures of each task x cell x library over the seeds, the two targets, and the markdown table.

Standard library only, so that the tests can feed it made-up runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
import statistics
from pathlib import Path

LIBRARIES = ("rnnfast", "torch")
SPEED_TARGET = 2.0  # PyTorch's seconds per epoch over rnnfast's, at least


@dataclasses.dataclass(frozen=True)
class Task:
    """An example of examples/ and its twin: the figure compared (a key of both RESULT lines),
    which way is better, what ``--quick`` gives both sides, and what the example alone gets
    so that it does the twin's work (no more)."""

    metric: str
    higher_is_better: bool
    quick: tuple
    example_only: tuple = ()


TASKS = {
    "names": Task("test_accuracy", True, ("--epochs", "1")),
    "charlm": Task("val_perplexity", False, ("--epochs", "1")),
    "sunspots": Task("test_rmse", False, ("--epochs", "1")),
    "tagging": Task("test_accuracy", True, ("--epochs", "1")),
    # the twin trains the teacher-forced and the scheduled-sampling models, not the example's
    # self-critical one
    "seq2seq": Task(
        "exact_match_greedy",
        True,
        ("--steps", "30", "--train-size", "300", "--test-size", "60"),
        ("--objective", "teacher", "scheduled"),
    ),
}

_EPOCHS = re.compile(r"^seconds per epoch[^:]*: ([0-9.]+(?: [0-9.]+)*) \(median")


def add_data_arguments(parser: argparse.ArgumentParser, shared_data: Path) -> None:
    """The data options of the scripts that run the examples on real data: the datasets root
    of names, charlm and sunspots (``shared_data`` where it exists), and tagging's treebank."""
    parser.add_argument(
        "--data",
        type=Path,
        default=shared_data if shared_data.is_dir() else None,
        help="the datasets root of names, charlm and sunspots",
    )
    parser.add_argument("--tagging-data", type=Path, help="a UD treebank folder or CoNLL-U file")


def read_run(stdout):
    """(the RESULT line's figures, the seconds of each epoch) of a run's output: the last line
    starting ``RESULT `` (``key=value`` pairs) and the ``seconds per epoch...: s1 s2 ...`` line.
    A ValueError naming what is missing otherwise."""
    lines = stdout.splitlines()
    result = next((ln for ln in reversed(lines) if ln.startswith("RESULT ")), None)
    epochs = next((m for m in map(_EPOCHS.match, lines) if m), None)
    if result is None or epochs is None:
        missing = "a RESULT line" if result is None else "a 'seconds per epoch' line"
        raise ValueError(f"stdout: expected {missing}, got {len(lines)} lines: {lines[-5:]}")
    figures = {k: float(v) for k, v in (f.split("=", 1) for f in result.split()[1:])}
    return figures, [float(s) for s in epochs.group(1).split()]


def summarize(runs):
    """One row per task x cell x library of ``runs`` (dicts with task, cell, library, seed,
    metric, epoch_s), in the order first seen: the metric's mean, min, max and standard
    deviation over the seeds, and the median over the seeds of each run's median epoch."""
    groups = {}
    for run in runs:
        groups.setdefault((run["task"], run["cell"], run["library"]), []).append(run)
    rows = []
    for (task, cell, library), group in groups.items():
        values = [r["metric"] for r in group]
        rows.append(
            {
                "task": task,
                "cell": cell,
                "library": library,
                "metric": TASKS[task].metric,
                "seeds": len(group),
                "mean": statistics.fmean(values),
                "min": min(values),
                "max": max(values),
                "std": statistics.stdev(values) if len(values) > 1 else 0.0,
                "epoch_s": statistics.median(statistics.median(r["epoch_s"]) for r in group),
            }
        )
    return rows


def targets(rows):
    """Per task x cell with both libraries: rnnfast's row gets ``ratio`` (PyTorch's seconds per
    epoch over rnnfast's), ``speed_met`` (ratio >= 2) and ``accuracy_met``: rnnfast's mean no
    worse than PyTorch's worst seed (inside PyTorch's min-max spread, or better). Returns the
    rows, those fields set to None where a side is missing."""
    index = {(r["task"], r["cell"], r["library"]): r for r in rows}
    for row in rows:
        row.update(ratio=None, speed_met=None, accuracy_met=None)
    for (task, cell, library), row in index.items():
        torch_row = index.get((task, cell, "torch"))
        if library != "rnnfast" or torch_row is None:
            continue
        row["ratio"] = torch_row["epoch_s"] / row["epoch_s"] if row["epoch_s"] > 0 else math.inf
        row["speed_met"] = row["ratio"] >= SPEED_TARGET
        if TASKS[task].higher_is_better:
            row["accuracy_met"] = row["mean"] >= torch_row["min"]
        else:
            row["accuracy_met"] = row["mean"] <= torch_row["max"]
    return rows


def _verdict(met):
    return "—" if met is None else ("met" if met else "MISSED")


def markdown(rows):
    """The markdown table of the rows of :func:`targets`."""
    head = (
        "| task | metric | cell | library | seeds | mean | min–max (std) | s/epoch (median) "
        "| torch/rnnfast | accuracy target | speed target (>= 2x) |"
    )
    lines = [head, "|" + "---|" * head.count(" | ") + "---|"]
    for r in rows:
        ratio = "—" if r["ratio"] is None else f"{r['ratio']:.2f}x"
        lines.append(
            f"| {r['task']} | {r['metric']} | {r['cell']} | {r['library']} | {r['seeds']} "
            f"| {r['mean']:.4f} | {r['min']:.4f}–{r['max']:.4f} ({r['std']:.4f}) "
            f"| {r['epoch_s']:.3f} | {ratio} | {_verdict(r['accuracy_met'])} "
            f"| {_verdict(r['speed_met'])} |"
        )
    return "\n".join(lines)
