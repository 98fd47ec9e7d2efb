"""The RNN layer one step at a time (streaming inference): ``layer.step(x_t, h)``, batched or
unbatched, carrying a stateful layer's state; no dropout, nothing kept for backward."""

from __future__ import annotations

import numpy as np

from .. import _core, functional
from .._validation import (
    as_float_array,
)
from .rnn_options import _DILATED_STREAMING

__all__ = ["RNNStreaming"]


class RNNStreaming:
    """Mixin of rnnfast.RNN: ``step``."""

    def step(self, x_t, h=None):
        """One time step for streaming inference: ``out_t, h_next = layer.step(x_t, h)``.

        x_t (B, input_size); h and h_next (num_layers, B, H) (zeros, or a stateful layer's
        carried state, when h is None); out_t (B, H) is the last layer's output (plus its input
        with ``residual``). Unbatched, as torch: x_t (input_size,) with h (num_layers, H) gives
        out_t (H,) and h_next (num_layers, H) (a stateful layer carries it as a batch of one).
        No dropout, nothing kept for backward; unidirectional layers only.
        A stateful layer carries h_next to its next call. The parameters are read live, with
        no per-call checks of them: only x_t and h are checked. out_t and h_next[-1] may be the
        same memory (copy before writing into either).
        """
        if max(self._dilations) > 1:  # (a generator here cost a third of a microsecond)
            raise ValueError(_DILATED_STREAMING)
        if self._bidirectional:  # the private attributes: no property calls on this hot path
            raise ValueError(
                "step: a bidirectional layer needs the whole sequence (its reverse direction "
                "starts at the end); use a forward call"
            )
        if (x_t.ndim if type(x_t) is np.ndarray else np.ndim(x_t)) == 1:
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
        p = self._params
        step = functional.rnn_step
        if self._num_layers == 1:  # the streaming hot path: one kernel call, no Python loop
            n_ih, n_hh, n_bi, n_bh = self._names[0]
            args = (
                x_t,
                h[0],
                p[n_ih],
                p[n_hh],
                p[n_bi] if n_bi else None,
                p[n_bh] if n_bh else None,
                self._nonlinearity,
                self._alphas[0],
            )
            # Straight to the kernel, which checks every shape and dtype; what it refuses (an
            # x_t to convert, or a bad one) takes functional.rnn_step's converting path, which
            # raises the precise error.
            try:
                h1 = _core.rnn_step(*args)
            except (TypeError, ValueError):
                h1 = step(*args)
            h_next = h1[None]
            if self._stateful:
                self._state = h_next
            return h1, h_next
        states = []
        inp = x_t
        for layer, (n_ih, n_hh, n_bi, n_bh) in enumerate(self._names):
            h_l = step(
                inp,
                h[layer],
                p[n_ih],
                p[n_hh],
                p[n_bi] if n_bi else None,
                p[n_bh] if n_bh else None,
                self._nonlinearity,
                self._alphas[layer],
            )
            states.append(h_l)
            inp = h_l + inp if (self._residual and layer > 0) else h_l
        h_next = np.stack(states)
        if self._stateful:
            self._state = h_next
        return inp, h_next
