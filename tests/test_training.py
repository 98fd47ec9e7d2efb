"""Training loops: fit / evaluate / predict, callbacks, truncated BPTT over a stream."""

from __future__ import annotations

import numpy as np
import pytest

import rnnfast
from rnnfast import optim, training


def _regression_model(seed=0):
    return rnnfast.Sequential(
        [
            rnnfast.RNN(1, 16, batch_first=True, return_sequences=False, seed=seed),
            rnnfast.Dense(16, 1, seed=seed + 1),
        ]
    )


def _sum_task(rng, n=256, steps=8):
    x = rng.standard_normal((n, steps, 1)).astype(np.float32)
    return x, x.sum(axis=1) / 3


def test_fit_drives_a_learnable_task_down_by_a_factor_of_five(rng):
    x, y = _sum_task(rng)
    model = _regression_model()
    history = training.fit(
        model,
        x,
        y,
        loss="mse",
        optimizer=optim.Adam(model, lr=1e-2),
        epochs=12,
        batch_size=32,
        seed=0,
        verbose=False,
        validation_data=(x[:64], y[:64]),
    )
    assert history["loss"][-1] < history["loss"][0] / 5
    assert len(history["val_loss"]) == 12
    final = training.evaluate(model, x, y, loss="mse")["loss"]
    assert final < history["loss"][0] / 5
    assert training.predict(model, x, batch_size=50).shape == y.shape


def test_fit_is_reproducible_with_a_seed(rng):
    x, y = _sum_task(rng, n=64)
    runs = []
    for _ in range(2):
        model = _regression_model()
        runs.append(
            training.fit(
                model,
                x,
                y,
                loss="mse",
                optimizer=optim.SGD(model, lr=0.05),
                epochs=2,
                batch_size=16,
                seed=3,
                verbose=False,
            )["loss"]
        )
    assert runs[0] == runs[1]


def test_early_stopping_stops_after_patience_and_restores_the_best_weights():
    model = _regression_model()
    stopper = training.EarlyStopping(monitor="val_loss", patience=2, restore_best_weights=True)
    weight = model.named_parameters()[0][1]
    stops = []
    for epoch, val_loss in enumerate([3.0, 1.0, 2.0, 1.5, 0.5]):
        with rnnfast.writable_parameters(weight):  # a stand-in for training (an optimizer)
            weight[...] = epoch  # the weights differ every epoch
        stops.append(stopper.on_epoch_end(epoch, {"val_loss": val_loss}, model))
        if stops[-1]:
            break
    assert stops == [False, False, False, True]  # no improvement for 2 epochs after epoch 1
    assert np.all(weight == 1)  # the weights of the best epoch are back


def test_fit_stops_when_a_callback_says_so(rng):
    x, y = _sum_task(rng, n=32)
    model = _regression_model()

    class StopAtSecond:
        def on_epoch_end(self, epoch, logs, model):
            return epoch == 1

    history = training.fit(
        model,
        x,
        y,
        loss="mse",
        optimizer=optim.SGD(model, lr=0.01),
        epochs=10,
        batch_size=16,
        verbose=False,
        callbacks=[StopAtSecond()],
    )
    assert len(history["loss"]) == 2


def test_checkpoint_saves_a_loadable_model(rng, tmp_path):
    x, y = _sum_task(rng, n=32)
    model = _regression_model()
    path = tmp_path / "best.npz"
    training.fit(
        model,
        x,
        y,
        loss="mse",
        optimizer=optim.Adam(model, lr=1e-2),
        epochs=2,
        batch_size=16,
        verbose=False,
        validation_data=(x, y),
        callbacks=[training.ModelCheckpoint(path)],
    )
    loaded = rnnfast.load(path)
    assert isinstance(loaded, rnnfast.Sequential)
    model.eval()
    assert training.predict(loaded, x).shape == (32, 1)


