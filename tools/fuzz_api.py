#!/usr/bin/env python3
"""Coverage-guided fuzzing of rnnfast's Python API with atheris (libFuzzer for Python).

The fuzz bytes are decoded into small shapes, dtypes, memory layouts (Fortran order, negative
and non-unit strides, read-only, byte-swapped), flags, lengths, step and recurrent masks, alpha
and values (including NaN, +-Inf, huge, subnormal and -0.0), and fed to:

  0 functional.rnn_forward      3 RNN layer: options, forward, backward, step
  1 functional.rnn_backward     4 losses.cross_entropy / losses.mse_loss
  2 functional.rnn_step         5 rnnfast.load on the fuzz bytes as a file (raw, or a valid
                                  saved layer with fuzzed bytes / fuzzed JSON config)
                                6 optim.SGD / Adam / AdamW steps over (param, grad) pairs

Only TypeError, ValueError and FileNotFoundError may escape the API; any other exception
(MemoryError included: the inputs are small, so it means a size was trusted that should not
have been), a crash, a modified input array, or a result of the wrong shape is a finding. For
finite moderate inputs the functional forward is also compared with ``rnnfast.reference``.

    python tools/fuzz_api.py -max_total_time=600 [corpus_dir] [libFuzzer flags...]
    python tools/fuzz_api.py crash-<hash>          # replay one reproducer

Run under tools/sanitize.sh's venv with LD_PRELOAD of libasan to catch memory errors in C++
that do not crash outright (see tools/README or the header of tools/sanitize.sh).

Without atheris (``pip install atheris``), it falls back to random byte strings from
``random`` (no coverage guidance): ``python tools/fuzz_api.py --random SECONDS``.
"""

from __future__ import annotations

import io
import os
import sys
import tempfile
import time
import warnings

import numpy as np

try:
    import atheris
except ImportError:  # pragma: no cover - fallback path
    atheris = None

import rnnfast
from rnnfast import functional as F
from rnnfast import losses, reference

if atheris is not None:
    # Python coverage for libFuzzer's guidance. instrument_imports() does not see modules that
    # an editable install's import hook loads, so instrument the loaded code instead (numpy's
    # Python code included, which costs some speed). The C++ is not instrumented for coverage;
    # run under the ASan build (see the module doc) to catch its memory errors.
    atheris.instrument_all()

ACCEPTABLE = (TypeError, ValueError, FileNotFoundError)

SPECIALS = [np.nan, np.inf, -np.inf, 1e30, -1e30, 3e38, 1e300, 1e-40, -0.0, 0.0, 1.0, -1.0, 50.0]


class Finding(AssertionError):
    """An invariant of the API broken without an exception of its own."""


class Bytes:
    """A small deterministic decoder over the fuzz input (independent of atheris)."""

    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def byte(self) -> int:
        if self.pos >= len(self.data):
            return 0
        b = self.data[self.pos]
        self.pos += 1
        return b

    def int_in(self, lo: int, hi: int) -> int:
        return lo + self.byte() % (hi - lo + 1)

    def bool(self) -> bool:
        return bool(self.byte() & 1)

    def pick(self, seq):
        return seq[self.byte() % len(seq)]

    def float_(self) -> float:
        b = self.byte()
        if b < 24:
            return float(SPECIALS[b % len(SPECIALS)])
        return (b - 140) / 32.0

    def rest(self) -> bytes:
        out = self.data[self.pos :]
        self.pos = len(self.data)
        return out


def values(fb: Bytes, shape, dtype, moderate=False):
    """An array of `shape` whose values come from the fuzz bytes (specials unless moderate)."""
    n = int(np.prod(shape)) if len(shape) else 1
    seed = fb.byte() | (fb.byte() << 8)
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1.5, 1.5, size=n)
    if not moderate:
        k = fb.int_in(0, 3)
        for _ in range(k):
            if n:
                a[fb.byte() % n] = SPECIALS[fb.byte() % len(SPECIALS)]
    return a.reshape(shape).astype(dtype)


