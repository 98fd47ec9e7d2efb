"""What the PyTorch twins of the examples (``torch_<name>.py``) share: their command line
(``--data``, ``--epochs``, the twin's own options, ``--cell``, ``--seed`` and ``--threads``), the
start of a run (PyTorch's thread count and seed, then the clock that ``time_s=`` reads), the
recurrent layer of ``--cell`` with its state's parts, and the line of the epochs' times that
the examples print too (``seconds per epoch: ...``, examples/_cli.py)."""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch
from torch import nn

# the examples' --cell (examples/_cli.py) and the torch.nn layer of the same cell: rnnfast.GRU
# and rnnfast.LSTM follow torch.nn.GRU and LSTM (their gates, their parameter names)
CELLS = {"rnn": nn.RNN, "gru": nn.GRU, "lstm": nn.LSTM}


def parse_args(doc, argv, *, epochs, options, threads=2):
    """The twin's arguments. ``options`` maps each of its own options (after ``--epochs``,
    before ``--cell``) to its default; an option's type is its default's. ``epochs`` None:
    the twin has no ``--epochs`` (its options say how long it trains); ``threads``: the default
    of ``--threads``, the example's thread count."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--data", type=Path, default=None, help="the datasets root")
    if epochs is not None:
        parser.add_argument("--epochs", type=int, default=epochs)
    for flag, default in options.items():
        parser.add_argument(flag, type=type(default), default=default)
    parser.add_argument("--cell", choices=tuple(CELLS), default="rnn")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=threads)
    return parser.parse_args(argv)


def start(args):
    """Set PyTorch's threads and seed from the arguments; the clock's reading at the start."""
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    return time.perf_counter()


def recurrent(cell, input_size, hidden_size, **options):
    """``torch.nn.RNN``, ``GRU`` or ``LSTM`` of ``--cell``, with the same sizes and options."""
    return CELLS[cell](input_size, hidden_size, **options)


def hidden(state):
    """h_n of a layer's final state: the state itself, or the first of the LSTM's (h_n, c_n)."""
    return state[0] if isinstance(state, tuple) else state


def state_map(fn, state):
    """``fn`` applied to the state, or to each part of the LSTM's (h, c)."""
    return tuple(fn(s) for s in state) if isinstance(state, tuple) else fn(state)


class _Quiet(list):
    """The items of an epoch, for a loop written against tqdm's bar, which it does not draw."""

    def set_postfix(self, *args, **kwargs):
        pass


def progress(items, desc):
    """tqdm's bar over the batches where tqdm is installed, else the batches undrawn (as
    ``training.fit`` does on the rnnfast side, which falls back to a plain text bar)."""
    try:
        from tqdm import tqdm
    except ImportError:
        return _Quiet(items)
    return tqdm(items, desc=desc, unit="batch")


class EpochClock:
    """Each epoch's wall time, from the clock's creation or the previous :meth:`lap` to this
    one: what examples/_cli.py's ``EpochClock`` measures on the rnnfast side."""

    def __init__(self):
        self.seconds = []
        self._last = time.perf_counter()

    def lap(self):
        now = time.perf_counter()
        self.seconds.append(now - self._last)
        self._last = now


def print_epoch_times(seconds, note=""):
    """The examples' line (examples/_cli.py's ``print_epoch_times``), in the same form."""
    print(
        f"seconds per epoch{note}: {' '.join(f'{s:.3f}' for s in seconds)} "
        f"(median {statistics.median(seconds):.3f})"
    )
