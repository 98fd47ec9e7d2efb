"""The gated kernels (rnnfast.functional's gru_* and lstm_*): every result against the NumPy
reference, gradients also by finite differences, over cells x dtypes x odd sizes x lengths x
activations x ISAs x thread counts (a seeded subset by default, the rest with ``-m full``);
bitwise reproducibility per thread count; bad input."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ISAS, assert_close, numerical_gradient, sweep

import rnnfast
from rnnfast import _core
from rnnfast import functional as F
from rnnfast import reference as R

# (cell, reset_after, proj_size): the forms the kernels run
CELLS = {
    "gru": ("gru", True, 0),
    "gru_reset_before": ("gru", False, 0),
    "lstm": ("lstm", True, 0),
    "lstm_proj": ("lstm", True, 3),
}
# (T, B, D, H): odd sizes, T = 1, B = 1, H of one and of several panels
SHAPES = [(1, 1, 1, 1), (4, 3, 5, 17), (6, 1, 3, 33), (3, 5, 17, 100), (9, 4, 2, 3)]
FUNCTIONS = [("tanh", "sigmoid"), ("relu", "hard_sigmoid")]


class Gated:
    """One random gated problem and the calls that run it through a module (F or R)."""

    def __init__(
        self,
        rng,
        name,
        T,
        B,
        D,
        H,
        dtype,
        lengths,
        functions=("tanh", "sigmoid"),
        masked=None,
        dropout=False,
    ):
        self.kind, self.reset_after, P = CELLS[name]
        G = 3 if self.kind == "gru" else 4
        self.H, self.P = H, P
        Rw = P or H
        bound = 1.0 / np.sqrt(H)

        def u(*shape):
            return rng.uniform(-bound, bound, size=shape).astype(dtype)

        self.x = rng.standard_normal((T, B, D)).astype(dtype)
        self.weights = dict(weight_ih=u(G * H, D), weight_hh=u(G * H, Rw), bias_ih=u(G * H))
        self.weights["bias_hh"] = u(G * H)
        self.weight_hr = u(P, H) if P else None
        self.h0 = rng.uniform(-1, 1, (B, Rw)).astype(dtype)
        self.c0 = rng.uniform(-1, 1, (B, H)).astype(dtype) if self.kind == "lstm" else None
        self.lengths = rng.integers(0, T + 1, B) if lengths else None
        # Keras's general mask (masked: the value of zero_output_for_mask), None: no mask
        self.masks = dict(
            step_mask=None, zero_output_for_mask=False, recurrent_mask=None, input_mask=None
        )
        if masked is not None:
            keep = rng.random((T, B)) < 0.6
            self.masks.update(step_mask=keep, zero_output_for_mask=masked)
        if dropout:  # Keras 3's dropouts: one mask per gate on h_{t-1} and on x_t
            keep = rng.random((G, B, Rw)) < 0.7
            self.masks["recurrent_mask"] = (keep / 0.7).astype(dtype)
            keep = rng.random((G, B, D)) < 0.8
            self.masks["input_mask"] = (keep / 0.8).astype(dtype)
        self.functions = dict(activation=functions[0], recurrent_activation=functions[1])
        self.dy = rng.standard_normal((T, B, Rw)).astype(dtype)
        self.dh_n = rng.standard_normal((B, Rw)).astype(dtype)
        self.dc_n = rng.standard_normal((B, H)).astype(dtype) if self.kind == "lstm" else None

    def as64(self):
        """The same problem in float64 (the reference's oracle inputs)."""
        q = object.__new__(Gated)
        q.__dict__ = {
            k: (v.astype(np.float64) if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v)
            for k, v in self.__dict__.items()
        }
        q.weights = {k: v.astype(np.float64) for k, v in self.weights.items()}
        return q

    def forward(self, module, **kw):
        if self.kind == "gru":
            return module.gru_forward(
                self.x, **self.weights, h0=self.h0, lengths=self.lengths,
                reset_after=self.reset_after, **self.functions, **self.masks, **kw,
            )  # fmt: skip
        return module.lstm_forward(
            self.x, **self.weights, h0=self.h0, c0=self.c0, lengths=self.lengths,
            weight_hr=self.weight_hr, **self.functions, **self.masks, **kw,
        )  # fmt: skip

    def backward(self, module, out, **kw):
        w = self.weights
        args = (self.x, w["weight_ih"], w["weight_hh"], w["bias_ih"], w["bias_hh"], out.y)
        if self.kind == "gru":
            return module.gru_backward(
                *args, out.workspace, self.dy, self.dh_n, h0=self.h0, lengths=self.lengths,
                reset_after=self.reset_after, **self.functions, **self.masks, **kw,
            )  # fmt: skip
        return module.lstm_backward(
            *args, out.workspace, self.dy, self.dh_n, self.dc_n, h0=self.h0, c0=self.c0,
            lengths=self.lengths, weight_hr=self.weight_hr, **self.functions, **self.masks,
            **kw,
        )  # fmt: skip

    def run(self, module):
        """Forward and backward: a dict of every result by name."""
        out = self.forward(module, keep_workspace=True)
        grads = self.backward(module, out)
        results = {"y": out.y, "h_n": out.h_n, "c_n": out.c_n}
        results.update(grads._asdict())
        return {k: v for k, v in results.items() if v is not None}


SWEEP = sweep(
    {
        "cell": list(CELLS),
        "dtype": [np.float32, np.float64],
        "shape": SHAPES,
        "lengths": [False, True],
        "mask": [None, False, True],  # no step mask; one, skipped steps repeat / output zeros
        "dropout": [False, True],  # recurrent dropout masks, one per gate
        "functions": FUNCTIONS,
        "isa": ISAS,
        "threads": [1, 2],
    },
    seed=23,
    extra=12,
)


@pytest.mark.parametrize("case", SWEEP)
def test_kernels_match_the_reference(case, rng, restore_threads):
    p = Gated(
        rng, case["cell"], *case["shape"], case["dtype"], case["lengths"], case["functions"],
        case["mask"], case["dropout"],
    )  # fmt: skip
    previous = _core.active_isa()
    _core.set_active_isa(case["isa"])
    try:
        rnnfast.set_num_threads(case["threads"])
        got = p.run(F)
    finally:
        _core.set_active_isa(previous)
    expected = p.as64().run(R)
    assert got.keys() == expected.keys()
    for name, value in got.items():
        assert_close(value, expected[name], case["dtype"], name)


@pytest.mark.parametrize("cell", list(CELLS))
@pytest.mark.parametrize("functions", FUNCTIONS)
@pytest.mark.parametrize("masked", [None, False, True])
@pytest.mark.parametrize("dropout", [False, True])
def test_gradients_match_finite_differences(cell, functions, masked, dropout, rng):
    p = Gated(rng, cell, 3, 2, 3, 4, np.float64, True, functions, masked, dropout)
    # relu and hard_sigmoid have kinks: keep the pre-activations away from them
    if functions[0] == "relu":
        p.x *= 0.5
    got = p.run(F)

    def loss():
        out = p.forward(F)
        total = np.sum(out.y * p.dy) + np.sum(out.h_n * p.dh_n)
        return total + (np.sum(out.c_n * p.dc_n) if p.c_n_grad else 0.0)

    p.c_n_grad = p.kind == "lstm"
    arrays = {"dx": p.x, "dh0": p.h0, "dc0": p.c0, "dweight_hr": p.weight_hr}
    arrays.update({"d" + k: v for k, v in p.weights.items()})
    for name, array in arrays.items():
        if array is None:
            continue
        numeric = numerical_gradient(loss, array)
        np.testing.assert_allclose(got[name], numeric, rtol=1e-6, atol=1e-7, err_msg=name)


@pytest.mark.parametrize("cell", list(CELLS))
def test_a_thread_count_gives_the_same_bits(cell, rng, restore_threads):
    # big enough for two threads, split by blocks of hidden units and by rows; masked too
    cases = [((6, 16, 24, 130), None, False), ((3, 64, 4, 5), None, False)]
    cases += [((5, 16, 8, 70), False, True)]  # masked, recurrent dropout
    # 3 unit blocks split 2 to 1 between 2 threads: the step splits the rows instead
    cases += [((4, 48, 20, 96), None, False)]
    for shape, masked, dropout in cases:
        p = Gated(rng, cell, *shape, np.float32, True, masked=masked, dropout=dropout)
        runs = {}
        for threads in (1, 2, 2, 1):
            rnnfast.set_num_threads(threads)
            got = p.run(F)
            if threads in runs:
                for name, value in got.items():
                    np.testing.assert_array_equal(value, runs[threads][name], err_msg=name)
            runs[threads] = got
        for name, value in runs[2].items():
            assert_close(value, runs[1][name], np.float32, name)


@pytest.mark.parametrize("cell", list(CELLS))
def test_a_batch_of_one(cell, rng, restore_threads):
    """B = 1 runs the recurrent product along W_hh's rows (dot_rows), not the packed GEMM: the
    reference's values, with lengths and step masks, over one unit block and several (a last
    narrower one), a member's blocks at two stepping threads (H = 130) with the same bits as at
    one, and W_hh's rows 4 KiB apart (H = 512 doubles); the same sequence in a batch of two (the GEMM) agrees up to rounding."""
    cases = (((7, 5, 9), None), ((6, 3, 40), False), ((5, 4, 130), True), ((2, 2, 512), None))
    for (T, D, H), masked in cases:
        p = Gated(rng, cell, T, 1, D, H, np.float64, True, masked=masked)
        expected = p.as64().run(R)
        runs = {}
        for threads in (1, 2):
            rnnfast.set_num_threads(threads)
            runs[threads] = p.run(F)
            for name, value in runs[threads].items():
                assert_close(value, expected[name], np.float64, f"{name}, {threads} threads")
        for name, value in runs[2].items():
            np.testing.assert_array_equal(value, runs[1][name], err_msg=name)
    twin = Gated(rng, cell, 6, 2, 3, 40, np.float64, False)
    one = object.__new__(Gated)
    one.__dict__ = dict(twin.__dict__)
    one.x, one.h0 = twin.x[:, :1].copy(), twin.h0[:1].copy()
    one.c0 = None if twin.c0 is None else twin.c0[:1].copy()
    alone, together = one.forward(F), twin.forward(F)
    assert_close(alone.y, together.y[:, :1], np.float64, "y")


@pytest.mark.parametrize("cell", list(CELLS))
@pytest.mark.parametrize("masked", [None, True])
def test_without_sequences_the_last_state_is_the_same(cell, masked, rng):
    # T > the projection's chunk of 16
    p = Gated(rng, cell, 40, 3, 4, 9, np.float64, True, masked=masked)
    full = p.forward(F, keep_workspace=True)
    last = p.forward(F, return_sequences=False)
    assert last.y is None and last.workspace is None
    np.testing.assert_array_equal(last.h_n, full.h_n)
    if p.kind == "lstm":
        np.testing.assert_array_equal(last.c_n, full.c_n)


@pytest.mark.parametrize("cell", list(CELLS))
def test_step_is_the_forward_over_one_step(cell, rng):
    # the step's products are dot_rows on the stored weights, not the packed GEMM: the same
    # values up to rounding
    p = Gated(rng, cell, 1, 3, 4, 5, np.float64, False)
    out = p.forward(F)
    if p.kind == "gru":
        h = F.gru_step(p.x[0], p.h0, **p.weights, reset_after=p.reset_after)
        assert_close(h, out.h_n, np.float64, "h")
    else:
        h, c = F.lstm_step(p.x[0], p.h0, p.c0, **p.weights, weight_hr=p.weight_hr)
        assert_close(h, out.h_n, np.float64, "h")
        assert_close(c, out.c_n, np.float64, "c")


@pytest.mark.parametrize("cell", list(CELLS))
def test_any_layout_of_input_and_inputs_unchanged(cell, rng):
    p = Gated(rng, cell, 5, 4, 3, 6, np.float64, True)
    expected = p.run(F)
    copies = {k: v.copy() for k, v in p.weights.items()}
    x = p.x.copy()
    p.x = np.asfortranarray(p.x)  # any memory layout is taken
    p.weights = {k: v[::-1].copy()[::-1] for k, v in p.weights.items()}  # negative strides
    got = p.run(F)
    for name, value in got.items():
        np.testing.assert_array_equal(value, expected[name], err_msg=name)
    np.testing.assert_array_equal(p.x, x)
    for k, v in p.weights.items():
        np.testing.assert_array_equal(v, copies[k])


@pytest.mark.parametrize("cell", list(CELLS))
def test_empty_sequences_and_batches(cell, rng):
    for shape in [(0, 3, 2, 4), (4, 0, 2, 4)]:
        p = Gated(rng, cell, *shape, np.float64, False)
        got = p.run(F)
        expected = p.run(R)
        for name, value in got.items():
            np.testing.assert_array_equal(value, expected[name], err_msg=name)


def test_bad_input_names_the_argument(rng):
    p = Gated(rng, "lstm", 3, 2, 3, 4, np.float32, False)
    w = p.weights
    with pytest.raises(TypeError, match="x: .*float32"):
        F.lstm_forward(p.x.astype(np.float64), **w)
    with pytest.raises(ValueError, match=r"weight_hh: expected shape"):
        F.lstm_forward(p.x, w["weight_ih"], w["weight_hh"][:, :3])
    with pytest.raises(ValueError, match=r"weight_ih: expected 4\*H rows"):
        F.lstm_forward(p.x, w["weight_ih"][:5], w["weight_hh"])
    with pytest.raises(ValueError, match="h0: expected shape"):
        F.lstm_forward(p.x, **w, h0=np.zeros((3, 4), np.float32))
    with pytest.raises(ValueError, match="activation: expected 'tanh' or 'relu'"):
        F.lstm_forward(p.x, **w, activation="sigmoid")
    with pytest.raises(ValueError, match="recurrent_activation: expected 'sigmoid'"):
        F.gru_forward(p.x, **{k: v[:12] for k, v in w.items()}, recurrent_activation="tanh")
    with pytest.raises(ValueError, match="keep_workspace"):
        F.lstm_forward(p.x, **w, keep_workspace=True, return_sequences=False)
    with pytest.raises(TypeError, match="reset_after"):
        F.gru_forward(p.x, **{k: v[:12] for k, v in w.items()}, reset_after=1)
    with pytest.raises(ValueError, match="lengths"):
        F.lstm_forward(p.x, **w, lengths=[4, 1])
    out = F.lstm_forward(p.x, **w, keep_workspace=True)
    with pytest.raises(ValueError, match="workspace: expected the workspace"):
        F.lstm_backward(
            p.x, w["weight_ih"], w["weight_hh"], None, None, out.y, None,
            h0=None, c0=None, lengths=None, weight_hr=None, activation="tanh",
            recurrent_activation="sigmoid", step_mask=None, zero_output_for_mask=False,
            recurrent_mask=None, input_mask=None,
        )  # fmt: skip
    with pytest.raises(ValueError, match="workspace: expected shape"):
        F.lstm_backward(
            p.x, w["weight_ih"], w["weight_hh"], None, None, out.y, out.workspace[:, :, :4],
            h0=None, c0=None, lengths=None, weight_hr=None, activation="tanh",
            recurrent_activation="sigmoid", step_mask=None, zero_output_for_mask=False,
            recurrent_mask=None, input_mask=None,
        )  # fmt: skip
    with pytest.raises(ValueError, match="step_mask"):
        F.lstm_forward(p.x, **w, step_mask=np.ones((3, 3), bool))
    with pytest.raises(ValueError, match=r"recurrent_mask: expected shape \(G, B, R\)"):
        F.lstm_forward(p.x, **w, recurrent_mask=np.ones((3, 2, 4), np.float32))
    with pytest.raises(TypeError):  # every forward option must be told to the backward
        F.lstm_backward(p.x, w["weight_ih"], w["weight_hh"], None, None, out.y, out.workspace)


@pytest.mark.parametrize("cell", list(CELLS))
def test_token_input_is_the_gathered_table(cell, rng):
    # ids select rows of a table: the same as x = table[ids], the table projected once, its
    # gradient the rows' gradients summed per id
    p = Gated(rng, cell, 6, 4, 3, 5, np.float64, True, masked=False)
    table = rng.standard_normal((7, 3))
    ids = rng.integers(0, 7, (6, 4))
    p.x = table[ids]
    gathered = p.run(F)
    p.x = table
    fused = p.run(type("WithIds", (), _with_ids(F, ids)))
    for name, value in gathered.items():
        if name == "dx":
            value = np.zeros_like(table)
            np.add.at(value, ids, gathered["dx"])
        assert_close(fused[name], value, np.float64, name)


def _with_ids(module, ids):
    """The module's gated functions with ``ids`` bound: token input through the Gated calls."""

    def bound(function):
        return staticmethod(lambda *args, **kwargs: function(*args, ids=ids, **kwargs))

    names = ("gru_forward", "gru_backward", "lstm_forward", "lstm_backward")
    return {name: bound(getattr(module, name)) for name in names}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("recurrent_activation", ["sigmoid", "hard_sigmoid"])
def test_gate_functions_over_the_whole_range(dtype, isa, recurrent_activation):
    # A GRU step with zero weights, h = 0 and n saturated at 1 outputs 1 - z: the gate
    # function of -b_z, so its values over the float range (and inf, NaN) are read directly.
    b_z = np.concatenate([np.linspace(-60, 60, 241), [np.inf, -np.inf, np.nan]]).astype(dtype)
    H = b_z.size
    bias = np.zeros(3 * H, dtype)
    bias[H : 2 * H] = b_z
    bias[2 * H :] = 30.0  # tanh(30) is 1 in both dtypes
    weights = np.zeros((3 * H, 1), dtype), np.zeros((3 * H, H), dtype)
    previous = _core.active_isa()
    _core.set_active_isa(isa)
    try:
        h = F.gru_step(
            np.zeros((1, 1), dtype), np.zeros((1, H), dtype), *weights, bias,
            recurrent_activation=recurrent_activation,
        )[0]  # fmt: skip
    finally:
        _core.set_active_isa(previous)
    v = -b_z.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        if recurrent_activation == "sigmoid":
            expected = 1.0 / (1.0 + np.exp(-v))
        else:
            expected = np.clip(v / 6.0 + 0.5, 0.0, 1.0)
    np.testing.assert_array_equal(np.isnan(h), np.isnan(expected))
    eps = np.finfo(dtype).eps
    ok = ~np.isnan(expected)
    # 1 - z cancels: absolute error of a few eps; relative accuracy of z itself is the kernels'
    np.testing.assert_allclose(h[ok], expected[ok], rtol=0, atol=4 * eps)


@pytest.mark.parametrize("cell", list(CELLS))
@pytest.mark.parametrize("return_sequences", [True, False])
def test_a_projection_in_several_chunks(cell, return_sequences, rng, restore_threads):
    """The forward projects as many steps at once as half of L2 holds: a step of B x G*H this
    wide takes a chunk of its own or a few, and every chunk's padded steps output zeros."""
    l2 = _core.cache_sizes()["l2"]
    G = 4 if CELLS[cell][0] == "lstm" else 3
    B, H = 8, 64
    steps_per_chunk = max(1, l2 // 2 // (B * G * H * 8))  # float64
    T = 2 * steps_per_chunk + 1  # three chunks, the last one short
    if T > 200:
        pytest.skip(f"an L2 of {l2} bytes holds {steps_per_chunk} steps of this shape")
    p = Gated(rng, cell, T, B, 5, H, np.float64, True)
    got = p.forward(F, return_sequences=return_sequences)
    expected = p.forward(R, return_sequences=return_sequences)
    for name in ("y", "h_n", "c_n"):
        mine, theirs = getattr(got, name), getattr(expected, name)
        if theirs is None:
            assert mine is None, name
            continue
        np.testing.assert_allclose(mine, theirs, rtol=1e-10, atol=1e-12, err_msg=name)