def layout(fb: Bytes, a):
    """`a` itself or the same values in another memory layout."""
    if not isinstance(a, np.ndarray):
        return a
    kind = fb.int_in(0, 7)
    if kind == 1:
        a = np.asfortranarray(a)
    elif kind == 2 and a.ndim:
        # A view with stride 2 along the last axis.
        big = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
        big[..., ::2] = a
        a = big[..., ::2]
    elif kind == 3 and a.ndim:
        # Negative strides over the same values.
        a = np.flip(np.flip(a, 0).copy(), 0)
    elif kind == 4:
        a = a.copy()
        a.setflags(write=False)
    elif kind == 5 and a.dtype.kind == "f":
        a = a.astype(a.dtype.newbyteorder("S"))
    elif kind == 6:
        a = a.tolist()  # array-like, not an array
    return a


def snapshot(*arrays):
    return [np.array(a, copy=True) if isinstance(a, np.ndarray) else None for a in arrays]


def check_unmodified(before, arrays, what):
    for b, a in zip(before, arrays):
        if b is not None and not np.array_equal(b, a, equal_nan=True):
            raise Finding(f"{what}: an input array was modified")


def maybe_wrong_dtype(fb: Bytes, dt):
    """Mostly the computation's dtype; sometimes another float, an int, a bool or an object."""
    r = fb.byte()
    if r < 230:
        return dt
    return [
        np.float16,
        np.int32,
        np.int64,
        np.bool_,
        object,
        np.complex64,
        np.float32 if dt == np.float64 else np.float64,
    ][r % 7]


def maybe_bad_shape(fb: Bytes, shape):
    r = fb.byte()
    if r < 235 or not shape:
        return shape
    shape = list(shape)
    mode = r % 4
    if mode == 0:
        shape[fb.byte() % len(shape)] += fb.int_in(-1, 1) or 1
    elif mode == 1:
        shape = shape[:-1]
    elif mode == 2:
        shape = shape + [1]
    else:
        shape[fb.byte() % len(shape)] = 0
    return tuple(max(s, 0) for s in shape)


def arr(fb, shape, dt, moderate=False):
    shape = maybe_bad_shape(fb, shape)
    d = maybe_wrong_dtype(fb, dt)
    a = values(fb, shape, np.float64, moderate)
    if d is object:
        a = a.astype(object)
    else:
        with np.errstate(all="ignore"):
            a = a.astype(d)
    return layout(fb, a)


def lengths_for(fb: Bytes, T, B):
    r = fb.int_in(0, 9)
    if r < 5:
        return None
    if r == 5:
        return [fb.int_in(-1, T + 1) for _ in range(B)]  # possibly out of range
    if r == 6:
        return np.array(
            [fb.int_in(0, T) for _ in range(B)], dtype=fb.pick([np.int8, np.uint64, np.float64])
        )
    if r == 7:
        return np.array([fb.int_in(0, T) for _ in range(B + fb.int_in(-1, 1))], np.int64)
    return np.array([fb.int_in(0, T) for _ in range(B)], np.int64)


def step_mask_for(fb: Bytes, T, B):
    """A (T, B) keep mask, mostly absent; sometimes non-0/1, float, transposed or strided."""
    r = fb.int_in(0, 11)
    if r < 6:
        return None
    keep = np.array([fb.bool() for _ in range(T * B)], dtype=bool).reshape(T, B)
    if r == 6:
        return keep.astype(np.int64) * fb.pick([1, 2, -1])
    if r == 7:
        return keep.astype(np.float32)
    if r == 8:
        return keep.T
    return layout(fb, keep)


def masks_for(fb: Bytes, T, B, H, dt, moderate):
    """The masked kernels' options: step mask, zero_output_for_mask (sometimes not a bool),
    recurrent dropout mask."""
    return {
        "step_mask": step_mask_for(fb, T, B),
        "zero_output_for_mask": fb.pick([False, True, False, True, 1, None]),
        "recurrent_mask": arr(fb, (B, H), dt, moderate) if fb.int_in(0, 3) == 0 else None,
    }


