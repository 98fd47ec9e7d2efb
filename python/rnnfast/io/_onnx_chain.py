"""The chain of layers ``rnnfast.io.onnx.export`` writes: a model walked through what it says
of itself, never through a list of layer classes.

- A container says how it runs its children with ``onnx_chain(walk, x, who)``: it hands them
  to ``walk.in_order`` (one after another: ``Sequential``) or itself to ``walk.traced`` (its
  forward, run once to see which child reads what: ``Module``).
- A layer the exporter can write has ``onnx_emit`` (see ``_onnx_export``); ``onnx_input()``
  says what it reads as a model's first layer: ``"ids"`` (token ids), an int (float features
  of that width) or None (whatever the layer after it reads: Dropout).
- A recurrent layer has ``onnx_state_shape()`` (its h0 without the batch axis, ``(rows, H)``):
  it reads the lengths, takes ``h0`` when it is the model itself, and its ``batch_first`` is
  the graph's layout.
"""

from __future__ import annotations

import numpy as np

from ..nn.module import _Recorded, _Tape

__all__ = ["chain_of", "first_input", "is_recurrent"]


def is_recurrent(layer):
    """A layer with a state over time (``onnx_state_shape``): it reads the lengths."""
    return getattr(layer, "onnx_state_shape", None) is not None


def _reads(layer):
    """What ``layer`` reads as a model's first layer (``onnx_input``); "nothing" when it does
    not say (a layer export cannot write)."""
    reads = getattr(layer, "onnx_input", None)
    return "nothing" if reads is None else reads()


def first_input(layers):
    """``"ids"``, or the width of the float features the chain ``layers`` reads; None when no
    layer fixes it. Layers that read whatever comes (Dropout) take the next one's."""
    reads = _reads(layers[0])
    if reads == "ids":
        return reads
    if reads is None:  # a leading pass-through: the width comes from the next layer
        reads = next((r for r in map(_reads, layers) if r is not None), None)
    return None if isinstance(reads, str) else reads


class _Chain:
    """The layers a model runs one after another, and how its call returns: ``whole`` the last
    layer's return as it is (a standalone RNN's ``(y, h_n)``), else a container's (a tuple
    passes on its first element). ``output``: the chain's output on the probe, or None."""

    def __init__(self, layers, names, whole, output=None):
        self.layers, self.names, self.whole, self.output = layers, names, whole, output


def _all_objects(model):
    """The model and every layer and container inside it."""
    out = [model]
    if hasattr(model, "named_children"):
        for _, child in model.named_children():
            out.extend(_all_objects(child))
    return out


def _first_leaf(model):
    while getattr(model, "onnx_chain", None) is not None:
        children = model.named_children()
        if not children:
            return None
        model = children[0][1]
    return model


def _probe_input(model):
    """A small input for one eval forward of a Module (its chain is seen by running it)."""
    first = _first_leaf(model)
    batch_first = getattr(model, "batch_first", None)
    steps, batch = 3, 2
    lead = (batch, steps) if batch_first else (steps, batch)
    reads = _reads(first) if first is not None else None
    if reads == "ids":
        return np.ones(lead, dtype=np.int64)
    if reads is not None and not isinstance(reads, str):
        return np.zeros(lead + (reads,), dtype=first.dtype)
    raise ValueError(
        f"{type(model).__name__}: cannot build an input to see its chain of layers (its first "
        f"child is a {type(first).__name__}); pass example= (an input it accepts)"
    )


def _trace_module(module, x, who):
    """The chain a Module's forward runs on ``x``. ValueError when the forward is not a plain
    chain (each child reads the previous child's output)."""

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
    return _Chain(layers, names, whole, previous)


class _Walk:
    """What a container's ``onnx_chain(walk, x, who)`` hands its children to; ``x`` is the
    container's input on the probe (None when no Module is inside)."""

    @staticmethod
    def in_order(layers, x, who):
        """The chain of ``layers`` run one after another (Sequential's)."""
        chain = _Chain([], [], False)
        for i, layer in enumerate(layers):
            sub = _flatten(layer, x, f"{who}[{i}]")
            chain.layers.extend(sub.layers)
            chain.names.extend(sub.names)
            if x is not None:
                x = sub.output
        chain.output = x
        return chain

    @staticmethod
    def traced(module, x, who):
        """The chain ``module``'s forward runs on ``x`` (Module's)."""
        return _trace_module(module, x, who)


class _NeedsProbe:
    """A walk that only asks whether a container is traced anywhere (it needs a probe)."""

    @staticmethod
    def in_order(layers, x, who):
        return any(_needs_probe(layer) for layer in layers)

    @staticmethod
    def traced(module, x, who):
        return True


def _needs_probe(model):
    chain = getattr(model, "onnx_chain", None)
    return chain is not None and chain(_NeedsProbe, None, "")


def _flatten(model, probe, who):
    """The model as a chain; ``probe`` (an input, or None) runs it when a Module is inside."""
    chain = getattr(model, "onnx_chain", None)
    if chain is not None:
        return chain(_Walk, probe, who)
    if getattr(model, "onnx_emit", None) is not None:
        output = None
        if probe is not None:
            out = model(probe)
            output = out[0] if isinstance(out, tuple) else out
        return _Chain([model], [who], True, output)
    raise TypeError(
        f"{who}: export writes RNN, Embedding, Linear/Dense, Dropout, Sequential and Module "
        f"(a chain of them), and layers that define onnx_emit; got {type(model).__name__}"
    )


def chain_of(model, example):
    """``(chain, batch_first)`` of a model; a Module's forward is run once in eval mode on a
    small input (``example`` or one made from its first layer), then the modes are restored."""
    for obj in _all_objects(model):
        if is_recurrent(obj) and obj.stateful and obj is not model:
            raise ValueError(
                "stateful=True: an RNN inside a container carries its state between calls, "
                "which a graph cannot (export the RNN itself with h0=True and feed h_n back)"
            )
    if not _needs_probe(model):
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
    rnns = [layer for layer in chain.layers if is_recurrent(layer)]
    batch_first = rnns[0].batch_first if rnns else None
    for layer in rnns[1:]:
        if layer.batch_first != batch_first:
            raise ValueError(
                f"{type(model).__name__}: its RNNs disagree on batch_first; build them alike"
            )
    return chain, batch_first
