"""The data of the examples' tasks, prepared one way for an example (charlm.py, names.py,
sunspots.py) and for its PyTorch twin in bench/end_to_end/, so that both train on the same data.

(The examples import it from their own folder, which Python puts first on sys.path; the bench
scripts as ``examples._tasks``, from the repository root.)
"""

from __future__ import annotations

import unicodedata

import numpy as np

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
