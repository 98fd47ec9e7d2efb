"""What the one-name-changed clients (notes_clients.py, word_lm.py) share: their common options,
the process pinned to its cores with one thread count in every library, the machine's header
(CPU model, rnnfast's ISA, versions, threads, cores), a model built twice from the same
weights (torch.nn's recurrent class and rnnfast.torch's, the only difference), the verdict of a
target and the JSON written only when asked.

Pinning: the process and its threads are pinned (``bench._common.pinned_to``) to the first
``--threads`` CPUs it may run on, and torch, rnnfast and NumPy's BLAS get that many threads
(``bench._common.thread_count``).
"""

from __future__ import annotations

import contextlib

import torch

import rnnfast
import rnnfast.torch as rt
from bench._common import cell, cores_for, cpu_model, pinned_to, thread_count, write_json
from rnnfast import _core

# torch.nn's recurrent class of each cell and the bridge's drop-in for it
BRIDGE = {torch.nn.RNN: rt.RNN, torch.nn.GRU: rt.GRU, torch.nn.LSTM: rt.LSTM}
SIDES = ("torch", "rnnfast")


def add_arguments(parser, repeats=None):
    """``--threads`` (default 1), ``--seed``, ``--repeats`` (where the script gives its
    default) and ``--json PATH``."""
    parser.add_argument("--threads", type=int, default=1, help="threads per library (default 1)")
    parser.add_argument("--seed", type=int, default=0)
    if repeats is not None:
        parser.add_argument("--repeats", type=int, default=repeats, help="default %(default)s")
    parser.add_argument("--json", default=None, help="write the results as JSON to this path")


def check_positive(parser, args, names):
    """End the script with parser's message where one of ``names`` (attributes of args) is
    below 1."""
    for name in names:
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')}: expected a positive int")


@contextlib.contextmanager
def pinned(threads):
    """The process on its first ``threads`` cores, every library on ``threads`` threads; yields
    the cores."""
    cores = cores_for(threads)
    with pinned_to(cores), thread_count(threads):
        yield cores


def machine(threads, cores):
    """The header's facts: the CPU, rnnfast's ISA and version, torch's, the threads and cores."""
    return {
        "cpu": cpu_model(),
        "isa": _core.active_isa(),
        "rnnfast": rnnfast.__version__,
        "torch": torch.__version__,
        "threads": threads,
        "cores": list(cores),
    }


def header(facts):
    return (
        f"{facts['cpu']}; rnnfast {facts['rnnfast']} ISA {facts['isa']}; torch {facts['torch']}; "
        f"{facts['threads']} thread(s) pinned to core(s) {','.join(map(str, facts['cores']))}"
    )


def twins(build, rnn, seed):
    """{"torch": build(rnn), "rnnfast": build(BRIDGE[rnn])}: the same model twice, its recurrent
    class ``rnn`` (nn.GRU, ...) the only difference, built from the same seed, the second with
    the first's weights copied in (``load_state_dict``), so the two start equal."""
    torch.manual_seed(seed)
    ref = build(rnn)
    mine = build(BRIDGE[rnn])
    mine.load_state_dict(ref.state_dict())
    return {"torch": ref, "rnnfast": mine}


def same_rng(fn, seed):
    """fn run from torch's global generator seeded with ``seed``, the generator's state after
    restored to what it was before (so the other side can draw the same numbers)."""
    state = torch.get_rng_state()
    torch.manual_seed(seed)
    try:
        return fn()
    finally:
        torch.set_rng_state(state)


def side_columns(key, unit, spec, width=10):
    """The table's two columns of a figure, torch's then rnnfast's: "torch <unit>" over
    row["torch_<key>"], "rnnfast <unit>" over row["rnnfast_<key>"]."""
    return [(f"{side} {unit}", f">{width}", cell(f"{side}_{key}", spec)) for side in SIDES]


# the tables' ratio (torch / rnnfast) and load columns
RATIO_COLUMN = ("ratio", ">6", cell("ratio", ".2f", "x"))
LOAD_COLUMN = ("others' CPUs", ">12", cell("others_cpus", ".2f"))


def verdict(ratio, target):
    return "met" if ratio >= target else "MISSED"


def maybe_write_json(path, result):
    if path:
        write_json(path, result)
