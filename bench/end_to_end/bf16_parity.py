"""bf16 mixed-precision training against float32 on the examples (issue 40): do names, charlm,
sunspots and tagging, trained with bf16 products, reach their float32 figures within float32's
own seed-to-seed spread?

For each example, each cell its ``--cell`` offers (rnn, gru, lstm) and each seed 0 .. N-1 this
runs the example itself (its ``main()``, imported from examples/, in this process) twice: once
in float32 and once inside ``rnnfast.precision.products("bf16")``, which makes every float32
kernel call of the thread (input projections, recurrent steps, weight and input gradients,
the Dense / Linear heads) multiply bf16-rounded operands with float32 sums, while the weights,
gradients, Adam's state, gates and states stay float32. The figure is the one the example's
RESULT line reports: names and tagging the test accuracy (higher is better), charlm the
validation perplexity and sunspots the test RMSE in sunspot units (lower is better). The
example's ``--seed`` sets the weights' initialisation and the batch order (names: also its
80/20 split; sunspots: also the dropout masks); charlm's truncated-BPTT windows come in the
text's order whatever the seed (``fit_stream`` does not shuffle), so there it is the weights
alone. The float32 and bf16 runs of a seed start from the same weights and see the same
batches; a row counts the seeds whose trained weights bf16 changed (bitwise, against float32's
of the same seed: 0 would mean that the bf16 products never reached the training), and the
script ends with an error where a layer with parameters of an example's model does not run
its products on rnnfast's float32 kernels (``kernel_products``), which bf16 would miss.

The parity rule, per example and cell: with the float32 figures' min, max and spread
s = max - min over the seeds, the bf16 mean must lie in [min - s, max + s] ("yes"); a bf16
mean outside that window on the better side is reported as "no (better)", on the worse side
as "NO (worse)"; with a single seed there is no spread and no verdict ("n/a"). The table
also says whether the bf16 mean lies inside float32's min..max itself, the stricter reading.

Settings (``--quick`` aside): the examples' defaults but for these, chosen so that the whole
table (3 seeds x 2 precisions x 3 cells x 3 examples) runs in about a quarter of an hour on a
2-core machine (REDUCED below; ``--example-defaults`` runs the defaults, several times
longer): names ``--epochs 5`` (of 15), charlm ``--epochs 1`` (of 2; the full text), sunspots
``--epochs 20`` (of 60), tagging ``--epochs 3`` (of 10); charlm's decoded samples, which no
figure reads, are 20 characters long instead of 200, and no example draws its plot.

    python -m bench.end_to_end.bf16_parity [--examples names charlm ...] [--cells rnn gru lstm]
        [--seeds 3] [--data ROOT] [--tagging-data UD_FOLDER_OR_FILE] [--threads N]
        [--example-defaults] [--quick] [--emulate] [--json PATH] [--markdown PATH]

``--data ROOT`` is the datasets root of names, charlm and sunspots (default: ../shared/data
where it is beside the checkout, else rnnfast.datasets' lookup); tagging needs
``--tagging-data`` (a Universal Dependencies treebank folder or one CoNLL-U file) and is left
out, with a note in the table, without it. ``--quick`` checks the machinery: one seed, one
epoch on a few batches (the first 8 names per language, 40,000 characters, 20 years of
sunspots, the first 64 sentences of the treebank). On a CPU without bf16 products (no
AVX512-BF16) the script says so and ends, unless ``--emulate``: rnnfast's software rounding
(``_core.set_bf16_emulation``), the same rounding model, far slower, flagged in the output.
The JSON (``--json``, default bench/results/bf16_parity.json) is rewritten after every run,
so that a stopped run keeps what it measured.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import importlib.util
import io
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import rnnfast
from bench import REPO, RESULTS, SHARED_DATA
from bench._common import cpu_clock, cpu_model, others_cpus
from bench.end_to_end._summary import TASKS, add_data_arguments, read_run
from rnnfast import _core
from rnnfast.precision import bf16_available, products

EXAMPLES_DIR = REPO / "examples"
EXAMPLES = ("names", "charlm", "sunspots", "tagging")
PRECISIONS = ("float32", "bf16")
# the examples' defaults these runs shorten (the examples' --help states the defaults)
REDUCED = {
    "names": {"--epochs": ("5", "15")},
    "charlm": {"--epochs": ("1", "2")},
    "sunspots": {"--epochs": ("20", "60")},
    "tagging": {"--epochs": ("3", "10")},
}
QUICK_EPOCHS = "1"
# options that change no figure and only save time: charlm's decoded samples
ALWAYS = {"charlm": ["--length", "20"]}
QUICK_NAMES_PER_LANGUAGE = 8
QUICK_TEXT_CHARS = 40_000  # 11 training windows of 32 x 100, one validation window
QUICK_SUNSPOT_YEARS = 20
QUICK_SENTENCES = 64


@dataclasses.dataclass
class Run:
    example: str
    cell: str
    precision: str
    seed: int
    value: float
    epoch_s: list
    time_s: float
    result: dict
    weights_changed: float | None = None  # bf16: max |w_bf16 - w_float32|, the same seed


# ----------------------------------------------------------------------------- the examples


def load_example(name):
    """examples/<name>.py as a module (its ``_cli`` and ``_tasks`` found beside it)."""
    if str(EXAMPLES_DIR) not in sys.path:
        sys.path.insert(0, str(EXAMPLES_DIR))
    module_name = f"_bf16_parity_example_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, EXAMPLES_DIR / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def cells():
    """The cells the examples' ``--cell`` offers (examples/_cli.py's, shared by all four)."""
    load_example("names")
    import _cli  # the examples' own, from examples/ (load_example put it on sys.path)

    return tuple(_cli.CELLS)


@contextlib.contextmanager
def no_plots():
    """The examples' plots skipped, as without matplotlib (they are not what is measured)."""
    import _cli

    before = _cli.pyplot
    _cli.pyplot = lambda what: None
    try:
        yield
    finally:
        _cli.pyplot = before


