"""The training engine: the one epoch loop behind ``training.fit``, ``fit_stream`` and
``fit_seq2seq``, and behind ``rnnfast.distributed``'s ``fit`` and ``fit_stream``, which build on
it (a level above: this module imports nothing of theirs).

- :class:`FitOptions`, :class:`StreamOptions`: the keywords of fit and fit_stream, defined once;
  training's and distributed's functions take them through :func:`takes_options`.
- :class:`Loop`: per epoch, the stateful layers' state forgotten, training mode, the epoch's
  batches each trained (``step``), the loss weighted by the positions each batch counted, the
  training figures, the validation figures (as ``val_...``), a progress bar, the history and the
  callbacks (True from one stops).
- :class:`LossLoop`: a step of forward, loss (padding left out), backward and optimizer step;
  :class:`FitLoop` runs it over a data set, :class:`StreamLoop` over the windows of a stream.
  The hooks a data-parallel loop overrides are marked so: ``rank`` / ``size`` (0 of 1 here),
  ``reduce`` (sums over the processes), ``share_loss``, ``average_gradients``, ``skip_step``,
  ``end_epoch``, ``close``.
- ``fit(..., distributed=True)`` runs the data-parallel FitLoop that ``rnnfast.distributed``
  hands over when it is imported (:func:`use_data_parallel`): training sits below distributed
  and does not import it.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math

import numpy as np

from ..nn._mixed_precision import check_model_precision, model_products
from ..optim import clip_grad_norm
from ._backup import (
    Backup,
    generator_state,
    local_state,
    restore_backup,
    resume_epoch,
    save_backup,
    set_generator_state,
)
from ._batches import (
    check_bucketing,
    epoch_order,
    eval_order,
    forward,
    model_data,
    reset_stateful,
    stream_windows,
    window_losses,
)
from ._progress import Progress, resolve_verbose
from ._scoring import Metrics, call_loss, resolve_loss, score

__all__ = [
    "FitLoop",
    "FitOptions",
    "Loop",
    "LossLoop",
    "StreamLoop",
    "StreamOptions",
    "data_parallel",
    "takes_options",
    "use_data_parallel",
]


# ---- the keywords, defined once -----------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class FitOptions:
    """The keywords of ``training.fit`` and ``rnnfast.distributed.fit`` (documented there)."""

    loss: object
    optimizer: object
    epochs: int = 1
    batch_size: int = 32
    shuffle: bool = True
    validation_data: object = None
    metrics: object = ()
    callbacks: object = ()
    clip_norm: object = None
    batch_axis: object = None
    seed: object = None
    verbose: object = "auto"
    lengths: object = None
    mask: object = None
    bucket: bool = False
    max_tokens: object = None
    drop_last: bool = False
    backup_dir: object = None
    backup_every: object = None
    precision: object = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class StreamOptions:
    """The keywords of ``training.fit_stream`` and ``rnnfast.distributed.fit_stream``."""

    loss: object
    optimizer: object
    batch_size: int
    bptt: int
    epochs: int = 1
    clip_norm: object = None
    validation_tokens: object = None
    callbacks: object = ()
    verbose: object = "auto"
    backup_dir: object = None
    backup_every: object = None
    precision: object = None


def takes_options(options_class, **defaults):
    """Decorate ``f(<positional>, options, *, <own keywords>)`` into the function users call,
    ``f(<positional>, *, <options_class's fields>, <own keywords>)``: it binds the arguments to
    that signature (a missing or unknown one is a TypeError naming the function and the
    argument), gathers the fields into one ``options_class`` and passes that. Its signature (``inspect.signature``, help(), the docs) lists every keyword.
    ``defaults``: fields whose default differs for this function (distributed's ``seed=0``)."""
    fields = [f.name for f in dataclasses.fields(options_class)]
    unknown = sorted(set(defaults) - set(fields))
    if unknown:
        raise TypeError(f"defaults: {unknown} are not fields of {options_class.__name__}")

    def decorate(func):
        own = list(inspect.signature(func).parameters.values())
        names = [p.name for p in own]
        head, extra = own[: names.index("options")], own[names.index("options") + 1 :]
        shared = [
            inspect.Parameter(
                f.name,
                inspect.Parameter.KEYWORD_ONLY,
                default=defaults.get(
                    f.name,
                    inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default,
                ),
            )
            for f in dataclasses.fields(options_class)
        ]
        signature = inspect.Signature([*head, *shared, *extra])

        @functools.wraps(func)
        def call(*args, **kwargs):
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError as error:
                raise TypeError(f"{func.__name__}(): {error}") from None
            bound.apply_defaults()
            values = dict(bound.arguments)
            options = options_class(**{name: values.pop(name) for name in fields})
            positional = [values.pop(p.name) for p in head]
            return func(*positional, options, **values)

        call.__signature__ = signature
        return call

    return decorate


# ---- the epoch loop -----------------------------------------------------------------------------


class Loop:
    """The epoch loop, and the history it returns (:meth:`run`).

    ``options``: the fit's keywords (epochs, callbacks, verbose, backup_dir, backup_every and
    what the subclass reads). Subclasses give ``batches(epoch)`` (a list) and ``step(batch)``:
    ``(loss, counted, samples)``, or None for a step not taken (a gradient norm that is not
    finite); the epoch's loss is the mean over the counted positions, the progress's
    throughput counts ``samples``. Optionally ``epoch_logs()`` (training figures of the
    epoch) and ``validate()`` (a dict, or None without validation data).

    With ``backup_dir`` the loop backs itself up at each epoch's end (and every
    ``backup_every`` batches) and a new run resumes from the backup (``_backup``); a subclass
    with state of its own adds it through ``loop_state`` (the same on every process) and
    ``local_state`` / ``load_epoch_state`` (this process's, within an epoch)."""

    rank, size = 0, 1  # this process among the data-parallel ones: the only one here
    reduce = None  # how an array is summed over the processes: nothing to sum here
    resets_state = True  # stateful layers start each epoch afresh
    rng = None  # the loop's own generator (shuffling, bucketing): a backup keeps it
    optimizer = None

    def __init__(self, model, options):
        self.model, self.options = model, options
        self.epochs, self.callbacks = options.epochs, options.callbacks
        self.verbose = resolve_verbose(options.verbose)
        self.backup = Backup.of(options)
        self.history, self.tally = {}, [0.0, 0]  # the loss summed over the counted positions
        self.epoch_rng = None  # the loop's generator at the epoch's start

    def run(self):
        finished = False
        try:
            history = self._epochs()
            finished = True
            return history
        finally:
            try:
                if self.backup is not None and self.rank == 0:
                    self.backup.clear(finished)
            finally:
                self.close()

    def _epochs(self):
        saved = restore_backup(self) if self.backup is not None else None
        first = 0 if saved is None else saved["epoch"]
        for epoch in range(first, self.epochs):
            resume = saved if epoch == first and saved is not None and saved["position"] else None
            logs = self._epoch(epoch, resume)
            for key, value in logs.items():
                self.history.setdefault(key, []).append(value)
            if self.end_epoch(epoch, logs):
                break
            if self.backup is not None and epoch + 1 < self.epochs:
                save_backup(self, epoch + 1, 0)
        return self.history

    def _epoch(self, epoch, resume):
        """One epoch, or (``resume``: a backup taken in it) the rest of one; its logs."""
        if self.resets_state and resume is None:
            reset_stateful(self.model)
        self.model.train()
        now = generator_state(self.rng)
        if resume is not None:  # the epoch's batches drawn again, as they were
            set_generator_state(self.rng, resume["mine"]["epoch_rng"], "the loop's generator")
        self.epoch_rng = generator_state(self.rng)
        batches = self.batches(epoch)
        self.tally, begin = [0.0, 0], 0
        if resume is not None:
            set_generator_state(self.rng, now, "the loop's generator")
            begin = resume_epoch(self, resume, len(batches))
        progress = Progress(len(batches), f"epoch {epoch + 1}/{self.epochs}", self.verbose, begin)
        for position in range(begin, len(batches)):
            done = self.step(batches[position])
            if done is not None:
                value, counted, samples = done
                self.tally[0] += value * counted
                self.tally[1] += counted
                progress.update(value, samples)
            if self.backup is not None and self.backup.due(position + 1, len(batches)):
                save_backup(self, epoch, position + 1)
        logs = {"loss": self.tally[0] / max(self.tally[1], 1), **self.epoch_logs()}
        validation = self.validate()
        if validation is not None:
            logs.update({f"val_{k}": v for k, v in validation.items()})
        progress.close(logs)
        return logs

    def epoch_logs(self):
        return {}

    def validate(self):
        return None

    def end_epoch(self, epoch, logs):
        """The callbacks, in order, until one asks to stop (True)."""
        return any(cb.on_epoch_end(epoch, logs, self.model) for cb in self.callbacks)

    def close(self):
        """Called when the loop ends, by a stop, its last epoch or an error."""

    # ---- what a backup keeps beyond the model, the optimizer and the history (see _backup) ---

    def loop_state(self):
        """State of the loop's own, the same on every process (JSON values and arrays)."""
        return {}

    def load_loop_state(self, state):
        """Restore what :meth:`loop_state` returned."""

    def local_state(self):
        """This process's part of a backup: its random streams, the state its stateful layers
        carry, the epoch's running sums (``_backup.local_state``)."""
        return local_state(self)

    def load_epoch_state(self, mine):
        """This process's running sums of an epoch resumed from a backup (its ``mine``)."""
        self.tally = list(mine["tally"])

    def gather(self, mine):
        """Every process's :meth:`local_state`, on the process that writes the backup (one
        here); None elsewhere."""
        return [mine]

    def share(self, value):
        """The writing process's ``value`` (a backup read there), on every process."""
        return value


def _checked_optimizer(optimizer):
    """The optimizer, or a TypeError that says what fit expects: a name such as "adam" is
    Keras's habit, and without this it failed at the first step as "'str' object has no
    attribute 'step'"."""
    if callable(getattr(optimizer, "step", None)):
        return optimizer
    got = f"str {optimizer!r}" if isinstance(optimizer, str) else type(optimizer).__name__
    raise TypeError(
        f"optimizer: expected an rnnfast.optim optimizer built over the model's parameters, "
        f"e.g. optimizer=rnnfast.optim.Adam(model, lr=1e-3), got {got}"
        + (
            " (a name is what rnnfast.keras's compile(optimizer=...) takes)"
            if isinstance(optimizer, str)
            else ""
        )
    )


class LossLoop(Loop):
    """A loop whose step trains a loss: forward, the loss with the padding left out, backward,
    the gradient norm clipped, the optimizer's step (skipped when the norm is not finite).
    ``options`` also gives ``loss``, ``optimizer``, ``clip_norm`` and ``precision`` (the
    products of the training and evaluation steps' kernel calls: None, each layer's own)."""

    def __init__(self, model, options):
        super().__init__(model, options)
        self.loss_fn = resolve_loss(options.loss)
        self.optimizer, self.clip_norm = _checked_optimizer(options.optimizer), options.clip_norm
        self.precision = check_model_precision(model, options.precision)

    def train_step(self, xb, yb, lengths=None, metrics=None):
        """One batch: ``(loss, counted positions, whether it stepped)``; the training metrics
        count the batch when it stepped. Its kernel calls run with the fit's ``precision``,
        which wins over the layers' own; the gradients, their average over the processes and
        the optimizer's step stay float32."""
        with model_products(self.precision):
            return self._train_step(xb, yb, lengths, metrics)

    def _train_step(self, xb, yb, lengths, metrics):
        model = self.model
        model.zero_grad()
        out, valid = forward(model, xb, lengths)
        value, d_out, counted = call_loss(self.loss_fn, out, yb, valid)
        value, counted, d_out = self.share_loss(value, counted, d_out)
        model.backward(d_out)
        self.average_gradients()
        if self.clip_norm is not None and not math.isfinite(clip_grad_norm(model, self.clip_norm)):
            self.skip_step()
            return value, counted, False
        self.optimizer.step()
        if metrics is not None:
            metrics.add(out, yb, valid)
        return value, counted, True

    def share_loss(self, value, counted, d_out):
        """The loss, its count and its gradient for the step (this batch's here)."""
        return value, counted, d_out

    def average_gradients(self):
        """Between the backward and the clipping: nothing to average here."""

    def skip_step(self):
        """A step not taken: nothing to undo here."""


class FitLoop(LossLoop):
    """``training.fit``'s loop: epochs of (shuffled, or bucketed) batches of a data set."""

    def __init__(self, model, x, y, options):
        super().__init__(model, options)
        Metrics(options.metrics)  # unknown names fail before any training
        self.rng = np.random.default_rng(options.seed)
        self.data = model_data(model, x, y, options.lengths, options.mask, options.batch_axis)
        if self.data.y is None:
            raise ValueError("y: expected targets, got None")
        check_bucketing(self.data, options.bucket, options.max_tokens)
        self.train_metrics = Metrics(())

    def batches(self, epoch):
        self.train_metrics = Metrics(self.options.metrics)
        return self.epoch_batches(epoch)

    def epoch_batches(self, epoch):
        """The index arrays of an epoch."""
        o = self.options
        return epoch_order(
            self.data, o.batch_size, o.shuffle, self.rng, o.bucket, o.max_tokens, o.drop_last
        )

    def step(self, index):
        xb, yb, lb = self.data.batch(index)
        value, counted, stepped = self.train_step(xb, yb, lb, self.train_metrics)
        return (value, counted, len(index) * self.size) if stepped else None

    def epoch_logs(self):
        return self.train_metrics.results(self.reduce)

    def local_state(self):
        sums = {name: list(pair) for name, pair in self.train_metrics.sums.items()}
        return {**super().local_state(), "metrics": sums}

    def load_epoch_state(self, mine):
        super().load_epoch_state(mine)
        if sorted(mine["metrics"]) != sorted(self.train_metrics.sums):
            raise ValueError(
                f"backup_dir: the backup counts the metrics {sorted(mine['metrics'])}, this run "
                f"{sorted(self.train_metrics.sums)}"
            )
        self.train_metrics.sums = {name: list(pair) for name, pair in mine["metrics"].items()}

    def validate(self):
        if self.options.validation_data is None:
            return None
        x_val, y_val, *rest = self.options.validation_data
        with model_products(self.precision):  # evaluated as it trains
            return self.evaluate(x_val, y_val, rest[0] if rest else None)

    def evaluate(self, x, y, lengths):
        """``training.evaluate``'s figures of (x, y) with fit's loss, metrics and batches."""
        o = self.options
        data = model_data(self.model, x, y, lengths, None, o.batch_axis)
        return score(
            self.model,
            data,
            self.eval_order(data),
            loss_fn=self.loss_fn,
            metrics=o.metrics,
            batch_size=o.batch_size,
            reduce=self.reduce,
        )

    def eval_order(self, data):
        """The items of ``data`` this process evaluates, in the order it runs them."""
        return eval_order(data, bucket=True)


class StreamLoop(LossLoop):
    """``training.fit_stream``'s loop: truncated BPTT over the windows of a long stream, in
    order, the stateful layers' state carried from one window to the next."""

    def __init__(self, model, tokens, options):
        super().__init__(model, options)
        self.windows = list(zip(*stream_windows(tokens, self.streams, options.bptt)))

    @property
    def streams(self):
        """The parallel streams a window holds: ``batch_size`` per process."""
        return self.options.batch_size * self.size

    def batches(self, epoch):
        return self.windows

    def step(self, window):
        xb, yb = window
        value, _, _ = self.train_step(*self.part(xb, yb))
        return value, 1, xb.size

    def part(self, xb, yb):
        """This process's streams of a window (all of them here)."""
        return xb, yb

    def validate(self):
        if self.options.validation_tokens is None:
            return None
        with model_products(self.precision):  # evaluated as it trains
            return {"loss": self.evaluate(self.options.validation_tokens)}

    def evaluate(self, tokens):
        """The mean per-window loss of a stream, in eval mode."""
        total, windows = window_losses(
            self.model, tokens, self.loss_fn, self.streams, self.options.bptt, self.part
        )
        if self.reduce is not None:
            total = float(self.reduce([total])[0]) / self.size
        return total / windows


# ---- fit(..., distributed=True) -----------------------------------------------------------------

_data_parallel = []  # the FitLoop class rnnfast.distributed hands over, once it is imported


def use_data_parallel(loop_class):
    """Make ``loop_class`` (a FitLoop taking ``(model, x, y, options)``) what
    ``training.fit(..., distributed=True)`` runs: rnnfast.distributed's, given when it is
    imported (training cannot import it: distributed builds on training)."""
    if not (isinstance(loop_class, type) and issubclass(loop_class, FitLoop)):
        raise TypeError(f"loop_class: expected a FitLoop subclass, got {loop_class!r}")
    _data_parallel[:] = [loop_class]


def data_parallel():
    """The FitLoop of ``fit(..., distributed=True)``."""
    if not _data_parallel:
        raise RuntimeError(
            "training.fit(distributed=True): call rnnfast.distributed.init() first (in a "
            "script run under mpiexec)"
        )
    return _data_parallel[0]
