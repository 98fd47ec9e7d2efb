"""The ranks' side of tests/test_distributed.py, run as
``mpiexec -n N python tests/distributed_worker.py OUTDIR CASE[,CASE...]``.

Each rank runs the cases in order and writes ``OUTDIR/rank{r}.json``: ``{case: "ok" | "skip:
why" | traceback}``. A failing case writes the file and aborts every rank (MPI_Abort), so a
failure never leaves the others waiting in a collective call. The case ``raise_on_rank1`` raises
on rank 1 only, uncaught, to test the abort of rnnfast.distributed.init.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import sys
import time
import traceback
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

import rnnfast
from rnnfast import distributed as dist
from rnnfast import losses, optim, training

F64 = np.float64
TOL = 1e-10  # float64: the parts' sums are rounded in another order than the whole's


CELLS = {"rnn": rnnfast.RNN, "gru": rnnfast.GRU, "lstm": rnnfast.LSTM}


def charlm(seed=0, vocab=11, embed=5, hidden=7, stateful=False, dtype=F64, cell="rnn"):
    """Embedding -> RNN -> Linear, as examples/charlm.py (smaller); ``cell`` picks the
    recurrent layer (rnnfast.RNN, GRU or LSTM)."""
    return rnnfast.Sequential(
        [
            rnnfast.Embedding(vocab, embed, dtype=dtype, seed=seed),
            CELLS[cell](
                embed,
                hidden,
                batch_first=True,
                return_sequences=True,
                stateful=stateful,
                dtype=dtype,
                seed=seed + 1,
            ),
            rnnfast.Linear(hidden, vocab, dtype=dtype, seed=seed + 2),
        ]
    )


class Tagger(rnnfast.Module):
    """A Module: its children's backwards are hooked too."""

    def __init__(self, vocab=11, hidden=6, tags=3, seed=0, cell="rnn"):
        super().__init__()
        self.embed = rnnfast.Embedding(vocab, 4, dtype=F64, seed=seed)
        self.rnn = CELLS[cell](
            4, hidden, batch_first=True, return_sequences=True, dtype=F64, seed=seed + 1
        )
        self.head = rnnfast.Dense(hidden, tags, dtype=F64, seed=seed + 2)

    def forward(self, ids):
        return self.head(self.rnn(self.embed(ids)))


def tokens(seed, shape, vocab=11):
    return np.random.default_rng(seed).integers(0, vocab, size=shape)


def params_of(model):
    return [p.copy() for p in model.parameters()]


def max_diff(a, b):
    return max(float(np.max(np.abs(x - y))) for x, y in zip(a, b))


def gathered_equal(comm, arrays):
    everyone = comm.allgather([a.tobytes() for a in arrays])
    return all(e == everyone[0] for e in everyone)


def my_part(r, n, array, axis=0):
    return np.array_split(array, n, axis=axis)[r]


# ---- cases --------------------------------------------------------------------------------------


def case_broadcast_parameters(comm, r, n, out):
    model = charlm(seed=10 * r)  # different weights on every rank
    if n > 1:
        assert not gathered_equal(comm, model.parameters())
    dist.broadcast_parameters(model)
    assert gathered_equal(comm, model.parameters()), "parameters differ after the broadcast"
    assert max_diff(model.parameters(), charlm(seed=0).parameters()) == 0.0


def case_model_mismatch(comm, r, n, out):
    if n == 1:
        return "skip: one rank"
    model = charlm(hidden=7 if r != 1 else 8)
    try:
        dist.broadcast_parameters(model)
    except ValueError as error:
        text = str(error)
        assert "rank 1 differs from rank 0" in text and "(8, 5)" in text, text
    else:
        raise AssertionError("no ValueError for models that differ between ranks")


def case_identical_after_step(comm, r, n, out):
    model = charlm(seed=3)
    opt = dist.DistributedOptimizer(optim.Adam(model, lr=1e-2))
    x = tokens(100 + r, (4, 9))  # every rank its own data
    y = tokens(200 + r, (4, 9))
    for _ in range(2):
        model.zero_grad()
        _, d = losses.cross_entropy(model(x), y)
        model.backward(d)
        opt.step()
    assert gathered_equal(comm, model.parameters()), "parameters differ after the steps"
    opt.remove_hooks()


