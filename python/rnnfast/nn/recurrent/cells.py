"""The cell descriptions of the recurrent layers: what differs between the Elman, GRU and LSTM
layers, said once per cell (OpenVINO's gatesCount / statesCount, oneDNN's cell kinds). The
layer machinery (``nn.recurrent.rnn``'s API forms, streaming and stateful layers; ``nn.recurrent.stack``'s runner
over layers x directions x batch order x reversal x dilation; the summary, PyTorch's and Keras's
weights) asks the layer's ``cell`` and never tests for a layer class.

A description is stateless and shared (``RNN.cell is ELMAN``): what depends on one layer's
configuration (its sizes, ``reset_after``, ``proj_size``, ``bias``) it reads from the layer it
is given, so layers pickled or copied carry nothing extra.

Inside the stack runner a (layer, direction)'s state is ONE array (B, S): h, or for the LSTM h
and c concatenated on the last axis (S = R + H, R = proj_size or H), so that batch order,
reversal, stateful carry and the runner itself stay cell-agnostic; the layer's API forms split
it (:meth:`CellSpec.split_state`).
"""

from __future__ import annotations

import numpy as np

from ... import _core, functional
from ..._parameters import ParameterDict, aligned_copy
from ...functional import lstm_forms

__all__ = [
    "CELLS",
    "ELMAN",
    "GRU_SPEC",
    "LSTM_SPEC",
    "LAYER_NORM_LSTM_SPEC",
    "CellSpec",
    "ElmanSpec",
    "GRUSpec",
    "LSTMSpec",
    "LayerNormLSTMSpec",
    "cell_by",
    "direction_cache",
]


def direction_cache(layer, idx):
    """The packed-weight cache of (layer, direction) ``idx`` (PyTorch's order l * dirs + d)
    for the kernels' ``weight_cache=``: the layer's ``_weight_cache(k, d)``
    (``rnnfast._parameters``), None while caching is bypassed."""
    k, d = divmod(idx, 2) if layer.bidirectional else (idx, 0)
    return layer._weight_cache(k, d)


# the parameter kinds in PyTorch's order within one (layer, direction)
_NORM_KINDS = ("g_norm_weight", "g_norm_bias", "c_norm_weight", "c_norm_bias")
_KINDS = (
    "weight_ih",
    "weight_hh",
    "bias_ih",
    "bias_hh",
    "weight_hr",
    "weight_peephole",
    *_NORM_KINDS,
)


