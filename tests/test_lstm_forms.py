"""ONNX's forms of the LSTM (peepholes, input_forget, the cell clip): the kernels
(``functional.lstm_form_*``, one policy instantiation per combination) against
rnnfast.reference's equations (forward), every gradient by finite differences in float64, and
the forward against onnxruntime's LSTM node."""

import itertools

import numpy as np
import pytest

import rnnfast
from rnnfast import functional as F
from rnnfast import reference as R

FORMS = list(itertools.product((False, True), (False, True), (None, 0.8)))
IDS = [f"peep{int(p)}-if{int(i)}-clip{c}" for p, i, c in FORMS]
TOL = {np.float32: 2e-5, np.float64: 1e-12}


def _problem(rng, T, B, D, H, dt, peepholes):
    arrays = dict(
        x=rng.standard_normal((T, B, D)),
        weight_ih=rng.uniform(-0.8, 0.8, (4 * H, D)),
        weight_hh=rng.uniform(-0.8, 0.8, (4 * H, H)),
        bias_ih=rng.uniform(-1, 1, 4 * H),
        bias_hh=rng.uniform(-1, 1, 4 * H),
        h0=rng.standard_normal((B, H)),
        c0=rng.standard_normal((B, H)),
    )
    if peepholes:
        arrays["peepholes"] = rng.uniform(-1, 1, 3 * H)
    return {k: v.astype(dt) for k, v in arrays.items()}


def _call(fn, p, lengths, input_forget, cell_clip, **kw):
    return fn(
        p["x"], p["weight_ih"], p["weight_hh"], p["bias_ih"], p["bias_hh"], p["h0"], p["c0"],
        lengths, peepholes=p.get("peepholes"), input_forget=input_forget, cell_clip=cell_clip,
        **kw,
    )  # fmt: skip


@pytest.mark.parametrize("peep, coupled, clip", FORMS, ids=IDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("T,B,D,H,threads", [(1, 1, 1, 1, 1), (5, 3, 4, 17, 2), (4, 7, 3, 40, 2)])
def test_forward_matches_reference(peep, coupled, clip, dtype, T, B, D, H, threads):
    rng = np.random.default_rng(T * 100 + H)
    p = _problem(rng, T, B, D, H, dtype, peep)
    lengths = sorted(rng.integers(1, T + 1, B).tolist(), reverse=True)
    with rnnfast.threads(threads):
        out = _call(F.lstm_form_forward, p, lengths, coupled, clip, keep_workspace=True)
    ref = _call(R.lstm_form_forward, p, lengths, coupled, clip)
    for got, want in ((out.y, ref.y), (out.h_n, ref.h_n), (out.c_n, ref.c_n)):
        assert got.dtype == dtype
        np.testing.assert_allclose(got, want, rtol=TOL[dtype], atol=TOL[dtype])
    h, c = p["h0"][0], p["c0"][0]  # the step kernel, unbatched, one row
    for t in range(lengths[0]):
        h, c = F.lstm_form_step(
            p["x"][t, 0], h, c, p["weight_ih"], p["weight_hh"], p["bias_ih"], p["bias_hh"],
            peepholes=p.get("peepholes"), input_forget=coupled, cell_clip=clip,
        )  # fmt: skip
    np.testing.assert_allclose(h, ref.h_n[0], rtol=TOL[dtype], atol=TOL[dtype])
    np.testing.assert_allclose(c, ref.c_n[0], rtol=TOL[dtype], atol=TOL[dtype])


@pytest.mark.parametrize("peep, coupled, clip", FORMS, ids=IDS)
def test_gradients_by_finite_differences(peep, coupled, clip):
    """Every gradient (x, the weights, the biases, h0, c0, the peepholes) against central
    differences of the reference's loss, float64, lengths included; with the clip most gates
    are clipped somewhere (zero derivative there)."""
    T, B, D, H = 5, 3, 2, 4
    rng = np.random.default_rng(7)
    p = _problem(rng, T, B, D, H, np.float64, peep)
    lengths = [5, 3, 1]
    out = _call(F.lstm_form_forward, p, lengths, coupled, clip, keep_workspace=True)
    dy = rng.standard_normal(out.y.shape)
    dh, dc = rng.standard_normal((B, H)), rng.standard_normal((B, H))
    g = F.lstm_form_backward(
        p["x"], p["weight_ih"], p["weight_hh"], p["bias_ih"], p["bias_hh"], out.y,
        out.workspace, dy, dh, dc, h0=p["h0"], c0=p["c0"], lengths=lengths,
        peepholes=p.get("peepholes"), input_forget=coupled, cell_clip=clip,
    )  # fmt: skip
    running = (np.arange(T)[:, None] < np.array(lengths))[:, :, None]

    def loss(q):
        r = _call(R.lstm_form_forward, q, lengths, coupled, clip)
        return (r.y * running * dy).sum() + (r.h_n * dh).sum() + (r.c_n * dc).sum()

    grads = dict(
        x=g.dx, weight_ih=g.dweight_ih, weight_hh=g.dweight_hh, bias_ih=g.dbias_ih,
        bias_hh=g.dbias_hh, h0=g.dh0, c0=g.dc0,
    )  # fmt: skip
    if peep:
        grads["peepholes"] = g.dpeepholes
    else:
        assert g.dpeepholes is None
    eps = 1e-6
    for name, got in grads.items():
        want = np.zeros_like(p[name])
        for idx in np.ndindex(want.shape):
            q = {k: v.copy() for k, v in p.items()}
            q[name][idx] += eps
            up = loss(q)
            q[name][idx] -= 2 * eps
            want[idx] = (up - loss(q)) / (2 * eps)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7, err_msg=name)


