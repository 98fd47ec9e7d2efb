"""The ONNX exporter behind ``rnnfast.io.onnx.export``: a model as a chain of layers
(``_onnx_chain``), each written as standard ONNX ops (``RNN``, ``Gather``, ``MatMul`` + ``Add``
and the glue between them) by the layer itself, through the protocol below; no list of layer
classes. See ``rnnfast.io.onnx`` for what is covered and what raises.

The emitter protocol (duck-typed: nn never imports io):

- ``layer.onnx_emit(exporter, flow, who) -> flows``: write the layer reading ``flow`` (a
  ``_Flow``) and return what its call returns, as flows (a flow; PyTorch's ``(y, h_n)``; the
  list ``[forward, backward(, h_n)]`` of merge_mode=None). ``who`` names the layer in messages.
  The layer hands its own facts (weights in ONNX's layout, which ids are padding, ...) to one
  of the exporter's writers, ``linear``, ``embedding`` and ``recurrent``, which hold the ONNX
  specifics; any other computation writes nodes on ``exporter.graph`` (``op``, ``initializer``,
  ``const``: ``_onnx_graph.Graph``) and returns ``flow.derive(value, width)``.
- ``layer.onnx_check(who)``, optional: raise ValueError for what the inference graph cannot hold
  in the layer's present state (random masks in training mode, options the ops lack); called
  for every layer before any node is written.
- ``onnx_input()`` and ``onnx_state_shape()``: what the chain asks (``_onnx_chain``).
"""

from __future__ import annotations

import numpy as np

from .._validation import check_bool
from ._onnx_chain import chain_of, first_input, is_recurrent
from ._onnx_graph import Graph, check_opset

__all__ = ["export_model"]


class _Flow:
    """A value between two layers: its ONNX name, what it is ("ids": token ids (T, B);
    "seq": a time-major sequence (T, B, width); "flat": (B, width), no time axis; "state":
    h_n), its width and its padding ("lengths": each sequence padded at its end, as the
    lengths say; "start": padded at its start, Keras's order after go_backwards; None)."""

    def __init__(self, value, kind, width, valid=None, shape=None, name=None):
        self.value, self.kind, self.width, self.valid, self.shape = (
            value,
            kind,
            width,
            valid,
            shape,
        )
        self.name = name  # a final state's graph output: "h_n" or "c_n"

    def derive(self, value, width=None):
        """The flow of a layer that keeps this one's kind and padding: ``value``, of ``width``
        (default: the same)."""
        return _Flow(value, self.kind, self.width if width is None else width, self.valid)


# ---- the exporter ------------------------------------------------------------------------------