class CellSpec:
    """What a recurrent layer asks of its cell.

    Attributes
    ----------
    name : str
        The cell's name where rnnfast takes one (``Seq2Seq(cell=...)``): "rnn", "gru", "lstm".
    torch_name, keras_name, onnx_op : str
        The cell's module in PyTorch (``torch.nn.<torch_name>``), its layer in Keras and its
        ONNX operator.
    torch_cell_name, keras_cell_name : str
        The one-step module of the cell in PyTorch (``torch.nn.GRUCell``) and its cell class
        in Keras (``keras.layers.GRUCell``).
    torch_options : tuple of str
        The constructor arguments of PyTorch's module that are the cell's own (beside the
        sizes, bias, batch_first, dropout and bidirectional every one has).
    kernel_cell : str
        The cell as the kernels (``_core``) name it: "elman", "gru" (PyTorch's form), "lstm".
    stored_per_step : int
        The width of the workspace the kernels' forward keeps per step for the backward, in
        units of H (0: none, the Elman cell's backward reads its outputs).
    onnx_inputs : int
        The inputs of the ONNX operator (6, the LSTM's 8: initial_c and the peepholes P).
    activation_option : str
        The layer's keyword for the cell's activation: the Elman layer's ``nonlinearity``,
        the gated layers' ``activation``.
    layer_class, cell_class : type or None
        rnnfast's layer of the cell (``rnnfast.RNN``, ``GRU``, ``LSTM``) and its one-step
        layer (``rnnfast.GRUCell``, ``LSTMCell``; None: the Elman cell has none): the first
        class of each kind that names the cell (``claim``).
    num_states : int
        1 (h) or 2 (h and c).
    num_gates : int
        Gate blocks in ``weight_ih`` / ``weight_hh`` (1, 3 or 4).
    gate_orders : dict
        The gate blocks' order in PyTorch's, Keras's and ONNX's layouts, by the names each
        uses (``"torch"``, ``"keras"``, ``"onnx"``).
    """

    name = torch_name = keras_name = onnx_op = ""
    torch_cell_name = keras_cell_name = kernel_cell = ""
    torch_options = ()
    onnx_inputs = 6
    stored_per_step = 0  # the forward's workspace per step for the backward, in units of H
    activation_option = "activation"
    layer_class = cell_class = None
    num_states = 1
    num_gates = 1
    gate_orders = {"torch": ("h",), "keras": ("h",), "onnx": ("h",)}
    # the candidate gate's other names, by PyTorch's: the GRU's n is Keras's and ONNX's h, the
    # LSTM's g their c
    gate_aliases = {}

    def claim(self, cls, role):
        """Record ``cls`` as the cell's ``role`` ("layer_class" or "cell_class") unless a class
        holds it already (a subclass of rnnfast's layer, a quantized copy, a user's, names the
        cell after it). The classes call this as they are defined (``__init_subclass__``)."""
        if self.__dict__.get(role) is None:
            setattr(self, role, cls)

    def gate_permutation(self, source, target="torch"):
        """Where the gate blocks of layout ``target`` are in layout ``source`` (``"torch"``,
        ``"keras"`` or ``"onnx"``): ``target``'s blocks are ``source``'s blocks ``p[0], p[1],
        ...`` (a tuple of num_gates indices)."""
        canonical = {alias: name for name, alias in self.gate_aliases.items()}

        def names(layout):
            order = self.gate_orders[layout]
            return order if layout == "torch" else tuple(canonical.get(g, g) for g in order)

        src = names(source)
        return tuple(src.index(g) for g in names(target))

    # ---- sizes -------------------------------------------------------------------------------

    def output_width(self, layer):
        """R: the width of h and of one direction's output sequence."""
        return layer.hidden_size

    def state_widths(self, layer):
        """The widths of the states, in order: (R,) or (R, H)."""
        return (self.output_width(layer),)

    def state_width(self, layer):
        """S: the width of the one state array per (layer, direction) the runner carries."""
        return sum(self.state_widths(layer))

    def split_state(self, layer, s):
        """The states (h, or (h, c)) of a joined state array (..., S): views."""
        if self.num_states == 1:
            return s
        R = self.output_width(layer)
        return s[..., :R], s[..., R:]

    # ---- parameters ----------------------------------------------------------------------------

    def parameter_shapes(self, layer, input_width):
        """``{kind: shape}`` of one (layer, direction) reading ``input_width`` features, in
        PyTorch's order; the biases only with ``layer.bias``."""
        G, H, R = self.num_gates, layer.hidden_size, self.output_width(layer)
        shapes = {"weight_ih": (G * H, input_width), "weight_hh": (G * H, R)}
        if layer.bias:
            shapes["bias_ih"] = (G * H,)
            shapes["bias_hh"] = (G * H,)
        return shapes

    def layout(self, layer):
        """``(names, shapes)`` of a layer's parameters: per (layer, direction), in PyTorch's
        order l * dirs + d, the 4-tuple of names (weight_ih, weight_hh, bias_ih, bias_hh; None
        for absent biases), and ``{name: shape}`` over all of them in PyTorch's order (its
        ``state_dict``'s, and the order the initialisation draws them)."""
        dirs = 2 if layer.bidirectional else 1
        names, shapes = [], {}
        for k in range(layer.num_layers):
            width = layer.input_size if k == 0 else self.output_width(layer) * dirs
            if k > 0 and getattr(layer, "input_to_all", False):
                width += layer.input_size  # the stack's input beside the layer below's output
            for d in range(dirs):
                sfx = f"_l{k}" + ("_reverse" if d else "")
                kinds = self.parameter_shapes(layer, width)
                for kind in _KINDS:
                    if kind in kinds:
                        shapes[kind + sfx] = kinds[kind]
                names.append(
                    tuple(
                        (kind + sfx) if kind in kinds else None
                        for kind in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
                    )
                )
        return names, shapes

    def initial_parameters(self, layer, rng, shapes):
        """The live parameters of a new layer: :meth:`initial_values` held read-only in a
        ``ParameterDict`` (the layers keep their weights packed between calls, so they are
        written only through the sanctioned writers: ``rnnfast.writable_parameters``, the
        optimizers, ``load_state_dict``)."""
        return ParameterDict(self.initial_values(layer, rng, shapes))

    def initial_values(self, layer, rng, shapes):
        """PyTorch's initialisation, U(-1/sqrt(H), 1/sqrt(H)) for every parameter, drawn in
        ``shapes``' order, each array starting on a cache line (``aligned_copy``)."""
        bound = 1.0 / np.sqrt(layer.hidden_size)
        return {
            name: aligned_copy(rng.uniform(-bound, bound, size=shape).astype(layer.dtype))
            for name, shape in shapes.items()
        }

    def keras_count(self, layer, group):
        """Keras's parameter count of one (layer, direction) from ``{kind: array}``: kernel,
        recurrent kernel and one bias vector (Keras's one bias is the sum of PyTorch's two)."""
        n = group["weight_ih"].size + group["weight_hh"].size
        for kind in ("bias_ih", "bias_hh"):
            if kind in group:
                return n + group[kind].size
        return n

    def summary_kind(self, layer):
        """The layer's type in a summary row: ``"GRU, tanh"`` and the like."""
        return f"{self.torch_name}, {layer.activation}"

    # ---- kernels -------------------------------------------------------------------------------

    def plain_layer_forward(self, nonlinearity, x, h0, c0, weights, keep, weight_cache=None):
        """The stack runner's fast path (``nn.recurrent.stack.plain_forward``): one layer over x (T, B,
        D) on ``_core``, weights ``(weight_ih, weight_hh, bias_ih, bias_hh, weight_hr)``:
        ``(y, h_n, c_n or None, workspace or None)``. ``weight_cache``: the layer's packed
        weights (``_core.WeightCache``, valid for these weights) or None."""
        raise NotImplementedError

    def plain_layer_backward(
        self, nonlinearity, record, weights, dy, dh_n, dc_n, needed, weight_cache=None
    ):
        """Its backward from the forward's ``record`` (``nn.recurrent.stack.PlainRecord``): ``(dx or
        None, dh0, dc0 or None, (dweight_ih, dweight_hh, dbias_ih, dbias_hh, dweight_hr))``,
        None where the layer has no such parameter (of the weights, the biases are only
        tested for None)."""
        raise NotImplementedError

    def forward(
        self, layer, run, k, idx, x, h0, lengths, ids, step_mask, recurrent_mask, input_mask=None
    ):
        """One (layer, direction) over the whole sequence: ``(y (T, B, R), h_n (B, S),
        workspace or None)``; x is the embedding table with ``ids`` (token input)."""
        raise NotImplementedError

    def backward(self, layer, run, k, idx, record, dy, dh_n, table, input_gradient):
        """Gradients of one (layer, direction) as its forward ran (``record``): ``(grads
        {name: array}, dx (T, B, D) or, with token input (``table``), the table's (V, D), dh0
        (B, S))``; dx None without ``input_gradient``."""
        raise NotImplementedError


