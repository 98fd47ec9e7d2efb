"""examples/names.py runs on a small names data set the test writes (ROOT/names/*.txt), through
Sequential + fit, and leaves its plot and model in --out."""

import re
from pathlib import Path

import numpy as np
from example_run import run_example
from quantized_run import run_quantized
from small_data import write_names

import rnnfast

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "names.py"


def test_names_example_learns_and_reports(tmp_path):
    root = write_names(tmp_path / "data", np.random.default_rng(0))
    out = tmp_path / "out"
    result = run_example(
        EXAMPLE,
        ["--data", str(root), "--epochs", "3", "--hidden", "16", "--out", str(out)],
        tmp_path,
    )
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
    assert '_cli.load(parser, "names"' in source  # rnnfast.datasets, through _cli


def test_names_example_evaluates_the_quantized_model(tmp_path):
    root = write_names(tmp_path / "data", np.random.default_rng(0))
    args = ["--data", str(root), "--epochs", "3", "--hidden", "16", "--out", str(tmp_path)]
    names = ["test_accuracy", "quantized_test_accuracy", "time_s"]
    got = run_quantized(EXAMPLE, args, "int8", tmp_path, names)
    # int8 weights change a few borderline names at most (the real data's target: 0.5 points)
    assert abs(got["quantized_test_accuracy"] - got["test_accuracy"]) <= 0.05


def test_names_example_runs_a_gated_cell(tmp_path):
    """--cell lstm: the same model with an LSTM in the RNN's place learns the small task."""
    root = write_names(tmp_path / "data", np.random.default_rng(0))
    args = ["--data", root, "--epochs", "3", "--hidden", "16", "--out", tmp_path, "--cell", "lstm"]
    result = run_example(EXAMPLE, args, tmp_path)
    assert result.returncode == 0, result.stderr
    match = re.search(r"RESULT test_accuracy=([0-9.]+) time_s=([0-9.]+)$", result.stdout)
    assert match, result.stdout
    assert float(match.group(1)) > 0.9
    assert rnnfast.load(tmp_path / "names.npz")[0].cell.torch_name == "LSTM"


def test_names_example_quantize_of_a_cell_without_quantized_kernels_is_one_line(tmp_path):
    root = write_names(tmp_path / "data", np.random.default_rng(0))
    args = ["--data", root, "--out", tmp_path, "--cell", "gru", "--quantize", "int8"]
    done = run_example(EXAMPLE, args, tmp_path)
    if done.returncode == 0:  # rnnfast.quantize took the GRU: then it is evaluated as the RNN
        assert "quantized_test_accuracy=" in done.stdout
        return
    assert done.returncode == 2
    assert (
        done.stderr.startswith("names.py: error: --quantize int8: ")
        and done.stderr.count("\n") == 1
    )
