"""Vocabulary.load and read_conllu on hostile files: each is refused with a ValueError that
names the file (and, for CoNLL-U, the line), never RecursionError or UnicodeDecodeError without
a place (issue 27, untrusted files)."""

from __future__ import annotations

import io
import json

import pytest

from rnnfast.data import Vocabulary, read_conllu
from rnnfast.data import vocabulary as vocabulary_module

DOCUMENT = {
    "format": "rnnfast.Vocabulary",
    "version": 1,
    "pad": "<pad>",
    "unk": None,
    "tokens": ["<pad>", "a"],
    "counts": [0, 3],
}


def _load_vocab(tmp_path, data, match):
    path = tmp_path / "vocab.json"
    path.write_bytes(data)
    with pytest.raises(ValueError, match=match):
        Vocabulary.load(path)


# ---- Vocabulary.load ---------------------------------------------------------------------------


def test_vocab_deeply_nested_json_is_refused_before_parsing(tmp_path):
    # json.load raises RecursionError on this
    data = b'{"format": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    _load_vocab(tmp_path, data, "JSON nested 200001 deep")


def test_vocab_brackets_inside_strings_are_not_nesting(tmp_path):
    path = tmp_path / "vocab.json"
    path.write_text(json.dumps({**DOCUMENT, "tokens": ["<pad>", "[" * 100 + "{" * 100]}))
    assert Vocabulary.load(path).tokens[1] == "[" * 100 + "{" * 100


def test_vocab_enormous_file(tmp_path, monkeypatch):
    monkeypatch.setattr(vocabulary_module, "MAX_FILE_BYTES", 1000)
    doc = {**DOCUMENT, "tokens": ["<pad>", "a" * 2000]}
    _load_vocab(tmp_path, json.dumps(doc).encode(), "more than the 1,000 read")


@pytest.mark.parametrize("constant", [b"NaN", b"Infinity"])
def test_vocab_nan_count(tmp_path, constant):
    data = json.dumps(DOCUMENT).encode().replace(b"[0, 3]", b"[0, " + constant + b"]")
    _load_vocab(tmp_path, data, "no NaN or infinite")


def test_vocab_not_utf8(tmp_path):
    _load_vocab(tmp_path, json.dumps(DOCUMENT).encode()[:-2] + b'"\xff"}', "not UTF-8")


@pytest.mark.parametrize(
    "changes, match",
    [
        ({"version": True}, "format version True"),
        ({"version": 1.0}, "format version 1.0"),
        ({"counts": [0, True]}, r"counts\['a'\]: expected an int"),
        ({"pad": ["<pad>"]}, "pad: expected a str or None"),
        ({"tokens": {"a": 1}}, "tokens: expected a list"),
        ({"tokens": ["<pad>", ["a"]]}, r"tokens\[1\]: expected a str"),
    ],
)
def test_vocab_fields_of_the_wrong_type(tmp_path, changes, match):
    _load_vocab(tmp_path, json.dumps({**DOCUMENT, **changes}).encode(), match)


# ---- read_conllu -------------------------------------------------------------------------------

GOOD = "1\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\t_\n"


def test_conllu_bytes_not_utf8_name_the_line_in_a_path(tmp_path):
    path = tmp_path / "bad.conllu"
    path.write_bytes(GOOD.encode() + b"2\tb\xffad\t_\tX\t_\t_\t1\tdep\t_\t_\n")
    with pytest.raises(ValueError, match=r"bad\.conllu, line 2: not UTF-8"):
        read_conllu(path)


def test_conllu_bytes_not_utf8_name_the_line_in_a_binary_file():
    data = GOOD.encode() + GOOD.encode().replace(b"Hi", b"\xc3(")
    with pytest.raises(ValueError, match=r"line 2: not UTF-8"):
        read_conllu(io.BytesIO(data))


def test_conllu_text_file_whose_decoding_fails_names_the_line():
    raw = io.BytesIO(GOOD.encode() + b"\n" + b"\xff" * 10 + b"\n")
    with pytest.raises(ValueError, match=r"line \d+: not UTF-8"):
        read_conllu(io.TextIOWrapper(raw, encoding="utf-8"))


@pytest.mark.parametrize(
    "line, match",
    [
        ("1\tHi\thi\tINTJ\tUH\t_\t0\troot\t_", "line 3: expected 10 tab-separated fields"),
        ("1\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\t", "line 3: empty field MISC"),
        ("x\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\t_", "line 3: expected an ID such as 3"),
        ("5\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\t_", "line 3: expected word ID 1"),
        ("\u0661\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\t_", "line 3: expected an ID"),
    ],
    ids=["nine-fields", "empty-field", "bad-id", "wrong-id", "arabic-digit"],
)
def test_conllu_malformed_lines_are_named_by_number(tmp_path, line, match):
    path = tmp_path / "x.conllu"
    path.write_text(GOOD + "\n" + line + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=match):
        read_conllu(path)