def _step_vs_whole(comm, r, n, make_model, make_opt, clip, steps=3, B=3, T=6, accumulate=False):
    """The largest difference between N ranks on the N parts of a global batch and one process
    on the whole batch, over ``steps`` steps."""
    model, whole = make_model(), make_model()
    dopt = dist.DistributedOptimizer(make_opt(model), bucket_bytes=256)
    opt = make_opt(whole)
    worst = 0.0
    for step in range(steps):
        x = tokens(step, (n * B, T))
        y = tokens(1000 + step, (n * B, T), vocab=3 if isinstance(model, Tagger) else 11)
        xr, yr = my_part(r, n, x), my_part(r, n, y)
        model.zero_grad()
        passes = 2 if accumulate else 1
        for _ in range(passes):  # gradient accumulation: the second backward adds to the first
            _, d = losses.cross_entropy(model(xr), yr)
            model.backward(d)
        dopt.synchronize()
        if clip:
            optim.clip_grad_norm(model, clip)
        dopt.step()
        whole.zero_grad()
        for _ in range(passes):
            _, d = losses.cross_entropy(whole(x), y)
            whole.backward(d)
        if clip:
            optim.clip_grad_norm(whole, clip)
        opt.step()
        worst = max(worst, max_diff(model.parameters(), whole.parameters()))
    dopt.remove_hooks()
    return worst


OPTIMIZERS = {
    "sgd": lambda m: optim.SGD(m, lr=0.5, momentum=0.9, nesterov=True, weight_decay=1e-3),
    "adam": lambda m: optim.Adam(m, lr=1e-2),
    "adamw": lambda m: optim.AdamW(m, lr=1e-2, weight_decay=0.1),
}


def case_step_equals_whole_batch(comm, r, n, out):
    figures = {}
    for name, make_opt in OPTIMIZERS.items():
        for clip in (None, 0.05):  # 0.05 clips every step here
            worst = _step_vs_whole(comm, r, n, charlm, make_opt, clip)
            figures[f"{name}, clip {clip}"] = worst
            assert worst < TOL, f"{name}, clip_norm={clip}: differs by {worst:.3g}"
    worst = _step_vs_whole(comm, r, n, Tagger, OPTIMIZERS["adam"], 1.0)
    figures["Module, adam, clip 1.0"] = worst
    assert worst < TOL, f"a Module: differs by {worst:.3g}"
    single = lambda: rnnfast.RNN(3, 5, batch_first=True, dtype=F64, seed=4)  # noqa: E731
    worst = _step_vs_single_layer(comm, r, n, single)
    figures["one RNN layer, sgd"] = worst
    assert worst < TOL, f"one layer: differs by {worst:.3g}"
    worst = _step_vs_whole(comm, r, n, charlm, OPTIMIZERS["sgd"], None, accumulate=True)
    figures["two backwards per step, sgd"] = worst
    assert worst < TOL, f"gradient accumulation: differs by {worst:.3g}"
    out["figures"] = figures


def case_gated_step_equals_whole_batch(comm, r, n, out):
    """The equality above for the gated layers: GRU and LSTM in a Sequential (Embedding fused
    into the layer where the batch has the tokens), in a Module, alone (the LSTM's (h, c)
    state), two layers and both directions."""
    figures = {}
    for cell in ("gru", "lstm"):
        for name, make_opt in OPTIMIZERS.items():
            clip = 0.05 if name == "adam" else None
            worst = _step_vs_whole(
                comm, r, n, lambda c=cell: charlm(seed=3, cell=c), make_opt, clip
            )
            figures[f"{cell}, {name}, clip {clip}"] = worst
            assert worst < TOL, f"{cell}, {name}, clip_norm={clip}: differs by {worst:.3g}"
        worst = _step_vs_whole(
            comm, r, n, lambda c=cell: Tagger(seed=2, cell=c), OPTIMIZERS["adam"], 1.0
        )
        figures[f"{cell}, Module, adam, clip 1.0"] = worst
        assert worst < TOL, f"{cell}, a Module: differs by {worst:.3g}"
        for layers, bidirectional in ((1, False), (2, True)):
            single = lambda c=cell, k=layers, b=bidirectional: CELLS[c](  # noqa: E731
                3, 5, num_layers=k, bidirectional=b, batch_first=True, dtype=F64, seed=4
            )
            worst = _step_vs_single_layer(comm, r, n, single)
            figures[f"{cell}, {layers} layer(s), bidirectional {bidirectional}, sgd"] = worst
            assert worst < TOL, f"{cell}, {layers} layer(s): differs by {worst:.3g}"
        worst = _step_vs_whole(
            comm,
            r,
            n,
            lambda c=cell: charlm(seed=3, cell=c),
            OPTIMIZERS["sgd"],
            None,
            accumulate=True,
        )
        figures[f"{cell}, two backwards per step, sgd"] = worst
        assert worst < TOL, f"{cell}, gradient accumulation: differs by {worst:.3g}"
    out["figures"] = figures


