"""rnnfast.optim against torch.optim, torch.nn.utils clipping and torch.optim.lr_scheduler.

Each optimizer runs step for step beside its PyTorch twin on the same parameters and the same
gradient sequence; in float64 the parameters must agree to ~1e-12 after 20 steps (the formulas
are the same, only the order of a few roundings differs).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import rnnfast
from rnnfast.optim import (
    SGD,
    Adam,
    AdamW,
    CosineAnnealingLR,
    ReduceLROnPlateau,
    StepLR,
    clip_grad_norm,
    clip_grad_value,
)

STEPS = 20
SHAPES = [(3, 4), (7,), (1, 1), (17, 3)]
# Tolerance of the parameters after STEPS steps, beside PyTorch in the same dtype.
OPT_TOL = {np.float64: {"rtol": 1e-12, "atol": 1e-12}, np.float32: {"rtol": 2e-5, "atol": 2e-6}}

OPTIMIZERS = {"SGD": SGD, "Adam": Adam, "AdamW": AdamW}
SETTINGS = [
    ("SGD", {"lr": 0.1}),
    ("SGD", {"lr": 0.05, "momentum": 0.9}),
    ("SGD", {"lr": 0.05, "momentum": 0.9, "nesterov": True}),
    ("SGD", {"lr": 0.05, "momentum": 0.5, "dampening": 0.3, "weight_decay": 0.01}),
    ("SGD", {"lr": 0.1, "weight_decay": 0.1}),
    ("SGD", {"lr": 0.02, "momentum": 0.8, "nesterov": True, "weight_decay": 1e-2}),
    ("Adam", {}),
    ("Adam", {"lr": 1e-2, "betas": (0.8, 0.99), "eps": 1e-6}),
    ("Adam", {"lr": 1e-2, "weight_decay": 0.1}),
    ("Adam", {"lr": 3e-2, "betas": (0.0, 0.5)}),
    ("AdamW", {}),
    ("AdamW", {"lr": 1e-2, "weight_decay": 0.1}),
    ("AdamW", {"lr": 1e-2, "betas": (0.5, 0.9), "weight_decay": 0.0}),
]
SETTING_IDS = [
    f"{name}-{'-'.join(f'{k}={v}' for k, v in kw.items()) or 'default'}" for name, kw in SETTINGS
]


# ---- helpers ------------------------------------------------------------------------------------


def _params(rng, dtype=np.float64):
    return [rng.standard_normal(s).astype(dtype) for s in SHAPES]


def _grad_sequence(rng, steps=STEPS, dtype=np.float64):
    return [[rng.standard_normal(s).astype(dtype) for s in SHAPES] for _ in range(steps)]


def _torch_run(torch, name, kwargs, params, grad_seq):
    """The parameters after each step of torch.optim.<name> over ``grad_seq``."""
    tparams = [torch.tensor(p.copy(), requires_grad=True) for p in params]
    opt = getattr(torch.optim, name)(tparams, **kwargs)
    history = []
    for grads in grad_seq:
        for tp, g in zip(tparams, grads):
            tp.grad = torch.tensor(g.copy())
        opt.step()
        history.append([tp.detach().numpy().copy() for tp in tparams])
    return history


def _our_run(opt, params, grads, grad_seq):
    """The parameters after each step of ``opt``, whose (param, grad) pairs are ``params``,
    ``grads``, over ``grad_seq``."""
    history = []
    for step_grads in grad_seq:
        for g, new in zip(grads, step_grads):
            g[...] = new
        opt.step()
        history.append([p.copy() for p in params])
    return history


def _assert_histories(ours, theirs, dtype):
    t = OPT_TOL[np.dtype(dtype).type]
    for step, (a_step, b_step) in enumerate(zip(ours, theirs)):
        for i, (a, b) in enumerate(zip(a_step, b_step)):
            assert a.dtype == np.dtype(dtype)
            np.testing.assert_allclose(a, b, err_msg=f"step {step + 1}, parameter {i}", **t)


def _pairs(params):
    grads = [np.zeros_like(p) for p in params]
    return grads, list(zip(params, grads))


def _unit_gradients(rng, dtype=np.float64):
    """Parameters whose gradients are all ones, as _params and _pairs give them."""
    params = _params(rng, dtype)
    grads, pairs = _pairs(params)
    for g in grads:
        g[...] = 1.0
    return params, grads, pairs


def _with_torch_copies(torch, rng, params):
    """Random gradients for ``params`` (as _pairs gives them) and torch copies of the parameters
    holding copies of those gradients: (grads, pairs, torch parameters)."""
    grads, pairs = _pairs(params)
    for g in grads:
        g[...] = rng.standard_normal(g.shape)
    tparams = [torch.tensor(p.copy(), requires_grad=True) for p in params]
    for tp, g in zip(tparams, grads):
        tp.grad = torch.tensor(g.copy())
    return grads, pairs, tparams


# ---- optimizers against torch.optim -------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(("name", "kwargs"), SETTINGS, ids=SETTING_IDS)
def test_optimizer_matches_torch(torch, rng, name, kwargs, dtype):
    params = _params(rng, dtype)
    grad_seq = _grad_sequence(rng, dtype=dtype)
    theirs = _torch_run(torch, name, kwargs, params, grad_seq)
    grads, pairs = _pairs(params)
    ours = _our_run(OPTIMIZERS[name](pairs, **kwargs), params, grads, grad_seq)
    _assert_histories(ours, theirs, dtype)


@pytest.mark.parametrize(("name", "kwargs"), SETTINGS, ids=SETTING_IDS)
def test_optimizer_on_rnn_module_matches_torch(torch, rng, name, kwargs):
    """Gradients from the layer's own backward; torch.optim gets the same values and its
    parameters must follow the layer's."""
    layer = rnnfast.RNN(3, 5, num_layers=2, bidirectional=True, dtype=np.float64, seed=1)
    tparams = {k: torch.tensor(v.copy(), requires_grad=True) for k, v in layer.named_parameters()}
    topt = getattr(torch.optim, name)(list(tparams.values()), **kwargs)
    opt = OPTIMIZERS[name](layer, **kwargs)
    x = rng.standard_normal((4, 2, 3))
    dy = rng.standard_normal((4, 2, 10))
    for step in range(5):
        opt.zero_grad()
        layer(x)
        layer.backward(dy)
        for k, tp in tparams.items():
            tp.grad = torch.tensor(layer.grads[k].copy())
        opt.step()
        topt.step()
        for k, p in layer.named_parameters():
            np.testing.assert_allclose(
                p,
                tparams[k].detach().numpy(),
                rtol=1e-12,
                atol=1e-12,
                err_msg=f"step {step + 1}, {k}",
            )


