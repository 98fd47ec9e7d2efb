"""Data-parallel fit and fit_stream: training's loops (``training._loop``) with the step, the
figures and the callbacks of every rank together."""

from __future__ import annotations

import dataclasses

import numpy as np

from ..training import ModelCheckpoint
from ..training._loop import (
    FitLoop,
    FitOptions,
    StreamLoop,
    StreamOptions,
    takes_options,
    use_data_parallel,
)
from ._broadcast import broadcast_optimizer_state, broadcast_parameters
from ._communication import allreduce_sum, get_comm, is_initialized, rank, size
from ._optimizer import DistributedOptimizer
from ._sampler import DistributedSampler
from ._seeding import seed_dropout, shared_seed

__all__ = ["DataParallelFit", "DataParallelStream", "fit", "fit_stream"]


class _DataParallel:
    """What data parallelism changes in a training loop (the hooks of ``training._loop``): the
    loss and its count are those of the global batch, the gradients are averaged before they
    are clipped, a step not taken is skipped by every rank, the figures are summed over the
    ranks, ModelCheckpoint runs on rank 0 only, a stop asked for on any rank stops all, and
    rank 0 writes the one backup (``backup_dir``), which holds every rank's random streams."""

    reduce = staticmethod(allreduce_sum)

    def _join(self, model, optimizer, broadcast, what):
        """The DistributedOptimizer over ``optimizer`` (built here unless it is one), and rank
        0's parameters and optimizer state on every rank (``broadcast``)."""
        if not is_initialized():
            raise RuntimeError(
                f"rnnfast.distributed.{what}: call rnnfast.distributed.init() first (in a "
                "script run under mpiexec)"
            )
        self.owned = not isinstance(optimizer, DistributedOptimizer)
        self.dopt = DistributedOptimizer(optimizer) if self.owned else optimizer
        if broadcast:
            broadcast_parameters(model)
            broadcast_optimizer_state(self.dopt)
        self.rank, self.size = rank(), size()
        return self.dopt

    def share_loss(self, value, counted, d_out):
        """Each rank's loss gradient weighted by its share of the counted positions, so the
        averaged gradient is that of the mean loss over the whole global batch."""
        total, count = allreduce_sum([float(value) * counted, counted])
        scale = self.size * counted / count if count else 0.0
        if scale != 1.0:
            d_out = d_out * scale
        return (total / count if count else 0.0), count, d_out

    def average_gradients(self):
        self.dopt.synchronize()

    def skip_step(self):
        self.dopt.skip_step()  # the same averaged gradients everywhere: every rank skips

    def end_epoch(self, epoch, logs):
        """Callbacks on every rank (the logs are the same everywhere), ModelCheckpoint on rank
        0 only; True when any asks to stop (decided together)."""
        stop = False
        for cb in self.callbacks:
            if isinstance(cb, ModelCheckpoint) and self.rank != 0:
                continue
            stop = bool(cb.on_epoch_end(epoch, logs, self.model)) or stop
        return bool(allreduce_sum([stop])[0])

    def gather(self, mine):
        """Every rank's part of a backup, on rank 0 (which writes the one file)."""
        return get_comm().gather(mine, root=0)

    def share(self, value):
        """Rank 0's ``value`` (the backup it read) on every rank."""
        return get_comm().bcast(value, root=0)

    def close(self):
        if self.owned:
            self.dopt.remove_hooks()


class DataParallelFit(_DataParallel, FitLoop):
    """:func:`fit`'s loop: each rank's part of each global batch (:class:`DistributedSampler`),
    validation split over the ranks."""

    def __init__(self, model, x, y, options, *, broadcast=True, reseed_dropout=True):
        optimizer = self._join(model, options.optimizer, broadcast, "fit")
        try:
            super().__init__(model, x, y, dataclasses.replace(options, optimizer=optimizer))
            self.verbose = self.verbose if self.rank == 0 else 0  # rank 0 alone prints
            seed = shared_seed(options.seed)
            if reseed_dropout:
                seed_dropout(model, seed)
            bucketed = options.bucket or options.max_tokens is not None
            self.sampler = DistributedSampler(
                len(self.data),
                options.batch_size,
                shuffle=options.shuffle,
                seed=seed,
                drop_last=options.drop_last,
                lengths=self.data.lengths if bucketed else None,
                max_tokens=options.max_tokens,
            )
        except BaseException:
            self.close()
            raise

    def epoch_batches(self, epoch):
        self.sampler.set_epoch(epoch)
        return list(self.sampler)

    def eval_order(self, data):
        """A contiguous share of the data for each rank, longest first when it has lengths."""
        mine = np.array_split(np.arange(len(data)), self.size)[self.rank]
        if data.lengths is not None and len(mine):
            mine = mine[np.argsort(-data.lengths[mine], kind="stable")]
        return mine