def alpha_for(fb: Bytes):
    r = fb.int_in(0, 9)
    if r < 5:
        return 1.0
    return [0.5, 0.01, 0.0, -0.5, 1.5, float("nan"), float("inf"), np.float32(0.3), 1, True][r]


def nonlin_for(fb: Bytes):
    return fb.pick(["tanh", "relu", "tanh", "relu", "sigmoid", None])


def sizes(fb: Bytes):
    return fb.int_in(0, 5), fb.int_in(0, 4), fb.int_in(0, 6), fb.int_in(0, 9)  # T, B, D, H


def target_forward(fb: Bytes, backward=False):
    T, B, D, H = sizes(fb)
    dt = fb.pick([np.float32, np.float64])
    moderate = fb.bool()
    x = arr(fb, (T, B, D), dt, moderate)
    if np.ndim(x) == 3:
        T, B, D = np.shape(x)  # the shape actually given (arr may have spoiled it)
    w_ih = layout(fb, values(fb, (H, D), dt, moderate))
    w_hh = arr(fb, (H, H), dt, moderate)
    b_ih = arr(fb, (H,), dt, moderate) if fb.bool() else None
    b_hh = arr(fb, (H,), dt, moderate) if fb.bool() else None
    h0 = arr(fb, (B, H), dt, moderate) if fb.bool() else None
    nl, seqs = nonlin_for(fb), fb.bool()
    lengths, alpha = lengths_for(fb, T, B), alpha_for(fb)
    masks = masks_for(fb, T, B, H, dt, moderate)
    inputs = (x, w_ih, w_hh, b_ih, b_hh, h0, lengths, masks["step_mask"], masks["recurrent_mask"])
    before = snapshot(*inputs)
    y, h_n = F.rnn_forward(
        x,
        w_ih,
        w_hh,
        b_ih,
        b_hh,
        h0,
        nl,
        return_sequences=seqs,
        lengths=lengths,
        alpha=alpha,
        **masks,
    )
    check_unmodified(before, inputs, "rnn_forward")
    if h_n.shape != (B, H) or (seqs and y.shape != (T, B, H)) or (not seqs and y is not None):
        raise Finding(
            f"rnn_forward: shapes y {None if y is None else y.shape}, h_n {h_n.shape}"
            f" for T,B,D,H={T, B, D, H}"
        )
    if moderate and all(
        isinstance(a, np.ndarray) and np.isfinite(a).all()
        for a in (x, w_ih, w_hh, masks["recurrent_mask"])
        if a is not None
    ):
        ry, rh = reference.rnn_forward(
            x, w_ih, w_hh, b_ih, b_hh, h0, nl, lengths=lengths, alpha=alpha, **masks
        )
        tol = 2e-3 if dt == np.float32 else 1e-9
        if not np.allclose(h_n, rh, rtol=tol, atol=tol, equal_nan=True) or (
            seqs and not np.allclose(y, ry, rtol=tol, atol=tol, equal_nan=True)
        ):
            raise Finding(
                f"rnn_forward differs from reference by "
                f"{np.nanmax(np.abs(h_n - rh)) if h_n.size else 0}"
            )
    if not backward:
        return
    yy = (
        y
        if y is not None
        else F.rnn_forward(
            x, w_ih, w_hh, b_ih, b_hh, h0, nl, lengths=lengths, alpha=alpha, **masks
        )[0]
    )
    yy = layout(fb, yy) if fb.byte() < 200 else arr(fb, (T, B, H), dt)
    dy = arr(fb, (T, B, H), dt) if fb.bool() else None
    dh_n = arr(fb, (B, H), dt) if fb.bool() else None
    nl2 = nl if fb.byte() < 230 else nonlin_for(fb)
    inputs = (x, w_ih, w_hh, yy, dy, dh_n, h0, lengths, masks["step_mask"], masks["recurrent_mask"])
    before = snapshot(*inputs)
    g = F.rnn_backward(
        x, w_ih, w_hh, yy, dy, dh_n, h0=h0, nonlinearity=nl2, lengths=lengths, alpha=alpha, **masks
    )
    check_unmodified(before, inputs, "rnn_backward")
    want = [(T, B, D), (B, H), (H, D), (H, H), (H,)]
    if [tuple(a.shape) for a in g] != want:
        raise Finding(f"rnn_backward: shapes {[a.shape for a in g]}, expected {want}")