def _step_vs_single_layer(comm, r, n, make):
    layer, whole = make(), make()
    width = layer.num_directions * layer.hidden_size
    dopt = dist.DistributedOptimizer(optim.SGD(layer, lr=0.3))
    opt = optim.SGD(whole, lr=0.3)
    worst = 0.0
    for step in range(3):
        rng = np.random.default_rng(step)
        x = rng.standard_normal((2 * n, 4, 3))
        target = rng.standard_normal((2 * n, 4, width))
        for model, xs, ts, o in (
            (layer, my_part(r, n, x), my_part(r, n, target), dopt),
            (whole, x, target, opt),
        ):
            model.zero_grad()
            y, _ = model(xs)
            _, d = losses.mse_loss(y, ts)
            model.backward(d)
            o.step()
        worst = max(worst, max_diff(layer.parameters(), whole.parameters()))
    return worst


class RecordingCheckpoint(training.ModelCheckpoint):
    def __init__(self, path, log):
        super().__init__(path, save_best_only=False)
        self.log = log

    def on_epoch_end(self, epoch, logs, model):
        self.log.append(epoch)
        return super().on_epoch_end(epoch, logs, model)


def case_fit_equals_training_fit(comm, r, n, out):
    B, T = 3, 5
    N = 3 * n * B + 2 * n  # three full global batches and a smaller one (no padding)
    x, y = tokens(7, (N, T)), tokens(8, (N, T))
    xv, yv = tokens(9, (7, T)), tokens(10, (7, T))
    model, whole = charlm(seed=5), charlm(seed=5)
    log = []
    captured = io.StringIO()
    args = {"loss": "cross_entropy", "epochs": 2, "clip_norm": 0.5, "metrics": ["accuracy"]}
    with contextlib.redirect_stderr(captured), contextlib.redirect_stdout(captured):
        history = dist.fit(
            model,
            x,
            y,
            optimizer=optim.Adam(model, lr=1e-2),
            batch_size=B,
            shuffle=False,
            validation_data=(xv, yv),
            callbacks=[RecordingCheckpoint(os.path.join(out["dir"], "ckpt{epoch}.npz"), log)],
            verbose=True,
            **args,
        )
    expected = training.fit(
        whole,
        x,
        y,
        optimizer=optim.Adam(whole, lr=1e-2),
        batch_size=B * n,
        shuffle=False,
        validation_data=(xv, yv),
        verbose=False,
        **args,
    )
    worst = max_diff(model.parameters(), whole.parameters())
    assert worst < TOL, f"parameters differ from training.fit's by {worst:.3g}"
    for key in ("loss", "accuracy", "val_loss", "val_accuracy"):
        np.testing.assert_allclose(history[key], expected[key], rtol=1e-12, err_msg=key)
    everyone = comm.allgather((history, log, captured.getvalue()))
    assert all(h == history for h, _, _ in everyone), "histories differ between ranks"
    if r == 0:
        assert log == [0, 1], log
        assert captured.getvalue(), "rank 0 printed no progress"
    else:
        assert log == [], f"rank {r} ran the checkpoint: {log}"
        assert captured.getvalue() == "", f"rank {r} printed: {captured.getvalue()!r}"
    out["figures"] = {"fit vs training.fit": worst}


def case_fit_ragged_equals_training_fit(comm, r, n, out):
    """Variable lengths: each rank's loss is weighted by its share of the counted steps."""
    rng = np.random.default_rng(11)
    N = 4 * n
    x = [rng.integers(1, 11, size=int(t)) for t in rng.integers(1, 9, size=N)]
    y = [rng.integers(0, 3, size=len(s)) for s in x]
    model, whole = Tagger(seed=2), Tagger(seed=2)
    args = {"loss": "cross_entropy", "epochs": 1, "shuffle": False, "verbose": False}
    dist.fit(model, x, y, optimizer=optim.SGD(model, lr=0.5), batch_size=2, **args)
    training.fit(whole, x, y, optimizer=optim.SGD(whole, lr=0.5), batch_size=2 * n, **args)
    worst = max_diff(model.parameters(), whole.parameters())
    assert worst < TOL, f"ragged data: parameters differ from training.fit's by {worst:.3g}"
    out["figures"] = {"ragged fit vs training.fit": worst}