def test_stream_windows_cut_parallel_streams_in_order():
    tokens = np.arange(101)
    x, y = training.stream_windows(tokens, batch_size=2, bptt=10)
    assert x.shape == y.shape == (5, 2, 10)
    np.testing.assert_array_equal(x[0, 0], np.arange(10))
    np.testing.assert_array_equal(x[1, 0], np.arange(10, 20))  # the next window continues it
    np.testing.assert_array_equal(x[0, 1], np.arange(50, 60))
    np.testing.assert_array_equal(y, x + 1)
    with pytest.raises(ValueError, match="tokens"):
        training.stream_windows(np.arange(5), batch_size=2, bptt=10)


def test_truncated_bptt_learns_a_pattern_longer_than_a_window():
    # the next token is the one 3 steps back: learnable only through the carried state
    # at the start of each window of 4 steps
    rng = np.random.default_rng(0)
    tokens = np.tile(rng.integers(0, 4, 3), 3000)
    model = rnnfast.Sequential(
        [
            rnnfast.Embedding(4, 8, seed=0),
            rnnfast.RNN(8, 32, batch_first=True, return_sequences=True, stateful=True, seed=1),
            rnnfast.Dense(32, 4, seed=2),
        ]
    )
    history = training.fit_stream(
        model,
        tokens,
        loss="cross_entropy",
        optimizer=optim.Adam(model, lr=1e-2),
        batch_size=8,
        bptt=4,
        epochs=3,
        clip_norm=5.0,
        validation_tokens=tokens[:2000],
        verbose=False,
    )
    assert history["loss"][-1] < np.log(4) / 5  # far below a uniform guess
    assert history["val_loss"][-1] < np.log(4) / 5


def test_unknown_loss_and_mismatched_targets_are_refused(rng):
    x, y = _sum_task(rng, n=16)
    model = _regression_model()
    with pytest.raises(ValueError, match="loss"):
        training.fit(model, x, y, loss="hinge", optimizer=optim.SGD(model, lr=0.1))
    with pytest.raises(ValueError, match="y"):
        training.fit(model, x, y[:8], loss="mse", optimizer=optim.SGD(model, lr=0.1))


def test_fit_and_distributed_fit_take_one_definition_of_the_keywords():
    """training.fit and rnnfast.distributed.fit (fit_stream likewise) list the same keywords in
    the same order, from one definition; distributed adds its own and seeds with 0 by default."""
    import inspect

    from rnnfast import distributed

    for local, parallel, own in (
        (training.fit, distributed.fit, ["distributed"]),
        (training.fit_stream, distributed.fit_stream, []),
    ):
        mine = inspect.signature(local).parameters
        theirs = inspect.signature(parallel).parameters
        shared = [name for name in mine if name not in own]
        assert list(theirs)[: len(shared)] == shared
        for name in shared:
            if name != "seed":
                assert theirs[name].default == mine[name].default, name
    assert list(inspect.signature(distributed.fit).parameters)[-2:] == [
        "broadcast",
        "reseed_dropout",
    ]
    assert inspect.signature(distributed.fit).parameters["seed"].default == 0
    assert inspect.signature(training.fit).parameters["seed"].default is None
    with pytest.raises(TypeError, match=r"fit\(\): got an unexpected keyword argument 'epoch'"):
        training.fit(None, [[1.0]], [[1.0]], loss="mse", optimizer=None, epoch=2)
    with pytest.raises(TypeError, match=r"fit\(\): missing a required argument: 'loss'"):
        training.fit(None, [[1.0]], [[1.0]], optimizer=None)


def test_training_does_not_import_distributed():
    """training sits below distributed (DESIGN.md's layer order): fit(distributed=True) before
    rnnfast.distributed was imported says what to do, and imports nothing."""
    import subprocess
    import sys

    code = (
        "import sys, pytest, rnnfast\n"
        "from rnnfast import training\n"
        "with pytest.raises(RuntimeError, match=r'call rnnfast\\.distributed\\.init\\(\\) first'):\n"
        "    training.fit(None, [[1]], [[1]], loss='mse', optimizer=None, distributed=True)\n"
        "assert 'rnnfast.distributed' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
