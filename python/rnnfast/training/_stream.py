"""Truncated BPTT over one long token stream: fit_stream and evaluate_stream."""

from __future__ import annotations

from ._batches import window_losses
from ._loop import StreamLoop, StreamOptions, takes_options
from ._scoring import resolve_loss

__all__ = ["evaluate_stream", "fit_stream"]


@takes_options(StreamOptions)
def fit_stream(model, tokens, options):
    """Truncated BPTT over a long stream: windows of ``bptt`` steps in order, the hidden state
    of ``stateful`` layers carried from one window to the next (reset each epoch) while the
    gradient stops at each window's start. Returns the history (``loss``, ``val_loss``).

    The stream is cut into ``batch_size`` parallel streams (:func:`stream_windows`); ``loss``,
    ``optimizer``, ``clip_norm``, ``callbacks``, ``verbose``, ``backup_dir``,
    ``backup_every`` and ``precision`` are those of :func:`fit` (a backup within an epoch keeps the state the
    stateful layers carry to the next window), and ``validation_tokens`` a stream whose
    :func:`evaluate_stream` loss is ``val_loss``."""
    return StreamLoop(model, tokens, options).run()


def evaluate_stream(model, tokens, *, loss, batch_size, bptt):
    """Mean per-window loss over a stream in eval mode, state carried across windows."""
    total, windows = window_losses(
        model, tokens, resolve_loss(loss), batch_size, bptt, lambda xb, yb: (xb, yb)
    )
    return total / windows
