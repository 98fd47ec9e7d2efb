"""examples/charlm.py runs on a small text the test writes (ROOT/tinyshakespeare/input.txt):
truncated BPTT, three decodings, its RESULT line, and the plot and model in --out."""

import math
import re
from pathlib import Path

import numpy as np
from example_run import run_example
from quantized_run import run_quantized
from small_data import write_text

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "charlm.py"
SMALL = [
    "--epochs",
    "3",
    "--embed",
    "8",
    "--hidden",
    "32",
    "--batch-size",
    "4",
    "--bptt",
    "20",
    "--length",
    "30",
    "--beam-width",
    "2",
    "--lr",
    "0.01",
]


def test_charlm_example_learns_and_reports(tmp_path):
    root, vocab = write_text(tmp_path / "data", np.random.default_rng(0))
    out = tmp_path / "out"
    done = run_example(EXAMPLE, ["--data", str(root), "--out", str(out), *SMALL], tmp_path)
    assert done.returncode == 0, done.stderr
    match = re.search(r"RESULT val_perplexity=([0-9.]+) time_s=([0-9.]+)$", done.stdout)
    assert match, done.stdout
    assert float(match.group(1)) < vocab / 3  # the uniform guess has perplexity `vocab`
    for decoding in ("greedy", "temperature 0.8", "beam search, width 2"):
        assert f"---- {decoding} ----\nROMEO:\n" in done.stdout
    assert (out / "charlm.npz").is_file()
    assert (out / "charlm_loss.png").is_file() or "matplotlib is not installed" in done.stdout
    assert math.isfinite(float(match.group(2)))


def test_charlm_prompt_outside_the_text_is_one_line(tmp_path):
    root, _ = write_text(tmp_path / "data", np.random.default_rng(0), lines=20)
    done = run_example(
        EXAMPLE,
        ["--data", str(root), "--out", str(tmp_path / "out"), "--prompt", "@#"],
        None,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr == (
        "charlm.py: error: --prompt '@#': none of its characters is in the text\n"
    )


def test_charlm_example_evaluates_the_quantized_model(tmp_path):
    root, _ = write_text(tmp_path / "data", np.random.default_rng(0))
    args = ["--data", str(root), "--out", str(tmp_path), *SMALL]
    names = ["val_perplexity", "quantized_val_perplexity", "time_s"]
    got = run_quantized(EXAMPLE, args, "bf16", tmp_path, names)
    # the same validation windows: bf16 weights move the perplexity by a fraction of a percent
    assert abs(got["quantized_val_perplexity"] / got["val_perplexity"] - 1) < 0.02


def test_charlm_example_runs_a_gated_cell(tmp_path):
    """--cell lstm: truncated BPTT carries the LSTM's (h, c) from window to window, and the three
    decodings step and reorder it."""
    root, vocab = write_text(tmp_path / "data", np.random.default_rng(0))
    args = ["--data", root, "--out", tmp_path, *SMALL, "--cell", "lstm"]
    done = run_example(EXAMPLE, args, tmp_path)
    assert done.returncode == 0, done.stderr
    match = re.search(r"RESULT val_perplexity=([0-9.]+) time_s=([0-9.]+)$", done.stdout)
    assert match, done.stdout
    assert float(match.group(1)) < vocab / 3
    for decoding in ("greedy", "temperature 0.8", "beam search, width 2"):
        assert f"---- {decoding} ----\nROMEO:\n" in done.stdout
