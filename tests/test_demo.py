"""The demo's pieces: the generated series, the windows, and a short training run that must
beat the naive forecast; the kernel check it ends with; the sunspots of a datasets root."""

from __future__ import annotations

import numpy as np
from small_data import write_monthly

from rnnfast import demo


def test_mackey_glass_is_reproducible_bounded_and_not_periodic():
    a, b = demo.mackey_glass(n=600, seed=1), demo.mackey_glass(n=600, seed=1)
    np.testing.assert_array_equal(a, b)
    assert a.shape == (600,) and np.all(np.isfinite(a)) and 0.2 < a.min() and a.max() < 1.6
    # chaotic, not a fixed point or a short cycle: far from itself one lag later
    assert np.std(a[200:]) > 0.1
    assert min(np.abs(a[300:] - np.roll(a, k)[300:]).mean() for k in range(1, 40)) > 0.01


def test_windows_pair_each_window_with_the_value_horizon_steps_later():
    x, y = demo.windows(np.arange(20.0), width=4, horizon=3)
    assert x.shape == (14, 4, 1) and y.shape == (14, 1)
    np.testing.assert_array_equal(x[0, :, 0], [0, 1, 2, 3])
    assert y[0, 0] == 6 and y[-1, 0] == 19


def test_a_short_training_run_beats_the_naive_forecast(tmp_path):
    rmse, naive = demo.train_forecaster(demo.mackey_glass(n=1200), epochs=4, out=tmp_path)
    assert rmse < naive
    assert (tmp_path / "demo_forecaster.npz").is_file()


def test_data_root_trains_on_its_sunspots(tmp_path, capsys):
    root, months = write_monthly(tmp_path / "data", years=12)
    status = demo.main(
        [
            "demo",
            "--data",
            str(root),
            "--out",
            str(tmp_path / "out"),
            "--epochs",
            "1",
            "--steps",
            "3",
            "--batch",
            "2",
            "--input-size",
            "3",
            "--hidden-size",
            "4",
            "--repeats",
            "1",
        ]
    )
    assert status in (0, 1)  # 1: one epoch did not beat the naive forecast
    out = capsys.readouterr().out
    assert f"series: monthly sunspot numbers, {months} months" in out
    assert "check: PASSED" in out
    assert (tmp_path / "out" / "demo_forecaster.npz").is_file()


def test_kernel_check_passes():
    assert demo.run(steps=5, batch=3, input_size=4, hidden_size=6, repeats=1)
