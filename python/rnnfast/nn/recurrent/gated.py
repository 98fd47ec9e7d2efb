"""The gated recurrent layers ``GRU`` and ``LSTM``: the recurrent layer machinery of ``nn.recurrent.rnn``
(API forms, lengths, stacking, directions, stateful layers, token input; ``nn.recurrent.stack``'s runner)
on the gated cells of ``nn.recurrent.cells``, with PyTorch's constructors, parameter names and gate
orders and Keras's options.

What the gated kernels do not run is refused by name, never ignored: leaky units (``alpha``,
Elman-only by design). ``recurrent_dropout`` is Keras 3's: one mask per gate on h_{t-1}, inside
the kernels. ``dilation`` is the Elman layer's (nn.recurrent.dilation: d interleaved chains on the same
kernels; stateful layers and ``step`` carry rings, nn.recurrent.rnn_rings); the LSTM's ring state is the
pair (h, c) of ring lists.
"""

from __future__ import annotations

import numpy as np

from ..._validation import (
    as_float_array,
    check_bool,
    check_choice,
    check_int,
    check_positive_int,
    describe,
    is_real,
)
from .._mixed_precision import step_products
from . import dilation as dil
from . import rnn_rings, rnn_streaming
from .cells import GRU_SPEC, LAYER_NORM_LSTM_SPEC, LSTM_SPEC
from .rnn import RecurrentLayer
from .rnn_options import fixed, option, unbinding

__all__ = ["GRU", "LSTM", "LayerNormLSTM"]

ACTIVATIONS = ("tanh", "relu")
RECURRENT_ACTIVATIONS = ("sigmoid", "hard_sigmoid")
# the activations as the ONNX GRU / LSTM ops name them, with (alpha, beta) where they take them
_ONNX_ACTIVATIONS = {
    "tanh": ("Tanh",),
    "relu": ("Relu",),
    "sigmoid": ("Sigmoid",),
    "hard_sigmoid": ("HardSigmoid", 1.0 / 6.0, 0.5),
}


def _unsupported(layer_name, option, value, why):
    return ValueError(f"{option}={value!r}: not supported for {layer_name} ({why})")


def _check_activation(layer, name, value):
    return check_choice(name, value, ACTIVATIONS)


def _check_recurrent_activation(layer, name, value):
    return check_choice(name, value, RECURRENT_ACTIVATIONS)


# the gated cells' activations, checked on assignment: properties of the gated layers and of
# their one-step cells (nn.recurrent.gated_cells)
ACTIVATION = option(
    "activation",
    unbinding(_check_activation),
    """The cell's activation (Keras's ``activation``): "tanh" (PyTorch's) or "relu".""",
)
RECURRENT_ACTIVATION = option(
    "recurrent_activation",
    unbinding(_check_recurrent_activation),
    """The gates' activation (Keras's ``recurrent_activation``): "sigmoid" (PyTorch's) or
    "hard_sigmoid" (Keras 3's: clip(x / 6 + 0.5, 0, 1)).""",
)


_KERAS_NOOPS = (
    ("unroll", False),
    ("use_cudnn", "auto"),
    ("implementation", 2),
    ("time_major", False),
)


