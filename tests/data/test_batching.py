"""rnnfast.data.BucketedBatches: every item once per epoch, batch sizes and token budgets,
bucketing, seeded epochs and bad input."""

from __future__ import annotations

import numpy as np
import pytest

from rnnfast.data import BucketedBatches


def _lengths(rng, n, high=60):
    return rng.integers(0, high, size=n)


def _epoch(batches):
    out = list(batches)
    for b in out:
        assert b.dtype == np.int64 and b.ndim == 1 and b.size > 0
    return out


def _assert_each_index_once(epoch, n):
    allidx = np.concatenate(epoch)
    assert np.array_equal(np.sort(allidx), np.arange(n))


def _padded_tokens(epoch, lengths):
    return sum(len(b) * int(lengths[b].max()) for b in epoch)


# ---- by count -----------------------------------------------------------------------------------


def test_without_shuffle_batches_are_in_order():
    batches = BucketedBatches([5, 1, 4, 2, 3, 9, 9], batch_size=3, shuffle=False)
    epoch = _epoch(batches)
    assert [b.tolist() for b in epoch] == [[0, 1, 2], [3, 4, 5], [6]]
    assert len(batches) == 3
    assert [b.tolist() for b in _epoch(batches)] == [b.tolist() for b in epoch]  # every epoch
    dropped = BucketedBatches([5, 1, 4, 2, 3, 9, 9], 3, shuffle=False, drop_last=True)
    assert [b.tolist() for b in dropped] == [[0, 1, 2], [3, 4, 5]] and len(dropped) == 2


