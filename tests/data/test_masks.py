"""rnnfast.data masks, lengths and reversal, against padding each sequence by hand."""

from __future__ import annotations

import numpy as np
import pytest

from rnnfast.data import lengths_to_mask, mask_to_lengths, pad_sequences, reverse_sequences


@pytest.mark.parametrize("lengths", [[5, 0, 2, 1, 5], [1], [0, 0]])
def test_reverse_sequences_is_padding_the_reversed_sequences(rng, lengths):
    seqs = [rng.standard_normal((n, 3)) for n in lengths]
    x, got_lengths = pad_sequences(seqs, padding_value=-1.0, total_length=6)
    want, _ = pad_sequences([s[::-1] for s in seqs], padding_value=-1.0, total_length=6)
    before = x.copy()
    assert np.array_equal(reverse_sequences(x, got_lengths), want)
    assert np.array_equal(x, before)  # the input is left alone
    assert np.array_equal(reverse_sequences(x), x[::-1])


def test_mask_and_lengths_of_a_padded_batch(rng):
    seqs = [rng.standard_normal(n) for n in (3, 0, 4)]
    x, lengths = pad_sequences(seqs, batch_first=True, padding_value=np.nan)
    mask = lengths_to_mask(lengths, x.shape[1])
    assert np.array_equal(mask, ~np.isnan(x))
    assert np.array_equal(mask_to_lengths(mask), lengths)
    assert np.array_equal(mask_to_lengths(mask.astype(np.uint8)), lengths)


def test_the_mask_of_a_pre_padded_batch_is_refused():
    x, _ = pad_sequences([[1.0, 2.0], [3.0]], batch_first=True, padding="pre", padding_value=np.nan)
    with pytest.raises(ValueError, match=r"mask: expected a prefix mask.*row 1 is \[0, 1\]"):
        mask_to_lengths(~np.isnan(x))


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: reverse_sequences(np.zeros(3), [1]), ValueError, r"x: expected shape \(T, B"),
        (lambda: reverse_sequences(np.zeros((3, 2)), [1, 4]), ValueError, "lengths"),
        (lambda: reverse_sequences(np.zeros((3, 2)), [1.0, 2.0]), TypeError, "lengths"),
        (lambda: lengths_to_mask([1, 2], -1), ValueError, "steps"),
        (lambda: lengths_to_mask([[1, 2]], 3), ValueError, r"lengths: expected shape \(B,\)"),
        (lambda: mask_to_lengths(np.ones(3, bool)), ValueError, r"mask: expected shape \(B, T\)"),
        (
            lambda: mask_to_lengths([[0, 2]]),
            ValueError,
            r"mask: expected values 0 or 1 \(or bools\), got 2 \(int64\)",
        ),
    ],
)
def test_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call()