class _GatedLayer(RecurrentLayer):
    """What GRU and LSTM share: their options (``activation``, ``recurrent_activation``; the
    Elman layer's refused but at the value that changes nothing), construction, step(),
    configuration."""

    activation, recurrent_activation = ACTIVATION, RECURRENT_ACTIVATION

    @property
    def nonlinearity(self):
        raise AttributeError(
            f"{type(self).__name__} has no nonlinearity (the Elman layer's); its options are "
            "activation and recurrent_activation"
        )

    @nonlinearity.setter
    def nonlinearity(self, value):
        raise AttributeError(
            f"{type(self).__name__} has no nonlinearity (the Elman layer's); set activation "
            "(tanh or relu) or recurrent_activation (sigmoid or hard_sigmoid) instead"
        )

    # ---- the Elman layer's options, refused but at their neutral values --------------------

    @property
    def alpha(self):
        """Always 1.0: leaky units are the Elman layer's (``rnnfast.RNN``)."""
        return 1.0

    @alpha.setter
    def alpha(self, value):
        values = value if isinstance(value, (list, tuple)) else [value]
        if not all(is_real(a) and float(a) == 1.0 for a in values):
            raise _unsupported(
                type(self).__name__,
                "alpha",
                value,
                "leaky units are Elman-only by design; use rnnfast.RNN(alpha=...)",
            )
        self._alpha, self._alphas = 1.0, [1.0] * self.num_layers

    # the constructor's declaration (nn.recurrent.rnn_options): the options both gated cells have, and
    # Keras's scheduling options, accepted and ignored (repr and get_config leave them out)
    _cell_options_declared = (("activation", "tanh"), ("recurrent_activation", "sigmoid"))
    _ignored_options = _KERAS_NOOPS

    def _init_cell(self, a):
        """The Keras options checked (``unroll``, ``time_major``: the others are how Keras
        schedules the same arithmetic, nothing here to change) and the Elman cell's
        nonlinearity absent (``nn.recurrent.stack``'s Run carries it)."""
        self._nonlinearity = None
        check_bool("unroll", a["unroll"])
        check_bool("time_major", a["time_major"])
        if a["time_major"]:
            raise ValueError(
                f"time_major=True: not supported for {type(self).__name__} (Keras 2's layout "
                "option); rnnfast's is batch_first: time-major is batch_first=False"
            )

    # ---- masks ---------------------------------------------------------------------------------

    # ---- streaming -----------------------------------------------------------------------------

    @step_products
    def step(self, x_t, state=None):
        """One time step for streaming inference: ``out_t, state_next = layer.step(x_t,
        state)``.

        x_t (B, input_size); the state as a forward's h0 with num_layers rows: the GRU's h
        (num_layers, B, H), the LSTM's ``(h, c)`` ((num_layers, B, R), (num_layers, B, H));
        None for zeros or a stateful layer's carried state. out_t (B, R) is the last layer's
        output (plus its input with ``residual``; every layer's with ``all_to_output``).
        Unbatched, as torch: x_t (input_size,) with states without the batch axis. No
        dropout, nothing kept for backward; unidirectional layers only. A stateful layer
        carries state_next to its next call.

        A dilated layer (``dilation``) reads h_{t-d}: its state is the ring form, one ring
        (d_k, B, ·) per layer (``ring[-1]`` the newest; the GRU's a list of them, the LSTM's the
        pair (h, c) of such lists), and state_next is in that form; a plain state starts every
        chain from it, as a forward's h0. Steps over a sequence then give the forward's
        outputs.

        The fastest form is the Elman layer's (``RNN.step``): one undilated layer, not stateful,
        x_t a C-contiguous array of the layer's dtype and the state as the last step returned it.
        """
        bound = (
            self._stepper
        )  # the hot path: one call into the kernels (nn.recurrent.rnn_streaming)
        if bound is None:
            bound = self._stepper = rnn_streaming.bind_step(self)
        out = bound(x_t, state)
        if out is not None:
            return out
        if self._bidirectional:
            raise ValueError(
                "step: a bidirectional layer needs the whole sequence (its reverse direction "
                "starts at the end); use a forward call"
            )
        fast = self._step_fast(x_t, state)
        if fast is not None:
            return fast
        x = as_float_array("x_t", x_t, self._dtype)
        unbatched = x.ndim == 1
        if self._is_dilated():
            return rnn_streaming.step_dilated(self, x, state, unbatched, name="state")
        if unbatched:
            x = x[None]
        if x.ndim != 2 or x.shape[1] != self._input_size:
            raise ValueError(
                f"x_t: expected shape (B, input_size) = (B, {self._input_size}), or "
                f"(input_size,) unbatched, got shape {x.shape}"
            )
        batch = x.shape[0]
        if state is None and self._stateful and self._state is not None:
            s = self._state
            if s.shape[1] != batch:
                raise ValueError(
                    f"x_t: a stateful layer carries a state for a batch of {s.shape[1]}, got a "
                    f"batch of {batch} (call reset_state() to start over)"
                )
        elif state is None:
            S = self.cell.state_width(self)
            s = np.zeros((self._num_layers, batch, S), dtype=self._dtype)
        else:
            s = self._state_input("state", state, batch, unbatched)
        out, new = self._step_layers(x, s)
        s_next = np.stack(new)
        if self._stateful:
            self._state = s_next
        out = np.ascontiguousarray(out)
        if unbatched:
            out, s_next = out[0], s_next[:, 0]
        return out, self._state_output(s_next)

    def _step_fast(self, x_t, state):
        """step()'s path where the bound step declines (a stateful layer, a quantized copy):
        one undilated layer, x_t a (B, input_size) array of the layer's dtype, the state None
        (zeros, or a stateful layer's carry) or in the API's form and dtype. One kernel call on
        the states as they are (the cell's ``fast_step``: the kernel checks every shape), none
        of the general path's joins. None where it does not apply or the kernel refuses its
        arguments: the general path then runs, and raises the precise error."""
        if (
            self._num_layers != 1
            or self._dilations != (1,)
            or type(x_t) is not np.ndarray
            or x_t.ndim != 2
            or x_t.dtype is not self._dtype
        ):
            return None
        states = self._fast_states(state, x_t.shape[0])
        if states is None:
            return None
        try:
            new = self.cell.fast_step(self, x_t, states)
        except (TypeError, ValueError):
            return None
        if len(new) == 1:
            h = new[0]
            if self._stateful:
                self._state = h[None]
            return h, h[None]
        h, c = new
        if self._stateful:
            self._state = np.concatenate(new, axis=-1)[None]
        return h, (h[None], c[None])

    def _fast_states(self, state, batch):
        """The step's states as its kernel takes them (the tuple of (B, ·) arrays), or None
        where the hot path does not apply."""
        if state is None:
            joined = self._state if self._stateful else None
            if joined is None:
                joined = self._zero_state  # never handed out, so never written: reused
                if joined is None or joined.shape[1] != batch:
                    S = self.cell.state_width(self)
                    joined = self._zero_state = np.zeros((1, batch, S), dtype=self._dtype)
            if type(joined) is not np.ndarray or joined.shape[1] != batch:
                return None  # a ring, or another batch: the general path says so
            parts = self.cell.split_state(self, joined[0])
            parts = (parts,) if self.cell.num_states == 1 else parts
            return tuple(np.ascontiguousarray(p) for p in parts)
        if self.cell.num_states == 1:
            parts = (state,)
        elif type(state) is tuple and len(state) == 2:
            parts = state
        else:
            return None
        for p in parts:
            if type(p) is not np.ndarray or p.dtype is not self._dtype or p.ndim != 3:
                return None
            if p.shape[0] != 1 or p.shape[1] != batch or not p.flags.c_contiguous:
                return None
        return (parts[0][0],) if len(parts) == 1 else (parts[0][0], parts[1][0])

    def _step_layers(self, x_t, previous):
        """One step of every layer on the cell's step kernel (``nn.recurrent.cells``), layer k from its
        joined state ``previous[k]`` (B, S) (the one its recurrence reads: h_{t-d} of a
        dilated layer): ``(out_t (B, R), [the new state (B, S) of each layer])``."""
        options = self._cell_options()
        R = self.cell.output_width(self)
        inp, states, outputs = x_t, [], []
        for k in range(self._num_layers):
            if self._input_to_all and k > 0:
                inp = np.concatenate([x_t, inp], axis=1)
            s_k = self.cell.step(self, options, k, inp, previous[k])
            states.append(s_k)
            h_k = s_k[:, :R]
            inp = h_k + inp if (self._residual and k > 0) else h_k
            outputs.append(inp)
        return rnn_streaming.stack_step_output(self, inp, outputs), states

    def _cell_options(self):
        """The cell kernels' keyword options (GRU adds ``reset_after``)."""
        return {
            "activation": self._activation,
            "recurrent_activation": self._recurrent_activation,
        }

    def reset_states(self):
        """Keras's name of :meth:`reset_state`."""
        self.reset_state()

    # ---- ONNX (rnnfast.io.onnx asks these; nn does not import io) ----------------------------

    def onnx_input(self):
        """ONNX export: as a model's first layer it reads float sequences of this width."""
        return self.input_size

    def onnx_state_shape(self):
        """ONNX export: a standalone layer's graph input h0 (and the LSTM's c0) without its
        batch axis. A layer with a state over time reads the lengths, and its batch_first is
        the graph's layout."""
        return (self.num_layers * self.num_directions, self.hidden_size)

    def onnx_check(self, who):
        """ONNX export: ValueError for what the ONNX op cannot compute (dilation, the LSTM's
        projection) or an inference graph cannot hold (dropout masks in training mode)."""
        op = self.cell.onnx_op
        if getattr(self, "proj_size", 0):
            raise ValueError(
                f"{who}: proj_size={self.proj_size}: the ONNX {op} op has no projection of h "
                "(PyTorch's proj_size has no ONNX op); export an LSTM without proj_size"
            )
        self._onnx_step_checks(who)

    def onnx_activations(self):
        """ONNX export: ``(activations, alphas, betas)`` of one direction in the op's order
        (the gates' function f first, then the cell's: the GRU's g, the LSTM's g and h) with
        the parameters of those that take them (HardSigmoid: Keras 3's hard_sigmoid is
        clip(x / 6 + 0.5, 0, 1), alpha 1/6 and beta 0.5), in the order they are consumed."""
        gates = _ONNX_ACTIVATIONS[self.recurrent_activation]
        cell = _ONNX_ACTIVATIONS[self.activation]
        names = [gates[0]] + [cell[0]] * (self.cell.num_states)
        alphas, betas = [], []
        for _name, *params in [gates] + [cell] * self.cell.num_states:
            if params:
                alphas.append(params[0])
                betas.append(params[1])
        return names, alphas, betas

    def onnx_weights(self, params):
        """ONNX export: ``(W, R, B)`` of the ONNX op per (layer, direction), in PyTorch's
        order l * dirs + d, from ``params`` (this layer's names): the gate blocks reordered
        from PyTorch's order to ONNX's (the cell's ``gate_permutation``), B the concatenation
        ``[Wb, Rb]`` (None without bias)."""
        perm = list(self.cell.gate_permutation("torch", "onnx"))

        def reorder(a):
            G = self.cell.num_gates
            return np.ascontiguousarray(a.reshape((G, -1) + a.shape[1:])[perm].reshape(a.shape))

        return [
            (
                reorder(params[w]),
                reorder(params[r]),
                None if bi is None else np.concatenate([reorder(params[bi]), reorder(params[bh])]),
            )
            for w, r, bi, bh in self._names
        ]

    def load_onnx_weights(self, weights):
        """ONNX load: the inverse of :meth:`onnx_weights`, loaded as a state dict."""
        G, H = self.cell.num_gates, self.hidden_size
        perm = list(self.cell.gate_permutation("onnx", "torch"))

        def reorder(a):
            return np.ascontiguousarray(a.reshape((G, -1) + a.shape[1:])[perm].reshape(a.shape))

        state = self.state_dict()  # parameters ONNX gives apart (the LSTM's P) stay
        for (w, r, bi, bh), (W, R, B) in zip(self._names, weights):
            state[w], state[r] = reorder(W), reorder(R)
            if bi is not None:
                state[bi], state[bh] = reorder(B[: G * H]), reorder(B[G * H :])
        self.load_state_dict(state)

    def onnx_attributes(self):
        """ONNX export: the op's own attributes (the GRU's ``linear_before_reset``)."""
        return {}

    def onnx_peepholes(self, params):
        """ONNX export: the LSTM op's P per (layer, direction), or None (none here)."""
        return None

    def onnx_emit(self, exporter, flow, who):
        """ONNX export: one ``GRU`` / ``LSTM`` node per stacked layer; the exporter writes the
        stack, the lengths, the initial states and the API forms around them."""
        names, alphas, betas = self.onnx_activations()
        return exporter.recurrent(
            self,
            flow,
            who,
            op=self.cell.onnx_op,
            activations=names,
            weights=self.onnx_weights(exporter.float_params(self)),
            label=f"{type(self).__name__}(input_size={self.input_size})",
            num_states=self.cell.num_states,
            attributes=self.onnx_attributes(),
            peepholes=self.onnx_peepholes(exporter.float_params(self)),
            activation_alpha=alphas,
            activation_beta=betas,
        )

    # ---- configuration -------------------------------------------------------------------------

    def _common_config(self):
        return {
            **super()._common_config(),
            "activation": self.activation,
            "recurrent_activation": self.recurrent_activation,
        }