def test_list_of_modules_and_zero_grad(rng):
    a = rnnfast.RNN(2, 3, dtype=np.float64, seed=0)
    b = rnnfast.RNN(3, 4, dtype=np.float64, seed=1)
    before = {("a", k): v.copy() for k, v in a.named_parameters()}
    before.update({("b", k): v.copy() for k, v in b.named_parameters()})
    for m in (a, b):
        for g in m.grads.values():
            g[...] = rng.standard_normal(g.shape)
    grads = {("a", k): v.copy() for k, v in a.grads.items()}
    grads.update({("b", k): v.copy() for k, v in b.grads.items()})
    opt = SGD([a, b], lr=0.5)
    opt.step()
    for tag, m in (("a", a), ("b", b)):
        for k, p in m.named_parameters():
            np.testing.assert_array_equal(p, before[tag, k] - 0.5 * grads[tag, k])
    opt.zero_grad()
    assert all(not g.any() for m in (a, b) for g in m.grads.values())


def test_float32_parameters_stay_float32(rng):
    params, grads, pairs = _unit_gradients(rng, np.float32)
    for cls in (SGD, Adam, AdamW):
        opt = cls(pairs, lr=0.1) if cls is SGD else cls(pairs)
        opt.step()
        assert all(p.dtype == np.float32 for p in params)
        assert all(
            b.dtype == np.float32 for bufs in opt.state_dict()["buffers"].values() for b in bufs
        )


def test_step_does_not_write_the_gradients(rng):
    params = _params(rng)
    grads, pairs = _pairs(params)
    for g in grads:
        g[...] = rng.standard_normal(g.shape)
    saved = [g.copy() for g in grads]
    for opt in (
        SGD(pairs, lr=0.1, momentum=0.9, weight_decay=0.1),
        Adam(pairs, weight_decay=0.1),
        AdamW(pairs),
    ):
        opt.step()
        opt.step()
    for g, s in zip(grads, saved):
        np.testing.assert_array_equal(g, s)