class DataParallelStream(_DataParallel, StreamLoop):
    """:func:`fit_stream`'s loop: rank r trains on streams ``r * batch_size .. (r + 1) *
    batch_size - 1`` of each window."""

    def __init__(self, model, tokens, options, *, broadcast=True, seed=0, reseed_dropout=True):
        optimizer = self._join(model, options.optimizer, broadcast, "fit_stream")
        try:
            if reseed_dropout:
                seed_dropout(model, shared_seed(seed))
            super().__init__(model, tokens, dataclasses.replace(options, optimizer=optimizer))
            self.verbose = self.verbose if self.rank == 0 else 0  # rank 0 alone prints
        except BaseException:
            self.close()
            raise

    def part(self, xb, yb):
        mine = slice(self.rank * self.options.batch_size, (self.rank + 1) * self.options.batch_size)
        return np.ascontiguousarray(xb[mine]), yb[mine]


use_data_parallel(DataParallelFit)  # what training.fit(..., distributed=True) runs


@takes_options(FitOptions, seed=0)
def fit(model, x, y, options, *, broadcast=True, reseed_dropout=True):
    """``training.fit`` on every rank of :func:`init`: each rank trains on its part of each
    global batch of ``size() * batch_size`` (:class:`DistributedSampler`), the gradients are
    averaged (:class:`DistributedOptimizer`, built here over ``optimizer`` unless it is one),
    and the loss, metrics and validation figures are those of the whole global batches and
    data sets. Every rank gets the same history.

    Call it on every rank with the whole data set (``x``, ``y``: each rank takes its items).
    Differences from ``training.fit``:

    - ``batch_size`` is per rank; ``seed`` (shuffling) must be the same on every rank (None:
      rank 0 draws one);
    - ``reseed_dropout``: the model's dropout generators are reseeded from ``(seed, rank)``
      first (:func:`seed_dropout`): different masks on every rank, the same on every run;
      False leaves them as they are (then seed them per rank yourself: with the layers' own
      seeds every rank would draw the same masks);
    - ``broadcast``: rank 0's parameters and optimizer state are given to all first;
    - a step is that of the mean loss over every counted position of the global batch (each
      rank's loss gradient weighted by its share), so N ranks match one process with
      ``batch_size * N`` to rounding; ``clip_norm`` clips the global norm of the averaged
      gradients, and a non-finite one skips the step on every rank;
    - the progress is printed by rank 0 only (``verbose``), ModelCheckpoint callbacks run
      on rank 0 only, other callbacks on every rank with the same logs, and a stop asked for
      on any rank stops all;
    - ``backup_dir``: rank 0 writes one backup, which holds every rank's random streams
      (dropout masks) and running sums, and at a restart reads it and gives each rank its
      part; the restart needs the same number of ranks;
    - validation is split over the ranks and its sums reduced;
    - ``precision="bf16"`` rounds the operands of each rank's kernel products as in
      ``training.fit``; the gradients it averages are float32, and so is the allreduce.

    Raises
    ------
    RuntimeError
        :func:`init` has not run.
    """
    return DataParallelFit(
        model, x, y, options, broadcast=broadcast, reseed_dropout=reseed_dropout
    ).run()


@takes_options(StreamOptions)
def fit_stream(model, tokens, options, *, broadcast=True, seed=0, reseed_dropout=True):
    """``training.fit_stream`` on every rank of :func:`init`: the stream is cut into
    ``size() * batch_size`` parallel streams and rank r trains on streams
    ``r * batch_size .. (r + 1) * batch_size - 1`` (its stateful layers carry their state),
    so N ranks match one process with ``batch_size * N`` streams to rounding. Losses (and the
    validation loss, split the same way) are means over all streams; printing and checkpoints
    as :func:`fit`. Call it on every rank with the whole stream.

    ``seed`` (the same on every rank; None: rank 0 draws one) and ``reseed_dropout``: the
    dropout generators are reseeded from ``(seed, rank)`` as in :func:`fit`."""
    return DataParallelStream(
        model, tokens, options, broadcast=broadcast, seed=seed, reseed_dropout=reseed_dropout
    ).run()
