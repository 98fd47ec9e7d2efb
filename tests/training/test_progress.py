"""The progress of training for people and for logs (``verbose``, Keras's): a live bar on a
terminal, one line per epoch in a log (``"auto"``, the default), 0 / 1 / 2 as in Keras. Run
with stderr and stdout on a pseudo-terminal (the pty module) and on pipes, for fit, fit_stream
and fit_seq2seq (rnnfast.distributed's fit prints on rank 0 with the same modes)."""

from __future__ import annotations

import io
import os
import pty
import re
import sys
import threading
import time

import numpy as np
import pytest

import rnnfast
from rnnfast import optim, training
from rnnfast.training._progress import resolve_verbose

EPOCHS = 3
END = "<end of output>"
REDRAW = re.compile(r"\r(?!\n)")  # a carriage return that redraws (a terminal writes \r\n too)


def _fit(verbose, epochs=EPOCHS):
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((64, 3, 2), np.float32), rng.standard_normal((64, 1), np.float32)
    model = rnnfast.Sequential(
        [rnnfast.RNN(2, 3, batch_first=True, return_sequences=False, seed=0), rnnfast.Dense(3, 1)]
    )
    kwargs = {} if verbose is None else {"verbose": verbose}
    return training.fit(
        model, x, y, loss="mse", optimizer=optim.SGD(model, lr=0.01), epochs=epochs,
        batch_size=2, **kwargs,
    )  # fmt: skip


def _fit_stream(verbose):
    model = rnnfast.Sequential(
        [
            rnnfast.Embedding(5, 3, seed=0),
            rnnfast.RNN(3, 4, batch_first=True, stateful=True, seed=1),
            rnnfast.Linear(4, 5, seed=2),
        ]
    )
    kwargs = {} if verbose is None else {"verbose": verbose}
    return training.fit_stream(
        model, np.arange(400) % 5, loss="cross_entropy", optimizer=optim.SGD(model, lr=0.1),
        batch_size=2, bptt=4, epochs=EPOCHS, **kwargs,
    )  # fmt: skip


def _fit_seq2seq(verbose):
    model = rnnfast.Seq2Seq(6, 6, 3, 4, seed=0)
    pairs = [np.array([2 + i % 4, 3]) for i in range(40)]
    kwargs = {} if verbose is None else {"verbose": verbose}
    return training.fit_seq2seq(
        model, pairs, pairs, optimizer=optim.SGD(model, lr=0.1), bos=1, epochs=EPOCHS,
        batch_size=2, seed=0, **kwargs,
    )  # fmt: skip


FITS = {"fit": _fit, "fit_stream": _fit_stream, "fit_seq2seq": _fit_seq2seq}


def on_terminal(run):
    """What ``run()`` shows with stdout and stderr on a pseudo-terminal."""
    master, slave = pty.openpty()
    out = os.fdopen(slave, "w", buffering=1)
    shown = []

    def drain():  # read while the run writes: a full pty buffer would block the writer
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the terminal's other side closed
                return
            if not chunk:
                return
            shown.append(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    saved = sys.stdout, sys.stderr
    try:
        sys.stdout = sys.stderr = out  # set here: pytest's capture resets them between phases
        run()
        out.write(END)  # read up to it before closing: a closed pty drops what is unread
        out.flush()
    finally:
        sys.stdout, sys.stderr = saved
    deadline = time.monotonic() + 10
    while END.encode() not in b"".join(shown) and time.monotonic() < deadline:
        time.sleep(0.01)
    out.close()
    reader.join(timeout=10)
    os.close(master)
    return b"".join(shown).decode().split(END)[0]


@pytest.mark.parametrize("name", list(FITS))
def test_a_log_gets_one_line_per_epoch(name, capsys):
    """Into a pipe or a file (not a terminal), the default prints one line per epoch, and
    nothing is redrawn."""
    FITS[name](None)
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert len(lines) == EPOCHS, captured.out
    for epoch, line in enumerate(lines, 1):
        assert re.match(rf"epoch {epoch}/{EPOCHS} loss=\d+\.\d{{4}} .* batches in .* s \(", line)
    assert captured.err == ""
    assert "\r" not in captured.out


def test_the_modes_into_a_log(capsys):
    _fit(0)
    assert capsys.readouterr() == ("", "")
    _fit(2)
    two = capsys.readouterr()
    assert len(two.out.splitlines()) == EPOCHS and two.err == ""
    _fit(True)  # True is "auto"
    assert len(capsys.readouterr().out.splitlines()) == EPOCHS
    _fit(False)
    assert capsys.readouterr() == ("", "")
    _fit(1)  # a bar asked for: new lines at each tenth of the epoch, no carriage returns
    one = capsys.readouterr()
    assert "\r" not in one.err
    assert EPOCHS <= len(one.err.splitlines()) <= 10 * EPOCHS
    assert "[####################] 32/32" in one.err
    assert len(one.out.splitlines()) == EPOCHS


def test_a_terminal_gets_a_live_bar():
    shown = on_terminal(lambda: _fit(None))
    assert REDRAW.search(shown), shown  # redrawn in place
    assert "32/32" in shown
    for epoch in range(1, EPOCHS + 1):
        assert f"epoch {epoch}/{EPOCHS}" in shown


def test_a_terminal_with_verbose_2_gets_lines_only():
    shown = on_terminal(lambda: _fit(2))
    assert not REDRAW.search(shown), shown
    assert len(shown.splitlines()) == EPOCHS


def test_resolve_verbose():
    class Stream(io.StringIO):
        def __init__(self, tty):
            super().__init__()
            self.tty = tty

        def isatty(self):
            return self.tty

    for value, tty, mode in [
        ("auto", True, 1),
        ("auto", False, 2),
        (True, True, 1),
        (True, False, 2),
        (np.True_, False, 2),
        (False, True, 0),
        (0, True, 0),
        (1, False, 1),
        (np.int64(2), True, 2),
    ]:
        assert resolve_verbose(value, Stream(tty)) == mode, (value, tty)
    closed = io.StringIO()
    closed.close()  # its isatty() raises
    assert resolve_verbose("auto", closed) == 2  # a closed stream is no terminal
    for bad in ("yes", 3, -1):
        with pytest.raises(ValueError, match=r"verbose: expected 0, 1, 2, 'auto', True or False"):
            resolve_verbose(bad)
    for bad in (1.0, None):
        with pytest.raises(TypeError, match=r"verbose: expected 0, 1, 2, 'auto'"):
            resolve_verbose(bad)
    with pytest.raises(ValueError, match="verbose: expected"):
        _fit("always", epochs=1)  # refused before any training