class ElmanSpec(CellSpec):
    """The Elman cell (tanh or relu, leaky units): one gate, one state."""

    name, torch_name, keras_name, onnx_op = "rnn", "RNN", "SimpleRNN", "RNN"
    torch_cell_name, keras_cell_name, kernel_cell = "RNNCell", "SimpleRNNCell", "elman"
    torch_options = ("nonlinearity",)
    activation_option = "nonlinearity"

    def bind_step(self, layer):
        """Layer 0's step bound once on the live parameters (``_core.StepFunction``, step()'s
        hot path), or None where the layer steps on kernels of its own (rnnfast.quantize's
        copies, a deep transition)."""
        if layer._step_kernel is not functional.rnn_step:
            return None
        return _core.StepFunction(
            layer._params, [*(n or None for n in layer._names[0]), None], "elman",
            layer._nonlinearity, "sigmoid", layer._alphas[0], layer._input_size,
            layer._hidden_size, 0, layer._dtype,
        )  # fmt: skip

    def summary_kind(self, layer):
        return f"{self.torch_name}, {layer.nonlinearity}"

    # ---- the stack runner's fast path (nn.recurrent.stack.plain_forward): one layer on ``_core`` ------

    def plain_layer_forward(self, nonlinearity, x, h0, c0, weights, keep, weight_cache=None):
        w_ih, w_hh, b_ih, b_hh, _ = weights
        y, h = _core.rnn_forward(
            x, h0, w_ih, w_hh, b_ih, b_hh, None, nonlinearity, 1.0, True,
            weight_cache=weight_cache,
        )  # fmt: skip
        return y, h, None, None

    def plain_layer_backward(
        self, nonlinearity, r, weights, dy, dh_n, dc_n, needed, weight_cache=None
    ):
        w_ih, w_hh, b_ih, _, _ = weights
        dx, dh0, dw_ih, dw_hh, db = _core.rnn_backward(
            r.x, r.h0, w_ih, w_hh, r.y, dy, dh_n, None, nonlinearity, 1.0, input_gradient=needed,
            weight_cache=weight_cache,
        )  # fmt: skip
        # one gradient for both biases (they enter the same sum); torch gets two tensors
        biases = (None, None) if b_ih is None else (db, db.copy())
        return dx, dh0, None, (dw_ih, dw_hh, *biases, None)

    def forward(
        self, layer, run, k, idx, x, h0, lengths, ids, step_mask, recurrent_mask, input_mask=None
    ):
        # the layer's hook: rnnfast.quantize's copies run their own kernels here
        y, h_n = layer._direction_kernel(
            idx,
            x,
            h0,
            run.nonlinearity,
            lengths,
            run.alphas[k],
            ids=ids,
            step_mask=step_mask,
            zero_output_for_mask=run.zero_output,
            recurrent_mask=recurrent_mask,
        )
        return y, h_n, None

    def backward(self, layer, run, k, idx, record, dy, dh_n, table, input_gradient):
        names = layer._names[idx]
        g = functional.rnn_backward(
            record.fed if table is None else table,
            layer._params[names[0]],
            layer._params[names[1]],
            record.y,
            dy,
            dh_n,
            h0=record.h0,
            ids=None if table is None else record.fed,
            input_gradient=input_gradient,
            nonlinearity=run.nonlinearity,
            lengths=record.lengths,
            alpha=run.alphas[k],
            step_mask=record.step_mask,
            zero_output_for_mask=run.zero_output,
            recurrent_mask=record.recurrent_mask,
            weight_cache=direction_cache(layer, idx),
        )
        grads = {names[0]: g.dweight_ih, names[1]: g.dweight_hh}
        if names[2] is not None:
            grads[names[2]] = grads[names[3]] = g.dbias
        return grads, g.dx, g.dh0


