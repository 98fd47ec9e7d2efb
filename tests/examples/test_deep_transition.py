"""examples/deep_transition.py runs on a small text the test writes: three models of about the
same parameter count learn it, its table, gradient-flow comparison and RESULT line, the plot in
--out, and bad options as one line."""

import math
import re
from pathlib import Path

import numpy as np
from example_run import run_example
from small_data import write_text

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "deep_transition.py"
SMALL = ["--epochs", "3", "--hidden", "32", "--batch-size", "4", "--bptt", "20", "--lr", "0.01"]


def test_deep_transition_example_compares_three_models(tmp_path):
    root, vocab = write_text(tmp_path / "data", np.random.default_rng(0))
    out = tmp_path / "out"
    done = run_example(EXAMPLE, ["--data", root, "--out", out, *SMALL, "--lag", "5"], tmp_path)
    assert done.returncode == 0, done.stderr
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("RESULT "), done.stdout
    values = {k: float(v) for k, v in re.findall(r"(\w+)=([-+0-9.e]+)", last)}
    for model in ("plain", "deep", "deep_skip"):
        assert values[f"ppl_{model}"] < vocab / 3  # the uniform guess has perplexity `vocab`
        assert 0 < values[f"grad_{model}"] < 1  # the gradient decays going back in time
    assert math.isfinite(values["time_s"])
    rows = re.findall(
        r"^(plain RNN|deep transition.*?k=2)\s+(\d+)\s+(\d)\s+(\d)\s+([\d,]+)", done.stdout, re.M
    )
    assert [r[3] for r in rows] == ["1", "2", "2"] and [r[2] for r in rows] == ["1", "1", "2"]
    counts = [int(r[4].replace(",", "")) for r in rows]
    assert max(counts) / min(counts) < 1.1  # about the same parameter count
    assert "(layer 0)" in done.stdout and "per step" in done.stdout
    assert (out / "deep_transition.png").is_file() or "matplotlib is not installed" in done.stdout


def test_deep_transition_example_bad_option_is_one_line(tmp_path):
    done = run_example(EXAMPLE, ["--transition-layers", "0", "--out", tmp_path / "o"], tmp_path)
    assert done.returncode == 2
    assert done.stderr == "deep_transition.py: error: --transition-layers 0: expected >= 1\n"
