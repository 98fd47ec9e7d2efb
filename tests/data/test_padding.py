"""rnnfast.data.pad_sequences / unpad_sequences: PyTorch's pad_sequence and
pad_packed_sequence(total_length=) as oracles where their semantics apply, Keras's documented
pad_sequences rules as hand-written arrays, round trips and bad input."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import rnnfast
from rnnfast.data import pad_sequences, unpad_sequences

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

SETTINGS = settings(
    derandomize=True,
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)

FEATURES = [(), (3,), (2, 3)]


def _sequences(rng, lengths, features, dtype):
    return [(10 * rng.standard_normal((n,) + features)).astype(dtype) for n in lengths]


# ---- PyTorch as the oracle ----------------------------------------------------------------------


@pytest.mark.parametrize("features", FEATURES, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("padding, side", [("post", "right"), ("pre", "left")])
def test_matches_torch_pad_sequence(torch, rng, features, dtype, batch_first, padding, side):
    lengths = [4, 0, 1, 7, 7, 3]
    seqs = _sequences(rng, lengths, features, dtype)
    got, got_lengths = pad_sequences(seqs, batch_first, -3, padding=padding)
    want = torch.nn.utils.rnn.pad_sequence(
        [torch.from_numpy(s) for s in seqs],
        batch_first=batch_first,
        padding_value=-3,
        padding_side=side,
    ).numpy()
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got, want)
    assert got_lengths.dtype == np.int64 and got_lengths.tolist() == lengths


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("total_length", [7, 8, 12])
def test_total_length_matches_torch_pad_packed_sequence(torch, rng, batch_first, total_length):
    lengths = [3, 7, 1, 5]  # torch cannot pack an empty sequence
    seqs = _sequences(rng, lengths, (2,), np.float64)
    packed = torch.nn.utils.rnn.pack_sequence(
        [torch.from_numpy(s) for s in seqs], enforce_sorted=False
    )
    want, want_lengths = torch.nn.utils.rnn.pad_packed_sequence(
        packed, batch_first=batch_first, padding_value=0.5, total_length=total_length
    )
    got, got_lengths = pad_sequences(seqs, batch_first, 0.5, total_length=total_length)
    assert got.shape == tuple(want.shape)
    assert np.array_equal(got, want.numpy())
    assert got_lengths.tolist() == want_lengths.tolist()


def test_total_length_shorter_than_the_longest_is_an_error_as_in_torch(torch, rng):
    seqs = _sequences(rng, [3, 7], (), np.float64)
    packed = torch.nn.utils.rnn.pack_sequence(
        [torch.from_numpy(s) for s in seqs], enforce_sorted=False
    )
    with pytest.raises(ValueError):
        torch.nn.utils.rnn.pad_packed_sequence(packed, total_length=6)
    with pytest.raises(ValueError, match=r"total_length: expected at least .* 7, got 6"):
        pad_sequences(seqs, total_length=6)


# ---- Keras's documented rules (its pad_sequences is batch-first and pads / truncates "pre") ------

KERAS = dict(batch_first=True, padding="pre", truncating="pre")
DOC_SEQUENCES = [[1], [2, 3], [4, 5, 6]]  # the example of keras.utils.pad_sequences's docs


@pytest.mark.parametrize(
    "kwargs, expected, expected_lengths",
    [
        ({}, [[0, 0, 1], [0, 2, 3], [4, 5, 6]], [1, 2, 3]),
        ({"padding_value": -1}, [[-1, -1, 1], [-1, 2, 3], [4, 5, 6]], [1, 2, 3]),
        ({"padding": "post"}, [[1, 0, 0], [2, 3, 0], [4, 5, 6]], [1, 2, 3]),
        ({"maxlen": 2}, [[0, 1], [2, 3], [5, 6]], [1, 2, 2]),
        ({"maxlen": 2, "truncating": "post"}, [[0, 1], [2, 3], [4, 5]], [1, 2, 2]),
        (
            {"maxlen": 2, "padding": "post", "truncating": "post"},
            [[1, 0], [2, 3], [4, 5]],
            [1, 2, 2],
        ),
        ({"maxlen": 2, "padding": "post"}, [[1, 0], [2, 3], [5, 6]], [1, 2, 2]),
        # maxlen is the number of steps, even above every length
        ({"maxlen": 5}, [[0, 0, 0, 0, 1], [0, 0, 0, 2, 3], [0, 0, 4, 5, 6]], [1, 2, 3]),
        ({"maxlen": 1}, [[1], [3], [6]], [1, 1, 1]),
        ({"maxlen": 1, "truncating": "post"}, [[1], [2], [4]], [1, 1, 1]),
    ],
)
def test_keras_documented_examples(kwargs, expected, expected_lengths):
    got, lengths = pad_sequences(DOC_SEQUENCES, **{**KERAS, **kwargs})
    assert got.tolist() == expected
    assert lengths.tolist() == expected_lengths
    assert got.dtype == np.int64  # the common type of the lists (Keras's own default is int32)


def test_keras_rules_on_feature_sequences():
    seqs = [np.array([[1, 1], [2, 2], [3, 3]]), np.array([[4, 4]]), np.zeros((0, 2), int)]
    got, lengths = pad_sequences(seqs, padding_value=9, maxlen=2, **KERAS)
    assert got.tolist() == [[[2, 2], [3, 3]], [[9, 9], [4, 4]], [[9, 9], [9, 9]]]
    assert lengths.tolist() == [2, 1, 0]


def test_rnnfast_defaults_are_time_major_post_padding_without_truncation():
    got, lengths = pad_sequences(DOC_SEQUENCES)
    assert got.tolist() == [[1, 2, 4], [0, 3, 5], [0, 0, 6]]  # (T, B)
    assert lengths.tolist() == [1, 2, 3]


@pytest.mark.parametrize("padding", ["post", "pre"])
def test_maxlen_and_total_length_together(padding):
    # maxlen truncates; total_length decides T, which must hold the kept sequences
    seqs = [[1, 2, 3, 4], [5]]
    got, lengths = pad_sequences(seqs, True, maxlen=2, total_length=3, padding=padding)
    rows = [[1, 2, 0], [5, 0, 0]] if padding == "post" else [[0, 1, 2], [0, 0, 5]]
    assert got.tolist() == rows and lengths.tolist() == [2, 1]
    got, _ = pad_sequences(seqs, True, maxlen=3, total_length=3, truncating="pre")
    assert got.tolist() == [[2, 3, 4], [5, 0, 0]]
    got, _ = pad_sequences(seqs, True, maxlen=2, total_length=2)  # below maxlen is allowed
    assert got.shape == (2, 2)
    with pytest.raises(ValueError, match=r"total_length: .*3 \(after truncation to maxlen\)"):
        pad_sequences(seqs, maxlen=3, total_length=2)


def test_pre_padding_keeps_each_sequences_length_and_is_undone_by_unpad_pre():
    got, lengths = pad_sequences([[1, 2], [3], []], padding="pre")
    assert got.tolist() == [[1, 0, 0], [2, 3, 0]]  # (T, B): each sequence ends at the last step
    assert lengths.tolist() == [2, 1, 0]
    back = unpad_sequences(got, lengths, padding="pre")
    assert [b.tolist() for b in back] == [[1, 2], [3], []]
    # read as post padding, a shorter sequence gives its padding: the sides are not interchangeable
    assert [b.tolist() for b in unpad_sequences(got, lengths)] == [[1, 2], [0], []]


# ---- round trips over every option --------------------------------------------------------------


def _naive_pad(seqs, batch_first, value, padding, truncating, maxlen, total_length):
    """The documented rules, one step at a time."""
    kept = []
    for s in seqs:
        s = list(s)
        if maxlen is not None and len(s) > maxlen:
            s = s[len(s) - maxlen :] if truncating == "pre" else s[:maxlen]
        kept.append(s)
    steps = (
        total_length
        if total_length is not None
        else (maxlen if maxlen is not None else max(len(s) for s in kept))
    )
    rows = []
    for s in kept:
        pad = [value] * (steps - len(s))
        rows.append(pad + s if padding == "pre" else s + pad)
    out = np.array(rows, dtype=np.float64).reshape(len(seqs), steps)
    return (out if batch_first else out.T), [len(s) for s in kept]


@st.composite
def padding_cases(draw):
    lengths = draw(st.lists(st.integers(0, 6), min_size=1, max_size=5))
    maxlen = draw(st.one_of(st.none(), st.integers(1, 7)))
    longest = max(min(n, maxlen) if maxlen else n for n in lengths)
    total = draw(st.one_of(st.none(), st.integers(longest, longest + 3)))
    return dict(
        lengths=lengths,
        batch_first=draw(st.booleans()),
        padding=draw(st.sampled_from(["post", "pre"])),
        truncating=draw(st.sampled_from(["post", "pre"])),
        maxlen=maxlen,
        total_length=total,
    )


@SETTINGS
@given(case=padding_cases(), seed=st.integers(0, 2**16))
def test_pad_follows_the_rules_and_unpad_inverts_it(case, seed):
    rng = np.random.default_rng(seed)
    seqs = [rng.standard_normal(n) for n in case["lengths"]]
    opts = {k: case[k] for k in ("padding", "truncating", "maxlen", "total_length")}
    got, lengths = pad_sequences(seqs, case["batch_first"], -7.5, **opts)
    want, want_lengths = _naive_pad(seqs, case["batch_first"], -7.5, **opts)
    assert np.array_equal(got, want)
    assert lengths.tolist() == want_lengths
    back = unpad_sequences(got, lengths, case["batch_first"], padding=case["padding"])
    for b, s, n in zip(back, seqs, lengths):
        kept = s[len(s) - n :] if case["truncating"] == "pre" else s[:n]
        assert np.array_equal(b, kept)


@pytest.mark.parametrize("features", FEATURES, ids=str)
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("padding", ["post", "pre"])
def test_unpad_inverts_pad(rng, features, batch_first, padding):
    seqs = _sequences(rng, [5, 0, 2, 1], features, np.float32)
    padded, lengths = pad_sequences(seqs, batch_first, padding=padding, total_length=6)
    back = unpad_sequences(padded, lengths, batch_first, padding=padding)
    assert len(back) == len(seqs)
    for b, s in zip(back, seqs):
        assert b.dtype == s.dtype and np.array_equal(b, s)
        assert not np.shares_memory(b, padded)  # copies


# ---- dtypes, layouts, no aliasing ---------------------------------------------------------------


def test_dtype_rules():
    assert pad_sequences([[1, 2], [3]])[0].dtype == np.int64
    assert pad_sequences([[1, 2], []])[0].dtype == np.int64  # [] (float64) says nothing
    assert pad_sequences([[], []])[0].dtype == np.float64
    assert pad_sequences([np.ones(2, np.float32), np.ones(1)])[0].dtype == np.float64
    got, _ = pad_sequences([[1, 2], [3]], dtype=np.float32, padding_value=0.25)
    assert got.dtype == np.float32 and got.tolist() == [[1, 3], [2, 0.25]]
    got, _ = pad_sequences([[True], [False, True]])
    assert got.dtype == bool and got.tolist() == [[True, False], [False, True]]
    got, _ = pad_sequences([np.ones(1, np.uint8)], padding_value=255, total_length=2)
    assert got.dtype == np.uint8 and got.tolist() == [[1], [255]]
    got, _ = pad_sequences([[1.0]], padding_value=np.nan, total_length=2)
    assert np.isnan(got[1, 0])
    got, _ = pad_sequences([[1.0]], dtype=np.float32, padding_value=0.1, total_length=2)
    assert got[1, 0] == np.float32(0.1)  # float padding rounds, as any float does


def test_an_empty_list_is_an_empty_sequence_of_any_feature_shape():
    got, lengths = pad_sequences([np.ones((2, 3), np.float32), [], np.ones((1, 3), np.float32)])
    assert got.shape == (2, 3, 3) and got.dtype == np.float32
    assert lengths.tolist() == [2, 0, 1] and not got[:, 1].any()


@pytest.mark.parametrize("layout", ["readonly", "fortran", "strided", "byteswapped"])
def test_any_layout_and_the_inputs_are_left_alone(rng, layout):
    seqs = _sequences(rng, [4, 2], (3,), np.float64)
    expected, _ = pad_sequences([s.copy() for s in seqs], True)
    if layout == "readonly":
        for s in seqs:
            s.flags.writeable = False
    elif layout == "fortran":
        seqs = [np.asfortranarray(s) for s in seqs]
    elif layout == "strided":
        seqs = [np.repeat(s, 2, axis=0)[::2] for s in seqs]
    else:
        seqs = [s.astype(s.dtype.newbyteorder()) for s in seqs]
    before = [s.copy() for s in seqs]
    got, _ = pad_sequences(seqs, True)
    assert np.array_equal(got, expected) and got.flags.c_contiguous
    for s, b in zip(seqs, before):
        assert np.array_equal(s, b) and not np.shares_memory(got, s)


def test_single_full_length_sequence_is_a_copy():
    s = np.arange(3.0)
    got, lengths = pad_sequences([s])
    assert got.shape == (3, 1) and lengths.tolist() == [3]
    got[0, 0] = 99
    assert s[0] == 0


def test_top_level_names_are_the_data_functions():
    for name in (
        "pad_sequences",
        "unpad_sequences",
        "mask_to_lengths",
        "lengths_to_mask",
        "reverse_sequences",
    ):
        assert getattr(rnnfast, name) is getattr(rnnfast.data, name)
        assert name in rnnfast.__all__ and name in rnnfast.data.__all__
    assert "data" in rnnfast.__all__ and "sequences" not in rnnfast.__all__
    for name in rnnfast.data.__all__:
        assert getattr(rnnfast.data, name) is not None
    with pytest.raises(ImportError):
        importlib.import_module("rnnfast.sequences")  # moved into rnnfast.data


# ---- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, kwargs, error, match",
    [
        ((5,), {}, TypeError, "sequences: expected a list"),
        (("abc",), {}, TypeError, "sequences: expected a list.*str"),
        (([],), {}, ValueError, "sequences: expected at least one"),
        (([[1], 2],), {}, ValueError, r"sequences\[1\]: expected shape \(T_i, ...\)"),
        (([[1], [[1, 2], [3]]],), {}, ValueError, r"sequences\[1\]: expected an array"),
        (
            ([np.zeros((2, 3)), np.zeros((2, 4))],),
            {},
            ValueError,
            r"sequences\[1\]: expected feature shape \(3,\) like sequences\[0\]",
        ),
        (([["a", "b"]],), {}, TypeError, r"sequences\[0\]: expected numbers.*Vocabulary"),
        (([[1]],), {"batch_first": 1}, TypeError, r"batch_first: expected a bool, got 1 \(int\)"),
        (([[1]],), {"padding": "left"}, ValueError, "padding: expected 'post' or 'pre', got"),
        (([[1]],), {"truncating": None}, ValueError, "truncating: expected 'post' or 'pre'"),
        (([[1]],), {"maxlen": 0}, ValueError, "maxlen: expected an int >= 1, got 0"),
        (([[1]],), {"maxlen": 2.0}, TypeError, "maxlen: expected an int"),
        (([[1]],), {"maxlen": True}, TypeError, "maxlen: expected an int"),
        (([[1]],), {"total_length": -1}, ValueError, "total_length: expected an int >= 0"),
        (([[1]],), {"total_length": "5"}, TypeError, "total_length: expected an int"),
        (([[1]],), {"padding_value": 0.5}, ValueError, "padding_value: .*int64.*0.5"),
        (([[1]],), {"padding_value": np.nan}, ValueError, "padding_value: .*int64"),
        (([[1]],), {"padding_value": 2**70}, ValueError, "padding_value: .*int64"),
        (([np.ones(1, np.uint8)],), {"padding_value": -1}, ValueError, "padding_value: .*uint8"),
        (
            ([np.ones(1, np.float32)],),
            {"padding_value": 1e300},
            ValueError,
            "padding_value: .*float32",
        ),
        (([[1.0]],), {"padding_value": "0"}, TypeError, "padding_value: expected a real number"),
        (([[1.0]],), {"padding_value": 1j}, TypeError, "padding_value: expected a real number"),
        (([[1.0]],), {"padding_value": None}, TypeError, "padding_value"),
        (([[1.0]],), {"dtype": "no-such-type"}, TypeError, "dtype: expected a NumPy numeric"),
        (([[1.0]],), {"dtype": str}, TypeError, "dtype: expected a numeric dtype"),
    ],
)
def test_pad_bad_input(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        pad_sequences(*args, **kwargs)


def test_complex_padding_value_is_fine_for_complex_data():
    got, _ = pad_sequences([np.ones(1, np.complex128)], padding_value=1j, total_length=2)
    assert got[1, 0] == 1j


@pytest.mark.parametrize(
    "args, kwargs, error, match",
    [
        ((np.zeros(3), [1]), {}, ValueError, r"padded: expected shape \(T, B, ...\)"),
        (
            (np.zeros(3), [1]),
            {"batch_first": True},
            ValueError,
            r"padded: expected shape \(B, T, ...\)",
        ),
        ((np.zeros((3, 2)), [1, 4]), {}, ValueError, r"lengths: expected values in \[0, T\]"),
        ((np.zeros((3, 2)), [1]), {}, ValueError, r"lengths: expected shape \(B,\) = \(2,\)"),
        ((np.zeros((3, 2)), [1.0, 2.0]), {}, TypeError, "lengths: expected an integer"),
        ((np.zeros((3, 2)), [1, 2]), {"batch_first": "no"}, TypeError, "batch_first"),
        ((np.zeros((3, 2)), [1, 2]), {"padding": "both"}, ValueError, "padding: expected"),
    ],
)
def test_unpad_bad_input(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        unpad_sequences(*args, **kwargs)
