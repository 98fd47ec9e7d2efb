"""The quantized inference copies of the GRU and LSTM layers (``rnnfast.quantize`` makes them):
the float layer's own code around the arithmetic (stack runner, directions, lengths, dilation,
API forms, stateful layers, ``step``), with a cell description whose kernels are the quantized
ones (``functional.quantized_gated``): int8 or bf16 products, the gates and states in float32.

Every configuration of the float layers runs quantized (both GRU forms, relu, hard_sigmoid,
``proj_size``). Where the quantized products would be slower than float32 ones, the automatic
choice multiplies the dequantized weights in float32 instead (the same values, so the same error
bound), and ``summary()`` says so: on a quantized path without the instructions the kind is
made for (int8 without VNNI or AMX, bf16 without AVX512-BF16 or AMX, measured 0.43-0.87x of
float32 on an AVX-512 machine), and for layers too small to gain (``FALLBACK_WEIGHTS``).
"""

from __future__ import annotations

from ... import _core, functional
from ..recurrent.cells import GRUSpec, LSTMSpec
from ..recurrent.gated import GRU, LSTM
from ..storage import storage_summary
from .rnn import QuantizedRecurrent

__all__ = ["FALLBACK_WEIGHTS", "QuantizedGRU", "QuantizedLSTM"]

# The quantized paths whose products beat float32 ones (the instructions the kind is made for).
NATIVE_PATHS = {"int8": ("avx_vnni", "avx512_vnni", "amx"), "bf16": ("avx512_bf16", "amx")}
# A (layer, direction) with fewer weights than this in one step's products (G*H*(D + R)) runs
# float32 products: at T=20, B=4, D=16, H=32 (4,608 weights, GRU) int8 measured 0.98x of float32
# and at D=32, H=64 (18,432) 1.43x (bench/kernels/quantized_gated.py, 1 thread, AVX-512).
FALLBACK_WEIGHTS = 8192


class _QuantizedGatedSpec:
    """The quantized kernels of a gated cell description (a mixin before GRUSpec / LSTMSpec):
    the layer's packed weights (``QuantizedGatedLayer.kernel_weights``) in place of its float
    parameters, in the forward over a sequence and in the step."""

    def _weights(self, layer, idx):
        w = layer.kernel_weights(idx)
        return w["weight_ih"], w["weight_hh"], w["bias_ih"], w["bias_hh"]

    def _quantized_call(self, layer, idx, options):
        """The keyword arguments of the quantized kernels besides the sequence and states."""
        w = layer.kernel_weights(idx)
        cell = "lstm" if self.num_states == 2 else "gru"
        if cell == "gru" and not options.get("reset_after", True):
            cell = "gru_reset_before"
        return cell, {
            "weight_hn": w["weight_hn"],
            "weight_hr": w["weight_hr"],
            "activation": options["activation"],
            "recurrent_activation": options["recurrent_activation"],
        }

    def _forward_kernel(
        self, x, w_ih, w_hh, b_ih, b_hh, h0, lengths, layer, idx, training, run, **masks
    ):
        # no masks reach here: the layer's _mask_arg refuses step masks, an inference copy
        # draws no dropout masks, and its forward embeds token ids first
        if layer.float32_fallback() is not None:
            f = layer.float_weights(idx)
            extra = {"weight_hr": f["weight_hr"]} if self.num_states == 2 else {}
            return self._forward_function(
                x, f["weight_ih"], f["weight_hh"], f["bias_ih"], f["bias_hh"],
                *self._states(layer, h0), lengths, **dict(run.cell_options), **extra,
                return_sequences=True, keep_workspace=False,
            )  # fmt: skip
        cell, kwargs = self._quantized_call(layer, idx, run.cell_options)
        h, c = (self._states(layer, h0) + (None,))[:2]
        return functional.quantized_gated_forward(
            cell, x, w_ih, w_hh, b_ih, b_hh, h, c, lengths, **kwargs
        )

    def step_states(self, layer, run_options, k, x_t, states):
        if layer.float32_fallback() is not None:
            f = layer.float_weights(k)
            extra = {"weight_hr": f["weight_hr"]} if self.num_states == 2 else {}
            new = self._step_function(
                x_t, *states, f["weight_ih"], f["weight_hh"], f["bias_ih"], f["bias_hh"],
                **run_options, **extra,
            )  # fmt: skip
            return new if isinstance(new, tuple) else (new,)
        cell, kwargs = self._quantized_call(layer, k, run_options)
        c = states[1] if len(states) > 1 else None
        new = functional.quantized_gated_step(
            cell, x_t, states[0], c, *self._weights(layer, k), **kwargs
        )
        return new if isinstance(new, tuple) else (new,)

    def fast_step(self, layer, x_t, states):
        return self.step_states(layer, layer._cell_options(), 0, x_t, states)

    def bind_step(self, layer):
        return None  # the quantized step kernels take no StepFunction: fast_step is the hot path


class _QuantizedGRUSpec(_QuantizedGatedSpec, GRUSpec):
    _step_function = staticmethod(functional.gru_step)


class _QuantizedLSTMSpec(_QuantizedGatedSpec, LSTMSpec):
    _step_function = staticmethod(functional.lstm_step)


QUANTIZED_GRU_SPEC = _QuantizedGRUSpec()
QUANTIZED_LSTM_SPEC = _QuantizedLSTMSpec()


