"""examples/sunspots.py runs on a small monthly series the test writes, in the fixed-width
format of the sunspots data set (ROOT/sunspots/sunspots_monthly.dat): its RESULT line, and the
plot and model in --out."""

import re
from pathlib import Path

from example_run import run_example
from quantized_run import run_quantized
from small_data import write_monthly

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sunspots.py"
SMALL = ["--epochs", "4", "--window", "12", "--batch-size", "16", "--lr", "0.01"]


def test_sunspots_example_runs_and_reports(tmp_path):
    root, n = write_monthly(tmp_path / "data")
    out = tmp_path / "out"
    done = run_example(EXAMPLE, ["--data", str(root), "--out", str(out), *SMALL], tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"{n} months (1749-1779)" in done.stdout
    match = re.search(
        r"RESULT test_rmse=([0-9.]+) persistence_rmse=([0-9.]+) "
        r"time_s=([0-9.]+)$",
        done.stdout,
    )
    assert match, done.stdout
    assert 0 < float(match.group(1)) < 80 and float(match.group(2)) > 0
    assert (out / "sunspots.npz").is_file()
    assert (out / "sunspots_forecast.png").is_file() or "matplotlib is not installed" in done.stdout


def test_sunspots_window_longer_than_the_series_is_one_line(tmp_path):
    root, n = write_monthly(tmp_path / "data", years=2)
    done = run_example(
        EXAMPLE,
        ["--data", str(root), "--out", str(tmp_path / "out"), "--window", "100"],
        None,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr == (
        f"sunspots.py: error: --window 100: the series' {n} months are too "
        "few for it (the training part must be longer than a window)\n"
    )


def test_sunspots_example_evaluates_the_quantized_model(tmp_path):
    root, _ = write_monthly(tmp_path / "data")
    args = ["--data", str(root), "--out", str(tmp_path), *SMALL]
    names = ["test_rmse", "quantized_test_rmse", "persistence_rmse", "time_s"]
    got = run_quantized(EXAMPLE, args, "int8", tmp_path, names)
    assert abs(got["quantized_test_rmse"] / got["test_rmse"] - 1) < 0.05


def test_sunspots_example_runs_a_gated_cell(tmp_path):
    """--cell gru: the stacked model with GRU layers in the RNNs' places."""
    root, _ = write_monthly(tmp_path / "data")
    small = ["--epochs", "2", "--window", "12", "--batch-size", "16", "--lr", "0.01"]
    done = run_example(
        EXAMPLE, ["--data", root, "--out", tmp_path, *small, "--cell", "gru"], tmp_path
    )
    assert done.returncode == 0, done.stderr
    match = re.search(r"RESULT test_rmse=([0-9.]+) persistence_rmse=([0-9.]+) ", done.stdout)
    assert match, done.stdout
    assert 0 < float(match.group(1)) < 80
    assert "GRU" in done.stdout  # the printed summary