def token_ids_for(fb: Bytes, T, B, V):
    """Ids (T, B) into a table of V rows; sometimes out of range, float, int8 or misshapen."""
    ids = np.array([fb.int_in(0, max(V - 1, 0)) for _ in range(T * B)], np.int64).reshape(T, B)
    r = fb.int_in(0, 15)
    if r == 0 and ids.size:
        ids.flat[fb.byte() % ids.size] = fb.pick([-1, V, 2**40, -(2**62)])
    elif r == 1:
        return ids.astype(np.float64)
    elif r == 2:
        return ids.astype(np.int8)
    elif r == 3:
        return ids.astype(np.uint64)
    elif r == 4:
        return ids[..., None]
    return layout(fb, ids)


def target_tokens(fb: Bytes):
    """Token input (an embedding table and ids) through the functional core, both ways."""
    T, B, D, H = sizes(fb)
    V = fb.int_in(0, 6)
    dt = fb.pick([np.float32, np.float64])
    table = arr(fb, (V, D), dt, moderate=True)
    ids = token_ids_for(fb, T, B, V)
    w_ih = arr(fb, (H, D), dt, moderate=True)
    w_hh = arr(fb, (H, H), dt, moderate=True)
    b_ih = arr(fb, (H,), dt, moderate=True) if fb.bool() else None
    h0 = arr(fb, (B, H), dt, moderate=True) if fb.bool() else None
    nl, lengths, alpha = nonlin_for(fb), lengths_for(fb, T, B), alpha_for(fb)
    inputs = (table, ids, w_ih, w_hh, b_ih, h0, lengths)
    before = snapshot(*inputs)
    y, h_n = F.rnn_forward(
        table, w_ih, w_hh, b_ih, None, h0, nl, lengths=lengths, alpha=alpha, ids=ids
    )
    check_unmodified(before, inputs, "rnn_forward(ids=)")
    # Accepted: then the ids were valid, and the same call on the gathered rows must agree.
    gathered = np.asarray(table, dtype=dt)[np.asarray(ids)]
    y2, h2 = F.rnn_forward(gathered, w_ih, w_hh, b_ih, None, h0, nl, lengths=lengths, alpha=alpha)
    # Equal to rounding, not bitwise: the table's projection GEMM has other M tails and
    # thread splits than the sequence's.
    tol = 1e-5 if dt == np.float32 else 1e-12
    if not (
        np.allclose(y, y2, rtol=tol, atol=tol, equal_nan=True)
        and np.allclose(h_n, h2, rtol=tol, atol=tol, equal_nan=True)
    ):
        raise Finding("rnn_forward(ids=) differs from rnn_forward(table[ids])")
    dy = arr(fb, y.shape, dt) if fb.bool() else None
    g = F.rnn_backward(
        table,
        w_ih,
        w_hh,
        y,
        dy,
        None,
        **{**F.PLAIN_FORWARD_OPTIONS, "h0": h0, "nonlinearity": nl, "lengths": lengths},
        alpha=alpha,
        ids=ids,
    )
    check_unmodified(before, inputs, "rnn_backward(ids=)")
    if g.dx.shape != np.shape(table):
        raise Finding(f"rnn_backward(ids=): table gradient {g.dx.shape}, table {np.shape(table)}")


