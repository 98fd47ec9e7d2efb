"""A token <-> id mapping built from data, saved as JSON (no pickle: a vocabulary file from
elsewhere cannot run code)."""

from __future__ import annotations

import json
import os

import numpy as np

from .._validation import check_int, check_optional_int, type_error
from ._json import loads

__all__ = ["Vocabulary"]

FORMAT = "rnnfast.Vocabulary"
FORMAT_VERSION = 1
# the largest vocabulary file load reads: millions of tokens, far from what a hostile file
# could make the parser build
MAX_FILE_BYTES = 1 << 28


class Vocabulary:
    """Tokens (strings) and their ids: id ``i`` is ``tokens[i]``.

    Build one from data with :meth:`build`, or give the finished token list here.

    Parameters
    ----------
    tokens : sequence of str
        Distinct tokens in id order.
    pad, unk : str, optional
        Which of ``tokens`` is the padding token / stands for unknown tokens; None for none.
    counts : mapping of str to int, optional
        Each token's count in the data, for every token and no other; None when unknown.

    Raises
    ------
    TypeError
        A token, ``pad`` or ``unk`` that is not a str, or a count that is not an int.
    ValueError
        A repeated token, a ``pad`` / ``unk`` not among ``tokens`` (or the same for both),
        ``counts`` whose keys are not the tokens, or a negative count.

    Examples
    --------
    >>> vocab = Vocabulary.build([["a", "b", "a"], ["c"]])
    >>> vocab.tokens
    ['<pad>', '<unk>', 'a', 'b', 'c']
    >>> vocab.encode(["a", "z"]).tolist()
    [2, 1]
    """

    __hash__ = None  # compared by value (__eq__), so not hashable

    def __init__(self, tokens, *, pad=None, unk=None, counts=None):
        if isinstance(tokens, (str, bytes)):
            raise type_error("tokens", "a list of str", tokens)
        self._tokens = list(tokens)
        self._index = {}
        for i, t in enumerate(self._tokens):
            if not isinstance(t, str):
                raise type_error(f"tokens[{i}]", "a str", t)
            if t in self._index:
                raise ValueError(f"tokens[{i}]: {t!r} repeats tokens[{self._index[t]}]")
            self._index[t] = i
        for name, special in (("pad", pad), ("unk", unk)):
            if special is not None and not isinstance(special, str):
                raise type_error(name, "a str or None", special)
            if special is not None and special not in self._index:
                raise ValueError(f"{name}: expected one of the tokens, got {special!r}")
        if pad is not None and pad == unk:
            raise ValueError(f"pad, unk: expected two different tokens, got {pad!r} for both")
        self._pad = pad
        self._unk = unk
        self._counts = None if counts is None else self._check_counts(counts)

    def _check_counts(self, counts) -> list[int]:
        if not hasattr(counts, "keys"):
            raise TypeError(f"counts: expected a mapping of token to int, got {counts!r}")
        if set(counts.keys()) != set(self._index):
            missing = [t for t in self._tokens if t not in counts][:3]
            extra = [t for t in counts if t not in self._index][:3]
            raise ValueError(
                f"counts: expected a count for every token and no other; "
                f"missing {missing}, not tokens {extra}"
            )
        return [check_int(f"counts[{t!r}]", counts[t], 0) for t in self._tokens]

    # ---- building ---------------------------------------------------------------------------

    @classmethod
    def build(cls, sequences_of_tokens, *, min_count=1, max_size=None, pad="<pad>", unk="<unk>"):
        """A vocabulary of the tokens in some data, most frequent first.

        ``pad`` gets id 0 and ``unk`` the next (1 with the defaults); either can be None to
        leave it out, which moves the ids after it down. The other tokens follow by descending
        count, ties by first appearance, so the same data gives the same ids.

        Parameters
        ----------
        sequences_of_tokens : iterable of iterables of str
            Such as ``[["the", "cat"], ["a", "cat"]]``; a str sequence counts its characters.
            A special token that occurs in the data is counted but not repeated.
        min_count : int >= 1
            Leave out tokens seen fewer times (they encode as ``unk``).
        max_size : int, optional
            At most this many tokens, specials included (the rarest go); at least the number
            of specials.
        pad, unk : str or None

        Returns
        -------
        Vocabulary
            With ``counts`` of the data.

        Raises
        ------
        TypeError
            ``sequences_of_tokens`` a str or not nested iterables, a token that is not a str,
            non-int ``min_count`` / ``max_size``, non-str ``pad`` / ``unk``.
        ValueError
            ``min_count`` < 1, ``max_size`` smaller than the specials, ``pad`` equal to ``unk``.
        """
        min_count = check_int("min_count", min_count, 1)
        for name, special in (("pad", pad), ("unk", unk)):
            if special is not None and not isinstance(special, str):
                raise type_error(name, "a str or None", special)
        if pad is not None and pad == unk:
            raise ValueError(f"pad, unk: expected two different tokens, got {pad!r} for both")
        specials = [s for s in (pad, unk) if s is not None]
        max_size = check_optional_int("max_size", max_size, len(specials))
        if isinstance(sequences_of_tokens, (str, bytes)):
            raise TypeError(
                "sequences_of_tokens: expected a list of token sequences such as [['a', 'b'], "
                "['c']], got a str; to count the characters of one text pass [text]"
            )
        counts = _count(sequences_of_tokens)  # insertion order: first appearance
        special_counts = {s: counts.pop(s, 0) for s in specials}
        regular = [(t, c) for t, c in counts.items() if c >= min_count]
        regular.sort(key=lambda tc: -tc[1])  # stable: equal counts keep first appearance
        if max_size is not None:
            regular = regular[: max_size - len(specials)]
        return cls(
            specials + [t for t, _ in regular],
            pad=pad,
            unk=unk,
            counts={**special_counts, **dict(regular)},
        )

    # ---- lookups ----------------------------------------------------------------------------

    def encode(self, tokens) -> np.ndarray:
        """The ids of some tokens.

        Parameters
        ----------
        tokens : iterable of str
            A str encodes its characters.

        Returns
        -------
        ndarray of int64, shape (n,)
            Unknown tokens get ``unk_id``.

        Raises
        ------
        TypeError
            A token that is not a str.
        ValueError
            An unknown token when the vocabulary has no ``unk`` (the message names it).
        """
        return self._encode(tokens, "tokens")

    def encode_batch(self, sequences) -> list[np.ndarray]:
        """:meth:`encode` of each sequence: a list of int64 arrays, ready for
        ``pad_sequences(..., padding_value=vocab.pad_id)``."""
        if isinstance(sequences, (str, bytes)) or not hasattr(sequences, "__iter__"):
            raise TypeError(
                f"sequences: expected a list of token sequences, got {type(sequences).__name__}"
            )
        return [self._encode(seq, f"sequences[{i}]") for i, seq in enumerate(sequences)]

    def _encode(self, tokens, name: str) -> np.ndarray:
        if not hasattr(tokens, "__iter__"):
            raise type_error(name, "a sequence of str", tokens)
        index, unk_id = self._index, self.unk_id
        ids = []
        for j, t in enumerate(tokens):
            if not isinstance(t, str):
                raise type_error(f"{name}[{j}]", "a str", t)
            i = index.get(t, unk_id)
            if i is None:
                raise ValueError(self._unknown(f"{name}[{j}]", t))
            ids.append(i)
        return np.array(ids, dtype=np.int64)

    def _unknown(self, name: str, token: str) -> str:
        return (
            f"{name}: {token!r} is not in the vocabulary, which has no unk token; "
            f"build it with unk='<unk>' to map unknown tokens to one id"
        )

    def decode(self, ids) -> list[str]:
        """The tokens of some ids (pad and unk included, as tokens).

        Parameters
        ----------
        ids : array_like of int, shape (n,)

        Returns
        -------
        list of str

        Raises
        ------
        TypeError
            Ids that are not integers.
        ValueError
            Not 1-D, or an id outside [0, len(vocab)) (the message names the first).
        """
        arr = np.asarray(ids)
        if arr.size == 0 and arr.ndim == 1:
            return []  # [] arrives as float64
        if arr.dtype.kind not in "iu":
            raise TypeError(f"ids: expected integers, got dtype {arr.dtype}")
        if arr.ndim != 1:
            raise ValueError(
                f"ids: expected shape (n,), got shape {arr.shape}; decode a batch row by row"
            )
        bad = np.nonzero((arr < 0) | (arr >= len(self._tokens)))[0]
        if bad.size:
            raise ValueError(
                f"ids: expected values in [0, {len(self._tokens)}), got {int(arr[bad[0]])} "
                f"at position {int(bad[0])}"
            )
        tokens = self._tokens
        return [tokens[i] for i in arr.tolist()]

    def __getitem__(self, token) -> int:
        """The id of ``token``, as :meth:`encode` gives it (``unk_id`` when unknown)."""
        if not isinstance(token, str):
            raise type_error("token", "a str", token)
        i = self._index.get(token, self.unk_id)
        if i is None:
            raise ValueError(self._unknown("token", token))
        return i

    def __contains__(self, token) -> bool:
        return isinstance(token, str) and token in self._index

    def __len__(self) -> int:
        return len(self._tokens)

    def __iter__(self):
        return iter(list(self._tokens))

    def __eq__(self, other):
        if not isinstance(other, Vocabulary):
            return NotImplemented
        return (self._tokens, self._pad, self._unk, self._counts) == (
            other._tokens,
            other._pad,
            other._unk,
            other._counts,
        )

    def __repr__(self) -> str:
        head = ", ".join(repr(t) for t in self._tokens[:5])
        more = ", ..." if len(self._tokens) > 5 else ""
        return (
            f"Vocabulary({len(self)} tokens: [{head}{more}], pad={self._pad!r}, unk={self._unk!r})"
        )

    # ---- attributes (read-only: the ids must not change under an encoded data set) ------------

    @property
    def tokens(self) -> list[str]:
        """All tokens in id order (a new list)."""
        return list(self._tokens)

    @property
    def pad(self) -> str | None:
        return self._pad

    @property
    def unk(self) -> str | None:
        return self._unk

    @property
    def pad_id(self) -> int | None:
        """The padding token's id, None without one."""
        return None if self._pad is None else self._index[self._pad]

    @property
    def unk_id(self) -> int | None:
        """The unknown token's id, None without one."""
        return None if self._unk is None else self._index[self._unk]

    @property
    def counts(self) -> dict[str, int] | None:
        """Each token's count in the data :meth:`build` saw, in id order (a new dict); None
        for a vocabulary made without counts."""
        return None if self._counts is None else dict(zip(self._tokens, self._counts))

    # ---- files ------------------------------------------------------------------------------

    def save(self, path) -> None:
        """Write the vocabulary to ``path`` as JSON (format version 1).

        Non-ASCII tokens are written as \\u escapes, so any str (even a lone surrogate) reads
        back exactly.

        Raises
        ------
        TypeError
            ``path`` not a str or os.PathLike.
        """
        path = _check_path(path)
        document = {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "pad": self._pad,
            "unk": self._unk,
            "tokens": self._tokens,
            "counts": self._counts,
        }
        with open(path, "w", encoding="ascii") as f:
            json.dump(document, f, ensure_ascii=True, indent=1)
            f.write("\n")

    @classmethod
    def load(cls, path) -> Vocabulary:
        """Read a vocabulary written by :meth:`save`.

        Raises
        ------
        TypeError
            ``path`` not a str or os.PathLike.
        ValueError
            Not JSON (or not UTF-8, with ``NaN`` or ``Infinity`` in it), larger than
            ``MAX_FILE_BYTES`` or nested deeper than JSON's objects of a vocabulary could be
            (checked before parsing), not a vocabulary file, a format version newer than this
            rnnfast reads, or invalid contents (the message says which field).
        OSError
            Reading the file failed (FileNotFoundError: no such file).
        """
        path = _check_path(path)
        with open(path, "rb") as f:  # save writes ASCII; a hand edit may write UTF-8
            data = f.read(MAX_FILE_BYTES + 1)
        document = loads(
            data, f"path: {os.fspath(path)!r} is not a JSON file", max_bytes=MAX_FILE_BYTES
        )
        if not isinstance(document, dict) or document.get("format") != FORMAT:
            raise ValueError(
                f"path: {os.fspath(path)!r} is not an rnnfast vocabulary file "
                f'(expected "format": {FORMAT!r})'
            )
        version = document.get("version")
        if type(version) is not int or version != FORMAT_VERSION:
            raise ValueError(
                f"path: {os.fspath(path)!r} has format version {version!r}, this rnnfast reads "
                f"version {FORMAT_VERSION}; a newer file needs a newer rnnfast"
            )
        tokens, counts = document.get("tokens"), document.get("counts")
        try:
            if not isinstance(tokens, list):
                raise type_error("tokens", "a list", tokens)
            for i, t in enumerate(tokens):  # before they key the counts
                if not isinstance(t, str):
                    raise type_error(f"tokens[{i}]", "a str", t)
            if counts is not None:
                if not isinstance(counts, list) or len(counts) != len(tokens):
                    raise ValueError("counts: expected a list as long as tokens, or null")
                counts = dict(zip(tokens, counts))
            return cls(tokens, pad=document.get("pad"), unk=document.get("unk"), counts=counts)
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"path: {os.fspath(path)!r} holds an invalid vocabulary: {exc}"
            ) from None


def _count(sequences_of_tokens) -> dict[str, int]:
    if not hasattr(sequences_of_tokens, "__iter__"):
        raise TypeError(
            f"sequences_of_tokens: expected an iterable of token sequences, "
            f"got {type(sequences_of_tokens).__name__}"
        )
    counts: dict[str, int] = {}
    for i, seq in enumerate(sequences_of_tokens):
        if not hasattr(seq, "__iter__"):
            raise TypeError(
                f"sequences_of_tokens[{i}]: expected a sequence of str, got {type(seq).__name__}"
            )
        for j, t in enumerate(seq):
            if not isinstance(t, str):
                raise TypeError(
                    f"sequences_of_tokens[{i}][{j}]: expected a str, got {type(t).__name__} {t!r}"
                )
            counts[t] = counts.get(t, 0) + 1
    return counts


def _check_path(path):
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path: expected a str or os.PathLike, got {type(path).__name__}")
    return path