class _Exporter:
    """What a layer's ``onnx_emit`` writes with: ``graph``, the writers of the ONNX patterns
    rnnfast's layers use, the model's lengths and the options of the export."""

    def __init__(self, graph, batch_first, lengths_input, h0, padding_at_end, c0=None):
        self.graph = graph
        self.batch_first = batch_first
        self.len64 = lengths_input  # int64 (B,) lengths (a graph input or computed), or None
        self._len32 = None
        self.h0 = h0  # the graph input h0 (a standalone recurrent layer's), or None
        self.c0 = c0  # and c0, a two-state cell's (the LSTM's), or None
        self.padding_at_end = padding_at_end
        self.lengths_read_later = False  # a layer after the one being written reads lengths

    def lengths32(self):
        """The model's lengths as the ONNX RNN op's ``sequence_lens`` (int32)."""
        if self._len32 is None:
            self._len32 = self.graph.cast(self.len64, self.graph.onnx.TensorProto.INT32)
        return self._len32

    @staticmethod
    def float_params(layer):
        """A layer's float parameters by name; a quantized copy's (rnnfast.quantize)
        dequantized: the ONNX RNN op has no integer or bf16 weights, so a quantized model is
        exported with the weights it computes with, in float32 (the graph's activations are not
        rounded as the quantized kernels round them: its outputs differ from the copy's by that
        rounding alone)."""
        dequantized = getattr(layer, "dequantized_params", None)
        return dequantized() if dequantized is not None else layer._params

    @staticmethod
    def _what(flow):
        if flow.kind == "ids":
            return "token ids"
        if flow.kind in ("seq", "flat"):
            return f"width {flow.width}"
        return flow.kind

    # ---- the writers ----------------------------------------------------------------------

    def embedding(self, flow, who, table, pads, option):
        """``Gather`` of the rows of ``table`` (V, width) the ids name. ``pads``: the ids that
        mark padding (``option`` names the layer's option in messages); when a later layer
        reads lengths they are counted from the ids (which needs padding_at_end)."""
        g = self.graph
        if flow.kind != "ids":
            raise ValueError(
                f"{who}: an Embedding reads token ids, so it must be the model's first layer"
            )
        out = g.op("Gather", [g.initializer(table, "embedding.weight"), flow.value], axis=0)
        valid = flow.valid
        if pads and self.lengths_read_later:
            if not self.padding_at_end:
                raise ValueError(
                    f"{who}: {option} marks padding wherever it appears in the ids (Keras's "
                    "general mask), which the ONNX RNN op cannot express (it takes lengths "
                    "only); pass padding_at_end=True to promise the padding comes only at "
                    "each sequence's end: the graph then counts the other ids as the lengths"
                )
            real = None
            for pad in pads:
                keep = g.op("Not", [g.op("Equal", [flow.value, g.const(pad)])])
                real = keep if real is None else g.op("And", [real, keep])
            counts = g.op(
                "ReduceSum",
                [g.cast(real, g.onnx.TensorProto.INT64), g.const([0])],
                keepdims=0,
            )
            self.len64 = counts if self.len64 is None else g.op("Min", [self.len64, counts])
            self._len32 = None
            valid = "lengths"
        return _Flow(out, "seq", table.shape[1], valid)

    def linear(self, flow, who, weight, bias, label):
        """``x W^T + b`` over the last axis: ``weight`` (out, in) as PyTorch's Linear holds
        it, ``bias`` (out,) or None; ``label`` names the layer in messages."""
        g = self.graph
        width = weight.shape[1]
        if flow.kind not in ("seq", "flat") or flow.width != width:
            raise ValueError(
                f"{who}: {label} reads features of width {width}, got {self._what(flow)}"
            )
        out = g.op(
            "MatMul", [flow.value, g.initializer(np.ascontiguousarray(weight.T), "linear.weight")]
        )
        if bias is not None:
            out = g.op("Add", [out, g.initializer(bias, "linear.bias")])
        return flow.derive(out, weight.shape[0])

    def recurrent(
        self,
        layer,
        flow,
        who,
        *,
        op,
        activations,
        weights,
        label,
        num_states=1,
        attributes=None,
        peepholes=None,
        activation_alpha=None,
        activation_beta=None,
    ):
        """A recurrent layer's return as its call gives it (a _Flow, a tuple or a list of
        them): one ``op`` node (the ONNX ``RNN`` op's inputs and outputs) per stacked layer
        with ``activations`` per direction and ``weights``, per (layer, direction) in
        PyTorch's order l * dirs + d, ``(W, R, B)`` in ONNX's layout and gate order (B None
        without bias). The stack, the directions, go_backwards, residual, h0, the lengths and
        the API forms (Keras's last output, return_state, merge_mode) are read from the
        layer's options, as rnnfast's stack runner reads them.

        The gated ops (``GRU``, ``LSTM``) take the same inputs plus ``initial_c`` for a cell of
        ``num_states=2`` (the LSTM: its final states are then the pair ``(h_n, c_n)``);
        ``attributes`` adds the op's own (``linear_before_reset``; the LSTM's ``input_forget``
        and ``clip``), ``peepholes`` the LSTM's P per (layer, direction) as ``weights``, and ``activation_alpha`` /
        ``activation_beta`` the parameters of one direction's activations (HardSigmoid's)."""
        g = self.graph
        if flow.kind != "seq" or flow.width != layer.input_size:
            raise ValueError(
                f"{who}: {label} reads sequences of width {layer.input_size}, got "
                f"{self._what(flow)}"
            )
        if flow.valid == "start":
            raise ValueError(
                f"{who}: reads the output of an RNN with go_backwards=True and lengths, which is "
                "padded at each sequence's start (Keras's order), so this RNN would run with "
                "Keras's general mask, which the ONNX RNN op cannot express (it takes lengths "
                "only)"
            )
        H, dirs, L = layer.hidden_size, layer.num_directions, layer.num_layers
        lengths = flow.valid == "lengths"
        len32 = self.lengths32() if lengths else ""
        back = layer.go_backwards
        # go_backwards reads each sequence from its end: the ONNX op's "reverse" direction,
        # which writes its outputs at the original time positions. A bidirectional layer's
        # two directions then trade places: the ONNX forward direction runs rnnfast's reverse.
        swap = back and dirs == 2
        direction = "bidirectional" if dirs == 2 else ("reverse" if back else "forward")
        # the initial states the graph takes (h0, and c0 of a two-state cell: the LSTM)
        inits = [self.h0] + ([self.c0] if num_states == 2 else [])
        inp, states = flow.value, [[] for _ in range(num_states)]
        for k in range(L):
            order = [k * dirs + d for d in range(dirs)]
            if swap:
                order = order[::-1]
            W, R, B = zip(*(weights[i] for i in order))
            w = g.initializer(np.stack(W), f"{op.lower()}.W_l{k}")
            r = g.initializer(np.stack(R), f"{op.lower()}.R_l{k}")
            b = "" if B[0] is None else g.initializer(np.stack(B), f"{op.lower()}.B_l{k}")
            starts = []
            for init in inits:
                if init is None:
                    starts.append("")
                elif swap:
                    starts.append(g.gather(init, order, 0))
                else:
                    starts.append(g.slice(init, k * dirs, (k + 1) * dirs, 0))
            extra = dict(attributes or {})
            if activation_alpha:
                extra["activation_alpha"] = list(activation_alpha) * dirs
            if activation_beta:
                extra["activation_beta"] = list(activation_beta) * dirs
            ins = [inp, w, r, b, len32, *starts]
            if peepholes is not None:
                P = np.stack([peepholes[i] for i in order])
                ins.append(g.initializer(P, f"{op.lower()}.P_l{k}"))
            y, *finals = g.op(
                op,
                ins,
                n_out=1 + num_states,
                hidden_size=H,
                direction=direction,
                activations=list(activations) * dirs,
                **extra,
            )
            for s, (final, start) in enumerate(zip(finals, starts)):
                if lengths and start:
                    # the op's final state of an empty sequence is zeros; rnnfast's is the
                    # initial state
                    ran = g.unsqueeze(g.op("Greater", [self.len64, g.const(0)]), [0, 2])
                    final = g.op("Where", [ran, final, start])
                if swap:
                    final = g.gather(final, [1, 0], 0)
                states[s].append(final)
            if dirs == 1:
                seq = g.squeeze(y, [1])
            else:
                t = g.transpose(y, [0, 2, 1, 3])
                if swap:
                    t = g.gather(t, [1, 0], 2)
                seq = g.reshape(t, [0, 0, -1])
            if layer.residual and k > 0:
                seq = g.op("Add", [seq, inp])
            inp = seq
        finals = []
        for s, name in zip(states, ("h_n", "c_n")):
            value = s[0] if L == 1 else g.op("Concat", s, axis=0)
            finals.append(_Flow(value, "state", H, shape=[L * dirs, "B", H], name=name))
        h_n = finals[0] if num_states == 1 else tuple(finals)

        keras = layer.return_sequences is not None or layer.return_state is not None
        last = keras and not layer.return_sequences
        width = dirs * H
        if last:
            first = g.gather(inp, 0, 0)
            if lengths:
                ends = g.op("ReverseSequence", [inp, self.len64], batch_axis=1, time_axis=0)
                end = g.gather(ends, 0, 0)
            else:
                end = g.gather(inp, -1, 0)
            if dirs == 1:
                res = first if back else end
            else:
                a, c = (first, end) if back else (end, first)
                res = g.op("Concat", [g.slice(a, 0, H, 1), g.slice(c, H, 2 * H, 1)], axis=1)
            kind, valid = "flat", None
        else:
            res = g.flip(inp, 0) if back else inp
            kind = "seq"
            valid = ("start" if back else "lengths") if lengths else None
        parts = None
        if dirs == 2 and layer.merge_mode != "concat":
            f, r_ = g.slice(res, 0, H, -1), g.slice(res, H, 2 * H, -1)
            if layer.merge_mode is None:
                parts = [_Flow(f, kind, H, valid), _Flow(r_, kind, H, valid)]
            elif layer.merge_mode == "sum":
                res = g.op("Add", [f, r_])
            elif layer.merge_mode == "mul":
                res = g.op("Mul", [f, r_])
            else:
                res = g.op("Mul", [g.op("Add", [f, r_]), g.fconst(0.5)])
            width = H
        result = parts if parts is not None else _Flow(res, kind, width, valid)
        if not keras:
            return (result, h_n)
        if not layer.return_state:
            return result
        if parts is not None:
            return [*parts, *finals]
        return (result, *finals)

    # ---- outputs --------------------------------------------------------------------------

    def output(self, flow, name):
        g = self.graph
        value, shape = flow.value, flow.shape
        if flow.kind == "seq":
            if self.batch_first:
                value = g.transpose(value, [1, 0, 2])
                shape = ["B", "T", flow.width]
            else:
                shape = ["T", "B", flow.width]
        elif flow.kind == "flat":
            shape = ["B", flow.width]
        elif flow.kind == "ids":
            raise ValueError("the model returns its token ids unchanged; nothing to export")
        g.add_output(value, name, g.elem, shape)


