"""The gated cells' NumPy oracle (``rnnfast.reference``: gru_*, lstm_*) proven against PyTorch,
Keras 3 and finite differences, in float64 unless Keras is the oracle.

PyTorch runs each sequence of a padded batch on its own prefix (length 0: no run, the state is
h0 / c0), so lengths are checked against an independent definition, not against a mask. PyTorch
has only tanh, sigmoid and the GRU's reset_after=True form; Keras checks the others (reset_after=
False, relu, hard_sigmoid) in float32, the only dtype its torch backend computes in (see
test_functional_masks.py). Finite differences check every gradient of every form, with and
without dropout masks: recurrent (Keras 3's per-gate rec_dp_mask) and input (its dp_mask), both
checked against Keras with its masks set by the test.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close, numerical_gradient

from rnnfast import reference as ref

GATES = {"gru": 3, "lstm": 4}
F64 = np.float64


# ---- problems -----------------------------------------------------------------------------------


def gated_problem(rng, cell, T, B, D, H, P=None, *, bias=True, h0=True, scale=1.0):
    """x (T, B, D), the weights and biases of ``cell`` with PyTorch's initialisation
    U(-1/sqrt(H), 1/sqrt(H)) times ``scale``, h0 (B, R) and for the LSTM c0 (B, H), all float64.
    ``P``: an LSTM projection weight_hr (P, H), then R = P."""
    G, R = GATES[cell], P or H
    bound = scale / np.sqrt(H)

    def u(*shape):
        return rng.uniform(-bound, bound, size=shape)

    p = {
        "x": rng.standard_normal((T, B, D)),
        "weight_ih": u(G * H, D),
        "weight_hh": u(G * H, R),
        "bias_ih": u(G * H) if bias else None,
        "bias_hh": u(G * H) if bias else None,
        "h0": rng.uniform(-1, 1, size=(B, R)) if h0 else None,
    }
    if cell == "lstm":
        p["c0"] = rng.uniform(-1, 1, size=(B, H)) if h0 else None
        p["weight_hr"] = u(P, H) if P else None
    return p


def weights(p):
    """x and the weights shared by every call: (x, weight_ih, weight_hh, bias_ih, bias_hh)."""
    return p["x"], p["weight_ih"], p["weight_hh"], p["bias_ih"], p["bias_hh"]


def forward(cell, p, lengths=None, **options):
    """The reference forward of problem ``p``: GatedOutput."""
    if cell == "gru":
        return ref.gru_forward(*weights(p), p["h0"], lengths, **options)
    return ref.lstm_forward(
        *weights(p), p["h0"], p["c0"], lengths, weight_hr=p["weight_hr"], **options
    )


def gru_options(reset_after=True, activation="tanh", recurrent_activation="sigmoid"):
    return {
        "reset_after": reset_after,
        "activation": activation,
        "recurrent_activation": recurrent_activation,
    }


def lstm_options(activation="tanh", recurrent_activation="sigmoid"):
    return {"activation": activation, "recurrent_activation": recurrent_activation}


def backward(cell, p, y, dy, dh_n, dc_n=None, lengths=None, workspace=None, **options):
    """The reference backward of problem ``p`` (options: the forward's, all of them; no step
    mask unless given)."""
    options = {
        "step_mask": None,
        "zero_output_for_mask": False,
        "recurrent_mask": None,
        "input_mask": None,
        **options,
    }
    if cell == "gru":
        return ref.gru_backward(
            *weights(p), y, workspace, dy, dh_n, h0=p["h0"], lengths=lengths, **options
        )
    return ref.lstm_backward(
        *weights(p),
        y,
        workspace,
        dy,
        dh_n,
        dc_n,
        h0=p["h0"],
        c0=p["c0"],
        lengths=lengths,
        weight_hr=p["weight_hr"],
        **options,
    )


def seeds(rng, cell, p, T):
    """Random dy (T, B, R), dh_n (B, R) and dc_n (B, H) (None for the GRU)."""
    B, R = p["x"].shape[1], p["weight_hh"].shape[1]
    H = p["weight_hh"].shape[0] // GATES[cell]
    dc_n = rng.standard_normal((B, H)) if cell == "lstm" else None
    return rng.standard_normal((T, B, R)), rng.standard_normal((B, R)), dc_n


def loss(cell, p, lengths, dy, dh_n, dc_n, options):
    """sum(y dy) + sum(h_n dh_n) + sum(c_n dc_n): its gradient is the backward from those."""
    out = forward(cell, p, lengths, **options)
    total = np.sum(out.y * dy) + np.sum(out.h_n * dh_n)
    return float(total if dc_n is None else total + np.sum(out.c_n * dc_n))


# Gradient fields and the problem's arrays they belong to.
FIELD_OF = {
    "x": "dx",
    "h0": "dh0",
    "c0": "dc0",
    "weight_ih": "dweight_ih",
    "weight_hh": "dweight_hh",
    "bias_ih": "dbias_ih",
    "bias_hh": "dbias_hh",
    "weight_hr": "dweight_hr",
}


# ---- PyTorch ------------------------------------------------------------------------------------

T, B, D, H, P = 5, 4, 3, 5, 2
LENGTHS = [3, 5, 0, 1]  # unsorted, a full one, an empty one


def torch_module(torch, cell, p):
    bias = p["bias_ih"] is not None
    if cell == "gru":
        m = torch.nn.GRU(D, H, bias=bias, dtype=torch.float64)
    else:
        proj = 0 if p["weight_hr"] is None else p["weight_hr"].shape[0]
        m = torch.nn.LSTM(D, H, bias=bias, proj_size=proj, dtype=torch.float64)
    names = ["weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr"]
    state = {f"{n}_l0": torch.tensor(p[n]) for n in names if p.get(n) is not None}
    m.load_state_dict(state)  # strict: every torch parameter is one of ours, same shape
    return m


def torch_run(torch, cell, p, lengths, dy=None, dh_n=None, dc_n=None):
    """PyTorch, each sequence on its own prefix: y (T, B, R) zero-padded, h_n, c_n, and, given
    seeds, the autograd gradients of ``loss`` by our gradient field names. h0 / c0 None: zeros."""
    m = torch_module(torch, cell, p)
    R, H = p["weight_hh"].shape[1], p["weight_hh"].shape[0] // GATES[cell]

    def state(name, width):
        value = np.zeros((B, width)) if p[name] is None else p[name]
        return torch.tensor(value, requires_grad=True)

    x = torch.tensor(p["x"], requires_grad=True)
    h0 = state("h0", R)
    c0 = state("c0", H) if cell == "lstm" else None
    y = torch.zeros((T, B, R), dtype=torch.float64)
    h_n, c_n = [], []
    for b, n in enumerate(lengths):
        if n == 0:
            h_n.append(h0[b])
            c_n.append(c0[b] if c0 is not None else None)
            continue
        if cell == "gru":
            out, h = m(x[:n, b : b + 1], h0[None, b : b + 1])
            c = None
        else:
            out, (h, c) = m(x[:n, b : b + 1], (h0[None, b : b + 1], c0[None, b : b + 1]))
            c = c[0, 0]
        y[:n, b] = out[:, 0]
        h_n.append(h[0, 0])
        c_n.append(c)
    h_n = torch.stack(h_n)
    c_n = torch.stack(c_n) if cell == "lstm" else None
    result = {"y": y.detach().numpy(), "h_n": h_n.detach().numpy(), "c_n": None}
    if cell == "lstm":
        result["c_n"] = c_n.detach().numpy()
    if dy is not None:
        total = (y * torch.tensor(dy)).sum() + (h_n * torch.tensor(dh_n)).sum()
        if cell == "lstm":
            total = total + (c_n * torch.tensor(dc_n)).sum()
        total.backward()
        grads = {"dx": x.grad, "dh0": h0.grad}
        if cell == "lstm":
            grads["dc0"] = c0.grad
        for name, param in m.named_parameters():
            grads[FIELD_OF[name.removesuffix("_l0")]] = param.grad
        result["grads"] = {k: v.numpy() for k, v in grads.items()}
    return result


# (cell, projection, bias, lengths); without bias, without h0 / c0 too
TORCH_CASES = [
    ("gru", None, True, LENGTHS),
    ("gru", None, False, None),
    ("lstm", None, True, LENGTHS),
    ("lstm", P, True, LENGTHS),
    ("lstm", P, False, None),
]
TORCH_IDS = [
    f"{c}-{'proj' if proj else 'noproj'}-{'bias-h0' if bias else 'nobias-noh0'}-"
    f"{'lengths' if n else 'full'}"
    for c, proj, bias, n in TORCH_CASES
]


@pytest.mark.parametrize("cell, proj, bias, lengths", TORCH_CASES, ids=TORCH_IDS)
def test_forward_matches_torch(torch, cell, proj, bias, lengths, rng):
    p = gated_problem(rng, cell, T, B, D, H, proj, bias=bias, h0=bias)
    out = forward(cell, p, lengths)
    want = torch_run(torch, cell, p, lengths or [T] * B)
    assert_close(out.y, want["y"], F64, "y")
    assert_close(out.h_n, want["h_n"], F64, "h_n")
    if cell == "lstm":
        assert_close(out.c_n, want["c_n"], F64, "c_n")
    else:
        assert out.c_n is None
    assert out.workspace is None
    if lengths is not None:  # the empty sequence: zeros out, its h0 / c0 back
        assert not out.y[:, 2].any()
        np.testing.assert_array_equal(out.h_n[2], p["h0"][2])


@pytest.mark.parametrize("cell, proj, bias, lengths", TORCH_CASES, ids=TORCH_IDS)
def test_backward_matches_torch_autograd(torch, cell, proj, bias, lengths, rng):
    p = gated_problem(rng, cell, T, B, D, H, proj, bias=bias, h0=bias)
    dy, dh_n, dc_n = seeds(rng, cell, p, T)  # dy nonzero at padded steps too: ignored
    options = gru_options() if cell == "gru" else lstm_options()
    y = forward(cell, p, lengths).y
    g = backward(cell, p, y, dy, dh_n, dc_n, lengths, **options)
    want = torch_run(torch, cell, p, lengths or [T] * B, dy, dh_n, dc_n)["grads"]
    for field in g._fields:
        if field in want:
            assert_close(getattr(g, field), want[field], F64, field)
        elif field == "dweight_hr":
            assert g.dweight_hr is None
        else:  # torch's bias=False: the gradient the biases would get, checked by torch's
            assert not bias and field in ("dbias_ih", "dbias_hh")
    if not bias:
        p_bias = dict(p, bias_ih=np.zeros_like(p["weight_ih"][:, 0]))
        p_bias["bias_hh"] = p_bias["bias_ih"].copy()
        want_bias = torch_run(torch, cell, p_bias, lengths or [T] * B, dy, dh_n, dc_n)["grads"]
        assert_close(g.dbias_ih, want_bias["dbias_ih"], F64, "dbias_ih")
        assert_close(g.dbias_hh, want_bias["dbias_hh"], F64, "dbias_hh")


# ---- Keras 3 (float32) --------------------------------------------------------------------------

KT, KB, KD, KH = 6, 3, 4, 5


def assert_keras_close(actual, desired, what):
    """The float64 reference (on float32 values) against Keras's float32."""
    scale = max(1.0, float(np.max(np.abs(desired))))
    np.testing.assert_allclose(actual, desired, rtol=2e-5, atol=2e-6 * scale, err_msg=what)


