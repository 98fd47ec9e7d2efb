"""fit, evaluate and predict over a data set (arrays, padded arrays with lengths or a mask, or
ragged lists of sequences)."""

from __future__ import annotations

import numpy as np

from ._batches import eval_batches, eval_order, model_data
from ._loop import FitLoop, FitOptions, data_parallel, takes_options
from ._scoring import resolve_loss, score

__all__ = ["evaluate", "fit", "predict"]


@takes_options(FitOptions)
def fit(model, x, y, options, *, distributed=False):
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
    verbose : "auto", 0, 1, 2, True or False
        Keras's: ``0`` silent; ``1`` a progress bar (live on a terminal; in a log a line at
        each tenth of the epoch) and one line per epoch; ``2`` one line per epoch (its
        figures, batches, seconds, samples per second). ``"auto"`` (and True): ``1`` when
        stderr is a terminal, ``2`` when it is not (a pipe, a file, a batch job's log).
    backup_dir : str or os.PathLike, optional
        Training that survives a crash (Keras's ``BackupAndRestore``): the loop writes
        ``backup_dir/backup.npz`` at each epoch's end and, when it is there at the start,
        resumes from it, so a killed run rerun with the same arguments ends with the same
        parameters and history as a run never interrupted (bitwise, for a thread count). The
        backup holds the parameters, the optimizer's state, the epoch and batch, the history,
        the random streams (shuffling, every generator the model holds: dropout masks), the
        state stateful layers carry, the epoch's running sums, and the state of callbacks that
        have ``state_dict()`` / ``load_state_dict()`` (EarlyStopping, ModelCheckpoint). It is
        written atomically (a write killed part-way leaves the previous backup whole) and
        removed when the run completes. The model, the optimizer and the data must be those
        of the run that wrote it.
    backup_every : int >= 1, optional
        Also back up every ``backup_every`` batches of an epoch (with ``backup_dir``).
    precision : {None, "float32", "bf16"}
        The products of every kernel call of the training and validation steps: "bf16"
        rounds both operands of every GEMM (forward and backward, Dense heads included) to
        bf16 and sums in float32; the weights, gradients, optimizer state, gates and states
        stay float32 (mixed-precision training, as ``torch.autocast`` on CPU). It wins over
        the layers' own ``precision`` (and a Sequential's) for this fit; None (the default)
        leaves each layer its own. "bf16" needs a float32 model whose layers run all their
        products on rnnfast's kernels and a CPU with bf16 products
        (``rnnfast.precision.bf16_available()``).
    distributed : bool
        Train data-parallel on the MPI ranks of ``rnnfast.distributed.init()``, which must have
        run: ``rnnfast.distributed.fit`` with these arguments (``batch_size`` per rank).

    Raises
    ------
    ValueError
        A ``verbose`` other than those above; ``backup_every`` without ``backup_dir``; a
        backup that another loop, process count, model or data wrote; ``precision`` not one
        of those above, or "bf16" for a model that holds a quantized copy, a float64 layer
        or a layer that multiplies outside rnnfast's kernels (named).
    TypeError
        ``backup_dir`` not a path; with ``backup_dir``, an optimizer without ``state_dict()``;
        ``precision`` not a str.
    RuntimeError
        ``precision="bf16"`` on a CPU without bf16 products (the message names its ISA).
    """
    if distributed:
        return data_parallel()(model, x, y, options).run()
    return FitLoop(model, x, y, options).run()


def predict(model, x, *, batch_size=256, batch_axis=None, lengths=None, mask=None, bucket=True):
    """Outputs of ``model`` in eval mode, batch by batch, in the order of ``x``.

    For ragged ``x`` (a list of sequences): a list of per-sequence outputs, each cut to its
    sequence's length, when the model outputs one per step; an array (N, ...) when it
    outputs one per sequence. For array ``x``: the outputs joined along the batch axis (per-
    step outputs padded back to x's length with zeros).
    """
    data = model_data(model, x, None, lengths, mask, batch_axis)
    pieces = [
        (index, out, valid)
        for index, out, _, valid in eval_batches(model, data, eval_order(data, bucket), batch_size)
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
    loss_fn = resolve_loss(loss)
    data = model_data(model, x, y, lengths, mask, batch_axis)
    return score(
        model,
        data,
        eval_order(data, bucket),
        loss_fn=loss_fn,
        metrics=metrics,
        batch_size=batch_size,
    )
