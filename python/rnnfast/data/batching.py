"""Batches of a data set of variable-length sequences, with similar lengths together: a padded
batch costs its longest sequence's steps for every row, so mixing lengths wastes kernel work."""

from __future__ import annotations

import math

import numpy as np

from .._validation import (
    check_bool,
    check_int,
    check_int_array,
    check_optional_int,
    is_int,
    type_error,
)

__all__ = ["BucketedBatches"]

_BATCHES_PER_BUCKET = 50


class BucketedBatches:
    """Index batches into a data set, for one epoch per iteration.

    Iterating yields int64 arrays of indices into the data set (``lengths[i]`` is the length of
    item i), each array a batch. Without ``shuffle`` the batches take the items in order. With
    it, each epoch shuffles the items, sorts them by length within buckets of ``bucket_size``
    consecutive (shuffled) items, cuts the buckets into batches (a batch never spans two
    buckets) and shuffles the order of the batches: each batch holds similar lengths, and each
    epoch differs. One generator, ``np.random.default_rng(seed)``, made here, drives all epochs,
    so a run with the same seed repeats its epochs.

    Parameters
    ----------
    lengths : array_like of int, shape (N,)
        The length of each of the N >= 1 items, each >= 0.
    batch_size : int >= 1, or None with ``max_tokens``
        Items per batch (the final batch of an epoch may be smaller). With ``max_tokens`` it is
        a cap on the rows of a batch (32 by default); None removes the cap.
    max_tokens : int >= 1, optional
        Batch by padded size instead of by count: each batch's rows times its longest length is
        at most ``max_tokens``, except that an item longer than ``max_tokens`` gets a batch of
        its own.
    shuffle : bool
        Shuffle and bucket as above (for training); False for batches in data order (for
        evaluation), where ``seed`` and ``bucket_size`` are unused.
    seed : int >= 0, numpy.random.Generator or None
        Seeds the generator (a Generator is used as it is, and advanced); None draws fresh
        entropy.
    drop_last : bool
        Leave out the epoch's one smaller batch (by count only: with ``max_tokens`` batches have
        no set size). With ``shuffle``, ``N % batch_size`` items drawn at random each epoch are
        left out (not the longest, which the last bucket's smaller batch would hold).
    bucket_size : int >= 1, optional
        Items sorted together; by default 50 batches' worth (``50 * batch_size``, or with
        ``max_tokens`` and no cap, 50 times the rows that fit a batch of the mean length).
        Batching by count, a multiple of ``batch_size``, so that only the last bucket ends in a
        smaller batch. Larger buckets waste less padding, smaller ones mix the data more.

    Raises
    ------
    TypeError
        Non-integer ``lengths``, a non-int size, a non-bool flag or a bad ``seed``.
    ValueError
        ``lengths`` empty, not 1-D or negative; a size below 1; ``batch_size=None`` without
        ``max_tokens``; ``drop_last`` with ``max_tokens``; ``bucket_size`` not a multiple of
        ``batch_size``.

    Examples
    --------
    >>> batches = BucketedBatches([5, 1, 4, 2, 3], batch_size=2, shuffle=False)
    >>> [b.tolist() for b in batches], len(batches)
    ([[0, 1], [2, 3], [4]], 3)
    """

    def __init__(
        self,
        lengths,
        batch_size=32,
        *,
        max_tokens=None,
        shuffle=True,
        seed=None,
        drop_last=False,
        bucket_size=None,
    ):
        self._lengths = _check_lengths(lengths)
        self._max_tokens = check_optional_int("max_tokens", max_tokens, 1)
        if batch_size is None and self._max_tokens is None:
            raise ValueError(
                "batch_size: expected an int >= 1, got None (None is allowed only with "
                "max_tokens, to batch by tokens alone)"
            )
        self._batch_size = check_optional_int("batch_size", batch_size, 1)
        self._shuffle = check_bool("shuffle", shuffle)
        self._drop_last = check_bool("drop_last", drop_last)
        if self._drop_last and self._max_tokens is not None:
            raise ValueError(
                "drop_last: expected False with max_tokens (batches by tokens have no set size, "
                "so none is the smaller one), got True"
            )
        self._bucket_size = self._check_bucket_size(bucket_size)
        self._rng = np.random.default_rng(_check_seed(seed))
        # The next epoch's batches, when __len__ had to plan them (batching by tokens, the count
        # depends on the shuffle); __iter__ then runs that plan, so len() tells the truth.
        self._planned = None

    def _check_bucket_size(self, bucket_size) -> int:
        if bucket_size is not None:
            bucket_size = check_int("bucket_size", bucket_size, 1)
            if self._max_tokens is None and bucket_size % self._batch_size:
                below = bucket_size // self._batch_size * self._batch_size
                size = self._batch_size
                options = f"{below} or {below + size}" if below else f"{size}"
                raise ValueError(
                    f"bucket_size: expected a multiple of batch_size={self._batch_size}, so that "
                    f"only the last bucket ends in a smaller batch, got {bucket_size}; "
                    f"{options} would do"
                )
            return bucket_size
        if self._batch_size is not None:
            return _BATCHES_PER_BUCKET * self._batch_size
        mean = max(1, math.ceil(float(self._lengths.mean())))
        return _BATCHES_PER_BUCKET * max(1, self._max_tokens // mean)

    # ---- the options, read-only: a change would have to be checked as at construction --------

    @property
    def lengths(self) -> np.ndarray:
        """The items' lengths (N,), int64, read-only."""
        return self._lengths

    @property
    def batch_size(self) -> int | None:
        return self._batch_size

    @property
    def max_tokens(self) -> int | None:
        return self._max_tokens

    @property
    def shuffle(self) -> bool:
        return self._shuffle

    @property
    def drop_last(self) -> bool:
        return self._drop_last

    @property
    def bucket_size(self) -> int:
        return self._bucket_size

    # ---- epochs -----------------------------------------------------------------------------

    def __iter__(self):
        """One epoch: an iterator of int64 index arrays (new arrays, free to modify)."""
        batches = self._planned if self._planned is not None else self._plan()
        self._planned = None
        return iter(batches)

    def __len__(self) -> int:
        """The number of batches of the next epoch (of every epoch when batching by count)."""
        if self._max_tokens is None:
            n, size = len(self._lengths), self._batch_size
            return n // size if self._drop_last else -(-n // size)
        if self._planned is None:
            self._planned = self._plan()
        return len(self._planned)

    def __repr__(self) -> str:
        return (
            f"BucketedBatches({len(self._lengths)} items, batch_size={self._batch_size}, "
            f"max_tokens={self._max_tokens}, shuffle={self._shuffle}, "
            f"drop_last={self._drop_last}, bucket_size={self._bucket_size})"
        )

    def _plan(self) -> list[np.ndarray]:
        n = len(self._lengths)
        if self._shuffle:
            order = self._rng.permutation(n)
            if self._drop_last:
                # Drop random items, before sorting: the last bucket's smaller batch would hold
                # its longest items, and dropping those every epoch would bias training.
                order = order[: n - n % self._batch_size]
            buckets = [order[s : s + self._bucket_size] for s in range(0, n, self._bucket_size)]
            # stable: items of equal length stay in their shuffled order
            buckets = [b[np.argsort(self._lengths[b], kind="stable")] for b in buckets]
        else:
            buckets = [np.arange(n, dtype=np.int64)]
        batches = [batch for bucket in buckets for batch in self._cut(bucket)]
        if self._drop_last and batches and len(batches[-1]) < self._batch_size:
            batches.pop()  # in data order, the last batch is the only smaller one
        if self._shuffle:
            batches = [batches[i] for i in self._rng.permutation(len(batches))]
        return [b.astype(np.int64) for b in batches]  # copies: no two batches share memory

    def _cut(self, bucket: np.ndarray) -> list[np.ndarray]:
        """Consecutive batches of the items of one bucket, in its order."""
        if self._max_tokens is None:
            size = self._batch_size
            return [bucket[s : s + size] for s in range(0, len(bucket), size)]
        budget, cap = self._max_tokens, self._batch_size
        lengths = self._lengths[bucket].tolist()
        batches, start, longest = [], 0, 0
        for j, length in enumerate(lengths):
            rows = j - start
            # rows > 0: an item longer than the budget still gets a batch (of its own)
            if rows and ((rows + 1) * max(longest, length) > budget or (cap and rows == cap)):
                batches.append(bucket[start:j])
                start, longest = j, 0
            longest = max(longest, length)
        batches.append(bucket[start:])
        return batches


def _check_lengths(lengths) -> np.ndarray:
    arr = np.asarray(lengths)
    if arr.ndim != 1:
        raise ValueError(f"lengths: expected shape (N,), got shape {arr.shape}")
    if arr.size == 0:  # before the dtype: [] arrives as float64
        raise ValueError("lengths: expected at least one item, got none (an epoch would be empty)")
    check_int_array("lengths", arr)
    if arr.min() < 0:
        bad = int(np.argmin(arr))
        raise ValueError(f"lengths: expected values >= 0, got {int(arr[bad])} at index {bad}")
    arr = arr.astype(np.int64)  # a copy: a later change to the caller's array changes nothing
    arr.flags.writeable = False
    return arr


def _check_seed(seed):
    if seed is None or isinstance(seed, np.random.Generator):
        return seed
    if not is_int(seed):
        raise type_error("seed", "an int >= 0, a numpy.random.Generator or None", seed)
    return check_int("seed", seed, minimum=0)
