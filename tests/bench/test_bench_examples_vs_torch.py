"""bench/end_to_end/examples_vs_torch.py (python -m bench.end_to_end.examples_vs_torch): the lines
it reads from a run, the figures over seeds and the two targets on made-up runs; then a short
real run (one seed, one epoch, a small series written here) of sunspots on every cell, and each
twin on a gated cell and small data, in this process. Nothing here is a timed assertion."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

for name in ("torch", "psutil", "threadpoolctl"):
    pytest.importorskip(name)

import torch
from small_data import write_monthly, write_names, write_text

from bench.end_to_end import (
    _summary,
    examples_vs_torch,
    torch_charlm,
    torch_names,
    torch_seq2seq,
    torch_tagging,
)

COLUMNS = 11  # task, metric, cell, library, seeds, mean, spread, s/epoch, ratio, two targets


def test_read_run_takes_the_result_and_the_epochs():
    out = "noise\nseconds per epoch (a note): 1.500 2.000 (median 1.750)\nRESULT a=0.5 time_s=3.1\n"
    assert _summary.read_run(out) == ({"a": 0.5, "time_s": 3.1}, [1.5, 2.0])
    with pytest.raises(ValueError, match="expected a RESULT line"):
        _summary.read_run("seconds per epoch: 1.0 (median 1.0)\n")
    with pytest.raises(ValueError, match="expected a 'seconds per epoch' line"):
        _summary.read_run("RESULT a=1\n")


def made_up(task, cell, library, seed, metric, epoch_s):
    return dict(task=task, cell=cell, library=library, seed=seed, metric=metric, epoch_s=epoch_s)


def test_figures_over_seeds_and_the_targets():
    runs = [
        made_up("names", "rnn", "rnnfast", 0, 0.80, [1.0, 3.0, 1.2]),
        made_up("names", "rnn", "rnnfast", 1, 0.70, [1.0]),
        made_up("names", "rnn", "torch", 0, 0.78, [3.0]),
        made_up("names", "rnn", "torch", 1, 0.74, [2.0]),
        # lower is better: rnnfast's mean above PyTorch's worst misses, as does 1.5x
        made_up("sunspots", "gru", "rnnfast", 0, 30.0, [1.0]),
        made_up("sunspots", "gru", "torch", 0, 25.0, [1.5]),
        made_up("charlm", "lstm", "rnnfast", 0, 4.0, [1.0]),  # no torch side
    ]
    rows = _summary.targets(_summary.summarize(runs))
    names, names_torch, sunspots, _, charlm = rows
    assert (names["seeds"], names["min"], names["max"]) == (2, 0.70, 0.80)
    assert names["mean"] == pytest.approx(0.75) and names["std"] == pytest.approx(0.0707, abs=1e-4)
    assert names["epoch_s"] == pytest.approx((1.2 + 1.0) / 2)  # median of each run's median
    assert names["ratio"] == pytest.approx(2.5 / 1.1)
    assert names["speed_met"] and names["accuracy_met"]  # 0.75 >= 0.74, PyTorch's worst
    assert names_torch["ratio"] is None and names_torch["accuracy_met"] is None
    assert sunspots["ratio"] == pytest.approx(1.5)
    assert not sunspots["speed_met"] and not sunspots["accuracy_met"]
    assert charlm["ratio"] is None and charlm["speed_met"] is None
    table = _summary.markdown(rows).splitlines()
    assert len(table) == 2 + len(rows)
    assert all(line.count("|") == COLUMNS + 1 for line in table)
    assert "| 2.27x | met | met |" in table[2] and "| MISSED | MISSED |" in table[4]


def test_bad_arguments_are_refused(capsys):
    with pytest.raises(SystemExit):
        examples_vs_torch.parse_args(["--seeds", "0"])
    assert "--seeds: expected a positive number, got 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        examples_vs_torch.parse_args(["--cells", "transformer"])


def conllu(path, sentences=60, seed=0):
    """Sentences of a determiner, an adjective or not, a noun and a verb: tags a model learns."""
    rng = np.random.default_rng(seed)
    words = {"DET": ["the", "a"], "ADJ": ["big", "red"], "NOUN": ["cat", "dog"], "VERB": ["runs"]}
    blocks = []
    for k in range(sentences):
        tags = ["DET", *(["ADJ"] if rng.random() < 0.5 else []), "NOUN", "VERB"]
        forms = [rng.choice(words[t]) for t in tags]
        lines = [f"# sent_id = s{k}"]
        lines += [
            f"{i}\t{f}\t{f}\t{t}\t_\t_\t0\tdep\t_\t_"
            for i, (f, t) in enumerate(zip(forms, tags), 1)
        ]
        blocks.append("\n".join(lines) + "\n")
    path.write_text("\n".join(blocks), encoding="utf-8")
    return path


def table_rows(stdout):
    return [ln for ln in stdout.splitlines() if ln.startswith("| ") and "---" not in ln][1:]


def test_a_short_run_of_each_cell_prints_the_table_and_writes_the_json(tmp_path, capsys):
    root, _ = write_monthly(tmp_path / "data", years=20)
    out = tmp_path / "out.json"
    examples_vs_torch.main(
        ["--tasks", "sunspots", "--seeds", "1", "--quick", "--data", str(root), "--out", str(out)]
    )
    stdout = capsys.readouterr().out
    assert "threads, both libraries: sunspots" in stdout and "CPU use during the runs" in stdout
    rows = table_rows(stdout)
    assert [r.split(" | ")[2:4] for r in rows] == [
        [cell, library] for cell in ("rnn", "gru", "lstm") for library in ("rnnfast", "torch")
    ]
    assert all(r.count("|") == COLUMNS + 1 for r in rows)
    saved = json.loads(out.read_text())
    assert saved["machine"]["rnnfast_isa"] and saved["machine"]["cpu"]
    assert len(saved["runs"]) == 6 and len(saved["rows"]) == 6
    for run in saved["runs"]:
        assert math.isfinite(run["metric"]) and len(run["epoch_s"]) == 1
        assert math.isfinite(run["epoch_s"][0]) and run["epoch_s"][0] > 0
    for row in saved["rows"][::2]:  # rnnfast's rows carry the ratio and the targets
        assert math.isfinite(row["ratio"]) and row["speed_met"] in (True, False)
        assert row["accuracy_met"] in (True, False)
    examples_vs_torch.main(["--report", str(out)])  # the saved runs' table again
    assert table_rows(capsys.readouterr().out) == rows


@pytest.fixture
def torch_threads():
    """The twins set PyTorch's threads: the count is put back after the test."""
    previous = torch.get_num_threads()
    yield
    torch.set_num_threads(previous)


