"""The data that ``training.fit`` / ``evaluate`` / ``predict`` iterate over: inputs and targets
as arrays, padded arrays with lengths or a mask, or ragged lists of sequences, cut into batches
that are padded one at a time."""

from __future__ import annotations

import numpy as np

from .._validation import check_lengths
from .masks import mask_to_lengths

__all__ = ["SequenceData"]


def _is_ragged(value):
    return (
        isinstance(value, (list, tuple)) and len(value) > 0 and all(np.ndim(v) >= 1 for v in value)
    )


class SequenceData:
    """Inputs ``x`` and targets ``y`` (optional) of one data set.

    Parameters
    ----------
    x : ndarray, or a list of arrays (T_i, ...) of different lengths (ragged)
    y : ndarray, a list of per-step target arrays (T_i, ...) (ragged), a list of per-sequence
        targets, or None
    lengths : (N,) ints, optional; mask : (N, T) bool, optional
        The lengths of a padded ``x`` (padding at the end), one or the other.
    batch_first : bool
        The model's layout: batches are (B, T, ...) if True, else (T, B, ...); a padded ``x``
        and ``y`` are cut along axis 0 or 1 accordingly.
    """

    def __init__(self, x, y, *, lengths=None, mask=None, batch_first=True, batch_axis=None):
        self.batch_first = bool(batch_first)
        self.ragged = _is_ragged(x)
        if batch_axis is None:
            batch_axis = 0 if (self.batch_first or self.ragged) else 1
        self.axis = batch_axis
        if self.ragged:
            if lengths is not None or mask is not None:
                raise ValueError(
                    "lengths, mask: a ragged list of sequences carries its own "
                    "lengths; give them only with a padded array"
                )
            self.x = [np.asarray(s) for s in x]
            self.n = len(self.x)
            self.lengths = np.array([s.shape[0] for s in self.x], dtype=np.int64)
        else:
            self.x = np.asarray(x)
            if self.x.ndim <= self.axis:
                raise ValueError(
                    f"x: expected a batch along axis {self.axis}, got shape {self.x.shape}"
                )
            self.n = self.x.shape[self.axis]
            self.lengths = self._padded_lengths(lengths, mask)
        self.y_ragged = _is_ragged(y)
        if self.y_ragged:
            self.y = [np.asarray(t) for t in y]
            if len(self.y) != self.n:
                raise ValueError(
                    f"y: expected {self.n} target sequences (one per input), got {len(self.y)}"
                )
            bad = [
                i
                for i, t in enumerate(self.y)
                if self.lengths is not None and t.shape[0] != self.lengths[i]
            ]
            if bad:
                i = bad[0]
                raise ValueError(
                    f"y[{i}]: expected {self.lengths[i]} per-step targets (x[{i}]'s "
                    f"length), got shape {self.y[i].shape}"
                )
        elif y is not None:
            self.y = np.asarray(y)
            # per-step targets of a padded x are cut along x's batch axis; one target per
            # sequence (and every target of ragged x) is one row per sample
            y_axis = self.axis if not self.ragged else 0
            if self.y.ndim <= y_axis or self.y.shape[y_axis] != self.n:
                y_axis = 0
            if self.y.ndim == 0 or self.y.shape[y_axis] != self.n:
                raise ValueError(
                    f"y: expected {self.n} samples along axis {y_axis} (as x), got "
                    f"shape {self.y.shape}"
                )
            self.y_axis = y_axis
        else:
            self.y = None

    def _padded_lengths(self, lengths, mask):
        if lengths is None and mask is None:
            return None
        if lengths is not None and mask is not None:
            raise ValueError("lengths, mask: give one of them, not both")
        time_axis = 1 - self.axis if self.axis in (0, 1) else None
        if time_axis is None or self.x.ndim < 2:
            raise ValueError(
                f"lengths: need a padded batch of sequences, got x of shape {self.x.shape}"
            )
        steps = self.x.shape[time_axis]
        if mask is not None:
            m = np.asarray(mask)
            if m.shape != (self.n, steps):
                raise ValueError(
                    f"mask: expected shape (N, T) = {(self.n, steps)}, got shape {m.shape}"
                )
            return mask_to_lengths(m)
        return check_lengths(lengths, steps, self.n)

    def __len__(self):
        return self.n

    # ---- one batch ---------------------------------------------------------------------------

    def batch(self, index):
        """``(xb, yb, lengths)`` of the samples ``index``: padded to the longest of them (ragged
        input; a padded x is cut to it), in the model's layout; lengths None for fixed-length
        data."""
        index = np.asarray(index, dtype=np.int64)
        lengths = None if self.lengths is None else self.lengths[index]
        steps = int(lengths.max()) if lengths is not None and len(index) else None
        if self.ragged:
            xb = self._pad([self.x[i] for i in index], steps)
        else:
            xb = self._cut(np.take(self.x, index, axis=self.axis), steps)
        yb = None
        if self.y_ragged:
            yb = self._pad([self.y[i] for i in index], steps)
        elif self.y is not None:
            yb = np.take(self.y, index, axis=self.y_axis)
            if not self.ragged and self.y_axis == self.axis and self._per_step(yb):
                yb = self._cut(yb, steps)
        return xb, yb, lengths

    def _per_step(self, y):
        """Whether targets cut from a padded y have x's time axis (many-to-many)."""
        time_axis = 1 - self.axis
        return (
            self.lengths is not None
            and y.ndim > time_axis
            and y.shape[time_axis] == self.x.shape[time_axis]
        )

    def _pad(self, seqs, steps):
        steps = max((s.shape[0] for s in seqs), default=0) if steps is None else steps
        first = seqs[0] if seqs else np.zeros((0,))
        out = np.zeros((len(seqs), steps) + first.shape[1:], dtype=first.dtype)
        for b, s in enumerate(seqs):
            out[b, : s.shape[0]] = s
        return out if self.batch_first else np.ascontiguousarray(out.swapaxes(0, 1))

    def _cut(self, a, steps):
        """A padded batch cut to its longest sequence: less padding to run over."""
        if steps is None:
            return a
        time_axis = 1 - self.axis
        if a.shape[time_axis] == steps:
            return a
        return np.take(a, np.arange(steps), axis=time_axis)

    def full_steps(self):
        """T of a padded x (None for ragged input)."""
        return None if self.ragged else self.x.shape[1 - self.axis]
