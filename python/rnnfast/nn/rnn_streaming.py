"""The RNN layer one step at a time (streaming inference): ``layer.step(x_t, h)``, batched or
unbatched, carrying a stateful layer's state; no dropout, nothing kept for backward. A dilated
layer's step (its rings, nn.rnn_rings) is one piece of code for every cell: it asks the layer's
``_step_layers`` for one step of the stack."""

from __future__ import annotations

import numpy as np

from .._validation import (
    as_float_array,
)
from . import dilation as dil
from . import rnn_rings

__all__ = ["RNNStreaming"]


def _declined(x_t, state):
    """The bound step of a layer without one (see RNNStreaming._bind_step): declines every call."""
    return None


class RNNStreaming:
    """Mixin of the recurrent layers: ``step`` (the gated layers' own ``step`` shares its bound
    hot path, ``_bind_step``)."""

    def _bind_step(self):
        """step()'s hot path: the cell's step bound once on the live parameters
        (``_core.StepFunction``, the cell's ``bind_step``), called with ``(x_t, state)`` and
        giving step()'s result, or None where its arguments are not the hot path's (the general
        path then runs, and names any problem). Bound where one kernel call is the whole step:
        one undilated, unidirectional layer carrying no state of its own; elsewhere a stand-in
        that declines every call. The setters of the options it reads drop it (``_stepper``)."""
        if (
            self._num_layers == 1
            and not self._bidirectional
            and not self._stateful
            and all(d == 1 for d in self._dilations)
        ):
            bound = self.cell.bind_step(self)
            if bound is not None:
                return bound
        return _declined

    def step(self, x_t, h=None):
        """One time step for streaming inference: ``out_t, h_next = layer.step(x_t, h)``.

        x_t (B, input_size); h and h_next (num_layers, B, H) (zeros, or a stateful layer's
        carried state, when h is None); out_t (B, H) is the last layer's output (plus its input
        with ``residual``; every layer's, (B, num_layers*H), with ``all_to_output``). Unbatched, as torch: x_t (input_size,) with h (num_layers, H) gives
        out_t (H,) and h_next (num_layers, H) (a stateful layer carries it as a batch of one).
        No dropout, nothing kept for backward; unidirectional layers only.
        A stateful layer carries h_next to its next call. The parameters are read live: an
        in-place update (an optimizer's) is what the next step reads. out_t and h_next[-1] may
        be the same memory (copy before writing into either).

        The fastest form: a one-layer, undilated layer that is not stateful, called with x_t a
        C-contiguous (B, input_size) array of its dtype and the state as it came back from the
        last step (or None). That call goes straight to the layer's bound step
        (``_core.StepFunction``: no Python between the call and the kernel); any other runs the
        general path, with the same results.

        A dilated layer (``dilation``) reads h_{t-d}: its state is a list of one ring
        (d_k, B, H) per layer, ``ring[-1]`` the newest state (see ``RNN``), and h_next is
        such a list; h may also be (num_layers, B, H), every chain starting from it, as a
        forward's h0. Steps over a sequence then give the forward's outputs.
        """
        bound = self._stepper  # the hot path: one call into the kernels (_bind_step)
        if bound is None:
            bound = self._stepper = self._bind_step()
        out = bound(x_t, h)
        if out is not None:
            return out
        if self._bidirectional:  # the private attributes: no property calls on this hot path
            raise ValueError(
                "step: a bidirectional layer needs the whole sequence (its reverse direction "
                "starts at the end); use a forward call"
            )
        unbatched = (x_t.ndim if type(x_t) is np.ndarray else np.ndim(x_t)) == 1
        if self._dilations.count(1) != len(self._dilations):  # dilated (a C-level count)
            return self._step_dilated(x_t, h, unbatched)
        if unbatched:
            return self._step_unbatched(x_t, h)
        return self._step_batched(x_t, h)

    def _step_unbatched(self, x_t, h):
        """step() of one sequence without a batch axis, run as a batch of one."""
        x_t = as_float_array("x_t", x_t, self.dtype)[None]
        if h is not None:
            h = self._unbatched_state("h", h, self.num_layers)
        out, h_next = self._step_batched(x_t, h)
        return out[0], h_next[:, 0]

    def _step_batched(self, x_t, h):
        """step() of a batch: x_t (B, input_size), h (num_layers, B, H) or None. The streaming
        hot path: it reads the options' private attributes (no property calls)."""
        if h is None and self._stateful:
            h = self._state
        if h is None:
            shape = x_t.shape if type(x_t) is np.ndarray else np.shape(x_t)
            if len(shape) != 2:
                shape = as_float_array("x_t", x_t, self._dtype).shape  # TypeError if not float
                raise ValueError(
                    f"x_t: expected shape (B, input_size) = (B, {self.input_size}), or "
                    f"(input_size,) unbatched, got shape {shape}"
                )
            batch = shape[0]
            zeros = self._zero_state
            if zeros is None or zeros.shape[1] != batch:
                # never handed out, so never written: reused across calls
                zeros = self._zero_state = np.zeros(
                    (self._num_layers, batch, self._hidden_size), dtype=self._dtype
                )
            h = zeros
        else:
            if type(h) is not np.ndarray or h.dtype is not self._dtype:
                h = as_float_array("h", h, self._dtype)
            if h.ndim != 3 or h.shape[0] != self._num_layers:
                hint = ""
                if h.ndim == 2:
                    hint = " (a state without a batch axis goes with x_t (input_size,))"
                raise ValueError(
                    f"h: expected shape (num_layers*dirs, B, H) = "
                    f"({self._num_layers}, B, {self._hidden_size}), got shape {h.shape}{hint}"
                )
        step, weights = self._step_kernel, self._step_weights
        if self._num_layers == 1:  # the streaming hot path: one kernel call, no Python loop
            h1 = step(x_t, h[0], *weights(0), self._nonlinearity, self._alphas[0])
            h_next = h1[None]
            if self._stateful:
                self._state = h_next
            return h1, h_next
        out, states = self._step_layers(x_t, h)
        h_next = np.stack(states)
        if self._stateful:
            self._state = h_next
        return out, h_next

    def _step_layers(self, x_t, previous):
        """One step of every layer, layer k from its state ``previous[k]`` (B, H) (the one
        its recurrence reads: h_{t-d} of a dilated layer): ``(out_t, [h_t of each layer])``.
        The Elman cell's, on ``_step_kernel`` (which rnnfast.quantize's copies replace); the
        gated layers' runs their cell's step (``nn.gated``)."""
        states, outputs = [], []
        inp = x_t
        step, weights = self._step_kernel, self._step_weights
        for layer in range(self._num_layers):
            if self._input_to_all and layer > 0:
                inp = np.concatenate([x_t, inp], axis=1)
            h_l = step(
                inp, previous[layer], *weights(layer), self._nonlinearity, self._alphas[layer]
            )
            states.append(h_l)
            inp = h_l + inp if (self._residual and layer > 0) else h_l
            outputs.append(inp)
        return self._stack_step_output(inp, outputs), states

    def _stack_step_output(self, top, outputs):
        """A step's output: the top layer's, or with ``all_to_output`` every layer's (B, R)
        concatenated, layer 0 first."""
        return np.concatenate(outputs, axis=1) if self._all_to_output else top

    def _step_dilated(self, x_t, h, unbatched, name="h"):
        """step() of a dilated layer, for every cell: each layer steps from the oldest state
        of its ring (h_{t-d}) and pushes its new one. The state ``h`` (the argument ``name``)
        is None (zeros, or a stateful layer's carried rings), the ring form (nn.rnn_rings) or
        a plain state every chain starts from; h_next is the ring form (rings (d_k, B, S),
        (d_k, S) unbatched, in the layer's API form)."""
        x_t = as_float_array("x_t", x_t, self._dtype)
        if unbatched:
            x_t = x_t[None]
        elif x_t.ndim != 2:
            raise ValueError(
                f"x_t: expected shape (B, input_size) = (B, {self.input_size}), or "
                f"(input_size,) unbatched, got shape {x_t.shape}"
            )
        batch = x_t.shape[0]
        if h is None and self._stateful and self._state is not None:
            rings = self._state
            if rings[0].shape[1] != batch:
                raise ValueError(
                    f"x_t: a stateful layer carries a state for a batch of "
                    f"{rings[0].shape[1]}, got a batch of {batch} (call reset_state() to start "
                    "over)"
                )
        elif h is None:
            rings = rnn_rings.zero_rings(self, batch)
        else:
            rings = self._rings_input(name, h, batch, 1, unbatched)
            if rings is None:
                rings = rnn_rings.broadcast_rings(
                    self, self._state_input(name, h, batch, unbatched)
                )
        out, states = self._step_layers(x_t, [ring[0] for ring in rings])
        h_next = [dil.push(ring, s, d) for ring, s, d in zip(rings, states, self._dilations)]
        if self._stateful:
            self._state = h_next
        out = np.ascontiguousarray(out)
        if unbatched:
            out, h_next = out[0], [ring[:, 0] for ring in h_next]
        return out, self._state_output(h_next)
