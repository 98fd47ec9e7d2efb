"""Every public entry point through bad (and awkward but valid) inputs, table-driven.

Each case is (entry point, arguments, expected exception, message regex). A refused input must
raise TypeError or ValueError (MemoryError for absurd sizes) whose message names the argument;
the caller's arrays must be unchanged afterwards, and a layer's parameters and gradients too.
Valid-but-awkward inputs (strided, Fortran, byte-swapped, read-only, zero-sized, NaN/Inf) must
give the result of the plain-array call or of ``rnnfast.reference``.
"""

from __future__ import annotations

import copy
import io
import math
import re

import numpy as np
import pytest

import rnnfast
from rnnfast import functional as F
from rnnfast import losses, optim, reference

T, B, D, H = 3, 2, 4, 5
_RNG = np.random.default_rng(1234)


def _r(*shape, dtype=np.float64):
    return _RNG.uniform(-0.5, 0.5, size=shape).astype(dtype)


# fixed base arrays; every case works on deep copies of them
X, W_IH, W_HH, B_IH, B_HH, H0 = _r(T, B, D), _r(H, D), _r(H, H), _r(H), _r(H), _r(B, H)
Y, _ = reference.rnn_forward(X, W_IH, W_HH, B_IH, B_HH, H0)
DY, DH_N = _r(T, B, H), _r(B, H)
X_T, H_T = _r(B, D), _r(B, H)

HUGE = 10**7  # absurd sizes only ever as broadcast views (no memory behind them)


def huge(shape, dtype=np.float64):
    return np.broadcast_to(np.zeros((), dtype=dtype), shape)


def byteswapped(a):
    return a.astype(a.dtype.newbyteorder(">" if a.dtype.byteorder in "=<" else "<"))


def strided(a):
    """The same values as a non-contiguous view (every other element of a bigger array)."""
    big = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), dtype=a.dtype) if a.ndim else None
    if big is None:
        return a
    big[..., ::2] = a
    return big[..., ::2]


def fortran(a):
    return np.asfortranarray(a)


def readonly(a):
    a = a.copy()
    a.flags.writeable = False
    return a


# Bad values for a float-array argument: (label, value, exception)
BAD_ARRAY_TYPES = [
    ("str", "abc", TypeError),
    ("list_of_str", ["a", "b"], TypeError),
    ("object", np.array([[1.0, None]], dtype=object), TypeError),
    ("int32", np.ones((2, 2), dtype=np.int32), TypeError),
    ("int64", np.ones((2, 2), dtype=np.int64), TypeError),
    ("bool", np.ones((2, 2), dtype=bool), TypeError),
    ("complex", np.ones((2, 2), dtype=np.complex128), TypeError),
]
LAYOUTS = {
    "strided": strided,
    "fortran": fortran,
    "byteswapped": byteswapped,
    "readonly": readonly,
    "list": lambda a: a.tolist(),
}


class Case:
    def __init__(
        self, id, fn, args=(), kwargs=None, exc=None, match=None, *, layer=None, check=None
    ):
        self.id, self.fn, self.args, self.kwargs = id, fn, tuple(args), dict(kwargs or {})
        self.exc, self.match, self.layer, self.check = exc, match, layer, check


CASES: list[Case] = []


def add(*a, **k):
    CASES.append(Case(*a, **k))


# ---- functional.rnn_forward ----------------------------------------------------------------------

FWD = {"x": X, "weight_ih": W_IH, "weight_hh": W_HH, "bias_ih": B_IH, "bias_hh": B_HH, "h0": H0}


def fwd(**over):
    return {**FWD, **over}


for name in FWD:  # noqa: PLC0206
    for label, value, exc in BAD_ARRAY_TYPES:
        add(f"forward-{name}-{label}", F.rnn_forward, (), fwd(**{name: value}), exc, rf"\b{name}\b")
    add(
        f"forward-{name}-float16",
        F.rnn_forward,
        (),
        fwd(**{name: FWD[name].astype(np.float16)}),
        TypeError,
        rf"\b{name}\b",
    )
    if name != "weight_ih":  # weight_ih's dtype is the computation's: others must match it
        add(
            f"forward-{name}-float32-vs-float64",
            F.rnn_forward,
            (),
            fwd(**{name: FWD[name].astype(np.float32)}),
            TypeError,
            rf"{name}.*float32.*float64",
        )
    add(
        f"forward-{name}-extra-dim",
        F.rnn_forward,
        (),
        fwd(**{name: FWD[name][None]}),
        ValueError,
        rf"\b{name}\b",
    )
    add(
        f"forward-{name}-scalar",
        F.rnn_forward,
        (),
        fwd(**{name: np.float64(1.0)}),
        ValueError,
        rf"\b{name}\b",
    )
for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "h0"):
    add(
        f"forward-{name}-wrong-shape",
        F.rnn_forward,
        (),
        fwd(**{name: FWD[name][..., :-1]}),
        ValueError,
        rf"\b(x|{name})\b.*shape",
    )
    add(
        f"forward-{name}-None-required" if name.startswith("weight") else f"forward-{name}-None-ok",
        F.rnn_forward,
        (),
        fwd(**{name: None}),
        TypeError if name.startswith("weight") else None,
        rf"\b{name}\b",
    )
add("forward-x-None", F.rnn_forward, (), fwd(x=None), TypeError, r"\bx\b")
add("forward-x-wrong-D", F.rnn_forward, (), fwd(x=X[..., :-1]), ValueError, r"\bx\b.*shape")
add("forward-x-2d", F.rnn_forward, (), fwd(x=X[0]), ValueError, r"\bx\b.*3 dimensions")
add("forward-h0-wrong-batch", F.rnn_forward, (), fwd(h0=H0[:1]), ValueError, r"\bh0\b")
for label, nl in [
    ("sigmoid", "sigmoid"),
    ("None", None),
    ("int", 1),
    ("bytes", b"tanh"),
    ("Tanh", "Tanh"),
]:
    add(
        f"forward-nonlinearity-{label}",
        F.rnn_forward,
        (),
        fwd(nonlinearity=nl),
        ValueError,
        r"nonlinearity",
    )