def keras_to_torch_order(a, H):
    """Keras's GRU gate blocks (z, r, h) along the last axis -> PyTorch's (r, z, n)."""
    return np.concatenate([a[..., H : 2 * H], a[..., :H], a[..., 2 * H :]], axis=-1)


# Keras's gate blocks in PyTorch's order: GRU z, r, h -> r, z, n; the LSTM's i, f, c, o is
# PyTorch's i, f, g, o
KERAS_GATES = {"gru": [1, 0, 2], "lstm": [0, 1, 2, 3]}


def keras_problem(cell, keras_weights, x, states, options):
    """The reference's problem (float64, PyTorch's gate order) of a Keras layer's weights
    ``(kernel, recurrent, bias)``, x and its initial ``states`` ([h0] or [h0, c0])."""
    kernel, recurrent, bias = keras_weights
    if cell == "gru":
        # Keras's single bias (reset_after=False) is all input-side: bias_hh = 0 is the same GRU
        bias_ih, bias_hh = (
            (bias[0], bias[1]) if options["reset_after"] else (bias, np.zeros_like(bias))
        )
        p = {
            "x": x,
            "weight_ih": keras_to_torch_order(kernel, KH).T,
            "weight_hh": keras_to_torch_order(recurrent, KH).T,
            "bias_ih": keras_to_torch_order(bias_ih, KH),
            "bias_hh": keras_to_torch_order(bias_hh, KH),
            "h0": states[0],
        }
        return {k: v.astype(F64) for k, v in p.items()}
    p = {"x": x, "weight_ih": kernel.T, "weight_hh": recurrent.T, "bias_ih": bias}
    p |= {"bias_hh": None, "h0": states[0], "c0": states[1]}
    return {k: None if v is None else v.astype(F64) for k, v in p.items()} | {"weight_hr": None}


