"""The command line every example shares: ``--data ROOT`` (the datasets root), ``--out DIR``
(plots and saved models), ``--quantize {bf16,int8}`` (evaluate the quantized copy too),
``--cell {rnn,gru,lstm}`` (the recurrent layer's cell, where the example offers it), every
option's help with its default, a bad path as one line on
stderr and exit status 2, and plots skipped with a message when matplotlib is missing.

(The examples import it from their own folder, which Python puts first on sys.path.)
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

from rnnfast import datasets

DEFAULT_OUT = Path("rnnfast-out")


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Each option's default after its help; an option whose default is None says in its
    help what happens then (``--data``: the datasets lookup)."""

    def _get_help_string(self, action):
        if action.default is None:
            return action.help
        return super()._get_help_string(action)


def parser(doc, **kwargs):
    """An argument parser described by the docstring's first paragraph."""
    return argparse.ArgumentParser(
        description=doc.split("\n\n")[0].strip(), formatter_class=HelpFormatter, **kwargs
    )


def add_data(p, name):
    p.add_argument(
        "--data",
        type=Path,
        default=None,
        metavar="ROOT",
        help=f"the datasets root, a folder laid out as the project's shared/data "
        f"(ROOT/{'names/*.txt' if name == 'names' else name + '/...'}); by default "
        f"rnnfast.datasets looks in ${datasets.DATA_ENV}, then in the cache "
        f"({datasets.cache_dir()}), then downloads the data set there",
    )


def add_out(p):
    p.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        metavar="DIR",
        help="folder for the plots and saved models (created when missing)",
    )


def add_quantize(p):
    p.add_argument(
        "--quantize",
        choices=("bf16", "int8"),
        default=None,
        help="after training, also evaluate rnnfast.quantize(model, MODE) (bf16 or int8 "
        "weights) and add its figure to the RESULT line as quantized_...=; by default only "
        "the float32 model is evaluated",
    )


CELLS = {"rnn": "RNN", "gru": "GRU", "lstm": "LSTM"}


def add_cell(p):
    p.add_argument(
        "--cell",
        choices=tuple(CELLS),
        default="rnn",
        help="the recurrent layers' cell: rnn (rnnfast.RNN, the Elman cell), gru (rnnfast.GRU) "
        "or lstm (rnnfast.LSTM), each with the same sizes and options",
    )


def recurrent(cell, input_size, hidden_size, **options):
    """The recurrent layer of ``--cell``: ``rnnfast.RNN``, ``GRU`` or ``LSTM`` (keywords only:
    their positional arguments differ after num_layers)."""
    import rnnfast

    return getattr(rnnfast, CELLS[cell])(input_size, hidden_size, **options)


def zero_state(rnn, batch, dtype):
    """A state of zeros for ``rnn.step`` (one layer's worth per stacked layer): h, or the
    LSTM's pair (h, c)."""
    h = np.zeros((rnn.num_layers, batch, rnn.hidden_size), dtype=dtype)
    return (h, h.copy()) if rnn.cell.num_states == 2 else h


def copy_state(state):
    """A copy of a step's state (h, or the LSTM's (h, c)): the next step may reuse its memory."""
    if isinstance(state, tuple):
        return tuple(s.copy() for s in state)
    return state.copy()


def check_quantizable(p, model, mode):
    """Before training: ``--quantize`` with a model ``rnnfast.quantize`` cannot copy (a cell
    without quantized kernels) is one line and exit status 2, not an error after training."""
    if mode is None:
        return
    import rnnfast

    try:
        rnnfast.quantize(model, mode)
    except ValueError as exc:
        fail(p, f"--quantize {mode}: {exc}")


def quantized(model, mode):
    """``rnnfast.quantize(model, mode)``, its weight bytes beside the float model's printed."""
    import rnnfast

    q = rnnfast.quantize(model, mode)
    print(f"quantized ({mode}):")
    q.summary()
    return q


class EpochClock:
    """A ``training.fit`` callback that records each epoch's wall time (training and the
    epoch's validation), from its creation or the previous epoch's end to the epoch's end: make
    it just before ``fit``. bench/end_to_end/examples_vs_torch.py reads its line."""

    def __init__(self):
        self.seconds = []
        self._last = time.perf_counter()

    def on_epoch_end(self, epoch, logs, model):
        now = time.perf_counter()
        self.seconds.append(now - self._last)
        self._last = now
        return False  # never stops the training


def print_epoch_times(seconds, note=""):
    """``seconds per epoch{note}: 3.102 3.057 (median 3.080)``, the line the bench reads."""
    print(
        f"seconds per epoch{note}: {' '.join(f'{s:.3f}' for s in seconds)} "
        f"(median {statistics.median(seconds):.3f})"
    )


def fail(p, message):
    """One line on stderr, ``prog: error: message``, and exit status 2 (argparse's)."""
    p.exit(2, f"{p.prog}: error: {message}\n")


def load(p, name, root):
    """``rnnfast.datasets.load(name, root)``, or one line and exit status 2."""
    try:
        return datasets.load(name, root)
    except (OSError, ValueError) as exc:
        fail(p, f"--data: {exc}" if root is not None else str(exc))


def out_dir(p, path):
    """The output folder, created; one line and exit status 2 when it cannot be."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        fail(p, f"--out {path}: {exc.strerror or exc}")
    return path


def pyplot(what):
    """matplotlib.pyplot on the Agg backend, or None (after saying so) without matplotlib."""
    try:
        import matplotlib
    except ImportError:
        print(f'matplotlib is not installed (pip install ".[examples]"): no {what}')
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path, what="plot"):
    """Lay the figure out, write it to ``path`` (100 dpi) and say so: ``{what} written to ...``."""
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"{what} written to {path}")
