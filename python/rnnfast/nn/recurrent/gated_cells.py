"""One-step gated cells, ``GRUCell`` and ``LSTMCell``, in the spirit of PyTorch's
``torch.nn.GRUCell`` / ``torch.nn.LSTMCell``: one step of the GRU / LSTM layers' cell on the
same kernels, for loops the user writes (decoders, attention, custom recurrences).

A forward in eval mode runs the streaming step kernel (``functional.gru_step`` /
``lstm_step``); in training mode it runs the sequence kernel over one step with its workspace
(``functional.gru_forward`` / ``lstm_forward``, ``keep_workspace=True``), so that
:meth:`backward` can run the fused backward over that step (the step kernel keeps nothing).
"""

from __future__ import annotations

import types

import numpy as np

from ... import functional
from ..._parameters import ParameterDict
from ..._validation import (
    as_float_array,
    check_bool,
    check_positive_int,
    describe,
)
from .._layer import Layer
from .._shapes import constructor_arguments, flag, size
from .cells import GRU_SPEC, LSTM_SPEC
from .gated import ACTIVATION, RECURRENT_ACTIVATION
from .rnn_options import fixed

__all__ = ["GRUCell", "LSTMCell"]

# the sequence kernels' mask options, as a cell's one step runs them (no masks); their
# backwards are told every forward option again
_NO_MASKS = {
    name: functional.PLAIN_GRU_OPTIONS[name]
    for name in ("step_mask", "zero_output_for_mask", "input_mask", "recurrent_mask")
}


