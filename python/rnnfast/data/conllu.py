"""A reader of CoNLL-U files, the format of the Universal Dependencies treebanks.

A CoNLL-U file holds sentences separated by blank lines; each word is one line of ten tab-
separated fields (ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC), comment lines start
with ``#``. :func:`read_conllu` keeps what a tagger needs: each sentence's word forms, lemmas,
universal (UPOS) and language-specific (XPOS) part-of-speech tags, and its comments. The
surface tokens of multiword ranges (``1-2  don't``) and the empty nodes of enhanced graphs
(``1.1``) are skipped, so the forms are the syntactic words, the units the tags belong to.

    >>> import io
    >>> text = "# text = Hi there\\n1\\tHi\\thi\\tINTJ\\tUH\\t_\\t0\\troot\\t_\\t_\\n" \\
    ...        "2\\tthere\\tthere\\tADV\\tRB\\t_\\t1\\tadvmod\\t_\\t_\\n"
    >>> [s] = read_conllu(io.StringIO(text))
    >>> s.forms, s.upos
    (['Hi', 'there'], ['INTJ', 'ADV'])
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

__all__ = ["Sentence", "read_conllu"]

# what errors="surrogateescape" turns bytes that are not UTF-8 into
_ESCAPED = re.compile("[\udc80-\udcff]")

FIELDS = ("id", "form", "lemma", "upos", "xpos", "feats", "head", "deprel", "deps", "misc")


@dataclass
class Sentence:
    """One sentence of a CoNLL-U file: its syntactic words, in order.

    Attributes
    ----------
    forms, lemmas, upos, xpos : list of str
        One entry per word (``"_"`` where the file leaves a field unspecified).
    metadata : dict of str to str
        The ``# key = value`` comments before the sentence (``sent_id``, ``text``, ...); a
        comment without `` = `` is kept with the value ``""``.
    line : int
        The line number (1-based) where the sentence starts, comments included.
    """

    forms: list[str] = field(default_factory=list)
    lemmas: list[str] = field(default_factory=list)
    upos: list[str] = field(default_factory=list)
    xpos: list[str] = field(default_factory=list)
    metadata: dict[str, str] = field(default_factory=dict)
    line: int = 0

    @property
    def sent_id(self) -> str | None:
        return self.metadata.get("sent_id")

    @property
    def text(self) -> str | None:
        return self.metadata.get("text")

    def __len__(self) -> int:
        return len(self.forms)


def read_conllu(path_or_file) -> list[Sentence]:
    """The sentences of a CoNLL-U file.

    Parameters
    ----------
    path_or_file : str, os.PathLike, or an open file
        A path is read as UTF-8 (a byte-order mark is skipped); an open file may be text or
        binary (binary is decoded as UTF-8).

    Returns
    -------
    list of Sentence
        In file order. Blank lines end sentences (several in a row count as one; a missing
        final blank line is fine); a file with no words gives ``[]``.

    Raises
    ------
    TypeError
        ``path_or_file`` neither a path nor a file.
    ValueError
        A malformed line, with the file and line number: not UTF-8, not ten tab-separated
        fields, an empty field, an ID that is not a word number, a range ``a-b`` or an empty node
        ``a.b``, word IDs that do not run 1, 2, 3, ... within the sentence, or a sentence of
        multiword tokens or empty nodes only.
    """
    if isinstance(path_or_file, (str, os.PathLike)):
        name = os.fspath(path_or_file)
        # bytes that are not UTF-8 come through as lone surrogates, refused with their line
        with open(path_or_file, encoding="utf-8-sig", errors="surrogateescape", newline="") as f:
            return _parse(f, name, escaped=True)
    if not hasattr(path_or_file, "read"):
        raise TypeError(
            f"path_or_file: expected a path or an open file, got {type(path_or_file).__name__}"
        )
    return _parse(path_or_file, str(getattr(path_or_file, "name", "<file>")))


def _lines(lines, name):
    """``(number, line)`` of an open file's lines, decoded: a line that is not UTF-8 is a
    ValueError naming it (a text file's own decoding error included)."""
    number = 0
    iterator = iter(lines)
    while True:
        number += 1
        try:
            line = next(iterator)
            if isinstance(line, bytes):
                line = line.decode("utf-8")
        except StopIteration:
            return
        except UnicodeDecodeError as exc:
            raise ValueError(f"{name}, line {number}: not UTF-8 text ({exc.reason})") from None
        yield number, line


def _parse(lines, name, escaped=False):
    sentences = []
    current = None
    other_lines = 0  # multiword-token and empty-node lines of the current sentence
    for number, line in _lines(lines, name):
        if number == 1:
            line = line.lstrip("\ufeff")
        line = line.rstrip("\r\n")
        where = f"{name}, line {number}"
        if escaped and _ESCAPED.search(line):
            raise ValueError(f"{where}: not UTF-8 text: {_show(line)}")
        if not line.strip():
            if current is not None:
                _finish(current, other_lines, where, sentences)
            current, other_lines = None, 0
            continue
        if current is None:
            current = Sentence(line=number)
        if line.startswith("#"):
            key, sep, value = line[1:].partition("=")
            current.metadata[key.strip()] = value.strip() if sep else ""
            continue
        fields = line.split("\t")
        if len(fields) != len(FIELDS):
            raise ValueError(
                f"{where}: expected {len(FIELDS)} tab-separated fields "
                f"({' '.join(f.upper() for f in FIELDS)}), got {len(fields)}: "
                f"{_show(line)}"
            )
        empty = [FIELDS[i].upper() for i, value in enumerate(fields) if value == ""]
        if empty:
            raise ValueError(
                f"{where}: empty field {', '.join(empty)} (CoNLL-U writes an "
                f"unspecified value as '_'): {_show(line)}"
            )
        token_id = fields[0]
        if token_id.isdigit() and token_id.isascii():
            expected = len(current.forms) + 1
            if int(token_id) != expected:
                raise ValueError(
                    f"{where}: expected word ID {expected} (IDs run 1, 2, 3, ... "
                    f"in each sentence; is a blank line missing?), got "
                    f"{token_id!r}"
                )
            current.forms.append(fields[1])
            current.lemmas.append(fields[2])
            current.upos.append(fields[3])
            current.xpos.append(fields[4])
        elif _is_pair(token_id, "-") or _is_pair(token_id, "."):
            other_lines += 1  # a multiword token's range, or an empty node: not a word
        else:
            raise ValueError(
                f"{where}: expected an ID such as 3, 3-4 (a multiword token) or "
                f"3.1 (an empty node), got {token_id!r}"
            )
    if current is not None:
        _finish(current, other_lines, f"{name}, end of file", sentences)
    return sentences


def _finish(sentence, other_lines, where, sentences):
    if sentence.forms:
        sentences.append(sentence)
    elif other_lines:
        raise ValueError(
            f"{where}: the sentence starting at line {sentence.line} has "
            "multiword tokens or empty nodes but no words"
        )
    # comments alone (a file's header, say) make no sentence


def _is_pair(token_id, sep):
    a, found, b = token_id.partition(sep)
    return bool(found) and all(p.isdigit() and p.isascii() for p in (a, b))


def _show(line, limit=80):
    return repr(line if len(line) <= limit else line[:limit] + "...")