class _GatedSpec(CellSpec):
    """What the GRU and LSTM cells share: their kernels' calling convention
    (``rnnfast.functional.gru_* / lstm_*``), token input included (the table projected
    once)."""

    # the cell's sequence kernels (functional.gru_forward / gru_backward, lstm_*)
    _forward_function = _backward_function = None

    def _weights(self, layer, idx):
        """(weight_ih, weight_hh, bias_ih, bias_hh) of (layer, direction) idx, biases None
        without bias (read live: step() streams with it)."""
        p, (w_ih, w_hh, b_ih, b_hh) = layer._params, layer._names[idx]
        return p[w_ih], p[w_hh], b_ih and p[b_ih], b_hh and p[b_hh]

    def _projection_name(self, layer, idx):
        """The name of (layer, direction) idx's projection W_hr; None: the cell has none."""
        return None

    def _projection(self, layer, idx):
        return None

    def bind_step(self, layer):
        """Layer 0's step bound once on the live parameters (``_core.StepFunction``, step()'s
        hot path for a layer carrying no state of its own)."""
        names = [n or None for n in layer._names[0]]
        proj = self._projection_name(layer, 0)
        return _core.StepFunction(
            layer._params, [*names, proj], self._kernel_cell(layer), layer._activation,
            layer._recurrent_activation, 1.0, layer._input_size, layer._hidden_size,
            layer.proj_size if proj else 0, layer._dtype,
        )  # fmt: skip

    def fast_step(self, layer, x_t, states):
        """step()'s hot path for a stateful layer (``nn.recurrent.gated``): layer 0's step straight on the
        step kernel, from its states as the kernels take them, on the live parameters: the new
        states, in the same form. The kernel checks every argument; its TypeError or ValueError
        sends the caller to the general path, which names the problem."""
        p, (n_ih, n_hh, n_bi, n_bh) = layer._params, layer._names[0]
        new = _core.gated_step(
            self._kernel_cell(layer), x_t, states[0], states[1] if len(states) > 1 else None,
            p[n_ih], p[n_hh], p[n_bi] if n_bi else None, p[n_bh] if n_bh else None,
            self._projection(layer, 0), layer._activation, layer._recurrent_activation,
        )  # fmt: skip
        return new if type(new) is tuple else (new,)

    # ---- the stack runner's fast path (nn.recurrent.stack.plain_forward): one layer on ``_core`` ------
    # PyTorch's form of the cell (the GRU's reset_after), its tanh and sigmoid

    def plain_layer_forward(self, nonlinearity, x, h0, c0, weights, keep, weight_cache=None):
        w_ih, w_hh, b_ih, b_hh, w_hr = weights
        return _core.gated_forward(
            self.kernel_cell, x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, None, "tanh", "sigmoid",
            True, keep, weight_cache=weight_cache,
        )  # fmt: skip

    def plain_layer_backward(
        self, nonlinearity, r, weights, dy, dh_n, dc_n, needed, weight_cache=None
    ):
        w_ih, w_hh, b_ih, _, w_hr = weights
        dx, dh0, dc0, dw_ih, dw_hh, db_ih, db_hh, dw_hr = _core.gated_backward(
            self.kernel_cell, r.x, r.h0, r.c0, w_ih, w_hh, w_hr, r.y, r.workspace, dy, dh_n,
            dc_n, None, "tanh", "sigmoid", needed, weight_cache=weight_cache,
        )  # fmt: skip
        biases = (None, None) if b_ih is None else (db_ih, db_hh)
        return dx, dh0, dc0, (dw_ih, dw_hh, *biases, dw_hr)

    def _cell_options(self, run):
        """The forward's keyword options (``run.cell_options``: read from the layer when the
        forward ran, so that its backward is told the same)."""
        return dict(run.cell_options)

    def _mask_options(self, run, record):
        """The masks and the output rule, as the forward ran them (backward's keywords)."""
        return dict(
            step_mask=record.step_mask,
            zero_output_for_mask=run.zero_output,
            recurrent_mask=record.recurrent_mask,
            input_mask=record.input_mask,
        )

    def forward(
        self, layer, run, k, idx, x, h0, lengths, ids, step_mask, recurrent_mask, input_mask=None
    ):
        # recurrent_mask (gates, B, R), input_mask (gates, B, D): one mask per gate, Keras 3's
        out = self._forward_kernel(
            x, *self._weights(layer, idx), h0, lengths, layer, idx, run.training, run,
            step_mask=step_mask, zero_output_for_mask=run.zero_output,
            recurrent_mask=recurrent_mask, input_mask=input_mask, ids=ids,
        )  # fmt: skip
        return out.y, self._joined(out), out.workspace

    def backward(self, layer, run, k, idx, record, dy, dh_n, table, input_gradient):
        names = layer._names[idx]
        g = self._backward_kernel(
            record.fed if table is None else table,
            *self._weights(layer, idx),
            record,
            dy,
            dh_n,
            layer,
            idx,
            run,
            input_gradient or table is not None,
            None if table is None else record.fed,  # token input: the ids
        )
        grads = {names[0]: g.dweight_ih, names[1]: g.dweight_hh}
        if names[2] is not None:
            grads[names[2]], grads[names[3]] = g.dbias_ih, g.dbias_hh
        grads.update(self._projection_gradient(layer, idx, g))
        return grads, g.dx, self._joined_gradient(g)

    def _projection_gradient(self, layer, idx, g):
        return {}

    def _states(self, layer, s):
        """A joined state (B, S) (or None) as the kernels' state arguments: the GRU's h itself,
        the LSTM's (h, c) (``_split``)."""
        return (s,)

    def _kernel_options(self, layer, idx, run):
        """Both kernels' keyword options: the forward's cell options (and the LSTM's
        projection)."""
        return self._cell_options(run)

    def _forward_kernel(
        self, x, w_ih, w_hh, b_ih, b_hh, h0, lengths, layer, idx, training, run, **masks
    ):
        return self._forward_function(
            x,
            w_ih,
            w_hh,
            b_ih,
            b_hh,
            *self._states(layer, h0),
            lengths,
            **self._kernel_options(layer, idx, run),
            return_sequences=True,
            keep_workspace=training,
            weight_cache=direction_cache(layer, idx),
            **masks,
        )

    def _backward_kernel(
        self, x, w_ih, w_hh, b_ih, b_hh, record, dy, dh_n, layer, idx, run, input_gradient, ids
    ):
        return self._backward_function(
            x,
            w_ih,
            w_hh,
            b_ih,
            b_hh,
            record.y,
            record.workspace,
            dy,
            *self._states(layer, dh_n),
            **dict(zip(("h0", "c0"), self._states(layer, record.h0))),
            lengths=record.lengths,
            **self._kernel_options(layer, idx, run),
            **self._mask_options(run, record),
            input_gradient=input_gradient,
            ids=ids,
            weight_cache=direction_cache(layer, idx),
        )