class _GatedCell(Layer):
    """What GRUCell and LSTMCell share: parameters, options, input checks, forward and
    backward on the cell's kernels, interop."""

    spec = None  # the cell description (nn.recurrent.cells): parameter shapes, init, Keras's counts
    # the cell's kernels (functional.gru_* / lstm_*) and the options a sequence kernel's one
    # step is given at their plain values (no masks; the LSTM's no projection)
    _step_kernel = _forward_kernel = _backward_kernel = None
    _plain_options = None
    proj_size = 0  # no projection: the cell descriptions read it (R = H)
    # forward and backward are the cell's kernels: bf16 mixed precision reaches every product
    kernel_products = True

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if (
            "spec" in cls.__dict__
        ):  # the cell registry's one-step layer of its cell (nn.recurrent.cells)
            cls.spec.claim(cls, "cell_class")

    @classmethod
    def parameter_shapes(cls, config):
        """``{name: shape}`` of a cell built from ``config``, from its description
        (``nn.recurrent.cells``), without building it."""
        args = constructor_arguments(cls, config)
        shape = types.SimpleNamespace(
            hidden_size=size(args, "hidden_size"), proj_size=0, bias=flag(args, "bias", True)
        )
        return dict(cls.spec.parameter_shapes(shape, size(args, "input_size")))

    def _init_cell(self, input_size, hidden_size, bias, dtype, seed, activation, rec):
        super().__init__(dtype)
        self._input_size = check_positive_int("input_size", input_size)
        self._hidden_size = check_positive_int("hidden_size", hidden_size)
        self._bias = check_bool("bias", bias)
        self.seed = seed
        self.activation = activation
        self.recurrent_activation = rec
        shapes = self.spec.parameter_shapes(self, self._input_size)
        params = self.spec.initial_parameters(self, np.random.default_rng(seed), shapes)
        for name, value in params.items():
            self.add_parameter(name, value)
        # read-only, as the recurrent layers': its training forward keeps its packed weights
        # between calls (``rnnfast._parameters``)
        self._params = ParameterDict(self._params)

    input_size = fixed("input_size", "the parameters' shapes depend on it")
    hidden_size = fixed("hidden_size", "the parameters' shapes depend on it")
    bias = fixed("bias", "the parameters depend on it")
    activation, recurrent_activation = ACTIVATION, RECURRENT_ACTIVATION  # checked on assignment

    def __call__(self, x, *args, **kwargs):
        return self.forward(x, *args, **kwargs)

    # ---- inputs --------------------------------------------------------------------------------

    def _input(self, x):
        """``(x (B, D), unbatched)``: x checked (an unbatched (D,) as a batch of one)."""
        x = as_float_array("x", x, self.dtype)
        if x.ndim not in (1, 2) or x.shape[-1] != self._input_size:
            raise ValueError(
                f"x: expected shape (B, input_size) = (B, {self._input_size}), or "
                f"(input_size,) = ({self._input_size},) unbatched, got shape {x.shape}"
            )
        return (x[None], True) if x.ndim == 1 else (x, False)

    def _state(self, name, value, batch, unbatched):
        """A state (h or c) checked: (B, H) ((H,) with unbatched x), zeros for None."""
        H = self._hidden_size
        if value is None:
            return np.zeros((batch, H), dtype=self.dtype)
        arr = as_float_array(name, value, self.dtype)
        expected = (H,) if unbatched else (batch, H)
        if arr.shape != expected:
            form = "(hidden_size,) for an unbatched x" if unbatched else "(B, hidden_size)"
            raise ValueError(f"{name}: expected shape {form} = {expected}, got shape {arr.shape}")
        return arr[None] if unbatched else arr

    def _gradient(self, name, value, shape, unbatched):
        """A gradient of an output, checked like it (zeros for None)."""
        if value is None:
            return np.zeros(shape, dtype=self.dtype)
        arr = as_float_array(name, value, self.dtype)
        expected = shape[1:] if unbatched else shape
        if arr.shape != expected:
            raise ValueError(
                f"{name}: expected shape {expected} (like the output), got shape {arr.shape}"
            )
        return arr.reshape(shape)

    @staticmethod
    def _kept(arr, user):
        """``arr`` as the backward may keep it: a copy when it is the caller's writeable array
        (which the caller may reuse meanwhile)."""
        user = np.asarray(user) if user is not None else None
        if user is not None and user.flags.writeable and np.may_share_memory(arr, user):
            return arr.copy()
        return arr

    def _options(self):
        """The kernels' keyword options: the cell's (GRUCell adds ``reset_after``)."""
        return {
            "activation": self._activation,
            "recurrent_activation": self._recurrent_activation,
        }

    def _weights(self):
        p = self._params
        return p["weight_ih"], p["weight_hh"], p.get("bias_ih"), p.get("bias_hh")

    def _add_gradients(self, g):
        self.grads["weight_ih"] += g.dweight_ih
        self.grads["weight_hh"] += g.dweight_hh
        if self._bias:
            self.grads["bias_ih"] += g.dbias_ih
            self.grads["bias_hh"] += g.dbias_hh

    # ---- forward and backward, on the cell's kernels -------------------------------------------

    def _forward(self, x, states, names):
        """A forward from the caller's ``states`` (h, or h and c; each None for zeros; checked
        under ``names``): the new states as a tuple (without the batch axis for an unbatched
        x). In training mode it keeps what :meth:`_backward` reads."""
        x_user = x
        x, unbatched = self._input(x)
        given = states
        states = tuple(self._state(name, s, x.shape[0], unbatched) for name, s in zip(names, given))
        if not self.training:
            new = self._step_kernel(x, *states, *self._weights(), **self._options())
            new = new if isinstance(new, tuple) else (new,)
            self._cache = None
        else:
            out = self._forward_kernel(
                x[None],
                *self._weights(),
                *states,
                **self._options(),
                **self._plain_options,
                keep_workspace=True,
                weight_cache=self._weight_cache(0, 0),
            )
            kept = tuple(self._kept(s, user) for s, user in zip(states, given))
            self._cache = (self._kept(x, x_user), kept, out.y, out.workspace, unbatched)
            h_next = out.h_n if not np.may_share_memory(out.h_n, out.y) else out.h_n.copy()
            new = (h_next, out.c_n)[: len(states)]
        return tuple(s[0] for s in new) if unbatched else new

    def _backward(self, d_next, names):
        """The backward of a training forward from the gradients ``d_next`` of its new states
        (each None for zeros; checked under ``names``): ``(dx, (the gradient of each state,
        ...))``, shaped like x and the states. The parameters' gradients are added into
        ``grads``; a failed check keeps the forward for a retry."""
        cache = self._take_cache()
        x, states, y, workspace, unbatched = cache
        try:
            d = [
                self._gradient(name, g, s.shape, unbatched)
                for name, g, s in zip(names, d_next, states)
            ]
        except (TypeError, ValueError):
            self._cache = cache
            raise
        g = self._backward_kernel(
            x[None],
            *self._weights(),
            y,
            workspace,
            None,
            *d,
            **dict(zip(("h0", "c0"), states)),
            lengths=None,
            **self._options(),
            **self._plain_options,
            weight_cache=self._weight_cache(0, 0),
        )
        self._add_gradients(g)
        dx, d0 = g.dx[0], g[1 : 1 + len(states)]  # GRUGrads' dh0, LSTMGrads' dh0 and dc0
        if unbatched:
            return dx[0], tuple(d[0] for d in d0)
        return dx, tuple(d0)

    # ---- the layer protocol --------------------------------------------------------------------

    def _common_config(self):
        return {
            "input_size": self._input_size,
            "hidden_size": self._hidden_size,
            "bias": self._bias,
            "dtype": self.dtype.name,
            "seed": self.seed if self.seed is None else int(self.seed),
            "activation": self._activation,
            "recurrent_activation": self._recurrent_activation,
        }

    def keras_param_count(self):
        """Keras's count (``keras.layers.GRUCell`` / ``LSTMCell``): see ``nn.recurrent.cells``."""
        return self.spec.keras_count(self, self._params)

    def __repr__(self):
        options = [f"bias={self._bias}"] if not self._bias else []
        for name, default in self._defaults.items():
            if getattr(self, name) != default:
                options.append(f"{name}={getattr(self, name)!r}")
        args = ", ".join([str(self._input_size), str(self._hidden_size), *options])
        return f"{type(self).__name__}({args})"

    # ---- PyTorch -------------------------------------------------------------------------------

    @classmethod
    def from_torch(cls, module):
        """A cell with the configuration and a copy of the weights of a ``torch.nn.GRUCell``
        (``torch.nn.LSTMCell``); float32 or float64, training mode as the module's."""
        import torch

        name = cls.spec.torch_name + "Cell"
        if not isinstance(module, getattr(torch.nn, name)):
            raise TypeError(
                f"module: expected a torch.nn.{name} (for rnnfast.{cls.__name__}), got "
                f"{type(module).__name__}"
            )
        dtypes = {p.dtype for p in module.parameters()}
        if len(dtypes) != 1 or next(iter(dtypes)) not in (torch.float32, torch.float64):
            raise TypeError(
                f"module: expected float32 or float64 parameters, got {sorted(map(str, dtypes))}"
            )
        dtype = np.float32 if next(iter(dtypes)) == torch.float32 else np.float64
        cell = cls(module.input_size, module.hidden_size, bias=module.bias, dtype=dtype)
        cell.load_state_dict(module.state_dict())
        cell.train(module.training)
        return cell

    def to_torch(self):
        """A ``torch.nn.GRUCell`` (``LSTMCell``) on the CPU with this cell's configuration and
        a copy of its weights; ValueError for what torch's cell has no equivalent of
        (``reset_after=False``, activations other than tanh and sigmoid)."""
        import torch

        from .rnn_torch import _torch_incompatibilities

        name = self.spec.torch_name + "Cell"
        problems = _torch_incompatibilities(self)
        if problems:
            raise ValueError(f"cell: torch.nn.{name} has no equivalent of {', '.join(problems)}")
        module = getattr(torch.nn, name)(self._input_size, self._hidden_size, bias=self._bias)
        if self.dtype == np.float64:
            module = module.double()
        state = {k: torch.from_numpy(v.copy()) for k, v in self._params.items()}
        with torch.no_grad():
            module.load_state_dict(state)
        module.train(self.training)
        return module


