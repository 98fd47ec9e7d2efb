"""Training loops: fit / evaluate / predict over any model with the layer protocol (call,
backward, named_parameters, grads, zero_grad, train/eval), callbacks, and truncated BPTT
batches for long streams.

A loss is ``"mse"``, ``"cross_entropy"`` or a callable ``loss(output, targets) -> (value,
d_output)`` (the losses module's fused form; it also gets ``mask=`` when the batch is padded).

Variable-length data: inputs may be a ragged list of sequences, or a padded array with
``lengths=`` / ``mask=``; each batch is padded to its own longest sequence (bucketed by length
with ``bucket=True``), its lengths travel through the model, and the padding never reaches a
loss or a metric. Metrics are reduced over the whole data set from counts. The layout
(batch-first or time-major) is the model's RNNs' ``batch_first``: said once, there.
"""

from __future__ import annotations

import math
import sys
import time

import numpy as np

from . import losses as _losses
from . import metrics as _metrics
from .data.batching import BucketedBatches
from .data.dataset import SequenceData
from .nn.masking import valid_from_lengths
from .optim import clip_grad_norm

__all__ = [
    "EarlyStopping",
    "ModelCheckpoint",
    "evaluate",
    "evaluate_seq2seq",
    "evaluate_stream",
    "fit",
    "fit_seq2seq",
    "fit_stream",
    "predict",
    "stream_windows",
]

_LOSSES = {"mse": _losses.mse_loss, "cross_entropy": _losses.cross_entropy}
_METRICS = {"accuracy": _metrics.accuracy, "perplexity": _metrics.perplexity}
_BUILTIN_LOSSES = (_losses.mse_loss, _losses.cross_entropy)


