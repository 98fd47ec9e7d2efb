"""What the PyTorch twins of the examples (``torch_<name>.py``) share: their command line
(``--data``, ``--epochs``, the twin's own options, ``--seed`` and ``--threads``) and the start
of a run (PyTorch's thread count and seed, then the clock that ``time_s=`` reads)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch


def parse_args(doc, argv, *, epochs, options):
    """The twin's arguments. ``options`` maps each of its own options (after ``--epochs``,
    before ``--seed``) to its default; an option's type is its default's."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--data", type=Path, default=None, help="the datasets root")
    parser.add_argument("--epochs", type=int, default=epochs)
    for flag, default in options.items():
        parser.add_argument(flag, type=type(default), default=default)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    return parser.parse_args(argv)


def start(args):
    """Set PyTorch's threads and seed from the arguments; the clock's reading at the start."""
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    return time.perf_counter()