class GRUCell(_GatedCell):
    """One GRU step, as ``torch.nn.GRUCell`` (and Keras's ``GRUCell`` options), on NumPy
    arrays::

        r = ra(W_ir x + b_ir + W_hr h + b_hr)      z = ra(W_iz x + b_iz + W_hz h + b_hz)
        n = act(W_in x + b_in + r * (W_hn h + b_hn))      h' = (1 - z) * n + z * h

    (``reset_after=False``: ``n = act(W_in x + b_in + W_hn (r * h) + b_hn)``).

    Parameters
    ----------
    input_size, hidden_size : int
        D and H.
    bias : bool
        With ``bias_ih`` and ``bias_hh``.
    dtype : float32 or float64
    seed : int, optional
        The initialisation's: PyTorch's, U(-1/sqrt(H), 1/sqrt(H)) for every parameter.
    reset_after : bool
        True (PyTorch's, Keras 3's default) or Keras's older form; fixed at construction.
    activation, recurrent_activation : str
        "tanh" or "relu"; "sigmoid" or "hard_sigmoid" (Keras 3's).

    Parameters of the cell (PyTorch's names): ``weight_ih`` (3H, D) and ``weight_hh`` (3H, H),
    gates r, z, n in that order, ``bias_ih`` and ``bias_hh`` (3H,).

    ``cell(x, h=None)``: x (B, D), or (D,) unbatched; h (B, H) or (H,), None for zeros.
    Returns h' (B, H) (or (H,)). After a call in training mode, ``backward(dh_next)`` returns
    ``(dx, dh)`` and adds the parameters' gradients into ``grads``.
    """

    spec = GRU_SPEC
    call_arguments = ("h",)
    _step_kernel = staticmethod(functional.gru_step)
    _forward_kernel = staticmethod(functional.gru_forward)
    _backward_kernel = staticmethod(functional.gru_backward)
    _plain_options = _NO_MASKS
    reset_after = fixed("reset_after", "it chooses the cell's equations")
    _defaults = {"reset_after": True, "activation": "tanh", "recurrent_activation": "sigmoid"}

    def __init__(
        self,
        input_size,
        hidden_size,
        bias=True,
        dtype=np.float32,
        seed=None,
        *,
        reset_after=True,
        activation="tanh",
        recurrent_activation="sigmoid",
    ):
        self._reset_after = check_bool("reset_after", reset_after)
        self._init_cell(
            input_size, hidden_size, bias, dtype, seed, activation, recurrent_activation
        )

    def _options(self):
        return {"reset_after": self._reset_after, **super()._options()}

    def forward(self, x, h=None):
        """h' (B, H), or (H,) for an unbatched x (D,); see the class."""
        (h_next,) = self._forward(x, (h,), ("h",))
        return h_next

    def backward(self, dh_next):
        """Gradients of a training forward: ``(dx, dh)`` (shaped like x and h) from ``dh_next``
        (the gradient of h'; None for zeros); the parameters' gradients are added into
        ``grads``. One backward per forward."""
        dx, (dh,) = self._backward((dh_next,), ("dh_next",))
        return dx, dh

    def get_config(self):
        """The constructor arguments: ``GRUCell(**cell.get_config())`` builds the same cell
        (fresh parameters). JSON-serialisable."""
        return {**self._common_config(), "reset_after": self._reset_after}

    def output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self._hidden_size,)