for label, alpha, exc in [
    ("zero", 0.0, ValueError),
    ("neg", -1.0, ValueError),
    ("big", 1.5, ValueError),
    ("nan", math.nan, ValueError),
    ("inf", math.inf, ValueError),
    ("str", "1", TypeError),
    ("None", None, TypeError),
    ("bool", True, TypeError),
    ("complex", 1j, TypeError),
    ("array", np.ones(2), TypeError),
]:
    add(f"forward-alpha-{label}", F.rnn_forward, (), fwd(alpha=alpha), exc, r"alpha")
for label, lengths, exc in [
    ("float", np.array([1.0, 2.0]), TypeError),
    ("bool", np.array([True, False]), TypeError),
    ("str", ["a", "b"], TypeError),
    ("object", [None, 1], TypeError),
    ("too-long", [1, 2, 3], ValueError),
    ("2d", [[1, 2]], ValueError),
    ("scalar", 2, ValueError),
    ("over-T", [T + 1, 1], ValueError),
    ("negative", [-1, 1], ValueError),
    ("absurd", [2**62, 1], ValueError),
]:
    add(f"forward-lengths-{label}", F.rnn_forward, (), fwd(lengths=lengths), exc, r"lengths")
add(
    "forward-lengths-h0-wrong-batch",
    F.rnn_forward,
    (),
    fwd(lengths=[1, 3], h0=_r(3, H)),
    ValueError,
    r"\bh0\b",
)
# absurd sizes: broadcast views, refused (never allocated in full)
add(
    "forward-x-absurd",
    F.rnn_forward,
    (),
    {"x": huge((HUGE, HUGE, D)), "weight_ih": W_IH, "weight_hh": W_HH},
    (MemoryError, ValueError),
    "",
)
add(
    "forward-x-absurd-last-state",
    F.rnn_forward,
    (),
    {"x": huge((HUGE, HUGE, D)), "weight_ih": W_IH, "weight_hh": W_HH, "return_sequences": False},
    (MemoryError, ValueError),
    "",
)
add(
    "forward-weights-absurd",
    F.rnn_forward,
    (),
    {"x": X[..., :1], "weight_ih": huge((HUGE, 1)), "weight_hh": huge((HUGE, HUGE))},
    (MemoryError, ValueError),
    "",
)

# ---- functional.rnn_backward ---------------------------------------------------------------------

BWD = {"x": X, "weight_ih": W_IH, "weight_hh": W_HH, "y": Y, "dy": DY, "dh_n": DH_N, "h0": H0}
# the backward's required keywords besides h0 (the forward's options; none of them arrays)
BWD_OPTIONS = {k: v for k, v in F.PLAIN_FORWARD_OPTIONS.items() if k != "h0"}


def bwd(**over):
    return {**BWD, **BWD_OPTIONS, **over}


for name in BWD:  # noqa: PLC0206
    for label, value, exc in BAD_ARRAY_TYPES[:5] + BAD_ARRAY_TYPES[6:]:
        add(
            f"backward-{name}-{label}",
            F.rnn_backward,
            (),
            bwd(**{name: value}),
            exc,
            rf"\b{name}\b",
        )
    add(
        f"backward-{name}-extra-dim",
        F.rnn_backward,
        (),
        bwd(**{name: BWD[name][None]}),
        ValueError,
        rf"\b{name}\b",
    )
    if name != "x":
        add(
            f"backward-{name}-wrong-shape",
            F.rnn_backward,
            (),
            bwd(**{name: BWD[name][..., :-1]}),
            ValueError,
            rf"\b(x|{name})\b",
        )
    if name != "weight_ih":
        add(
            f"backward-{name}-float32-vs-float64",
            F.rnn_backward,
            (),
            bwd(**{name: BWD[name].astype(np.float32)}),
            TypeError,
            rf"\b{name}\b",
        )
add("backward-y-None", F.rnn_backward, (), bwd(y=None), TypeError, r"\by\b")
add(
    "backward-x-wrong-batch",
    F.rnn_backward,
    (),
    bwd(x=X[:, :1]),
    ValueError,
    r"\b(x|y|dy|h0|dh_n)\b",
)
add(
    "backward-lengths-unsorted-y-wrong-batch",
    F.rnn_backward,
    (),
    bwd(y=Y[:, :1], lengths=[1, 3]),
    ValueError,
    r"\by\b",
)
add("backward-lengths-over", F.rnn_backward, (), bwd(lengths=[T + 1, 0]), ValueError, r"lengths")
add(
    "backward-nonlinearity",
    F.rnn_backward,
    (),
    bwd(nonlinearity="gelu"),
    ValueError,
    r"nonlinearity",
)
add("backward-alpha", F.rnn_backward, (), bwd(alpha=0), ValueError, r"alpha")

# ---- functional.rnn_step -------------------------------------------------------------------------

STEP = {
    "x_t": X_T,
    "h": H_T,
    "weight_ih": W_IH,
    "weight_hh": W_HH,
    "bias_ih": B_IH,
    "bias_hh": B_HH,
}


def stp(**over):
    return {**STEP, **over}


for name in STEP:  # noqa: PLC0206
    for label, value, exc in BAD_ARRAY_TYPES:
        add(f"step-{name}-{label}", F.rnn_step, (), stp(**{name: value}), exc, rf"\b{name}\b")
    add(
        f"step-{name}-extra-dim",
        F.rnn_step,
        (),
        stp(**{name: STEP[name][None]}),
        ValueError,
        rf"\b{name}\b",
    )
    add(
        f"step-{name}-wrong-shape",
        F.rnn_step,
        (),
        stp(**{name: STEP[name][..., :-1]}),
        ValueError,
        rf"\b(x_t|h|{name})\b",
    )
    if name != "weight_ih":
        add(
            f"step-{name}-float32-vs-float64",
            F.rnn_step,
            (),
            stp(**{name: STEP[name].astype(np.float32)}),
            TypeError,
            rf"\b{name}\b",
        )
