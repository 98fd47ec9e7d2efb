"""The front's fit on ``rnnfast.training``'s epoch loop, with what Keras's fit adds: Keras's
callbacks called at Keras's points (``callbacks``), and batches drawn from a Python generator
(``steps_per_epoch``, ``validation_steps``).

The loop classes are ``rnnfast.training``'s (``FitLoop`` for arrays, ``LossLoop`` for a
generator), so batching, the loss over the counted positions, the metrics and the progress
are those of ``rnnfast.training.fit``; only the hooks are added here.
"""

from __future__ import annotations

from ..training._batches import eval_order, forward, model_data, reset_stateful
from ..training._loop import FitLoop, LossLoop
from ..training._scoring import Metrics, call_loss, score

__all__ = ["ArrayLoop", "GeneratorLoop"]


class _Hooked:
    """Keras's callback points around the loop's own (``hooks``: a ``callbacks.KerasHooks``);
    a loop class mixes it in before rnnfast's."""

    hooks = None

    def batches(self, epoch):
        self.hooks.epoch_begin(epoch)
        self._position = 0
        return super().batches(epoch)

    def step(self, batch):
        position = self._position
        self._position += 1
        self.hooks.batch_begin(position)
        done = super().step(batch)
        total, counted = self.tally
        if done is not None:  # the loop adds the batch to its tally after this returns
            total, counted = total + done[0] * done[1], counted + done[1]
        logs = {"loss": total / max(counted, 1), **self.train_metrics.results()}
        self.hooks.batch_end(position, logs)
        return done

    def validate(self):
        if self.options.validation_data is None:
            return None
        self.hooks.test_begin()
        result = super().validate()
        self.hooks.test_end(result)
        return result

    def end_epoch(self, epoch, logs):
        stop = super().end_epoch(epoch, logs)  # rnnfast's callbacks first, as given
        for key, value in self.hooks.epoch_end(epoch, logs).items():
            self.history.setdefault(key, []).append(value)  # e.g. ReduceLROnPlateau's rate
        return stop or self.hooks.stop_training


class ArrayLoop(_Hooked, FitLoop):
    """``rnnfast.training.fit``'s loop over arrays, with Keras's callback points."""


class _Pulled:
    """An epoch's batches drawn from a generator one at a time, as the loop asks for them
    (in order): ``steps`` of them, each ``prepare``d to ``(x, y)``."""

    def __init__(self, source, steps, prepare, what):
        self.source, self.steps, self.prepare, self.what = source, steps, prepare, what

    def __len__(self):
        return self.steps

    def __getitem__(self, position):
        if position >= self.steps:  # the end, for a for loop over it
            raise IndexError(position)
        try:
            batch = next(self.source)
        except StopIteration:
            raise ValueError(
                f"{self.what}: the generator ran out after {position} batches of the "
                f"{self.steps} asked for; make it loop forever (while True: ... yield), or ask "
                "for fewer steps"
            ) from None
        return self.prepare(batch)


class _FromGenerator(LossLoop):
    """Epochs of ``steps_per_epoch`` batches drawn from a generator of ``(x, y)`` (or ``(x,
    y, sample_weight)``, ``prepare``d to ``(x, y)``), the generator continuing from one epoch
    to the next; validation on arrays (``validation_data=(x, y)``) or on ``validation_steps``
    batches of a generator, drawn once and evaluated at every epoch, as Keras 3 does."""

    def __init__(
        self, model, source, steps, options, prepare, validation_steps=None, prepare_val=None
    ):
        super().__init__(model, options)
        Metrics(options.metrics)  # unknown names fail before any training
        self.source, self.steps, self.prepare = source, steps, prepare
        self.validation_steps = validation_steps
        self.prepare_val = prepare if prepare_val is None else prepare_val
        self.validation_batches = None  # drawn at the first validation
        self.train_metrics = Metrics(())

    def batches(self, epoch):
        self.train_metrics = Metrics(self.options.metrics)
        return _Pulled(self.source, self.steps, self.prepare, "steps_per_epoch")

    def step(self, batch):
        xb, yb = batch
        value, counted, stepped = self.train_step(xb, yb, None, self.train_metrics)
        return (value, counted, len(xb)) if stepped else None

    def epoch_logs(self):
        return self.train_metrics.results()

    def validate(self):
        validation = self.options.validation_data
        if validation is None:
            return None
        o = self.options
        if isinstance(validation, tuple):  # arrays (x, y), already checked
            data = model_data(self.model, *validation, None, None, 0)
            return score(
                self.model,
                data,
                eval_order(data, bucket=False),
                loss_fn=self.loss_fn,
                metrics=o.metrics,
                batch_size=o.batch_size,
            )
        self.model.eval()
        reset_stateful(self.model)
        totals, total, counted_total = Metrics(o.metrics), 0.0, 0
        if self.validation_batches is None:
            # Keras 3 draws validation_steps batches from a validation generator once and
            # evaluates those same batches at every epoch
            pulled = _Pulled(
                validation, self.validation_steps, self.prepare_val, "validation_steps"
            )
            self.validation_batches = list(pulled)
        for xb, yb in self.validation_batches:
            out, valid = forward(self.model, xb, None)
            value, _, counted = call_loss(self.loss_fn, out, yb, valid, "sum")
            total += value
            counted_total += counted
            totals.add(out, yb, valid)
        return {"loss": total / max(counted_total, 1), **totals.results()}


class GeneratorLoop(_Hooked, _FromGenerator):
    """A generator's epochs with Keras's callback points."""