class LSTMCell(_GatedCell):
    """One LSTM step, as ``torch.nn.LSTMCell`` (and Keras's ``LSTMCell`` options), on NumPy
    arrays::

        i, f, o = ra(W_* x + b_i* + W_h* h + b_h*)     g = act(...)
        c' = f * c + i * g      h' = o * act(c')

    Parameters as :class:`GRUCell` (without ``reset_after``), and ``unit_forget_bias``
    (Keras's: the forget block of ``bias_ih`` starts at 1, that of ``bias_hh`` at 0). Its
    parameters: ``weight_ih`` (4H, D), ``weight_hh`` (4H, H), gates i, f, g, o in that order,
    ``bias_ih`` and ``bias_hh`` (4H,).

    ``cell(x, state=None)``: x (B, D) or (D,); ``state`` the pair ``(h, c)`` ((B, H) each, or
    (H,)), None (or either of them None) for zeros. Returns ``(h', c')``. After a call in
    training mode, ``backward(dh_next, dc_next=None)`` returns ``(dx, (dh, dc))`` and adds the
    parameters' gradients into ``grads``.
    """

    spec = LSTM_SPEC
    call_arguments = ("state",)
    _step_kernel = staticmethod(functional.lstm_step)
    _forward_kernel = staticmethod(functional.lstm_forward)
    _backward_kernel = staticmethod(functional.lstm_backward)
    _plain_options = {**_NO_MASKS, "weight_hr": None}  # no projection: R = H
    unit_forget_bias = fixed("unit_forget_bias", "it set the initial forget-gate bias")
    _defaults = {"activation": "tanh", "recurrent_activation": "sigmoid"}

    def __init__(
        self,
        input_size,
        hidden_size,
        bias=True,
        dtype=np.float32,
        seed=None,
        *,
        unit_forget_bias=False,
        activation="tanh",
        recurrent_activation="sigmoid",
    ):
        self._unit_forget_bias = check_bool("unit_forget_bias", unit_forget_bias)
        self._init_cell(
            input_size, hidden_size, bias, dtype, seed, activation, recurrent_activation
        )

    def forward(self, x, state=None):
        """``(h', c')``, each (B, H), or (H,) for an unbatched x (D,); see the class."""
        if state is None:
            state = (None, None)
        if not isinstance(state, (tuple, list)) or len(state) != 2:
            raise TypeError(
                f"state: expected the pair (h, c) of an LSTM cell's states (either may be "
                f"None), got {describe(state)}"
            )
        return self._forward(x, tuple(state), ("state[0]", "state[1]"))

    def backward(self, dh_next, dc_next=None):
        """Gradients of a training forward: ``(dx, (dh, dc))`` (shaped like x, h and c) from
        the gradients of h' and c' (either None for zeros); the parameters' gradients are added
        into ``grads``. One backward per forward."""
        return self._backward((dh_next, dc_next), ("dh_next", "dc_next"))

    def get_config(self):
        """The constructor arguments: ``LSTMCell(**cell.get_config())`` builds the same cell
        (fresh parameters). JSON-serialisable."""
        return {**self._common_config(), "unit_forget_bias": self._unit_forget_bias}
