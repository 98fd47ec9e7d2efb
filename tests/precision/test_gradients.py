"""precision="bf16" trains as float32 does, to bf16's rounding: every cell's output, input
gradient and parameter gradients against the same layer's with float32 products, with
lengths, masks, dropout, two directions, two layers, on 1 and 2 threads, bf16 emulated and
native; native bf16 against emulated.

The bound, norm-wise for each array g: ||g_bf16 - g_f32|| <= 8 u sqrt(T) ||g_f32||, u = 2**-8
(bf16's unit roundoff: 8 significant bits, to nearest even). Why: rounding both operands
perturbs a product by at most 2u of its terms (2u + u**2); a parameter's gradient is the end of
three chained products (the forward's state, the backward's delta, the weight-gradient
product), 6u, and the T steps' perturbations add as independent errors (the rounding errors
of different operands), sqrt(T); 8 rather than 6 leaves room for what the element-wise steps
multiply by (their derivatives, at most 1, but a layer norm's 1 / sigma). Measured here: at
most about 2 u sqrt(T) (a two-layer LayerNormLSTM's norm bias), 0.2 to 0.7 for the others.

relu's derivative is a step: where bf16's rounding moves a pre-activation across 0, that unit's
gradient switches on or off, a difference of the unit's whole gradient rather than of u. The
bound is stated for a relu layer whose bf16 forward switches on the same units as its float32
forward (about three draws in four here); where one differs, only that the gradients stay
of their own size (||g_bf16 - g_f32|| <= ||g_f32||; measured: at most 0.6).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import sweep

import rnnfast
from rnnfast.nn.recurrent.plain_calls import PlainCall

from .forms import layer_forms
from .switches import NATIVE_PATHS, PATHS, bf16_products_on, kernel_threads

T, B, D, H, P = 9, 4, 5, 8, 3
U = 2.0**-8  # bf16's unit roundoff
BOUND = 8 * U * np.sqrt(T)

CELLS = layer_forms(P)
# the layer's options and the call's padding (lengths or a Keras mask) per form
FORMS = {
    "plain": ({}, None),
    "lengths": ({}, "lengths"),
    "mask": ({}, "mask"),
    "dropout": ({"input_dropout": 0.25, "recurrent_dropout": 0.25}, None),
    "bidirectional": ({"bidirectional": True}, None),
    "two_layers": ({"num_layers": 2, "dropout": 0.25}, None),
    "everything": (
        {"num_layers": 2, "bidirectional": True, "dropout": 0.25, "input_dropout": 0.25},
        "lengths",
    ),
}
# every cell, form, thread count and path at least once, and 24 more cases (conftest.sweep);
# the whole product (336 cases, a few seconds) with -m full
AXES = {"cell": list(CELLS), "form": list(FORMS), "threads": [1, 2], "path": list(PATHS)}


def _layer(cell, form, precision):
    cls, options = CELLS[cell]
    options = {**options, **FORMS[form][0]}
    if cls is rnnfast.DeepTransitionRNN:  # its kernels apply no recurrent mask
        options.pop("recurrent_dropout", None)
    return cls(D, H, seed=11, precision=precision, **options)


def _padding(form, cls):
    """The call's keywords: lengths, or a Keras mask (a prefix one that zeroes the padded
    steps for DeepTransitionRNN, which takes no other; one with holes for the rest)."""
    lengths = np.array([T, T - 3, 4, 1])
    kind = FORMS[form][1]
    if kind == "lengths":
        return {"lengths": lengths}
    if kind == "mask":
        mask = np.arange(T)[None, :] < lengths[:, None]
        if cls is not rnnfast.DeepTransitionRNN:
            mask[0, 2] = mask[1, 4] = False  # steps skipped inside the sequences
        return {"mask": mask}
    return {}


def _layer_outputs(cache):
    """Every (layer, direction)'s outputs as a training forward keeps them: the plain stack's
    records (nn.recurrent.plain_calls), or the stack runner's, per layer per direction."""
    if isinstance(cache, PlainCall):
        return [r.y for r in cache.records]
    return [r.y for runs, _ in cache[2].layers for r, _ in runs]


def _train_once(cell, form, precision, x, d_out_seed):
    """One training forward and backward: ((y, dx, {name: gradient}), the units the forward
    switched on: every (layer, direction)'s outputs > 0, as its training cache keeps them)."""
    layer = _layer(cell, form, precision)
    if FORMS[form][1] == "mask" and CELLS[cell][0] is rnnfast.DeepTransitionRNN:
        layer.zero_output_for_mask = True
    y, _ = layer(x, **_padding(form, CELLS[cell][0]))
    on = np.concatenate([(y > 0).ravel() for y in _layer_outputs(layer._cache)])
    d_out = np.random.default_rng(d_out_seed).standard_normal(y.shape).astype(np.float32)
    dx, _ = layer.backward(d_out)
    return (y, dx, {name: g.copy() for name, g in layer.grads.items()}), on


def _relative_errors(got, want):
    (y, dx, grads), (y0, dx0, grads0) = got, want
    errors = {"y": (y, y0), "dx": (dx, dx0), **{k: (grads[k], grads0[k]) for k in grads0}}
    return {k: float(np.linalg.norm(a - b) / np.linalg.norm(b)) for k, (a, b) in errors.items()}


@pytest.mark.parametrize("case", sweep(AXES, seed=40, extra=24))
def test_bf16_gradients_are_float32_s_to_bf16_roundoff(case, rng):
    x = rng.standard_normal((T, B, D)).astype(np.float32)
    with kernel_threads(case["threads"]), bf16_products_on(case["path"]):
        got, on = _train_once(case["cell"], case["form"], "bf16", x, 1)
        want, on_f32 = _train_once(case["cell"], case["form"], "float32", x, 1)
    errors = _relative_errors(got, want)
    # bf16 products did run: float32's own rounding is orders of magnitude below 2**-8
    assert errors["y"] > U / 64, errors["y"]
    assert errors["y"] <= BOUND, errors["y"]  # relu too: the forward is continuous
    switched = CELLS[case["cell"]][1].get("nonlinearity") == "relu" and np.any(on != on_f32)
    bound = 1.0 if switched else BOUND  # see the module's docstring
    worst = max(errors, key=errors.get)
    assert errors[worst] <= bound, f"{worst}: {errors[worst]:.3g} > {bound:.3g} ({errors})"


# native bf16 against emulated: the same exact products of the same rounded operands, summed
# in float32 in another order (the native instructions add pairs, AMX's tiles whole blocks):
# K * 2**-24 relative per product, about 1e-6 at these sizes; 1e-5 leaves room for it growing
# through the layers and the steps.
NATIVE_VS_EMULATED = 1e-5


@pytest.mark.parametrize("path", NATIVE_PATHS)
@pytest.mark.parametrize("cell", list(CELLS))
def test_native_bf16_is_emulated_bf16_to_float32_rounding(cell, path, rng):
    x = rng.standard_normal((T, B, D)).astype(np.float32)
    results = {}
    for name in ("emulated", path):
        with bf16_products_on(name):
            results[name], _ = _train_once(cell, "everything", "bf16", x, 2)
    errors = _relative_errors(results[path], results["emulated"])
    worst = max(errors, key=errors.get)
    assert errors[worst] <= NATIVE_VS_EMULATED, f"{worst}: {errors[worst]:.3g} ({errors})"
