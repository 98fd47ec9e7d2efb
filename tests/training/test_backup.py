"""Training that survives a crash (``backup_dir=``): a training process killed with SIGKILL at
several points (mid-batch, half-way through a backup's write, between a backup's write and its
rename) and rerun with the same command ends with bitwise the same parameters and history as a
run never interrupted; on one process (fit, fit_stream, fit_seq2seq) and on 2 MPI ranks
(rnnfast.distributed.fit). The runs are tests/training/backup_worker.py, which kills itself
where RNNFAST_TEST_KILL says. Also: the backup file itself, and the refusals.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import rnnfast
from rnnfast import optim, training
from rnnfast.training import _archive

WORKER = Path(__file__).with_name("backup_worker.py")
LIMIT_S = 60  # one run takes about a second; a hang fails instead of waiting


def _load_worker():
    spec = importlib.util.spec_from_file_location("backup_worker", WORKER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


worker = _load_worker()


def _run(command, kill=None):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    env.pop("RNNFAST_TEST_KILL", None)
    if kill is not None:
        env["RNNFAST_TEST_KILL"] = kill
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=LIMIT_S)
    return done.returncode, done.stdout + done.stderr


def _result(path):
    with np.load(path, allow_pickle=False) as data:
        arrays = {name: data[name] for name in data.files}
    return arrays, json.loads(str(arrays.pop("__history__")))


def _reference(kind):
    """The uninterrupted run, without a backup, in this process (on one thread as the worker)."""
    with rnnfast.threads(1):
        model, history = worker.RUNS[kind](None)
    return model.state_dict(), json.loads(json.dumps(history))


def _assert_same(got, want):
    params, history = got
    want_params, want_history = want
    assert history == want_history
    assert sorted(params) == sorted(want_params)
    for name, value in want_params.items():
        np.testing.assert_array_equal(params[name], value, err_msg=name, strict=True)


def _kill_chain(command, folder, kills, killed=-signal.SIGKILL):
    """Run ``command`` once per kill point, each killed by SIGKILL where it says, checking what
    each kill leaves in the backup folder; then once to its end. Returns the backups the kills
    left. ``killed``: the status of a killed run (None: any but 0, as mpiexec's)."""
    backups = []
    for kill in kills:
        rc, output = _run(command, kill)
        assert rc == killed if killed is not None else rc != 0, (kill, rc, output)
        assert (folder / "backup.npz").is_file(), (kill, output)
        strays = list(folder.glob("backup.npz.*.tmp"))
        if kill.startswith(("write", "rename")):
            assert strays, f"{kill}: the kill came outside a backup write"
        # the backup a killed write left is the previous one, whole
        backups.append(_archive.read(folder / "backup.npz"))
        assert backups[-1]["format"] == 1 and 0 <= backups[-1]["epoch"] < worker.EPOCHS
    rc, output = _run(command)
    assert rc == 0, output
    assert not list(folder.iterdir()), "a completed run leaves no backup behind"
    return backups


# kills at the k-th optimizer step or backup write *of each rerun*: mid-epoch, at an epoch's
# end, half-way through a write, after a whole temporary file, and again after a resume
CHAINS = {
    "fit": ["step:4", "write:2", "rename:3", "step:7"],
    "stream": ["step:5", "write:4"],
    "seq2seq": ["write:3"],
}


@pytest.mark.parametrize("kind", list(CHAINS))
def test_killed_runs_resume_to_the_uninterrupted_result(kind, tmp_path):
    folder, out = tmp_path / "backup", tmp_path / "out.npz"
    command = [sys.executable, str(WORKER), kind, str(folder), str(out)]
    _kill_chain(command, folder, CHAINS[kind])
    _assert_same(_result(out), _reference(kind))


def test_killed_mpi_ranks_resume_to_the_uninterrupted_result(tmp_path):
    """2 ranks: rank 1 killed mid-epoch, rank 0 inside a backup's write. Rank 0's one backup
    holds both ranks' random streams, which differ (each rank draws masks of its own)."""
    from test_distributed import MPIEXEC, _host_args, _need_mpi

    _need_mpi()

    def command(folder, out):
        return [
            MPIEXEC, *_host_args(2), "-n", "2", sys.executable, str(WORKER), "mpi_fit",
            str(folder), str(out),
        ]  # fmt: skip

    rc, output = _run(command(tmp_path / "unused", tmp_path / "ref"))
    assert rc == 0, output
    folder = tmp_path / "backup"
    backups = _kill_chain(
        command(folder, tmp_path / "out"), folder, ["step:4@1", "write:2@0"], None
    )
    for r in range(2):
        _assert_same(_result(tmp_path / f"out.{r}.npz"), _result(tmp_path / f"ref.{r}.npz"))
    tree = backups[0]
    assert tree["processes"] == 2 and len(tree["ranks"]) == 2
    streams = [part["generators"] for part in tree["ranks"]]
    assert sorted(streams[0]) == sorted(streams[1]) and streams[0]
    assert all(streams[0][k] != streams[1][k] for k in streams[0])


# ---- in one process: a run stopped by an exception resumes the same way ------------------------


class _Crash(RuntimeError):
    pass


class _CrashAt:
    """A callback that raises at the end of epoch ``epoch`` (0-based), once."""

    def __init__(self, epoch):
        self.epoch = epoch

    def on_epoch_end(self, epoch, logs, model):
        if epoch == self.epoch:
            self.epoch = None
            raise _Crash("crash")
        return False


def _small(seed=0, hidden=4):
    return rnnfast.Sequential(
        [
            rnnfast.RNN(2, hidden, batch_first=True, return_sequences=False, seed=seed),
            rnnfast.Dropout(0.5, seed=seed + 1),
            rnnfast.Dense(hidden, 1, seed=seed + 2),
        ]
    )


def _data():
    rng = np.random.default_rng(0)
    return rng.standard_normal((20, 4, 2), np.float32), rng.standard_normal((20, 1), np.float32)


def _fit(model, folder, callbacks=(), **kwargs):
    x, y = _data()
    args = dict(loss="mse", epochs=3, batch_size=4, seed=1, verbose=0, backup_dir=folder)
    args.update(kwargs)
    return training.fit(
        model, x, y, optimizer=optim.SGD(model, lr=0.1, momentum=0.5), callbacks=callbacks, **args
    )


def test_a_run_stopped_by_an_error_resumes(tmp_path):
    want_model = _small()
    want = _fit(want_model, None)
    crash = _CrashAt(1)
    with pytest.raises(_Crash):
        _fit(_small(), tmp_path, [crash], backup_every=2)
    assert (tmp_path / "backup.npz").is_file()  # an error leaves the backup for a rerun
    model = _small()
    assert _fit(model, tmp_path, [crash], backup_every=2) == want
    for name, value in want_model.state_dict().items():
        np.testing.assert_array_equal(model.state_dict()[name], value)


def test_callback_state_is_kept(tmp_path):
    """EarlyStopping's count of epochs without improvement survives the crash: the resumed run
    stops where the uninterrupted one does (a fresh count would run two epochs longer)."""

    def stopper():  # improves at the first epoch only, then stops after 3 more
        return training.EarlyStopping(monitor="loss", patience=3, min_delta=1e9)

    want = _fit(_small(), None, [stopper()], epochs=6)
    assert len(want["loss"]) == 4
    with pytest.raises(_Crash):
        _fit(_small(), tmp_path, [stopper(), _CrashAt(2)], epochs=6)
    assert _fit(_small(), tmp_path, [stopper(), _CrashAt(None)], epochs=6) == want
    stop = stopper()
    stop.on_epoch_end(0, {"loss": 1.0}, None)
    again = stopper()
    again.load_state_dict(stop.state_dict())
    assert (again.best, again.wait) == (1.0, 0)


def test_a_backup_of_another_model_or_loop_is_refused(tmp_path):
    with pytest.raises(_Crash):
        _fit(_small(), tmp_path, [_CrashAt(1)])  # the backup of epoch 1's end stays
    other = _small(hidden=5)
    before = other.state_dict()
    with pytest.raises(ValueError, match="does not fit this model"):
        _fit(other, tmp_path, [_CrashAt(99)])
    for name, value in before.items():  # a refused backup changes nothing
        np.testing.assert_array_equal(other.state_dict()[name], value)
    with pytest.raises(ValueError, match="other callbacks"):
        _fit(_small(), tmp_path, [])
    tokens = np.arange(100) % 7
    stream_model = rnnfast.Sequential(
        [rnnfast.Embedding(7, 3, seed=0), rnnfast.RNN(3, 4, batch_first=True, seed=1)]
    )
    with pytest.raises(ValueError, match="backup of a FitLoop"):
        training.fit_stream(
            stream_model,
            tokens,
            loss=lambda out, y: (0.0, np.zeros_like(out[0] if isinstance(out, tuple) else out)),
            optimizer=optim.SGD(stream_model, lr=0.1),
            batch_size=2,
            bptt=5,
            verbose=0,
            callbacks=[_CrashAt(99)],
            backup_dir=tmp_path,
        )


def test_a_damaged_backup_is_named(tmp_path):
    (tmp_path / "backup.npz").write_bytes(b"PK\x03\x04 not a whole zip")
    with pytest.raises(ValueError, match=r"backup\.npz: not a readable training backup"):
        _fit(_small(), tmp_path)


def test_bad_arguments_are_named(tmp_path):
    with pytest.raises(ValueError, match=r"backup_every: needs backup_dir.*got backup_every=2"):
        _fit(_small(), None, backup_every=2)
    with pytest.raises(TypeError, match=r"backup_dir: expected a folder path.*got 3 \(int\)"):
        _fit(_small(), 3)
    with pytest.raises(ValueError, match=r"backup_every: expected an int >= 1, got 0"):
        _fit(_small(), tmp_path, backup_every=0)
    with pytest.raises(TypeError, match="backup_every: expected an int"):
        _fit(_small(), tmp_path, backup_every=2.0)
    model = _small()
    x, y = _data()

    class Stateless:  # steps and zeroes, but has no state to back up
        def step(self):
            pass

        def zero_grad(self):
            pass

    with pytest.raises(TypeError, match=r"backup_dir: .*no state_dict\(\).*got Stateless"):
        training.fit(model, x, y, loss="mse", optimizer=Stateless(), backup_dir=tmp_path, verbose=0)
    assert not (tmp_path / "backup.npz").exists()


# ---- the file -----------------------------------------------------------------------------------


def test_the_archive_keeps_values_and_types(tmp_path):
    tree = {
        "big": 2**127 + 5,  # a PCG64 state
        "floats": [0.1, math.inf, -0.0],
        "scalar": np.float32(1.5),
        "count": np.int64(7),
        "pair": (0.9, 0.999),
        "array": np.arange(6, dtype=np.float32).reshape(2, 3),
        "marker": {"__array__": "not an array"},
        "nested": [{"a": None, "b": True, "c": "text"}],
    }
    _archive.write(tmp_path / "t.npz", tree)
    back = _archive.read(tmp_path / "t.npz")
    assert back["big"] == tree["big"] and back["floats"][:2] == [0.1, math.inf]
    assert math.copysign(1, back["floats"][2]) == -1
    assert type(back["scalar"]) is np.float32 and back["scalar"] == 1.5
    assert type(back["count"]) is np.int64 and back["pair"] == (0.9, 0.999)
    np.testing.assert_array_equal(back["array"], tree["array"], strict=True)
    assert back["marker"] == tree["marker"] and back["nested"] == tree["nested"]
    assert [p.name for p in tmp_path.iterdir()] == ["t.npz"]  # no temporary file left
    with pytest.raises(TypeError, match="cannot be stored without pickle"):
        _archive.write(tmp_path / "u.npz", {"x": np.array([object()])})
    with pytest.raises(TypeError, match=r"backup\['x'\]: cannot store a set"):
        _archive.write(tmp_path / "u.npz", {"x": {1}})
    assert not (tmp_path / "u.npz").exists()