def test_off_is_the_plain_lstm_bit_for_bit():
    rng = np.random.default_rng(3)
    p = _problem(rng, 4, 3, 5, 9, np.float32, False)
    a = _call(F.lstm_form_forward, p, None, False, None, keep_workspace=True)
    b = F.lstm_forward(
        p["x"], p["weight_ih"], p["weight_hh"], p["bias_ih"], p["bias_hh"], p["h0"], p["c0"],
        keep_workspace=True,
    )  # fmt: skip
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(cell_clip=0.0), "cell_clip: expected a float > 0"),
        (dict(cell_clip=True), "cell_clip: expected a float > 0"),
        (dict(cell_clip=float("inf")), "cell_clip: expected a float > 0"),
        (dict(peepholes=np.zeros(5)), r"peepholes: expected shape \(3\*H,\)"),
    ],
)
def test_bad_options(kw, match):
    p = _problem(np.random.default_rng(0), 2, 1, 2, 3, np.float64, False)
    with pytest.raises(ValueError, match=match):
        F.lstm_form_forward(p["x"], p["weight_ih"], p["weight_hh"], **kw)
    with pytest.raises(TypeError, match="input_forget"):
        F.lstm_form_forward(p["x"], p["weight_ih"], p["weight_hh"], input_forget=1)


@pytest.mark.parametrize("peep, coupled, clip", FORMS, ids=IDS)
def test_forward_matches_onnxruntime_node(peep, coupled, clip):
    """onnxruntime's LSTM node with P, input_forget and clip (ONNX's gate order i, o, f, c;
    P's i, o, f) against the kernels, float32."""
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    T, B, D, H = 6, 2, 3, 5
    p = _problem(np.random.default_rng(11), T, B, D, H, np.float32, peep)
    onnx_order = [0, 3, 1, 2]  # i, o, f, c from PyTorch's i, f, g, o

    def gates(w):
        return np.concatenate([np.split(w, 4)[k] for k in onnx_order])[None]

    feeds = dict(
        X=p["x"], W=gates(p["weight_ih"]), R=gates(p["weight_hh"]),
        B=np.concatenate([gates(p["bias_ih"]), gates(p["bias_hh"])], axis=1),
        initial_h=p["h0"][None], initial_c=p["c0"][None],
    )  # fmt: skip
    if peep:
        pi, pf, po = np.split(p["peepholes"], 3)
        feeds["P"] = np.concatenate([pi, po, pf])[None]
    names = ["X", "W", "R", "B", "", "initial_h", "initial_c", "P" if peep else ""]
    attrs = dict(hidden_size=H, input_forget=int(coupled))
    if clip is not None:
        attrs["clip"] = clip
    node = helper.make_node("LSTM", names, ["Y", "Y_h", "Y_c"], **attrs)
    inputs = [
        helper.make_tensor_value_info(n, TensorProto.FLOAT, v.shape) for n, v in feeds.items()
    ]
    outputs = [
        helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("Y", "Y_h", "Y_c")
    ]
    model = helper.make_model(
        helper.make_graph([node], "lstm", inputs, outputs),
        opset_imports=[helper.make_opsetid("", 14)],
    )
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    y, y_h, y_c = session.run(None, feeds)
    out = _call(F.lstm_form_forward, p, None, coupled, clip)
    np.testing.assert_allclose(out.y, y[:, 0], atol=2e-6)
    np.testing.assert_allclose(out.h_n, y_h[0], atol=2e-6)
    np.testing.assert_allclose(out.c_n, y_c[0], atol=2e-6)
    assert onnx.__version__
