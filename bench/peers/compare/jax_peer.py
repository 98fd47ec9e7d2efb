"""compare's JAX peer, the parent's side: one child process per thread count
(``python -m bench.peers.compare.jax_worker``, whose docstring has the protocol and the cells),
each pinned to that many cores before it imports jax, kept for the whole run.

JAX ignores thread-count flags: XLA's CPU client starts as many threads as the process has CPUs.
So "JAX at n threads" is JAX in a process pinned with os.sched_setaffinity to n cores, the first
n of this process's (where rnnfast's n threads run on a machine with n cores). JAX is never
imported in this process. Its runners' run() asks the child for one call's named results; their
timed() has the child time itself (bench._timing.time_each, the same warm-up and repeats as the
other libraries) while this process waits, so that no pipe round trip is in the timing.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import pickle
import subprocess
import sys

from bench import REPO
from bench._common import cores_for, log
from bench.peers.compare.shapes import MODES, PeerUnavailable, Problem


def jax_version() -> str | None:
    """jax's installed version, without importing it; None where it is not installed."""
    if importlib.util.find_spec("jax") is None:
        return None
    try:
        return importlib.metadata.version("jax")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


class Worker:
    """One child process pinned to cores; call() sends a request and returns its answer."""

    def __init__(self, cores: list):
        self.cores = cores
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.peers.compare.jax_worker", ",".join(map(str, cores))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=REPO,
        )

    def call(self, *request):
        try:
            pickle.dump(request, self.proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            self.proc.stdin.flush()
            status, value = pickle.load(self.proc.stdout)
        except (BrokenPipeError, EOFError):
            raise RuntimeError(
                f"the JAX worker on cores {self.cores} exited (code {self.proc.wait()})"
            ) from None
        if status == "error":
            raise RuntimeError(f"the JAX worker on cores {self.cores} failed:\n{value}")
        return value

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                pickle.dump(("exit",), self.proc.stdin)
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()


class RemoteRun:
    """A runner's run() whose call happens in the worker; timed() has the worker time it."""

    def __init__(self, worker: Worker, mode: str):
        self.worker, self.mode = worker, mode

    def __call__(self) -> dict:
        return self.worker.call("run", self.mode)

    def timed(self, repeats: int, min_repeat_s: float, warmup_s: float) -> dict:
        return self.worker.call("time", self.mode, repeats, min_repeat_s, warmup_s)


class JaxPeer:
    """The run's JAX workers, one per thread count, started when first needed; a context manager
    that stops them. Where jax is not installed, runners() raises PeerUnavailable."""

    def __init__(self):
        self.workers = {}
        self.version = jax_version()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        for worker in self.workers.values():
            worker.close()
        self.workers.clear()

    def worker(self, threads: int) -> Worker:
        if threads not in self.workers:
            cores = cores_for(threads)
            log(f"starting the JAX worker for {threads} thread(s), pinned to cores {cores}")
            self.workers[threads] = Worker(cores)
        return self.workers[threads]

    def runners(self, p: Problem, threads: int) -> dict:
        """Every mode of the problem, run in the worker of this thread count."""
        if self.version is None:
            raise PeerUnavailable("JAX skipped: the jax package is not installed")
        worker = self.worker(threads)
        worker.call(
            "load",
            {
                "cell": p.cell.name,
                "x": p.x,
                "w_ih": p.w_ih,
                "w_hh": p.w_hh,
                "b_ih": p.b_ih,
                "b_hh": p.b_hh,
                "dy": p.dy,
            },
        )
        return {mode: (RemoteRun(worker, mode), dict) for mode in MODES}

    def note(self) -> str | None:
        """What the report says of how JAX ran, once it has."""
        if not self.workers:
            return None
        pinned = "; ".join(f"{n} thread(s) on cores {w.cores}" for n, w in self.workers.items())
        return (
            f"JAX {self.version} ran in a child process per thread count, pinned with "
            f"os.sched_setaffinity before jax was imported ({pinned}): JAX ignores thread "
            "flags; it timed itself there, with the same warm-up and repeats"
        )
