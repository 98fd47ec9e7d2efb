"""bench/end_to_end/bf16_parity.py (python -m bench.end_to_end.bf16_parity): a --quick run of
main() on small data sets written here (names, charlm, sunspots and a CoNLL-U treebank for
tagging), checked for its structure: a row per example and cell with float32's and bf16's
figures over the seed, finite, bf16 changing the trained weights, the markdown table per
example and the JSON; the parity rule on made-up figures; the refusal to run without bf16
products unless --emulate; the command line's refusals. No figure is held to a threshold and
nothing is timed.

Every run takes --emulate (the software rounding where the CPU has no bf16 products; nothing
changes where it has them), so that the file runs on any machine."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

for name in ("psutil", "torch", "threadpoolctl"):  # bench._common's imports
    pytest.importorskip(name)

from small_data import write_monthly, write_names, write_text

from bench.end_to_end import bf16_parity as bench
from rnnfast import _core

CELLS = ("rnn", "gru", "lstm")
EXAMPLES = ("names", "charlm", "sunspots", "tagging")
ROW_FIELDS = {
    "example", "cell", "metric", "higher_is_better", "seeds", "float32", "bf16", "difference",
    "window", "within", "inside_min_max", "bf16_changed_figures", "bf16_changed_weights",
    "max_weight_change", "epoch_s",
}  # fmt: skip


def write_conllu(path, sentences=80, seed=0):
    """Sentences of a determiner, an adjective or not, a noun and a verb."""
    rng = np.random.default_rng(seed)
    words = {"DET": ["the", "a"], "ADJ": ["big", "red"], "NOUN": ["cat", "dog"], "VERB": ["runs"]}
    blocks = []
    for k in range(sentences):
        tags = ["DET", *(["ADJ"] if rng.random() < 0.5 else []), "NOUN", "VERB"]
        rows = [f"# sent_id = s{k}"] + [
            f"{i}\t{f}\t{f}\t{t}\t_\t_\t0\tdep\t_\t_"
            for i, (f, t) in enumerate(((rng.choice(words[t]), t) for t in tags), 1)
        ]
        blocks.append("\n".join(rows) + "\n")
    path.write_text("\n".join(blocks), encoding="utf-8")
    return path


@pytest.fixture
def data(tmp_path):
    rng = np.random.default_rng(0)
    root = tmp_path / "data"
    write_names(root, rng, per_language=40)
    write_text(root, rng, lines=3000)  # more than --quick's 40,000 characters
    write_monthly(root, years=30)
    return root, write_conllu(tmp_path / "toy.conllu")


def test_quick_run_has_every_example_and_cell(tmp_path, capsys, data):
    root, treebank = data
    emulation_before = _core.bf16_emulation()
    out, md = tmp_path / "parity.json", tmp_path / "parity.md"
    doc = bench.main(
        ["--quick", "--emulate", "--data", str(root), "--tagging-data", str(treebank)]
        + ["--threads", "1", "--json", str(out), "--markdown", str(md)]
    )
    printed = capsys.readouterr().out
    assert _core.bf16_emulation() == emulation_before  # --emulate undone after the run
    saved = json.loads(out.read_text())
    assert saved == json.loads(json.dumps(doc))
    assert saved["quick"] and saved["left_out"] == {}
    machine = saved["machine"]
    assert machine["bf16_products_path"] in ("amx", "avx512_bf16", "emulated")
    assert machine["bf16_emulated"] == (machine["bf16_products_path"] == "emulated")
    assert set(machine["settings"]) == set(EXAMPLES)
    runs = saved["runs"]
    assert sorted((r["example"], r["cell"], r["precision"]) for r in runs) == sorted(
        (e, c, p) for e in EXAMPLES for c in CELLS for p in ("float32", "bf16")
    )
    for run in runs:
        assert run["seed"] == 0 and math.isfinite(run["value"])
        assert run["epoch_s"] and all(math.isfinite(s) and s >= 0 for s in run["epoch_s"])
        if run["precision"] == "bf16":  # bf16's rounding reached the training
            assert run["weights_changed"] > 0
    rows = saved["rows"]
    assert [(r["example"], r["cell"]) for r in rows] == [(e, c) for e in EXAMPLES for c in CELLS]
    for row in rows:
        assert set(row) == ROW_FIELDS
        assert row["seeds"] == [0] and row["within"] == "n/a"  # one seed: no spread
        for side in ("float32", "bf16"):
            fig = row[side]
            assert len(fig["values"]) == 1 and fig["spread"] == 0.0
            assert all(math.isfinite(fig[k]) for k in ("mean", "min", "max"))
        assert row["bf16_changed_weights"] == 1
    tables = md.read_text()
    for example in EXAMPLES:
        assert f"### {example}: " in printed and f"### {example}: " in tables
    lines = [ln for ln in tables.splitlines() if ln.startswith("| ") and "---" not in ln]
    cells = [ln.split(" | ")[0][2:] for ln in lines if not ln.startswith("| cell ")]
    assert cells == list(CELLS) * len(EXAMPLES)
    assert all(ln.count("|") == 9 for ln in lines)


def test_tagging_without_a_treebank_is_left_out_with_a_note(tmp_path, capsys, data):
    root, _ = data
    doc = bench.main(
        ["--quick", "--emulate", "--data", str(root), "--examples", "sunspots", "tagging"]
        + ["--cells", "rnn", "--threads", "1", "--json", str(tmp_path / "p.json")]
    )
    assert "tagging" in doc["left_out"] and [r["example"] for r in doc["rows"]] == ["sunspots"]
    assert "### tagging: not run: no Universal Dependencies treebank" in capsys.readouterr().out


def test_the_parity_rule():
    f32 = bench.stats([0.70, 0.72, 0.71])  # spread 0.02: the window is 0.68 .. 0.74
    assert bench.verdict(f32, 0.705, True) == (
        [pytest.approx(0.68), pytest.approx(0.74)],
        "yes",
        True,
    )
    assert bench.verdict(f32, 0.735, True)[1:] == ("yes", False)
    assert bench.verdict(f32, 0.75, True)[1] == "no (better)"
    assert bench.verdict(f32, 0.67, True)[1] == "NO (worse)"
    assert bench.verdict(f32, 0.75, False)[1] == "NO (worse)"  # lower is better
    assert bench.verdict(f32, 0.67, False)[1] == "no (better)"
    assert bench.verdict(bench.stats([0.7]), 0.7, True)[1] == "n/a"


def test_without_bf16_it_says_so_and_ends(monkeypatch):
    monkeypatch.setattr(bench, "bf16_available", lambda: False)
    with pytest.raises(SystemExit, match="this machine has no bf16 products"):
        bench.main(["--quick"])


def test_bad_arguments_are_refused(capsys):
    with pytest.raises(SystemExit):
        bench.parse_args(["--seeds", "0"])
    assert "--seeds: expected a positive number, got 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench.parse_args(["--cells", "transformer"])
    assert "not one of the examples' cells" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench.parse_args(["--examples", "seq2seq"])
