"""examples/sunspots.py runs on a small monthly series the test writes, in the fixed-width
format of the sunspots data set (ROOT/sunspots/sunspots_monthly.dat): its RESULT line, and the
plot and model in --out."""

import re
import subprocess
import sys
from pathlib import Path

import numpy as np

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sunspots.py"
SMALL = ["--epochs", "4", "--window", "12", "--batch-size", "16", "--lr", "0.01"]


def write_monthly(root, years=30, seed=0):
    """A noisy 11-year cycle, 1749 on, with the header, rules and note lines of the real file
    and a last, partial year."""
    rng = np.random.default_rng(seed)
    months = np.arange(12 * years + 6)
    values = np.abs(80 * np.sin(np.pi * months / 132) + rng.normal(0, 8, len(months)))
    lines = ["                MONTHLY MEAN SUNSPOT NUMBERS", "=" * 60,
             "Year    Jan   Feb   Mar   Apr   May   Jun   Jul   Aug   Sep   Oct   Nov   Dec",
             "-" * 60]
    for y in range(years + 1):
        row = values[12 * y: 12 * y + 12]
        lines.append(f"{1749 + y}  " + "".join(f"{v:6.1f}" for v in row))
        if y % 5 == 4:
            lines.append("")
    lines += ["-" * 60, "Note:  Data are preliminary after Dec 08.", ""]
    folder = root / "sunspots"
    folder.mkdir(parents=True)
    (folder / "sunspots_monthly.dat").write_text("\n".join(lines), encoding="utf-8")
    return root, len(months)


def test_sunspots_example_runs_and_reports(tmp_path):
    root, n = write_monthly(tmp_path / "data")
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, str(EXAMPLE), "--data", str(root), "--out", str(out),
                           *SMALL], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"{n} months (1749-1779)" in done.stdout
    match = re.search(r"RESULT test_rmse=([0-9.]+) persistence_rmse=([0-9.]+) "
                      r"time_s=([0-9.]+)$", done.stdout)
    assert match, done.stdout
    assert 0 < float(match.group(1)) < 80 and float(match.group(2)) > 0
    assert (out / "sunspots.npz").is_file()
    assert (out / "sunspots_forecast.png").is_file() or "matplotlib is not installed" in done.stdout


def test_sunspots_window_longer_than_the_series_is_one_line(tmp_path):
    root, n = write_monthly(tmp_path / "data", years=2)
    done = subprocess.run([sys.executable, str(EXAMPLE), "--data", str(root), "--out",
                           str(tmp_path / "out"), "--window", "100"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr == (f"sunspots.py: error: --window 100: the series' {n} months are too "
                           "few for it (the training part must be longer than a window)\n")
