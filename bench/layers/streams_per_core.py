"""Deployment: how many independent streams one core serves at a step budget (issue 41, item 6).

    python -m bench.layers.streams_per_core [--cells rnn,gru,lstm] [--sizes 64,256]
                                            [--kinds float32,bf16,int8] [--budget-ms 10]
                                            [--max-streams 65536] [--repeats 5] [--out PATH]
                                            [--min-repeat-s 0.02] [--warmup-s 0.05]

A server holds the state of N streams (a speech or sensor server's sessions) and, every tick,
steps each of them once. The figure is the largest N whose step of all N streams (their ids in
a shuffled order, as sessions arrive) takes at most the budget (default 10 ms), found by
doubling N and then bisecting on measured medians (to 1% of N), with 1 thread pinned to one
core. D = H, one layer, three ways of serving:

- ``streams``: ``rnnfast.Streams`` (one batched ``layer.step`` for all N, the states gathered
  with ``np.take`` and scattered back);
- ``loop``: a loop of per-stream ``layer.step(x_i, state_i)`` calls, each stream's state its
  own arrays;
- ``torch``: ``nn.RNNCell`` / ``GRUCell`` / ``LSTMCell`` on the gathered batch, its states in
  one (N, H) tensor per state, gathered with ``index_select`` and scattered with
  ``index_copy_``, without gradients. float32 only: torch's cells take neither a bf16-products
  mode of this kind nor int8 weights, so the bf16 and int8 rows compare with none.

The kinds are rnnfast's layers in float32, with ``precision="bf16"`` (bf16 products, float32
sums) and their int8 copies (``rnnfast.quantize(layer, "int8")``). Prints the CPU, its ISA and
the bf16 / int8 paths, the others' CPU use during the run, and the table; writes JSON (default
bench/results/streams_per_core.json). Timings on a loaded machine shrink every N: compare the
columns of one run, not runs.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

import rnnfast
from bench import RESULTS
from bench._common import (
    add_timing_arguments,
    cell,
    cores_for,
    cpu_clock,
    cpu_model,
    others_cpus,
    parse_tuples,
    pinned_to,
    split_names,
    text_table,
    thread_count,
    time_each,
    torch_blas,
    write_json,
)
from rnnfast import _core

LAYERS = {"rnn": rnnfast.RNN, "gru": rnnfast.GRU, "lstm": rnnfast.LSTM}
TORCH_CELLS = {"rnn": "RNNCell", "gru": "GRUCell", "lstm": "LSTMCell"}
KINDS = ("float32", "bf16", "int8")
ENGINES = ("streams", "loop", "torch")
PRECISION = 0.01  # bisection stops when the bracket is within 1% of N


def build_layer(name, size, kind):
    """The layer of one row: D = H = size, float32, bf16 products or int8 weights."""
    precision = "bf16" if kind == "bf16" else "float32"
    layer = LAYERS[name](size, size, seed=0, precision=precision).eval()
    return rnnfast.quantize(layer, "int8") if kind == "int8" else layer


def serve_streams(layer, n, x, ids):
    """One tick of ``rnnfast.Streams``: every stream stepped in one batched call."""
    streams = rnnfast.Streams(layer, n)
    return lambda: streams.step(ids, x)


def serve_loop(layer, n, x, ids):
    """One tick of per-stream ``layer.step`` calls, each stream's state carried on its own."""
    rows = [np.ascontiguousarray(x[i : i + 1]) for i in range(n)]
    states = [layer.step(row)[1] for row in rows]  # each stream's own state, bound step's form
    step = layer.step

    def tick():
        for i in ids:
            states[i] = step(rows[i], states[i])[1]

    return tick


def serve_torch(name, size, n, x, ids):
    """One tick of torch's cell on the gathered batch, gathered and scattered by index."""
    module = getattr(torch.nn, TORCH_CELLS[name])(size, size)
    module.requires_grad_(False)  # no graph, as under no_grad
    tx, tids = torch.from_numpy(x), torch.from_numpy(ids)
    stores = [torch.zeros(n, size) for _ in range(2 if name == "lstm" else 1)]

    def tick():
        gathered = [s.index_select(0, tids) for s in stores]
        new = module(tx, tuple(gathered) if len(gathered) == 2 else gathered[0])
        for s, v in zip(stores, new if isinstance(new, tuple) else (new,)):
            s.index_copy_(0, tids, v)

    return tick