class GRUSpec(_GatedSpec):
    """The GRU cell: gates r, z, n (PyTorch's order), one state; ``layer.reset_after``
    chooses PyTorch's form (True: the reset gate after the recurrent product) or Keras's
    other one."""

    name, torch_name, keras_name, onnx_op = "gru", "GRU", "GRU", "GRU"
    torch_cell_name, keras_cell_name, kernel_cell = "GRUCell", "GRUCell", "gru"
    stored_per_step = 4
    num_gates = 3
    gate_orders = {"torch": ("r", "z", "n"), "keras": ("z", "r", "h"), "onnx": ("z", "r", "h")}
    gate_aliases = {"n": "h"}
    _forward_function = staticmethod(functional.gru_forward)
    _backward_function = staticmethod(functional.gru_backward)

    def keras_count(self, layer, group):
        """Keras's GRU: with ``reset_after`` two bias vectors (input and recurrent), 3(DH + HH +
        2H); without, one, 3(DH + HH + H)."""
        n = group["weight_ih"].size + group["weight_hh"].size
        biases = [group[k].size for k in ("bias_ih", "bias_hh") if k in group]
        if not biases:
            return n
        return n + (sum(biases) if layer.reset_after else biases[0])

    def _kernel_cell(self, layer):
        return "gru" if layer._reset_after else "gru_reset_before"

    def _joined(self, out):
        return out.h_n

    def _joined_gradient(self, g):
        return g.dh0

    def step_states(self, layer, run_options, k, x_t, states):
        """One step of stacked layer k from its states as the kernels take them (the tuple
        ``(h,)``, each (B, ·)): the new states, in the same form."""
        return (functional.gru_step(x_t, states[0], *self._weights(layer, k), **run_options),)

    def step(self, layer, run_options, k, x_t, s):
        """One step of stacked layer k from its joined state s (B, S): the new one (B, S)."""
        return self.step_states(layer, run_options, k, x_t, (s,))[0]


