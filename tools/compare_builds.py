"""Speed of two builds of rnnfast side by side: bench/compare.py run against each, alternated.

Each of OLD and NEW is a directory that holds an ``rnnfast`` package with its compiled
``_core*.so`` (a PYTHONPATH entry: a checkout's ``python/`` folder after a build, or a copy of
one). The script runs compare.py in a subprocess per build with PYTHONPATH set to that
directory, alternating the builds (old, new; then new, old; ...) for --rounds rounds, and prints
for every row the median over the rounds of its new/old time ratio (below 1: the new build is
faster), flagging those outside --tolerance. Only rnnfast's own times are compared (per ISA
where compare.py times several, and the bf16 / int8 rows); the peers compare.py also times are
the same library in both runs and are left out.

The default sets are issue 22's measurement: ``--quick`` and ``--quick --shapes
25x64x1024x1024,100x1x1024x1024`` (the H >= 1024 shapes). Run it on a quiet machine from the
repository root, for example with main's build as the old side:

    git worktree add /tmp/rnnfast-main main               # the old commit's sources
    cp OLD_BUILD/_core*.so /tmp/rnnfast-main/python/rnnfast/  # its build (or build it there)
    python tools/compare_builds.py /tmp/rnnfast-main/python python --out /tmp/builds.json

(``pip install --no-deps --target DIR CHECKOUT`` also makes such a directory.)

A smoke run (one tiny shape, one repeat, one round):

    python tools/compare_builds.py OLD NEW --rounds 1 \\
        --set "--shapes 5x2x8x16 --repeats 1 --threads 1 --dtype float32 --isas none --no-quantized"

Arguments after ``--`` go to every compare.py run (e.g. ``-- --threads 1 --no-quantized``).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIG_SHAPES = "25x64x1024x1024,100x1x1024x1024"
DEFAULT_SETS = ["--quick", f"--quick --shapes {BIG_SHAPES}"]


def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("old", type=Path, help="directory holding the old build's rnnfast package")
    ap.add_argument("new", type=Path, help="directory holding the new build's rnnfast package")
    ap.add_argument("--rounds", type=int, default=3, help="runs of each build (default 3)")
    ap.add_argument(
        "--set",
        dest="sets",
        action="append",
        help="compare.py arguments of one run, quoted; repeat for several (default: "
        f"{' and '.join(repr(s) for s in DEFAULT_SETS)})",
    )
    ap.add_argument(
        "--compare",
        default=None,
        help="compare.py as a path (ending in .py, relative to the repository root) or a module "
        "name run with -m from the root (default: bench/compare.py, else bench.compare)",
    )
    ap.add_argument(
        "--tolerance", type=float, default=0.05, help="flag ratios off 1 by more (default 0.05)"
    )
    ap.add_argument("--out", type=Path, default=None, help="write the ratios as JSON here")
    ap.add_argument("--keep", type=Path, default=None, help="keep compare.py's JSON files here")
    argv = sys.argv[1:] if argv is None else list(argv)
    passthrough = []
    if "--" in argv:
        cut = argv.index("--")
        argv, passthrough = argv[:cut], argv[cut + 1 :]
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error(f"--rounds: expected an integer >= 1, got {args.rounds}")
    args.sets = args.sets or DEFAULT_SETS
    args.passthrough = passthrough
    for name in ("old", "new"):
        setattr(args, name, check_tree(ap, name, getattr(args, name)))
    return args


def check_tree(ap, name: str, path: Path) -> Path:
    """The directory, resolved, if it holds an rnnfast package with a compiled _core."""
    package = path / "rnnfast"
    if not (package / "__init__.py").is_file():
        ap.error(f"{name}: expected a directory holding rnnfast/__init__.py, got {str(path)!r}")
    if not list(package.glob("_core*.so")):
        ap.error(f"{name}: expected a built rnnfast/_core*.so under {str(path)!r}, found none")
    return path.resolve()


def compare_command(spec: str | None) -> list:
    if spec is None:
        spec = "bench/compare.py" if (ROOT / "bench" / "compare.py").is_file() else "bench.compare"
    if spec.endswith(".py"):
        return [sys.executable, str(ROOT / spec)]
    return [sys.executable, "-m", spec]


def side_env(tree: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree)
    return env


def core_file(tree: Path) -> str:
    """Which _core a run on this tree imports (checked: it must be the tree's own)."""
    out = subprocess.run(
        [sys.executable, "-c", "import rnnfast._core as c; print(c.__file__)"],
        env=side_env(tree),
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    if not Path(out).resolve().is_relative_to(tree):
        raise SystemExit(f"{tree}: rnnfast._core resolves to {out}, outside that directory")
    return out


def run_compare(command: list, tree: Path, args_text: str, passthrough: list, out: Path) -> None:
    cmd = [*command, *shlex.split(args_text), *passthrough, "--out", str(out)]
    cmd += ["--plot", str(out.with_suffix(".png"))]
    print("+", "PYTHONPATH=" + str(tree), shlex.join(cmd), flush=True)
    subprocess.run(cmd, env=side_env(tree), cwd=ROOT, check=True, stdout=subprocess.DEVNULL)


def row_times(doc: dict, set_index: int) -> dict:
    """rnnfast's median time (ms) of every row of one compare.py JSON, by a readable key."""
    times = {}
    for r in doc["results"]:
        s = r["shape"]
        base = f"set{set_index} {r['dtype']} t{r['threads']} {s['T']}x{s['B']}x{s['D']}x{s['H']}"
        base += f" {r['mode']}"
        times[f"{base} rnnfast"] = r["libs"]["rnnfast"]["median_ms"]
        for isa, fig in r.get("isas", {}).items():
            if isa != r.get("active_isa"):
                times[f"{base} rnnfast@{isa}"] = fig["median_ms"]
    for r in doc.get("quantized", []):
        s = r["shape"]
        base = f"set{set_index} {r['dtype']} t{r['threads']} {s['T']}x{s['B']}x{s['D']}x{s['H']}"
        base += f" {r['mode']}"
        for kind, ms in r["median_ms"].items():
            if kind != "float32":  # the float32 row is the results' own
                times[f"{base} {kind}"] = ms
    return times


def main(argv=None) -> None:
    args = parse_args(argv)
    command = compare_command(args.compare)
    for name in ("old", "new"):
        print(f"{name}: {core_file(getattr(args, name))}")
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="compare_builds_"))
    work.mkdir(parents=True, exist_ok=True)
    # times[side][key] = one time per round
    times = {"old": {}, "new": {}}
    for rnd in range(args.rounds):
        order = ("old", "new") if rnd % 2 == 0 else ("new", "old")
        for si, set_args in enumerate(args.sets):
            for side in order:
                out = work / f"{side}_round{rnd}_set{si}.json"
                run_compare(command, getattr(args, side), set_args, args.passthrough, out)
                for key, ms in row_times(json.loads(out.read_text()), si).items():
                    times[side].setdefault(key, []).append(ms)
    report = summarize(times, args.tolerance)
    print_report(report, args)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        doc = {"old": str(args.old), "new": str(args.new), "sets": args.sets, "rows": report}
        doc["rounds"] = args.rounds
        args.out.write_text(json.dumps(doc, indent=1))