def target_step(fb: Bytes):
    _, B, D, H = sizes(fb)
    dt = fb.pick([np.float32, np.float64])
    x_t = arr(fb, (B, D), dt)
    h = arr(fb, (B, H), dt)
    w_ih = arr(fb, (H, D), dt)
    w_hh = arr(fb, (H, H), dt)
    b_ih = arr(fb, (H,), dt) if fb.bool() else None
    b_hh = arr(fb, (H,), dt) if fb.bool() else None
    inputs = (x_t, h, w_ih, w_hh, b_ih, b_hh)
    before = snapshot(*inputs)
    out = F.rnn_step(x_t, h, w_ih, w_hh, b_ih, b_hh, nonlin_for(fb), alpha_for(fb))
    check_unmodified(before, inputs, "rnn_step")
    if np.ndim(h) == 2:
        B = np.shape(h)[0]  # the batch actually given (arr may have spoiled it)
    if out.shape != (B, H):
        raise Finding(f"rnn_step: shape {out.shape}, expected {(B, H)}")


def target_layer(fb: Bytes):
    T, B, D, H = sizes(fb)
    bidir = fb.bool()
    num_layers = fb.int_in(0, 3)
    kw = dict(
        num_layers=num_layers,
        nonlinearity=nonlin_for(fb),
        bias=fb.bool(),
        batch_first=fb.bool(),
        dropout=fb.pick([0.0, 0.0, 0.3, 1.0, -0.1]),
        bidirectional=bidir,
        dtype=fb.pick([np.float32, np.float64, "float32", np.int32]),
        seed=fb.int_in(0, 3),
        residual=fb.byte() > 200,
        merge_mode=fb.pick(["concat", "concat", "sum", "mul", "ave", "bogus"])
        if bidir
        else "concat",
        go_backwards=fb.byte() > 200,
        return_sequences=fb.pick([None, None, True, False]),
        return_state=fb.pick([None, None, True, False]),
        stateful=fb.byte() > 220,
        alpha=fb.pick([1.0, 1.0, 0.5, [0.5] * max(num_layers, 1), [0.5], 0.0]),
    )
    layer = rnnfast.RNN(D, H, **kw)
    dt = layer.dtype
    shape = (B, T, D) if layer.batch_first else (T, B, D)
    x = arr(fb, shape, dt)
    dirs = 2 if bidir else 1
    h0 = arr(fb, (layer.num_layers * dirs, B, H), dt) if fb.bool() else None
    lengths = lengths_for(fb, T, B)
    mask = None
    if lengths is None and fb.byte() > 200:
        mask = np.arange(T)[None, :] < np.array([fb.int_in(0, T) for _ in range(B)])[:, None]
    if fb.bool():
        layer.eval()
    inputs = (x, h0, lengths, mask)
    before = snapshot(*inputs)
    out = layer(x, h0, lengths=lengths, mask=mask)
    check_unmodified(before, inputs, "RNN.forward")
    if layer.training:
        first = out[0] if isinstance(out, tuple) else out
        d_out = arr(fb, np.shape(first), dt) if fb.bool() else None
        dh_n = arr(fb, (layer.num_layers * dirs, B, H), dt) if fb.bool() else None
        params = {k: v.copy() for k, v in layer.state_dict().items()}
        grads = {k: v.copy() for k, v in layer.grads.items()} if hasattr(layer, "grads") else {}
        try:
            layer.backward(d_out, dh_n)
        except ACCEPTABLE:
            # A failed call leaves the parameters and gradients as they were.
            for k, v in layer.state_dict().items():
                if not np.array_equal(v, params[k], equal_nan=True):
                    raise Finding(f"RNN.backward failed but changed parameter {k}") from None
            for k, v in grads.items():
                if not np.array_equal(layer.grads[k], v, equal_nan=True):
                    raise Finding(f"RNN.backward failed but changed gradient {k}") from None
            raise
    if not bidir and fb.bool():
        x_t = arr(fb, (B, D), dt)
        h = arr(fb, (layer.num_layers, B, H), dt) if fb.bool() else None
        layer.step(x_t, h)


