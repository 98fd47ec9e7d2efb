"""rnnfast.data.Vocabulary: id order, lookups, the JSON file and bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rnnfast.data import Vocabulary, pad_sequences

TEXTS = [
    "the cat sat on the mat".split(),
    "a dog sat on a log".split(),
    "the dog ate the cat".split(),
]
# counts: the 4, cat 2, sat 2, on 2, a 2, dog 2, mat 1, log 1, ate 1  (first appearance in order)


def test_build_orders_by_count_then_first_appearance():
    vocab = Vocabulary.build(TEXTS)
    assert vocab.tokens == [
        "<pad>",
        "<unk>",
        "the",
        "cat",
        "sat",
        "on",
        "a",
        "dog",
        "mat",
        "log",
        "ate",
    ]
    assert vocab.pad_id == 0 and vocab.unk_id == 1
    assert vocab.pad == "<pad>" and vocab.unk == "<unk>"
    assert vocab.counts == {
        "<pad>": 0,
        "<unk>": 0,
        "the": 4,
        "cat": 2,
        "sat": 2,
        "on": 2,
        "a": 2,
        "dog": 2,
        "mat": 1,
        "log": 1,
        "ate": 1,
    }
    assert len(vocab) == 11 and list(vocab) == vocab.tokens


def test_build_is_deterministic_and_order_of_data_decides_ties():
    assert Vocabulary.build(TEXTS) == Vocabulary.build([list(t) for t in TEXTS])
    flipped = Vocabulary.build(TEXTS[::-1])  # first appearance: the dog ate cat a sat on log mat
    assert flipped.tokens[2:] == ["the", "dog", "cat", "a", "sat", "on", "ate", "log", "mat"]


def test_min_count_and_max_size():
    vocab = Vocabulary.build(TEXTS, min_count=2)
    assert vocab.tokens == ["<pad>", "<unk>", "the", "cat", "sat", "on", "a", "dog"]
    vocab = Vocabulary.build(TEXTS, max_size=4)  # specials included
    assert vocab.tokens == ["<pad>", "<unk>", "the", "cat"]
    assert vocab.encode(["dog", "the"]).tolist() == [1, 2]
    assert Vocabulary.build(TEXTS, max_size=2).tokens == ["<pad>", "<unk>"]
    assert Vocabulary.build(TEXTS, min_count=6).tokens == ["<pad>", "<unk>"]


@pytest.mark.parametrize(
    "pad, unk, head",
    [
        ("<pad>", None, ["<pad>", "the"]),
        (None, "<unk>", ["<unk>", "the"]),
        (None, None, ["the", "cat"]),
        ("PAD", "UNK", ["PAD", "UNK", "the"]),
    ],
)
def test_specials_can_be_left_out_and_ids_shift(pad, unk, head):
    vocab = Vocabulary.build(TEXTS, pad=pad, unk=unk)
    assert vocab.tokens[: len(head)] == head
    assert vocab.pad_id == (None if pad is None else 0)
    assert vocab.unk_id == (None if unk is None else int(pad is not None))
    assert len(vocab) == 9 + (pad is not None) + (unk is not None)


def test_a_special_token_in_the_data_is_counted_not_repeated():
    vocab = Vocabulary.build([["<unk>", "x", "<unk>", "<pad>"]])
    assert vocab.tokens == ["<pad>", "<unk>", "x"]
    assert vocab.counts == {"<pad>": 1, "<unk>": 2, "x": 1}


def test_character_vocabulary_from_strings():
    vocab = Vocabulary.build(["abca", "cb"], pad=None)
    assert vocab.tokens == ["<unk>", "a", "b", "c"]
    assert vocab.encode("cab!").tolist() == [3, 1, 2, 0]


def test_encode_decode_and_lookups():
    vocab = Vocabulary.build(TEXTS)
    ids = vocab.encode(["the", "zebra", "cat"])
    assert ids.dtype == np.int64 and ids.shape == (3,) and ids.tolist() == [2, 1, 3]
    assert vocab.encode([]).dtype == np.int64 and vocab.encode([]).shape == (0,)
    assert vocab.decode(ids) == ["the", "<unk>", "cat"]
    assert vocab.decode(ids.tolist()) == ["the", "<unk>", "cat"]
    assert vocab.decode(np.array([0, 10], np.uint8)) == ["<pad>", "ate"]
    assert vocab.decode([]) == []
    for i, token in enumerate(vocab.tokens):
        assert vocab[token] == i and token in vocab
        assert vocab.decode([i]) == [token]
    assert vocab["zebra"] == vocab.unk_id and "zebra" not in vocab
    assert 3 not in vocab and None not in vocab


def test_encode_batch_feeds_pad_sequences():
    vocab = Vocabulary.build(TEXTS)
    ids = vocab.encode_batch([["the", "cat"], [], ["dog"]])
    assert [i.tolist() for i in ids] == [[2, 3], [], [7]]
    assert all(i.dtype == np.int64 for i in ids)
    padded, lengths = pad_sequences(ids, batch_first=True, padding_value=vocab.pad_id)
    assert padded.dtype == np.int64
    assert padded.tolist() == [[2, 3], [0, 0], [7, 0]] and lengths.tolist() == [2, 0, 1]


def test_unknown_token_without_unk_is_a_value_error_naming_it():
    vocab = Vocabulary.build(TEXTS, unk=None)
    with pytest.raises(ValueError, match=r"tokens\[1\]: 'zebra' is not in the vocabulary") as e:
        vocab.encode(["the", "zebra"])
    assert not isinstance(e.value, KeyError) and e.value.__context__ is None
    with pytest.raises(ValueError, match=r"sequences\[1\]\[0\]: 'zebra'"):
        vocab.encode_batch([["the"], ["zebra"]])
    with pytest.raises(ValueError, match="token: 'zebra'"):
        vocab["zebra"]


def test_attributes_are_copies():
    vocab = Vocabulary.build(TEXTS)
    vocab.tokens.append("x")
    vocab.counts["the"] = 0
    assert len(vocab) == 11 and vocab.counts["the"] == 4 and "x" not in vocab
    with pytest.raises(AttributeError):
        vocab.pad_id = 3


def test_constructor_from_a_token_list():
    vocab = Vocabulary(["_", "?", "a", "b"], pad="_", unk="?")
    assert vocab.pad_id == 0 and vocab.unk_id == 1 and vocab.counts is None
    assert vocab.encode(["b", "z"]).tolist() == [3, 1]
    again = Vocabulary(vocab.tokens, pad=vocab.pad, unk=vocab.unk, counts=dict.fromkeys("_?ab", 1))
    assert again.counts == {"_": 1, "?": 1, "a": 1, "b": 1} and again != vocab
    assert Vocabulary([]).tokens == [] and len(Vocabulary([])) == 0


# ---- the file -----------------------------------------------------------------------------------

ODD_TOKENS = ["", " ", "\n", "é", "日本", "\ud800", '"', "\\", "null", "<pad>x", "\x00", "🙂"]


@pytest.mark.parametrize("pad, unk", [("<pad>", "<unk>"), (None, None), (None, "<unk>")])
def test_save_load_round_trip_is_exact(tmp_path, pad, unk):
    vocab = Vocabulary.build(TEXTS + [ODD_TOKENS], pad=pad, unk=unk)
    path = tmp_path / "vocab.json"
    vocab.save(path)
    back = Vocabulary.load(path)
    assert back == vocab
    assert back.tokens == vocab.tokens and back.counts == vocab.counts
    assert back.pad_id == vocab.pad_id and back.unk_id == vocab.unk_id
    document = json.loads(path.read_text(encoding="ascii"))  # plain ASCII JSON
    assert document["format"] == "rnnfast.Vocabulary" and document["version"] == 1
    Vocabulary.load(str(path))  # a str path too


def test_save_load_without_counts(tmp_path):
    vocab = Vocabulary(["a", "b"], unk="b")
    vocab.save(tmp_path / "v.json")
    back = Vocabulary.load(tmp_path / "v.json")
    assert back == vocab and back.counts is None


def _document(**changes):
    doc = {
        "format": "rnnfast.Vocabulary",
        "version": 1,
        "pad": "<pad>",
        "unk": None,
        "tokens": ["<pad>", "a"],
        "counts": [0, 3],
    }
    doc.update(changes)
    return doc


@pytest.mark.parametrize(
    "content, match",
    [
        ("not json", "is not a JSON file"),
        (json.dumps([1, 2]), "is not an rnnfast vocabulary file"),
        (json.dumps(_document(format="other")), "is not an rnnfast vocabulary file"),
        (json.dumps(_document(version=2)), "format version 2, this rnnfast reads version 1"),
        (json.dumps(_document(tokens="ab")), "invalid vocabulary: tokens: expected a list"),
        (json.dumps(_document(tokens=["<pad>", "<pad>"])), r"tokens\[1\]: '<pad>' repeats"),
        (json.dumps(_document(tokens=["<pad>", 5])), r"tokens\[1\]: expected a str"),
        (json.dumps(_document(pad="x")), "pad: expected one of the tokens"),
        (json.dumps(_document(counts=[1])), "counts: expected a list as long as tokens"),
        (json.dumps(_document(counts=[1, -1])), r"counts\['a'\]: expected an int >= 0"),
        (json.dumps(_document(counts=[1, 2.5])), r"counts\['a'\]: expected an int"),
    ],
)
def test_load_bad_files(tmp_path, content, match):
    path = tmp_path / "v.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=match):
        Vocabulary.load(path)


def test_load_reads_utf8_written_by_hand(tmp_path):
    path = tmp_path / "v.json"
    path.write_text(
        json.dumps(_document(tokens=["<pad>", "é"]), ensure_ascii=False), encoding="utf-8"
    )
    assert Vocabulary.load(path).tokens == ["<pad>", "é"]


# ---- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"sequences_of_tokens": "the cat"}, TypeError, "sequences_of_tokens: .*got a str"),
        ({"sequences_of_tokens": 5}, TypeError, "sequences_of_tokens: expected an iterable"),
        ({"sequences_of_tokens": [["a"], 5]}, TypeError, r"sequences_of_tokens\[1\]: expected"),
        ({"sequences_of_tokens": [["a", 1]]}, TypeError, r"sequences_of_tokens\[0\]\[1\]: .*str"),
        ({"min_count": 0}, ValueError, "min_count: expected an int >= 1, got 0"),
        ({"min_count": 1.5}, TypeError, "min_count: expected an int"),
        ({"max_size": 1}, ValueError, "max_size: expected an int >= 2, got 1"),
        ({"max_size": "3"}, TypeError, "max_size: expected an int"),
        ({"pad": 0}, TypeError, "pad: expected a str or None"),
        ({"unk": b"?"}, TypeError, "unk: expected a str or None"),
        ({"pad": "x", "unk": "x"}, ValueError, "pad, unk: expected two different tokens"),
    ],
)
def test_build_bad_input(kwargs, error, match):
    kwargs = {"sequences_of_tokens": TEXTS, **kwargs}
    with pytest.raises(error, match=match):
        Vocabulary.build(**kwargs)


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda v: v.encode(["the", 3]), TypeError, r"tokens\[1\]: expected a str, got 3 \(int\)"),
        (lambda v: v.encode(5), TypeError, "tokens: expected a sequence of str"),
        (lambda v: v.encode_batch("the cat"), TypeError, "sequences: expected a list"),
        (lambda v: v.encode_batch([["a"], [None]]), TypeError, r"sequences\[1\]\[0\]"),
        (
            lambda v: v.decode([0, 11]),
            ValueError,
            r"ids: expected values in \[0, 11\), got 11 at "
            r"position 1",
        ),
        (lambda v: v.decode([-1]), ValueError, r"ids: expected values in \[0, 11\), got -1"),
        (lambda v: v.decode([1.0]), TypeError, "ids: expected integers, got dtype float64"),
        (lambda v: v.decode([[1, 2]]), ValueError, r"ids: expected shape \(n,\), got shape"),
        (lambda v: v.decode(3), ValueError, r"ids: expected shape \(n,\), got shape \(\)"),
        (lambda v: v[3], TypeError, r"token: expected a str, got 3 \(int\)"),
        (lambda v: v.save(3), TypeError, "path: expected a str or os.PathLike"),
        (lambda v: Vocabulary.load(None), TypeError, "path: expected a str or os.PathLike"),
    ],
)
def test_lookup_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call(Vocabulary.build(TEXTS))


@pytest.mark.parametrize(
    "args, kwargs, error, match",
    [
        (("ab",), {}, TypeError, r"tokens: expected a list of str, got 'ab' \(str\)"),
        ((["a", 1],), {}, TypeError, r"tokens\[1\]: expected a str"),
        ((["a", "b", "a"],), {}, ValueError, r"tokens\[2\]: 'a' repeats tokens\[0\]"),
        ((["a"],), {"unk": "?"}, ValueError, "unk: expected one of the tokens, got '\\?'"),
        ((["a"],), {"pad": "a", "unk": "a"}, ValueError, "pad, unk"),
        ((["a"],), {"counts": [1]}, TypeError, "counts: expected a mapping"),
        ((["a"],), {"counts": {"b": 1}}, ValueError, r"counts: .*missing \['a'\], not tokens"),
        ((["a"],), {"counts": {"a": True}}, TypeError, r"counts\['a'\]: expected an int"),
    ],
)
def test_constructor_bad_input(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        Vocabulary(*args, **kwargs)
