"""examples/names.py runs on a small names data set the test writes (ROOT/names/*.txt), through
Sequential + fit, and leaves its plot and model in --out."""

import re
import subprocess
import sys
from pathlib import Path

import numpy as np

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "names.py"


def write_names(root, rng, per_language=150):
    # two "languages" a model can tell apart: names of the letters a-e vs v-z, 3-9 letters long
    folder = root / "names"
    folder.mkdir(parents=True)
    for language, letters in (("Alpha", "abcde"), ("Omega", "vwxyz")):
        names = ["".join(rng.choice(list(letters), size=rng.integers(3, 10))).title()
                 for _ in range(per_language)]
        (folder / f"{language}.txt").write_text("\n".join(names) + "\n", encoding="utf-8")
    return root


def test_names_example_learns_and_reports(tmp_path):
    root = write_names(tmp_path / "data", np.random.default_rng(0))
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, str(EXAMPLE), "--data", str(root), "--epochs", "3", "--hidden", "16",
         "--out", str(out)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    match = re.search(r"RESULT test_accuracy=([0-9.]+) time_s=([0-9.]+)$", result.stdout)
    assert match, result.stdout
    assert float(match.group(1)) > 0.9  # chance is 0.5
    assert (out / "names.npz").is_file()
    assert (out / "names_confusion.png").is_file() or "matplotlib is not installed" in result.stdout
    assert not (tmp_path / "rnnfast-out").exists()


def test_names_example_has_no_wrapper_class():
    source = EXAMPLE.read_text(encoding="utf-8")
    assert "class " not in source and "def backward" not in source
    assert "training.fit(" in source
    assert "_cli.load(parser, \"names\"" in source  # rnnfast.datasets, through _cli