def assert_matches_keras(cell, out, got):
    """The reference's GatedOutput against Keras's (y, h_n[, c_n])."""
    assert_keras_close(out.y, got[0], "y")
    assert_keras_close(out.h_n, got[1], "h_n")
    if cell == "lstm":
        assert_keras_close(out.c_n, got[2], "c_n")


def keras_layer(keras, rng, kind, **kw):
    """A built Keras GRU / LSTM returning its sequence and states, with random weights
    U(-1, 1): large enough that hard_sigmoid clips some gates."""
    layer_cls = keras.layers.GRU if kind == "gru" else keras.layers.LSTM
    kl = layer_cls(KH, return_sequences=True, return_state=True, **kw)
    kl.build((None, KT, KD))
    weights = [rng.uniform(-1, 1, size=tuple(v.shape)).astype(np.float32) for v in kl.weights]
    kl.set_weights(weights)
    return kl, weights


def keras_call(torch, kl, x, states, training=False):
    """Keras's outputs (T, B, R) and final states, time-major."""
    x_btd = torch.tensor(x.swapaxes(0, 1).copy())
    out = kl(x_btd, initial_state=[torch.tensor(s) for s in states], training=training)
    out = [o.detach().numpy() for o in out]  # keras.ops.convert_to_numpy warns under NumPy 2
    return [out[0].swapaxes(0, 1)] + out[1:]


def trace(cell, p, lengths, options, recurrent_mask=None, input_mask=None):
    """The reference's per-step intermediates (its private forward's caches)."""
    masks = (lengths, None, False)  # no step mask
    if cell == "gru":
        return ref._gru_run(*weights(p), p["h0"], masks, options, recurrent_mask, input_mask)[2]
    return ref._lstm_run(
        *weights(p), p["h0"], p["c0"], masks, p["weight_hr"], options, recurrent_mask, input_mask
    )[3]


def gate_outputs(cell, p, options):
    """Every gate's recurrent-activation output over the problem, from the reference's own
    trace: to see which branches of hard_sigmoid a problem reaches."""
    gates = ("r", "z") if cell == "gru" else ("i", "f", "o")
    return np.ravel([[s[name] for name in gates] for s in trace(cell, p, None, options)])


def assert_both_hard_sigmoid_branches(cell, p, options):
    if options["recurrent_activation"] == "hard_sigmoid":
        s = gate_outputs(cell, p, options)
        clipped = (s == 0) | (s == 1)
        assert clipped.any() and not clipped.all(), "hard_sigmoid: both branches should occur"


@pytest.mark.parametrize(
    "reset_after, activation, recurrent_activation",
    [
        (False, "tanh", "sigmoid"),
        (False, "relu", "hard_sigmoid"),
        (True, "relu", "hard_sigmoid"),
    ],
)
def test_gru_forward_matches_keras(
    keras, torch, reset_after, activation, recurrent_activation, rng
):
    options = gru_options(reset_after, activation, recurrent_activation)
    kl, keras_weights = keras_layer(keras, rng, "gru", **options)
    x = rng.standard_normal((KT, KB, KD)).astype(np.float32)
    h0 = rng.uniform(-1, 1, size=(KB, KH)).astype(np.float32)
    p = keras_problem("gru", keras_weights, x, [h0], options)
    out = forward("gru", p, **options)
    assert_matches_keras("gru", out, keras_call(torch, kl, x, [h0]))
    assert_both_hard_sigmoid_branches("gru", p, options)


