"""rnnfast.distributed: data-parallel training on MPI.

The MPI tests start ``mpiexec -n N`` (N = 1, 2, 3) on 127.0.0.1 with this interpreter running
tests/distributed_worker.py, once per N for all the cases (each rank writes its verdicts to a
JSON file), and stop it (the whole process group) when it is done or past its time limit. They
skip where mpi4py or mpiexec is missing (``pip install ".[mpi]"`` installs both), unless
RNNFAST_REQUIRE_MPI=1, which makes them fail instead (as in CI).

The sampler and the checks that need no MPI run everywhere.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from small_data import write_text

from rnnfast import distributed as dist

WORKER = Path(__file__).with_name("distributed_worker.py")
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
REQUIRE = os.environ.get("RNNFAST_REQUIRE_MPI") == "1"
LIMIT_S = 60  # one launch runs all the cases (about 1 s here); a hang fails instead of waiting
CASES = [
    "broadcast_parameters",
    "model_mismatch",
    "identical_after_step",
    "step_equals_whole_batch",
    "gated_step_equals_whole_batch",
    "fit_equals_training_fit",
    "fit_ragged_equals_training_fit",
    "fit_stream_equals",
    "broadcast_optimizer_state",
    "overlap_order",
    "dropout_per_rank",
    "dropout_p0_equals_whole_batch",
    "training_fit_distributed",
    "fit_bf16_equals_training_fit",
]
SIZES = [1, 2, 3]


def _mpiexec():
    """The mpiexec beside this interpreter (the mpich wheel's, in a virtual environment), else
    the one on PATH; None where mpi4py or mpiexec is missing."""
    if importlib.util.find_spec("mpi4py") is None:
        return None
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else shutil.which("mpiexec")


MPIEXEC = _mpiexec()


def _need_mpi():
    if MPIEXEC is None:
        reason = (
            "mpi4py or mpiexec is missing: pip install '.[mpi]' (mpi4py and mpich) to run "
            "the data-parallel tests"
        )
        if REQUIRE:
            pytest.fail(f"RNNFAST_REQUIRE_MPI=1: {reason}")
        pytest.skip(reason)


def _host_args(n):
    """Every rank on this machine, 127.0.0.1: MPICH's hydra or Open MPI's mpirun."""
    version = subprocess.run(
        [MPIEXEC, "--version"], capture_output=True, text=True, timeout=30
    ).stdout
    if "Open MPI" in version or "OpenRTE" in version:
        return ["--host", f"127.0.0.1:{n}", "--oversubscribe"]
    return ["-hosts", "127.0.0.1"]


def launch(n, cases, outdir, limit=LIMIT_S):
    """Run the worker on n ranks: (return code, stdout + stderr, seconds, {rank: results})."""
    outdir.mkdir(parents=True, exist_ok=True)
    rc, output, seconds = run_ranks(n, [str(WORKER), str(outdir), ",".join(cases)], limit)
    results = {}
    for r in range(n):
        path = outdir / f"rank{r}.json"
        if path.exists():
            results[r] = json.loads(path.read_text())
    return rc, output, seconds, results


def run_ranks(n, args, limit, cwd=None):
    """``mpiexec -n n python ARGS`` on 127.0.0.1: (return code, stdout + stderr, seconds)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    command = [MPIEXEC, *_host_args(n), "-n", str(n), sys.executable, *args]
    start = time.perf_counter()
    code, output = _run_group(command, env, limit, f"mpiexec -n {n}", cwd)
    return code, output, time.perf_counter() - start


def _run_group(command, env, limit, what, cwd=None):
    """``command`` in its own process group, stdout and stderr together: (return code, output);
    past ``limit`` seconds the whole group is killed and the test fails."""
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=cwd,
        start_new_session=True,  # its own process group: stopped whole below
    )
    try:
        output, _ = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        pytest.fail(f"{what} still running after {limit} s (a hang?):\n{output}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode, output


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One launch per number of ranks, made when a test first asks for it."""
    done = {}

    def get(n):
        if n not in done:
            done[n] = launch(n, CASES, tmp_path_factory.mktemp(f"ranks{n}"))
        return done[n]

    return get


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("n", SIZES)
def test_ranks(runs, n, case):
    """Each case on every rank of an n-rank run (the cases are in distributed_worker.py):
    broadcasts, a model that differs between ranks, identical parameters after steps, N ranks
    equal to one process on the whole batch (SGD / Adam / AdamW, clipping, a Module, one layer,
    two backwards per step; for the Elman layer, GRU and LSTM), fit / fit_stream equal to
    training's on the whole batch (and rank 0 alone printing and checkpointing), the order of
    the overlapped reductions."""
    _need_mpi()
    rc, output, _, results = runs(n)
    for r in range(n):
        verdict = results.get(r, {}).get(case, {}).get("verdict")
        if verdict is None:
            pytest.fail(f"rank {r} of {n} did not report case {case} (rc={rc}):\n{output}")
        if verdict.startswith("skip:"):
            pytest.skip(f"{n} rank(s): {verdict[5:].strip()}")
        assert verdict == "ok", f"rank {r} of {n}, case {case}:\n{verdict}\n{output}"
    assert rc == 0, output


def test_a_rank_that_raises_aborts_every_rank(tmp_path):
    """Rank 1 raises while rank 0 waits in a barrier: init()'s hook aborts both, quickly."""
    _need_mpi()
    rc, output, seconds, _ = launch(2, ["raise_on_rank1"], tmp_path, limit=30)
    assert rc != 0, output
    assert "[rank 1] RuntimeError: rank 1 fails on purpose" in output, output
    assert "aborting all 2 ranks" in output, output
    assert seconds < 30


def test_dropout_repeats_across_runs(tmp_path):
    """Two launches of 2 ranks training with dropout: the same parameters (on both ranks, in
    both runs) and the same masks in both runs, different masks on the two ranks."""
    _need_mpi()
    figures = []
    for run in ("a", "b"):
        rc, output, _, results = launch(2, ["dropout_per_rank"], tmp_path / run)
        assert rc == 0, output
        figures.append([results[r]["dropout_per_rank"]["figures"] for r in range(2)])
    assert figures[0] == figures[1], figures
    (first, second) = figures[0]
    assert first["parameters"] == second["parameters"]
    assert first["masks"] != second["masks"]


def test_seed_dropout_without_mpi():
    """seed_dropout with rank= given: rank r's generator i is default_rng([seed, r, i])."""
    import rnnfast

    def model():
        rnn = rnnfast.RNN(3, 4, num_layers=2, dropout=0.5, batch_first=True, seed=1)
        return rnnfast.Sequential([rnn, rnnfast.Dropout(0.5, seed=2)])

    x = np.ones((2, 5, 3), dtype=np.float32)
    outs = {}
    for r in (0, 1, 0):
        m = model()
        assert dist.seed_dropout(m, 9, rank=r) == 2
        m.train()
        outs.setdefault(r, []).append(m(x))
    np.testing.assert_array_equal(*outs[0])  # the same rank: the same masks
    assert not np.array_equal(outs[0][0], outs[1][0])  # another rank: others
    with pytest.raises(ValueError, match="seed: expected an int >= 0"):
        dist.seed_dropout(model(), -1, rank=0)


def test_training_fit_distributed_without_init_says_so():
    from rnnfast import training

    with pytest.raises(RuntimeError, match=r"call rnnfast\.distributed\.init\(\) first"):
        training.fit(None, [[1]], [[1]], loss="mse", optimizer=None, distributed=True)


def _val_perplexity(model_path, root, batch_size, bptt):
    """exp of training.evaluate_stream's loss of a saved charlm model, unrounded."""
    import rnnfast
    from rnnfast import datasets, training

    sys.path.insert(0, str(EXAMPLES))
    try:
        from charlm import encode_text
    finally:
        sys.path.remove(str(EXAMPLES))
    _, val_ids, _ = encode_text(datasets.load("tinyshakespeare", root))
    model = rnnfast.load(model_path)
    loss = training.evaluate_stream(
        model, val_ids, loss="cross_entropy", batch_size=batch_size, bptt=bptt
    )
    return math.exp(loss)


def test_charlm_distributed_matches_charlm(tmp_path):
    """examples/charlm.py --distributed on 2 ranks x 2 streams takes the steps of charlm.py on
    4 streams: the same RESULT line's perplexity, and the saved models' validation
    perplexities (unrounded) equal within 1e-6 relative (float32 rounding of the reduction
    apart); rank 0 alone reports and saves."""
    _need_mpi()
    root, vocab = write_text(tmp_path / "data", np.random.default_rng(0), lines=60)
    small = ["--data", str(root), "--epochs", "2", "--embed", "8", "--hidden", "16"]
    small += ["--batch-size", "4", "--bptt", "10", "--lr", "0.01"]
    small += ["--length", "5", "--beam-width", "1"]
    example = [str(EXAMPLES / "charlm.py"), *small]
    rc, output, _ = run_ranks(2, [*example, "--distributed", "--out", "d"], 120, cwd=tmp_path)
    assert rc == 0, output
    found = re.findall(r"RESULT val_perplexity=([0-9.]+) time_s=[0-9.]+ ranks=2", output)
    assert len(found) == 1, output  # rank 0 only
    assert output.count("model saved to") == 1, output
    single = subprocess.run(
        [sys.executable, *example, "--out", "s"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert single.returncode == 0, single.stderr
    expected = re.search(r"RESULT val_perplexity=([0-9.]+) time_s=[0-9.]+\n", single.stdout)
    assert float(found[0]) < vocab / 3  # it learned (the uniform guess: vocab)
    assert found[0] == expected.group(1), (found, expected.group(0))
    ppl = [_val_perplexity(tmp_path / d / "charlm.npz", root, 4, 10) for d in ("d", "s")]
    assert ppl[0] == pytest.approx(ppl[1], rel=1e-6), ppl
    assert float(found[0]) == pytest.approx(ppl[0], abs=1e-4)


def test_mpi4py_is_imported_only_by_init():
    code = "import sys, rnnfast.distributed; assert 'mpi4py' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_fit_without_init_says_so():
    assert not dist.is_initialized()
    with pytest.raises(RuntimeError, match=r"call rnnfast\.distributed\.init\(\) first"):
        dist.fit(None, [[1]], [[1]], loss="mse", optimizer=None)
    with pytest.raises(RuntimeError, match=r"init\(\) first"):
        dist.rank()
    with pytest.raises(RuntimeError, match=r"init\(\) first"):
        dist.DistributedSampler(10, 2)  # rank and size come from init unless given


# ---- the sampler: no MPI needed (rank and size given) -------------------------------------------


def _epoch(n, batch_size, size, **kwargs):
    """Each rank's batches of one epoch."""
    return [
        list(dist.DistributedSampler(n, batch_size, rank=r, size=size, **kwargs))
        for r in range(size)
    ]


@pytest.mark.parametrize("size", [1, 2, 3, 4])
@pytest.mark.parametrize("n", [12, 24, 60])
@pytest.mark.parametrize("shuffle", [True, False])
def test_sampler_covers_every_item_once(size, n, shuffle):
    """n a multiple of size: no padding; every item exactly once per epoch; the same number of
    batches, of the same sizes, on every rank."""
    per_rank = _epoch(n, 5, size, shuffle=shuffle, seed=3)
    counts = {len(b) for b in per_rank}
    assert len(counts) == 1, counts
    assert len(per_rank[0]) == len(dist.DistributedSampler(n, 5, rank=0, size=size))
    for k in range(len(per_rank[0])):
        assert len({len(b[k]) for b in per_rank}) == 1, f"batch {k}: sizes differ"
    items = np.concatenate([i for b in per_rank for i in b])
    assert sorted(items.tolist()) == list(range(n))


@pytest.mark.parametrize("size", [2, 3, 4])
def test_sampler_pads_by_repeating(size):
    n = 10 * size + 1  # one item too many: the last global batch is padded
    per_rank = _epoch(n, 4, size, seed=1)
    assert len({len(b) for b in per_rank}) == 1
    last = [b[-1] for b in per_rank]
    assert len({len(b) for b in last}) == 1
    items = np.concatenate([i for b in per_rank for i in b])
    assert set(items.tolist()) == set(range(n))
    assert len(items) == n + (-n % size)  # size - 1 repeats


@pytest.mark.parametrize("size", [2, 3])
def test_sampler_drop_last(size):
    n = 7 * size * 3 + 5
    per_rank = _epoch(n, 3, size, seed=2, drop_last=True)
    assert {len(b) for b in per_rank} == {7}
    assert {len(i) for b in per_rank for i in b} == {3}
    items = np.concatenate([i for b in per_rank for i in b])
    assert len(set(items.tolist())) == len(items) == 7 * size * 3
    with pytest.raises(ValueError, match="no full global batch"):
        dist.DistributedSampler(5, 3, rank=0, size=2, drop_last=True)


def test_sampler_global_batches_are_one_process_batches():
    """Global batch k (the ranks' batches k, in rank order) is batch k of one process with
    batch_size * size, in the same shuffled order; epochs differ, seeds repeat."""
    size, B, n = 3, 4, 50 * 3
    per_rank = _epoch(n, B, size, seed=7)
    single = list(dist.DistributedSampler(n, B * size, rank=0, size=1, seed=7))
    for k, whole in enumerate(single):
        np.testing.assert_array_equal(np.concatenate([b[k] for b in per_rank]), whole)
    sampler = dist.DistributedSampler(n, B, rank=0, size=size, seed=7)
    first, second = list(sampler), list(sampler)  # iterating moves to the next epoch
    assert not all(np.array_equal(a, b) for a, b in zip(first, second))
    sampler.set_epoch(0)
    assert all(np.array_equal(a, b) for a, b in zip(first, list(sampler)))


@pytest.mark.parametrize("size", [2, 3])
def test_sampler_buckets_by_length(size):
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 40, size=120 * size)
    per_rank = _epoch(len(lengths), 6, size, seed=4, lengths=lengths)
    assert len({len(b) for b in per_rank}) == 1
    items = np.concatenate([i for b in per_rank for i in b])
    assert sorted(items.tolist()) == list(range(len(lengths)))
    spread = np.mean([np.ptp(lengths[i]) for b in per_rank for i in b])
    assert spread < np.ptp(lengths) / 4  # similar lengths together
    tokens = _epoch(len(lengths), 64, size, seed=4, lengths=lengths, max_tokens=100)
    assert len({len(b) for b in tokens}) == 1
    assert len(tokens[0]) == len(
        dist.DistributedSampler(
            len(lengths), 64, rank=0, size=size, seed=4, lengths=lengths, max_tokens=100
        )
    )


def test_sampler_checks_its_arguments():
    with pytest.raises(ValueError, match=r"rank: expected an int in \[0, 1\], got 2"):
        dist.DistributedSampler(10, 2, rank=2, size=2)
    with pytest.raises(TypeError, match=r"seed: expected an int, got None \(NoneType\)"):
        dist.DistributedSampler(10, 2, rank=0, size=2, seed=None)
    with pytest.raises(ValueError, match="batch_size: expected an int >= 1"):
        dist.DistributedSampler(10, 0, rank=0, size=2)
    with pytest.raises(TypeError, match="shuffle: expected a bool"):
        dist.DistributedSampler(10, 2, rank=0, size=2, shuffle=1)
    with pytest.raises(ValueError, match=r"lengths: expected shape \(10,\)"):
        dist.DistributedSampler(10, 2, rank=0, size=2, lengths=[1, 2])


def test_bench_cost_model():
    """bench/system/distributed.py's cost model: the charlm model's 404 KiB, the ring allreduce's
    formula, and the batch for 90% efficiency (no MPI needed)."""
    from bench import REPO
    from bench.system import distributed as bench

    grad = bench.gradient_bytes(64, 256)
    assert round(grad / 1024) == 404
    rows = bench.cost_model(0.02, 32, grad, latency_s=30e-6)
    row = next(r for r in rows if r["gbit"] == 10 and r["machines"] == 8)
    expected = 2 * 7 / 8 * grad / 1.25e9 + 14 * 30e-6
    assert row["allreduce_s"] == pytest.approx(expected)
    assert row["efficiency"] == pytest.approx(0.02 / (0.02 + expected))
    need = row["streams_for_target"]
    assert 9 * expected <= need * 0.02 / 32 < 9 * expected + 0.02 / 32
    done = subprocess.run(
        [sys.executable, "-m", "bench.system.distributed", "--cost-model", "--compute-ms", "20"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    assert "64" in done.stdout and "efficiency" in done.stdout, done.stdout


# ---- across machines: two network namespaces of this machine -------------------------------------

NETNS_CASES = ["broadcast_parameters", "step_equals_whole_batch", "fit_equals_training_fit"]
LAUNCHER = """#!/bin/sh
# hydra's ssh launcher, into a namespace: [options] HOST COMMAND... runs COMMAND in HOST's
while [ "${1#-}" != "$1" ]; do shift; done
host=$1; shift
case $host in
  10.77.0.1) ns=NS_A;;
  10.77.0.2) ns=NS_B;;
  *) echo "netns launcher: unknown host $host" >&2; exit 1;;
esac
exec ip netns exec $ns sh -c "$*"
"""


def _ip(*args, check=True):
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done


def _veth_bytes(ns, direction):
    path = f"/sys/class/net/rn0/statistics/{direction}_bytes"
    return int(_ip("netns", "exec", ns, "cat", path).stdout)


def test_two_network_namespaces_over_tcp(tmp_path):
    """Two "machines": network namespaces A (10.77.0.1) and B (10.77.0.2) joined by a veth
    pair (rn0 in each). mpiexec runs in A with hydra's ssh launcher replaced by a script that
    enters the host's namespace (`ip netns exec`), so rank 0 runs in A and rank 1 in B; MPICH
    is kept off shared memory (MPIR_CVAR_NOLOCAL=1) and on libfabric's TCP provider over rn0.
    The ranks then pass the equality cases (N ranks = one process on the whole batch, float64)
    and their bytes go through the veth. Skips where `ip` is missing or namespaces cannot be
    made (no CAP_SYS_ADMIN / CAP_NET_ADMIN: not root, or a container without them)."""
    _need_mpi()
    if shutil.which("ip") is None:
        pytest.skip("the `ip` command (iproute2) is missing: no network namespaces")
    if "Open MPI" in subprocess.run([MPIEXEC, "--version"], capture_output=True, text=True).stdout:
        pytest.skip("the namespace launch uses MPICH's hydra (-launcher-exec); this is Open MPI")
    tag = f"rnf{os.getpid() % 100000}"
    ns_a, ns_b = f"{tag}a", f"{tag}b"
    probe = _ip("netns", "add", ns_a, check=False)
    if probe.returncode != 0:
        pytest.skip(f"`ip netns add` is not permitted here: {probe.stderr.strip()}")
    try:
        _ip("netns", "add", ns_b)
        _ip("link", "add", f"{tag}x", "type", "veth", "peer", "name", f"{tag}y")
        for ns, dev, addr in ((ns_a, f"{tag}x", "10.77.0.1"), (ns_b, f"{tag}y", "10.77.0.2")):
            _ip("link", "set", dev, "netns", ns)
            _ip("-n", ns, "link", "set", dev, "name", "rn0")
            _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", "rn0")
            _ip("-n", ns, "link", "set", "rn0", "up")
            _ip("-n", ns, "link", "set", "lo", "up")
        launcher = tmp_path / "netns_launcher.sh"
        launcher.write_text(LAUNCHER.replace("NS_A", ns_a).replace("NS_B", ns_b))
        launcher.chmod(0o755)
        outdir = tmp_path / "out"
        outdir.mkdir()
        env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        env.update(MPIR_CVAR_NOLOCAL="1", MPIR_CVAR_CH4_NETMOD="ofi", FI_PROVIDER="tcp")
        env.update(FI_TCP_IFACE="rn0", UCX_NET_DEVICES="rn0", UCX_TLS="tcp")
        command = ["ip", "netns", "exec", ns_a, MPIEXEC, "-launcher", "ssh"]
        command += ["-launcher-exec", str(launcher), "-iface", "rn0"]
        command += ["-hosts", "10.77.0.1,10.77.0.2", "-n", "2", "-ppn", "1"]
        command += [sys.executable, str(WORKER), str(outdir), ",".join(NETNS_CASES)]
        sent_before = _veth_bytes(ns_b, "tx")
        code, output = _run_group(command, env, LIMIT_S, "the namespace run")
        sent = _veth_bytes(ns_b, "tx") - sent_before
        print(f"rank 1 sent {sent} bytes over the veth")
        assert code == 0, output
        for r in range(2):
            results = json.loads((outdir / f"rank{r}.json").read_text())
            for case in NETNS_CASES:
                assert results[case]["verdict"] == "ok", (r, case, results[case], output)
        figures = results["step_equals_whole_batch"]["figures"]
        assert max(figures.values()) < 1e-10, figures
        assert sent > 10_000, f"rank 1 sent only {sent} bytes over the veth"
    finally:
        for ns in (ns_a, ns_b):
            _ip("netns", "del", ns, check=False)  # the veth pair goes with them


def test_seed_dropout_asks_the_layers_for_their_generators():
    """seed_dropout reseeds what each layer names in random_generators(), through the
    containers' children: a layer of one's own included, and nothing else."""
    import rnnfast

    class Noisy:
        """A layer of one's own that draws noise from two generators."""

        def __init__(self):
            self.noise = np.random.default_rng(1)
            self.other = np.random.default_rng(2)
            self.kept = np.random.default_rng(3)  # not training noise: not named

        def random_generators(self):
            return {"noise": self.noise, "other": self.other}

        def __call__(self, x):
            return x

        def backward(self, d_out):
            return d_out

    noisy = Noisy()
    jordan = rnnfast.JordanRNN(2, 3, 2, seed=0)
    coins = jordan.random_generators()
    model = rnnfast.Sequential([rnnfast.Dropout(0.5, seed=0), noisy, jordan])
    assert dist.seed_dropout(model, 4, rank=1) == 3
    assert coins == {}
    expected = [np.random.default_rng([4, 1, i]).random(3) for i in range(3)]
    got = [model[0]._rng.random(3), noisy.noise.random(3), noisy.other.random(3)]
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(noisy.kept.random(3), np.random.default_rng(3).random(3))