def target_losses(fb: Bytes):
    T, B, _, V = sizes(fb)
    dt = fb.pick([np.float32, np.float64])
    if fb.bool():
        shape = (T, B, V) if fb.bool() else (B, V)
        logits = arr(fb, shape, dt)
        tshape = maybe_bad_shape(fb, shape[:-1])
        targets = np.array(
            [fb.int_in(-2, V + 1) for _ in range(int(np.prod(tshape)))], np.int64
        ).reshape(tshape)
        if fb.byte() > 230:
            targets = targets.astype(np.float32)
        kw = {}
        if len(shape) == 3:
            r = fb.int_in(0, 3)
            if r == 1:
                kw["lengths"] = lengths_for(fb, T, B)
            elif r == 2:
                kw["mask"] = np.array([[fb.bool() for _ in range(B)] for _ in range(T)])
            kw["batch_first"] = fb.bool()
        if fb.bool():
            kw["ignore_index"] = fb.int_in(-1, V)
        kw["reduction"] = fb.pick(["mean", "sum", "none", "bogus"])
        before = snapshot(logits, targets)
        losses.cross_entropy(logits, targets, **kw)
        check_unmodified(before, (logits, targets), "cross_entropy")
    else:
        shape = (T, B, V)
        pred = arr(fb, shape, dt)
        target = arr(fb, maybe_bad_shape(fb, shape), dt)
        before = snapshot(pred, target)
        losses.mse_loss(pred, target, fb.pick(["mean", "sum", "bogus"]))
        check_unmodified(before, (pred, target), "mse_loss")


def target_optim(fb: Bytes):
    """Optimizers over (param, grad) pairs of fuzzed layouts and values (strided parameters are
    updated through a contiguous copy), fuzzed hyper-parameters, several steps."""
    from rnnfast import optim

    dt = fb.pick([np.float32, np.float64])
    pairs = []
    for _ in range(fb.int_in(1, 3)):
        shape = tuple(fb.int_in(0, 5) for _ in range(fb.int_in(0, 2)))
        param = np.array(values(fb, shape, dt), copy=True)
        if fb.bool() and param.ndim == 2 and param.shape[1] > 1:
            param = np.array(values(fb, (shape[0], 2 * shape[1]), dt))[:, ::2]  # strided
        pairs.append((param, arr(fb, shape, dt)))
    kind = fb.pick(["SGD", "Adam", "AdamW"])
    hyper = {"lr": fb.pick([1e-3, 0.0, -1.0, np.nan, 1e30])}
    if fb.bool():
        hyper["weight_decay"] = fb.pick([0.0, 0.1, -0.1, np.inf])
    if kind != "SGD" and fb.bool():
        hyper["betas"] = fb.pick([(0.9, 0.999), (1.0, 0.5), (-0.1, 0.9), "ab"])
    if kind == "SGD" and fb.bool():
        hyper["momentum"] = fb.pick([0.0, 0.9, -1.0])
        hyper["nesterov"] = fb.bool()
    grads_before = snapshot(*(g for _, g in pairs))
    opt = getattr(optim, kind)(pairs, **hyper)
    for _ in range(fb.int_in(1, 3)):
        opt.step()
    check_unmodified(grads_before, [g for _, g in pairs], f"{kind}.step (gradients)")


_VALID_FILE = None


def valid_file() -> bytes:
    global _VALID_FILE
    if _VALID_FILE is None:
        buf = io.BytesIO()
        rnnfast.save(rnnfast.RNN(3, 4, num_layers=2, bidirectional=True, seed=0), buf)
        _VALID_FILE = buf.getvalue()
    return _VALID_FILE