@pytest.mark.parametrize(
    ("twin", "cell"),
    [(torch_names, "gru"), (torch_charlm, "lstm"), (torch_seq2seq, "gru"), (torch_tagging, "lstm")],
)
def test_each_twin_runs_a_gated_cell(tmp_path, capsys, torch_threads, twin, cell):
    rng = np.random.default_rng(0)
    if twin is torch_names:
        args = ["--data", str(write_names(tmp_path, rng, per_language=40)), "--epochs", "1"]
    elif twin is torch_charlm:
        args = ["--data", str(write_text(tmp_path, rng, lines=60)[0]), "--epochs", "1"]
        args += ["--batch-size", "4", "--bptt", "20", "--length", "5"]
    elif twin is torch_seq2seq:
        args = ["--steps", "5", "--train-size", "100", "--test-size", "20"]
    else:
        args = ["--data", str(conllu(tmp_path / "toy.conllu")), "--epochs", "1"]
    twin.main([*args, "--hidden", "8", "--cell", cell, "--threads", "1"])
    figures, epoch_s = _summary.read_run(capsys.readouterr().out)
    assert len(epoch_s) == (2 if twin is torch_seq2seq else 1)  # seq2seq: its two models
    assert all(math.isfinite(v) for v in [*figures.values(), *epoch_s])
