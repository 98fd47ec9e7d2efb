"""Training loops: fit / evaluate / predict over any model with the layer protocol (call,
backward, named_parameters, grads, zero_grad, train/eval), callbacks, and truncated BPTT
batches for long streams.

A loss is ``"mse"``, ``"cross_entropy"`` or a callable ``loss(output, targets) -> (value,
d_output)`` (the losses module's fused form). Batches are cut along ``batch_axis`` of the
inputs and targets (0 for batch-first data).
"""

from __future__ import annotations

import math
import sys
import time

import numpy as np

from . import losses as _losses
from . import metrics as _metrics
from .optim import clip_grad_norm

__all__ = [
    "EarlyStopping",
    "ModelCheckpoint",
    "evaluate",
    "evaluate_stream",
    "fit",
    "fit_stream",
    "predict",
    "stream_windows",
]

_LOSSES = {"mse": _losses.mse_loss, "cross_entropy": _losses.cross_entropy}
_METRICS = {"accuracy": _metrics.accuracy}


def _resolve(name_or_fn, table, what):
    if callable(name_or_fn):
        return name_or_fn
    if name_or_fn not in table:
        raise ValueError(f"{what}: expected one of {sorted(table)} or a callable, got {name_or_fn!r}")
    return table[name_or_fn]


def _batches(n, batch_size, shuffle, rng):
    order = rng.permutation(n) if shuffle else np.arange(n)
    return [order[i:i + batch_size] for i in range(0, n, batch_size)]


def _take(a, index, axis):
    return np.take(a, index, axis=axis) if a is not None else None


