"""Keras's dtype policies on the front's layers: a layer's ``dtype=`` (a name, a
``keras.DTypePolicy`` or its config dict) or, when it is None, Keras's global policy
(``keras.mixed_precision.set_global_policy``), read at construction as Keras reads it.

Three policies run: "float32" and "float64" (variables and computation in that dtype), and
"mixed_bfloat16": float32 variables (weights, gradients, optimizer state), computation in
bfloat16, as Keras defines it. The front runs that computation as rnnfast's bf16 products
(``rnnfast.precision``): every GEMM of the forward and the backward with both operands rounded
to bf16 and float32 sums; gates, states and element-wise steps stay float32. What a layer
returns to the caller (a layer or model call, ``predict``) is in the compute dtype, bfloat16
(``ml_dtypes.bfloat16`` NumPy arrays, what Keras's ``predict`` returns too); between the
layers of a model the values stay float32, which changes nothing the next layer computes (its
products round its input to bf16 first).

Every other policy ("mixed_float16", "bfloat16", "float16", the quantized ones) is refused by
name: rnnfast has no float16 products, and "bfloat16" would keep bf16 variables, which its
kernels do not hold. Keras is imported here only when a policy object or the global policy
must be read (and the global policy only where keras is imported already: a program that
never imported it has not set one).
"""

from __future__ import annotations

import sys

import numpy as np

from .._validation import layer_dtype

__all__ = [
    "MIXED",
    "compute_array",
    "compute_outputs",
    "config_dtype",
    "policy_name",
    "variable_dtype",
]

MIXED = "mixed_bfloat16"
POLICIES = ("float32", "float64", MIXED)


def _refusal(name, who, where):
    return ValueError(
        f"dtype: {who} got the dtype policy {name!r}{where}; rnnfast.keras computes with "
        f"{POLICIES} ('mixed_bfloat16': float32 variables, bf16 products with float32 sums; "
        "no float16 products, no bf16 variables). Use dtype='mixed_bfloat16' (or "
        "keras.mixed_precision.set_global_policy('mixed_bfloat16')) for mixed precision, or "
        "'float32'"
    )


def _global_policy():
    """The name of Keras's global policy, or None where keras was never imported."""
    mixed_precision = getattr(sys.modules.get("keras"), "mixed_precision", None)
    global_policy = getattr(mixed_precision, "global_policy", None)
    return None if global_policy is None else global_policy().name


def policy_name(dtype, who):
    """The policy of a layer's ``dtype`` argument: one of POLICIES. None reads Keras's global
    policy (float32 without one). A float dtype (``np.float32``, "float64") is its policy."""
    where = ""
    if dtype is None:
        dtype = _global_policy() or "float32"
        where = " (Keras's global policy, keras.mixed_precision.global_policy())"
    elif isinstance(dtype, dict):  # Keras's serialized DTypePolicy: {"class_name", "config"}
        inner = dtype.get("config")
        name = inner.get("name") if isinstance(inner, dict) else None
        if not str(dtype.get("class_name", "")).endswith("DTypePolicy") or not isinstance(
            name, str
        ):
            raise ValueError(
                f"dtype: {who} expected Keras's DTypePolicy config ({{'class_name': "
                f"'DTypePolicy', 'config': {{'name': ...}}}}), got {dtype!r:.200}"
            )
        dtype = name
    elif not isinstance(dtype, str) and isinstance(getattr(dtype, "name", None), str):
        if hasattr(dtype, "compute_dtype") and hasattr(dtype, "variable_dtype"):
            dtype = dtype.name  # a keras.DTypePolicy (or a quantized one: refused below)
    if isinstance(dtype, str):
        if dtype in POLICIES:
            return dtype
        try:
            layer_dtype(dtype)
        except TypeError:
            raise _refusal(dtype, who, where) from None
    return layer_dtype(dtype).name


def variable_dtype(policy):
    """The dtype of the variables (and of the front's arrays between layers)."""
    return np.dtype(np.float32 if policy == MIXED else policy)


def config_dtype(policy):
    """``get_config()["dtype"]`` of a layer: the dtype's name, and for the mixed policy
    Keras's serialized DTypePolicy (what Keras writes; Keras and the front read both)."""
    if policy != MIXED:
        return policy
    return {
        "module": "keras",
        "class_name": "DTypePolicy",
        "config": {"name": policy},
        "registered_name": None,
    }


def compute_array(array, policy):
    """An output as Keras returns it: in the policy's compute dtype (a new bfloat16 array for
    the mixed policy; unchanged for the others, or for what is not a float array)."""
    if policy != MIXED or not isinstance(array, np.ndarray) or array.dtype.kind != "f":
        return array
    return array.astype(_bfloat16())


def compute_outputs(outputs, policies):
    """A call's outputs as Keras returns them: one array, or a list / tuple of them (the same
    kind back), each in the compute dtype of its policy (``policies``: one per output, or one
    for all)."""
    if isinstance(policies, str):
        policies = [policies] * (len(outputs) if isinstance(outputs, (list, tuple)) else 1)
    if not isinstance(outputs, (list, tuple)):
        return compute_array(outputs, policies[0])
    return type(outputs)(compute_array(o, p) for o, p in zip(outputs, policies))


def _bfloat16():
    try:
        import ml_dtypes
    except ImportError as error:  # Keras depends on it; rnnfast alone does not
        raise ImportError(
            "dtype='mixed_bfloat16': outputs are bfloat16 arrays (ml_dtypes.bfloat16, as "
            "Keras's); install ml_dtypes (pip install ml_dtypes, or keras, which needs it)"
        ) from error
    return ml_dtypes.bfloat16
