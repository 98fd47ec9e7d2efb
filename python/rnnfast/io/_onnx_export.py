"""The ONNX exporter behind ``rnnfast.io.onnx.export``: a model as a chain of layers, each
written as standard ONNX ops (``RNN``, ``Gather``, ``MatMul`` + ``Add`` and the glue between
them). See ``rnnfast.io.onnx`` for what is covered and what raises."""

from __future__ import annotations

import numpy as np

from .._validation import check_bool
from ._onnx_graph import Graph, check_opset

__all__ = ["export_model"]


class _Flow:
    """A value between two layers: its ONNX name, what it is ("ids": token ids (T, B);
    "seq": a time-major sequence (T, B, width); "flat": (B, width), no time axis; "state":
    h_n), its width and its padding ("lengths": each sequence padded at its end, as the
    lengths say; "start": padded at its start, Keras's order after go_backwards; None)."""

    def __init__(self, value, kind, width, valid=None, shape=None):
        self.value, self.kind, self.width, self.valid, self.shape = (
            value,
            kind,
            width,
            valid,
            shape,
        )


def _layer_types():
    from ..nn import RNN, Dense, Dropout, Embedding, Module, Sequential

    return RNN, Dense, Dropout, Embedding, Module, Sequential


# ---- the model as a chain of layers ------------------------------------------------------------


class _Chain:
    """The layers a model runs one after another, and how its call returns: ``whole`` the last
    layer's return as it is (a standalone RNN's ``(y, h_n)``), else a container's (a tuple
    passes on its first element)."""

    def __init__(self, layers, names, whole):
        self.layers, self.names, self.whole = layers, names, whole


def _contains_module(model):
    RNN, Dense, Dropout, Embedding, Module, Sequential = _layer_types()
    if isinstance(model, Module):
        return True
    if isinstance(model, Sequential):
        return any(_contains_module(layer) for layer in model.layers)
    return False


def _all_objects(model):
    """The model and every layer and container inside it."""
    out = [model]
    if hasattr(model, "named_children"):
        for _, child in model.named_children():
            out.extend(_all_objects(child))
    return out


def _first_leaf(model):
    RNN, Dense, Dropout, Embedding, Module, Sequential = _layer_types()
    while isinstance(model, (Sequential, Module)):
        children = model.named_children()
        if not children:
            return None
        model = children[0][1]
    return model


def _probe_input(model):
    """A small input for one eval forward of a Module (its chain is seen by running it)."""
    RNN, Dense, Dropout, Embedding, Module, Sequential = _layer_types()
    first = _first_leaf(model)
    batch_first = getattr(model, "batch_first", None)
    steps, batch = 3, 2
    lead = (batch, steps) if batch_first else (steps, batch)
    if isinstance(first, Embedding):
        return np.ones(lead, dtype=np.int64)
    if isinstance(first, RNN):
        return np.zeros(lead + (first.input_size,), dtype=first.dtype)
    if isinstance(first, Dense):
        return np.zeros(lead + (first.in_features,), dtype=first.dtype)
    raise ValueError(
        f"{type(model).__name__}: cannot build an input to see its chain of layers (its first "
        f"child is a {type(first).__name__}); pass example= (an input it accepts)"
    )


def _trace_module(module, x, who):
    """The chain a Module's forward runs on ``x``: ``(layers, names, output, whole)``. ValueError
    when the forward is not a plain chain (each child reads the previous child's output)."""
    from ..nn.module import _Recorded, _Tape

    class Recording(_Tape):
        def __init__(self):
            super().__init__(False)
            self.raw = []

        def call(self, layer, name, args, kwargs):
            self.raw.append((layer, name, args, dict(kwargs)))
            return super().call(layer, name, args, dict(kwargs))

    tape = Recording()
    tape.inputs = [x]
    tape.note(x, None, None)
    object.__setattr__(module, "_tape", tape)
    try:
        out = module.forward(x)
    finally:
        object.__setattr__(module, "_tape", None)
    if not tape.calls:
        raise ValueError(f"{who}: its forward calls no child layer; nothing to export")
    layers, names = [], []
    previous = x
    for (layer, name, args, kwargs), call in zip(tape.raw, tape.calls):
        child = f"{who}.{name[len('self.') :]}" if name.startswith("self.") else name
        if call.inputs[0] is not previous:
            raise ValueError(
                f"{who}: its forward is not a plain chain of children: the input of {child} is "
                "not the previous child's output (an operation between layers, or a layer "
                "reading an earlier value); export writes chains of layers only"
            )
        extra = [k for k, v in kwargs.items() if v is not None and k not in ("embedding", "x")]
        if len(args) > 1 or extra:
            raise ValueError(
                f"{who}: {child} is called with more than its input "
                f"({', '.join(extra) or 'a positional argument'}); export writes chains of "
                "layers, each reading the previous one's output"
            )
        embedding = kwargs.get("embedding")
        if embedding is not None:
            layers.append(embedding._layer if isinstance(embedding, _Recorded) else embedding)
            names.append(f"{child}(embedding)")
        if hasattr(layer, "named_children"):
            sub = _flatten(layer, call.inputs[0], child)
            layers.extend(sub.layers)
            names.extend(sub.names)
        else:
            layers.append(layer)
            names.append(child)
        result = call.output
        previous = result[0] if isinstance(result, tuple) else result
    last = tape.calls[-1].output
    if out is last:
        whole = True
    elif out is previous:
        whole = False
    else:
        raise ValueError(
            f"{who}: its forward returns something other than its last child's output; "
            "export writes chains of layers only"
        )
    return layers, names, previous, whole


