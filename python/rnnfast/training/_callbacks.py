"""Callbacks of the training loops: ``on_epoch_end(epoch, logs, model) -> bool`` (True
stops), and optionally ``state_dict()`` / ``load_state_dict(state)``, which a training backup
(``fit``'s ``backup_dir``) keeps and restores."""

from __future__ import annotations

import math

from .._validation import check_keys
from ..io.persistence import save

__all__ = ["EarlyStopping", "ModelCheckpoint"]


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

    def state_dict(self):
        """What it has seen (the best value, the epochs since, the best weights): a training
        backup keeps it (``fit``'s ``backup_dir``)."""
        best_state = None if self.best_state is None else dict(self.best_state)
        return {"best": self.best, "wait": self.wait, "best_state": best_state}

    def load_state_dict(self, state):
        """Restore what :meth:`state_dict` returned."""
        check_keys("state", state, ("best", "wait", "best_state"))
        self.best, self.wait = float(state["best"]), int(state["wait"])
        best = state["best_state"]
        self.best_state = None if best is None else dict(best)


class ModelCheckpoint:
    """Save the model (rnnfast .npz) after each epoch, or only when ``monitor`` improves."""

    def __init__(self, path, monitor="val_loss", save_best_only=True, mode="min"):
        self.path, self.monitor, self.save_best_only = path, monitor, save_best_only
        self.sign = 1.0 if mode == "min" else -1.0
        self.best = math.inf

    def on_epoch_end(self, epoch, logs, model):
        value = self.sign * logs.get(self.monitor, math.nan)
        if not self.save_best_only or value < self.best:
            self.best = min(self.best, value)
            save(model, str(self.path).format(epoch=epoch + 1))
        return False

    def state_dict(self):
        """The best value so far: a training backup keeps it (``fit``'s ``backup_dir``)."""
        return {"best": self.best}

    def load_state_dict(self, state):
        """Restore what :meth:`state_dict` returned."""
        check_keys("state", state, ("best",))
        self.best = float(state["best"])