class _Progress:
    """A progress bar per epoch showing the loss and the throughput: tqdm when it is installed
    (the ``examples`` extra), else a plain text bar on stderr."""

    def __init__(self, total, desc, enabled):
        self.bar = None
        self.total, self.done = total, 0
        self.desc, self.enabled, self.start = desc, enabled, time.perf_counter()
        if enabled:
            try:
                from tqdm import tqdm

                self.bar = tqdm(total=total, desc=desc, unit="batch", leave=True)
            except ImportError:
                pass

    def update(self, loss, samples):
        self.done += 1
        rate = samples / max(time.perf_counter() - self.start, 1e-9)
        if self.bar is not None:
            self.bar.set_postfix(loss=f"{loss:.4f}", samples_per_s=f"{rate:,.0f}")
            self.bar.update(1)
        elif self.enabled and (self.done == self.total or self.done % max(1, self.total // 20) == 0):
            filled = 20 * self.done // max(self.total, 1)
            sys.stderr.write(f"\r{self.desc} [{'#' * filled:<20}] {self.done}/{self.total} "
                             f"loss={loss:.4f} samples/s={rate:,.0f}")
            sys.stderr.flush()

    def close(self, logs):
        text = " ".join(f"{k}={v:.4f}" for k, v in logs.items())
        if self.bar is not None:
            self.bar.set_postfix_str(text)
            self.bar.close()
        elif self.enabled:
            sys.stderr.write("\n")
            print(self.desc, text, flush=True)


def _train_step(model, xb, yb, loss_fn, optimizer, clip_norm):
    """Forward, loss, backward and an optimizer step on one batch: (loss, whether it stepped).
    A step whose clipped gradient norm is not finite is skipped."""
    model.zero_grad()
    out = model(xb)
    out = out[0] if isinstance(out, tuple) else out
    value, d_out = loss_fn(out, yb)
    model.backward(d_out)
    if clip_norm is not None and not math.isfinite(clip_grad_norm(model, clip_norm)):
        return value, False
    optimizer.step()
    return value, True


def _stateful_layers(model):
    layers = getattr(model, "layers", [model])
    return [layer for layer in layers if getattr(layer, "stateful", False)]


def fit(model, x, y, *, loss, optimizer, epochs=1, batch_size=32, shuffle=True,
        validation_data=None, metrics=(), callbacks=(), clip_norm=None, batch_axis=0, seed=None,
        verbose=True):
    """Train ``model`` and return the history: ``{"loss": [...], "val_loss": [...], ...}``.

    Parameters
    ----------
    model : a layer, Sequential or anything with the layer protocol
    x, y : ndarray
        Inputs and targets, batched along ``batch_axis``.
    loss : "mse", "cross_entropy" or callable
    optimizer : an ``rnnfast.optim`` optimizer over the model's parameters
    validation_data : (x_val, y_val), optional
    metrics : names ("accuracy") or callables ``metric(output, targets) -> float``
    callbacks : objects with ``on_epoch_end(epoch, logs, model) -> bool`` (True stops)
    clip_norm : float, optional
        Clip the global gradient norm; a step whose norm is not finite is skipped.
    shuffle : bool
        False for stateful models (truncated BPTT), whose batches must stay in order; the
        state of stateful layers is reset at the start of every epoch.
    """
    loss_fn = _resolve(loss, _LOSSES, "loss")
    metric_fns = {m if isinstance(m, str) else m.__name__: _resolve(m, _METRICS, "metrics")
                  for m in metrics}
    rng = np.random.default_rng(seed)
    n = x.shape[batch_axis]
    if y.shape[batch_axis] != n:
        raise ValueError(f"y: expected {n} samples along axis {batch_axis}, got shape {y.shape}")
    history = {}
    for epoch in range(epochs):
        for layer in _stateful_layers(model):
            layer.reset_state()
        model.train()
        batches = _batches(n, batch_size, shuffle, rng)
        progress = _Progress(len(batches), f"epoch {epoch + 1}/{epochs}", verbose)
        total, seen = 0.0, 0
        for index in batches:
            xb, yb = _take(x, index, batch_axis), _take(y, index, batch_axis)
            value, stepped = _train_step(model, xb, yb, loss_fn, optimizer, clip_norm)
            if not stepped:
                continue
            total += value * len(index)
            seen += len(index)
            progress.update(value, seen)
        logs = {"loss": total / max(seen, 1)}
        if validation_data is not None:
            val = evaluate(model, *validation_data, loss=loss, metrics=metrics,
                           batch_size=batch_size, batch_axis=batch_axis)
            logs.update({f"val_{k}": v for k, v in val.items()})
        if metric_fns:
            train_metrics = evaluate(model, x, y, loss=loss, metrics=metrics,
                                     batch_size=batch_size, batch_axis=batch_axis)
            logs.update({k: v for k, v in train_metrics.items() if k != "loss"})
        progress.close(logs)
        for key, value in logs.items():
            history.setdefault(key, []).append(value)
        if any(cb.on_epoch_end(epoch, logs, model) for cb in callbacks):
            break
    return history


def predict(model, x, *, batch_size=256, batch_axis=0):
    """Outputs of ``model`` in eval mode, batch by batch, joined along ``batch_axis``."""
    model.eval()
    for layer in _stateful_layers(model):
        layer.reset_state()
    n = x.shape[batch_axis]
    outs = []
    for start in range(0, n, batch_size):
        out = model(_take(x, np.arange(start, min(n, start + batch_size)), batch_axis))
        outs.append(out[0] if isinstance(out, tuple) else out)
    return np.concatenate(outs, axis=batch_axis) if outs else np.empty((0,))


def evaluate(model, x, y, *, loss, metrics=(), batch_size=256, batch_axis=0):
    """Mean loss (and metrics) of ``model`` in eval mode: ``{"loss": ..., "accuracy": ...}``."""
    loss_fn = _resolve(loss, _LOSSES, "loss")
    out = predict(model, x, batch_size=batch_size, batch_axis=batch_axis)
    logs = {"loss": loss_fn(out, y)[0]}
    for m in metrics:
        fn = _resolve(m, _METRICS, "metrics")
        logs[m if isinstance(m, str) else fn.__name__] = fn(out, y)
    return logs


def stream_windows(tokens, batch_size, bptt):
    """Truncated-BPTT batches of a long token stream: the stream is cut into ``batch_size``
    parallel streams, read ``bptt`` steps at a time. Returns ``(x, y)`` of shape
    (windows, batch_size, bptt), y the next tokens."""
    tokens = np.asarray(tokens)
    per_stream = (len(tokens) - 1) // batch_size // bptt * bptt
    if per_stream == 0:
        raise ValueError(f"tokens: a stream of {len(tokens)} is too short for batch_size "
                         f"{batch_size} x bptt {bptt}")
    used = per_stream * batch_size
    x = tokens[:used].reshape(batch_size, -1, bptt).transpose(1, 0, 2)
    y = tokens[1:used + 1].reshape(batch_size, -1, bptt).transpose(1, 0, 2)
    return x, y


def fit_stream(model, tokens, *, loss, optimizer, batch_size, bptt, epochs=1, clip_norm=None,
               validation_tokens=None, callbacks=(), verbose=True):
    """Truncated BPTT over a long stream: windows of ``bptt`` steps in order, the hidden state
    of ``stateful`` layers carried from one window to the next (reset each epoch) while the
    gradient stops at each window's start. Returns the history (``loss``, ``val_loss``)."""
    loss_fn = _resolve(loss, _LOSSES, "loss")
    xs, ys = stream_windows(tokens, batch_size, bptt)
    history = {}
    for epoch in range(epochs):
        for layer in _stateful_layers(model):
            layer.reset_state()
        model.train()
        progress = _Progress(len(xs), f"epoch {epoch + 1}/{epochs}", verbose)
        total = 0.0
        for i, (xb, yb) in enumerate(zip(xs, ys)):
            value, _ = _train_step(model, xb, yb, loss_fn, optimizer, clip_norm)
            total += value
            progress.update(value, (i + 1) * xb.size)
        logs = {"loss": total / len(xs)}
        if validation_tokens is not None:
            logs["val_loss"] = evaluate_stream(model, validation_tokens, loss=loss,
                                               batch_size=batch_size, bptt=bptt)
        progress.close(logs)
        for key, value in logs.items():
            history.setdefault(key, []).append(value)
        if any(cb.on_epoch_end(epoch, logs, model) for cb in callbacks):
            break
    return history


def evaluate_stream(model, tokens, *, loss, batch_size, bptt):
    """Mean per-window loss over a stream in eval mode, state carried across windows."""
    loss_fn = _resolve(loss, _LOSSES, "loss")
    xs, ys = stream_windows(tokens, batch_size, bptt)
    model.eval()
    for layer in _stateful_layers(model):
        layer.reset_state()
    total = 0.0
    for xb, yb in zip(xs, ys):
        out = model(xb)
        total += loss_fn(out[0] if isinstance(out, tuple) else out, yb)[0]
    return total / len(xs)


class EarlyStopping:
    """Stop when ``monitor`` has not improved by ``min_delta`` for ``patience`` epochs;
    optionally restore the best weights."""

    def __init__(self, monitor="val_loss", patience=3, min_delta=0.0, mode="min",
                 restore_best_weights=False):
        self.monitor, self.patience, self.min_delta = monitor, patience, min_delta
        self.sign = 1.0 if mode == "min" else -1.0
        self.restore = restore_best_weights
        self.best, self.wait, self.best_state = math.inf, 0, None

    def on_epoch_end(self, epoch, logs, model):
        value = self.sign * logs[self.monitor]
        if value < self.best - self.min_delta:
            self.best, self.wait = value, 0
            if self.restore:
                self.best_state = model.state_dict()
            return False
        self.wait += 1
        if self.wait >= self.patience:
            if self.restore and self.best_state is not None:
                model.load_state_dict(self.best_state)
            return True
        return False


class ModelCheckpoint:
    """Save the model (rnnfast .npz) after each epoch, or only when ``monitor`` improves."""

    def __init__(self, path, monitor="val_loss", save_best_only=True, mode="min"):
        self.path, self.monitor, self.save_best_only = path, monitor, save_best_only
        self.sign = 1.0 if mode == "min" else -1.0
        self.best = math.inf

    def on_epoch_end(self, epoch, logs, model):
        from .persistence import save

        value = self.sign * logs.get(self.monitor, math.nan)
        if not self.save_best_only or value < self.best:
            self.best = min(self.best, value)
            save(model, str(self.path).format(epoch=epoch + 1))
        return False