@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_lstm_forward_with_hard_sigmoid_matches_keras(keras, torch, activation, rng):
    options = lstm_options(activation, "hard_sigmoid")
    kl, keras_weights = keras_layer(keras, rng, "lstm", **options)
    x = rng.standard_normal((KT, KB, KD)).astype(np.float32)
    h0, c0 = rng.uniform(-1, 1, size=(2, KB, KH)).astype(np.float32)
    p = keras_problem("lstm", keras_weights, x, [h0, c0], options)
    out = forward("lstm", p, **options)
    assert_matches_keras("lstm", out, keras_call(torch, kl, x, [h0, c0]))
    assert_both_hard_sigmoid_branches("lstm", p, options)


def test_hard_sigmoid_is_keras_3s():
    """clip(a / 6 + 1/2, 0, 1), read through a GRU step whose update gate is hard_sigmoid(a):
    zero weights, n = tanh(0) = 0 and h = 1, so h' = z."""
    a = np.array([[-4.0, -3.0, -1.5, 0.0, 1.5, 3.0, 4.0]])
    K = a.shape[1]
    bias = np.concatenate([np.zeros(K), a[0], np.zeros(K)])
    x_t, h = np.zeros((1, 1)), np.ones((1, K))
    w_ih, w_hh = np.zeros((3 * K, 1)), np.zeros((3 * K, K))
    h_next = ref.gru_step(x_t, h, w_ih, w_hh, bias, recurrent_activation="hard_sigmoid")
    np.testing.assert_array_equal(h_next, [[0.0, 0.0, 0.25, 0.5, 0.75, 1.0, 1.0]])


# ---- finite differences -------------------------------------------------------------------------

FT, FB, FD, FH, FP = 3, 2, 3, 4, 2
FLENGTHS = [1, 3]  # not longest first; sequence 0 has padded steps
FD_CASES = [
    ("gru", None, gru_options(True)),
    ("gru", None, gru_options(False)),
    ("gru", None, gru_options(True, "relu", "hard_sigmoid")),
    ("gru", None, gru_options(False, "relu", "hard_sigmoid")),
    ("lstm", None, lstm_options()),
    ("lstm", FP, lstm_options()),
    ("lstm", None, lstm_options("relu", "hard_sigmoid")),
    ("lstm", FP, lstm_options("relu", "hard_sigmoid")),
]


def case_id(cell, proj, options):
    form = {True: "-reset_after", False: "-reset_before", None: ""}[options.get("reset_after")]
    proj = "-proj" if proj else ""
    return f"{cell}{form}{proj}-{options['activation']}-{options['recurrent_activation']}"


FD_IDS = [case_id(*case) for case in FD_CASES]
KINK_MARGIN = 1e-3


def recurrent_terms(s, weight_hh, bias_hh, key="u"):
    """W_hg u_g + b_hg of every gate g (B, G*H), u_g = h * mask_g from a step's cache; with
    key "v", the input terms W_ig v_g + b_ig, v_g = x * input_mask_g."""
    blocks = np.split(weight_hh, len(s[key]), axis=0)
    return np.concatenate([u @ w.T for u, w in zip(s[key], blocks)], axis=1) + bias_hh


def preactivations(cell, p, options, recurrent_mask=None, input_mask=None):
    """Where the problem's piecewise-linear functions are evaluated, from the reference's trace,
    each with its kink: (relu's arguments, hard_sigmoid's arguments)."""
    relu_args, gate_args = [], []
    steps = trace(cell, p, FLENGTHS, options, recurrent_mask, input_mask)
    if cell == "gru":
        for s in steps:
            a_in = recurrent_terms(s, p["weight_ih"], p["bias_ih"], key="v")
            a_h = recurrent_terms(s, p["weight_hh"], p["bias_hh"])
            a_r, a_z, _ = np.split(a_in + a_h, 3, axis=1)
            x_n = np.split(a_in, 3, axis=1)[2]
            gate_args += [a_r, a_z]
            relu_args.append(x_n + (s["r"] * s["h_n"] if options["reset_after"] else s["h_n"]))
        return np.ravel(relu_args), np.ravel(gate_args)
    for s in steps:
        a = recurrent_terms(s, p["weight_ih"], p["bias_ih"], key="v")
        a = a + recurrent_terms(s, *weights(p)[2:4])
        a_i, a_f, a_g, a_o = np.split(a, 4, axis=1)
        gate_args += [a_i, a_f, a_o]
        relu_args += [a_g, s["f"] * s["c"] + s["i"] * s["g"]]  # and c'
    return np.ravel(relu_args), np.ravel(gate_args)