class QuantizedGatedLayer(QuantizedRecurrent):
    """What the quantized GRU and LSTM share: W_ih, W_hh (and the LSTM's W_hr) as bf16 or int8
    with per output row scales; the biases float32, kept as their sum ``b_ih + b_hh`` wherever
    the cell only adds the sum (the LSTM, the GRU with ``reset_after=False``), both where the
    reset gate scales ``b_hn`` (PyTorch's GRU)."""

    def _quantize_parameters(self, layer):
        self._state = self._zero_state = None
        self._kernel_names = []  # per (layer, direction): {kind: stored name}
        both_biases = getattr(layer, "reset_after", False)
        for n_ih, n_hh, n_bi, n_bh in layer._names:
            names = {"weight_ih": n_ih, "weight_hh": n_hh, "weight_hr": None}
            self._add_weight(n_ih, layer._params[n_ih])
            self._add_weight(n_hh, layer._params[n_hh])
            if getattr(layer, "proj_size", 0):
                names["weight_hr"] = n_ih.replace("weight_ih", "weight_hr", 1)
                self._add_weight(names["weight_hr"], layer._params[names["weight_hr"]])
            if n_bi is None:
                names["bias_ih"] = names["bias_hh"] = None
            elif both_biases:
                self._floats[n_bi] = layer._params[n_bi].copy()
                self._floats[n_bh] = layer._params[n_bh].copy()
                names["bias_ih"], names["bias_hh"] = n_bi, n_bh
            else:  # the sum goes in as b_ih (b_hh None): the kernels add both the same way
                names["bias_ih"], names["bias_hh"] = self._add_bias_sum(layer, n_bi, n_bh), None
            self._kernel_names.append(names)

    def float32_fallback(self):
        """Why this copy multiplies its dequantized weights in float32 now, or None where its
        products run quantized: the active quantized path lacks the kind's instructions, or the
        layer is too small to gain (the module's docstring). Asked at each call: the path can
        change (``_core.set_quantized_path``, ``RNNFAST_ISA``)."""
        path = _core.quantized_path(self._mode)
        if path not in NATIVE_PATHS[self._mode]:
            return f"the {self._mode} path here is {path}, slower than float32"
        G, H = self.cell.num_gates, self._hidden_size
        R = self.cell.output_width(self)
        widths = [self._weights[n["weight_ih"]].shape[1] for n in self._kernel_names]
        if G * H * (max(widths) + R) < FALLBACK_WEIGHTS:
            return f"{G * H * (max(widths) + R)} weights a step, too few to gain"
        return None

    def float_weights(self, idx):
        """The float32 kernels' weights of (layer, direction) ``idx``: the dequantized
        matrices and the float32 biases (a summed bias as bias_ih)."""
        names = self._kernel_names[idx]
        b_ih, b_hh = names["bias_ih"], names["bias_hh"]
        w = {k: self._weights[names[k]] for k in ("weight_ih", "weight_hh")}
        out = {k: m.float_rows(0, m.shape[0]) for k, m in w.items()}
        hr = names["weight_hr"]
        out["weight_hr"] = (
            None if hr is None else self._weights[hr].float_rows(0, self._weights[hr].shape[0])
        )
        out["bias_ih"] = None if b_ih is None else self._floats[b_ih]
        out["bias_hh"] = None if b_hh is None else self._floats[b_hh]
        return out

    def summary(self):
        """As :meth:`QuantizedLayer.summary`, and a line saying so where the products run in
        float32 now (:meth:`float32_fallback`)."""
        text = storage_summary(self)
        why = self.float32_fallback()
        if why is not None:
            text += f"\nProducts in float32 (dequantized weights): {why}"
        print(text)
        return text

    def kernel_weights(self, idx):
        """The quantized kernels' weights of (layer, direction) ``idx``: packed matrices in the
        gate layout, the float32 biases (``functional.quantized_gated_forward``'s arguments)."""
        names = self._kernel_names[idx]
        G, H = self.cell.num_gates, self._hidden_size
        w_hh = self._weights[names["weight_hh"]]
        split = not getattr(self, "reset_after", True)  # W_hn reads r * h: packed apart
        b_ih, b_hh = names["bias_ih"], names["bias_hh"]
        return {
            "weight_ih": self._weights[names["weight_ih"]].packed_rows(0, G * H, G),
            "weight_hh": w_hh.packed_rows(0, (G - 1 if split else G) * H, G - 1 if split else G),
            "weight_hn": w_hh.packed_rows(2 * H, 3 * H, 1) if split else None,
            "weight_hr": None if names["weight_hr"] is None else self._weights[
                names["weight_hr"]].packed,
            "bias_ih": None if b_ih is None else self._floats[b_ih],
            "bias_hh": None if b_hh is None else self._floats[b_hh],
        }  # fmt: skip


class QuantizedGRU(QuantizedGatedLayer, GRU):
    """A GRU (either form) whose weights are bf16 or int8; input, states and outputs float32.
    Everything a float GRU does in eval mode, but Keras's general step masks; no training."""

    float_class = GRU
    cell = QUANTIZED_GRU_SPEC


class QuantizedLSTM(QuantizedGatedLayer, LSTM):
    """An LSTM (with ``proj_size`` too) whose weights are bf16 or int8; input, states and
    outputs float32. Everything a float LSTM does in eval mode, but Keras's general step
    masks; no training."""

    float_class = LSTM
    cell = QUANTIZED_LSTM_SPEC
