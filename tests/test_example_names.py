"""examples/names.py runs on a small names folder the test writes, through Sequential + fit."""

import re
import subprocess
import sys
from pathlib import Path

import numpy as np

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "names.py"


def _write_names(folder, rng):
    # two "languages" a model can tell apart: names of the letters a-e vs v-z, 3-9 letters long
    for language, letters in (("Alpha", "abcde"), ("Omega", "vwxyz")):
        names = ["".join(rng.choice(list(letters), size=rng.integers(3, 10))).title()
                 for _ in range(150)]
        (folder / f"{language}.txt").write_text("\n".join(names) + "\n", encoding="utf-8")


def test_names_example_learns_and_reports(tmp_path):
    _write_names(tmp_path, np.random.default_rng(0))
    result = subprocess.run(
        [sys.executable, str(EXAMPLE), "--data", str(tmp_path), "--epochs", "3", "--hidden", "16",
         "--plot", str(tmp_path / "confusion.png")],
        capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    match = re.search(r"RESULT test_accuracy=([0-9.]+) time_s=([0-9.]+)", result.stdout)
    assert match, result.stdout
    assert float(match.group(1)) > 0.9  # chance is 0.5


def test_names_example_has_no_wrapper_class():
    source = EXAMPLE.read_text(encoding="utf-8")
    assert "class " not in source and "def backward" not in source
    assert "training.fit(" in source