def fd_problem(rng, cell, proj, options, recurrent_mask=None, input_mask=None):
    """A problem whose relu and hard_sigmoid arguments are all at least KINK_MARGIN from a kink
    (a step of 1e-6 never crosses one) and that reaches both sides of each kink."""
    relu = options["activation"] == "relu"
    hard = options["recurrent_activation"] == "hard_sigmoid"
    for _ in range(1000):
        # larger weights for hard_sigmoid: some gates then clip
        p = gated_problem(rng, cell, FT, FB, FD, FH, proj, scale=4.0 if hard else 1.0)
        relu_args, gate_args = preactivations(cell, p, options, recurrent_mask, input_mask)
        relu_ok = np.min(np.abs(relu_args)) > KINK_MARGIN and 0 < np.mean(relu_args > 0) < 1
        kink_distance = np.abs(np.abs(gate_args) - 3)
        hard_ok = np.min(kink_distance) > KINK_MARGIN and 0 < np.mean(np.abs(gate_args) < 3) < 1
        if (relu_ok or not relu) and (hard_ok or not hard):
            return p
    raise AssertionError("could not draw a problem away from the kinks")


def assert_gradients_match_finite_differences(rng, cell, p, options):
    """Every gradient of the backward (lengths FLENGTHS; ``options``: the forward's keywords)
    against central differences of ``loss``; returns the gradients."""
    dy, dh_n, dc_n = seeds(rng, cell, p, FT)
    y = forward(cell, p, FLENGTHS, **options).y
    g = backward(cell, p, y, dy, dh_n, dc_n, FLENGTHS, **options)
    for name, field in FIELD_OF.items():
        if name not in p or p[name] is None:
            continue
        numerical = numerical_gradient(
            lambda: loss(cell, p, FLENGTHS, dy, dh_n, dc_n, options), p[name]
        )
        assert np.max(np.abs(numerical)) > 1e-3, name  # the loss does depend on it
        got = getattr(g, field)
        np.testing.assert_allclose(got, numerical, rtol=1e-6, atol=1e-8, err_msg=name)
    # padded steps: no gradient reaches their inputs
    assert not g.dx[1:, 0].any()
    return g


@pytest.mark.parametrize("cell, proj, options", FD_CASES, ids=FD_IDS)
def test_backward_matches_finite_differences(cell, proj, options, rng):
    p = fd_problem(rng, cell, proj, options)
    assert_gradients_match_finite_differences(rng, cell, p, options)


# ---- steps --------------------------------------------------------------------------------------

STEP_CASES = [
    ("gru", None, gru_options(True)),
    ("gru", None, gru_options(False, "relu", "hard_sigmoid")),
    ("lstm", None, lstm_options()),
    ("lstm", FP, lstm_options("relu", "hard_sigmoid")),
]


@pytest.mark.parametrize("steps", [1, 3])
@pytest.mark.parametrize("cell, proj, options", STEP_CASES, ids=[case_id(*c) for c in STEP_CASES])
def test_steps_equal_the_forward(cell, proj, options, steps, rng):
    p = gated_problem(rng, cell, steps, FB, FD, FH, proj)
    out = forward(cell, p, **options)
    h, c = p["h0"], p.get("c0")
    weights = (p["weight_ih"], p["weight_hh"], p["bias_ih"], p["bias_hh"])
    for t in range(steps):
        if cell == "gru":
            h = ref.gru_step(p["x"][t], h, *weights, **options)
        else:
            h, c = ref.lstm_step(p["x"][t], h, c, *weights, weight_hr=p["weight_hr"], **options)
        assert_close(h, out.y[t], F64, f"h at step {t}")
    assert_close(h, out.h_n, F64, "h_n")
    if cell == "lstm":
        assert_close(c, out.c_n, F64, "c_n")


# ---- the contract's details ---------------------------------------------------------------------


@pytest.mark.parametrize("cell, proj", [("gru", None), ("lstm", None), ("lstm", FP)])
def test_options_workspace_and_padding(cell, proj, rng):
    """return_sequences=False gives y None and the same states; the backward ignores any
    workspace, drops dx with input_gradient=False and refuses y=None; padding (x, dy) holding
    NaN reaches nothing."""
    options = gru_options() if cell == "gru" else lstm_options()
    p = gated_problem(rng, cell, FT, FB, FD, FH, proj)
    dy, dh_n, dc_n = seeds(rng, cell, p, FT)
    out = forward(cell, p, FLENGTHS, keep_workspace=True)
    short = forward(cell, p, FLENGTHS, return_sequences=False)
    assert short.y is None
    np.testing.assert_array_equal(short.h_n, out.h_n)
    g = backward(cell, p, out.y, dy, dh_n, dc_n, FLENGTHS, **options)
    if cell == "lstm":
        assert (g.dweight_hr is None) == (proj is None)

    other = backward(cell, p, out.y, dy, dh_n, dc_n, FLENGTHS, workspace=np.arange(7.0), **options)
    no_dx = backward(cell, p, out.y, dy, dh_n, dc_n, FLENGTHS, input_gradient=False, **options)
    assert no_dx.dx is None
    padded = dict(p, x=p["x"].copy())
    padded["x"][1:, 0] = np.nan
    dy_padded = dy.copy()
    dy_padded[1:, 0] = np.nan
    nan_out = forward(cell, padded, FLENGTHS)
    nan_g = backward(cell, padded, nan_out.y, dy_padded, dh_n, dc_n, FLENGTHS, **options)
    np.testing.assert_array_equal(nan_out.y, out.y)
    for field in g._fields:
        for variant in (other, no_dx, nan_g):
            if getattr(variant, field) is not None:
                np.testing.assert_array_equal(getattr(variant, field), getattr(g, field), field)

    with pytest.raises(ValueError, match="y is None"):
        backward(cell, p, None, dy, dh_n, dc_n, FLENGTHS, **options)
    with pytest.raises(ValueError, match="activation"):
        forward(cell, p, FLENGTHS, activation="sigmoid")