def export_model(
    model, path, *, lengths=False, h0=False, opset=None, padding_at_end=False, example=None
):
    lengths = check_bool("lengths", lengths)
    h0 = check_bool("h0", h0)
    padding_at_end = check_bool("padding_at_end", padding_at_end)
    opset = check_opset(opset)
    if h0 and not is_recurrent(model):
        raise ValueError(
            f"h0=True: a {type(model).__name__} hands its RNNs no initial state (only a "
            "standalone RNN takes h0)"
        )
    if is_recurrent(model) and model.stateful and not h0:
        raise ValueError(
            "stateful=True: the layer starts each call from the state the last one left, which "
            "a graph cannot keep; export with h0=True and feed h_n back as h0"
        )
    chain, batch_first = chain_of(model, example)
    layers = chain.layers
    dtypes = {np.dtype(layer.dtype) for layer in layers}
    if len(dtypes) != 1:
        raise TypeError(
            f"{type(model).__name__}: its layers mix dtypes {sorted(d.name for d in dtypes)}"
        )
    for layer, who in zip(layers, chain.names):
        check = getattr(layer, "onnx_check", None)
        if check is not None:
            check(who)
    g = Graph(opset, next(iter(dtypes)))
    TP = g.onnx.TensorProto
    lead = ["B", "T"] if batch_first else ["T", "B"]
    reads = first_input(layers)
    if reads == "ids":
        x = g.add_input("x", TP.INT64, lead)
        flow = _Flow(g.transpose(x, [1, 0]) if batch_first else x, "ids", None)
    elif reads is None:
        raise ValueError(f"{type(model).__name__}: has no layer that fixes its input width")
    else:
        x = g.add_input("x", g.elem, lead + [reads])
        flow = _Flow(g.transpose(x, [1, 0, 2]) if batch_first else x, "seq", reads)
    h0_name = c0_name = None
    if h0:
        rows, hidden = model.onnx_state_shape()
        h0_name = g.add_input("h0", g.elem, [rows, "B", hidden])
        if getattr(getattr(model, "cell", None), "num_states", 1) == 2:
            c0_name = g.add_input("c0", g.elem, [rows, "B", hidden])
    len_name = g.add_input("lengths", TP.INT64, ["B"]) if lengths else None
    ex = _Exporter(g, batch_first, len_name, h0_name, padding_at_end, c0=c0_name)
    if lengths:
        flow.valid = "lengths"
    result = flow
    for i, (layer, who) in enumerate(zip(layers, chain.names)):
        if not isinstance(result, _Flow):
            raise ValueError(
                f"{who}: reads the list [forward, backward] of an RNN with merge_mode=None; "
                "only the last layer may return it"
            )
        emit = getattr(layer, "onnx_emit", None)
        if emit is None:
            raise TypeError(f"{who}: export cannot write a {type(layer).__name__}")
        ex.lengths_read_later = any(map(is_recurrent, layers[i + 1 :]))
        result = emit(ex, result, who)
        last = i == len(layers) - 1
        if isinstance(result, tuple) and not (last and chain.whole):
            result = result[0]
    outputs = []
    parts = result if isinstance(result, (tuple, list)) else [result]
    for part in parts:
        outputs.extend(part if isinstance(part, (list, tuple)) else [part])
    # [forward, backward] of merge_mode=None: y_forward, y_backward; h_n (and c_n) last
    ys = [flow for flow in outputs if flow.kind != "state"]
    names = ["y"] if len(ys) == 1 else ["y_forward", "y_backward"]
    names += [flow.name for flow in outputs if flow.kind == "state"]
    for flow, name in zip(ys + [f for f in outputs if f.kind == "state"], names):
        ex.output(flow, name)
    onnx_model = g.model(doc=f"rnnfast {type(model).__name__}")
    if path is not None:
        g.onnx.save(onnx_model, path)
    return onnx_model