def summarize(times: dict, tolerance: float) -> list:
    rows = []
    for key in times["old"]:
        old, new = times["old"][key], times["new"].get(key)
        if new is None or len(new) != len(old):
            continue
        ratios = [n / o for n, o in zip(new, old)]
        ratio = statistics.median(ratios)
        rows.append(
            {
                "row": key,
                "old_ms": statistics.median(old),
                "new_ms": statistics.median(new),
                "ratios": ratios,
                "ratio": ratio,
                "outside": abs(ratio - 1.0) > tolerance,
            }
        )
    return rows


def print_report(rows: list, args) -> None:
    print()
    print(f"sets: {'; '.join(args.sets)}; rounds: {args.rounds}")
    width = max([len(r["row"]) for r in rows] + [3])
    print(f"{'row':<{width}}  {'old ms':>9}  {'new ms':>9}  {'new/old':>7}  ratios per round")
    for r in rows:
        flag = "  <-- outside" if r["outside"] else ""
        per = " ".join(f"{x:.3f}" for x in r["ratios"])
        print(
            f"{r['row']:<{width}}  {r['old_ms']:9.3f}  {r['new_ms']:9.3f}  {r['ratio']:7.3f}  "
            f"{per}{flag}"
        )
    if rows:
        ratios = [r["ratio"] for r in rows]
        outside = sum(r["outside"] for r in rows)
        print(
            f"{len(rows)} rows; median ratio {statistics.median(ratios):.3f}, range "
            f"{min(ratios):.3f}-{max(ratios):.3f}; {outside} outside +-{args.tolerance:.0%}"
        )


if __name__ == "__main__":
    main()
