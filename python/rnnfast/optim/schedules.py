"""Learning-rate schedules over an optimizer's groups (torch.optim.lr_scheduler's)."""

from __future__ import annotations

import math

from .._validation import check_choice, check_int, check_real_at_least, check_real_in
from .optimizer import Optimizer

__all__ = ["CosineAnnealingLR", "ReduceLROnPlateau", "StepLR"]


def _check_optimizer(optimizer):
    if not isinstance(optimizer, Optimizer):
        raise TypeError(
            f"optimizer: expected an rnnfast.optim optimizer, got {type(optimizer).__name__}"
        )
    return optimizer


class _Schedule:
    """A schedule that sets ``optimizer.lr`` at each ``step()`` from the epoch count
    ``last_epoch`` (0 after construction) and the current rate, as PyTorch's recursive forms:
    a rate set by hand between steps is carried on, and the values match PyTorch's bit for bit
    rather than a closed form's."""

    def __init__(self, optimizer):
        self.optimizer = _check_optimizer(optimizer)
        self.base_lr = optimizer.lr
        self.last_epoch = 0

    def step(self):
        """Advance one epoch and set the optimizer's learning rate for it."""
        self.last_epoch += 1
        self.optimizer.lr = self._next_lr(self.optimizer.lr)

    def get_last_lr(self):
        """``[lr]``: the rate the last step set (a list, as PyTorch's, of one group)."""
        return [self.optimizer.lr]

    def _next_lr(self, lr):  # pragma: no cover - every subclass overrides it
        raise NotImplementedError


class StepLR(_Schedule):
    """Multiply the learning rate by ``gamma`` every ``step_size`` epochs
    (``torch.optim.lr_scheduler.StepLR``).

    Parameters
    ----------
    optimizer : Optimizer
    step_size : int >= 1
    gamma : float >= 0
    """

    def __init__(self, optimizer, step_size, gamma=0.1):
        self.step_size = check_int("step_size", step_size, 1)
        self.gamma = check_real_at_least("gamma", gamma, 0)
        super().__init__(optimizer)

    def _next_lr(self, lr):
        if self.last_epoch % self.step_size != 0:
            return lr
        return lr * self.gamma


class CosineAnnealingLR(_Schedule):
    """Cosine annealing from the initial rate to ``eta_min`` over ``T_max`` epochs, then back up
    (a period of ``2 T_max``), as ``torch.optim.lr_scheduler.CosineAnnealingLR``:
    ``lr_t = eta_min + (base_lr - eta_min) (1 + cos(pi t / T_max)) / 2``.

    Parameters
    ----------
    optimizer : Optimizer
    T_max : int >= 1
    eta_min : float >= 0
    """

    def __init__(self, optimizer, T_max, eta_min=0.0):
        self.T_max = check_int("T_max", T_max, 1)
        self.eta_min = check_real_at_least("eta_min", eta_min, 0)
        super().__init__(optimizer)

    def _next_lr(self, lr):
        t, T, low = self.last_epoch, self.T_max, self.eta_min
        if (t - 1 - T) % (2 * T) == 0:
            # the step off the minimum: the ratio below would divide by 1 + cos(pi) = 0
            return lr + (self.base_lr - low) * (1 - math.cos(math.pi / T)) / 2
        ratio = (1 + math.cos(math.pi * t / T)) / (1 + math.cos(math.pi * (t - 1) / T))
        return ratio * (lr - low) + low


class ReduceLROnPlateau:
    """Multiply the learning rate by ``factor`` when a metric has stopped improving for more
    than ``patience`` epochs (``torch.optim.lr_scheduler.ReduceLROnPlateau``).

    Parameters
    ----------
    optimizer : Optimizer
    mode : {"min", "max"}
        Whether the metric should go down (a loss) or up (an accuracy).
    factor : float in (0, 1)
    patience : int >= 0
        Epochs without improvement tolerated; the rate drops on the next one.
    threshold : float >= 0
        The least change that counts as an improvement, relative to the best value
        (``threshold_mode="rel"``) or absolute (``"abs"``).
    cooldown : int >= 0
        Epochs after a reduction during which bad epochs are not counted.
    min_lr : float >= 0
        The rate is never reduced below it.
    threshold_mode : {"rel", "abs"}
    eps : float >= 0
        A reduction smaller than this is not applied.

    Call ``step(metric)`` once per epoch.
    """

    def __init__(
        self,
        optimizer,
        mode="min",
        factor=0.1,
        patience=10,
        threshold=1e-4,
        cooldown=0,
        min_lr=0.0,
        threshold_mode="rel",
        eps=1e-8,
    ):
        self.optimizer = _check_optimizer(optimizer)
        check_choice("mode", mode, ("min", "max"))
        check_choice("threshold_mode", threshold_mode, ("rel", "abs"))
        factor = check_real_in("factor", factor, 0, 1, low_open=True, high_open=True)
        self.mode, self.threshold_mode, self.factor = mode, threshold_mode, factor
        self.patience = check_int("patience", patience, 0)
        self.threshold = check_real_at_least("threshold", threshold, 0)
        self.cooldown = check_int("cooldown", cooldown, 0)
        self.min_lr = check_real_at_least("min_lr", min_lr, 0)
        self.eps = check_real_at_least("eps", eps, 0)
        self.last_epoch = 0
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs = 0
        self.cooldown_counter = 0

    def step(self, metric):
        """Record one epoch's metric (any real number, or a 0-d array) and reduce the rate
        when it has not improved for more than ``patience`` epochs."""
        current = float(metric)
        self.last_epoch += 1
        if self._is_better(current):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            self._reduce()
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0

    def get_last_lr(self):
        """``[lr]``: the optimizer's current rate (a list, as PyTorch's, of one group)."""
        return [self.optimizer.lr]

    def _is_better(self, value):
        # NaN compares False, so a NaN metric counts as a bad epoch (as in PyTorch)
        if self.mode == "min":
            limit = (
                self.best * (1.0 - self.threshold)
                if self.threshold_mode == "rel"
                else self.best - self.threshold
            )
            return value < limit
        limit = (
            self.best * (1.0 + self.threshold)
            if self.threshold_mode == "rel"
            else self.best + self.threshold
        )
        return value > limit

    def _reduce(self):
        old = self.optimizer.lr
        new = max(old * self.factor, self.min_lr)
        if old - new > self.eps:
            self.optimizer.lr = new