def test_lr_is_settable(rng):
    params, grads, pairs = _unit_gradients(rng)
    opt = SGD(pairs, lr=0.1)
    opt.lr = 0.25
    before = params[0].copy()
    opt.step()
    np.testing.assert_array_equal(params[0], before - 0.25)
    with pytest.raises(ValueError, match="lr"):
        opt.lr = -1.0
    assert opt.lr == 0.25


# ---- state_dict -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "kwargs"), SETTINGS, ids=SETTING_IDS)
def test_state_dict_round_trip_continues_identically(rng, name, kwargs):
    cls = OPTIMIZERS[name]
    params = _params(rng)
    grad_seq = _grad_sequence(rng)
    grads, pairs = _pairs(params)
    opt = cls(pairs, **kwargs)
    _our_run(opt, params, grads, grad_seq[:10])
    state = opt.state_dict()

    params2 = [p.copy() for p in params]
    grads2, pairs2 = _pairs(params2)
    # other hyper-parameters on purpose: loading must restore them
    opt2 = cls(pairs2, lr=0.5) if cls is SGD else cls(pairs2, lr=0.5, betas=(0.1, 0.2))
    opt2.load_state_dict(state)
    assert opt2.hyperparameters == opt.hyperparameters
    assert opt2.step_count == opt.step_count == 10

    rest = grad_seq[10:]
    ours = _our_run(opt, params, grads, rest)
    again = _our_run(opt2, params2, grads2, rest)
    for a_step, b_step in zip(ours, again):
        for a, b in zip(a_step, b_step):
            np.testing.assert_array_equal(a, b)


def test_state_dict_is_a_snapshot(rng):
    params, grads, pairs = _unit_gradients(rng)
    opt = Adam(pairs)
    opt.step()
    state = opt.state_dict()
    m0 = state["buffers"]["exp_avg"][0].copy()
    opt.step()
    np.testing.assert_array_equal(state["buffers"]["exp_avg"][0], m0)
    assert state["step"] == 1
    assert isinstance(state["hyperparameters"]["lr"], float)


def test_sgd_state_before_the_first_step_has_no_buffers(rng):
    params = _params(rng)
    _, pairs = _pairs(params)
    opt = SGD(pairs, lr=0.1, momentum=0.9)
    assert opt.state_dict()["buffers"] == {}
    SGD(pairs, lr=0.3, momentum=0.9).load_state_dict(opt.state_dict())


def _bad_states(state, n_params):
    """(mutation, error type, message pattern) triples for load_state_dict."""

    def edit(fn):
        def apply():
            s = {k: v for k, v in state.items()}
            s["hyperparameters"] = dict(state["hyperparameters"])
            s["buffers"] = {k: list(v) for k, v in state["buffers"].items()}
            fn(s)
            return s

        return apply

    return [
        (
            edit(lambda s: s["buffers"]["exp_avg"].__setitem__(1, np.zeros((2, 2)))),
            ValueError,
            r"exp_avg.*\[1\].*expected shape \(7,\)",
        ),
        (
            edit(lambda s: s["buffers"]["exp_avg_sq"].pop()),
            ValueError,
            f"exp_avg_sq.*list of {n_params} arrays",
        ),
        (edit(lambda s: s["buffers"].pop("exp_avg")), ValueError, "missing key.*exp_avg"),
        (edit(lambda s: s.pop("step")), ValueError, "missing key.*step"),
        (edit(lambda s: s.__setitem__("extra", 1)), ValueError, "unexpected key.*extra"),
        (edit(lambda s: s.__setitem__("optimizer", "SGD")), ValueError, "'SGD'"),
        (edit(lambda s: s["hyperparameters"].__setitem__("lr", -1.0)), ValueError, "lr"),
        (
            edit(lambda s: s["hyperparameters"].__setitem__("betas", (0.9, 1.0))),
            ValueError,
            r"betas\[1\]",
        ),
        (edit(lambda s: s.__setitem__("step", -2)), ValueError, "step"),
        (lambda: [1, 2], TypeError, "mapping"),
    ]