class GRU(_GatedLayer):
    """GRU layer with PyTorch's ``torch.nn.GRU`` interface (and Keras's options), on NumPy
    arrays.

    PyTorch's equations (gates r, z, n in that order in ``weight_ih_l{k}`` (3H, D_k),
    ``weight_hh_l{k}`` (3H, H), ``bias_ih_l{k}``, ``bias_hh_l{k}`` (3H,))::

        r = ra(W_ir x + b_ir + W_hr h + b_hr)      z = ra(W_iz x + b_iz + W_hz h + b_hz)
        n = act(W_in x + b_in + r * (W_hn h + b_hn))      h' = (1 - z) * n + z * h

    with ``reset_after=False`` (Keras's other form) ``n = act(W_in x + b_in + W_hn (r * h) +
    b_hn)``. ``act`` is ``activation`` (tanh or relu), ``ra`` ``recurrent_activation``
    (sigmoid or hard_sigmoid).

    Parameters
    ----------
    input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, dtype, seed
        As :class:`rnnfast.RNN` (PyTorch's); the initialisation is PyTorch's,
        U(-1/sqrt(H), 1/sqrt(H)) for every parameter.
    reset_after : bool
        True (PyTorch's, Keras 3's default, ONNX's linear_before_reset=1): the reset gate
        multiplies the recurrent product; False: Keras's older form. Fixed at construction.
    activation, recurrent_activation : str
        Keras's: "tanh" or "relu"; "sigmoid" or "hard_sigmoid".
    residual, merge_mode, go_backwards, return_sequences, return_state, stateful,
    input_dropout, zero_output_for_mask
        As :class:`rnnfast.RNN`.
    recurrent_dropout : float in [0, 1]
        Keras 3's for gated cells: in training, one mask per gate on h_{t-1} (each gate's
        recurrent product reads its own masked copy; the carried state and c are not masked),
        drawn once per call and shared by every step.
    dilation : int >= 1, or a list of one per layer
        As :class:`rnnfast.RNN`: ``h_t`` reads ``h_{t-d}``, run as d interleaved chains on
        the same kernels (the dropout masks drawn per sequence, every chain of it reading
        them). Its state (``h0``, ``step``'s, a stateful layer's carry) may be one ring
        (d_k, B, H) per layer and direction, a list: ``ring[j]`` is the state chain j starts
        from (``ring[-1]`` the newest); backward's dh0 is then such a list too.
    input_to_all, all_to_output : bool
        Dense skips, as :class:`rnnfast.RNN`: every layer k > 0 also reads the stack's input
        (``weight_ih_l{k}`` (G*H, input_size + R*dirs)); the output is every layer's output
        concatenated (num_layers * R * dirs wide).
    alpha
        The Elman layer's leaky units: only 1.0 (which changes nothing) is accepted; anything
        else is a ValueError naming the option.
    unroll, use_cudnn, implementation, time_major
        Keras's scheduling options: accepted and ignored (``time_major=True`` is refused:
        use ``batch_first``).

    Calls, returns and backward are those of :class:`rnnfast.RNN`: ``layer(x, h0=None,
    lengths=None, mask=None)`` gives ``(y, h_n)`` (PyTorch's) or Keras's forms; ``mask`` is
    Keras's (B, T) mask, general as the Elman layer's. ``step(x_t, h)`` streams one step.
    """

    cell = GRU_SPEC
    reset_after = fixed("reset_after", "it chooses the cell's equations")
    _cell_options_declared = (("reset_after", True), *_GatedLayer._cell_options_declared)
    _fixed_options = ("reset_after",)

    def _init_cell(self, a):
        self._reset_after = check_bool("reset_after", a["reset_after"])
        super()._init_cell(a)

    def _cell_options(self):
        return {"reset_after": self._reset_after, **super()._cell_options()}

    def onnx_attributes(self):
        """ONNX export: ``linear_before_reset`` 1 for PyTorch's form (reset_after=True), 0 for
        Keras's other one."""
        return {"linear_before_reset": int(self._reset_after)}

    def get_config(self):
        """The constructor arguments: ``GRU(**layer.get_config())`` builds the same
        architecture (fresh parameters). JSON-serialisable."""
        return {**self._common_config(), "reset_after": self.reset_after}