class LSTMSpec(_GatedSpec):
    """The LSTM cell: gates i, f, g, o (PyTorch's order), states h (R wide: ``proj_size`` when
    the layer projects, as PyTorch's ``weight_hr_l{k}`` (P, H), else H) and c (H wide). ONNX's
    forms (``layer.peepholes``: ``weight_peephole_l{k}`` (3H,) [p_i | p_f | p_o];
    ``layer.input_forget``; ``layer.cell_clip``) run on ``functional.lstm_form_*``, each
    combination its own kernel policy; without them the plain LSTM's kernels."""

    name, torch_name, keras_name, onnx_op = "lstm", "LSTM", "LSTM", "LSTM"
    torch_cell_name, keras_cell_name, kernel_cell = "LSTMCell", "LSTMCell", "lstm"
    torch_options = ("proj_size",)
    onnx_inputs = 8
    stored_per_step = 5
    num_states = 2
    num_gates = 4
    gate_orders = {
        "torch": ("i", "f", "g", "o"),
        "keras": ("i", "f", "c", "o"),
        "onnx": ("i", "o", "f", "c"),
    }
    gate_aliases = {"g": "c"}
    _forward_function = staticmethod(functional.lstm_forward)
    _backward_function = staticmethod(functional.lstm_backward)

    def output_width(self, layer):
        return layer.proj_size or layer.hidden_size

    def state_widths(self, layer):
        return (self.output_width(layer), layer.hidden_size)

    def parameter_shapes(self, layer, input_width):
        shapes = super().parameter_shapes(layer, input_width)
        if layer.proj_size:
            shapes["weight_hr"] = (layer.proj_size, layer.hidden_size)
        if getattr(layer, "peepholes", False):
            shapes["weight_peephole"] = (3 * layer.hidden_size,)
        return shapes

    def forms(self, layer):
        """The layer's ONNX forms as ``functional.lstm_form_*``'s keywords (peepholes aside),
        or None: the plain LSTM. Read with defaults: layers pickled before the forms existed,
        and the quantized copies, have none."""
        coupled = getattr(layer, "_input_forget", False)
        clip = getattr(layer, "_cell_clip", None)
        if not (getattr(layer, "_peepholes", False) or coupled or clip is not None):
            return None
        return {"input_forget": coupled, "cell_clip": clip}

    def _peephole_name(self, layer, idx):
        if not getattr(layer, "_peepholes", False):
            return None
        return layer._names[idx][0].replace("weight_ih", "weight_peephole", 1)

    def _peepholes(self, layer, idx):
        name = self._peephole_name(layer, idx)
        return None if name is None else layer._params[name]

    def initial_values(self, layer, rng, shapes):
        params = super().initial_values(layer, rng, shapes)
        for name, p in params.items():
            if name.startswith("weight_peephole"):
                p[...] = 0  # ONNX's default P: the plain LSTM's equations to start with
        if layer.unit_forget_bias and layer.bias:
            H = layer.hidden_size
            for name, p in params.items():
                if name.startswith("bias_ih"):
                    p[H : 2 * H] = 1.0
                elif name.startswith("bias_hh"):
                    p[H : 2 * H] = 0.0
        return params

    def keras_count(self, layer, group):
        """Keras's LSTM, 4(DH + HH + H), plus the projection's P·H (which Keras has not)."""
        n = super().keras_count(layer, group)
        extra = ("weight_hr", "weight_peephole")
        return n + sum(group[k].size for k in extra if k in group)

    def _projection_name(self, layer, idx):
        if not layer.proj_size:
            return None
        return layer._names[idx][0].replace("weight_ih", "weight_hr", 1)

    def _projection(self, layer, idx):
        name = self._projection_name(layer, idx)
        return None if name is None else layer._params[name]

    def _projection_gradient(self, layer, idx, g):
        if self.forms(layer) is not None:
            name = self._peephole_name(layer, idx)
            return {} if name is None else {name: g.dpeepholes}
        name = self._projection_name(layer, idx)
        return {} if name is None else {name: g.dweight_hr}

    def _kernel_cell(self, layer):
        return "lstm"

    def _split(self, layer, s):
        if s is None:
            return None, None
        h, c = self.split_state(layer, s)
        return np.ascontiguousarray(h), np.ascontiguousarray(c)

    def _states(self, layer, s):
        return self._split(layer, s)

    def _kernel_options(self, layer, idx, run):
        return {**self._cell_options(run), "weight_hr": self._projection(layer, idx)}

    def _joined(self, out):
        return np.concatenate([out.h_n, out.c_n], axis=-1)

    def _joined_gradient(self, g):
        return np.concatenate([g.dh0, g.dc0], axis=-1)

    def bind_step(self, layer):
        """The forms run on ``fast_step`` (the bound step reads no cell parameters)."""
        return None if self.forms(layer) is not None else super().bind_step(layer)

    def fast_step(self, layer, x_t, states):
        forms = self.forms(layer)
        if forms is None:
            return super().fast_step(layer, x_t, states)
        p, (n_ih, n_hh, n_bi, n_bh) = layer._params, layer._names[0]
        cell, params = lstm_forms.form_cell(self._peepholes(layer, 0), **forms, weight_ih=p[n_ih])
        return _core.gated_step(
            cell, x_t, states[0], states[1], p[n_ih], p[n_hh], p[n_bi] if n_bi else None,
            p[n_bh] if n_bh else None, None, layer._activation, layer._recurrent_activation,
            cell_params=params,
        )  # fmt: skip

    def _forward_kernel(
        self, x, w_ih, w_hh, b_ih, b_hh, h0, lengths, layer, idx, training, run, **masks
    ):
        forms = self.forms(layer)
        if forms is None:
            return super()._forward_kernel(
                x, w_ih, w_hh, b_ih, b_hh, h0, lengths, layer, idx, training, run, **masks
            )
        return functional.lstm_form_forward(
            x, w_ih, w_hh, b_ih, b_hh, *self._states(layer, h0), lengths,
            peepholes=self._peepholes(layer, idx), **forms, **self._cell_options(run),
            return_sequences=True, keep_workspace=training,
            weight_cache=direction_cache(layer, idx), **masks,
        )  # fmt: skip

    def _backward_kernel(
        self, x, w_ih, w_hh, b_ih, b_hh, record, dy, dh_n, layer, idx, run, input_gradient, ids
    ):
        forms = self.forms(layer)
        if forms is None:
            return super()._backward_kernel(
                x, w_ih, w_hh, b_ih, b_hh, record, dy, dh_n, layer, idx, run, input_gradient, ids
            )
        return functional.lstm_form_backward(
            x, w_ih, w_hh, b_ih, b_hh, record.y, record.workspace, dy,
            *self._states(layer, dh_n), **dict(zip(("h0", "c0"), self._states(layer, record.h0))),
            lengths=record.lengths, peepholes=self._peepholes(layer, idx), **forms,
            **self._cell_options(run), **self._mask_options(run, record),
            input_gradient=input_gradient, ids=ids, weight_cache=direction_cache(layer, idx),
        )  # fmt: skip

    def step_states(self, layer, run_options, k, x_t, states):
        """One step of stacked layer k from ``(h, c)``: the new ``(h, c)``."""
        forms = self.forms(layer)
        if forms is not None:
            return functional.lstm_form_step(
                x_t, *states, *self._weights(layer, k), peepholes=self._peepholes(layer, k),
                **forms, **run_options,
            )  # fmt: skip
        return functional.lstm_step(
            x_t,
            *states,
            *self._weights(layer, k),
            weight_hr=self._projection(layer, k),
            **run_options,
        )

    def step(self, layer, run_options, k, x_t, s):
        """One step of stacked layer k from its joined state s (B, R + H): the new one."""
        states = self.step_states(layer, run_options, k, x_t, self._split(layer, s))
        return np.concatenate(states, axis=-1)


