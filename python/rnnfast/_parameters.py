"""What every layer does the same way with its parameters (a dict ``_params`` of live arrays
and a dict ``grads`` of gradients under the same names) and its mode (``training``, and the
forward's ``_cache`` that only a training forward keeps)."""

from __future__ import annotations

import numpy as np

__all__ = ["ALIGNMENT", "ParameterOwner", "aligned_copy"]

# Bytes a layer's new parameters are aligned to: a cache line, one AVX-512 vector.
ALIGNMENT = 64


def aligned_copy(array):
    """A C-contiguous copy of ``array`` whose data starts on an ALIGNMENT-byte boundary.

    NumPy aligns its data to 16 bytes. The single-step products (``step()``, a batch of one)
    read the weights as stored, a vector at a time: with rows on 64-byte boundaries no load
    straddles two cache lines (dot products of 192 x 64 and 256 x 64 float32, AVX-512, Zen 4:
    40-47 -> 49-55 GFLOP/s). Only fresh parameters are aligned, before anything holds them:
    arrays a user rebinds, or that a copy or a pickle re-creates, keep NumPy's alignment and
    give the same results, somewhat slower."""
    array = np.ascontiguousarray(array)
    buffer = np.empty(array.nbytes + ALIGNMENT, dtype=np.uint8)
    start = -buffer.ctypes.data % ALIGNMENT
    out = buffer[start : start + array.nbytes].view(array.dtype).reshape(array.shape)
    out[...] = array
    return out


class ParameterOwner:
    """Mixin for layers that keep ``self._params``, ``self.grads``, ``self.training`` and
    ``self._cache``."""

    def parameters(self):
        """The live parameter arrays, in state_dict order (optimizers update them in place)."""
        return list(self._params.values())

    def named_parameters(self):
        return list(self._params.items())

    def zero_grad(self):
        for g in self.grads.values():
            g.fill(0)

    def state_dict(self):
        """Copies of the parameters under their names (PyTorch's, for RNN)."""
        return {name: p.copy() for name, p in self._params.items()}

    def load_state_dict(self, state_dict):
        """Copy values into the live parameters (PyTorch tensors too), in the layer's dtype.
        Checks every key, dtype kind and shape first; on an error nothing changes."""
        if not hasattr(state_dict, "keys"):
            raise TypeError(f"state_dict: expected a mapping, got {type(state_dict).__name__}")
        missing = [k for k in self._params if k not in state_dict]
        extra = [k for k in state_dict if k not in self._params]
        if missing or extra:
            raise ValueError(f"state_dict: missing key(s) {missing}, unexpected key(s) {extra}")
        load_checked(self._params, state_dict)

    def train(self, mode=True):
        """Training mode (forwards keep what backward needs) or, with False, eval mode."""
        self.training = bool(mode)
        if not self.training:
            self._cache = None
        return self

    def eval(self):
        return self.train(False)


def load_checked(params, state_dict):
    """Copy ``state_dict[name]`` (a NumPy array, a torch tensor or anything ``np.asarray`` takes)
    into each live array ``params[name]``, in its dtype, once every value's dtype kind and shape
    are checked: on an error nothing changes. The keys are the caller's to check."""
    loaded = {}
    for name, current in params.items():
        value = state_dict[name]
        if hasattr(value, "detach"):  # a torch tensor: no autograd, on the CPU
            value = value.detach().cpu().numpy()
        arr = np.asarray(value)
        if arr.dtype.kind not in "fiu":
            raise TypeError(f"{name}: expected a real numeric array, got dtype {arr.dtype}")
        if arr.shape != current.shape:
            raise ValueError(f"{name}: expected shape {current.shape}, got shape {arr.shape}")
        loaded[name] = np.array(arr, dtype=current.dtype)
    for name, arr in loaded.items():
        params[name][...] = arr
