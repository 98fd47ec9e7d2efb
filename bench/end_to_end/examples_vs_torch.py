"""The examples against their PyTorch twins, per cell: test figures over seeds, seconds per epoch.

Each example of examples/ (names, charlm, sunspots, tagging, seq2seq) has a twin in this folder,
``torch_<name>.py``, that trains the same model on the same data with the same optimiser,
epochs and batch size in PyTorch. For each task, each cell (``--cell rnn|gru|lstm`` on both
sides) and each seed, this runs the example and then its twin, each with its defaults but
``--cell``, ``--seed`` and the data, and reads from both the figure compared (names and
tagging: test accuracy; charlm: validation perplexity; sunspots: test RMSE; seq2seq: greedy
exact match of the scheduled-sampling model) and the seconds of each epoch (the line
``seconds per epoch: ...`` both print: an epoch's training and, for charlm and tagging, its
validation; seq2seq has no epochs and counts as one the updates that read as many strings as
its training set holds). It prints a markdown table per task x cell x library: the figure's
mean over the seeds, its min-max spread and standard deviation, the median seconds per epoch,
PyTorch's over rnnfast's, and the two targets: rnnfast's mean no worse than PyTorch's worst
seed (within PyTorch's spread, or better), and rnnfast at most half PyTorch's time per epoch.
The JSON of every run and row is written to ``--out`` after each run, so that a stopped run
keeps what it measured; ``--report`` prints the table of saved JSON files together.

    python -m bench.end_to_end.examples_vs_torch [--tasks names sunspots ...]
        [--cells rnn gru lstm] [--seeds 3] [--epochs N] [--steps N] [--quick]
        [--data ROOT] [--tagging-data UD_FOLDER_OR_FILE] [--timeout S] [--out JSON]
    python -m bench.end_to_end.examples_vs_torch --report A.json [B.json ...]

Threads: both sides run with the example's thread count: rnnfast's default (the cores OpenMP
sees) for every example but seq2seq, whose default is one; the twin gets ``--threads`` of the
same. ``--data ROOT`` is the datasets root of names, charlm and sunspots (default:
../shared/data where it is beside the checkout, else rnnfast.datasets' lookup); tagging needs
``--tagging-data`` (a Universal Dependencies treebank folder or one CoNLL-U file) and is left
out with a note without it. ``--epochs`` shortens the epoch-based tasks on both sides,
``--steps`` seq2seq; ``--quick`` is one epoch each and a tiny seq2seq, for checking the
machinery. The seq2seq example gets ``--objective teacher scheduled``: the two trainings its
twin does. Needs torch.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

import rnnfast
from bench import REPO, RESULTS, SHARED_DATA
from bench._common import cpu_clock, cpu_model, others_cpus, torch_blas, write_json
from bench.end_to_end import _summary
from bench.end_to_end._summary import TASKS, add_data_arguments

CELLS = ("rnn", "gru", "lstm")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", choices=list(TASKS), default=list(TASKS))
    parser.add_argument("--cells", nargs="+", choices=CELLS, default=list(CELLS))
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0 .. N-1 on both sides")
    parser.add_argument("--epochs", type=int, help="epochs of names, charlm, sunspots, tagging")
    parser.add_argument("--steps", type=int, help="updates per seq2seq model")
    parser.add_argument("--quick", action="store_true", help="one epoch each, a tiny seq2seq")
    add_data_arguments(parser, SHARED_DATA)
    parser.add_argument("--timeout", type=float, help="seconds allowed to each run")
    parser.add_argument("--out", type=Path, default=RESULTS / "examples_vs_torch.json")
    parser.add_argument("--report", nargs="+", type=Path, help="print the table of JSON files")
    args = parser.parse_args(argv)
    for name in ("seeds", "epochs", "steps"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name}: expected a positive number, got {value}")
    return args


def task_args(task, args):
    """The options both sides of ``task`` get besides --cell and --seed (the data, the
    shortening)."""
    extra = list(TASKS[task].quick) if args.quick else []
    if args.epochs is not None and task != "seq2seq":
        extra += ["--epochs", str(args.epochs)]
    if args.steps is not None and task == "seq2seq":
        extra += ["--steps", str(args.steps)]
    if task in ("names", "charlm", "sunspots") and args.data is not None:
        extra += ["--data", str(args.data)]
    if task == "tagging":
        extra += ["--data", str(args.tagging_data)]
    return extra


def run_one(command, cwd, timeout):
    """(RESULT figures, seconds per epoch) of ``python command`` run in ``cwd``; a failure ends
    the script with the command and the end of its stderr."""
    try:
        done = subprocess.run(
            [sys.executable, *command],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        raise SystemExit(f"{' '.join(command)}: no result within --timeout {timeout} s") from None
    if done.returncode != 0:
        raise SystemExit(
            f"{' '.join(command)} failed (exit status {done.returncode}):\n{done.stderr[-2000:]}"
        )
    return _summary.read_run(done.stdout)


def machine(threads):
    return {
        "cpu": cpu_model(),
        "rnnfast_isa": rnnfast._core.active_isa(),
        "rnnfast_version": rnnfast.__version__,
        "torch_version": torch.__version__,
        "torch_blas": torch_blas(),
        "threads": threads,
        "python": sys.version.split()[0],
    }


def header(info):
    threads = ", ".join(f"{task} {n}" for task, n in info["threads"].items())
    return (
        f"{info['cpu']}; rnnfast {info['rnnfast_version']} on {info['rnnfast_isa']}; "
        f"torch {info['torch_version']} ({info['torch_blas']})\n"
        f"threads, both libraries: {threads}"
    )


def report(paths):
    """Print the table of saved runs (their machine: the first file's)."""
    saved = [json.loads(Path(p).read_text()) for p in paths]
    runs = [run for s in saved for run in s["runs"]]
    print(header(saved[0]["machine"]))
    print(_summary.markdown(_summary.targets(_summary.summarize(runs))))


def main(argv=None):
    args = parse_args(argv)
    if args.report:
        report(args.report)
        return
    tasks = list(args.tasks)
    if "tagging" in tasks and args.tagging_data is None:
        tasks.remove("tagging")
        print("tagging left out: it needs --tagging-data (a UD treebank folder or CoNLL-U file)")
    if not tasks:
        raise SystemExit("no task to run: tagging alone needs --tagging-data")
    default_threads = rnnfast.get_num_threads()  # the examples' default: the cores OpenMP sees
    threads = {task: 1 if task == "seq2seq" else default_threads for task in tasks}
    info = machine(threads)
    print(header(info), flush=True)
    result = {
        "script": "bench.end_to_end.examples_vs_torch",
        "command": " ".join(sys.argv),
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "machine": info,
        "runs": [],
    }
    since = cpu_clock()
    with tempfile.TemporaryDirectory() as out:  # the examples' plots and models land here
        for task in tasks:
            extra = task_args(task, args)
            for cell in args.cells:
                for seed in range(args.seeds):
                    common = [*extra, "--cell", cell, "--seed", str(seed)]
                    sides = {
                        "rnnfast": (
                            [str(REPO / "examples" / f"{task}.py"), *common]
                            + list(TASKS[task].example_only),
                            out,
                        ),
                        # from the repository root, where ``bench`` is found
                        "torch": (
                            ["-m", f"bench.end_to_end.torch_{task}", *common]
                            + ["--threads", str(threads[task])],
                            REPO,
                        ),
                    }
                    for library, (command, cwd) in sides.items():
                        figures, epoch_s = run_one(command, cwd, args.timeout)
                        run = {
                            "task": task,
                            "cell": cell,
                            "library": library,
                            "seed": seed,
                            "metric": figures[TASKS[task].metric],
                            "epoch_s": epoch_s,
                            "time_s": figures.get("time_s"),
                            "result": figures,
                        }
                        result["runs"].append(run)
                        print(
                            f"{task} {cell} {library} seed {seed}: "
                            f"{TASKS[task].metric} {run['metric']:.4f}, "
                            f"{min(epoch_s):.3f}-{max(epoch_s):.3f} s per epoch",
                            file=sys.stderr,
                            flush=True,
                        )
                        result["others_cpus"] = others_cpus(since)
                        result["rows"] = _summary.targets(_summary.summarize(result["runs"]))
                        args.out.parent.mkdir(parents=True, exist_ok=True)
                        args.out.write_text(json.dumps(result, indent=1))
    print(
        f"\nothers' CPU use during the runs: {result['others_cpus']:.2f} CPUs on average "
        "(time ratios on a shared machine are noisy)"
    )
    print(_summary.markdown(result["rows"]))
    write_json(args.out, result)


if __name__ == "__main__":
    main()