def case_fit_stream_equals(comm, r, n, out):
    stream = tokens(12, (n * 2 * 4 * 3 + 1,))
    val = tokens(13, (n * 2 * 4 + 1,))
    model, whole = charlm(seed=6, stateful=True), charlm(seed=6, stateful=True)
    args = {"loss": "cross_entropy", "bptt": 4, "epochs": 2, "clip_norm": 1.0, "verbose": False}
    history = dist.fit_stream(
        model, stream, optimizer=optim.Adam(model, lr=1e-2), batch_size=2, **args,
        validation_tokens=val,
    )  # fmt: skip
    expected = training.fit_stream(
        whole, stream, optimizer=optim.Adam(whole, lr=1e-2), batch_size=2 * n, **args,
        validation_tokens=val,
    )  # fmt: skip
    worst = max_diff(model.parameters(), whole.parameters())
    assert worst < TOL, f"fit_stream: parameters differ by {worst:.3g}"
    np.testing.assert_allclose(history["loss"], expected["loss"], rtol=1e-12)
    np.testing.assert_allclose(history["val_loss"], expected["val_loss"], rtol=1e-12)
    out["figures"] = {"fit_stream vs training.fit_stream": worst}


def dropout_model(seed=0, p=0.3, dtype=F64):
    """Embedding -> RNN(2 layers, dropout between them, input and recurrent dropout) ->
    Dropout -> Linear: two dropout generators, the RNN's (0) and the Dropout's (1)."""
    return rnnfast.Sequential(
        [
            rnnfast.Embedding(11, 5, dtype=dtype, seed=seed),
            rnnfast.RNN(
                5,
                7,
                num_layers=2,
                dropout=p,
                recurrent_dropout=p,
                batch_first=True,
                return_sequences=True,
                dtype=dtype,
                seed=seed + 1,
            ),
            rnnfast.Dropout(p, dtype=dtype, seed=seed + 2),
            rnnfast.Linear(7, 11, dtype=dtype, seed=seed + 3),
        ]
    )


def _dropout_fit(n, seed):
    B, T = 2, 6
    x, y = tokens(21, (4 * n * B, T)), tokens(22, (4 * n * B, T))
    model = dropout_model(seed=4)
    args = {"loss": "cross_entropy", "epochs": 2, "batch_size": B, "verbose": False}
    dist.fit(model, x, y, optimizer=optim.Adam(model, lr=1e-2), seed=seed, **args)
    return model


def _digest(arrays):
    return hashlib.sha256(b"".join(np.ascontiguousarray(a).tobytes() for a in arrays)).hexdigest()


def case_dropout_per_rank(comm, r, n, out):
    """Dropout under dist.fit: each rank's generators are default_rng([seed, rank, i]); the
    masks differ between ranks, the parameters stay equal on every rank, and a second fit
    (and a second launch: test_dropout_repeats_across_runs) repeats them bitwise."""
    model = _dropout_fit(n, seed=5)
    assert gathered_equal(comm, model.parameters()), "parameters differ between ranks"
    again = _dropout_fit(n, seed=5)
    assert max_diff(model.parameters(), again.parameters()) == 0.0, "a second fit differs"
    other = _dropout_fit(n, seed=6)
    assert max_diff(model.parameters(), other.parameters()) > 0.0, "the seed changes nothing"
    probe = dropout_model(seed=4)
    assert dist.seed_dropout(probe, 5) == 2  # the RNN's generator, then the Dropout's
    expected = np.random.default_rng([5, r, 1]).random(3)
    assert np.array_equal(probe.layers[2]._rng.random(3), expected)
    dist.seed_dropout(probe, 5)
    probe.train()
    masks = probe(tokens(30, (3, 6)))  # the same input everywhere: only the masks differ
    everyone = comm.allgather(masks.tobytes())
    assert len(set(everyone)) == n, "two ranks drew the same dropout masks"
    out["figures"] = {"parameters": _digest(model.parameters()), "masks": _digest([masks])}