# h None is zeros, as torch.nn.RNNCell's hx=None
add(
    "step-h-None",
    F.rnn_step,
    (),
    stp(h=None),
    check=lambda h: np.testing.assert_array_equal(h, F.rnn_step(**stp(h=np.zeros_like(STEP["h"])))),
)
add("step-nonlinearity", F.rnn_step, (), stp(nonlinearity=None), ValueError, r"nonlinearity")
add("step-alpha-str", F.rnn_step, (), stp(alpha="0.5"), TypeError, r"alpha")
add("step-alpha-nan", F.rnn_step, (), stp(alpha=math.nan), ValueError, r"alpha")
add("step-alpha-np", F.rnn_step, (), stp(alpha=np.float32(2.0)), ValueError, r"alpha")

# ---- valid but awkward functional inputs: same results as the plain call -------------------------


def _equal_to(plain_fn, plain_kwargs):
    def check(result):
        expected = plain_fn(**plain_kwargs)
        for got, want in zip(_flat(result), _flat(expected)):
            assert (got is None) == (want is None)
            if got is not None:
                assert got.dtype == want.dtype and np.array_equal(got, want, equal_nan=True)

    return check


def _flat(r):
    return list(r) if isinstance(r, tuple) else [r]


for layout, how in LAYOUTS.items():
    for name in FWD:  # noqa: PLC0206
        add(
            f"forward-{name}-{layout}-valid",
            F.rnn_forward,
            (),
            fwd(**{name: how(FWD[name])}),
            check=_equal_to(F.rnn_forward, FWD),
        )
    for name in BWD:  # noqa: PLC0206
        add(
            f"backward-{name}-{layout}-valid",
            F.rnn_backward,
            (),
            bwd(**{name: how(BWD[name])}),
            check=_equal_to(F.rnn_backward, bwd()),
        )
    for name in STEP:  # noqa: PLC0206
        add(
            f"step-{name}-{layout}-valid",
            F.rnn_step,
            (),
            stp(**{name: how(STEP[name])}),
            check=_equal_to(F.rnn_step, STEP),
        )
add(
    "forward-x-transposed-valid",
    F.rnn_forward,
    (),
    fwd(x=np.ascontiguousarray(X.transpose(2, 1, 0)).transpose(2, 1, 0)),
    check=_equal_to(F.rnn_forward, FWD),
)
add(
    "forward-lengths-uint8-valid",
    F.rnn_forward,
    (),
    fwd(lengths=np.array([1, 3], np.uint8)),
    check=_equal_to(F.rnn_forward, fwd(lengths=np.array([1, 3]))),
)