def test_load_state_dict_validates_and_changes_nothing_on_error(rng):
    params, grads, pairs = _unit_gradients(rng)
    opt = Adam(pairs)
    opt.step()
    state = opt.state_dict()
    for make, error, pattern in _bad_states(state, len(SHAPES)):
        with pytest.raises(error, match=pattern):
            opt.load_state_dict(make())
        after = opt.state_dict()
        assert after["step"] == 1 and after["hyperparameters"] == state["hyperparameters"]
        for name, bufs in state["buffers"].items():
            for a, b in zip(after["buffers"][name], bufs):
                np.testing.assert_array_equal(a, b)


# ---- clipping -------------------------------------------------------------------------------------


@pytest.mark.parametrize("norm_type", [2.0, math.inf, 1.0, 3.0])
@pytest.mark.parametrize("max_norm", [0.5, 1e3])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_clip_grad_norm_matches_torch(torch, rng, norm_type, max_norm, dtype):
    params = _params(rng, dtype)
    grads, pairs, tparams = _with_torch_copies(torch, rng, params)
    expected = torch.nn.utils.clip_grad_norm_(tparams, max_norm, norm_type=norm_type)
    total = clip_grad_norm(pairs, max_norm, norm_type=norm_type)
    rtol = 1e-14 if dtype == np.float64 else 1e-6
    assert isinstance(total, float)
    np.testing.assert_allclose(total, float(expected), rtol=rtol)
    for g, tp in zip(grads, tparams):
        assert g.dtype == np.dtype(dtype)
        np.testing.assert_allclose(g, tp.grad.numpy(), rtol=rtol, atol=0)
    if max_norm < total:
        new_total = clip_grad_norm(pairs, 1e9, norm_type=norm_type)
        np.testing.assert_allclose(new_total, max_norm, rtol=1e-5)


def test_clip_grad_norm_on_a_module(torch, rng):
    layer = rnnfast.RNN(3, 4, num_layers=2, dtype=np.float64, seed=2)
    layer(rng.standard_normal((5, 2, 3)))
    layer.backward(10 * rng.standard_normal((5, 2, 4)))
    tparams = []
    for k, p in layer.named_parameters():
        tparams.append(torch.tensor(p.copy(), requires_grad=True))
        tparams[-1].grad = torch.tensor(layer.grads[k].copy())
    expected = torch.nn.utils.clip_grad_norm_(tparams, 0.1)
    total = clip_grad_norm(layer, 0.1)
    np.testing.assert_allclose(total, float(expected), rtol=1e-14)
    for (k, _), tp in zip(layer.named_parameters(), tparams):
        np.testing.assert_allclose(layer.grads[k], tp.grad.numpy(), rtol=1e-14, atol=0)


@pytest.mark.parametrize("bad", [math.inf, math.nan])
@pytest.mark.parametrize("norm_type", [2.0, math.inf])
def test_clip_grad_norm_nonfinite(torch, rng, bad, norm_type):
    params = _params(rng)
    grads, pairs = _pairs(params)
    for g in grads:
        g[...] = rng.standard_normal(g.shape)
    grads[1][3] = bad
    saved = [g.copy() for g in grads]
    total = clip_grad_norm(pairs, 1.0, norm_type=norm_type)
    assert not math.isfinite(total)
    if not math.isnan(bad):
        assert total == math.inf
    # ours: the gradients are left as they were (a training loop skips the step)
    for g, s in zip(grads, saved):
        np.testing.assert_array_equal(g, s)
    with pytest.raises(RuntimeError, match="non-?finite|error_if_nonfinite"):
        clip_grad_norm(pairs, 1.0, norm_type=norm_type, error_if_nonfinite=True)
    # torch raises too when asked to
    tparams = [torch.tensor(p.copy(), requires_grad=True) for p in params]
    for tp, g in zip(tparams, grads):
        tp.grad = torch.tensor(g.copy())
    with pytest.raises(RuntimeError):
        torch.nn.utils.clip_grad_norm_(tparams, 1.0, norm_type=norm_type, error_if_nonfinite=True)


