"""Small data sets laid out like ../shared/data, written by the tests for the examples and the
demo: learnable in a few epochs, so the example tests run in seconds."""

import numpy as np


def write_text(root, rng, lines=150):
    """A play of two speakers whose lines are drawn from a few words: learnable quickly."""
    words = ["to", "be", "or", "not", "that", "is", "the", "question"]
    text = "".join(
        f"{'ROMEO' if k % 2 else 'JULIET'}:\n"
        + " ".join(rng.choice(words, size=rng.integers(3, 8)))
        + ".\n\n"
        for k in range(lines)
    )
    folder = root / "tinyshakespeare"
    folder.mkdir(parents=True)
    (folder / "input.txt").write_text(text, encoding="utf-8")
    return root, len(set(text))


def write_names(root, rng, per_language=150):
    # two "languages" a model can tell apart: names of the letters a-e vs v-z, 3-9 letters long
    folder = root / "names"
    folder.mkdir(parents=True)
    for language, letters in (("Alpha", "abcde"), ("Omega", "vwxyz")):
        names = [
            "".join(rng.choice(list(letters), size=rng.integers(3, 10))).title()
            for _ in range(per_language)
        ]
        (folder / f"{language}.txt").write_text("\n".join(names) + "\n", encoding="utf-8")
    return root


def write_monthly(root, years=30, seed=0):
    """A noisy 11-year cycle, 1749 on, with the header, rules and note lines of the real file
    and a last, partial year."""
    rng = np.random.default_rng(seed)
    months = np.arange(12 * years + 6)
    values = np.abs(80 * np.sin(np.pi * months / 132) + rng.normal(0, 8, len(months)))
    lines = [
        "                MONTHLY MEAN SUNSPOT NUMBERS",
        "=" * 60,
        "Year    Jan   Feb   Mar   Apr   May   Jun   Jul   Aug   Sep   Oct   Nov   Dec",
        "-" * 60,
    ]
    for y in range(years + 1):
        row = values[12 * y : 12 * y + 12]
        lines.append(f"{1749 + y}  " + "".join(f"{v:6.1f}" for v in row))
        if y % 5 == 4:
            lines.append("")
    lines += ["-" * 60, "Note:  Data are preliminary after Dec 08.", ""]
    folder = root / "sunspots"
    folder.mkdir(parents=True)
    (folder / "sunspots_monthly.dat").write_text("\n".join(lines), encoding="utf-8")
    return root, len(months)
