"""rnnfast.data.conllu: the CoNLL-U reader on small texts written here."""

from __future__ import annotations

import doctest
import io

import pytest

from rnnfast.data import conllu
from rnnfast.data.conllu import Sentence, read_conllu


def row(*fields):
    """A CoNLL-U word line from its first fields (ID FORM [LEMMA UPOS XPOS]); '_' elsewhere."""
    fields = [str(f) for f in fields] + ["_"] * (10 - len(fields))
    return "\t".join(fields)


# Two sentences as UD writes them: comments, a multiword token (2-3 "don't"), an empty node
# (4.1), the blank line after each sentence.
TWO = (
    "\n".join(
        [
            "# newdoc id = d1",
            "# sent_id = s1",
            "# text = I don't know",
            row(1, "I", "I", "PRON", "PRP"),
            row("2-3", "don't"),
            row(2, "do", "do", "AUX", "VBP"),
            row(3, "n't", "not", "PART", "RB"),
            row(4, "know", "know", "VERB", "VB"),
            row("4.1", "knows", "know", "VERB", "VBZ"),
            "",
            "# sent_id = s2",
            row(1, "Yes", "yes", "INTJ", "UH"),
            row(2, ".", ".", "PUNCT", "."),
            "",
        ]
    )
    + "\n"
)


def test_two_sentences_fields_and_comments(tmp_path):
    path = tmp_path / "two.conllu"
    path.write_text(TWO, encoding="utf-8")
    first, second = read_conllu(path)
    assert first.forms == ["I", "do", "n't", "know"]  # the range 2-3 and the node 4.1 are skipped
    assert first.upos == ["PRON", "AUX", "PART", "VERB"]
    assert first.xpos == ["PRP", "VBP", "RB", "VB"]
    assert first.lemmas == ["I", "do", "not", "know"]
    assert first.sent_id == "s1" and first.text == "I don't know"
    assert first.metadata["newdoc id"] == "d1"
    assert first.line == 1 and len(first) == 4
    assert second.forms == ["Yes", "."] and second.upos == ["INTJ", "PUNCT"]
    assert second.sent_id == "s2" and second.text is None and second.line == 11


def test_path_str_file_text_and_binary_agree(tmp_path):
    path = tmp_path / "two.conllu"
    path.write_text(TWO, encoding="utf-8")
    expected = read_conllu(path)
    assert read_conllu(str(path)) == expected
    with open(path, encoding="utf-8") as f:
        assert read_conllu(f) == expected
    with open(path, "rb") as f:
        assert read_conllu(f) == expected
    assert read_conllu(io.StringIO(TWO)) == expected


@pytest.mark.parametrize("ending", ["", "\n", "\n\n\n"], ids=["none", "one", "several"])
def test_final_blank_line_optional(ending):
    text = row(1, "a", "a", "DET") + "\n" + row(2, "b", "b", "NOUN") + ending
    [s] = read_conllu(io.StringIO(text))
    assert s.forms == ["a", "b"] and s.upos == ["DET", "NOUN"]


def test_several_blank_lines_and_whitespace_lines_separate_once():
    text = "\n\n" + row(1, "a") + "\n\n \n\t\n" + row(1, "b") + "\n"
    assert [s.forms for s in read_conllu(io.StringIO(text))] == [["a"], ["b"]]


def test_crlf_and_byte_order_mark(tmp_path):
    path = tmp_path / "windows.conllu"
    path.write_bytes(
        (
            "\ufeff# sent_id = w1\r\n"
            + row(1, "über", "über", "ADP")
            + "\r\n\r\n"
            + row(1, "x", "x", "X")
            + "\r\n"
        ).encode("utf-8")
    )
    first, second = read_conllu(path)
    assert first.sent_id == "w1" and first.forms == ["über"] and first.upos == ["ADP"]
    assert second.forms == ["x"]


def test_forms_keep_spaces_and_hashes():
    # fields are split on tabs only; a word "#" is a word, not a comment
    text = row(1, "New York", "New York", "PROPN") + "\n" + row(2, "#", "#", "SYM") + "\n"
    [s] = read_conllu(io.StringIO(text))
    assert s.forms == ["New York", "#"] and s.upos == ["PROPN", "SYM"]


def test_empty_inputs():
    assert read_conllu(io.StringIO("")) == []
    assert read_conllu(io.StringIO("\n\n")) == []
    assert read_conllu(io.StringIO("# a header comment\n\n")) == []


def test_sentence_record():
    s = Sentence(forms=["a"], upos=["DET"], metadata={"sent_id": "x"})
    assert len(s) == 1 and s.sent_id == "x" and s.text is None


def test_doctest_of_the_module():
    failures, tried = doctest.testmod(conllu, raise_on_error=False)
    assert tried > 0 and failures == 0


@pytest.mark.parametrize(
    "bad, line, message",
    [
        ("1\ta\tDET\n", 2, "expected 10 tab-separated fields"),
        ("1 a a DET _ _ _ _ _ _\n", 2, "got 1"),
        (row(1, "a") + "\t_\n", 2, "got 11"),
        (row("x", "a") + "\n", 2, "expected an ID such as 3"),
        (row("1-", "a") + "\n", 2, "expected an ID such as 3"),
        (row("0", "a") + "\n", 2, "expected word ID 2"),
        (row("3", "a") + "\n", 2, "expected word ID 2"),
        (row(2, "") + "\n", 2, "empty field FORM"),
    ],
    ids=[
        "3-fields",
        "spaces",
        "11-fields",
        "bad-id",
        "half-range",
        "id-0",
        "skipped-id",
        "empty-form",
    ],
)
def test_malformed_line_names_file_and_line(tmp_path, bad, line, message):
    path = tmp_path / "bad.conllu"
    path.write_text(row(1, "ok") + "\n" + bad, encoding="utf-8")
    with pytest.raises(ValueError, match=message) as info:
        read_conllu(path)
    assert f"{path}, line {line}" in str(info.value)


def test_missing_blank_line_between_sentences_is_caught():
    text = row(1, "a") + "\n" + row(2, "b") + "\n" + row(1, "c") + "\n"
    with pytest.raises(ValueError, match=r"<file>, line 3: expected word ID 3 .*blank line"):
        read_conllu(io.StringIO(text))


def test_sentence_without_words():
    with pytest.raises(ValueError, match="line 2: the sentence starting at line 1 has multiword"):
        read_conllu(io.StringIO(row("1-2", "don't") + "\n\n"))
    with pytest.raises(ValueError, match="end of file: the sentence starting at line 1"):
        read_conllu(io.StringIO(row("1.1", "x")))


def test_file_name_in_message_of_an_open_file(tmp_path):
    path = tmp_path / "named.conllu"
    path.write_text("1\tbroken\n", encoding="utf-8")
    with open(path, encoding="utf-8") as f, pytest.raises(ValueError, match="named.conllu, line 1"):
        read_conllu(f)


def test_not_a_path_or_file():
    with pytest.raises(TypeError, match="path_or_file: expected a path or an open file, got int"):
        read_conllu(3)