def case_dropout_p0_equals_whole_batch(comm, r, n, out):
    """Dropout layers with p = 0 (no mask drawn): N ranks equal one process again."""
    B, T = 3, 5
    x, y = tokens(23, (3 * n * B, T)), tokens(24, (3 * n * B, T))
    model, whole = dropout_model(seed=7, p=0.0), dropout_model(seed=7, p=0.0)
    args = {"loss": "cross_entropy", "epochs": 2, "clip_norm": 0.5, "shuffle": False}
    args["verbose"] = False
    dist.fit(model, x, y, optimizer=optim.AdamW(model, lr=1e-2), batch_size=B, **args)
    training.fit(whole, x, y, optimizer=optim.AdamW(whole, lr=1e-2), batch_size=B * n, **args)
    worst = max_diff(model.parameters(), whole.parameters())
    assert worst < TOL, f"p = 0: parameters differ from training.fit's by {worst:.3g}"
    out["figures"] = {"dropout p=0, fit vs training.fit": worst}


def case_training_fit_distributed(comm, r, n, out):
    """training.fit(..., distributed=True) is dist.fit: the same parameters bitwise, and
    those of one process on the whole batch to rounding."""
    B, T = 2, 5
    x, y = tokens(25, (3 * n * B, T)), tokens(26, (3 * n * B, T))
    a, b, whole = charlm(seed=8), charlm(seed=8), charlm(seed=8)
    args = {"loss": "cross_entropy", "epochs": 2, "shuffle": False, "verbose": False}
    ha = training.fit(a, x, y, optimizer=optim.Adam(a, lr=1e-2), batch_size=B,
                      distributed=True, **args)  # fmt: skip
    hb = dist.fit(b, x, y, optimizer=optim.Adam(b, lr=1e-2), batch_size=B, **args)
    hw = training.fit(whole, x, y, optimizer=optim.Adam(whole, lr=1e-2), batch_size=B * n, **args)
    assert max_diff(a.parameters(), b.parameters()) == 0.0 and ha == hb
    worst = max_diff(a.parameters(), whole.parameters())
    assert worst < TOL, f"training.fit(distributed=True) differs by {worst:.3g}"
    np.testing.assert_allclose(ha["loss"], hw["loss"], rtol=1e-12)
    out["figures"] = {"training.fit(distributed=True) vs whole batch": worst}


def case_fit_bf16_equals_training_fit(comm, r, n, out):
    """fit(precision="bf16"), bf16 products emulated (any CPU): n ranks train as one process
    on the whole batch with bf16 products, to bf16's rounding. Not to float32's: each rank
    sums its rows' weight gradients, the whole batch all of them, in another order, and a
    float32 difference that moves a weight across a bf16 rounding boundary moves its products
    by 2**-8 of it; so the bound is tests/precision/test_gradients.py's, 8 * 2**-8 *
    sqrt(steps) of how far training moved the parameters (measured: 2**-8 / 3 at 3 ranks,
    as far as float32 products are from bf16's). The gradients the ranks average are float32,
    the allreduce too."""
    before = rnnfast._core.bf16_emulation()
    rnnfast._core.set_bf16_emulation(True)
    try:
        B, T, batches, epochs = 2, 5, 3, 2
        x, y = tokens(27, (batches * n * B, T)), tokens(28, (batches * n * B, T))
        # a vocabulary larger than the whole batch's tokens: no layer runs the embedding
        # fused into the RNN (which the whole batch would, and rounds the per-id sums of the
        # deltas to bf16 where the unfused product rounds each delta)
        start, model, whole, plain = (charlm(seed=9, vocab=64, dtype=np.float32) for _ in range(4))
        args = {"loss": "cross_entropy", "epochs": epochs, "shuffle": False, "verbose": False}
        history = dist.fit(model, x, y, optimizer=optim.SGD(model, lr=0.5), batch_size=B,
                           precision="bf16", **args)  # fmt: skip
        expected = training.fit(whole, x, y, optimizer=optim.SGD(whole, lr=0.5),
                                batch_size=B * n, precision="bf16", **args)  # fmt: skip
        dist.fit(plain, x, y, optimizer=optim.SGD(plain, lr=0.5), batch_size=B, **args)
    finally:
        rnnfast._core.set_bf16_emulation(before)
    assert all(g.dtype == np.float32 for g in model.grads.values())

    def distance(a, b):
        return float(np.sqrt(sum(np.sum((p - q) ** 2) for p, q in zip(a, b))))

    moved = distance(whole.parameters(), start.parameters())
    worst = distance(model.parameters(), whole.parameters()) / moved
    apart = distance(model.parameters(), plain.parameters()) / moved
    bound = 8 * 2.0**-8 * np.sqrt(batches * epochs)
    assert worst <= bound, f"bf16: {worst:.3g} of training's move from training.fit's"
    assert apart > 0.0, "bf16 and float32 products trained alike: bf16 did not run"
    np.testing.assert_allclose(history["loss"], expected["loss"], rtol=bound)
    out["figures"] = {"bf16 fit vs training.fit": worst, "bf16 vs float32": apart}