def target_load(fb: Bytes):
    mode = fb.int_in(0, 3)
    if mode == 0:
        data = fb.rest()  # raw bytes
    elif mode == 1:
        # A valid file with a few bytes overwritten (gets past the zip layer more often).
        data = bytearray(valid_file())
        for _ in range(fb.int_in(1, 8)):
            pos = (fb.byte() << 8 | fb.byte()) % len(data)
            data[pos] = fb.byte()
        data = bytes(data)
    elif mode == 2:
        # A well-formed archive with a fuzzed JSON config and parameters.
        import json

        from rnnfast.nn.files import _file_format as persistence  # the format's own keys

        buf = io.BytesIO()
        raw = fb.rest()
        try:
            cfg = json.loads(raw.decode("utf-8", "replace"))
        except ValueError:
            cfg = {"input_size": 2, "hidden_size": int(raw[0]) % 5 if raw else 1}
        layer = rnnfast.RNN(2, 3, seed=0)
        arrays = dict(layer.state_dict())
        arrays[persistence._FORMAT_KEY] = np.int64(persistence.FORMAT_VERSION)
        arrays[persistence._CONFIG_KEY] = np.frombuffer(json.dumps(cfg).encode(), np.uint8)
        np.savez(buf, **arrays)
        data = buf.getvalue()
    else:
        data = valid_file()[: (fb.byte() << 8 | fb.byte()) % len(valid_file())]  # truncated
    if fb.bool():
        rnnfast.load(io.BytesIO(data))
    else:
        fd, path = tempfile.mkstemp(suffix=".npz")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            rnnfast.load(path)
        finally:
            os.unlink(path)


TARGETS = [
    target_forward,
    lambda fb: target_forward(fb, backward=True),
    target_step,
    target_layer,
    target_losses,
    target_load,
    target_optim,
    target_tokens,
]


# Findings already reported, as (exception type name, text in the message, function in the
# traceback): recorded once on stderr and in $FUZZ_KNOWN_LOG, not raised, so that a long run
# explores past them. Empty this list (or set FUZZ_STRICT=1) to have them stop the fuzzer again.
KNOWN = [
    # RNN(..., return_sequences=False) on a T = 0 batch: _last_of indexes out[-1] (or
    # out[0] with lengths) of an empty sequence axis (python/rnnfast/rnn.py, RNN._last_of).
    ("IndexError", "out of bounds for axis 0 with size 0", "_last_of"),
]
_seen_known = set()


def _known(exc) -> bool:
    if os.environ.get("FUZZ_STRICT") == "1":
        return False
    import traceback

    funcs = {f.name for f in traceback.extract_tb(exc.__traceback__)}
    for k in KNOWN:
        if k[0] in ("*", type(exc).__name__) and k[1] in str(exc) and k[2] in funcs:
            if k not in _seen_known:
                _seen_known.add(k)
                msg = f"known finding (not raised): {type(exc).__name__}: {exc} in {k[2]}"
                print(msg, file=sys.stderr)
                if os.environ.get("FUZZ_KNOWN_LOG"):
                    with open(os.environ["FUZZ_KNOWN_LOG"], "a") as f:
                        f.write(msg + "\n")
            return True
    return False


def one_input(data: bytes):
    fb = Bytes(data)
    target = TARGETS[fb.byte() % len(TARGETS)]
    threads = fb.int_in(1, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"), rnnfast.threads(threads):
            try:
                target(fb)
            except ACCEPTABLE:
                pass
            except Exception as exc:
                if not _known(exc):
                    raise


def random_fallback(seconds: float, seed: int = 0):
    """No atheris: random inputs for `seconds` (no coverage guidance)."""
    import random

    rng = random.Random(seed)
    end, n = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        data = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 200)))
        try:
            one_input(data)
        except BaseException:
            path = f"crash-random-{n}"
            with open(path, "wb") as f:
                f.write(data)
            print(f"finding; reproducer written to {path}", file=sys.stderr)
            raise
        n += 1
    print(f"random fallback: {n} executions in {seconds:.0f} s, no findings", file=sys.stderr)


def main(argv):
    if len(argv) > 2 and argv[1] == "--random":
        random_fallback(float(argv[2]))
        return
    if atheris is None:
        sys.exit("atheris is not installed: pip install atheris, or use --random SECONDS")
    atheris.Setup(argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