def _flatten(model, probe, who):
    """The model as a chain; ``probe`` (an input, or None) runs it when a Module is inside."""
    RNN, Dense, Dropout, Embedding, Module, Sequential = _layer_types()
    if isinstance(model, Sequential):
        layers, names = [], []
        x = probe
        for i, layer in enumerate(model.layers):
            sub = _flatten(layer, x, f"{who}[{i}]")
            layers.extend(sub.layers)
            names.extend(sub.names)
            if x is not None:
                x = sub.output
        chain = _Chain(layers, names, False)
        chain.output = x
        return chain
    if isinstance(model, Module):
        layers, names, out, whole = _trace_module(model, probe, who)
        chain = _Chain(layers, names, whole)
        chain.output = out
        return chain
    if isinstance(model, (RNN, Dense, Dropout, Embedding)):
        chain = _Chain([model], [who], True)
        if probe is not None:
            out = model(probe)
            chain.output = out[0] if isinstance(out, tuple) else out
        else:
            chain.output = None
        return chain
    raise TypeError(
        f"{who}: export writes RNN, Embedding, Linear/Dense, Dropout, Sequential and Module "
        f"(a chain of them); got {type(model).__name__}"
    )


def chain_of(model, example):
    """``(chain, batch_first)`` of a model; a Module's forward is run once in eval mode on a
    small input (``example`` or one made from its first layer), then the modes are restored."""
    RNN, Dense, Dropout, Embedding, Module, Sequential = _layer_types()
    for obj in _all_objects(model):
        if isinstance(obj, RNN) and obj.stateful and obj is not model:
            raise ValueError(
                "stateful=True: an RNN inside a container carries its state between calls, "
                "which a graph cannot (export the RNN itself with h0=True and feed h_n back)"
            )
    if not _contains_module(model):
        chain = _flatten(model, None, type(model).__name__)
    else:
        probe = _probe_input(model) if example is None else example
        objects = _all_objects(model)
        modes = [(obj, obj.training) for obj in objects]
        try:
            for obj in objects:
                obj.training = False
            chain = _flatten(model, probe, type(model).__name__)
        finally:
            for obj, mode in modes:
                obj.training = mode
    rnns = [layer for layer in chain.layers if isinstance(layer, RNN)]
    batch_first = rnns[0].batch_first if rnns else None
    for layer in rnns[1:]:
        if layer.batch_first != batch_first:
            raise ValueError(
                f"{type(model).__name__}: its RNNs disagree on batch_first; build them alike"
            )
    return chain, batch_first


# ---- what ONNX cannot express ------------------------------------------------------------------


def _float_params(layer):
    """A layer's float parameters by name; a quantized copy's (rnnfast.quantize) dequantized:
    the ONNX RNN op has no integer or bf16 weights, so a quantized model is exported with the
    weights it computes with, in float32 (the graph's activations are not rounded as the
    quantized kernels round them: its outputs differ from the copy's by that rounding alone)."""
    dequantized = getattr(layer, "dequantized_params", None)
    return dequantized() if dequantized is not None else layer._params


def _check_rnn(layer, who):
    alphas = layer.alpha if isinstance(layer.alpha, list) else [layer.alpha]
    if any(float(a) != 1.0 for a in alphas):
        raise ValueError(
            f"{who}: alpha={layer.alpha} (leaky units): the ONNX RNN op computes "
            "h_t = act(W x_t + R h_{t-1} + b) only, with no leak; export a layer with alpha=1.0"
        )
    dilation = getattr(layer, "dilation", 1)
    if dilation not in (1, None) and not (
        isinstance(dilation, (list, tuple)) and all(d == 1 for d in dilation)
    ):
        raise ValueError(
            f"{who}: dilation={dilation}: the ONNX RNN op steps through every time step; "
            "export a layer without dilation"
        )
    if layer.training:
        for option, value in (
            ("dropout", layer.dropout if layer.num_layers > 1 else 0.0),
            ("input_dropout", layer.input_dropout),
            ("recurrent_dropout", layer.recurrent_dropout),
        ):
            if value > 0.0:
                raise ValueError(
                    f"{who}: {option}={value} in training mode draws random masks, which the "
                    "exported inference graph does not; call model.eval() before export"
                )