class LSTM(_GatedLayer):
    """LSTM layer with PyTorch's ``torch.nn.LSTM`` interface (and Keras's options), on NumPy
    arrays.

    PyTorch's equations (gates i, f, g, o in that order in ``weight_ih_l{k}`` (4H, D_k),
    ``weight_hh_l{k}`` (4H, R), the biases (4H,))::

        i, f, o = ra(W_* x + b_i* + W_h* h + b_h*)     g = act(...)
        c' = f * c + i * g      h' = o * act(c')    (h' = W_hr (o * act(c')) with proj_size)

    Parameters
    ----------
    proj_size : int >= 0
        PyTorch's projection: h is ``weight_hr_l{k}`` (P, H) times the cell output, R = P
        wide (0: none, R = H). Must be < hidden_size.
    unit_forget_bias : bool
        Keras's: the forget block of ``bias_ih`` starts at 1 and that of ``bias_hh`` at 0.
    peepholes : bool
        ONNX's peepholes (the LSTM op's input P): the gates i and f also read ``p * c_{t-1}``,
        and o reads ``p_o * c_t``; each (layer, direction) gets ``weight_peephole_l{k}``
        (3H,) = [p_i | p_f | p_o] (PyTorch's gate order; ONNX's P is [p_i | p_o | p_f]),
        starting at zeros (ONNX's default P: the plain LSTM's equations until trained).
    input_forget : bool
        ONNX's ``input_forget=1``, coupled gates as onnxruntime computes them: f = 1 - i (the
        forget gate's weights, biases and peephole then receive no gradient).
    cell_clip : float > 0 or None
        ONNX's ``clip``: every gate's pre-activation (peephole terms included) is clipped to
        [-cell_clip, cell_clip] before its function (act's input c_t is not); its derivative is
        zero outside the range.
    peepholes, input_forget and cell_clip are fixed at construction and run on kernels of
    their own (``functional.lstm_form_*``); they do not combine with ``proj_size``, and such a
    layer has no quantized copy and no PyTorch counterpart (``torch.nn.LSTM`` has none of them).
    Everything else as :class:`GRU` (without ``reset_after``).

    ``layer(x, h0=None, ...)`` takes h0 as the pair ``(h0, c0)`` ((num_layers*dirs, B, R) and
    (num_layers*dirs, B, H); either may be None for zeros) and returns ``(y, (h_n, c_n))``
    (PyTorch's); Keras's forms with ``return_state`` are ``(output, h_n, c_n)`` (with
    ``merge_mode=None``: ``[forward, backward, h_n, c_n]``). ``backward(d_output, dh_n)``
    takes ``(dh_n, dc_n)`` (either None) and returns ``(dx, (dh0, dc0))``. ``step(x_t, (h,
    c))`` returns ``(out_t, (h, c))``.

    A dilated LSTM's state in ring form (``dilation``) is still the pair ``(h, c)``, each part
    a list of one ring per layer and direction, ``h[i]`` (d_k, B, R) and ``c[i]`` (d_k, B, H)
    (without the batch axis for unbatched input), or None for zeros: part by part what the
    GRU takes. Both parts are lists (or None) or both plain states, never one of each. The
    forms it comes back in are the same: a stateful layer's ``state``, ``step``'s state and,
    given ring h0, backward's ``(dh0, dc0)``.
    """

    cell = LSTM_SPEC
    proj_size = fixed("proj_size", "the parameters' shapes depend on it")
    unit_forget_bias = fixed("unit_forget_bias", "it set the initial forget-gate bias")
    peepholes = fixed("peepholes", "the peephole parameters exist or not")
    input_forget = fixed("input_forget", "it chooses the cell's equations")
    cell_clip = fixed("cell_clip", "it chooses the cell's equations")
    # pickled before the forms existed: the plain LSTM
    _peepholes = _input_forget = False
    _cell_clip = None
    _cell_options_declared = (
        ("proj_size", 0),
        ("unit_forget_bias", False),
        ("peepholes", False),
        ("input_forget", False),
        ("cell_clip", None),
        *_GatedLayer._cell_options_declared,
    )
    _fixed_options = ("proj_size", "unit_forget_bias", "peepholes", "input_forget", "cell_clip")

    def _init_cell(self, a):
        hidden = check_positive_int("hidden_size", a["hidden_size"])
        proj_size = a["proj_size"]
        self._proj_size = check_int("proj_size", proj_size, 0)
        if self._proj_size >= hidden:
            raise ValueError(
                f"proj_size: expected 0 <= proj_size < hidden_size = {hidden}, got "
                f"{describe(proj_size)}"
            )
        self._unit_forget_bias = check_bool("unit_forget_bias", a["unit_forget_bias"])
        self._init_forms(a)
        super()._init_cell(a)

    def _init_forms(self, a):
        """ONNX's forms (peepholes, input_forget, cell_clip), checked, and refused by name
        beside proj_size."""
        self._peepholes = check_bool("peepholes", a["peepholes"])
        self._input_forget = check_bool("input_forget", a["input_forget"])
        clip = a["cell_clip"]
        if clip is not None:
            if not is_real(clip) or not np.isfinite(clip) or clip <= 0:
                raise ValueError(f"cell_clip: expected a float > 0 or None, got {describe(clip)}")
            clip = float(clip)
        self._cell_clip = clip
        on = [n for n in ("peepholes", "input_forget") if a[n]] + (["cell_clip"] if clip else [])
        if on and self._proj_size:
            raise _unsupported(
                type(self).__name__,
                on[0],
                a[on[0]],
                "ONNX's LSTM forms have no projection (proj_size); use proj_size=0, or an LSTM "
                "without peepholes, input_forget and cell_clip",
            )

    def _forms_on(self):
        return self._peepholes or self._input_forget or self._cell_clip is not None

    def get_config(self):
        """The constructor arguments: ``LSTM(**layer.get_config())`` builds the same
        architecture (fresh parameters). JSON-serialisable. ONNX's forms appear only when on."""
        config = {
            **self._common_config(),
            "proj_size": self.proj_size,
            "unit_forget_bias": self.unit_forget_bias,
        }
        if self._forms_on():
            config.update(
                peepholes=self._peepholes,
                input_forget=self._input_forget,
                cell_clip=self._cell_clip,
            )
        return config

    def quantized_copy(self, mode, where="model"):
        if self._forms_on():
            raise ValueError(
                f"{where}: an LSTM with peepholes, input_forget or cell_clip cannot be quantized: "
                "rnnfast.quantize has no kernels for ONNX's LSTM forms; run it in float32 or "
                "float64"
            )
        return super().quantized_copy(mode, where)

    def onnx_attributes(self):
        """ONNX export: ``input_forget`` and ``clip`` where the layer has them."""
        attributes = {}
        if self._input_forget:
            attributes["input_forget"] = 1
        if self._cell_clip is not None:
            attributes["clip"] = self._cell_clip
        return attributes

    def onnx_peepholes(self, params):
        """ONNX export: the op's P (3H,) per (layer, direction) in PyTorch's order l * dirs +
        d, [p_i | p_o | p_f], or None without peepholes."""
        if not self._peepholes:
            return None
        out = []
        for w, *_ in self._names:
            p_i, p_f, p_o = np.split(params[w.replace("weight_ih", "weight_peephole", 1)], 3)
            out.append(np.concatenate([p_i, p_o, p_f]))
        return out

    def load_onnx_peepholes(self, peepholes):
        """ONNX load: the inverse of :meth:`onnx_peepholes`, loaded as a state dict."""
        state = self.state_dict()
        for (w, *_), p in zip(self._names, peepholes):
            p_i, p_o, p_f = np.split(np.asarray(p), 3)
            state[w.replace("weight_ih", "weight_peephole", 1)] = np.concatenate([p_i, p_f, p_o])
        self.load_state_dict(state)

    # ---- the state is the pair (h, c) ----------------------------------------------------------

    def _state_input(self, name, value, batch, unbatched):
        """``(h, c)`` (either None for zeros) checked and joined as the stack runner takes it,
        (num_layers*dirs, B, R + H) (rows: num_layers for step()'s state), or None."""
        if value is None:
            return None
        if not isinstance(value, (tuple, list)) or len(value) != 2:
            raise TypeError(
                f"{name}: expected the pair (h, c) of an LSTM's states (either may be None), "
                f"got {describe(value)}"
            )
        rows = self.num_layers * (1 if name == "state" else self.num_directions)
        widths = self.cell.state_widths(self)
        parts = []
        for i, (part, width) in enumerate(zip(value, widths)):
            label = f"{name}[{i}]"
            if part is None:
                parts.append(None)
                continue
            if unbatched:
                part = self._unbatched_state(label, part, rows, width)
            arr = as_float_array(label, part, self.dtype)
            expected = (rows, batch, width)
            if arr.shape != expected:
                what = ("h", "c")[i]
                raise ValueError(
                    f"{label}: expected {what} of shape (num_layers*dirs, B, "
                    f"{'R' if i == 0 else 'H'}) = {expected}, got shape {arr.shape}"
                )
            parts.append(arr)
        if parts[0] is None and parts[1] is None:
            return None
        parts = [
            np.zeros((rows, batch, w), dtype=self.dtype) if p is None else p
            for p, w in zip(parts, widths)
        ]
        return np.concatenate(parts, axis=-1)

    def _rings_input(self, name, value, batch, directions, unbatched=False):
        """The pair ``(h, c)`` in the ring form (either part a list of rings; the other a
        list too, or None for zeros) checked and joined per ring as the runner carries them,
        (d_k, B, R + H); None for a plain pair (``_state_input`` checks it)."""
        if not (
            self._is_dilated()
            and isinstance(value, (tuple, list))
            and len(value) == 2
            and any(isinstance(part, (list, tuple)) for part in value)
        ):
            return None
        parts = []
        for i, (part, width, what) in enumerate(zip(value, self.cell.state_widths(self), "RH")):
            if part is None:  # zeros: a ring of one (nn.recurrent.dilation's short form)
                sizes = rnn_rings.ring_sizes(self, directions)
                parts.append([np.zeros((1, batch, width), dtype=self.dtype) for _ in sizes])
            elif not isinstance(part, (list, tuple)):
                other = f"{name}[{1 - i}]"
                raise TypeError(
                    f"{name}[{i}]: with {other} a list of rings, expected {'hc'[i]}'s rings too "
                    f"(a list of one ring (d, B, {what}) per (layer, direction)) or None, got "
                    f"{describe(part)}"
                )
            else:
                label = f"{name}[{i}]"
                parts.append(
                    rnn_rings.ring_arg(self, label, part, batch, directions, unbatched, width, what)
                )
        # h's and c's rings of one layer may differ in length (short forms): the longer's
        return [
            np.concatenate([dil.widen(r, max(len(r) for r in pair)) for r in pair], axis=-1)
            for pair in zip(*parts)
        ]

    def _state_output(self, state):
        """A joined state (or a list of joined rings) as the pair (h, c) (of ring lists)."""
        if state is None:
            return None
        if isinstance(state, list):  # a dilated layer's rings: the pair of ring lists
            pairs = [self._state_output(ring) for ring in state]
            return [h for h, _ in pairs], [c for _, c in pairs]
        h, c = self.cell.split_state(self, state)
        return np.ascontiguousarray(h), np.ascontiguousarray(c)


