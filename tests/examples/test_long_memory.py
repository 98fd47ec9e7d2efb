"""examples/long_memory.py runs the copy-memory comparison (plain, leaky, dilated and Jordan RNNs,
a GRU and an LSTM of about the same size) on tiny settings in a few seconds: one line per run, the table of test
accuracy by model and T, its CSV and plot in --out, and the RESULT line; --help shows every
option's default and a bad option is one line on stderr with exit status 2."""

import csv
import re
from pathlib import Path

from example_run import run_example

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "long_memory.py"
MODELS = ("plain", "leaky", "dilated", "jordan", "gru", "lstm")
TINY = [
    "--lengths",
    "3,6",
    "--symbols",
    "2",
    "--classes",
    "4",
    "--hidden",
    "8",
    "--dilations",
    "1,2",
    "--epochs",
    "2",
    "--train-size",
    "64",
    "--val-size",
    "16",
    "--test-size",
    "32",
    "--batch-size",
    "16",
]


def _run(tmp_path, *args):
    return run_example(EXAMPLE, [*args], tmp_path)


def test_long_memory_example_reports_the_table_and_result(tmp_path):
    out = tmp_path / "out"
    result = _run(tmp_path, *TINY, "--out", str(out))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    last = lines[-1]
    assert last.startswith("RESULT "), result.stdout
    values = dict(re.findall(r"(\w+)=(\S+)", last))
    for kind in MODELS:
        assert int(values[f"solved_{kind}"]) in (0, 3, 6)
    assert values["target"] in ("met", "not_met")
    assert int(values["target_T"]) in (0, 3, 6)
    assert float(values["time_s"]) >= 0

    # one line per (model, T) run, then the table: a header with the delays, a row per model
    for kind in MODELS:
        for t in (3, 6):
            assert re.search(
                rf"^{kind}\s+T={t}\s+accuracy [0-9.]+ after [12] epoch", result.stdout, re.M
            )
    head = next(i for i, line in enumerate(lines) if line.startswith("model") and "T=3" in line)
    assert "T=6" in lines[head] and "params" in lines[head]
    rows = {line.split()[0]: line.split() for line in lines[head + 2 : head + 2 + len(MODELS)]}
    assert sorted(rows) == sorted(MODELS)
    params = {kind: int(row[1]) for kind, row in rows.items()}
    for kind, row in rows.items():
        accuracies = [float(cell.rstrip("*~")) for cell in row[2:4]]
        assert all(0.0 <= a <= 1.0 for a in accuracies), row
        # the widths are matched to the plain model's parameter count
        assert abs(params[kind] - params["plain"]) <= 0.25 * params["plain"], params
    assert params["leaky"] == params["plain"]

    with open(out / "long_memory.csv", newline="", encoding="utf-8") as f:
        table = list(csv.DictReader(f))
    assert len(table) == 2 * len(MODELS)
    assert {(r["model"], r["T"]) for r in table} == {(m, t) for m in MODELS for t in ("3", "6")}
    assert (out / "long_memory.png").is_file() or "matplotlib is not installed" in result.stdout
    assert not (tmp_path / "rnnfast-out").exists()


def test_long_memory_example_runs_a_subset_without_a_target(tmp_path):
    result = _run(tmp_path, *TINY, "--models", "jordan", "--out", str(tmp_path / "o"))
    assert result.returncode == 0, result.stderr
    last = result.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"RESULT solved_jordan=\d+ time_s=[0-9.]+", last), last


def test_long_memory_example_help_and_bad_options(tmp_path):
    result = _run(tmp_path, "--help")
    assert result.returncode == 0
    assert "50,100,200,500,1000)" in result.stdout  # the default as it is typed
    for option in ("--dilations", "--alpha", "--clip-norm", "--solved", "--out", "--seed"):
        assert option in result.stdout
    for bad in (["--lengths", "0,10"], ["--models", "plain,transformer"], ["--alpha", "1.5"]):
        result = _run(tmp_path, *bad, "--out", str(tmp_path / "o"))
        assert result.returncode == 2, bad
        assert bad[0] in result.stderr and len(result.stderr.strip().splitlines()) == 1