@pytest.mark.parametrize("clip_value", [0.0, 0.3, 2.0])
def test_clip_grad_value_matches_torch(torch, rng, clip_value):
    params = _params(rng)
    grads, pairs, tparams = _with_torch_copies(torch, rng, params)
    torch.nn.utils.clip_grad_value_(tparams, clip_value)
    assert clip_grad_value(pairs, clip_value) is None
    for g, tp in zip(grads, tparams):
        np.testing.assert_array_equal(g, tp.grad.numpy())


# ---- schedules against torch.optim.lr_scheduler ---------------------------------------------------


def _torch_schedule(torch, lr, make):
    """A torch optimizer over one dummy parameter and the schedule ``make(optimizer)``."""
    p = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([p], lr=lr)
    return opt, make(opt)


def _our_schedule(lr, make):
    opt = SGD([(np.zeros(1), np.zeros(1))], lr=lr)
    return opt, make(opt)


SCHEDULES = [
    ("StepLR", {"step_size": 3, "gamma": 0.5}),
    ("StepLR", {"step_size": 1, "gamma": 0.9}),
    ("CosineAnnealingLR", {"T_max": 10}),
    ("CosineAnnealingLR", {"T_max": 7, "eta_min": 0.01}),
    ("CosineAnnealingLR", {"T_max": 1, "eta_min": 0.001}),
]
OUR_SCHEDULES = {"StepLR": StepLR, "CosineAnnealingLR": CosineAnnealingLR}


@pytest.mark.parametrize(("name", "kwargs"), SCHEDULES, ids=[f"{n}-{kw}" for n, kw in SCHEDULES])
def test_schedule_matches_torch(torch, name, kwargs):
    topt, tsched = _torch_schedule(
        torch, 0.1, lambda o: getattr(torch.optim.lr_scheduler, name)(o, **kwargs)
    )
    opt, sched = _our_schedule(0.1, lambda o: OUR_SCHEDULES[name](o, **kwargs))
    assert sched.get_last_lr() == tsched.get_last_lr()
    for epoch in range(40):
        if epoch == 25:  # a rate set by hand is carried on by both
            opt.lr = topt.param_groups[0]["lr"] = 0.05
        topt.step()
        tsched.step()
        opt.step()
        sched.step()
        np.testing.assert_allclose(
            sched.get_last_lr(),
            tsched.get_last_lr(),
            rtol=1e-15,
            atol=1e-18,
            err_msg=f"epoch {epoch + 1}",
        )
        assert opt.lr == sched.get_last_lr()[0]


PLATEAU_SETTINGS = [
    {},
    {"patience": 2},
    {"patience": 1, "factor": 0.5, "cooldown": 2},
    {"patience": 0, "factor": 0.5, "min_lr": 0.02},
    {"mode": "max", "patience": 2, "threshold": 0.05},
    {"patience": 1, "threshold": 0.1, "threshold_mode": "abs"},
]


@pytest.mark.parametrize("kwargs", PLATEAU_SETTINGS, ids=[str(k) for k in PLATEAU_SETTINGS])
def test_reduce_on_plateau_matches_torch(torch, rng, kwargs):
    # plateaus of many lengths (each level one lower, with noise below the threshold), a NaN
    lengths = [3, 12, 1, 5, 15, 2, 8, 13, 4, 11]
    metrics = np.concatenate([np.full(n, 10.0 - k) for k, n in enumerate(lengths)])
    metrics += 1e-6 * rng.random(metrics.size)
    metrics[20] = math.nan
    topt, tsched = _torch_schedule(
        torch, 0.1, lambda o: torch.optim.lr_scheduler.ReduceLROnPlateau(o, **kwargs)
    )
    _, sched = _our_schedule(0.1, lambda o: ReduceLROnPlateau(o, **kwargs))
    assert sched.get_last_lr() == tsched.get_last_lr()
    lrs = []
    for epoch, m in enumerate(metrics):
        topt.step()
        tsched.step(float(m))
        sched.step(np.float64(m))
        assert sched.get_last_lr() == tsched.get_last_lr(), f"epoch {epoch + 1}"
        lrs.append(sched.get_last_lr()[0])
    assert lrs[-1] < 0.1  # the sequence did exercise a reduction


# ---- bad arguments ------------------------------------------------------------------------------


def _pair():
    return [(np.zeros(3), np.zeros(3))]