class LayerNormLSTM(LSTM):
    """LSTM with layer normalisation inside the cell: torchaudio's RNN-T predictor cell
    (``torchaudio.models.rnnt._CustomLSTM`` with ``layer_norm=True``), on NumPy arrays::

        z = W_ih x_t + W_hh h_{t-1}           (plus the biases with bias=True)
        i, f, g, o = split(LN_g(z), 4)         LN over the 4H of a row, weight and bias
        c' = LN_c(ra(f) * c + ra(i) * act(g))  LN over H, weight and bias
        h' = ra(o) * act(c')

    LN(v) = (v - mean) / sqrt(var + 1e-5) * weight + bias (``torch.nn.LayerNorm``). Besides
    the LSTM's parameters each (layer, direction) has ``g_norm_weight_l{k}``,
    ``g_norm_bias_l{k}`` (4H,) and ``c_norm_weight_l{k}``, ``c_norm_bias_l{k}`` (H,), starting
    at ones and zeros. Everything else as :class:`LSTM` (stacked, bidirectional, lengths,
    masks, step(), stateful, save / load, summary) but ``proj_size`` and
    ``unit_forget_bias``, refused; ONNX export and ``rnnfast.quantize`` refuse the layer.
    ``bias=False`` is torchaudio's form (its x2g and p2g have no bias under layer norm).
    """

    cell = LAYER_NORM_LSTM_SPEC

    def _init_cell(self, a):
        if a["proj_size"] != 0:
            raise _unsupported(
                "LayerNormLSTM",
                "proj_size",
                a["proj_size"],
                "the LayerNorm LSTM has no projection (torchaudio's cell has none); use "
                "rnnfast.LSTM(proj_size=...)",
            )
        if a["unit_forget_bias"] is not False:
            raise _unsupported(
                "LayerNormLSTM",
                "unit_forget_bias",
                a["unit_forget_bias"],
                "the gates' norm recentres every bias before the forget gate reads it",
            )
        for name, default in (("peepholes", False), ("input_forget", False), ("cell_clip", None)):
            if a[name] is not default:
                raise _unsupported(
                    "LayerNormLSTM",
                    name,
                    a[name],
                    "ONNX's LSTM forms are rnnfast.LSTM's; the LayerNorm LSTM's cell has none",
                )
        super()._init_cell(a)

    def quantized_copy(self, mode, where="model"):
        raise ValueError(
            f"{where}: a LayerNormLSTM cannot be quantized: rnnfast.quantize has no kernels for "
            "its norms; run it in float32 or float64"
        )

    def onnx_check(self, who):
        raise ValueError(
            f"{who}: a LayerNormLSTM cannot be exported to ONNX: the ONNX LSTM op has no layer "
            "normalisation inside its cell"
        )