@contextlib.contextmanager
def trained_models():
    """The models the examples hand to ``training.fit`` / ``fit_stream`` inside the block, in a
    list: to check that bf16 reaches every layer with parameters."""
    from rnnfast import training

    seen = []
    before = {name: getattr(training, name) for name in ("fit", "fit_stream")}

    def recording(fn):
        def run(model, *args, **kwargs):
            seen.append(model)
            return fn(model, *args, **kwargs)

        return run

    for name, fn in before.items():
        setattr(training, name, recording(fn))
    try:
        yield seen
    finally:
        for name, fn in before.items():
            setattr(training, name, fn)


def float32_only_layers(model):
    """The layers of ``model`` with parameters whose products are not all rnnfast's float32
    kernels (``kernel_products`` False): bf16 products would not reach them."""
    found = []

    def walk(layer, where):
        children = getattr(layer, "named_children", None)
        if callable(children):
            for prefix, child in children():
                walk(child, f"{where}.{prefix}")
            return
        params = layer.parameters() if callable(getattr(layer, "parameters", None)) else []
        if list(params) and not getattr(layer, "kernel_products", False):
            found.append(f"{where} ({type(layer).__name__})")

    walk(model, "model")
    return found


def weights_of(models):
    """The parameters of the models an example trained, as one float64 vector."""
    return np.concatenate(
        [np.ravel(p).astype(np.float64) for m in models for p in m.parameters()] or [[]]
    )


def run_example(name, argv, precision):
    """(figures of the RESULT line, seconds per epoch, models trained) of the example's
    ``main(argv)`` run with ``precision``'s products; its output is captured, and shown (the
    end of it) only when it fails."""
    module = load_example(name)
    out, err = io.StringIO(), io.StringIO()
    try:
        with (
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
            no_plots(),
            trained_models() as models,
            products(precision),
        ):
            module.main(argv)
    except (Exception, SystemExit) as exc:
        tail = (out.getvalue() + err.getvalue())[-2000:]
        raise SystemExit(
            f"examples/{name}.py {' '.join(argv)} ({precision}) failed: {exc!r}\n{tail}"
        ) from exc
    figures, epoch_s = read_run(out.getvalue())
    return figures, epoch_s, models


# ----------------------------------------------------------------------------- settings, data


def settings(args):
    """Per example: the options every run of it gets besides --cell and --seed, and what was
    shortened ("--epochs 5 (default 15)")."""
    out = {}
    for name in args.examples:
        argv, reduced = list(ALWAYS.get(name, [])), []
        if args.quick:
            argv += ["--epochs", QUICK_EPOCHS]
            reduced.append(f"--epochs {QUICK_EPOCHS} on a few batches (--quick)")
        elif not args.example_defaults:
            for option, (value, default) in REDUCED[name].items():
                argv += [option, value]
                reduced.append(f"{option} {value} (default {default})")
        if name == "tagging":
            argv += ["--data", str(args.tagging_data)]
        elif args.data is not None:
            argv += ["--data", str(args.data)]
        out[name] = {"argv": argv, "reduced": reduced}
    return out


