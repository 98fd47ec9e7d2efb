"""The JAX peer's child process: ``python -m bench.peers.compare.jax_worker CORES`` (jax_peer.py
starts it; CORES e.g. "0,1").

JAX (XLA's CPU client) sizes its thread pools from the CPUs the process may run on and ignores
thread-count flags, so this process first pins itself to CORES with os.sched_setaffinity, and
only then imports jax: a JAX timed "at n threads" runs on n cores, the first n of the parent's.

It answers requests read from stdin, pickled, one at a time, and writes each answer to stdout,
pickled (anything else printed goes to stderr):

    ("load", problem)                    problem: {cell, x, w_ih, w_hh, b_ih, b_hh, dy}; -> None
    ("run", mode)                        -> {name: ndarray}, the named results of one call
    ("time", mode, repeats, min_repeat_s, warmup_s)   -> a bench._timing.timing dict
    ("exit",)

answered ("ok", value) or ("error", traceback). The cells (PyTorch's equations and gate order, tanh
and sigmoid) run in jax.lax.scan under jax.jit: the input projection of every step as one matmul
before the scan, then per step the recurrent matmul and the gates; fwd_last's scan keeps no
outputs; train is jax.vjp of the sequence output y, pulled back from dy, giving dx, the
weights' and biases' gradients and those of the zero initial states (dh0, dc0). Each function is
compiled once per problem and mode, before anything is timed; every call blocks until its
results are ready.
"""

from __future__ import annotations

import os
import pickle
import sys
import traceback

from bench._timing import time_each


def cell_step(cell: str, jnp, nn):
    """step(params, state, gi) -> (state', h') for the cell; gi = W_ih x_t + b_ih (B x G*H)."""

    def recurrent(params, h):
        return h @ params["w_hh"].T + params["b_hh"]

    def rnn(params, state, gi):
        h = jnp.tanh(gi + recurrent(params, state[0]))
        return (h,), h

    def gru(params, state, gi):
        (h,) = state
        gh = recurrent(params, h)
        gi_r, gi_z, gi_n = jnp.split(gi, 3, axis=-1)
        gh_r, gh_z, gh_n = jnp.split(gh, 3, axis=-1)
        r, z = nn.sigmoid(gi_r + gh_r), nn.sigmoid(gi_z + gh_z)
        n = jnp.tanh(gi_n + r * gh_n)
        h = (1 - z) * n + z * h
        return (h,), h

    def lstm(params, state, gi):
        h, c = state
        i, f, g, o = jnp.split(gi + recurrent(params, h), 4, axis=-1)
        c = nn.sigmoid(f) * c + nn.sigmoid(i) * jnp.tanh(g)
        h = nn.sigmoid(o) * jnp.tanh(c)
        return (h, c), h

    return {"rnn": rnn, "gru": gru, "lstm": lstm}[cell]


class Worker:
    """The loaded problem and its compiled functions."""

    def __init__(self, jax):
        self.jax = jax
        self.problem = None
        self.compiled = {}

    def load(self, problem: dict) -> None:
        jax, jnp = self.jax, self.jax.numpy
        cell = problem["cell"]
        B, H = problem["dy"].shape[1:]
        self.cell = cell
        self.states = ("h_n", "c_n") if cell == "lstm" else ("h_n",)
        self.params = {k: jax.device_put(problem[k]) for k in ("w_ih", "w_hh", "b_ih", "b_hh")}
        self.x = jax.device_put(problem["x"])
        self.dy = jax.device_put(problem["dy"])
        zeros = jnp.zeros((B, H), problem["x"].dtype)
        self.state0 = tuple(zeros for _ in self.states)
        self.step = cell_step(cell, jnp, jax.nn)
        self.compiled = {}

    def forward(self, params, x, state0, sequences: bool):
        """(y or None, last state) of the cell over x."""
        gi = x @ params["w_ih"].T + params["b_ih"]  # the input projection of every step

        def body(state, gi_t):
            state, h = self.step(params, state, gi_t)
            return state, (h if sequences else None)

        state, ys = self.jax.lax.scan(body, state0, gi)
        return ys, state

    def function(self, mode: str):
        """The mode's compiled function of no arguments, returning {name: jax array}."""
        if mode in self.compiled:
            return self.compiled[mode]
        jax = self.jax
        args = (self.params, self.x, self.state0)
        if mode == "train":

            def fn(params, x, state0, dy):
                def y_of(params, x, state0):
                    return self.forward(params, x, state0, True)[0]

                _, pullback = jax.vjp(y_of, params, x, state0)
                dparams, dx, dstate0 = pullback(dy)
                out = {
                    "dx": dx,
                    "dweight_ih": dparams["w_ih"],
                    "dweight_hh": dparams["w_hh"],
                    "dbias_ih": dparams["b_ih"],
                    "dbias_hh": dparams["b_hh"],
                }
                return {**out, **dict(zip(("dh0", "dc0"), dstate0))}

            args = (*args, self.dy)
        else:
            sequences = mode == "fwd_seq"

            def fn(params, x, state0):
                ys, state = self.forward(params, x, state0, sequences)
                out = dict(zip(self.states, state))
                return {"y": ys, **out} if sequences else out

        jitted = jax.jit(fn)

        def call():
            return jax.block_until_ready(jitted(*args))

        call()  # compiles
        self.compiled[mode] = call
        return call

    def run(self, mode: str) -> dict:
        import numpy as np

        return {k: np.asarray(v) for k, v in self.function(mode)().items()}

    def time(self, mode, repeats, min_repeat_s, warmup_s) -> dict:
        return time_each({"jax": self.function(mode)}, repeats, min_repeat_s, warmup_s)["jax"]


def serve(worker: Worker, requests, answers) -> None:
    """Answer requests until ("exit",) or the end of the input."""
    while True:
        try:
            request = pickle.load(requests)
        except EOFError:
            return
        op, *rest = request
        if op == "exit":
            return
        try:
            answer = ("ok", getattr(worker, op)(*rest))
        except Exception:  # the parent raises it with this traceback
            answer = ("error", traceback.format_exc())
        pickle.dump(answer, answers, protocol=pickle.HIGHEST_PROTOCOL)
        answers.flush()


def main(argv=None) -> None:
    cores = [int(c) for c in (argv or sys.argv[1:])[0].split(",")]
    os.sched_setaffinity(0, cores)  # before jax is imported: XLA sizes its pools from these
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints go to stderr
    import jax

    jax.config.update("jax_enable_x64", True)  # float64 problems stay float64
    jax.config.update("jax_platforms", "cpu")
    serve(Worker(jax), sys.stdin.buffer, answers)


if __name__ == "__main__":
    main()
