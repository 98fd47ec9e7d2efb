"""bench/end_to_end/notes_clients.py and word_lm.py (issue 41's clients with one class name
changed) on tiny runs over small data written here: torch.nn's model and rnnfast.torch's,
started from the same weights, give the same losses (a correctness check; nothing is timed
against a threshold), and the tables and the JSON asked for with --json are there."""

from __future__ import annotations

import json

import numpy as np
import pytest

for name in ("psutil", "torch", "threadpoolctl"):  # bench._common's imports
    pytest.importorskip(name)

from small_data import write_names, write_text

from bench.end_to_end import notes_clients, word_lm


@pytest.fixture
def data(tmp_path):
    rng = np.random.default_rng(0)
    root = tmp_path / "data"
    write_names(root, rng, per_language=60)
    write_text(root, rng, lines=150)
    return root


def test_the_notes_clients_agree(data, tmp_path, capsys):
    out = tmp_path / "notes.json"
    notes_clients.main(
        ["--data", str(data), "--check-iterations", "3", "--repeats", "1"]
        + ["--min-repeat-s", "0.001", "--warmup-s", "0", "--json", str(out)]
    )
    result = json.loads(out.read_text())
    assert result["isa"] and result["threads"] == 1 and len(result["cores"]) == 1
    assert [r["client"] for r in result["rows"]] == ["decoder", "charrnn"]
    for row in result["rows"]:
        torch_losses, rnnfast_losses = row["check_losses"]["torch"], row["check_losses"]["rnnfast"]
        assert len(torch_losses) == 3
        np.testing.assert_allclose(rnnfast_losses, torch_losses, rtol=1e-4)
        assert row["ratio"] == pytest.approx(row["torch_ms"] / row["rnnfast_ms"])
        assert row["verdict"] == ("met" if row["ratio"] >= row["target"] else "MISSED")
    assert [r["target"] for r in result["rows"]] == [1.5, 2.0]
    printed = capsys.readouterr().out
    assert "ISA " in printed and "ratio" in printed and "verdict" in printed


def test_the_word_lm_curves_agree_without_dropout(data, tmp_path, capsys):
    out = tmp_path / "word_lm.json"
    word_lm.main(
        ["--data", str(data), "--max-batches", "2", "--log-interval", "1", "--dropout", "0"]
        + ["--json", str(out)]
    )
    result = json.loads(out.read_text())
    assert result["isa"] and result["threads"] == 1 and result["dropout"] == 0.0
    (row,) = result["rows"]
    assert row["batches"] == 2 and 0 < row["torch_lstm_share"] < 1
    assert 0 < row["rnnfast_lstm_share"] < 1
    assert row["rnnfast_val_loss"] == pytest.approx(row["torch_val_loss"], rel=1e-4)
    (curve,) = result["curves"]
    assert [p["batches"] for p in curve] == [1, 2]
    for point in curve:
        assert point["rnnfast_loss"] == pytest.approx(point["torch_loss"], rel=1e-4)
    assert "torch val loss" in capsys.readouterr().out


def test_the_word_lm_trains_with_dropout(data, tmp_path):
    # the bridge's LSTM takes the dropout between its layers (its general route); the masks
    # differ from torch's, so the curves are not compared
    out = tmp_path / "word_lm.json"
    word_lm.main(["--data", str(data), "--max-batches", "1", "--json", str(out)])
    (point,) = json.loads(out.read_text())["curves"][0]
    assert np.isfinite([point["torch_loss"], point["rnnfast_loss"]]).all()


def test_the_command_lines_refuse_bad_counts(data):
    with pytest.raises(SystemExit):
        notes_clients.main(["--data", str(data), "--repeats", "0"])
    with pytest.raises(SystemExit):
        word_lm.main(["--data", str(data), "--max-batches", "0"])
