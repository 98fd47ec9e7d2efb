"""examples/gradient_flow.py runs quickly and shows the notes' claims: radius 0.9 vanishes, 1.0
persists, 1.1 explodes over 100 steps, and leaky and dilated units reach further; its table, curves and plot
land in --out."""

import csv
import re
from pathlib import Path

from example_run import run_example

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "gradient_flow.py"


def _run(tmp_path, *args):
    return run_example(EXAMPLE, [*args], tmp_path)


def test_gradient_flow_example_reproduces_the_claims(tmp_path):
    out = tmp_path / "out"
    result = _run(tmp_path, "--steps", "100", "--hidden", "16", "--batch", "2", "--out", str(out))
    assert result.returncode == 0, result.stderr
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith("RESULT "), result.stdout
    values = dict(re.findall(r"(\w[\w.]*)=([-+0-9.e]+)", last))
    assert float(values["ratio_rho0.9"]) < 1e-3  # vanished: 0.9^99 ~ 3e-5
    assert 0.9 < float(values["ratio_rho1"]) < 1.1  # persists
    assert float(values["ratio_rho1.1"]) > 1e3  # exploded: 1.1^99 ~ 1.2e4
    reach = [int(values[f"reach_alpha{a}"]) for a in ("1", "0.5", "0.25")]
    assert reach[0] < reach[1] < reach[2]  # leaky units lengthen the reach
    dilated = [int(values[f"reach_dilation{d}"]) for d in (2, 4)]
    assert reach[0] < dilated[0] < dilated[1]  # so do dilations
    assert dilated[1] % 4 == 0  # the loss's own chain
    assert "rho=1.1, alpha=1" in result.stdout and "||dh_T/dh_0||" in result.stdout
    assert (out / "gradient_flow.csv").is_file()
    with open(out / "gradient_flow.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    assert len(rows[0]) == 8 and rows[0][1] == "rho=0.9, alpha=1"  # k and seven curves
    assert rows[0][-1] == "rho=0.9, d=4"
    assert len(rows) == 101
    assert (out / "gradient_flow.png").is_file() or "matplotlib is not installed" in result.stdout
    assert not (tmp_path / "rnnfast-out").exists()


def test_gradient_flow_example_help_and_bad_options(tmp_path):
    result = _run(tmp_path, "--help")
    assert result.returncode == 0
    assert "(default: 100)" in result.stdout and "--alphas" in result.stdout
    result = _run(tmp_path, "--alphas", "1.5", "--out", str(tmp_path / "o"))
    assert result.returncode == 2
    assert "--alphas" in result.stderr and len(result.stderr.strip().splitlines()) == 1
