"""The RNN layer: parameters, gradients and the training cache over rnnfast.functional."""

from __future__ import annotations

import math
import numbers

import numpy as np

from . import functional
from ._validation import as_float_array, check_nonlinearity, layer_dtype

__all__ = ["RNN"]


def _positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name}: expected a positive int, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name}: expected a positive int, got {value}")
    return int(value)


class RNN:
    """Elman RNN layer with PyTorch's ``torch.nn.RNN`` interface, on NumPy arrays.

    ``h_t = act(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh)``, ``act`` tanh or relu.

    Parameters
    ----------
    input_size, hidden_size : int
    num_layers : int
        Only 1 for now.
    nonlinearity : {"tanh", "relu"}
    bias : bool
        When False the layer has no ``bias_ih_l0`` / ``bias_hh_l0``.
    batch_first : bool
        Input and output as (B, T, D) / (B, T, H) instead of (T, B, ...).
    dropout : float in [0, 1)
        Dropout between stacked layers; with one layer it has nothing to act on (as PyTorch).
    bidirectional : bool
        Only False for now.
    dtype : float32 or float64
    seed : int, optional
        Seeds the initialisation U(-1/sqrt(H), 1/sqrt(H)) (PyTorch's).

    Call ``y, h_n = layer(x, h0=None)``; after a call in training mode,
    ``dx, dh0 = layer.backward(dy, dh_n=None)`` adds the parameter gradients into
    ``layer.grads`` (keys as ``state_dict()``).
    """

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, dtype=np.float32,
                 seed=None):
        self.input_size = _positive_int("input_size", input_size)
        self.hidden_size = _positive_int("hidden_size", hidden_size)
        self.num_layers = _positive_int("num_layers", num_layers)
        self.nonlinearity = check_nonlinearity(nonlinearity)
        if not isinstance(dropout, numbers.Real) or not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"dropout: expected a probability in [0, 1), got {dropout!r}")
        if self.num_layers != 1:
            raise NotImplementedError(
                f"num_layers={self.num_layers}: stacked layers are not implemented yet; use 1"
            )
        if bidirectional:
            raise NotImplementedError(
                "bidirectional=True: bidirectional layers are not implemented yet"
            )
        self.bias = bool(bias)
        self.batch_first = bool(batch_first)
        self.dropout = float(dropout)
        self.bidirectional = False
        self.dtype = layer_dtype(dtype)
        rng = np.random.default_rng(seed)
        bound = 1.0 / math.sqrt(self.hidden_size)
        H, D = self.hidden_size, self.input_size
        shapes = {"weight_ih_l0": (H, D), "weight_hh_l0": (H, H)}
        if self.bias:
            shapes.update({"bias_ih_l0": (H,), "bias_hh_l0": (H,)})
        self._params = {
            name: rng.uniform(-bound, bound, size=shape).astype(self.dtype)
            for name, shape in shapes.items()
        }
        self.grads = {name: np.zeros_like(p) for name, p in self._params.items()}
        self.training = True
        self._cache = None

    # ---- forward and backward ---------------------------------------------------------------

    def __call__(self, x, h0=None):
        return self.forward(x, h0)

    def forward(self, x, h0=None):
        """``y, h_n = layer(x, h0)``: x (T, B, D) (or (B, T, D) when batch_first), h0 and h_n
        (1, B, H). In training mode the inputs and outputs are kept for one backward, and y
        is returned read-only (copy it to modify it) so that the gradients stay exact."""
        x_user = x
        x = as_float_array("x", x, self.dtype)
        layout = "(B, T, D)" if self.batch_first else "(T, B, D)"
        if x.ndim != 3:
            raise ValueError(f"x: expected 3 dimensions {layout}, got shape {x.shape}")
        if x.shape[2] != self.input_size:
            raise ValueError(
                f"x: expected last dimension input_size={self.input_size} in {layout}, "
                f"got shape {x.shape}"
            )
        if self.batch_first:
            x = np.ascontiguousarray(x.swapaxes(0, 1))
        h0_2d = self._state_arg("h0", h0, x.shape[1])
        p = self._params
        y, h_n = functional.rnn_forward(
            x, p["weight_ih_l0"], p["weight_hh_l0"], p.get("bias_ih_l0"), p.get("bias_hh_l0"),
            h0_2d, self.nonlinearity,
        )
        if self.training:
            # backward reads x, h0 and y: keep copies of the caller's arrays, and hand out y
            # read-only, so a later in-place change cannot silently alter the gradients.
            if np.may_share_memory(x, x_user):
                x = x.copy()
            if h0_2d is not None and np.may_share_memory(h0_2d, h0):
                h0_2d = h0_2d.copy()
            self._cache = (x, h0_2d, y)
            y = y.view()
            y.flags.writeable = False
        else:
            self._cache = None
        return (y.swapaxes(0, 1) if self.batch_first else y), h_n[None]

    def backward(self, dy, dh_n=None):
        """Gradients of one training forward: returns ``dx, dh0`` shaped like ``x`` and ``h0``
        and adds the parameter gradients into ``self.grads``. ``dy`` or ``dh_n`` may be None."""
        if self._cache is None:
            raise RuntimeError(
                "backward: no training forward to differentiate; call the layer in training "
                "mode first (each forward allows one backward)"
            )
        x, h0_2d, y = self._cache
        if dy is not None:
            dy = as_float_array("dy", dy, self.dtype)
            expected = y.swapaxes(0, 1).shape if self.batch_first else y.shape
            if dy.shape != expected:
                raise ValueError(f"dy: expected shape {expected} (like y), got shape {dy.shape}")
            if self.batch_first:
                dy = np.ascontiguousarray(dy.swapaxes(0, 1))
        dh_n_2d = self._state_arg("dh_n", dh_n, x.shape[1])
        p = self._params
        g = functional.rnn_backward(
            x, p["weight_ih_l0"], p["weight_hh_l0"], y, dy, dh_n_2d, h0_2d, self.nonlinearity
        )
        self.grads["weight_ih_l0"] += g.dweight_ih
        self.grads["weight_hh_l0"] += g.dweight_hh
        if self.bias:
            self.grads["bias_ih_l0"] += g.dbias
            self.grads["bias_hh_l0"] += g.dbias
        self._cache = None
        dx = np.ascontiguousarray(g.dx.swapaxes(0, 1)) if self.batch_first else g.dx
        return dx, g.dh0[None]

    def _state_arg(self, name, value, batch):
        """A (num_layers*dirs, B, H) state argument as the (B, H) array the kernel takes."""
        if value is None:
            return None
        arr = as_float_array(name, value, self.dtype)
        expected = (self.num_layers, batch, self.hidden_size)
        if arr.shape != expected:
            raise ValueError(
                f"{name}: expected shape (num_layers*dirs, B, H) = {expected}, got shape {arr.shape}"
            )
        return arr[0]

    # ---- parameters -------------------------------------------------------------------------

    def parameters(self):
        """The live parameter arrays, in state_dict order (optimizers update them in place)."""
        return list(self._params.values())

    def named_parameters(self):
        return list(self._params.items())

    def zero_grad(self):
        for g in self.grads.values():
            g.fill(0)

    def state_dict(self):
        """Copies of the parameters under PyTorch's names."""
        return {name: p.copy() for name, p in self._params.items()}

    def load_state_dict(self, state_dict):
        """Load parameters from a mapping with PyTorch's keys (NumPy arrays, torch tensors or
        anything ``np.asarray`` takes). Checks every key and shape before changing anything."""
        if not hasattr(state_dict, "keys"):
            raise TypeError(f"state_dict: expected a mapping, got {type(state_dict).__name__}")
        missing = [k for k in self._params if k not in state_dict]
        extra = [k for k in state_dict if k not in self._params]
        if missing:
            raise ValueError(f"state_dict: missing key(s) {missing}")
        if extra:
            raise ValueError(f"state_dict: unexpected key(s) {extra}")
        loaded = {}
        for name, current in self._params.items():
            value = state_dict[name]
            if hasattr(value, "detach"):  # a torch tensor: no autograd, on the CPU
                value = value.detach().cpu().numpy()
            arr = np.asarray(value)
            if arr.dtype.kind not in "fiu":
                raise TypeError(f"{name}: expected a real numeric array, got dtype {arr.dtype}")
            if arr.shape != current.shape:
                raise ValueError(
                    f"{name}: expected shape {current.shape}, got shape {arr.shape}"
                )
            loaded[name] = np.array(arr, dtype=self.dtype)
        for name, arr in loaded.items():
            self._params[name][...] = arr

    # ---- modes and description ----------------------------------------------------------------

    def train(self, mode=True):
        self.training = bool(mode)
        if not self.training:
            self._cache = None
        return self

    def eval(self):
        return self.train(False)

    def num_parameters(self):
        return sum(p.size for p in self._params.values())

    def summary(self):
        """Print (and return) a Keras-style table of the layer, its output shape and parameters."""
        out = "(B, T, H)" if self.batch_first else "(T, B, H)"
        out = out.replace("H", str(self.hidden_size))
        rows = [("Layer (type)", "Output Shape", "Param #")]
        rows.append((f"rnn (RNN, {self.nonlinearity})", out, f"{self.num_parameters():,}"))
        widths = [max(len(r[i]) for r in rows) + 2 for i in range(3)]
        line = "-" * sum(widths)
        fmt = lambda r: "".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
        text = "\n".join(
            [line, fmt(rows[0]), "=" * sum(widths), fmt(rows[1]), line,
             f"Total params: {self.num_parameters():,}",
             "(PyTorch layout: bias_ih and bias_hh are two vectors; Keras has one)"
             if self.bias else "(no biases)"]
        )
        print(text)
        return text

    def __repr__(self):
        extra = "" if self.nonlinearity == "tanh" else f", nonlinearity={self.nonlinearity!r}"
        extra += "" if self.bias else ", bias=False"
        extra += ", batch_first=True" if self.batch_first else ""
        return f"RNN({self.input_size}, {self.hidden_size}{extra}, dtype={self.dtype.name})"
