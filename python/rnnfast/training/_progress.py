"""The progress of a training epoch, for people and for logs (Keras's ``verbose``).

- ``0``: silent.
- ``1``: a progress bar on stderr, then one line per epoch on stdout. On a terminal the bar is
  live (tqdm when it is installed, the ``examples`` extra, else a text bar redrawn with a
  carriage return); elsewhere (a pipe, a file, a batch job's log) it is the text bar written as
  a new line at each tenth of the epoch, so a log gets at most ten bar lines per epoch.
- ``2``: one line per epoch on stdout: its figures, batches, seconds and samples per second.
- ``"auto"`` (the default; ``True`` means it too): ``1`` when stderr is a terminal, else ``2``.
- ``False`` means ``0``.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from .._validation import is_int, type_error, value_error

__all__ = ["Progress", "resolve_verbose"]

_CHOICES = "0, 1, 2, 'auto', True or False"


def is_terminal(stream):
    """Whether ``stream`` is a terminal (False for streams that cannot say, or are closed)."""
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except (ValueError, OSError):  # a closed or detached stream
        return False


def resolve_verbose(verbose, stream=None):
    """The mode, 0, 1 or 2, of a ``verbose`` argument; ``"auto"`` (and True) is 1 when
    ``stream`` (stderr by default, where the bar goes) is a terminal, else 2.

    Raises
    ------
    TypeError
        Neither an int, a bool nor a str.
    ValueError
        Another int than 0, 1, 2, another str than "auto".
    """
    if isinstance(verbose, (bool, np.bool_)):
        verbose = "auto" if verbose else 0
    if isinstance(verbose, str):
        if verbose != "auto":
            raise value_error("verbose", _CHOICES, verbose)
        return 1 if is_terminal(sys.stderr if stream is None else stream) else 2
    if not is_int(verbose):
        raise type_error("verbose", _CHOICES, verbose)
    if verbose not in (0, 1, 2):
        raise value_error("verbose", _CHOICES, verbose)
    return int(verbose)


class Progress:
    """One epoch's progress in a ``mode`` of :func:`resolve_verbose`. ``done``: the batches
    already run before this process started the epoch (a run resumed from a backup)."""

    def __init__(self, total, desc, mode, done=0):
        self.total, self.done, self.first = total, done, done
        self.desc, self.mode, self.start = desc, mode, time.perf_counter()
        self.samples, self.bar = 0, None
        self.live = mode == 1 and is_terminal(sys.stderr)
        if self.live:
            try:
                from tqdm import tqdm

                self.bar = tqdm(
                    total=total, initial=done, desc=desc, unit="batch", leave=True, file=sys.stderr
                )
            except ImportError:
                pass

    def update(self, loss, samples):
        """One more batch, of ``samples`` samples, with its loss."""
        self.done += 1
        self.samples += samples
        if self.mode != 1:
            return
        rate = self._rate()
        if self.bar is not None:
            self.bar.set_postfix(loss=f"{loss:.4f}", samples_per_s=f"{rate:,.0f}")
            self.bar.update(1)
            return
        # a terminal redraws at each twentieth of the epoch; a log gets a line at each tenth
        parts, total = (20 if self.live else 10), max(self.total, 1)
        if parts * self.done // total > parts * (self.done - 1) // total:
            filled = 20 * self.done // max(self.total, 1)
            text = (
                f"{self.desc} [{'#' * filled:<20}] {self.done}/{self.total} "
                f"loss={loss:.4f} samples/s={rate:,.0f}"
            )
            sys.stderr.write(f"\r{text}" if self.live else f"{text}\n")
            sys.stderr.flush()

    def close(self, logs):
        """The epoch's end: its figures (``logs``) on one line."""
        if self.mode == 0:
            return
        figures = " ".join(f"{k}={v:.4f}" for k, v in logs.items())
        if self.bar is not None:
            self.bar.set_postfix_str(figures)
            self.bar.close()
            return
        if self.live and self.done > self.first:
            sys.stderr.write("\n")  # below the bar, which ends on its last redraw
            sys.stderr.flush()
        seconds = time.perf_counter() - self.start
        print(
            f"{self.desc} {figures} - {self.done - self.first} batches in {seconds:.2f} s "
            f"({self._rate():,.0f} samples/s)",
            flush=True,
        )

    def _rate(self):
        return self.samples / max(time.perf_counter() - self.start, 1e-9)