def _ref_check(kwargs, nonlinearity="tanh"):
    def check(result):
        y, h_n = result
        with np.errstate(invalid="ignore", over="ignore"):  # inf - inf in the reference's sums
            ry, rh = reference.rnn_forward(
                **{k: v for k, v in kwargs.items()}, nonlinearity=nonlinearity
            )
        np.testing.assert_allclose(y, ry, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(h_n, rh, rtol=1e-12, atol=1e-12)

    return check


for label, kw in [
    ("T0", fwd(x=X[:0])),
    ("B0", fwd(x=X[:, :0], h0=H0[:0])),
    ("D0", fwd(x=X[..., :0], weight_ih=W_IH[:, :0])),
    ("H0size", {"x": X, "weight_ih": W_IH[:0], "weight_hh": W_HH[:0, :0]}),
    ("nan-x", fwd(x=np.where(X > 0.3, np.nan, X))),
    ("inf-x", fwd(x=np.where(X > 0.3, np.inf, X))),
    ("nan-weight", fwd(weight_hh=np.where(W_HH > 0.4, np.nan, W_HH))),
    ("inf-h0", fwd(h0=np.where(H0 > 0.3, -np.inf, H0))),
]:
    add(f"forward-{label}-valid", F.rnn_forward, (), kw, check=_ref_check(kw))

# ---- layers: RNN ---------------------------------------------------------------------------------

RNN_CONFIGS = {
    "plain": {},
    "stack2-bidir": {"num_layers": 2, "bidirectional": True},
    "batch-first-relu": {"batch_first": True, "nonlinearity": "relu", "dtype": np.float64},
}


def make_rnn(cfg, trained=False):
    def make():
        layer = rnnfast.RNN(D, H, seed=3, **RNN_CONFIGS[cfg])
        layer.grads = {k: g + 0.25 for k, g in layer.grads.items()}  # non-zero grads to guard
        if trained:
            layer(rnn_x(cfg), lengths=[3, 2])
        return layer

    return make


def rnn_x(cfg):
    dt = RNN_CONFIGS[cfg].get("dtype", np.float32)
    return X.astype(dt) if not RNN_CONFIGS[cfg].get("batch_first") else X.swapaxes(0, 1).astype(dt)


def rnn_h0_shape(cfg):
    c = RNN_CONFIGS[cfg]
    return (c.get("num_layers", 1) * (2 if c.get("bidirectional") else 1), B, H)


for cfg in RNN_CONFIGS:  # noqa: PLC0206
    dt = RNN_CONFIGS[cfg].get("dtype", np.float32)
    other = np.float64 if dt == np.float32 else np.float32
    x = rnn_x(cfg)
    call = lambda layer, *a, **k: layer(*a, **k)
    for label, value, exc in BAD_ARRAY_TYPES + [
        ("None", None, TypeError),
        ("other-float", x.astype(other), TypeError),
    ]:
        add(f"rnn-{cfg}-x-{label}", call, (value,), {}, exc, r"\bx\b", layer=make_rnn(cfg))
    # x[0] (a 2-D (T, D)) is one unbatched sequence, as torch: valid
    for label, value in [
        ("1d", x[0, 0]),
        ("2d-wrong-D", x[0][..., :-1]),
        ("4d", x[None]),
        ("wrong-D", x[..., :-1]),
        ("scalar", np.float32(1).astype(dt)),
    ]:
        add(f"rnn-{cfg}-x-{label}", call, (value,), {}, ValueError, r"\bx\b", layer=make_rnn(cfg))
    add(
        f"rnn-{cfg}-x-absurd",
        call,
        (huge((HUGE, HUGE, D), dt),),
        {},
        (MemoryError, ValueError),
        "",
        layer=make_rnn(cfg),
    )
    hs = rnn_h0_shape(cfg)
    for label, value, exc in [
        ("wrong-layers", np.zeros((hs[0] + 1,) + hs[1:], dt), ValueError),
        ("2d", np.zeros(hs[1:], dt), ValueError),
        ("int", np.zeros(hs, np.int64), TypeError),
        ("other-float", np.zeros(hs, other), TypeError),
        ("str", "h0", TypeError),
    ]:
        add(f"rnn-{cfg}-h0-{label}", call, (x,), {"h0": value}, exc, r"\bh0\b", layer=make_rnn(cfg))
    for label, kw, exc, rx in [
        ("lengths-float", {"lengths": [1.0, 2.0]}, TypeError, "lengths"),
        ("lengths-over", {"lengths": [T + 1, 1]}, ValueError, "lengths"),
        ("lengths-negative", {"lengths": [-1, 1]}, ValueError, "lengths"),
        ("lengths-shape", {"lengths": [1]}, ValueError, "lengths"),
        ("mask-shape", {"mask": np.ones((T, B), bool)}, ValueError, "mask"),
        ("mask-float", {"mask": np.full((B, T), 0.5)}, (TypeError, ValueError), "mask"),
        ("mask-str", {"mask": [["a"] * T] * B}, (TypeError, ValueError), "mask"),
        (
            "mask-and-lengths",
            {"mask": np.ones((B, T), bool), "lengths": [3, 3]},
            ValueError,
            "mask",
        ),
    ]:
        add(f"rnn-{cfg}-{label}", call, (x,), kw, exc, rx, layer=make_rnn(cfg))
    # valid awkward inputs: same as the plain call
    for layout, how in LAYOUTS.items():
        if layout == "list" and dt == np.float32:  # a list of floats is float64: refused
            add(
                f"rnn-{cfg}-x-list-float64",
                call,
                (x.tolist(),),
                {},
                TypeError,
                r"\bx\b.*float64",
                layer=make_rnn(cfg),
            )
            continue
        add(
            f"rnn-{cfg}-x-{layout}-valid",
            call,
            (how(x),),
            {"lengths": [3, 1]},
            layer=make_rnn(cfg),
            check=lambda r, cfg=cfg, x=x: _same_as_layer(r, make_rnn(cfg)(), x),
        )
    # backward after a training forward
    out_shape = x.shape[:2] + (H * (2 if RNN_CONFIGS[cfg].get("bidirectional") else 1),)
    bw = lambda layer, *a, **k: _backward_keeps_cache(layer, *a, **k)
    for label, value, exc in BAD_ARRAY_TYPES + [
        ("other-float", np.zeros(out_shape, other), TypeError)
    ]:
        add(
            f"rnn-{cfg}-backward-dy-{label}",
            bw,
            (value,),
            {},
            exc,
            r"\bdy\b",
            layer=make_rnn(cfg, trained=True),
        )
    for label, value in [
        ("wrong-shape", np.zeros(out_shape[:-1] + (1,), dt)),
        ("transposed", np.zeros(out_shape[::-1], dt)),
        ("4d", np.zeros((1,) + out_shape, dt)),
    ]:
        add(
            f"rnn-{cfg}-backward-dy-{label}",
            bw,
            (value,),
            {},
            ValueError,
            r"\bdy\b",
            layer=make_rnn(cfg, trained=True),
        )
    add(
        f"rnn-{cfg}-backward-dh_n-shape",
        bw,
        (None,),
        {"dh_n": np.zeros((1, B, 1), dt)},
        ValueError,
        r"\bdh_n\b",
        layer=make_rnn(cfg, trained=True),
    )
    add(
        f"rnn-{cfg}-backward-dh_n-int",
        bw,
        (None,),
        {"dh_n": np.zeros(hs, np.int32)},
        TypeError,
        r"\bdh_n\b",
        layer=make_rnn(cfg, trained=True),
    )
    # load_state_dict
    sd = make_rnn(cfg)().state_dict()
    first = next(iter(sd))
    for label, value, exc, rx in [
        ("not-mapping", [1, 2], TypeError, "state_dict"),
        ("None", None, TypeError, "state_dict"),
        ("missing", {k: v for k, v in sd.items() if k != first}, ValueError, first),
        ("extra", {**sd, "weight_ih_l9": sd[first]}, ValueError, "weight_ih_l9"),
        ("wrong-shape", {**sd, first: sd[first][:, :-1]}, ValueError, first),
        ("transposed", {**sd, first: sd[first].T}, ValueError, first),
        ("complex", {**sd, first: sd[first].astype(np.complex64)}, TypeError, first),
        ("str", {**sd, first: "abc"}, (TypeError, ValueError), first),
        ("object", {**sd, first: sd[first].astype(object)}, TypeError, first),
    ]:
        add(
            f"rnn-{cfg}-load_state_dict-{label}",
            lambda layer, v: layer.load_state_dict(v),
            (value,),
            {},
            exc,
            rx,
            layer=make_rnn(cfg),
        )
    add(
        f"rnn-{cfg}-load_state_dict-int-valid",
        lambda layer, v: layer.load_state_dict(v),
        ({k: np.round(v * 8).astype(np.int64) for k, v in sd.items()},),
        {},
        layer=make_rnn(cfg),
        check=None,
    )

# step (unidirectional only)
for cfg in ("plain", "batch-first-relu"):
    dt = RNN_CONFIGS[cfg].get("dtype", np.float32)
    st = lambda layer, *a, **k: layer.step(*a, **k)
    for label, value, exc in [
        ("wrong-D", X_T[:, :-1].astype(dt), ValueError),
        ("3d", X.astype(dt), ValueError),
        ("int", np.ones((B, D), np.int64), TypeError),
        ("str", "x", (TypeError, ValueError)),
        ("scalar", np.float64(1.0).astype(dt), ValueError),
        ("1d-wrong-D", X_T[0, :-1].astype(dt), ValueError),
        ("None", None, (TypeError, ValueError)),
    ]:
        add(f"rnn-{cfg}-step-x_t-{label}", st, (value,), {}, exc, r"\bx_t\b", layer=make_rnn(cfg))
    for label, value, exc in [
        ("2d", H_T.astype(dt), ValueError),
        ("wrong-layers", np.zeros((2, B, H), dt), ValueError),
        ("int", np.zeros((1, B, H), np.int64), TypeError),
    ]:
        add(
            f"rnn-{cfg}-step-h-{label}",
            st,
            (X_T.astype(dt),),
            {"h": value},
            exc,
            r"\bh\b",
            layer=make_rnn(cfg),
        )
add(
    "rnn-stack2-bidir-step",
    lambda layer, *a: layer.step(*a),
    (X_T.astype(np.float32),),
    {},
    ValueError,
    "bidirectional",
    layer=make_rnn("stack2-bidir"),
)

# constructor arguments
for label, args, kw, exc, rx in [
    ("input_size-0", (0, H), {}, ValueError, "input_size"),
    ("input_size-neg", (-3, H), {}, ValueError, "input_size"),
    ("input_size-float", (2.5, H), {}, TypeError, "input_size"),
    ("input_size-str", ("4", H), {}, TypeError, "input_size"),
    ("input_size-None", (None, H), {}, TypeError, "input_size"),
    ("hidden_size-bool", (D, True), {}, TypeError, "hidden_size"),
    ("hidden_size-absurd", (D, 10**12), {}, (MemoryError, ValueError), ""),
    ("num_layers-0", (D, H), {"num_layers": 0}, ValueError, "num_layers"),
    ("dtype-int", (D, H), {"dtype": np.int32}, TypeError, "dtype"),
    ("dtype-float16", (D, H), {"dtype": np.float16}, TypeError, "dtype"),
    ("dtype-str", (D, H), {"dtype": "floaty"}, TypeError, "dtype"),
    ("nonlinearity", (D, H), {"nonlinearity": "sigmoid"}, ValueError, "nonlinearity"),
    ("dropout-above-1", (D, H), {"num_layers": 2, "dropout": 1.5}, ValueError, "dropout"),
    ("dropout-nan", (D, H), {"dropout": math.nan}, ValueError, "dropout"),
    ("dropout-str", (D, H), {"dropout": "0.1"}, ValueError, "dropout"),
    ("alpha-list-len", (D, H), {"alpha": [0.5, 0.5]}, ValueError, "alpha"),
    ("alpha-0", (D, H), {"alpha": 0}, ValueError, "alpha"),
    ("merge_mode", (D, H), {"merge_mode": "max", "bidirectional": True}, ValueError, "merge_mode"),
    ("residual-1-layer", (D, H), {"residual": True}, ValueError, "residual"),
    ("return_state-str", (D, H), {"return_state": "yes"}, TypeError, "return_state"),
]:
    add(f"RNN()-{label}", rnnfast.RNN, args, kw, exc, rx)

# ---- Linear / Embedding / Dropout / Sequential ---------------------------------------------------


def make_linear(trained=False):
    def make():
        layer = rnnfast.Linear(D, 3, seed=1)
        layer.grads = {k: g + 0.5 for k, g in layer.grads.items()}
        if trained:
            layer(X.astype(np.float32))
        return layer

    return make


def make_embedding(trained=False):
    def make():
        layer = rnnfast.Embedding(7, 3, seed=1)
        layer.grads = {k: g + 0.5 for k, g in layer.grads.items()}
        if trained:
            layer(np.array([[1, 2], [3, 6]]))
        return layer

    return make


def make_dropout(trained=False):
    def make():
        layer = rnnfast.Dropout(0.5, seed=1)
        if trained:
            layer(X.astype(np.float32))
        return layer

    return make


def make_sequential():
    def make():
        return rnnfast.Sequential(
            [
                rnnfast.Linear(D, 3, seed=1),
                rnnfast.Dropout(0.2, seed=2),
                rnnfast.Linear(3, 2, seed=3),
            ]
        )

    return make


call = lambda layer, *a, **k: layer(*a, **k)
back = lambda layer, *a: _backward_keeps_cache(layer, *a)
load_sd = lambda layer, v: layer.load_state_dict(v)
for label, value, exc in BAD_ARRAY_TYPES + [("None", None, TypeError), ("float64", X, TypeError)]:
    add(f"linear-x-{label}", call, (value,), {}, exc, r"\bx\b", layer=make_linear())
    add(f"dropout-x-{label}", call, (value,), {}, exc, r"\bx\b", layer=make_dropout())
    add(f"sequential-x-{label}", call, (value,), {}, exc, r"\bx\b", layer=make_sequential())
for label, value in [("wrong-last", X[..., :-1].astype(np.float32)), ("scalar", np.float32(1.0))]:
    add(f"linear-x-{label}", call, (value,), {}, ValueError, r"\bx\b", layer=make_linear())
    add(f"sequential-x-{label}", call, (value,), {}, ValueError, r"\bx\b", layer=make_sequential())
add(
    "linear-x-absurd",
    call,
    (huge((HUGE, HUGE, D), np.float32),),
    {},
    (MemoryError, ValueError),
    "",
    layer=make_linear(),
)
for label, value, exc in [
    ("wrong-shape", np.zeros((T, B, 4), np.float32), ValueError),
    ("int", np.zeros((T, B, 3), np.int32), TypeError),
    ("float64", np.zeros((T, B, 3)), TypeError),
    ("str", "dy", TypeError),
]:
    add(
        f"linear-backward-dy-{label}",
        back,
        (value,),
        {},
        exc,
        r"\bdy\b",
        layer=make_linear(trained=True),
    )
for label, value, exc in [
    ("float", np.array([0.0, 1.0]), TypeError),
    ("bool", np.array([True]), TypeError),
    ("str", ["a"], TypeError),
    ("None", None, TypeError),
    ("negative", np.array([-1, 2]), ValueError),
    ("too-big", np.array([7]), ValueError),
    ("absurd", np.array([2**62]), ValueError),
]:
    add(f"embedding-ids-{label}", call, (value,), {}, exc, r"\bids\b", layer=make_embedding())
for label, value, exc in [
    ("wrong-shape", np.zeros((2, 2, 4), np.float32), ValueError),
    ("int", np.zeros((2, 2, 3), np.int32), TypeError),
]:
    add(
        f"embedding-backward-{label}",
        back,
        (value,),
        {},
        exc,
        r"\bd_out\b",
        layer=make_embedding(trained=True),
    )
    add(
        f"dropout-backward-{label}",
        back,
        (np.zeros(X.shape[:2] + (value.shape[2] + 1,), value.dtype),),
        {},
        exc,
        r"\bd_out\b",
        layer=make_dropout(trained=True),
    )
for label, value, exc, rx in [
    ("missing", {}, ValueError, "state_dict"),
    (
        "extra",
        {"weight": np.zeros((3, D)), "bias": np.zeros(3), "zzz": np.zeros(1)},
        ValueError,
        "zzz",
    ),
    ("shape", {"weight": np.zeros((D, 3)), "bias": np.zeros(3)}, ValueError, "weight"),
    ("complex", {"weight": np.zeros((3, D), complex), "bias": np.zeros(3)}, TypeError, "weight"),
]:
    add(f"linear-load_state_dict-{label}", load_sd, (value,), {}, exc, rx, layer=make_linear())
add(
    "sequential-load_state_dict-shape",
    load_sd,
    (
        {
            "0.weight": np.zeros((3, D)),
            "0.bias": np.zeros(3),
            "2.weight": np.zeros((3, 2)),
            "2.bias": np.zeros(2),
        },
    ),
    {},
    ValueError,
    r"2\.weight",
    layer=make_sequential(),
)
for label, args, exc, rx in [
    ("Linear-0", (rnnfast.Linear, 0, 3), ValueError, "in_features"),
    ("Linear-float", (rnnfast.Linear, D, 3.0), TypeError, "out_features"),
    ("Linear-absurd", (rnnfast.Linear, HUGE, HUGE), (MemoryError, ValueError), ""),
    ("Linear-dtype", (rnnfast.Linear, D, 3, True, np.int8), TypeError, "dtype"),
    ("Embedding-neg", (rnnfast.Embedding, -1, 3), ValueError, "num_embeddings"),
    ("Embedding-absurd", (rnnfast.Embedding, HUGE, HUGE), (MemoryError, ValueError), ""),
    ("Dropout-above-1", (rnnfast.Dropout, 1.0001), ValueError, r"\bp\b"),
    ("Dropout-neg", (rnnfast.Dropout, -0.1), ValueError, r"\bp\b"),
    ("Dropout-nan", (rnnfast.Dropout, math.nan), ValueError, r"\bp\b"),
    ("Dropout-None", (rnnfast.Dropout, None), ValueError, r"\bp\b"),
    (
        "Sequential-str",
        (rnnfast.Sequential, [rnnfast.Linear(2, 2), "relu"]),
        TypeError,
        r"layers\[1\]",
    ),
    ("Sequential-None", (rnnfast.Sequential, [None]), TypeError, r"layers\[0\]"),
]:
    add(f"ctor-{label}", args[0], args[1:], {}, exc, rx)

# ---- losses --------------------------------------------------------------------------------------

LOGITS = _r(T, B, 6)
TARGETS = np.array([[0, 5], [2, 3], [1, 1]])
for label, kw, exc, rx in [
    ("logits-int", {"logits": TARGETS[..., None], "targets": TARGETS}, TypeError, "logits"),
    ("logits-str", {"logits": "abc", "targets": TARGETS}, TypeError, "logits"),
    ("logits-None", {"logits": None, "targets": TARGETS}, TypeError, "logits"),
    ("logits-complex", {"logits": LOGITS.astype(complex), "targets": TARGETS}, TypeError, "logits"),
    ("logits-scalar", {"logits": np.float64(1.0), "targets": np.int64(0)}, ValueError, "logits"),
    ("targets-float", {"logits": LOGITS, "targets": TARGETS.astype(float)}, TypeError, "targets"),
    ("targets-str", {"logits": LOGITS, "targets": [["a"]]}, TypeError, "targets"),
    ("targets-shape", {"logits": LOGITS, "targets": TARGETS.T}, ValueError, "targets"),
    ("targets-range", {"logits": LOGITS, "targets": TARGETS + 1}, ValueError, "targets"),
    ("targets-negative", {"logits": LOGITS, "targets": -TARGETS - 1}, ValueError, "targets"),
    (
        "reduction",
        {"logits": LOGITS, "targets": TARGETS, "reduction": "none"},
        ValueError,
        "reduction",
    ),
    (
        "mask-shape",
        {"logits": LOGITS, "targets": TARGETS, "mask": np.ones((B, T), bool)},
        ValueError,
        "mask",
    ),
    (
        "mask-int",
        {"logits": LOGITS, "targets": TARGETS, "mask": np.ones((T, B), int)},
        ValueError,
        "mask",
    ),
    (
        "lengths-float",
        {"logits": LOGITS, "targets": TARGETS, "lengths": [1.0, 2.0]},
        ValueError,
        "lengths",
    ),
    (
        "lengths-over",
        {"logits": LOGITS, "targets": TARGETS, "lengths": [T + 1, 1]},
        ValueError,
        "lengths",
    ),
    (
        "lengths-3d-targets",
        {"logits": LOGITS[None], "targets": TARGETS[None], "lengths": [1, 1]},
        ValueError,
        "lengths",
    ),
]:
    add(f"cross_entropy-{label}", losses.cross_entropy, (), kw, exc, rx)
for label, args, kw, exc, rx in [
    ("pred-str", ("abc", "abd"), {}, TypeError, "pred"),
    ("pred-None", (None, 1.0), {}, TypeError, "pred"),
    ("pred-int", (np.ones(3, int), np.ones(3)), {}, TypeError, "pred"),
    ("pred-complex", (np.ones(3, complex), np.ones(3)), {}, TypeError, "pred"),
    ("target-str", (np.ones(3), ["a", "b", "c"]), {}, (TypeError, ValueError), "target"),
    ("target-complex", (np.ones(3), np.ones(3, complex)), {}, TypeError, "target"),
    ("target-shape", (np.ones(3), np.ones(4)), {}, ValueError, "target"),
    ("target-broadcast", (np.ones((3, 1)), np.ones((1, 3))), {}, ValueError, "target"),
    ("reduction", (np.ones(3), np.ones(3)), {"reduction": "avg"}, ValueError, "reduction"),
]:
    add(f"mse_loss-{label}", losses.mse_loss, args, kw, exc, rx)

# ---- optimizers and clipping ---------------------------------------------------------------------


def pairs():
    return [(np.ones((2, 3)), np.full((2, 3), 2.0)), (np.ones(3), np.full(3, -1.0))]


P = pairs()
# read-only memory (a layer's read-only parameter, whose memory is writeable, is accepted: the
# optimizers write it through rnnfast.writable_parameters' path)
RO = np.frombuffer(np.ones(3).tobytes(), dtype=np.float64)
for cls in (optim.SGD, optim.Adam):
    n = cls.__name__
    base = {"lr": 0.1}
    for label, params, exc, rx in [
        ("None", None, TypeError, "params"),
        ("str", "abc", TypeError, "params"),
        ("array", np.ones(3), TypeError, "params"),
        ("empty", [], ValueError, "params"),
        ("int-param", [(np.ones(3, int), np.ones(3, int))], TypeError, r"params\[0\]"),
        ("list-param", [([1.0], [1.0])], TypeError, r"params\[0\]"),
        ("shape", [(np.ones(3), np.ones(4))], ValueError, r"params\[0\]"),
        ("readonly", [(RO, np.ones(3))], ValueError, r"params\[0\]"),
        ("repeated", [P[0], P[0]], ValueError, "params"),
        ("triple", [(np.ones(3), np.ones(3), np.ones(3))], TypeError, r"params\[0\]"),
    ]:
        add(f"{n}-params-{label}", cls, (params,), base, exc, rx)
    for label, kw, exc, rx in [
        ("lr-neg", {"lr": -0.1}, ValueError, "lr"),
        ("lr-nan", {"lr": math.nan}, ValueError, "lr"),
        ("lr-str", {"lr": "0.1"}, TypeError, "lr"),
        ("lr-None", {"lr": None}, TypeError, "lr"),
        ("lr-bool", {"lr": True}, TypeError, "lr"),
        ("lr-complex", {"lr": 1j}, TypeError, "lr"),
        ("weight_decay-neg", {"lr": 0.1, "weight_decay": -1.0}, ValueError, "weight_decay"),
    ]:
        add(f"{n}-{label}", cls, (pairs(),), kw, exc, rx)
for label, kw, exc, rx in [
    ("momentum-neg", {"momentum": -0.5}, ValueError, "momentum"),
    ("dampening-2", {"dampening": 2.0}, ValueError, "dampening"),
    ("nesterov-str", {"nesterov": "yes"}, TypeError, "nesterov"),
    ("nesterov-no-momentum", {"nesterov": True}, ValueError, "nesterov"),
]:
    add(f"SGD-{label}", optim.SGD, (pairs(),), {"lr": 0.1, **kw}, exc, rx)
for label, kw, exc, rx in [
    ("betas-1", {"betas": (1.0, 0.999)}, ValueError, r"betas\[0\]"),
    ("betas-neg", {"betas": (0.9, -0.1)}, ValueError, r"betas\[1\]"),
    ("betas-scalar", {"betas": 0.9}, TypeError, "betas: expected a pair"),
    ("betas-triple", {"betas": (0.9, 0.9, 0.9)}, ValueError, "betas"),
    ("betas-str", {"betas": ("a", "b")}, TypeError, r"betas\[0\]"),
    ("eps-neg", {"eps": -1e-8}, ValueError, "eps"),
]:
    add(f"Adam-{label}", optim.Adam, (pairs(),), kw, exc, rx)
for label, args, kw, exc, rx in [
    ("max_norm-neg", (pairs(), -1.0), {}, ValueError, "max_norm"),
    ("max_norm-nan", (pairs(), math.nan), {}, ValueError, "max_norm"),
    ("max_norm-str", (pairs(), "1"), {}, TypeError, "max_norm"),
    ("max_norm-None", (pairs(), None), {}, TypeError, "max_norm"),
    ("norm_type-0", (pairs(), 1.0), {"norm_type": 0}, ValueError, "norm_type"),
    ("norm_type-neg", (pairs(), 1.0), {"norm_type": -2.0}, ValueError, "norm_type"),
    ("norm_type-str", (pairs(), 1.0), {"norm_type": "fro"}, TypeError, "norm_type"),
    ("params-None", (None, 1.0), {}, TypeError, "params"),
    ("params-empty", ([], 1.0), {}, ValueError, "params"),
    ("params-shape", ([(np.ones(3), np.ones(2))], 1.0), {}, ValueError, r"params\[0\]"),
    (
        "nonfinite-error",
        ([(np.ones(2), np.array([1.0, np.nan]))], 1.0),
        {"error_if_nonfinite": True},
        RuntimeError,
        "clip_grad_norm",
    ),
]:
    add(f"clip_grad_norm-{label}", optim.clip_grad_norm, args, kw, exc, rx)


def _clip_nan_untouched(total):
    assert math.isnan(total)


add(
    "clip_grad_norm-nan-grads-untouched-valid",
    optim.clip_grad_norm,
    ([(np.ones(2), np.array([1.0, np.nan]))], 1.0),
    {},
    check=_clip_nan_untouched,
)
add(
    "clip_grad_norm-inf-norm-valid",
    optim.clip_grad_norm,
    (pairs(), 100.0),
    {"norm_type": math.inf},
    check=lambda total: total == 2.0,
)

# ---- persistence ---------------------------------------------------------------------------------


def _npz(**arrays):
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    buf.seek(0)
    return buf


def _saved_rnn():
    buf = io.BytesIO()
    rnnfast.save(rnnfast.RNN(D, H, seed=0), buf)
    return buf.getvalue()


GOOD = _saved_rnn()
CONFIG = np.load(io.BytesIO(GOOD))["__rnnfast_config__"]
for label, args, exc, rx in [
    ("save-None-layer", (None, io.BytesIO()), TypeError, "layer"),
    ("save-object-layer", (object(), io.BytesIO()), TypeError, "layer"),
    ("save-str-layer", ("rnn", io.BytesIO()), TypeError, "layer"),
    ("save-path-None", (rnnfast.RNN(D, H), None), TypeError, r"path|PathLike|NoneType"),
    ("save-path-int", (rnnfast.RNN(D, H), 3.5), TypeError, r"path|PathLike|float"),
]:
    add(label, rnnfast.save, args, {}, exc, rx)
for label, src, exc, rx in [
    ("load-None", None, TypeError, r"path|PathLike|NoneType"),
    ("load-float", 3.5, TypeError, r"path|PathLike|float"),
    ("load-garbage", io.BytesIO(b"not an npz file at all"), ValueError, "file"),
    ("load-empty", io.BytesIO(b""), ValueError, "file"),
    ("load-truncated", io.BytesIO(GOOD[: len(GOOD) // 2]), ValueError, "file"),
    ("load-npy", None, ValueError, "file"),
    ("load-no-config", _npz(__rnnfast_format__=np.array(1)), ValueError, "__rnnfast_config__"),
    (
        "load-bad-version",
        _npz(__rnnfast_format__=np.array(99), __rnnfast_config__=CONFIG),
        ValueError,
        "version",
    ),
    (
        "load-version-float",
        _npz(__rnnfast_format__=np.array(1.0), __rnnfast_config__=CONFIG),
        ValueError,
        "version",
    ),
    (
        "load-config-not-json",
        _npz(__rnnfast_format__=np.array(1), __rnnfast_config__=np.frombuffer(b"{oops", np.uint8)),
        ValueError,
        "config",
    ),
    (
        "load-config-wrong-dtype",
        _npz(__rnnfast_format__=np.array(1), __rnnfast_config__=CONFIG.astype(np.int32)),
        ValueError,
        "config",
    ),
    (
        "load-missing-params",
        _npz(__rnnfast_format__=np.array(1), __rnnfast_config__=CONFIG),
        ValueError,
        "weight|missing",
    ),
]:
    if label == "load-npy":
        src = io.BytesIO()
        np.save(src, np.zeros(3))
        src.seek(0)
    add(label, rnnfast.load, (src,), {}, exc, rx)


# ---- the runner ----------------------------------------------------------------------------------


def _snapshot(obj):
    """Deep copies of every array reachable through lists, tuples and dicts."""
    if isinstance(obj, np.ndarray):
        # an absurd broadcast view has no memory of its own to modify: keep it as it is
        return obj.copy() if obj.nbytes < 2**30 else obj
    if isinstance(obj, (list, tuple)):
        return type(obj)(_snapshot(o) for o in obj) if not hasattr(obj, "_fields") else obj
    if isinstance(obj, dict):
        return {k: _snapshot(v) for k, v in obj.items()}
    return obj


def _assert_same(before, after, where):
    if isinstance(before, np.ndarray):
        assert isinstance(after, np.ndarray), where
        assert before.dtype == after.dtype and before.shape == after.shape, where
        if before.dtype.kind in "fc":
            assert np.array_equal(before, after, equal_nan=True), f"{where} was modified"
        else:
            assert np.array_equal(before, after), f"{where} was modified"
    elif isinstance(before, (list, tuple)) and not hasattr(before, "_fields"):
        assert len(before) == len(after), where
        for i, (b, a) in enumerate(zip(before, after)):
            _assert_same(b, a, f"{where}[{i}]")
    elif isinstance(before, dict):
        assert before.keys() == after.keys(), where
        for k in before:
            _assert_same(before[k], after[k], f"{where}[{k!r}]")


def _layer_state(layer):
    return {
        "params": {k: v.copy() for k, v in layer.state_dict().items()},
        "grads": {k: v.copy() for k, v in layer.grads.items()},
    }


def _backward_keeps_cache(layer, *args, **kwargs):
    """layer.backward(...); on failure, check the forward is kept for a retry, then re-raise."""
    try:
        return layer.backward(*args, **kwargs)
    except (TypeError, ValueError):
        state = _layer_state(layer)
        assert layer._cache is not None, "a failed backward dropped the forward's cache"
        layer._retry_state = state
        raise


def _same_as_layer(result, fresh, x):
    expected = fresh(x, lengths=[3, 1])
    for got, want in zip(result, expected):
        assert np.array_equal(got, want)


def _ids(c):
    return c.id


assert len({c.id for c in CASES}) == len(CASES), "duplicate case ids"


def test_case_count():
    """The number of cases, for the report (and a guard against the table shrinking)."""
    print(f"\n{len(CASES)} input cases")
    assert len(CASES) > 500


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_input(case):
    args = copy.copy(case.args)
    kwargs = dict(case.kwargs)
    # rewind file-like sources so each run reads from the start
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, io.BytesIO):
            a.seek(0)
    before_args, before_kwargs = _snapshot(args), _snapshot(kwargs)
    layer = case.layer() if case.layer is not None else None
    call_args = (layer,) + args if layer is not None else args
    layer_before = _layer_state(layer) if layer is not None else None
    if case.exc is None:
        result = case.fn(*call_args, **kwargs)
        if case.check is not None:
            case.check(result)
    else:
        with pytest.raises(case.exc) as info:
            case.fn(*call_args, **kwargs)
        if case.match:
            assert re.search(case.match, str(info.value)), (
                f"{type(info.value).__name__} message {str(info.value)!r} does not name "
                f"{case.match!r}"
            )
        if layer is not None:
            _assert_same(layer_before, _layer_state(layer), "layer")
            if isinstance(layer, rnnfast.RNN) and getattr(layer, "_retry_state", None):
                # the forward was kept: a correct backward still works after the failure
                layer.backward(None)
    _assert_same(before_args, args, "args")
    _assert_same(before_kwargs, kwargs, "kwargs")