def quick_data(root, data, tagging, names):
    """Small copies of the data sets (``--quick``) in ``root``: the first names of each
    language, the beginning of the text, the first years of sunspots, the first sentences
    of the treebank (as one CoNLL-U file, which tagging splits 80/10/10). Returns (the datasets
    root, the tagging file or None)."""
    from rnnfast import datasets
    from rnnfast.datasets import locate

    if "names" in names:
        folder = root / "names"
        folder.mkdir()
        for language, entries in datasets.load("names", data).items():
            kept = entries[:QUICK_NAMES_PER_LANGUAGE]
            (folder / f"{language}.txt").write_text("\n".join(kept) + "\n", encoding="utf-8")
    if "charlm" in names:
        folder = root / "tinyshakespeare"
        folder.mkdir()
        text = datasets.load("tinyshakespeare", data)[:QUICK_TEXT_CHARS]
        (folder / "input.txt").write_text(text, encoding="utf-8")
    if "sunspots" in names:
        folder = root / "sunspots"
        folder.mkdir()
        source = locate("sunspots", data) / "sunspots_monthly.dat"
        lines, years = [], 0
        for line in source.read_text(encoding="utf-8").splitlines():
            first = line.split()[:1]
            if first and first[0].isdigit() and len(first[0]) == 4:
                years += 1
                if years > QUICK_SUNSPOT_YEARS:
                    continue
            lines.append(line)
        (folder / "sunspots_monthly.dat").write_text("\n".join(lines) + "\n", encoding="utf-8")
    small_tagging = None
    if "tagging" in names:
        from _tasks import load_splits

        sentences = [s for part in load_splits(tagging) for s in part][:QUICK_SENTENCES]
        small_tagging = root / "tagging.conllu"
        small_tagging.write_text(conllu(sentences), encoding="utf-8")
    return root, small_tagging


def conllu(sentences):
    """CoNLL-U text of sentences read by rnnfast.data.conllu (forms and UPOS tags kept)."""
    blocks = []
    for sentence in sentences:
        rows = [
            f"{i}\t{form}\t_\t{tag}\t_\t_\t_\t_\t_\t_"
            for i, (form, tag) in enumerate(zip(sentence.forms, sentence.upos), start=1)
        ]
        blocks.append("\n".join(rows) + "\n")
    return "\n".join(blocks)


# ----------------------------------------------------------------------------- rows, verdicts


def stats(values):
    return {
        "values": values,
        "mean": statistics.fmean(values),
        "min": min(values),
        "max": max(values),
        "spread": max(values) - min(values),
    }


def verdict(f32, bf16_mean, higher_is_better):
    """The parity rule of the docstring: (window, "yes" / "no (better)" / "NO (worse)" / "n/a"
    (one seed: no spread), inside float32's min..max)."""
    lo, hi = f32["min"] - f32["spread"], f32["max"] + f32["spread"]
    if len(f32["values"]) < 2:
        word = "n/a"
    elif lo <= bf16_mean <= hi:
        word = "yes"
    else:
        better = (bf16_mean > hi) if higher_is_better else (bf16_mean < lo)
        word = "no (better)" if better else "NO (worse)"
    return [lo, hi], word, f32["min"] <= bf16_mean <= f32["max"]


def summarize(runs):
    """One row per example x cell with both precisions, in the order first seen."""
    groups = {}
    for run in runs:
        groups.setdefault((run.example, run.cell), {}).setdefault(run.precision, []).append(run)
    rows = []
    for (example, cell), sides in groups.items():
        if set(sides) != set(PRECISIONS):
            continue
        f32_by_seed = {r.seed: r.value for r in sides["float32"]}
        bf16_by_seed = {r.seed: r.value for r in sides["bf16"]}
        paired = sorted(set(f32_by_seed) & set(bf16_by_seed))
        if not paired:
            continue
        f32 = stats([f32_by_seed[s] for s in paired])
        bf16 = stats([bf16_by_seed[s] for s in paired])
        task = TASKS[example]
        window, word, inside = verdict(f32, bf16["mean"], task.higher_is_better)
        rows.append(
            {
                "example": example,
                "cell": cell,
                "metric": task.metric,
                "higher_is_better": task.higher_is_better,
                "seeds": paired,
                "float32": f32,
                "bf16": bf16,
                "difference": bf16["mean"] - f32["mean"],
                "window": window,
                "within": word,
                "inside_min_max": inside,
                "bf16_changed_figures": sum(f32_by_seed[s] != bf16_by_seed[s] for s in paired),
                "bf16_changed_weights": sum(
                    bool(r.weights_changed) for r in sides["bf16"] if r.seed in paired
                ),
                "max_weight_change": max(
                    (r.weights_changed or 0.0 for r in sides["bf16"] if r.seed in paired),
                    default=0.0,
                ),
                "epoch_s": {
                    p: statistics.median(statistics.median(r.epoch_s) for r in sides[p])
                    for p in PRECISIONS
                },
            }
        )
    return rows