@pytest.mark.parametrize("cell, proj", [("gru", None), ("lstm", FP)])
def test_float32_in_float32_out(cell, proj, rng):
    """Computed in the inputs' dtype: float32 results, close to float64's."""
    options = gru_options() if cell == "gru" else lstm_options()
    p = gated_problem(rng, cell, FT, FB, FD, FH, proj)
    p32 = {k: None if v is None else v.astype(np.float32) for k, v in p.items()}
    dy, dh_n, dc_n = seeds(rng, cell, p, FT)
    out64 = forward(cell, p, FLENGTHS)
    out32 = forward(cell, p32, FLENGTHS)
    g64 = backward(cell, p, out64.y, dy, dh_n, dc_n, FLENGTHS, **options)
    g32 = backward(cell, p32, out32.y, dy, dh_n, dc_n, FLENGTHS, **options)
    results = [("y", out32.y, out64.y), ("h_n", out32.h_n, out64.h_n)]
    results += [(f, getattr(g32, f), getattr(g64, f)) for f in g64._fields]
    for what, got, want in results:
        if want is None:
            continue
        assert got.dtype == np.float32, what
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=what)


# ---- recurrent dropout (Keras 3's per-gate rec_dp_mask) -----------------------------------------

DROP = 0.4


def dropout_mask(rng, cell, B, R, p=DROP):
    """A recurrent_mask (G, B, R) as a caller passes it: 0 (dropped) or 1 / (1 - p), both."""
    G = GATES[cell]
    for _ in range(100):
        keep = rng.random((G, B, R)) >= p
        if keep.any() and not keep.all():
            return keep / (1 - p)
    raise AssertionError("could not draw a mask with both values")


# (cell, projection, options, step mask); lengths FLENGTHS throughout
MASKED_FD_CASES = [
    ("gru", None, gru_options(True), False),
    ("gru", None, gru_options(False), False),
    ("gru", None, gru_options(False, "relu", "hard_sigmoid"), False),
    ("lstm", None, lstm_options(), False),
    ("lstm", FP, lstm_options(), False),
    ("lstm", FP, lstm_options("relu", "hard_sigmoid"), False),
    ("gru", None, gru_options(False), True),
    ("lstm", FP, lstm_options(), True),
]


@pytest.mark.parametrize(
    "cell, proj, options, with_step_mask",
    MASKED_FD_CASES,
    ids=[case_id(*c[:3]) + ("-step_mask" if c[3] else "") for c in MASKED_FD_CASES],
)
def test_recurrent_mask_backward_matches_finite_differences(
    cell, proj, options, with_step_mask, rng
):
    mask = dropout_mask(rng, cell, FB, proj or FH)
    p = fd_problem(rng, cell, proj, options, mask)
    options = dict(options, recurrent_mask=mask)
    if with_step_mask:  # sequence 1 (length 3) skips its step 1
        options["step_mask"] = np.array([[1, 1], [1, 0], [1, 1]], dtype=bool)
    g = assert_gradients_match_finite_differences(rng, cell, p, options)
    # a weight_hh column gate g never reads (its unit dropped in every sequence): no gradient
    H = p["weight_hh"].shape[0] // GATES[cell]
    for gate, unit in zip(*np.nonzero(~mask.any(axis=1))):
        assert not g.dweight_hh[gate * H : (gate + 1) * H, unit].any()


@pytest.mark.parametrize(
    "cell, proj, options",
    [("gru", None, gru_options(True)), ("gru", None, gru_options(False)), ("lstm", FP, {})],
    ids=["gru-reset_after", "gru-reset_before", "lstm-proj"],
)
def test_recurrent_mask_none_is_all_ones(cell, proj, options, rng):
    """None and an all-ones mask give the same bits; a mask of the wrong shape is refused."""
    options = options or lstm_options()
    p = gated_problem(rng, cell, FT, FB, FD, FH, proj)
    dy, dh_n, dc_n = seeds(rng, cell, p, FT)
    ones = np.ones((GATES[cell], FB, proj or FH))
    results = []
    for mask in (None, ones):
        out = forward(cell, p, FLENGTHS, recurrent_mask=mask, **options)
        g = backward(cell, p, out.y, dy, dh_n, dc_n, FLENGTHS, recurrent_mask=mask, **options)
        results.append([out.y, out.h_n, out.c_n, *g])
    for got, want in zip(*results):
        if want is not None:
            np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="recurrent_mask"):
        forward(cell, p, FLENGTHS, recurrent_mask=ones[0], **options)  # (B, R): one mask


def per_gate_loop(cell, p, mask, options, input_mask=None):
    """The masked cells written out gate by gate, PyTorch's order (GRU r, z, n; LSTM i, f, g,
    o), tanh and sigmoid, full sequences: (h_n, c_n or None). ``input_mask`` None: ones."""

    def sigmoid(a):
        return 1 / (1 + np.exp(-a))

    x, w_ih, w_hh, b_ih, b_hh = weights(p)
    G = GATES[cell]
    W_i, W_h = np.split(w_ih, G), np.split(w_hh, G)
    b_i, b_h = np.split(b_ih, G), np.split(b_hh, G)
    h, c = p["h0"], p.get("c0")
    input_mask = np.ones((G, *x.shape[1:])) if input_mask is None else input_mask
    for x_t in x:

        def pre(g, h_in):  # gate g's pre-activation when its recurrent term reads h_in
            return (x_t * input_mask[g]) @ W_i[g].T + b_i[g] + h_in @ W_h[g].T + b_h[g]

        if cell == "gru":
            r = sigmoid(pre(0, h * mask[0]))
            z = sigmoid(pre(1, h * mask[1]))
            if options["reset_after"]:
                x_n = (x_t * input_mask[2]) @ W_i[2].T + b_i[2]
                n = np.tanh(x_n + r * ((h * mask[2]) @ W_h[2].T + b_h[2]))
            else:
                n = np.tanh(pre(2, r * (h * mask[2])))
            h = (1 - z) * n + z * h
        else:
            i, f = sigmoid(pre(0, h * mask[0])), sigmoid(pre(1, h * mask[1]))
            g, o = np.tanh(pre(2, h * mask[2])), sigmoid(pre(3, h * mask[3]))
            c = f * c + i * g
            h = o * np.tanh(c)
            h = h if p["weight_hr"] is None else h @ p["weight_hr"].T
    return h, c