@pytest.mark.parametrize("n", [1, 3, 17, 100, 1000])
@pytest.mark.parametrize("batch_size", [1, 3, 32])
@pytest.mark.parametrize("bucket", [None, "one batch", "all"])
def test_each_index_once_per_epoch(rng, n, batch_size, bucket):
    lengths = _lengths(rng, n)
    bucket_size = {None: None, "one batch": batch_size, "all": -(-n // batch_size) * batch_size}[
        bucket
    ]
    batches = BucketedBatches(lengths, batch_size, seed=3, bucket_size=bucket_size)
    for _ in range(3):
        epoch = _epoch(batches)
        _assert_each_index_once(epoch, n)
        assert len(epoch) == len(batches) == -(-n // batch_size)
        sizes = sorted(len(b) for b in epoch)
        assert sizes[1:] == [batch_size] * (len(epoch) - 1)  # one smaller batch at most
        assert sizes[0] == (n % batch_size or batch_size)


@pytest.mark.parametrize("n, batch_size", [(100, 32), (96, 32), (7, 8), (1, 1)])
def test_drop_last_drops_the_one_smaller_batch(rng, n, batch_size):
    lengths = _lengths(rng, n)
    batches = BucketedBatches(lengths, batch_size, seed=1, drop_last=True)
    dropped_sets = set()
    for _ in range(4):
        epoch = _epoch(batches)
        assert len(epoch) == len(batches) == n // batch_size
        assert all(len(b) == batch_size for b in epoch)
        kept = np.concatenate(epoch) if epoch else np.zeros(0, np.int64)
        assert len(np.unique(kept)) == len(kept) == n // batch_size * batch_size
        dropped_sets.add(frozenset(set(range(n)) - set(kept.tolist())))
    if n % batch_size and n > batch_size:
        assert len(dropped_sets) > 1  # the shuffle drops other items in other epochs
        # random items, not the longest ones that end the last sorted bucket
        dropped = np.array(sorted(set().union(*dropped_sets)))
        assert lengths[dropped].min() < np.median(lengths)


def test_batches_hold_similar_lengths(rng):
    n, batch_size = 2000, 16
    lengths = _lengths(rng, n, high=200)
    bucketed = _epoch(BucketedBatches(lengths, batch_size, seed=0))
    mixed = _epoch(BucketedBatches(lengths, batch_size, seed=0, bucket_size=batch_size))
    useful = int(lengths.sum())
    # sorting 50 batches' worth together: little padding; one batch per bucket: no sorting at all
    assert _padded_tokens(bucketed, lengths) < 1.1 * useful
    assert _padded_tokens(mixed, lengths) > 1.5 * useful


def test_one_bucket_cuts_the_sorted_items(rng):
    lengths = _lengths(rng, 90)
    epoch = _epoch(BucketedBatches(lengths, 9, seed=5, bucket_size=90))
    ranges = sorted((int(lengths[b].min()), int(lengths[b].max())) for b in epoch)
    for (_, high), (low, _) in zip(ranges, ranges[1:]):
        assert high <= low  # the batches are consecutive slices of one sorted order


def test_batch_order_is_shuffled(rng):
    lengths = _lengths(rng, 320)
    batches = BucketedBatches(lengths, 8, seed=2, bucket_size=320)  # one sorted bucket
    longest = [int(lengths[b].max()) for b in _epoch(batches)]
    assert longest != sorted(longest) and longest != sorted(longest, reverse=True)


# ---- seeds --------------------------------------------------------------------------------------


def _epochs(batches, count):
    return [[b.tolist() for b in _epoch(batches)] for _ in range(count)]


@pytest.mark.parametrize("max_tokens", [None, 400])
def test_a_seed_repeats_the_run_and_epochs_differ(rng, max_tokens):
    lengths = _lengths(rng, 300)
    run = _epochs(BucketedBatches(lengths, 16, max_tokens=max_tokens, seed=11), 3)
    assert run == _epochs(BucketedBatches(lengths, 16, max_tokens=max_tokens, seed=11), 3)
    assert run[0] != run[1] != run[2]
    assert run != _epochs(BucketedBatches(lengths, 16, max_tokens=max_tokens, seed=12), 3)
    generator_run = _epochs(
        BucketedBatches(lengths, 16, max_tokens=max_tokens, seed=np.random.default_rng(11)), 3
    )
    assert generator_run == run


def test_len_does_not_change_the_run(rng):
    lengths = _lengths(rng, 300)
    plain = BucketedBatches(lengths, max_tokens=500, seed=4)
    asked = BucketedBatches(lengths, max_tokens=500, seed=4)
    for _ in range(3):
        n = len(asked)
        assert len(asked) == n  # asking twice plans once
        epoch = [b.tolist() for b in _epoch(asked)]
        assert len(epoch) == n
        assert epoch == [b.tolist() for b in _epoch(plain)]


def test_yielded_arrays_are_the_callers(rng):
    lengths = _lengths(rng, 20)
    batches = BucketedBatches(lengths, 4, shuffle=False)
    for b in batches:
        b[:] = 0
    assert [b.tolist() for b in batches][0] == [0, 1, 2, 3]
    caller = np.array([5, 5, 5])
    token = BucketedBatches(caller, max_tokens=10, shuffle=False)
    caller[:] = 1  # copied at construction: still batched as 5, 5, 5
    assert [b.tolist() for b in token] == [[0, 1], [2]]
    with pytest.raises(ValueError, match="read-only"):
        token.lengths[0] = 1


# ---- by tokens ----------------------------------------------------------------------------------


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("max_tokens", [1, 50, 333, 10**6])
@pytest.mark.parametrize("batch_size", [None, 1, 7])
def test_token_budget(rng, shuffle, max_tokens, batch_size):
    n = 250
    lengths = _lengths(rng, n, high=120)
    lengths[:3] = 0
    batches = BucketedBatches(lengths, batch_size, max_tokens=max_tokens, shuffle=shuffle, seed=9)
    for _ in range(2):
        count = len(batches)
        epoch = _epoch(batches)
        assert len(epoch) == count
        _assert_each_index_once(epoch, n)
        for b in epoch:
            if len(b) > 1:
                assert len(b) * int(lengths[b].max()) <= max_tokens
            if batch_size is not None:
                assert len(b) <= batch_size
        if not shuffle:  # in order, and each batch as full as the budget and cap allow
            assert np.array_equal(np.concatenate(epoch), np.arange(n))
            for b, nxt in zip(epoch, epoch[1:]):
                grown = np.append(b, nxt[0])
                assert len(grown) * int(lengths[grown].max()) > max_tokens or (
                    batch_size is not None and len(grown) > batch_size
                )


def test_a_sequence_longer_than_the_budget_gets_its_own_batch():
    batches = BucketedBatches([2, 30, 2, 2, 50, 1], None, max_tokens=8, shuffle=False)
    assert [b.tolist() for b in batches] == [[0], [1], [2, 3], [4], [5]]
    batches = BucketedBatches([2, 2, 2, 2, 2, 2], 32, max_tokens=8, shuffle=False)
    assert [b.tolist() for b in batches] == [[0, 1, 2, 3], [4, 5]]
    batches = BucketedBatches([2, 2, 2, 2, 2, 2], 3, max_tokens=8, shuffle=False)
    assert [b.tolist() for b in batches] == [[0, 1, 2], [3, 4, 5]]  # the cap


def test_token_batches_of_similar_lengths_fill_the_budget(rng):
    lengths = _lengths(rng, 3000, high=100) + 1
    epoch = _epoch(BucketedBatches(lengths, None, max_tokens=1000, seed=0))
    assert _padded_tokens(epoch, lengths) < 1.1 * int(lengths.sum())
    assert np.mean([len(b) * lengths[b].max() for b in epoch]) > 800


def test_default_bucket_sizes():
    assert BucketedBatches([1, 2], 8).bucket_size == 400
    assert BucketedBatches([1, 2], 8, max_tokens=100).bucket_size == 400
    assert BucketedBatches([10, 10], None, max_tokens=100).bucket_size == 500
    assert BucketedBatches([0, 0], None, max_tokens=100).bucket_size == 5000


def test_options_are_read_only():
    batches = BucketedBatches([1, 2, 3], 2, seed=0)
    assert (batches.batch_size, batches.max_tokens, batches.shuffle, batches.drop_last) == (
        2,
        None,
        True,
        False,
    )
    with pytest.raises(AttributeError):
        batches.batch_size = 4
    assert "3 items" in repr(batches)


# ---- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, kwargs, error, match",
    [
        (([1.0, 2.0],), {}, TypeError, "lengths: expected an integer array, got dtype float64"),
        (([True],), {}, TypeError, "lengths: expected an integer array, got dtype bool"),
        (([[1, 2]],), {}, ValueError, r"lengths: expected shape \(N,\), got shape \(1, 2\)"),
        (([],), {}, ValueError, "lengths: expected at least one item"),
        ((np.zeros(0, int),), {}, ValueError, "lengths: expected at least one item"),
        (([3, -1],), {}, ValueError, "lengths: expected values >= 0, got -1 at index 1"),
        (([1], 0), {}, ValueError, "batch_size: expected an int >= 1, got 0"),
        (([1], 2.0), {}, TypeError, "batch_size: expected an int"),
        (([1], None), {}, ValueError, "batch_size: .*None is allowed only with max_tokens"),
        (([1],), {"max_tokens": 0}, ValueError, "max_tokens: expected an int >= 1, got 0"),
        (([1],), {"max_tokens": 1.5}, TypeError, "max_tokens: expected an int"),
        (([1],), {"shuffle": 1}, TypeError, r"shuffle: expected a bool, got 1 \(int\)"),
        (([1],), {"drop_last": "yes"}, TypeError, r"drop_last: expected a bool, got 'yes' \(str\)"),
        (
            ([1],),
            {"drop_last": True, "max_tokens": 5},
            ValueError,
            "drop_last: expected False with max_tokens",
        ),
        (([1],), {"seed": -1}, ValueError, "seed: expected an int >= 0, got -1"),
        (([1],), {"seed": 1.5}, TypeError, "seed: expected an int >= 0, a numpy.random.Generator"),
        (([1],), {"seed": True}, TypeError, "seed: expected"),
        (([1],), {"bucket_size": 0}, ValueError, "bucket_size: expected an int >= 1, got 0"),
        (
            ([1], 32),
            {"bucket_size": 100},
            ValueError,
            "bucket_size: expected a multiple of batch_size=32.*got 100; 96 or 128 would do",
        ),
        (([1], 32), {"bucket_size": 10}, ValueError, "got 10; 32 would do"),
    ],
)
def test_bad_input(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        BucketedBatches(*args, **kwargs)


def test_bucket_size_need_not_be_a_multiple_when_batching_by_tokens():
    assert BucketedBatches([1, 2, 3], 32, max_tokens=10, bucket_size=100).bucket_size == 100