BAD = [
    (lambda: SGD(_pair(), lr=-0.1), ValueError, "lr"),
    (lambda: SGD(_pair(), lr=math.nan), ValueError, "lr"),
    (lambda: SGD(_pair(), lr=0.1, momentum=-0.5), ValueError, "momentum"),
    (lambda: SGD(_pair(), lr=0.1, dampening=1.5), ValueError, "dampening"),
    (lambda: SGD(_pair(), lr=0.1, weight_decay=-1), ValueError, "weight_decay"),
    (lambda: SGD(_pair(), lr=0.1, nesterov=True), ValueError, "nesterov"),
    (
        lambda: SGD(_pair(), lr=0.1, momentum=0.9, dampening=0.1, nesterov=True),
        ValueError,
        "nesterov",
    ),
    (lambda: SGD(_pair(), lr="0.1"), TypeError, "lr"),
    (lambda: SGD(_pair(), lr=True), TypeError, "lr"),
    (lambda: Adam(_pair(), lr=-1e-3), ValueError, "lr"),
    (lambda: Adam(_pair(), betas=(1.0, 0.999)), ValueError, r"betas\[0\]"),
    (lambda: Adam(_pair(), betas=(0.9, -0.1)), ValueError, r"betas\[1\]"),
    (lambda: Adam(_pair(), betas=0.9), TypeError, "betas: expected a pair"),
    (lambda: Adam(_pair(), eps=-1e-8), ValueError, "eps"),
    (lambda: Adam(_pair(), weight_decay=-0.1), ValueError, "weight_decay"),
    (lambda: AdamW(_pair(), weight_decay=-0.1), ValueError, "weight_decay"),
    (lambda: AdamW(_pair(), betas=(0.9, 1.5)), ValueError, r"betas\[1\]"),
    (lambda: SGD([], lr=0.1), ValueError, "empty"),
    (lambda: SGD([(np.zeros(3), np.zeros(4))], lr=0.1), ValueError, "shape"),
    (lambda: SGD([(np.zeros(3, dtype=int), np.zeros(3))], lr=0.1), TypeError, "float"),
    (lambda: SGD([([0.0], [0.0])], lr=0.1), TypeError, "NumPy array"),
    (lambda: SGD(np.zeros(3), lr=0.1), TypeError, "params"),
    (lambda: SGD(_pair() * 2, lr=0.1), ValueError, "more than once"),
    (lambda: clip_grad_norm(_pair(), -1.0), ValueError, "max_norm"),
    (lambda: clip_grad_norm(_pair(), 1.0, norm_type=0), ValueError, "norm_type"),
    (lambda: clip_grad_value(_pair(), -0.1), ValueError, "clip_value"),
    (lambda: StepLR(SGD(_pair(), lr=0.1), step_size=0), ValueError, "step_size"),
    (lambda: StepLR(SGD(_pair(), lr=0.1), step_size=2, gamma=-1.0), ValueError, "gamma"),
    (lambda: StepLR(object(), step_size=2), TypeError, "optimizer"),
    (lambda: CosineAnnealingLR(SGD(_pair(), lr=0.1), T_max=0), ValueError, "T_max"),
    (lambda: CosineAnnealingLR(SGD(_pair(), lr=0.1), T_max=3, eta_min=-1), ValueError, "eta_min"),
    (lambda: ReduceLROnPlateau(SGD(_pair(), lr=0.1), mode="up"), ValueError, "mode"),
    (lambda: ReduceLROnPlateau(SGD(_pair(), lr=0.1), factor=1.0), ValueError, "factor"),
    (lambda: ReduceLROnPlateau(SGD(_pair(), lr=0.1), factor=0.0), ValueError, "factor"),
    (lambda: ReduceLROnPlateau(SGD(_pair(), lr=0.1), patience=-1), ValueError, "patience"),
    (lambda: ReduceLROnPlateau(SGD(_pair(), lr=0.1), cooldown=-1), ValueError, "cooldown"),
    (lambda: ReduceLROnPlateau(SGD(_pair(), lr=0.1), min_lr=-1), ValueError, "min_lr"),
    (
        lambda: ReduceLROnPlateau(SGD(_pair(), lr=0.1), threshold_mode="x"),
        ValueError,
        "threshold_mode",
    ),
]