@pytest.mark.parametrize(
    "cell, proj, options",
    [("gru", None, gru_options(True)), ("gru", None, gru_options(False)), ("lstm", FP, {})],
    ids=["gru-reset_after", "gru-reset_before", "lstm-proj"],
)
def test_recurrent_mask_forward_is_the_per_gate_loop(cell, proj, options, rng):
    p = gated_problem(rng, cell, FT, FB, FD, FH, proj)
    mask = dropout_mask(rng, cell, FB, proj or FH)
    out = forward(cell, p, recurrent_mask=mask, **options)
    h_n, c_n = per_gate_loop(cell, p, mask, options)
    assert_close(out.h_n, h_n, F64, "h_n")
    if cell == "lstm":
        assert_close(out.c_n, c_n, F64, "c_n")
    unmasked = forward(cell, p, **options)
    assert np.max(np.abs(unmasked.h_n - out.h_n)) > 1e-3  # the mask does change the result


KERAS_DROPOUT_CASES = [
    ("gru", gru_options(True)),
    ("gru", gru_options(False)),
    ("gru", gru_options(False, "relu", "hard_sigmoid")),
    ("lstm", lstm_options()),
]


@pytest.mark.parametrize(
    "cell, options",
    KERAS_DROPOUT_CASES,
    ids=[case_id(cell, None, options) for cell, options in KERAS_DROPOUT_CASES],
)
def test_recurrent_mask_matches_keras_recurrent_dropout(keras, torch, cell, options, rng):
    """Keras 3 with recurrent_dropout, training: its cell's per-gate masks (Keras's gate order:
    GRU z, r, h; LSTM i, f, c, o) set by the test, the same masks in PyTorch's order here."""
    kl, keras_weights = keras_layer(keras, rng, cell, recurrent_dropout=DROP, **options)
    x = rng.standard_normal((KT, KB, KD)).astype(np.float32)
    h0, c0 = rng.uniform(-1, 1, size=(2, KB, KH)).astype(np.float32)
    keras_mask = dropout_mask(rng, cell, KB, KH).astype(np.float32)
    kl.cell.get_recurrent_dropout_mask = lambda step_input: [torch.tensor(m) for m in keras_mask]
    states = [h0] if cell == "gru" else [h0, c0]
    p = keras_problem(cell, keras_weights, x, states, options)
    mask = keras_mask[KERAS_GATES[cell]]
    out = forward(cell, p, recurrent_mask=mask.astype(F64), **options)
    assert_matches_keras(cell, out, keras_call(torch, kl, x, states, training=True))
    # not vacuous: without the masks, both differ
    unmasked = forward(cell, p, **options)
    assert np.max(np.abs(unmasked.y - out.y)) > 1e-2


# ---- input dropout (Keras 3's per-gate dp_mask) -------------------------------------------------


@pytest.mark.parametrize(
    "cell, proj, options, with_step_mask",
    MASKED_FD_CASES,
    ids=[case_id(*c[:3]) + ("-step_mask" if c[3] else "") for c in MASKED_FD_CASES],
)
def test_input_mask_backward_matches_finite_differences(cell, proj, options, with_step_mask, rng):
    """Input and recurrent dropout masks together."""
    input_mask = dropout_mask(rng, cell, FB, FD)
    mask = dropout_mask(rng, cell, FB, proj or FH)
    p = fd_problem(rng, cell, proj, options, mask, input_mask)
    options = dict(options, recurrent_mask=mask, input_mask=input_mask)
    if with_step_mask:  # sequence 1 (length 3) skips its step 1
        options["step_mask"] = np.array([[1, 1], [1, 0], [1, 1]], dtype=bool)
    g = assert_gradients_match_finite_differences(rng, cell, p, options)
    # a weight_ih column gate g never reads (its input dropped in every sequence): no gradient
    H = p["weight_ih"].shape[0] // GATES[cell]
    for gate, feature in zip(*np.nonzero(~input_mask.any(axis=1))):
        assert not g.dweight_ih[gate * H : (gate + 1) * H, feature].any()
    # an input no gate reads (dropped for every gate): no gradient at any step
    for b, feature in zip(*np.nonzero(~input_mask.any(axis=0))):
        assert not g.dx[:, b, feature].any()