def tick_seconds(engine, name, size, layer, n, args):
    """The median seconds of one tick of n streams by ``engine``."""
    rng = np.random.default_rng(n)
    x = rng.standard_normal((n, size)).astype(np.float32)
    ids = rng.permutation(n)
    if engine == "torch":
        fn = serve_torch(name, size, n, x, ids)
    else:
        fn = (serve_streams if engine == "streams" else serve_loop)(layer, n, x, ids)
    t = time_each({engine: fn}, args.repeats, args.min_repeat_s, args.warmup_s)
    return t[engine]["median_s"]


def largest_within(seconds, budget_s, cap):
    """The largest N <= cap with seconds(N) <= budget_s (0 where N = 1 is over it) and its
    time: N doubled until over the budget, then the bracket bisected to PRECISION of N."""
    lo, t_lo = 0, None
    n = 1
    while True:
        t = seconds(n)
        if t > budget_s:
            hi = n
            break
        lo, t_lo = n, t
        if n == cap:
            return lo, t_lo
        n = min(2 * n, cap)
    while lo and hi - lo > max(1, int(lo * PRECISION)):
        mid = (lo + hi) // 2
        t = seconds(mid)
        if t <= budget_s:
            lo, t_lo = mid, t
        else:
            hi = mid
    return lo, t_lo


def measure(args):
    rows = []
    budget_s = args.budget_ms / 1e3
    with thread_count(1), pinned_to(cores_for(1)):
        for name in args.cells:
            for size in args.sizes:
                for kind in args.kinds:
                    layer = build_layer(name, size, kind)
                    row = {"cell": name, "H": size, "kind": kind}
                    for engine in ENGINES:
                        if engine == "torch" and kind != "float32":
                            row["torch_n"] = row["torch_us"] = None
                            continue

                        def seconds(n, engine=engine):
                            return tick_seconds(engine, name, size, layer, n, args)

                        n, t = largest_within(seconds, budget_s, args.max_streams)
                        row[f"{engine}_n"] = n
                        row[f"{engine}_us"] = None if not n else t * 1e6 / n  # per stream
                    row["vs_loop"] = _ratio(row["streams_n"], row["loop_n"])
                    row["vs_torch"] = _ratio(row["streams_n"], row["torch_n"])
                    rows.append(row)
    return rows


def _ratio(a, b):
    return None if not b else a / b


def _text(key, spec, suffix=""):
    """A column's text where the value may be None (no torch on a bf16 / int8 row): '-'."""
    return lambda r: "-" if r[key] is None else f"{r[key]:{spec}}{suffix}"


def parse_sizes(text):
    """``"64,256"`` as a list of positive ints."""
    return [t[0] for t in parse_tuples(text.replace(",", ";"), "H", "--sizes")]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", default="rnn,gru,lstm")
    parser.add_argument("--sizes", type=parse_sizes, default=[64, 256])
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--budget-ms", type=float, default=10.0)
    parser.add_argument("--max-streams", type=int, default=65536)
    add_timing_arguments(parser, 5, 0.02, RESULTS / "streams_per_core.json")
    parser.set_defaults(warmup_s=0.05)
    args = parser.parse_args(argv)
    args.cells = split_names(args.cells, "--cells", tuple(LAYERS))
    args.kinds = split_names(args.kinds, "--kinds", KINDS)
    since = cpu_clock()
    rows = measure(args)
    busy = others_cpus(since)
    paths = (
        f"bf16 products {_core.bf16_products_path() or 'none'}, int8 {_core.quantized_path('int8')}"
    )
    machine = f"{cpu_model()}, rnnfast {_core.active_isa()} ({paths}), 1 thread pinned to one core"
    print(f"streams served per core at {args.budget_ms:g} ms a step, D = H: {machine}")
    print(f"torch: {torch_blas()}; float32 only (no bf16-products or int8 cells)")
    print(f"others' CPU use during the run: {busy:.2f} CPUs (a loaded machine shrinks every N)")
    columns = [("cell", "<5", cell("cell")), ("H", ">4", cell("H")), ("kind", "<8", cell("kind"))]
    for engine in ENGINES:
        columns += [(engine, ">8", _text(f"{engine}_n", "d"))]
        columns += [("us/str", ">7", _text(f"{engine}_us", ".2f"))]
    columns += [("vs loop", ">8", _text("vs_loop", ".2f", "x"))]
    columns += [("vs torch", ">9", _text("vs_torch", ".2f", "x"))]
    print(text_table(columns, rows))
    write_json(
        args.out,
        {
            "machine": machine,
            "isa": _core.active_isa(),
            "budget_ms": args.budget_ms,
            "others_cpus": busy,
            "rows": rows,
        },
    )


if __name__ == "__main__":
    main()
