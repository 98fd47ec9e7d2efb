"""Parameter shapes from a configuration, without building the layer (the layer protocol's
``parameter_shapes``): ``rnnfast.load`` compares them with a file's arrays before anything is
allocated, so that no size in a file's configuration can make a load (or the first call)
allocate more than the file's arrays hold.

A size that no parameter carries has a documented bound instead: a dilation is at most
``MAX_DILATION`` (its cost is the call's, not d's: nn.recurrent.dilation).
"""

from __future__ import annotations

import inspect

from .._validation import check_bool, check_int

__all__ = ["MAX_DILATION", "constructor_arguments", "prefixed", "size", "flag"]

# the largest dilation a layer takes: far more than any sequence, and a call costs O(T) at any
# dilation (nn.recurrent.dilation), so the bound only keeps sizes in 32-bit-friendly ranges
MAX_DILATION = 2**31


def constructor_arguments(cls, config):
    """``cls``'s constructor defaults, updated by ``config`` (a dict, as get_config returned it;
    keys the constructor does not take are left for the constructor to refuse)."""
    if not isinstance(config, dict):
        raise TypeError(f"config: expected a dict of {cls.__name__}'s arguments, got "
                        f"{type(config).__name__}")  # fmt: skip
    params = inspect.signature(cls).parameters
    args = {
        name: p.default
        for name, p in params.items()
        if p.default is not inspect.Parameter.empty and p.kind is not p.VAR_KEYWORD
    }
    args.update(config)
    return args


def size(args, key, minimum=1):
    """``args[key]``, an int >= ``minimum`` (TypeError or ValueError naming config[key])."""
    if key not in args:
        raise ValueError(f"config: missing {key!r} (an int >= {minimum})")
    return check_int(f"config[{key!r}]", args[key], minimum=minimum)


def flag(args, key, default=False):
    """``args[key]`` (``default`` when absent), a bool."""
    return check_bool(f"config[{key!r}]", args.get(key, default))


def prefixed(prefix, shapes):
    """``shapes`` with each name under ``prefix`` (a container's child), or None if the child
    does not say."""
    if shapes is None:
        return None
    return {f"{prefix}.{name}": shape for name, shape in shapes.items()}