def _fmt(x):
    return f"{x:.4f}" if abs(x) < 100 else f"{x:.2f}"


def markdown(rows, info, left_out):
    """A table per example, headed by its figure and its settings."""
    lines = []
    for example in dict.fromkeys(r["example"] for r in rows):
        mine = [r for r in rows if r["example"] == example]
        first = mine[0]
        way = "higher is better" if first["higher_is_better"] else "lower is better"
        reduced = info["settings"][example]["reduced"]
        lines += [
            f"### {example}: {first['metric']} ({way}), seeds {', '.join(map(str, first['seeds']))}; "
            + (", ".join(reduced) if reduced else "the example's defaults"),
            "",
            "| cell | float32 mean ± spread (min..max) | bf16 mean ± spread (min..max) "
            "| bf16 − float32 | within float32's spread? | inside float32's min..max? "
            "| weights bf16 changed (max abs change) | s/epoch float32 / bf16 |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in mine:
            f, b = r["float32"], r["bf16"]
            lines.append(
                f"| {r['cell']} | {_fmt(f['mean'])} ± {_fmt(f['spread'])} "
                f"({_fmt(f['min'])}..{_fmt(f['max'])}) "
                f"| {_fmt(b['mean'])} ± {_fmt(b['spread'])} ({_fmt(b['min'])}..{_fmt(b['max'])}) "
                f"| {r['difference']:+.4f} | {r['within']} "
                f"| {'yes' if r['inside_min_max'] else 'no'} "
                f"| {r['bf16_changed_weights']}/{len(r['seeds'])} seeds "
                f"({r['max_weight_change']:.2g}) "
                f"| {r['epoch_s']['float32']:.3f} / {r['epoch_s']['bf16']:.3f} |"
            )
        lines.append("")
    for example, why in left_out.items():
        lines += [f"### {example}: not run: {why}", ""]
    return "\n".join(lines)


def header(info):
    emulated = (
        " (EMULATED: --emulate on a CPU without bf16 products, the software rounding)"
        if info["bf16_emulated"]
        else ""
    )
    return (
        f"{info['cpu']}; rnnfast {info['rnnfast_version']} on {info['rnnfast_isa']}, "
        f"{info['threads']} threads; bf16 products: {info['bf16_products_path']}{emulated}\n"
        "parity rule: the bf16 mean over the seeds inside [min - s, max + s] of the float32 "
        "figures, s = max - min (the same seeds); 'inside min..max' is the stricter reading"
    )


# ----------------------------------------------------------------------------- main


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--examples", nargs="+", choices=EXAMPLES, default=list(EXAMPLES))
    parser.add_argument("--cells", nargs="+", help="cells of --cell (default: all it offers)")
    parser.add_argument("--seeds", type=int, help="seeds 0 .. N-1 (default 3; --quick 1)")
    add_data_arguments(parser, SHARED_DATA)
    parser.add_argument("--threads", type=int, help="rnnfast threads (default: the library's)")
    parser.add_argument(
        "--example-defaults", action="store_true", help="the examples' own epochs (longer)"
    )
    parser.add_argument("--quick", action="store_true", help="1 seed, 1 epoch, a few batches")
    parser.add_argument(
        "--emulate",
        action="store_true",
        help="on a CPU without bf16 products, rnnfast's software rounding (slow; flagged)",
    )
    parser.add_argument("--json", type=Path, default=RESULTS / "bf16_parity.json")
    parser.add_argument("--markdown", type=Path, help="also write the tables to this file")
    args = parser.parse_args(argv)
    offered = cells()
    args.cells = args.cells or list(offered)
    for cell in args.cells:
        if cell not in offered:
            parser.error(f"--cells: {cell!r} is not one of the examples' cells {offered}")
    if args.seeds is None:
        args.seeds = 1 if args.quick else 3
    if args.seeds < 1:
        parser.error(f"--seeds: expected a positive number, got {args.seeds}")
    if args.threads is not None and args.threads < 1:
        parser.error(f"--threads: expected a positive number, got {args.threads}")
    return args


def bf16_setup(emulate):
    """The bf16 products path; without bf16 on this CPU, the end of the script with the reason
    (or, under ``emulate``, rnnfast's software rounding switched on)."""
    if not bf16_available():
        if not emulate:
            raise SystemExit(
                f"bf16_parity: this machine has no bf16 products: "
                f"{_core.bf16_unavailable_reason()} (--emulate runs rnnfast's software rounding "
                "of the same model, far slower than float32)"
            )
        _core.set_bf16_emulation(True)
    return _core.bf16_products_path()


def main(argv=None):
    args = parse_args(argv)
    emulation_before = _core.bf16_emulation()
    threads_before = rnnfast.get_num_threads()
    path = bf16_setup(args.emulate)
    try:
        if args.threads is not None:
            rnnfast.set_num_threads(args.threads)
        with tempfile.TemporaryDirectory() as tmp:
            return run_table(args, path, Path(tmp))
    finally:
        rnnfast.set_num_threads(threads_before)
        _core.set_bf16_emulation(emulation_before)


def run_table(args, path, tmp):
    examples = list(args.examples)
    left_out = {}
    if "tagging" in examples and args.tagging_data is None:
        examples.remove("tagging")
        left_out["tagging"] = (
            "no Universal Dependencies treebank (--tagging-data): ../shared/data holds names, "
            "tinyshakespeare and sunspots only"
        )
    args.examples = examples
    if args.quick:
        (tmp / "data").mkdir()
        args.data, args.tagging_data = quick_data(
            tmp / "data", args.data, args.tagging_data, examples
        )
    info = {
        "cpu": cpu_model(),
        "rnnfast_version": rnnfast.__version__,
        "rnnfast_isa": _core.active_isa(),
        "threads": rnnfast.get_num_threads(),
        "bf16_products_path": path,
        "bf16_emulated": bool(_core.bf16_emulation()),
        "python": sys.version.split()[0],
        "settings": settings(args),
    }
    doc = {
        "script": "bench.end_to_end.bf16_parity",
        "command": " ".join(sys.argv),
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "quick": args.quick,
        "machine": info,
        "rule": "bf16 mean in [min - s, max + s] of the float32 figures, s = max - min",
        "left_out": left_out,
        "runs": [],
        "rows": [],
    }
    print(header(info), flush=True)
    runs, since, start = [], cpu_clock(), time.perf_counter()
    float32_weights = {}
    out_dir = tmp / "out"  # the examples' saved models
    for example in examples:
        base = info["settings"][example]["argv"]
        for cell in args.cells:
            for seed in range(args.seeds):
                for precision in PRECISIONS:
                    argv = [*base, "--cell", cell, "--seed", str(seed), "--out", str(out_dir)]
                    figures, epoch_s, models = run_example(example, argv, precision)
                    missing = [w for m in models for w in float32_only_layers(m)]
                    if precision == "bf16" and missing:
                        raise SystemExit(
                            f"{example} {cell}: bf16 products do not reach {', '.join(missing)}"
                        )
                    weights = weights_of(models)
                    run = Run(
                        example,
                        cell,
                        precision,
                        seed,
                        figures[TASKS[example].metric],
                        epoch_s,
                        figures.get("time_s", math.nan),
                        figures,
                    )
                    if precision == "float32":
                        float32_weights = weights
                    elif weights.shape == float32_weights.shape:
                        run.weights_changed = float(np.max(np.abs(weights - float32_weights)))
                    runs.append(run)
                    print(
                        f"{example} {cell} seed {seed} {precision}: "
                        f"{TASKS[example].metric} {run.value:.4f}, {run.time_s:.1f} s",
                        file=sys.stderr,
                        flush=True,
                    )
                    doc["runs"].append(dataclasses.asdict(run))
                    doc["rows"] = summarize(runs)
                    doc["wall_s"] = time.perf_counter() - start
                    doc["others_cpus"] = others_cpus(since)
                    args.json.parent.mkdir(parents=True, exist_ok=True)
                    args.json.write_text(json.dumps(doc, indent=1))
    doc["wall_s"] = time.perf_counter() - start
    doc["others_cpus"] = others_cpus(since) if runs else 0.0
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(doc, indent=1))
    table = markdown(doc["rows"], info, left_out)
    footer = (
        f"{len(runs)} trainings in {doc['wall_s']:.0f} s; others' CPU use meanwhile "
        f"{doc['others_cpus']:.2f} CPUs on average"
    )
    print(f"\n{table}\n{footer}\nwrote {args.json}")
    if args.markdown is not None:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(f"{header(info)}\n\n{table}\n{footer}\n", encoding="utf-8")
        print(f"wrote {args.markdown}")
    return doc


if __name__ == "__main__":
    main()