@pytest.mark.parametrize(("make", "error", "pattern"), BAD, ids=range(len(BAD)))
def test_bad_arguments_raise(make, error, pattern):
    with pytest.raises(error, match=pattern):
        make()


def test_module_gradient_of_the_wrong_shape_fails_before_any_update(rng):
    layer = rnnfast.RNN(2, 3, dtype=np.float64, seed=0)
    opt = SGD(layer, lr=0.1)
    before = [p.copy() for p in layer.parameters()]
    for g in layer.grads.values():
        g[...] = 1.0
    layer.grads["bias_hh_l0"] = np.zeros(4)
    with pytest.raises(ValueError, match="bias_hh_l0.*shape"):
        opt.step()
    for p, b in zip(layer.parameters(), before):
        np.testing.assert_array_equal(p, b)


# ---- the fused Adam kernel -------------------------------------------------------------------


def _adam_numpy(p, g, m, v, lr, beta1, beta2, eps, wd, decoupled, t):
    """torch.optim.Adam's operations in its order, one NumPy operation per rounding."""
    if wd:
        if decoupled:
            p *= 1.0 - lr * wd
        else:
            g = g + wd * p
    m += (1.0 - beta1) * (g - m)
    v *= beta2
    v += (g * g) * (1.0 - beta2)
    denom = np.sqrt(v) / (1.0 - beta2**t) ** 0.5
    denom += eps
    p -= (lr / (1.0 - beta1**t)) * (m / denom)


@pytest.mark.parametrize("decoupled", [False, True])
@pytest.mark.parametrize("wd", [0.0, 0.1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_adam_kernel_rounds_like_numpy_step_for_step(dtype, wd, decoupled):
    """Built without FMA contraction, the C++ update equals the NumPy expression bit for bit."""
    from rnnfast import _core

    rng = np.random.default_rng(3)
    n = 1037
    p, m, v = (rng.standard_normal(n).astype(dtype) for _ in range(3))
    v = np.abs(v)
    want = [a.copy() for a in (p, m, v)]
    for t in range(1, 6):
        g = rng.standard_normal(n).astype(dtype)
        _core.adam_update(
            p,
            g,
            m,
            v,
            1e-2,
            0.9,
            0.999,
            1e-8,
            wd,
            decoupled,
            1e-2 / (1.0 - 0.9**t),
            (1.0 - 0.999**t) ** 0.5,
        )
        _adam_numpy(*want[:1], g, *want[1:], 1e-2, 0.9, 0.999, 1e-8, wd, decoupled, t)
        for got, exp, name in zip((p, m, v), want, ("param", "exp_avg", "exp_avg_sq")):
            assert np.array_equal(got, exp), f"{name} at step {t}"


def test_adam_updates_a_strided_parameter_in_place():
    """A parameter given as a strided view (a (param, grad) pair of the user's) is updated
    through a contiguous copy, and the update lands in the caller's array."""
    base = np.ones((4, 6))
    param = base[:, ::2]
    grad = np.full(param.shape, 0.5)
    opt = Adam([(param, grad)], lr=0.1)
    opt.step()
    np.testing.assert_allclose(base[:, ::2], 0.9)  # Adam's first step moves by lr
    np.testing.assert_array_equal(base[:, 1::2], 1.0)


def test_adam_kernel_refuses_bad_arrays():
    from rnnfast import _core

    ok = np.zeros(4)
    scalars = (1e-3, 0.9, 0.999, 1e-8, 0.0, False, 1.0, 1.0)
    frozen = np.zeros(4)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="param"):
        _core.adam_update(frozen, ok, ok.copy(), ok.copy(), *scalars)
    with pytest.raises(ValueError, match="exp_avg"):
        _core.adam_update(ok.copy(), ok, np.zeros(3), ok.copy(), *scalars)
    with pytest.raises(TypeError, match="grad"):
        _core.adam_update(ok.copy(), ok.astype(np.float32), ok.copy(), ok.copy(), *scalars)
    with pytest.raises(TypeError, match="param"):
        _core.adam_update(ok.astype(np.float16), ok, ok.copy(), ok.copy(), *scalars)
    with pytest.raises(ValueError, match="param"):
        _core.adam_update(np.zeros((2, 2)), ok, ok.copy(), ok.copy(), *scalars)
