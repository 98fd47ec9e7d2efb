"""examples/seq2seq.py on a few small strings: both trainings, both decodings, the table and the
RESULT line, the plot in --out."""

import re
from pathlib import Path

import pytest
from example_run import run_example

CELLS = {"gru": "GRU", "lstm": "LSTM"}

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "seq2seq.py"
SMALL = [
    "--steps",
    "40",
    "--train-size",
    "300",
    "--test-size",
    "40",
    "--min-len",
    "2",
    "--max-len",
    "4",
    "--embed",
    "8",
    "--hidden",
    "16",
    "--batch-size",
    "16",
]


def test_seq2seq_example_runs_and_reports(tmp_path):
    out = tmp_path / "out"
    done = run_example(EXAMPLE, ["--out", str(out), *SMALL], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "40 held-out strings" in done.stdout
    assert re.search(r"\n\s+teacher forcing\s+\d\.\d{3}\s+\d\.\d{3}", done.stdout)
    assert re.search(
        r"RESULT exact_match_greedy=\d\.\d{4} exact_match_beam=\d\.\d{4} "
        r"exposure_bias_tf=-?\d\.\d{4} exposure_bias_ss=-?\d\.\d{4} "
        r"time_s=\d+\.\d$",
        done.stdout,
    ), done.stdout
    assert (out / "seq2seq.png").is_file() or "matplotlib is not installed" in done.stdout


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_seq2seq_example_runs_with_gated_cells(tmp_path, cell):
    """--cell gru / lstm: both trainings (teacher forcing, scheduled sampling), greedy and beam
    decoding and the exposure-bias measurement, on smaller data still."""
    small = [*SMALL]
    small[small.index("--steps") + 1] = "20"
    small[small.index("--train-size") + 1] = "100"
    done = run_example(EXAMPLE, ["--out", str(tmp_path / "out"), "--cell", cell, *small], tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"({CELLS[cell]} encoder and decoder)" in done.stdout
    assert re.search(r"\nscheduled sampling\s+\d\.\d{3}\s+\d\.\d{3}", done.stdout)
    assert re.search(
        r"RESULT exact_match_greedy=\d\.\d{4} exact_match_beam=\d\.\d{4} "
        r"exposure_bias_tf=-?\d\.\d{4} exposure_bias_ss=-?\d\.\d{4} ",
        done.stdout,
    ), done.stdout


def test_seq2seq_bad_lengths_are_one_line(tmp_path):
    done = run_example(
        EXAMPLE,
        ["--out", str(tmp_path / "out"), "--min-len", "5", "--max-len", "3"],
        None,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr == (
        "seq2seq.py: error: --min-len 5 --max-len 3: expected 1 <= min-len <= max-len\n"
    )