def _check_dropout(layer, who):
    if layer.training and layer.p > 0.0:
        raise ValueError(
            f"{who}: Dropout(p={layer.p}) in training mode draws random masks, which the "
            "exported inference graph does not; call model.eval() before export"
        )


# ---- the exporter ------------------------------------------------------------------------------


class _Exporter:
    def __init__(self, graph, batch_first, lengths_input):
        self.g = graph
        self.batch_first = batch_first
        self.len64 = lengths_input  # int64 (B,) lengths (a graph input or computed), or None
        self._len32 = None

    def lengths32(self):
        if self._len32 is None:
            self._len32 = self.g.cast(self.len64, self.g.onnx.TensorProto.INT32)
        return self._len32

    # ---- layers ---------------------------------------------------------------------------

    def embedding(self, layer, flow, who, mark_padding, padding_at_end):
        g = self.g
        if flow.kind != "ids":
            raise ValueError(
                f"{who}: an Embedding reads token ids, so it must be the model's first layer"
            )
        table = g.initializer(layer.weight, "embedding.weight")
        out = g.op("Gather", [table, flow.value], axis=0)
        valid = flow.valid
        pads = []
        if mark_padding and layer.mask_zero:
            pads.append(0)
        if mark_padding and layer.padding_idx is not None and layer.padding_idx not in pads:
            pads.append(layer.padding_idx)
        if pads:
            option = "mask_zero=True" if layer.mask_zero else f"padding_idx={layer.padding_idx}"
            if not padding_at_end:
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
        return _Flow(out, "seq", layer.embedding_dim, valid)

    def dense(self, layer, flow, who):
        g = self.g
        if flow.kind not in ("seq", "flat") or flow.width != layer.in_features:
            raise ValueError(
                f"{who}: Linear({layer.in_features}, {layer.out_features}) reads features of "
                f"width {layer.in_features}, got {self._what(flow)}"
            )
        p = _float_params(layer)
        weight = g.initializer(np.ascontiguousarray(p["weight"].T), "linear.weight")
        out = g.op("MatMul", [flow.value, weight])
        if layer.bias:
            out = g.op("Add", [out, g.initializer(p["bias"], "linear.bias")])
        return _Flow(out, flow.kind, layer.out_features, flow.valid)

    @staticmethod
    def _what(flow):
        if flow.kind == "ids":
            return "token ids"
        if flow.kind in ("seq", "flat"):
            return f"width {flow.width}"
        return flow.kind

    def rnn(self, layer, flow, who, h0):
        """The RNN's return as its call gives it: a _Flow, a tuple or a list of them."""
        g = self.g
        if flow.kind != "seq" or flow.width != layer.input_size:
            raise ValueError(
                f"{who}: RNN(input_size={layer.input_size}) reads sequences of width "
                f"{layer.input_size}, got {self._what(flow)}"
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
        p = _float_params(layer)
        act = "Tanh" if layer.nonlinearity == "tanh" else "Relu"
        direction = "bidirectional" if dirs == 2 else ("reverse" if back else "forward")
        inp, states = flow.value, []
        for k in range(L):
            order = [k * dirs + d for d in range(dirs)]
            if swap:
                order = order[::-1]
            names = [layer._names[i] for i in order]
            w = g.initializer(np.stack([p[n[0]] for n in names]), f"rnn.W_l{k}")
            r = g.initializer(np.stack([p[n[1]] for n in names]), f"rnn.R_l{k}")
            b = ""
            if layer.bias:
                b = g.initializer(
                    np.stack([np.concatenate([p[n[2]], p[n[3]]]) for n in names]), f"rnn.B_l{k}"
                )
            init = ""
            if h0 is not None:
                init = g.gather(h0, order, 0) if swap else g.slice(h0, k * dirs, (k + 1) * dirs, 0)
            y, y_h = g.op(
                "RNN",
                [inp, w, r, b, len32, init],
                n_out=2,
                hidden_size=H,
                direction=direction,
                activations=[act] * dirs,
            )
            if lengths and h0 is not None:
                # the op's Y_h of an empty sequence is zeros; rnnfast's h_n is then h0
                ran = g.unsqueeze(g.op("Greater", [self.len64, g.const(0)]), [0, 2])
                y_h = g.op("Where", [ran, y_h, init])
            if dirs == 1:
                seq = g.squeeze(y, [1])
            else:
                t = g.transpose(y, [0, 2, 1, 3])
                if swap:
                    t = g.gather(t, [1, 0], 2)
                seq = g.reshape(t, [0, 0, -1])
            if swap:
                y_h = g.gather(y_h, [1, 0], 0)
            if layer.residual and k > 0:
                seq = g.op("Add", [seq, inp])
            states.append(y_h)
            inp = seq
        h_n = states[0] if L == 1 else g.op("Concat", states, axis=0)
        h_n = _Flow(h_n, "state", H, shape=[L * dirs, "B", H])

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
        return [*parts, h_n] if parts is not None else (result, h_n)

    # ---- outputs --------------------------------------------------------------------------

    def output(self, flow, name):
        g = self.g
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
    RNN, Dense, Dropout, Embedding, Module, Sequential = _layer_types()
    lengths = check_bool("lengths", lengths)
    h0 = check_bool("h0", h0)
    padding_at_end = check_bool("padding_at_end", padding_at_end)
    opset = check_opset(opset)
    if h0 and not isinstance(model, RNN):
        raise ValueError(
            f"h0=True: a {type(model).__name__} hands its RNNs no initial state (only a "
            "standalone RNN takes h0)"
        )
    if isinstance(model, RNN) and model.stateful and not h0:
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
        if isinstance(layer, RNN):
            _check_rnn(layer, who)
        elif isinstance(layer, Dropout):
            _check_dropout(layer, who)
    graph = Graph(opset, next(iter(dtypes)))
    g = graph
    TP = g.onnx.TensorProto
    first = layers[0]
    lead = ["B", "T"] if batch_first else ["T", "B"]
    if isinstance(first, Embedding):
        x = g.add_input("x", TP.INT64, lead)
        flow = _Flow(g.transpose(x, [1, 0]) if batch_first else x, "ids", None)
    else:
        width = {RNN: "input_size", Dense: "in_features"}
        attr = next((a for cls, a in width.items() if isinstance(first, cls)), None)
        if attr is None:  # a leading Dropout: the width comes from the next layer
            nxt = next((la for la in layers if not isinstance(la, Dropout)), None)
            attr = next((a for cls, a in width.items() if isinstance(nxt, cls)), None)
            if attr is None:
                raise ValueError(f"{type(model).__name__}: has no layer that fixes its input width")
            first = nxt
        d = getattr(first, attr)
        x = g.add_input("x", g.elem, lead + [d])
        flow = _Flow(g.transpose(x, [1, 0, 2]) if batch_first else x, "seq", d)
    h0_name = None
    if h0:
        h0_name = g.add_input(
            "h0", g.elem, [model.num_layers * model.num_directions, "B", model.hidden_size]
        )
    len_name = g.add_input("lengths", TP.INT64, ["B"]) if lengths else None
    ex = _Exporter(g, batch_first, len_name)
    if lengths:
        flow.valid = "lengths"
    has_rnn_after = [any(isinstance(la, RNN) for la in layers[i + 1 :]) for i in range(len(layers))]
    result = flow
    for i, (layer, who) in enumerate(zip(layers, chain.names)):
        if not isinstance(result, _Flow):
            raise ValueError(
                f"{who}: reads the list [forward, backward] of an RNN with merge_mode=None; "
                "only the last layer may return it"
            )
        if isinstance(layer, Embedding):
            result = ex.embedding(
                layer, result, who, mark_padding=has_rnn_after[i], padding_at_end=padding_at_end
            )
        elif isinstance(layer, Dense):
            result = ex.dense(layer, result, who)
        elif isinstance(layer, Dropout):
            pass
        elif isinstance(layer, RNN):
            result = ex.rnn(layer, result, who, h0_name)
        else:
            raise TypeError(f"{who}: export cannot write a {type(layer).__name__}")
        last = i == len(layers) - 1
        if isinstance(result, tuple) and not (last and chain.whole):
            result = result[0]
    outputs = []
    parts = result if isinstance(result, (tuple, list)) else [result]
    for part in parts:
        outputs.extend(part if isinstance(part, list) else [part])
    # [forward, backward] of merge_mode=None: y_forward, y_backward; h_n last
    names = (
        ["y"] if len(outputs) - (outputs[-1].kind == "state") == 1 else ["y_forward", "y_backward"]
    )
    if outputs[-1].kind == "state":
        names.append("h_n")
    for flow, name in zip(outputs, names):
        ex.output(flow, name)
    onnx_model = g.model(doc=f"rnnfast {type(model).__name__}")
    if path is not None:
        g.onnx.save(onnx_model, path)
    return onnx_model
