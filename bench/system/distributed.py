"""Data-parallel scaling of a charlm training step on 1, 2, ... local MPI ranks.

    python -m bench.system.distributed [--ranks 1,2] [--steps 40] [--json FILE]
    python -m bench.system.distributed --cost-model [--compute-ms MS] [--latency-us 30]

The model is examples/charlm.py's (Embedding(V, 64) -> RNN(64, 256, stateful) -> Linear(256, V),
float32, Adam, clipping at 5) on windows of --bptt characters of tinyshakespeare
(../shared/data/tinyshakespeare/input.txt beside the checkout, or --data FILE; random
characters when it is missing). Each rank runs ONE rnnfast thread (and one BLAS thread): on
one machine the ranks share its cores, and a rank with more threads than its share would
compete with the others'.

Two scalings, each with the gradient reductions overlapped with the backward (``overlap``:
the hooks, the default), all at step time (``at step``) and none (``none``: the ranks train
independently; the ceiling N processes reach on this machine, their contention for its cores
and memory bandwidth, with no communication):

- strong: the global batch stays --batch streams, cut over the ranks (each does 1/N of it);
- weak: each rank takes --batch streams (the global batch grows with N).

For each: the median step time over --steps steps (after --warmup), the global throughput in
sequences of --bptt characters per second, the speed-up over 1 rank, and where a rank's step
time goes: compute (forward, loss, backward with the hooks' copies, clipping, Adam), the
loss-count allreduce and the wait for the gradient buckets (rank means of medians; both
waits include waiting for a slower rank, not only the transfer). Figures
from a machine that others use too are noisy: the load average is printed with them.

``--cost-model`` measures the compute of one step on 1 rank (or takes ``--compute-ms``) and
prints what it implies across machines (:func:`cost_model`): a ring allreduce of the gradient
bytes B over N machines takes ``2 (N-1)/N x B / bandwidth + 2 (N-1) x latency``; a step's
efficiency is ``compute / (compute + allreduce)`` (no overlap: the bound from below; the
overlap with the backward only helps), and 90% needs ``compute >= 9 x allreduce``, so a batch
per rank of at least ``9 x allreduce / (compute per sequence)``.

The script launches itself as ``mpiexec -n N python -m bench.system.distributed --worker``
(mpi4py and mpiexec: ``pip install ".[mpi]"``); it prints a table and writes --json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

from bench import REPO, SHARED_DATA  # paths only: nothing that loads a BLAS

# one BLAS thread per rank (see above), set before NumPy loads its BLAS
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402  (after the thread settings above)

DEFAULT_DATA = SHARED_DATA / "tinyshakespeare" / "input.txt"


def arguments(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", default="1,2", help="numbers of ranks, comma-separated")
    p.add_argument("--steps", type=int, default=40, help="timed steps per configuration")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    p.add_argument("--batch", type=int, default=32, help="streams (strong: global; weak: per rank)")
    p.add_argument("--bptt", type=int, default=100, help="characters per window")
    p.add_argument("--embed", type=int, default=64)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="a text file")
    p.add_argument("--json", type=Path, default=None, help="write the results here")
    p.add_argument("--cost-model", action="store_true", help="print the cost model's table")
    p.add_argument(
        "--compute-ms",
        type=float,
        default=None,
        help="compute per step of --batch streams for --cost-model (default: measured, 1 rank)",
    )
    p.add_argument(
        "--latency-us", type=float, default=30.0, help="per-message latency for --cost-model"
    )
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args(argv)


# ---- the ranks' side ----------------------------------------------------------------------------


def corpus(path, need):
    """(int64 ids, vocabulary size, source): the text's characters, repeated to ``need``."""
    if path.is_file():
        text = path.read_text(encoding="utf-8")
        alphabet = sorted(set(text))
        index = {c: i for i, c in enumerate(alphabet)}
        ids = np.array([index[c] for c in text], dtype=np.int64)
        source = str(path)
    else:
        ids = np.random.default_rng(0).integers(0, 65, size=need)
        alphabet, source = range(65), "random characters (no text file)"
    reps = -(-need // len(ids))
    return np.tile(ids, reps)[:need], len(alphabet), source


def measure(args, streams, mode):
    """Median phase times (s) of this rank over the timed steps. ``mode``: "overlap" (the
    hooks), "at step" (no hooks) or "none" (no reduction at all: independent processes, the
    ceiling of N processes on this machine)."""
    import rnnfast
    from rnnfast import distributed as dist
    from rnnfast import losses, optim

    r, n = dist.rank(), dist.size()
    steps = args.warmup + args.steps
    ids, vocab, _ = corpus(args.data, streams * n * (args.bptt * steps + 1) + 1)
    x, y = rnnfast.training.stream_windows(ids, streams * n, args.bptt)
    mine = slice(r * streams, (r + 1) * streams)
    model = rnnfast.Sequential(
        [
            rnnfast.Embedding(vocab, args.embed, seed=0),
            rnnfast.RNN(
                args.embed, args.hidden, batch_first=True, return_sequences=True,
                stateful=True, seed=1,
            ),
            rnnfast.Linear(args.hidden, vocab, seed=2),
        ]
    )  # fmt: skip
    opt = optim.Adam(model, lr=3e-3)
    if mode != "none":
        opt = dist.DistributedOptimizer(opt, overlap=mode == "overlap")
    dist.broadcast_parameters(model)
    comm = dist.get_comm()
    from mpi4py import MPI

    phases = {k: [] for k in ("step", "compute", "loss_allreduce", "grad_wait")}
    model.train()
    comm.Barrier()
    for i in range(steps):
        xb, yb = np.ascontiguousarray(x[i][mine]), y[i][mine]
        t0 = time.perf_counter()
        model.zero_grad()
        value, d = losses.cross_entropy(model(xb), yb)
        t1 = time.perf_counter()
        counts = np.array([float(value) * yb.size, yb.size])
        if mode != "none":
            comm.Allreduce(MPI.IN_PLACE, counts, op=MPI.SUM)
        t2 = time.perf_counter()
        model.backward(d)
        t3 = time.perf_counter()
        if mode != "none":
            opt.synchronize()
        t4 = time.perf_counter()
        optim.clip_grad_norm(model, 5.0)
        opt.step()
        t5 = time.perf_counter()
        if i >= args.warmup:
            phases["step"].append(t5 - t0)
            phases["compute"].append((t1 - t0) + (t3 - t2) + (t5 - t4))
            phases["loss_allreduce"].append(t2 - t1)
            phases["grad_wait"].append(t4 - t3)
    if mode != "none":
        opt.remove_hooks()
    mine_medians = {k: float(np.median(v)) for k, v in phases.items()}
    everyone = comm.gather(mine_medians, root=0)
    if r != 0:
        return None
    out = {k: float(np.mean([e[k] for e in everyone])) for k in mine_medians}
    out["step_max_rank"] = max(e["step"] for e in everyone)
    out["buckets"] = len(opt.buckets) if mode != "none" else 0
    return out


def gradient_bytes(embed, hidden, vocab=65, itemsize=4):
    """The bytes of the charlm model's gradients (float32; tinyshakespeare's 65 characters)."""
    count = vocab * embed + embed * hidden + hidden**2 + 2 * hidden + hidden * vocab + vocab
    return count * itemsize


def cost_model(
    compute_s,
    streams,
    grad_bytes,
    *,
    machines=(8, 64),
    gbits=(10, 25),
    latency_s=30e-6,
    target=0.9,
):
    """Rows of the cost model: for each network (Gbit/s) and number of machines N, the ring
    allreduce time ``2 (N-1)/N x grad_bytes / bandwidth + 2 (N-1) x latency_s``, the
    efficiency ``compute_s / (compute_s + allreduce)`` of a step of ``streams`` sequences per
    rank with no overlap, and the sequences per rank for ``target`` efficiency:
    ``target / (1 - target) x allreduce / (compute_s / streams)``, rounded up."""
    per_sequence = compute_s / streams
    rows = []
    for gbit in gbits:
        bandwidth = gbit * 1e9 / 8  # bytes per second
        for n in machines:
            transfer = 2 * (n - 1) / n * grad_bytes / bandwidth
            latency = 2 * (n - 1) * latency_s
            allreduce = transfer + latency
            need = math.ceil(target / (1 - target) * allreduce / per_sequence)
            rows.append(
                {
                    "gbit": gbit,
                    "machines": n,
                    "transfer_s": transfer,
                    "latency_s": latency,
                    "allreduce_s": allreduce,
                    "efficiency": compute_s / (compute_s + allreduce),
                    "streams_for_target": need,
                }
            )
    return rows


def print_cost_model(compute_s, streams, grad_bytes, latency_s, source):
    rows = cost_model(compute_s, streams, grad_bytes, latency_s=latency_s)
    print(
        f"cost model: gradients {grad_bytes / 1024:.0f} KiB per step; compute "
        f"{1e3 * compute_s:.1f} ms per step of {streams} sequences per rank "
        f"({1e3 * compute_s / streams:.3f} ms per sequence; {source}); ring allreduce "
        f"2 (N-1)/N x bytes / bandwidth + 2 (N-1) x {1e6 * latency_s:.0f} us"
    )
    header = (
        f"{'network':>8} {'machines':>8} {'transfer ms':>11} {'latency ms':>10} "
        f"{'allreduce ms':>12} {'efficiency':>10} {'batch/rank for 90%':>18}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r['gbit']:>4} Gb/s {r['machines']:>8} {1e3 * r['transfer_s']:>11.3f} "
            f"{1e3 * r['latency_s']:>10.3f} {1e3 * r['allreduce_s']:>12.3f} "
            f"{100 * r['efficiency']:>9.1f}% {r['streams_for_target']:>18}"
        )
    return rows


def allreduce_alone(args, repeats=50):
    """The median time of one blocking Allreduce of the model's gradient bytes (float32), the
    ranks lined up by a barrier before each: the transfer alone, no waiting for a slow rank."""
    from mpi4py import MPI

    from rnnfast import distributed as dist

    buf = np.ones(gradient_bytes(args.embed, args.hidden) // 4, dtype=np.float32)
    comm, times = dist.get_comm(), []
    for _ in range(repeats):
        comm.Barrier()
        t0 = time.perf_counter()
        comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
        times.append(time.perf_counter() - t0)
    return {"bytes": buf.nbytes, "seconds": float(np.median(times))}


def worker(args):
    import rnnfast
    from rnnfast import _core
    from rnnfast import distributed as dist

    dist.init()
    rnnfast.set_num_threads(1)
    n = dist.size()
    rows = []
    for scaling in ("strong", "weak"):
        if scaling == "strong" and args.batch % n:
            continue
        streams = args.batch // n if scaling == "strong" else args.batch
        for mode in ("overlap", "at step", "none"):
            result = measure(args, streams, mode)
            if result is not None:
                rows.append({"ranks": n, "scaling": scaling, "reduce": mode, "streams": streams})
                rows[-1].update(result)
    alone = allreduce_alone(args)
    if dist.rank() == 0:
        _, _, source = corpus(args.data, 10)
        info = {"isa": _core.active_isa(), "threads_per_rank": rnnfast.get_num_threads()}
        info["data"] = source
        info["allreduce_alone"] = alone
        print("JSON " + json.dumps({"rows": rows, "info": info}), flush=True)


# ---- the launcher -------------------------------------------------------------------------------


def mpiexec():
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else "mpiexec"


def launch(args, n):
    command = [mpiexec(), "-hosts", "127.0.0.1", "-n", str(n), sys.executable, "-m", __spec__.name]
    command += ["--worker", "--steps", str(args.steps), "--warmup", str(args.warmup)]
    command += ["--batch", str(args.batch), "--bptt", str(args.bptt), "--data", str(args.data)]
    command += ["--embed", str(args.embed), "--hidden", str(args.hidden)]
    # the ranks start in the repository root, where ``bench`` is found
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800, cwd=REPO)
    if done.returncode != 0:
        sys.exit(f"mpiexec -n {n} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    line = next(x for x in done.stdout.splitlines() if x.startswith("JSON "))
    return json.loads(line[5:])


def main(argv=None):
    args = arguments(argv)
    if args.worker:
        worker(args)
        return
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        if not (args.cost_model and args.compute_ms is not None):
            sys.exit("bench.system.distributed needs mpi4py and mpiexec: pip install '.[mpi]'")
    if args.cost_model:
        if args.compute_ms is not None:
            compute, source = args.compute_ms / 1e3, "--compute-ms"
        else:
            print("[1 rank: the compute of a step]", file=sys.stderr, flush=True)
            row = next(
                r
                for r in launch(args, 1)["rows"]
                if r["scaling"] == "strong" and r["reduce"] == "none"
            )
            compute = row["compute"]
            source = f"measured: 1 rank, 1 thread, median of {args.steps} steps"
        grad = gradient_bytes(args.embed, args.hidden)
        rows = print_cost_model(compute, args.batch, grad, args.latency_us / 1e6, source)
        if args.json:
            args.json.write_text(json.dumps({"compute_s": compute, "rows": rows}, indent=1))
        return
    load_before = os.getloadavg()
    results, info = [], {}
    for n in [int(v) for v in args.ranks.split(",")]:
        print(f"[{n} rank(s)]", file=sys.stderr, flush=True)
        got = launch(args, n)
        results += got["rows"]
        info = got["info"]
    load_after = os.getloadavg()
    alone = info.get("allreduce_alone", {})
    # the speed-up of every row is over 1 rank with the same scaling and reduction
    base = {(r["scaling"], r["reduce"]): r for r in results if r["ranks"] == 1}
    print(
        f"charlm step: Embedding({args.embed}) -> RNN({args.hidden}) -> Linear, float32, Adam, "
        f"bptt {args.bptt}; isa {info.get('isa')}, {info.get('threads_per_rank')} rnnfast "
        f"thread per rank, {os.cpu_count()} cores; data: {info.get('data')}"
    )
    print(
        f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f} (1 min); "
        f"medians of {args.steps} steps"
    )
    header = (
        f"{'scaling':<7} {'reduce':<8} {'ranks':>5} {'streams/rank':>12} {'step ms':>8} "
        f"{'seq/s':>8} {'speed-up':>8} {'compute ms':>10} {'loss ar ms':>10} "
        f"{'grad wait ms':>12} {'buckets':>7}"
    )
    print(header)
    print("-" * len(header))
    modes = ["overlap", "at step", "none"]
    for row in sorted(results, key=lambda r: (r["scaling"], modes.index(r["reduce"]), r["ranks"])):
        seqs = row["streams"] * row["ranks"] / row["step"]
        one = base.get((row["scaling"], row["reduce"]))
        speedup = seqs / (one["streams"] / one["step"]) if one else float("nan")
        row["sequences_per_s"], row["speedup"] = seqs, speedup
        print(
            f"{row['scaling']:<7} {row['reduce']:<8} {row['ranks']:>5} "
            f"{row['streams']:>12} {1e3 * row['step']:>8.2f} {seqs:>8.1f} {speedup:>8.2f} "
            f"{1e3 * row['compute']:>10.2f} {1e3 * row['loss_allreduce']:>10.2f} "
            f"{1e3 * row['grad_wait']:>12.2f} {row['buckets']:>7}"
        )
    if alone:
        print(
            f"one Allreduce of the {alone['bytes'] / 1024:.0f} KiB of gradients alone (ranks "
            f"lined up by a barrier, {results[-1]['ranks']} ranks): "
            f"{1e3 * alone['seconds']:.3f} ms"
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "rows": results,
                    "info": info,
                    "load": [load_before, load_after],
                    "args": {k: str(v) for k, v in vars(args).items()},
                },
                indent=1,
            )
        )
        print(f"written to {args.json}")


if __name__ == "__main__":
    main()