def case_broadcast_optimizer_state(comm, r, n, out):
    model = charlm(seed=1)
    opt = optim.Adam(model, lr=1e-2)
    for step in range(r + 1):  # a different number of local steps on each rank
        model.zero_grad()
        _, d = losses.cross_entropy(model(tokens(step + 10 * r, (2, 4))), tokens(3, (2, 4)))
        model.backward(d)
        opt.step()
    dist.broadcast_parameters(model)
    dist.broadcast_optimizer_state(opt)
    state = opt.state_dict()
    assert state["step"] == 1, state["step"]
    arrays = [b for bufs in state["buffers"].values() for b in bufs]
    assert gathered_equal(comm, arrays), "optimizer buffers differ after the broadcast"


def case_overlap_order(comm, r, n, out):
    """The top layers' buckets start their Iallreduce before the bottom layer's backward has
    finished (Sequential, with the Embedding fused into the RNN, and a Module)."""
    if n == 1:
        return "skip: one rank reduces nothing"
    orders = {}
    for name, model in (("Sequential", charlm(seed=2, hidden=40)), ("Module", Tagger(seed=2))):
        events = []
        bottom = model.layers[1] if name == "Sequential" else model.rnn

        def recorder(*args, _inner=bottom.backward, **kwargs):
            events.append((time.perf_counter(), "bottom_backward_start", None))
            result = _inner(*args, **kwargs)
            events.append((time.perf_counter(), "bottom_backward_end", None))
            return result

        bottom.backward = recorder
        dopt = dist.DistributedOptimizer(optim.SGD(model, lr=0.1), bucket_bytes=1, trace=True)
        ids = tokens(r, (3, 30))  # 90 tokens > 11 rows: the Embedding runs fused into the RNN
        model.zero_grad()
        _, d = losses.cross_entropy(
            model(ids), tokens(5, (3, 30), vocab=11 if name == "Sequential" else 3)
        )
        model.backward(d)
        dopt.step()
        order = [e for _, e, _ in sorted(events + dopt.events, key=lambda e: e[0])]
        detail = [(e, d) for _, e, d in sorted(events + dopt.events, key=lambda e: e[0])]
        orders[name] = order
        first_reduce = order.index("iallreduce")
        assert first_reduce < order.index("bottom_backward_end"), detail
        assert order.index("bottom_backward_start") < order.index("bottom_backward_end")
        # every bucket, the Embedding's too, was started by a hook, none at step time
        assert order.index("wait") > max(i for i, e in enumerate(order) if e == "iallreduce")
        assert order.count("iallreduce") == len(dopt.buckets), (order, dopt.buckets)
        dopt.remove_hooks()
    out["figures"] = {k: " ".join(v) for k, v in orders.items()}


def case_raise_on_rank1(comm, r, n, out):
    if r == 1:
        raise RuntimeError("rank 1 fails on purpose")
    comm.Barrier()  # rank 0 waits here: the abort must end it


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}


def main():
    outdir, names = Path(sys.argv[1]), sys.argv[2].split(",")
    rnnfast.set_num_threads(1)
    comm = dist.init()
    r, n = dist.rank(), dist.size()
    results = {"size": n}
    path = outdir / f"rank{r}.json"
    for name in names:
        if name == "raise_on_rank1":
            CASES[name](comm, r, n, {})
            continue
        out = {"dir": str(outdir)}
        start = time.perf_counter()
        try:
            verdict = CASES[name](comm, r, n, out) or "ok"
        except BaseException:
            results[name] = {"verdict": traceback.format_exc()}
            path.write_text(json.dumps(results, indent=1))
            sys.stderr.write(f"[rank {r}] case {name} failed:\n{traceback.format_exc()}")
            sys.stderr.flush()
            comm.Abort(1)
        results[name] = {
            "verdict": verdict,
            "seconds": round(time.perf_counter() - start, 3),
            "figures": out.get("figures", {}),
        }
        comm.Barrier()
    path.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