class LayerNormLSTMSpec(LSTMSpec):
    """The LayerNorm LSTM (torchaudio's RNN-T predictor cell, ``_CustomLSTM`` with
    ``layer_norm=True``; ``functional.layer_norm_lstm`` gives the equations): the LSTM's gates
    and states, the sum W_ih x + W_hh h normalised over its 4H before the gates and c_t over
    its H, each norm with a weight and a bias of its own (``g_norm_weight_l{k}``,
    ``g_norm_bias_l{k}`` (4H,), ``c_norm_weight_l{k}``, ``c_norm_bias_l{k}`` (H,)). No
    projection, no ONNX op, no Keras layer, no quantized kernels."""

    name, torch_name, kernel_cell = "layer_norm_lstm", "LayerNormLSTM", "layer_norm_lstm"
    keras_name = keras_cell_name = onnx_op = torch_cell_name = None
    torch_options = ()
    stored_per_step = 12

    def output_width(self, layer):
        return layer.hidden_size

    def parameter_shapes(self, layer, input_width):
        shapes = CellSpec.parameter_shapes(self, layer, input_width)
        H = layer.hidden_size
        widths = (4 * H, 4 * H, H, H)
        shapes.update({kind: (w,) for kind, w in zip(_NORM_KINDS, widths)})
        return shapes

    def initial_values(self, layer, rng, shapes):
        """The weights as PyTorch's LSTM draws them; the norms as ``torch.nn.LayerNorm``
        starts them (weights 1, biases 0)."""
        params = CellSpec.initial_values(self, layer, rng, shapes)
        for name, p in params.items():
            if name.startswith(("g_norm_weight", "c_norm_weight")):
                p[...] = 1
            elif name.startswith(("g_norm_bias", "c_norm_bias")):
                p[...] = 0
        return params

    def keras_count(self, layer, group):
        return CellSpec.keras_count(self, layer, group) + sum(group[k].size for k in _NORM_KINDS)

    def _norm_names(self, layer, idx):
        first = layer._names[idx][0]
        return tuple(first.replace("weight_ih", kind, 1) for kind in _NORM_KINDS)

    def _norms(self, layer, idx):
        return tuple(layer._params[n] for n in self._norm_names(layer, idx))

    def _projection_name(self, layer, idx):
        return None

    def _projection_gradient(self, layer, idx, g):
        grads = (g.dg_norm_weight, g.dg_norm_bias, g.dc_norm_weight, g.dc_norm_bias)
        return dict(zip(self._norm_names(layer, idx), grads))

    def _kernel_cell(self, layer):
        return "layer_norm_lstm"

    def _kernel_options(self, layer, idx, run):
        return self._cell_options(run)

    def bind_step(self, layer):
        """None: the bound step (``_core.StepFunction``) reads no norms; step() goes through
        ``fast_step``."""
        return None

    def fast_step(self, layer, x_t, states):
        p, (n_ih, n_hh, n_bi, n_bh) = layer._params, layer._names[0]
        return _core.gated_step(
            "layer_norm_lstm", x_t, states[0], states[1], p[n_ih], p[n_hh],
            p[n_bi] if n_bi else None, p[n_bh] if n_bh else None, None, layer._activation,
            layer._recurrent_activation, cell_params=np.concatenate(self._norms(layer, 0)),
        )  # fmt: skip

    def plain_layer_forward(self, nonlinearity, x, h0, c0, weights, keep, weight_cache=None):
        raise NotImplementedError("the LayerNorm LSTM runs on its own forward (its norms)")

    def _forward_kernel(
        self, x, w_ih, w_hh, b_ih, b_hh, h0, lengths, layer, idx, training, run, **masks
    ):
        return functional.layer_norm_lstm_forward(
            x, w_ih, w_hh, *self._norms(layer, idx), *self._states(layer, h0), lengths,
            bias_ih=b_ih, bias_hh=b_hh, **self._kernel_options(layer, idx, run),
            return_sequences=True, keep_workspace=training,
            weight_cache=direction_cache(layer, idx), **masks,
        )  # fmt: skip

    def _backward_kernel(
        self, x, w_ih, w_hh, b_ih, b_hh, record, dy, dh_n, layer, idx, run, input_gradient, ids
    ):
        return functional.layer_norm_lstm_backward(
            x, w_ih, w_hh, *self._norms(layer, idx), record.y, record.workspace, dy,
            *self._states(layer, dh_n), **dict(zip(("h0", "c0"), self._states(layer, record.h0))),
            lengths=record.lengths, **self._kernel_options(layer, idx, run),
            **self._mask_options(run, record), input_gradient=input_gradient, ids=ids,
            weight_cache=direction_cache(layer, idx),
        )  # fmt: skip

    def step_states(self, layer, run_options, k, x_t, states):
        """One step of stacked layer k from ``(h, c)``: the new ``(h, c)``."""
        w_ih, w_hh, b_ih, b_hh = self._weights(layer, k)
        return functional.layer_norm_lstm_step(
            x_t, *states, w_ih, w_hh, *self._norms(layer, k), bias_ih=b_ih, bias_hh=b_hh,
            **run_options,
        )  # fmt: skip


ELMAN = ElmanSpec()
GRU_SPEC = GRUSpec()
LSTM_SPEC = LSTMSpec()
LAYER_NORM_LSTM_SPEC = LayerNormLSTMSpec()
# the registry: every cell rnnfast's recurrent layers run, asked by name (``cell_by``)
CELLS = (ELMAN, GRU_SPEC, LSTM_SPEC, LAYER_NORM_LSTM_SPEC)


def cell_by(**name):
    """The cell whose attribute has the value given, ``cell_by(onnx_op="GRU")``,
    ``cell_by(torch_name="LSTM")``, ``cell_by(name="rnn")``; None where no cell has it."""
    ((attribute, value),) = name.items()
    return next((c for c in CELLS if getattr(c, attribute) == value), None)