@pytest.mark.parametrize(
    "cell, proj, options",
    [("gru", None, gru_options(True)), ("gru", None, gru_options(False)), ("lstm", FP, {})],
    ids=["gru-reset_after", "gru-reset_before", "lstm-proj"],
)
def test_input_mask_none_is_all_ones(cell, proj, options, rng):
    """None and an all-ones input mask give the same bits; a mask of the wrong shape is
    refused, forward and backward; the backward requires the keyword."""
    options = options or lstm_options()
    p = gated_problem(rng, cell, FT, FB, FD, FH, proj)
    dy, dh_n, dc_n = seeds(rng, cell, p, FT)
    ones = np.ones((GATES[cell], FB, FD))
    results = []
    for mask in (None, ones):
        out = forward(cell, p, FLENGTHS, input_mask=mask, **options)
        g = backward(cell, p, out.y, dy, dh_n, dc_n, FLENGTHS, input_mask=mask, **options)
        results.append([out.y, out.h_n, out.c_n, *g])
    for got, want in zip(*results):
        if want is not None:
            np.testing.assert_array_equal(got, want)
    y = results[0][0]
    with pytest.raises(ValueError, match="input_mask"):
        forward(cell, p, FLENGTHS, input_mask=ones[0], **options)  # (B, D): one mask
    with pytest.raises(ValueError, match="input_mask"):
        backward(cell, p, y, dy, dh_n, dc_n, FLENGTHS, input_mask=ones[:, :, :-1], **options)
    required = {"h0": p["h0"], "lengths": FLENGTHS, "step_mask": None}
    required |= {"zero_output_for_mask": False, "recurrent_mask": None, **options}
    with pytest.raises(TypeError, match="input_mask"):
        if cell == "gru":
            ref.gru_backward(*weights(p), y, None, dy, dh_n, **required)
        else:
            required |= {"c0": p["c0"], "weight_hr": p["weight_hr"]}
            ref.lstm_backward(*weights(p), y, None, dy, dh_n, dc_n, **required)


@pytest.mark.parametrize(
    "cell, proj, options",
    [("gru", None, gru_options(True)), ("gru", None, gru_options(False)), ("lstm", FP, {})],
    ids=["gru-reset_after", "gru-reset_before", "lstm-proj"],
)
def test_input_mask_forward_is_the_per_gate_loop(cell, proj, options, rng):
    p = gated_problem(rng, cell, FT, FB, FD, FH, proj)
    input_mask = dropout_mask(rng, cell, FB, FD)
    mask = dropout_mask(rng, cell, FB, proj or FH)
    out = forward(cell, p, recurrent_mask=mask, input_mask=input_mask, **options)
    h_n, c_n = per_gate_loop(cell, p, mask, options, input_mask)
    assert_close(out.h_n, h_n, F64, "h_n")
    if cell == "lstm":
        assert_close(out.c_n, c_n, F64, "c_n")
    unmasked = forward(cell, p, recurrent_mask=mask, **options)
    assert np.max(np.abs(unmasked.h_n - out.h_n)) > 1e-3  # the input mask does change it


# (cell, options, recurrent_dropout): input dropout alone and with recurrent dropout
KERAS_INPUT_DROPOUT_CASES = [
    ("gru", gru_options(True), 0.0),
    ("gru", gru_options(True), DROP),
    ("gru", gru_options(False), DROP),
    ("gru", gru_options(False, "relu", "hard_sigmoid"), 0.0),
    ("lstm", lstm_options(), 0.0),
    ("lstm", lstm_options(), DROP),
    ("lstm", lstm_options("relu", "hard_sigmoid"), DROP),
]


@pytest.mark.parametrize(
    "cell, options, recurrent_dropout",
    KERAS_INPUT_DROPOUT_CASES,
    ids=[
        case_id(cell, None, options) + ("-recurrent_dropout" if rd else "")
        for cell, options, rd in KERAS_INPUT_DROPOUT_CASES
    ],
)
def test_input_mask_matches_keras_dropout(keras, torch, cell, options, recurrent_dropout, rng):
    """Keras 3 with dropout (and recurrent_dropout), training, implementation=1 (the per-gate
    masks; Keras takes it by itself only with recurrent_dropout) and no fused path: its cell's
    per-gate masks (Keras's gate order: GRU z, r, h; LSTM i, f, c, o) set by the test, the same
    masks in PyTorch's order here."""
    kl, keras_weights = keras_layer(
        keras,
        rng,
        cell,
        dropout=DROP,
        recurrent_dropout=recurrent_dropout,
        implementation=1,
        use_cudnn=False,
        **options,
    )
    x = rng.standard_normal((KT, KB, KD)).astype(np.float32)
    h0, c0 = rng.uniform(-1, 1, size=(2, KB, KH)).astype(np.float32)
    keras_input_mask = dropout_mask(rng, cell, KB, KD).astype(np.float32)
    kl.cell.get_dropout_mask = lambda step_input: [torch.tensor(m) for m in keras_input_mask]
    keras_mask = None
    if recurrent_dropout:
        keras_mask = dropout_mask(rng, cell, KB, KH).astype(np.float32)
        kl.cell.get_recurrent_dropout_mask = lambda step_input: [
            torch.tensor(m) for m in keras_mask
        ]
    states = [h0] if cell == "gru" else [h0, c0]
    p = keras_problem(cell, keras_weights, x, states, options)
    order = KERAS_GATES[cell]
    input_mask = keras_input_mask[order].astype(F64)
    mask = None if keras_mask is None else keras_mask[order].astype(F64)
    out = forward(cell, p, recurrent_mask=mask, input_mask=input_mask, **options)
    assert_matches_keras(cell, out, keras_call(torch, kl, x, states, training=True))
    # not vacuous: without the input masks, both differ
    unmasked = forward(cell, p, recurrent_mask=mask, **options)
    assert np.max(np.abs(unmasked.y - out.y)) > 1e-2
