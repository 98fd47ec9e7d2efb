"""The data of the examples' tasks, prepared one way for an example (charlm.py, names.py,
sunspots.py, tagging.py, seq2seq.py) and for its PyTorch twin in bench/end_to_end/, so that both
train on the same data.

(The examples import it from their own folder, which Python puts first on sys.path; the bench
scripts as ``examples._tasks``, from the repository root.)
"""

from __future__ import annotations

import math
import unicodedata
from pathlib import Path

import numpy as np

from rnnfast.data.conllu import read_conllu

# ---- charlm.py ----------------------------------------------------------------------------------


def encode_text(text, train_fraction=0.9):
    """(train ids, validation ids, alphabet): the characters as int64 ids, split in order."""
    alphabet = sorted(set(text))
    index = {c: i for i, c in enumerate(alphabet)}
    ids = np.array([index[c] for c in text], dtype=np.int64)
    split = int(train_fraction * len(ids))
    return ids[:split], ids[split:], alphabet


# ---- names.py -----------------------------------------------------------------------------------


def ascii_letters(name):
    """The name without accents (Ślusàrski -> Slusarski), as the classic tutorial does."""
    return "".join(c for c in unicodedata.normalize("NFD", name) if unicodedata.category(c) != "Mn")


def flatten(by_language):
    """(names without accents, language index per name, language names) of the data set's
    dict language -> names."""
    languages = list(by_language)
    names = [ascii_letters(n) for lang in languages for n in by_language[lang]]
    labels = np.repeat(np.arange(len(languages)), [len(by_language[lang]) for lang in languages])
    return names, labels, languages


# ---- sunspots.py --------------------------------------------------------------------------------


def split_scale(values, train_fraction=0.8):
    """(scaled series, split index, (lo, hi)): min-max scaling fitted on the training part."""
    split = int(train_fraction * len(values))
    lo, hi = values[:split].min(), values[:split].max()
    return ((values - lo) / (hi - lo)).astype(np.float32), split, (lo, hi)


def windows(series, window, first_target, last_target):
    """Inputs (M, window, 1) and targets (M, 1) for the targets series[first_target:last_target],
    each predicted from the ``window`` values before it (which may reach back into an earlier
    split: only the targets define the split)."""
    first_target = max(first_target, window)
    idx = np.arange(first_target, last_target)
    x = np.stack([series[i - window : i] for i in idx])[..., None]
    return x.astype(np.float32), series[idx, None].astype(np.float32), idx


def rmse(a, b):
    return float(np.sqrt(np.mean((np.asarray(a) - np.asarray(b)) ** 2)))


# ---- tagging.py ---------------------------------------------------------------------------------

SPLITS = ("train", "dev", "test")
SPLIT_SEED = 0  # the 80/10/10 split of a single file


def load_splits(data):
    """(train, dev, test) lists of sentences (dev may be empty) from a treebank folder or one
    CoNLL-U file; a ValueError that says what is wrong otherwise."""
    data = Path(data)
    if data.is_dir():
        found = {s: sorted(data.glob(f"*-ud-{s}.conllu")) for s in SPLITS}
        for split, paths in found.items():
            if len(paths) > 1 or (not paths and split != "dev"):  # a treebank may have no dev
                raise ValueError(
                    f"expected one *-ud-{split}.conllu in the folder {data}, found "
                    f"{len(paths)} ({', '.join(p.name for p in paths) or 'none'})"
                )
        return tuple(read_conllu(found[s][0]) if found[s] else [] for s in SPLITS)
    if not data.is_file():
        raise ValueError(
            f"{data} does not exist; expected a CoNLL-U file or a folder "
            "holding *-ud-train.conllu, *-ud-dev.conllu and *-ud-test.conllu (a "
            "Universal Dependencies treebank)"
        )
    sentences = read_conllu(data)
    order = np.random.default_rng(SPLIT_SEED).permutation(len(sentences))
    cuts = np.split(order, [int(0.8 * len(sentences)), int(0.9 * len(sentences))])
    train, dev, test = ([sentences[i] for i in part] for part in cuts)
    if not train or not test:
        raise ValueError(
            f"{data} holds {len(sentences)} sentence(s), too few to split "
            "80/10/10 into train, dev and test (at least 2 are needed)"
        )
    return train, dev, test


# ---- seq2seq.py ---------------------------------------------------------------------------------

PAD, BOS, EOS = 10, 11, 12  # digits are tokens 0..9
SRC_VOCAB, TGT_VOCAB = 11, 13


def make_strings(rng, n, lo, hi, exclude=frozenset()):
    """n distinct digit strings (tuples) of lengths lo..hi, none of them in ``exclude``."""
    out = set()
    while len(out) < n:
        length = int(rng.integers(lo, hi + 1))
        s = tuple(int(d) for d in rng.integers(0, 10, length))
        if s not in exclude:
            out.add(s)
    return sorted(out)


def target_of(s, task):
    return s[::-1] if task == "reverse" else tuple(sorted(s))


def encode_batch(strings, task):
    """Padded (src, src_lengths, tgt_in, tgt_out, tgt_lengths): tgt_in = BOS + target,
    tgt_out = target + EOS."""
    n, hi = len(strings), max(len(s) for s in strings)
    lengths = np.array([len(s) for s in strings])
    src = np.full((n, hi), PAD)
    tgt_in = np.full((n, hi + 1), PAD)
    tgt_out = np.full((n, hi + 1), PAD)
    for b, s in enumerate(strings):
        t = target_of(s, task)
        src[b, : len(s)] = s
        tgt_in[b, : len(s) + 1] = (BOS,) + t
        tgt_out[b, : len(s) + 1] = t + (EOS,)
    return src, lengths, tgt_in, tgt_out, lengths + 1


def midpoint_k(step):
    """The inverse sigmoid's k that puts the ratio 0.5 (where k ln k = i) at update ``step``."""
    k = 10.0
    for _ in range(50):  # Newton on k ln k - step
        k -= (k * math.log(k) - step) / (math.log(k) + 1)
    return max(k, 1.0)


def schedule_constants(kind, midpoint_step):
    """The constants of teacher_forcing_schedule(kind) that put the ratio at 0.5 at update
    ``midpoint_step``, so that --midpoint means the same for every kind."""
    if kind == "linear":  # 1 - slope * i: 0.5 at the midpoint, 0 at twice it
        return {"slope": 0.5 / midpoint_step}
    if kind == "exponential":  # k ** i
        return {"k": 0.5 ** (1.0 / midpoint_step)}
    return {"k": midpoint_k(midpoint_step)}