def _resolve(name_or_fn, table, what):
    if callable(name_or_fn):
        return name_or_fn
    if name_or_fn not in table:
        raise ValueError(
            f"{what}: expected one of {sorted(table)} or a callable, got {name_or_fn!r}"
        )
    return table[name_or_fn]


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
        elif self.enabled and (
            self.done == self.total or self.done % max(1, self.total // 20) == 0
        ):
            filled = 20 * self.done // max(self.total, 1)
            sys.stderr.write(
                f"\r{self.desc} [{'#' * filled:<20}] {self.done}/{self.total} "
                f"loss={loss:.4f} samples/s={rate:,.0f}"
            )
            sys.stderr.flush()

    def close(self, logs):
        text = " ".join(f"{k}={v:.4f}" for k, v in logs.items())
        if self.bar is not None:
            self.bar.set_postfix_str(text)
            self.bar.close()
        elif self.enabled:
            sys.stderr.write("\n")
            print(self.desc, text, flush=True)


def _forward(model, xb, lengths):
    """The model's output on a batch and the valid mask of that output (None when it has no
    padding: fixed-length data, or a last output)."""
    out = model(xb) if lengths is None else model(xb, lengths=lengths)
    out = out[0] if isinstance(out, tuple) else out
    if lengths is None:
        return out, getattr(model, "output_mask", None)
    valid = getattr(model, "output_mask", _UNKNOWN)
    if valid is _UNKNOWN:  # a model of the user's without the padding protocol
        valid = _batch_valid(out, xb, lengths, _layout(model))
    return out, valid


_UNKNOWN = object()


def _batch_valid(out, xb, lengths, batch_first):
    """The batch's valid mask, when the output keeps the input's (batch, time) axes."""
    if np.ndim(out) < 2 or np.shape(out)[:2] != np.shape(xb)[:2]:
        return None
    return valid_from_lengths(lengths, np.shape(xb)[1 if batch_first else 0], batch_first)


def _call_loss(loss_fn, out, yb, valid, reduction="mean"):
    """``(value, d_out, counted)``: the loss with the padding left out, and how many positions
    (or elements, for mse) it counted."""
    if valid is not None and valid.shape != np.shape(yb)[: valid.ndim]:
        valid = None  # per-sequence targets of a padded batch: nothing to leave out
    kwargs = {} if valid is None else {"mask": valid}
    if loss_fn in _BUILTIN_LOSSES:
        value, d_out = loss_fn(out, yb, reduction=reduction, **kwargs)
        if loss_fn is _losses.mse_loss:
            counted = (
                np.size(out)
                if valid is None
                else int(valid.sum()) * (np.size(out) // max(valid.size, 1))
            )
        else:
            counted = np.size(yb) if valid is None else int(valid.sum())
    else:
        value, d_out = loss_fn(out, yb, **kwargs)
        counted = len(yb) if valid is None else int(valid.sum())
        if reduction == "sum":
            value = value * counted
    return value, d_out, counted


class _Metrics:
    """Metrics summed over every batch of a data set: the built-in ones as counts (so the
    result is the corpus figure, not a mean of batch fractions), a callable of the user's as
    its per-batch value weighted by the positions the batch counts."""

    def __init__(self, metrics):
        self.fns = {
            m if isinstance(m, str) else m.__name__: _resolve(m, _METRICS, "metrics")
            for m in metrics
        }
        self.sums = {name: [0.0, 0] for name in self.fns}

    def add(self, out, yb, valid):
        if valid is not None and valid.shape != np.shape(yb)[: valid.ndim]:
            valid = None
        for name, fn in self.fns.items():
            if fn is _metrics.accuracy:
                hits, counted = _metrics.accuracy_counts(out, yb, mask=valid)
            elif fn is _metrics.perplexity:
                hits, _, counted = _call_loss(_losses.cross_entropy, out, yb, valid, "sum")
            else:
                counted = len(yb) if valid is None else int(valid.sum())
                hits = fn(out, yb) if valid is None else fn(out, yb, mask=valid)
                hits = hits * counted
            self.sums[name][0] += hits
            self.sums[name][1] += counted

    def results(self):
        out = {}
        for name, (total, counted) in self.sums.items():
            mean = total / counted if counted else math.nan
            out[name] = math.exp(mean) if self.fns[name] is _metrics.perplexity else mean
        return out


def _train_step(model, xb, yb, loss_fn, optimizer, clip_norm, lengths=None, metrics=None):
    """Forward, loss, backward and an optimizer step on one batch: (loss, counted positions,
    whether it stepped). A step whose clipped gradient norm is not finite is skipped."""
    model.zero_grad()
    out, valid = _forward(model, xb, lengths)
    value, d_out, counted = _call_loss(loss_fn, out, yb, valid)
    model.backward(d_out)
    if clip_norm is not None and not math.isfinite(clip_grad_norm(model, clip_norm)):
        return value, counted, False
    optimizer.step()
    if metrics is not None:
        metrics.add(out, yb, valid)
    return value, counted, True


def _stateful_layers(model):
    layers = getattr(model, "layers", None)
    if layers is None and hasattr(model, "children"):
        layers = model.children()
    return [layer for layer in (layers or [model]) if getattr(layer, "stateful", False)]


def _layout(model):
    """The model's ``batch_first`` (its RNNs'), or None when it does not say."""
    value = getattr(model, "batch_first", None)
    return value if isinstance(value, bool) else None


def _data(model, x, y, lengths, mask, batch_axis, what="x"):
    """The data set in the model's layout; a batch_axis that contradicts the model's RNNs is
    refused (a time-major RNN fed batch-first data would be silently wrong)."""
    batch_first = _layout(model)
    if (
        batch_axis is not None
        and batch_first is not None
        and batch_axis in (0, 1)
        and batch_axis != (0 if batch_first else 1)
        and not isinstance(x, (list, tuple))
    ):
        raise ValueError(
            f"batch_axis: the model's RNNs are {'batch-first' if batch_first else 'time-major'}, "
            f"so {what}'s batch axis is {0 if batch_first else 1}, got batch_axis={batch_axis}; "
            "leave batch_axis out (fit follows the model's batch_first)"
        )
    return SequenceData(
        x,
        y,
        lengths=lengths,
        mask=mask,
        batch_first=True if batch_first is None else batch_first,
        batch_axis=batch_axis,
    )


def _batch_order(data, batch_size, shuffle, rng, bucket, max_tokens, drop_last):
    """The index arrays of one epoch: in order or shuffled, or bucketed by length."""
    if bucket or max_tokens is not None:
        if data.lengths is None:
            raise ValueError(
                "bucket: batches by length need variable-length data (ragged "
                "sequences, or lengths= / mask=)"
            )
        return list(
            BucketedBatches(
                data.lengths,
                batch_size,
                max_tokens=max_tokens,
                shuffle=shuffle,
                seed=int(rng.integers(2**31)),
                drop_last=drop_last,
            )
        )
    order = rng.permutation(len(data)) if shuffle else np.arange(len(data))
    stop = len(data) - (len(data) % batch_size if drop_last else 0)
    return [order[i : i + batch_size] for i in range(0, stop, batch_size)]


def fit(
    model,
    x,
    y,
    *,
    loss,
    optimizer,
    epochs=1,
    batch_size=32,
    shuffle=True,
    validation_data=None,
    metrics=(),
    callbacks=(),
    clip_norm=None,
    batch_axis=None,
    seed=None,
    verbose=True,
    lengths=None,
    mask=None,
    bucket=False,
    max_tokens=None,
    drop_last=False,
    distributed=False,
):
    """Train ``model`` and return the history: ``{"loss": [...], "val_loss": [...], ...}``.

    Parameters
    ----------
    model : a layer, Sequential, Module or anything with the layer protocol
    x : ndarray, or a list of arrays (T_i, ...) of different lengths
        Inputs. A list is ragged data: each batch is padded to its longest sequence and its
        lengths travel through the model (as ``model(xb, lengths=...)``).
    y : ndarray, or a list
        Targets: one per sequence (an array (N, ...), or a list of them), or one per step (a
        list of arrays (T_i, ...), or a padded array with x's time axis).
    lengths : (N,) ints, optional; mask : (N, T) bools, optional
        The lengths of a padded ``x`` (padding at the end), for data already padded.
    loss : "mse", "cross_entropy" or callable
        Padded positions never count: the loss gets the output's valid mask as ``mask=`` (a
        callable loss of the user's too, when the batch is padded).
    optimizer : an ``rnnfast.optim`` optimizer over the model's parameters
    validation_data : (x_val, y_val), or (x_val, y_val, lengths_val), optional
    metrics : names ("accuracy", "perplexity") or callables ``metric(output, targets) -> float``
        Reduced over the whole data set: the built-in ones from counts (corpus accuracy), a
        callable's per-batch values weighted by the positions each batch counts. The training
        figures are those of the epoch's batches, as they were trained (Keras's).
    callbacks : objects with ``on_epoch_end(epoch, logs, model) -> bool`` (True stops)
    clip_norm : float, optional
        Clip the global gradient norm; a step whose norm is not finite is skipped.
    batch_axis : int, optional
        Which axis of a padded ``x`` holds the samples. By default the model's layout: 0 when
        its RNNs are batch_first (or it has none), 1 when they are time-major.
    shuffle : bool
        False for stateful models (truncated BPTT), whose batches must stay in order; the
        state of stateful layers is reset at the start of every epoch.
    bucket : bool
        Batches of similar lengths (``rnnfast.data.BucketedBatches``), so little padding is
        run over; ``max_tokens`` makes batches by padded token count instead of by count.
    drop_last : bool
        Leave out the last, smaller batch.
    distributed : bool
        Train data-parallel on the MPI ranks of ``rnnfast.distributed.init()``, which must have
        run: ``rnnfast.distributed.fit`` with these arguments (``batch_size`` per rank).
    """
    if distributed:  # every argument but this one, to rnnfast.distributed.fit
        arguments = {k: v for k, v in locals().items() if k != "distributed"}
        from . import distributed as _distributed

        return _distributed.fit(**arguments)
    loss_fn = _resolve(loss, _LOSSES, "loss")
    _Metrics(metrics)  # unknown names fail before any training
    rng = np.random.default_rng(seed)
    data = _data(model, x, y, lengths, mask, batch_axis)
    if data.y is None:
        raise ValueError("y: expected targets, got None")
    return _run_epochs(
        model,
        data,
        epochs=epochs,
        metrics=metrics,
        verbose=verbose,
        epoch_batches=lambda epoch: _batch_order(
            data, batch_size, shuffle, rng, bucket, max_tokens, drop_last
        ),
        step=lambda xb, yb, lb, train_metrics: _train_step(
            model, xb, yb, loss_fn, optimizer, clip_norm, lb, train_metrics
        ),
        metric_results=_Metrics.results,
        validation_data=validation_data,
        evaluate_fn=lambda xv, yv, lv: evaluate(
            model,
            xv,
            yv,
            loss=loss,
            metrics=metrics,
            batch_size=batch_size,
            batch_axis=batch_axis,
            lengths=lv,
        ),
        end_epoch=lambda epoch, logs: any(cb.on_epoch_end(epoch, logs, model) for cb in callbacks),
    )


def _run_epochs(
    model,
    data,
    *,
    epochs,
    metrics,
    verbose,
    epoch_batches,
    step,
    metric_results,
    validation_data,
    evaluate_fn,
    end_epoch,
    samples_per_index=1,
):
    """The epoch loop that fit and rnnfast.distributed.fit share, and the history it returns.

    Per epoch: stateful layers reset, training mode, ``epoch_batches(epoch)`` (index arrays
    into ``data``), ``step(xb, yb, lengths, train_metrics) -> (loss, counted, stepped)`` per
    batch, the loss averaged over the counted positions, ``metric_results(train_metrics)``,
    ``evaluate_fn(x_val, y_val, lengths_val)`` on ``validation_data`` (prefixed ``val_``), and
    ``end_epoch(epoch, logs)`` (True stops). ``samples_per_index``: samples the progress bar
    counts per index (the ranks' share of a global batch)."""
    history = {}
    for epoch in range(epochs):
        for layer in _stateful_layers(model):
            layer.reset_state()
        model.train()
        batches = epoch_batches(epoch)
        progress = _Progress(len(batches), f"epoch {epoch + 1}/{epochs}", verbose)
        total, counted_total, seen = 0.0, 0, 0
        train_metrics = _Metrics(metrics)
        for index in batches:
            xb, yb, lb = data.batch(index)
            value, counted, stepped = step(xb, yb, lb, train_metrics)
            if not stepped:
                continue
            total += value * counted
            counted_total += counted
            seen += len(index) * samples_per_index
            progress.update(value, seen)
        logs = {"loss": total / max(counted_total, 1)}
        logs.update(metric_results(train_metrics))
        if validation_data is not None:
            x_val, y_val, *rest = validation_data
            val = evaluate_fn(x_val, y_val, rest[0] if rest else None)
            logs.update({f"val_{k}": v for k, v in val.items()})
        progress.close(logs)
        for key, value in logs.items():
            history.setdefault(key, []).append(value)
        if end_epoch(epoch, logs):
            break
    return history


def _eval_batches(model, data, batch_size, bucket):
    """(index, output, valid) of every batch, in eval mode; bucketed batches (less padding)
    when the data has lengths and ``bucket``."""
    model.eval()
    for layer in _stateful_layers(model):
        layer.reset_state()
    if bucket and data.lengths is not None:
        order = np.argsort(-data.lengths, kind="stable")  # similar lengths together
    else:
        order = np.arange(len(data))
    for start in range(0, len(data), batch_size):
        index = order[start : start + batch_size]
        xb, yb, lb = data.batch(index)
        out, valid = _forward(model, xb, lb)
        yield index, out, yb, valid


def predict(model, x, *, batch_size=256, batch_axis=None, lengths=None, mask=None, bucket=True):
    """Outputs of ``model`` in eval mode, batch by batch, in the order of ``x``.

    For ragged ``x`` (a list of sequences): a list of per-sequence outputs, each cut to its
    sequence's length, when the model outputs one per step; an array (N, ...) when it
    outputs one per sequence. For array ``x``: the outputs joined along the batch axis (per-
    step outputs padded back to x's length with zeros).
    """
    data = _data(model, x, None, lengths, mask, batch_axis)
    pieces = [
        (index, out, valid)
        for index, out, _, valid in _eval_batches(model, data, batch_size, bucket)
    ]
    if not pieces:
        return [] if data.ragged else np.empty((0,))
    per_step = any(v is not None for _, _, v in pieces)
    if data.ragged and per_step:
        result = [None] * len(data)
        for index, out, _ in pieces:
            rows = out if data.batch_first else out.swapaxes(0, 1)
            for b, i in enumerate(index):
                result[i] = np.array(rows[b, : data.lengths[i]])
        return result
    axis = 0 if (data.ragged or not per_step) else data.axis
    full = data.full_steps()
    parts, order = [], []
    for index, out, _ in pieces:
        if per_step and full is not None and out.shape[1 - axis] < full:
            pad = [(0, 0)] * out.ndim
            pad[1 - axis] = (0, full - out.shape[1 - axis])
            out = np.pad(out, pad)
        parts.append(out)
        order.append(index)
    joined = np.concatenate(parts, axis=axis)
    inverse = np.empty(len(data), dtype=np.int64)
    inverse[np.concatenate(order)] = np.arange(len(data))
    return np.take(joined, inverse, axis=axis)


def evaluate(
    model,
    x,
    y,
    *,
    loss,
    metrics=(),
    batch_size=256,
    batch_axis=None,
    lengths=None,
    mask=None,
    bucket=True,
):
    """Loss (and metrics) of ``model`` in eval mode over the whole data set, padding left out:
    ``{"loss": ..., "accuracy": ...}``. The loss is the mean over every counted position of
    the data set, the metrics corpus figures (see :func:`fit`)."""
    loss_fn = _resolve(loss, _LOSSES, "loss")
    data = _data(model, x, y, lengths, mask, batch_axis)
    totals = _Metrics(metrics)
    total, counted_total = 0.0, 0
    for _, out, yb, valid in _eval_batches(model, data, batch_size, bucket):
        value, _, counted = _call_loss(loss_fn, out, yb, valid, "sum")
        total += value
        counted_total += counted
        totals.add(out, yb, valid)
    return {"loss": total / max(counted_total, 1), **totals.results()}


def stream_windows(tokens, batch_size, bptt):
    """Truncated-BPTT batches of a long token stream: the stream is cut into ``batch_size``
    parallel streams, read ``bptt`` steps at a time. Returns ``(x, y)`` of shape
    (windows, batch_size, bptt), y the next tokens."""
    tokens = np.asarray(tokens)
    per_stream = (len(tokens) - 1) // batch_size // bptt * bptt
    if per_stream == 0:
        raise ValueError(
            f"tokens: a stream of {len(tokens)} is too short for batch_size "
            f"{batch_size} x bptt {bptt}"
        )
    used = per_stream * batch_size
    x = tokens[:used].reshape(batch_size, -1, bptt).transpose(1, 0, 2)
    y = tokens[1 : used + 1].reshape(batch_size, -1, bptt).transpose(1, 0, 2)
    return x, y


def fit_stream(
    model,
    tokens,
    *,
    loss,
    optimizer,
    batch_size,
    bptt,
    epochs=1,
    clip_norm=None,
    validation_tokens=None,
    callbacks=(),
    verbose=True,
):
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
            value, _, _ = _train_step(model, xb, yb, loss_fn, optimizer, clip_norm)
            total += value
            progress.update(value, (i + 1) * xb.size)
        logs = {"loss": total / len(xs)}
        if validation_tokens is not None:
            logs["val_loss"] = evaluate_stream(
                model, validation_tokens, loss=loss, batch_size=batch_size, bptt=bptt
            )
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

    def __init__(
        self, monitor="val_loss", patience=3, min_delta=0.0, mode="min", restore_best_weights=False
    ):
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
        from .io.persistence import save

        value = self.sign * logs.get(self.monitor, math.nan)
        if not self.save_best_only or value < self.best:
            self.best = min(self.best, value)
            save(model, str(self.path).format(epoch=epoch + 1))
        return False


from .training_seq2seq import evaluate_seq2seq, fit_seq2seq  # noqa: E402  (they use _Progress)
