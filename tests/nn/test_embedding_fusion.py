"""Embedding -> RNN fusion ("token input"): the kernels take token ids (T, B) and an embedding
table (V, D) in place of x (T, B, D); the first layer projects the table once and gathers its
rows, and its backward sums the deltas per id and returns the table's gradient (V, D).

Checked here at every level against the same computation unfused (``x = table[ids]``, then the
Embedding's scatter of dx): the kernels (every ISA), the functional API, RNN(ids, embedding=)
over its options, Sequential's automatic fusion, finite differences in float64, torch.nn as a
second oracle, thread-count invariance, bad input and empty batches.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ACTIVATIONS, DTYPES, PLAIN, assert_close, numerical_gradient

import rnnfast
from rnnfast import RNN, Dropout, Embedding, Linear, Sequential, _core
from rnnfast import functional as F

F64 = np.float64
FD_RTOL = 1e-6
FD_ATOL = 1e-7


def _draw(rng, T, B, V, D, H, dtype, *, h0=True, scale=0.5):
    """Table (V, D), ids (T, B) int64, weights and biases (PyTorch's init), h0 (B, H) or None."""
    bound = 1.0 / np.sqrt(H)

    def u(*shape):
        return rng.uniform(-bound, bound, size=shape).astype(dtype)

    return {
        "table": (scale * rng.standard_normal((V, D))).astype(dtype),
        "ids": rng.integers(0, V, size=(T, B)).astype(np.int64),
        "w_ih": u(H, D),
        "w_hh": u(H, H),
        "b_ih": u(H),
        "b_hh": u(H),
        "h0": rng.uniform(-1.0, 1.0, size=(B, H)).astype(dtype) if h0 else None,
    }


def _sorted_lengths(rng, T, B):
    """Non-increasing lengths (the kernels' order) with one full sequence and one of length 0."""
    lengths = rng.integers(0, T + 1, size=B)
    lengths[0] = T
    lengths[-1] = 0
    return np.ascontiguousarray(np.sort(lengths)[::-1], dtype=np.int64)


def _scatter(ids, dx, V):
    """The Embedding's backward in float64: dx (T, B, D) added into the rows of the ids."""
    out = np.zeros((V, dx.shape[-1]))
    np.add.at(out, ids.ravel(), dx.reshape(-1, dx.shape[-1]).astype(F64))
    return out


# ---- 1. kernels (_core), every ISA ------------------------------------------------------------

# (T, B, V, D, H): tiny; odd sizes with several SIMD tiles; T = 300 with B = 4 crosses the
# backward's time chunks (1024 rows) and the forward's 16-step ring (return_sequences=False).
KERNEL_SHAPES = [(7, 5, 4, 3, 6), (17, 6, 9, 17, 33), (300, 4, 9, 5, 20), (1, 1, 1, 1, 1)]


@pytest.mark.parametrize(
    "shape", KERNEL_SHAPES, ids=[f"T{T}-B{B}-V{V}-D{D}-H{H}" for T, B, V, D, H in KERNEL_SHAPES]
)
@pytest.mark.parametrize("with_h0", [True, False], ids=["h0", "noh0"])
@pytest.mark.parametrize("with_lengths", [False, True], ids=["full", "lengths"])
@pytest.mark.parametrize("alpha", [1.0, 0.6])
@pytest.mark.parametrize("nonlinearity", ACTIVATIONS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_core_token_input_equals_gathered_rows(
    dtype, nonlinearity, alpha, with_lengths, with_h0, shape, isa, rng
):
    T, B, V, D, H = shape
    p = _draw(rng, T, B, V, D, H, dtype, h0=with_h0)
    table, ids = p["table"], p["ids"]
    lengths = _sorted_lengths(rng, T, B) if with_lengths and B > 1 else None
    if lengths is not None and V > 1:
        # padded steps read an id used nowhere else: it must get no gradient at all
        ids %= V - 1
        ids[np.arange(T)[:, None] >= lengths[None, :]] = V - 1
    x = np.ascontiguousarray(table[ids])
    ids_before, table_before = ids.copy(), table.copy()
    common = (p["w_ih"], p["w_hh"], p["b_ih"], p["b_hh"], lengths, nonlinearity, alpha)

    y_tok, h_tok = _core.rnn_forward(table, p["h0"], *common, True, ids)
    y, h_n = _core.rnn_forward(x, p["h0"], *common, True)
    # Not bitwise: the projection of a row is the same dot product, but the GEMM gives rows in a
    # short leftover tile (1-3 rows) several interleaved accumulators over k (summed at the end)
    # and the V table rows and the T*B rows of x fall into tiles of different heights. Measured
    # on baseline and avx2, both dtypes: equal to rounding (a few ulp), not bit for bit.
    assert_close(y_tok, y.astype(F64), dtype, "y")
    assert_close(h_tok, h_n.astype(F64), dtype, "h_n")
    none, h_last = _core.rnn_forward(table, p["h0"], *common, False, ids)
    assert none is None
    np.testing.assert_array_equal(h_last, h_tok)  # the ring of steps gathers the same rows

    dy = rng.standard_normal((T, B, H)).astype(dtype)
    dh_n = rng.standard_normal((B, H)).astype(dtype)
    # Both from the same y: the deltas then are the same numbers, computed the same way.
    bw = (p["w_ih"], p["w_hh"], y, dy, dh_n, lengths, nonlinearity, alpha)
    dtable, dh0, dw_ih, dw_hh, db = _core.rnn_backward(table, p["h0"], *bw, ids)
    dx, dh0_u, dw_ih_u, dw_hh_u, db_u = _core.rnn_backward(x, p["h0"], *bw)

    assert dtable.shape == (V, D) and dtable.dtype == dtype
    assert_close(dtable, _scatter(ids, dx, V), dtype, "dtable vs scatter of dx")
    assert_close(dw_ih, dw_ih_u.astype(F64), dtype, "dweight_ih")
    # the delta recursion does not read x: these are bitwise the unfused ones
    np.testing.assert_array_equal(dh0, dh0_u, err_msg="dh0")
    np.testing.assert_array_equal(dw_hh, dw_hh_u, err_msg="dweight_hh")
    np.testing.assert_array_equal(db, db_u, err_msg="dbias")
    if lengths is not None and V > 1:
        assert np.all(dtable[V - 1] == 0), "an id read only at padded steps got a gradient"
    used = np.zeros(V, dtype=bool)
    used[ids.ravel()] = True
    assert np.all(dtable[~used] == 0), "an id absent from the batch got a gradient"
    np.testing.assert_array_equal(ids, ids_before)
    np.testing.assert_array_equal(table, table_before)


@pytest.mark.parametrize("ids_dtype", [np.int8, np.uint8, np.int32, np.uint64])
def test_functional_accepts_any_integer_dtype_and_unsorted_lengths(ids_dtype, rng):
    T, B, V, D, H = 6, 5, 7, 3, 4
    p = _draw(rng, T, B, V, D, H, F64)
    lengths = np.array([2, 6, 0, 5, 3])  # unsorted, with a 0
    ids = p["ids"].astype(ids_dtype)
    args = (p["w_ih"], p["w_hh"], p["b_ih"], p["b_hh"], p["h0"], "tanh")
    y, h_n = F.rnn_forward(p["table"], *args, lengths=lengths, ids=ids)
    x = p["table"][p["ids"]]
    y_u, h_u = F.rnn_forward(x, *args, lengths=lengths)
    assert_close(y, y_u, F64, "y")
    assert_close(h_n, h_u, F64, "h_n")
    assert np.all(y[:, 2] == 0)
    np.testing.assert_array_equal(h_n[2], p["h0"][2])  # length 0: h_n is h0

    dy = rng.standard_normal(y.shape)
    dh_n = rng.standard_normal(h_n.shape)
    g = _fused_bwd(p, y_u, dy, dh_n, lengths, ids)
    gu = F.rnn_backward(
        x, p["w_ih"], p["w_hh"], y_u, dy, dh_n, h0=p["h0"], **dict(PLAIN, lengths=lengths)
    )
    assert g.dx.shape == (V, D)
    assert_close(g.dx, _scatter(p["ids"], gu.dx, V), F64, "dtable")
    for name in ("dh0", "dweight_ih", "dweight_hh", "dbias"):
        assert_close(getattr(g, name), getattr(gu, name), F64, name)
    np.testing.assert_array_equal(g.dh0[2], dh_n[2])  # length 0: dh0 is dh_n
    np.testing.assert_array_equal(ids, p["ids"].astype(ids_dtype))  # not modified


# ---- 2. finite differences in float64 through RNN(ids, embedding=) ---------------------------

FD_CASES = [
    {"num_layers": 1},
    {"num_layers": 1, "batch_first": True, "alpha": 0.6},
    {"num_layers": 2, "bidirectional": True, "lengths": True},
    {
        "num_layers": 2,
        "bidirectional": True,
        "lengths": True,
        "batch_first": True,
        "go_backwards": True,
    },
]


@pytest.mark.parametrize(
    "case", FD_CASES, ids=["uni", "bf-leaky", "bi2-lengths", "bi2-lengths-bf-gobackwards"]
)
def test_gradients_by_finite_differences(case, rng):
    case = dict(case)
    use_lengths = case.pop("lengths", False)
    T, B, V, D, H = 5, 3, 4, 3, 4
    rnn = RNN(D, H, dtype=F64, seed=int(rng.integers(1 << 30)), **case)
    emb = Embedding(V, D, dtype=F64, seed=int(rng.integers(1 << 30)))
    dirs = rnn.num_directions
    shape = (B, T) if rnn.batch_first else (T, B)
    ids = rng.integers(0, V, size=shape)
    lengths = np.array([3, 5, 0]) if use_lengths else None
    h0 = rng.uniform(-1, 1, (rnn.num_layers * dirs, B, H))
    w = rng.standard_normal(shape + (rnn.output_size,))
    v = rng.standard_normal((rnn.num_layers * dirs, B, H))

    def loss():
        y, h_n = rnn(ids, h0, lengths, embedding=emb)
        return float(np.sum(y * w) + np.sum(h_n * v))

    y, h_n = rnn(ids, h0, lengths, embedding=emb)
    value = float(np.sum(y * w) + np.sum(h_n * v))
    dx, _ = rnn.backward(w, v)
    assert dx is None
    analytic = {"table": emb.grads["weight"].copy()}
    analytic.update({k: g.copy() for k, g in rnn.grads.items() if k.startswith("weight_ih_l0")})
    rnn.eval()  # the same function (no dropout); the fused eval path reads the live table
    assert loss() == pytest.approx(value, rel=1e-14)
    np.testing.assert_allclose(
        analytic.pop("table"),
        numerical_gradient(loss, emb.weight),
        rtol=FD_RTOL,
        atol=FD_ATOL,
        err_msg="table",
    )
    params = dict(rnn.named_parameters())
    for name, want in analytic.items():
        np.testing.assert_allclose(
            want, numerical_gradient(loss, params[name]), rtol=FD_RTOL, atol=FD_ATOL, err_msg=name
        )


# ---- 3. layer level: fused vs unfused over the layer's options ---------------------------------


def _pair(rng, V, D, H, dtype, **config):
    """Two identical (RNN, Embedding) pairs: one for the fused path, one for the unfused."""
    seeds = int(rng.integers(1 << 30)), int(rng.integers(1 << 30))
    return [
        (
            RNN(D, H, dtype=dtype, seed=seeds[0], **config),
            Embedding(V, D, dtype=dtype, seed=seeds[1]),
        )
        for _ in range(2)
    ]


def _split(result):
    """(output, h_n) of a call in any mode (PyTorch's, or Keras's with or without return_state)."""
    return result if isinstance(result, tuple) else (result, None)


def _compare_fused_and_unfused(
    rng, dtype, config, *, T=6, B=4, V=5, D=3, H=4, lengths=None, mask=False
):
    (rnn_f, emb_f), (rnn_u, emb_u) = _pair(rng, V, D, H, dtype, **config)
    shape = (B, T) if rnn_f.batch_first else (T, B)
    ids = rng.integers(0, V, size=shape)
    dirs = rnn_f.num_directions
    h0 = rng.uniform(-1, 1, (rnn_f.num_layers * dirs, B, H)).astype(dtype)
    kw = {}
    if lengths is not None:
        kw = {"mask": rnnfast.lengths_to_mask(lengths, T)} if mask else {"lengths": lengths}

    out_f, hn_f = _split(rnn_f(ids, h0, embedding=emb_f, **kw))
    out_u, hn_u = _split(rnn_u(emb_u(ids), h0, **kw))
    assert_close(out_f, out_u.astype(F64), dtype, "output")
    if hn_u is not None:
        assert_close(hn_f, hn_u.astype(F64), dtype, "h_n")

    d_out = rng.standard_normal(out_u.shape).astype(dtype)
    dh_n = rng.standard_normal((rnn_f.num_layers * dirs, B, H)).astype(dtype)
    dx_f, dh0_f = rnn_f.backward(d_out, dh_n)
    dx_u, dh0_u = rnn_u.backward(d_out, dh_n)
    assert dx_f is None
    assert emb_u.backward(dx_u) is None
    assert_close(dh0_f, dh0_u.astype(F64), dtype, "dh0")
    assert list(rnn_f.grads) == list(rnn_u.grads)
    for k in rnn_u.grads:
        assert_close(rnn_f.grads[k], rnn_u.grads[k].astype(F64), dtype, k)
    assert_close(emb_f.grads["weight"], emb_u.grads["weight"].astype(F64), dtype, "dtable")
    assert np.any(emb_f.grads["weight"] != 0)


@pytest.mark.parametrize("go_backwards", [False, True], ids=["fwd", "gobackwards"])
@pytest.mark.parametrize("use_lengths", [False, True], ids=["full", "lengths"])
@pytest.mark.parametrize("num_layers", [1, 2])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
@pytest.mark.parametrize("batch_first", [False, True], ids=["TB", "BT"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_fused_equals_unfused(
    dtype, batch_first, bidirectional, num_layers, use_lengths, go_backwards, rng
):
    config = {
        "batch_first": batch_first,
        "bidirectional": bidirectional,
        "num_layers": num_layers,
        "go_backwards": go_backwards,
    }
    lengths = np.array([6, 2, 0, 5]) if use_lengths else None  # unsorted, with a 0
    _compare_fused_and_unfused(rng, dtype, config, lengths=lengths)


EXTRA_CONFIGS = {
    "residual": {"num_layers": 2, "residual": True},
    "keras-last": {"return_sequences": False, "return_state": True},
    "keras-last-bi2-residual": {
        "num_layers": 2,
        "bidirectional": True,
        "residual": True,
        "return_sequences": False,
        "return_state": True,
    },
    "merge-sum": {"bidirectional": True, "merge_mode": "sum"},
    "merge-mul-keras-seq": {
        "bidirectional": True,
        "merge_mode": "mul",
        "return_sequences": True,
        "return_state": True,
    },
    "dropout": {"num_layers": 2, "dropout": 0.3},
    "leaky-per-layer": {"num_layers": 2, "alpha": [0.6, 1.0], "batch_first": True},
}


@pytest.mark.parametrize("use_lengths", [False, True, "mask"], ids=["full", "lengths", "mask"])
@pytest.mark.parametrize("name", list(EXTRA_CONFIGS))
@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_fused_equals_unfused_keras_options(dtype, name, use_lengths, rng):
    lengths = np.array([6, 2, 0, 5]) if use_lengths is not False else None
    _compare_fused_and_unfused(
        rng, dtype, EXTRA_CONFIGS[name], lengths=lengths, mask=use_lengths == "mask"
    )


@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_eval_mode_fused_equals_unfused(dtype, rng):
    (rnn_f, emb_f), (rnn_u, emb_u) = _pair(rng, 5, 3, 4, dtype, num_layers=2, bidirectional=True)
    for layer in (rnn_f, rnn_u, emb_u):
        layer.eval()
    ids = rng.integers(0, 5, size=(6, 4))
    y_f, h_f = rnn_f(ids, lengths=[6, 1, 0, 3], embedding=emb_f)
    y_u, h_u = rnn_u(emb_u(ids), lengths=[6, 1, 0, 3])
    assert_close(y_f, y_u.astype(F64), dtype, "y")
    assert_close(h_f, h_u.astype(F64), dtype, "h_n")
    with pytest.raises(RuntimeError, match="backward"):
        rnn_f.backward(np.zeros_like(y_f))


def test_backward_reads_the_table_and_ids_the_forward_saw(rng):
    """Training mode keeps copies: an optimizer step (or the caller reusing its ids array)
    between forward and backward does not change the gradients."""
    (rnn_a, emb_a), (rnn_b, emb_b) = _pair(rng, 5, 3, 4, F64, bidirectional=True)
    ids = rng.integers(0, 5, size=(6, 4))
    dy = rng.standard_normal((6, 4, 8))
    rnn_a(ids, embedding=emb_a)
    rnn_a.backward(dy)
    ids_b = ids.copy()
    rnn_b(ids_b, embedding=emb_b)
    emb_b.weight[...] += 1.0  # in place, as an optimizer does
    ids_b[...] = 0
    rnn_b.backward(dy)
    for k in rnn_a.grads:
        np.testing.assert_array_equal(rnn_b.grads[k], rnn_a.grads[k], err_msg=k)
    np.testing.assert_array_equal(emb_b.grads["weight"], emb_a.grads["weight"])


# ---- 4. torch.nn.Embedding + torch.nn.RNN as a second oracle ----------------------------------

TORCH_CASES = {
    "uni": {"num_layers": 1},
    "relu-bf": {"num_layers": 1, "nonlinearity": "relu", "batch_first": True},
    "bi2-lengths": {"num_layers": 2, "bidirectional": True, "lengths": True},
    "bi2-bf-lengths": {
        "num_layers": 2,
        "bidirectional": True,
        "batch_first": True,
        "lengths": True,
    },
}


@pytest.mark.parametrize("name", list(TORCH_CASES))
def test_matches_torch_embedding_and_rnn(torch, name, rng):
    config = dict(TORCH_CASES[name])
    use_lengths = config.pop("lengths", False)
    T, B, V, D, H = 7, 4, 6, 5, 8
    rnn = RNN(D, H, dtype=F64, seed=int(rng.integers(1 << 30)), **config)
    emb = Embedding(V, D, dtype=F64, seed=int(rng.integers(1 << 30)))
    module = rnn.to_torch()
    temb = torch.nn.Embedding(V, D, dtype=torch.float64)
    temb.load_state_dict({k: torch.from_numpy(v) for k, v in emb.state_dict().items()})
    dirs = rnn.num_directions
    shape = (B, T) if rnn.batch_first else (T, B)
    ids = rng.integers(0, V, size=shape)
    h0 = rng.uniform(-1, 1, (rnn.num_layers * dirs, B, H))
    lengths = np.array([4, T, 1, 6]) if use_lengths else None  # torch packs no empty sequence
    dy = rng.standard_normal(shape + (dirs * H,))
    dh_n = rng.standard_normal((rnn.num_layers * dirs, B, H))

    h0_t = torch.tensor(h0, requires_grad=True)
    e = temb(torch.from_numpy(ids))
    if lengths is None:
        out_t, hn_t = module(e, h0_t)
    else:
        packed = torch.nn.utils.rnn.pack_padded_sequence(
            e, torch.tensor(lengths), batch_first=rnn.batch_first, enforce_sorted=False
        )
        out_t, hn_t = module(packed, h0_t)
        out_t, _ = torch.nn.utils.rnn.pad_packed_sequence(
            out_t, batch_first=rnn.batch_first, total_length=T
        )
    ((out_t * torch.from_numpy(dy)).sum() + (hn_t * torch.from_numpy(dh_n)).sum()).backward()

    y, h_n = rnn(ids, h0, lengths, embedding=emb)
    assert_close(y, out_t.detach().numpy(), F64, "y")
    assert_close(h_n, hn_t.detach().numpy(), F64, "h_n")
    dx, dh0 = rnn.backward(dy, dh_n)
    assert dx is None
    assert_close(dh0, h0_t.grad.numpy(), F64, "dh0")
    assert_close(emb.grads["weight"], temb.weight.grad.numpy(), F64, "embedding weight grad")
    for k, p in module.named_parameters():
        assert_close(rnn.grads[k], p.grad.numpy(), F64, k)


# ---- 5. Sequential's automatic fusion -------------------------------------------------------

B_, T_, D_, H_, C_ = 3, 5, 4, 6, 3  # 15 tokens


def _model(V, dtype, *, between=None, seed=0):
    layers = [
        Embedding(V, D_, dtype=dtype, seed=seed),
        RNN(D_, H_, return_sequences=True, batch_first=True, dtype=dtype, seed=seed + 1),
        Linear(H_, C_, dtype=dtype, seed=seed + 2),
    ]
    if between is not None:
        layers.insert(1, between)
    return Sequential(layers)


def _unfused_round(model, ids, d_out):
    """The model's layers one by one, unfused, forward and backward: the output."""
    x = ids
    for layer in model.layers:
        x = layer(x)
    if d_out is not None:
        d = d_out
        for layer in reversed(model.layers):
            d = layer.backward(d)
            d = d[0] if isinstance(d, tuple) else d
    return x


def _assert_same_grads(model, reference, dtype):
    got, want = model.grads, reference.grads
    assert list(got) == list(want)
    for k in want:
        assert_close(got[k], want[k].astype(F64), dtype, k)


@pytest.mark.parametrize("dtype", DTYPES)
def test_sequential_fuses_and_equals_unfused(dtype, rng):
    V = 7  # < B * T = 15
    model, reference = _model(V, dtype), _model(V, dtype)
    for round_ in range(2):  # a second round accumulates into the grads the same way
        ids = rng.integers(0, V, size=(B_, T_))
        d_out = rng.standard_normal((B_, T_, C_)).astype(dtype)
        out = model(ids)
        assert 0 in model._fused, f"round {round_}"
        assert model[0]._cache is None  # the Embedding itself did not run
        want = _unfused_round(reference, ids, d_out)
        assert_close(out, want.astype(F64), dtype, f"output, round {round_}")
        assert model.backward(d_out) is None
        _assert_same_grads(model, reference, dtype)
    assert np.any(model.grads["0.weight"] != 0)

    model.eval()
    reference.eval()
    ids = rng.integers(0, V, size=(B_, T_))
    out = model(ids)
    assert 0 in model._fused  # both in eval mode: fused too
    assert_close(out, _unfused_round(reference, ids, None).astype(F64), dtype, "eval output")


@pytest.mark.parametrize(
    "case", ["vocab-too-large", "dropout-between", "embedding-eval", "rnn-eval", "1d-ids"]
)
def test_sequential_does_not_fuse(case, rng):
    V = 15 if case == "vocab-too-large" else 7  # V >= B * T = 15: unfused

    def make():
        between = Dropout(0.4, seed=3, dtype=F64) if case == "dropout-between" else None
        model = _model(V, F64, between=between)
        if case in ("embedding-eval", "rnn-eval"):  # the two layers in different modes
            model[0 if case == "embedding-eval" else 1].eval()
        return model

    model, reference = make(), make()
    if case == "1d-ids":  # unfused: the Embedding's (N, D) output is one unbatched sequence
        ids = rng.integers(0, V, size=B_ * T_)
        out = model(ids)
        assert model._fused == frozenset()
        assert out.shape == (B_ * T_, C_)
        np.testing.assert_array_equal(out, _unfused_round(reference, ids, None))
        return
    ids = rng.integers(0, V, size=(B_, T_))
    trains = case in ("vocab-too-large", "dropout-between")
    d_out = rng.standard_normal((B_, T_, C_)) if trains else None
    out = model(ids)
    assert model._fused == frozenset()
    np.testing.assert_array_equal(out, _unfused_round(reference, ids, d_out))
    if trains:
        assert model.backward(d_out) is None
        for k, g in reference.grads.items():
            np.testing.assert_array_equal(model.grads[k], g, err_msg=k)


def test_sequential_fusion_state_follows_each_forward(rng):
    model = _model(7, F64)
    model(rng.integers(0, 7, size=(B_, T_)))
    assert model._fused == frozenset({0})
    model(rng.integers(0, 7, size=(1, 3)))  # 3 tokens < 7 entries: unfused now
    assert model._fused == frozenset()
    d_out = rng.standard_normal((1, 3, C_))
    model.backward(d_out)  # the Embedding's own backward runs: its grads change
    assert np.any(model.grads["0.weight"] != 0)


def test_sequential_says_which_layers_ran_inside_another(rng):
    """What rnnfast.distributed's hooks ask a container: whether its backward only runs its
    children's (a subclass with a backward of its own: no), and which child ran inside which
    in the last forward (the fused Embedding inside the RNN after it)."""
    model = _model(7, F64)
    embedding, rnn = model[0], model[1]
    assert model.backward_runs_children()
    model(rng.integers(0, 7, size=(B_, T_)))
    assert model.children_run_by(rnn) == (embedding,)
    assert model.children_run_by(embedding) == ()
    model(rng.integers(0, 7, size=(1, 3)))  # unfused
    assert model.children_run_by(rnn) == ()

    class Own(Sequential):
        def backward(self, d_out):
            return super().backward(d_out)

    assert not Own(list(model.layers)).backward_runs_children()


@pytest.mark.parametrize("context", ["init", "input", "both"])
def test_seq2seq_encoder_fuses_and_matches_the_unfused_encoder(context, rng, monkeypatch):
    """Seq2Seq's encoder (Embedding -> RNN) fuses when the source has more tokens than its
    vocabulary; loss and every gradient equal the unfused encoder's to rounding."""
    import rnnfast.nn.seq2seq as seq2seq

    src = rng.integers(0, 5, size=(4, 6))  # 24 tokens, vocabulary 5
    src_lengths = np.array([6, 2, 0, 5])
    tgt_in = rng.integers(0, 6, size=(4, 3))
    tgt_out = rng.integers(0, 6, size=(4, 3))

    def run():
        m = rnnfast.Seq2Seq(5, 6, 3, 4, context=context, dtype=F64, seed=3)
        loss = m.train_batch(src, src_lengths, tgt_in, tgt_out, None)
        return m, loss

    fused, loss = run()
    assert fused._encoder_fused
    monkeypatch.setattr(seq2seq, "embedding_feeds_rnn", lambda *args: False)
    unfused, loss_ref = run()
    assert not unfused._encoder_fused
    assert loss == pytest.approx(loss_ref, rel=1e-12)
    for k, g in unfused.grads.items():
        assert_close(fused.grads[k], g, F64, k)


# ---- 6. thread-count invariance -----------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_fused_backward_is_bitwise_the_same_at_1_2_3_threads(dtype, restore_threads, rng):
    # Large enough that the vocabulary GEMMs (2*V*D*H ~ 3 MFLOP) and the recurrence split.
    T, B, V, D, H = 24, 16, 96, 128, 128
    p = _draw(rng, T, B, V, D, H, dtype)
    lengths = rng.integers(0, T + 1, size=B)
    lengths[0], lengths[1] = T, 0
    dy = rng.standard_normal((T, B, H)).astype(dtype)
    dh_n = rng.standard_normal((B, H)).astype(dtype)
    x = p["table"][p["ids"]]
    results = {}
    for n in (1, 2, 3):
        with rnnfast.threads(n):
            # the contention back-off would fall back to one thread on a busy machine
            _core.clear_contention_backoff()
            y, h_n = F.rnn_forward(
                p["table"],
                p["w_ih"],
                p["w_hh"],
                p["b_ih"],
                p["b_hh"],
                p["h0"],
                lengths=lengths,
                ids=p["ids"],
            )
            _core.clear_contention_backoff()
            g = _fused_bwd(p, y, dy, dh_n, lengths, p["ids"])
            _core.clear_contention_backoff()
            g_u = F.rnn_backward(
                x, p["w_ih"], p["w_hh"], y, dy, dh_n, h0=p["h0"], **dict(PLAIN, lengths=lengths)
            )
        results[n] = {
            "y": y,
            "h_n": h_n,
            "dtable": g.dx,
            "dweight_ih": g.dweight_ih,
            "dh0": g.dh0,
            "dweight_hh": g.dweight_hh,
            "dbias": g.dbias,
            "unfused dweight_ih": g_u.dweight_ih,
        }
    # Every output element is summed in the same order whatever the thread count (the scatter
    # splits the columns; the GEMMs split rows or panels, never k): bit for bit, dweight_ih
    # included (it is also thread-invariant unfused on this build).
    for n in (2, 3):
        for k, want in results[1].items():
            np.testing.assert_array_equal(results[n][k], want, err_msg=f"{k}: {n} vs 1 threads")
    assert_close(
        results[1]["dweight_ih"],
        results[1]["unfused dweight_ih"].astype(F64),
        dtype,
        "dweight_ih fused vs unfused",
    )


def test_token_scatter_is_bitwise_the_same_at_1_2_3_threads(restore_threads, rng):
    """The per-id scatter itself at a size where it splits its columns (n*dim >= 3 Mi): the
    fused backward's scatter runs per chunk of at most 1024 rows, too few to split at test sizes."""
    n, dim, V = 70_000, 48, 50
    ids = rng.integers(0, V, size=n).astype(np.int64)
    rows = rng.standard_normal((n, dim)).astype(np.float32)
    results = []
    for threads in (1, 2, 3):
        grad = np.zeros((V, dim), dtype=np.float32)
        with rnnfast.threads(threads):
            _core.clear_contention_backoff()
            _core.embedding_backward(ids, rows, grad)
        results.append(grad)
    np.testing.assert_array_equal(results[1], results[0])
    np.testing.assert_array_equal(results[2], results[0])
    assert_close(results[0], _scatter(ids, rows, V), np.float32, "scatter")


# ---- 7. bad input -------------------------------------------------------------------------------


def _core_args(rng, T=4, B=3, V=5, D=3, H=4, dtype=F64):
    p = _draw(rng, T, B, V, D, H, dtype)
    y, _ = _core.rnn_forward(
        p["table"][p["ids"]], p["h0"], p["w_ih"], p["w_hh"], None, None, None, "tanh", 1.0, True
    )
    return p, y


def _fused_bwd(p, y, dy, dh_n, lengths, ids):
    """``functional.rnn_backward`` of the fused path: the table and the ids of problem ``p``."""
    return F.rnn_backward(
        p["table"],
        p["w_ih"],
        p["w_hh"],
        y,
        dy,
        dh_n,
        h0=p["h0"],
        **dict(PLAIN, lengths=lengths),
        ids=ids,
    )


def _core_fwd(p, ids, table=None):
    return _core.rnn_forward(
        p["table"] if table is None else table,
        p["h0"],
        p["w_ih"],
        p["w_hh"],
        p["b_ih"],
        p["b_hh"],
        None,
        "tanh",
        1.0,
        True,
        ids,
    )


def _core_bwd(p, y, ids, table=None):
    return _core.rnn_backward(
        p["table"] if table is None else table,
        p["h0"],
        p["w_ih"],
        p["w_hh"],
        y,
        y,
        None,
        None,
        "tanh",
        1.0,
        ids,
    )


@pytest.mark.parametrize("call", ["forward", "backward"])
def test_core_rejects_bad_ids_and_tables(call, rng):
    p, y = _core_args(rng)
    ids = p["ids"]

    def run(ids, table=None):
        return _core_fwd(p, ids, table) if call == "forward" else _core_bwd(p, y, ids, table)

    run(ids)  # the good call works
    with pytest.raises(TypeError, match="ids"):
        run(ids.astype(np.int32))
    with pytest.raises(TypeError, match="ids"):
        run(ids.astype(np.float64))
    with pytest.raises(TypeError, match="ids"):
        run(ids.tolist())
    for bad in (-1, 5):
        wrong = ids.copy()
        wrong[2, 1] = bad
        with pytest.raises(ValueError, match="ids") as info:
            run(wrong)
        assert str(bad) in str(info.value)
    with pytest.raises(ValueError, match="ids"):
        run(ids[None])
    with pytest.raises(ValueError, match="ids"):
        run(ids[0])
    with pytest.raises(ValueError, match="ids"):
        run(np.asfortranarray(ids))  # (T, B) but not C-contiguous
    with pytest.raises(ValueError, match="x"):
        run(ids, p["table"][:, :2].copy())  # table width != D
    with pytest.raises(ValueError, match="x"):
        run(ids, p["table"][None].copy())  # a 3-D table
    with pytest.raises(ValueError, match="ids"):
        run(ids, np.zeros((0, 3)))  # an empty table: every id is out of range
    with pytest.raises(TypeError, match="x"):
        run(ids, p["table"].astype(np.float32))
    with pytest.raises(ValueError, match="lengths"):
        run_lengths = np.array([1, 3, 2], dtype=np.int64)  # unsorted at the kernel level
        if call == "forward":
            _core.rnn_forward(
                p["table"],
                p["h0"],
                p["w_ih"],
                p["w_hh"],
                None,
                None,
                run_lengths,
                "tanh",
                1.0,
                True,
                ids,
            )
        else:
            _core.rnn_backward(
                p["table"], p["h0"], p["w_ih"], p["w_hh"], y, y, None, run_lengths, "tanh", 1.0, ids
            )
    if call == "backward":
        with pytest.raises(ValueError, match="y"):  # y's (T, B) must be the ids'
            _core_bwd(p, y, ids[:, :2].copy())


def test_functional_rejects_bad_ids(rng):
    p, _ = _core_args(rng)
    args = (p["w_ih"], p["w_hh"], p["b_ih"], p["b_hh"], p["h0"])
    table, ids = p["table"], p["ids"]
    with pytest.raises(TypeError, match="ids"):
        F.rnn_forward(table, *args, ids=ids.astype(np.float32))
    with pytest.raises(TypeError, match="ids"):
        F.rnn_forward(table, *args, ids=ids.astype(bool))
    with pytest.raises(ValueError, match="ids"):
        F.rnn_forward(table, *args, ids=ids[None])
    with pytest.raises(ValueError, match="ids"):
        F.rnn_forward(table, *args, ids=np.where(ids == ids[0, 0], 5, ids))
    with pytest.raises(ValueError, match="ids"):
        F.rnn_forward(table, *args, ids=np.full(ids.shape, -1, dtype=np.int32))
    with pytest.raises(ValueError, match="ids"):  # unsorted lengths: the ids reordered first
        F.rnn_forward(table, *args, lengths=[1, 4, 2], ids=np.full(ids.shape, 99))
    with pytest.raises(ValueError, match="x"):
        F.rnn_forward(table[ids], *args, ids=ids)  # x (T, B, D) with ids
    with pytest.raises(ValueError, match="x"):
        F.rnn_forward(table[:, :2], *args, ids=ids)
    with pytest.raises(ValueError, match="lengths"):
        F.rnn_forward(table, *args, lengths=[1, 2], ids=ids)  # B is the ids' 3
    with pytest.raises(ValueError, match="h0"):
        F.rnn_forward(table, p["w_ih"], p["w_hh"], h0=p["h0"][:2], lengths=[1, 4, 2], ids=ids)
    y, _ = F.rnn_forward(table, *args, ids=ids)
    with pytest.raises(ValueError, match="ids"):
        F.rnn_backward(table, p["w_ih"], p["w_hh"], y, y, h0=p["h0"], **PLAIN, ids=ids + 5)
    with pytest.raises(TypeError, match="ids"):
        F.rnn_backward(table, p["w_ih"], p["w_hh"], y, y, h0=p["h0"], **PLAIN, ids=ids * 1.0)


def test_layer_rejects_bad_embedding_and_ids(rng):
    rnn = RNN(3, 4, dtype=F64, seed=0)
    emb = Embedding(5, 3, dtype=F64, seed=1)
    ids = rng.integers(0, 5, size=(6, 2))
    with pytest.raises(TypeError, match="embedding"):
        rnn(ids, embedding=Linear(3, 3, dtype=F64))
    with pytest.raises(TypeError, match="embedding"):
        rnn(ids, embedding=emb.weight)
    with pytest.raises(ValueError, match="embedding"):
        rnn(ids, embedding=Embedding(5, 4, dtype=F64))
    with pytest.raises(TypeError, match="embedding"):
        rnn(ids, embedding=Embedding(5, 3, dtype=np.float32))
    with pytest.raises(TypeError, match="ids"):
        rnn(ids.astype(np.float64), embedding=emb)
    with pytest.raises(ValueError, match="ids"):
        rnn(np.where(ids == ids[0, 0], 5, ids), embedding=emb)
    with pytest.raises(ValueError, match="ids"):
        rnn(-ids - 1, embedding=emb)
    with pytest.raises(ValueError, match="ids"):
        rnn(ids[..., None], embedding=emb)  # 3-D ids
    with pytest.raises(ValueError, match="ids"):
        rnn(ids[0, :, None, None], embedding=emb)  # 3-D ids, unbatched or not
    with pytest.raises(ValueError, match="lengths"):
        rnn(ids, lengths=[7, 1], embedding=emb)


def test_a_failed_call_changes_nothing(rng):
    rnn = RNN(3, 4, num_layers=2, bidirectional=True, dtype=F64, seed=0)
    emb = Embedding(5, 3, dtype=F64, seed=1)
    ids = rng.integers(0, 5, size=(6, 2))
    dy = rng.standard_normal((6, 2, 8))
    rnn(ids, embedding=emb)
    rnn.backward(dy)
    before = {k: g.copy() for k, g in rnn.grads.items()}
    emb_before = emb.grads["weight"].copy()

    with pytest.raises(ValueError, match="ids"):
        rnn(ids + 5, embedding=emb)
    rnn(ids, lengths=[6, 3], embedding=emb)
    with pytest.raises(ValueError, match="dy"):
        rnn.backward(dy[:, :1])
    with pytest.raises(ValueError, match="dh_n"):
        rnn.backward(dy, np.zeros((4, 3, 4)))
    for k, g in before.items():
        np.testing.assert_array_equal(rnn.grads[k], g, err_msg=k)
    np.testing.assert_array_equal(emb.grads["weight"], emb_before)
    # the forward was kept for a retry, which then adds what a fresh layer computes
    assert rnn.backward(dy)[0] is None
    fresh = RNN(3, 4, num_layers=2, bidirectional=True, dtype=F64, seed=0)
    fresh_emb = Embedding(5, 3, dtype=F64, seed=1)
    fresh(ids, lengths=[6, 3], embedding=fresh_emb)
    fresh.backward(dy)
    for k, g in before.items():
        assert_close(rnn.grads[k], g + fresh.grads[k], F64, k)
    assert_close(emb.grads["weight"], emb_before + fresh_emb.grads["weight"], F64, "dtable")


@pytest.mark.parametrize("ids_dtype", [np.int64, np.int32, np.uint8])
@pytest.mark.parametrize(
    "config",
    [
        {},
        {"batch_first": True, "go_backwards": True},
        {"bidirectional": True, "num_layers": 2, "batch_first": True},
    ],
    ids=["plain", "bf-gobackwards", "bi2-bf"],
)
def test_user_arrays_are_never_modified(config, ids_dtype, rng):
    rnn = RNN(3, 4, dtype=F64, seed=0, **config)
    emb = Embedding(5, 3, dtype=F64, seed=1)
    ids = rng.integers(0, 5, size=(4, 6) if rnn.batch_first else (6, 4)).astype(ids_dtype)
    lengths = np.array([3, 6, 0, 2])
    h0 = rng.standard_normal((rnn.num_layers * rnn.num_directions, 4, 4))
    arrays = {"ids": ids, "lengths": lengths, "h0": h0, "table": emb.weight}
    copies = {k: v.copy() for k, v in arrays.items()}
    y, h_n = rnn(ids, h0, lengths, embedding=emb)
    dy = rng.standard_normal(y.shape)
    dh_n = rng.standard_normal(h_n.shape)
    arrays.update(dy=dy, dh_n=dh_n)
    copies.update(dy=dy.copy(), dh_n=dh_n.copy())
    rnn.backward(dy, dh_n)
    rnn.eval()
    rnn(ids, h0, lengths, embedding=emb)
    for k, v in arrays.items():
        np.testing.assert_array_equal(v, copies[k], err_msg=k)
        assert v.dtype == copies[k].dtype
    assert emb.weight is emb.named_parameters()[0][1]  # still the live table


# ---- 8. empty batches ---------------------------------------------------------------------------


@pytest.mark.parametrize("T,B", [(0, 3), (4, 0), (0, 0)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_empty_core_and_functional(dtype, T, B, rng):
    V, D, H = 5, 3, 4
    p = _draw(rng, T, B, V, D, H, dtype)
    y, h_n = _core_fwd(p, p["ids"])
    assert y.shape == (T, B, H)
    np.testing.assert_array_equal(h_n, p["h0"])
    dy = np.zeros((T, B, H), dtype=dtype)
    dh_n = rng.standard_normal((B, H)).astype(dtype)
    dtable, dh0, dw_ih, dw_hh, db = _core.rnn_backward(
        p["table"], p["h0"], p["w_ih"], p["w_hh"], y, dy, dh_n, None, "tanh", 1.0, p["ids"]
    )
    assert dtable.shape == (V, D)
    for name, g in (("dtable", dtable), ("dw_ih", dw_ih), ("dw_hh", dw_hh), ("db", db)):
        assert np.all(g == 0), name
    np.testing.assert_array_equal(dh0, dh_n)

    lengths = np.zeros(B, dtype=np.int64)
    g = _fused_bwd(p, y, dy, dh_n, lengths, p["ids"].astype(np.int32))
    assert g.dx.shape == (V, D) and np.all(g.dx == 0)
    np.testing.assert_array_equal(g.dh0, dh_n)


@pytest.mark.parametrize("T,B", [(0, 3), (4, 0)])
@pytest.mark.parametrize(
    "config",
    [{}, {"num_layers": 2, "bidirectional": True, "batch_first": True}],
    ids=["uni", "bi2-bf"],
)
def test_empty_layer(config, T, B, rng):
    V, D, H = 5, 3, 4
    rnn = RNN(D, H, dtype=F64, seed=0, **config)
    emb = Embedding(V, D, dtype=F64, seed=1)
    L = rnn.num_layers * rnn.num_directions
    ids = rng.integers(0, V, size=(B, T) if rnn.batch_first else (T, B))
    h0 = rng.standard_normal((L, B, H))
    y, h_n = rnn(ids, h0, embedding=emb)
    assert y.shape == ids.shape + (rnn.output_size,)
    np.testing.assert_array_equal(h_n, h0)
    dh_n = rng.standard_normal((L, B, H))
    dx, dh0 = rnn.backward(np.zeros(y.shape), dh_n)
    assert dx is None
    np.testing.assert_array_equal(dh0, dh_n)
    assert emb.grads["weight"].shape == (V, D) and np.all(emb.grads["weight"] == 0)
    for k, g in rnn.grads.items():
        assert np.all(g == 0), k


@pytest.mark.parametrize("tokens", [False, True], ids=["x", "ids"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_zero_hidden_units(dtype, tokens, rng):
    """H = 0: empty outputs and zero input gradients; no kernel touches a buffer (under UBSan
    an empty vector's null data passed to memcpy was a finding: tools/sanitize.sh runs this)."""
    T, B, V, D = 3, 2, 4, 5
    table = rng.standard_normal((V, D)).astype(dtype)
    ids = rng.integers(0, V, size=(T, B))
    x = table if tokens else table[ids]
    ids = ids if tokens else None
    w_ih, w_hh = np.zeros((0, D), dtype), np.zeros((0, 0), dtype)
    lengths = np.array([3, 1])
    y, h_n = F.rnn_forward(x, w_ih, w_hh, lengths=lengths, ids=ids)
    assert y.shape == (T, B, 0) and h_n.shape == (B, 0)
    g = F.rnn_backward(x, w_ih, w_hh, y, y, h_n, h0=None, **dict(PLAIN, lengths=lengths), ids=ids)
    assert g.dx.shape == x.shape and np.all(g.dx == 0)
    assert g.dweight_ih.shape == (0, D) and g.dh0.shape == (B, 0)
