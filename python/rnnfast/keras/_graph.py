"""The computation of a functional model: its layer calls (nodes) in Keras's order, run on
NumPy arrays forward and backward, with the layer protocol that ``rnnfast.training`` and
``rnnfast.optim`` ask of a model (call, backward, train / eval, parameters and gradients).

Gradients flow along every edge of the graph: into a recurrent layer's initial state from the
layer that returned it (an encoder's ``[h, c]`` handed to a decoder), summed where one tensor
feeds several calls. Padding travels as in ``rnnfast.Sequential`` (``nn.masking``): a Masking
layer or an Embedding with ``mask_zero`` makes a valid mask that reaches the layers after it.

The runner exposes no ``layers`` and is not ``stateful`` itself: ``rnnfast.training`` resets
the state of stateful layers it finds at each epoch and before evaluate / predict, which Keras 3
does not do (its stateful layers carry their state across batches, epochs and calls until
``reset_states()``), so the runner keeps them out of its sight.
"""

from __future__ import annotations

import numpy as np

from ._symbolic import KerasTensor

__all__ = ["Graph", "graph_nodes"]


def graph_nodes(inputs, outputs):
    """The calls between ``inputs`` and ``outputs`` in Keras's order (by depth from the
    outputs, deepest first; ties in the order a depth-first walk from the outputs meets them),
    which is also the order of ``model.layers`` and of the weights."""
    depth, seen_order = {}, {}
    inputs_ids = {id(t) for t in inputs}

    def visit(tensor, d, path):
        node = tensor.node
        if node is None:
            if id(tensor) not in inputs_ids:
                raise ValueError(
                    f"outputs: they depend on {tensor!r}, which is not among the model's inputs; "
                    "pass every Input the outputs read to Model(inputs=[...])"
                )
            return
        if id(node) in path:  # pragma: no cover - symbolic calls cannot make a cycle
            raise ValueError("outputs: the graph has a cycle")
        if depth.get(id(node), -1) >= d and id(node) in seen_order:
            return
        depth[id(node)] = max(depth.get(id(node), 0), d)
        for parent in node.parents():
            visit(parent, d + 1, path | {id(node)})
        seen_order.setdefault(id(node), (len(seen_order), node))

    for t in outputs:
        if not isinstance(t, KerasTensor):
            raise TypeError(
                f"outputs: expected symbolic tensors (layer outputs), got {type(t).__name__}"
            )
        visit(t, 0, frozenset())
    ordered = sorted(seen_order.values(), key=lambda item: (-depth[id(item[1])], item[0]))
    return [node for _, node in ordered]


class Graph:
    """The runner of the calls ``nodes`` from ``inputs`` to ``outputs`` (symbolic tensors).

    ``feed``: None when the model has one input (called with its array), else the arrays of
    every input, which a call selects by sample index (``rnnfast.training`` batches the index
    array and the runner gathers each input's rows; see ``Model``).
    """

    def __init__(self, inputs, outputs, nodes, who):
        self.inputs, self.outputs, self.nodes, self.who = list(inputs), list(outputs), nodes, who
        self.front_layers = []  # each layer once, in node order (its weights' order)
        for node in nodes:
            if any(node.layer is layer for layer in self.front_layers):
                raise NotImplementedError(
                    f"{node.layer._who()} is called more than once in this model (shared "
                    "weights): rnnfast's layers keep one forward for their backward, so give "
                    "each call a layer of its own"
                )
            self.front_layers.append(node.layer)
        self.feed = None
        self.training = True
        self.output_mask = None
        self.batch_first = True
        self.dtype = self.front_layers[0].dtype if self.front_layers else np.float32
        self._used = None

    # ---- forward and backward ------------------------------------------------------------------

    def __call__(self, x, lengths=None, mask=None):
        return self.forward(x, lengths, mask)

    def forward(self, x, lengths=None, mask=None):
        """The outputs for the inputs ``x`` (an array; with a feed, sample indices): one array,
        or a list for several outputs."""
        if lengths is not None or mask is not None:
            raise NotImplementedError(
                f"{'lengths' if lengths is not None else 'mask'}: a Keras model takes its "
                "padding from a Masking layer or an Embedding with mask_zero=True"
            )
        arrays = [x] if self.feed is None else self.feed.gather(x)
        values, valid, suspect = {}, {}, {}  # per tensor: its array, valid mask, suspect
        for tensor, array in zip(self.inputs, arrays):
            values[id(tensor)], valid[id(tensor)], suspect[id(tensor)] = array, None, None
        for node in self.nodes:
            first = id(node.inputs[0])
            states = [values[id(s)] for s in node.states]
            outs, valids, after = node.layer.run(
                values[first], states, valid[first], suspect[first], node.layer._who()
            )
            for tensor, out, v in zip(node.outputs, outs, valids):
                values[id(tensor)], valid[id(tensor)] = out, v
                suspect[id(tensor)] = after if v is None else None
        self._used = (values, x)
        result = [values[id(t)] for t in self.outputs]
        self.output_mask = valid[id(self.outputs[0])] if len(result) == 1 else None
        return result[0] if len(result) == 1 else result

    def backward(self, d_out):
        """Run every call's backward in reverse order; the gradients reach the layers'
        parameters (``grads``). Returns None (a model's inputs need no gradient here)."""
        if self._used is None or not self.training:
            raise RuntimeError(
                f"{self.who}.backward: no training forward to differentiate; call the model "
                "in training mode first"
            )
        values, _ = self._used
        d_outs = list(d_out) if len(self.outputs) > 1 else [d_out]
        grads = {}
        for tensor, d in zip(self.outputs, d_outs):
            if d is not None:
                grads[id(tensor)] = d
        for node in reversed(self.nodes):
            d = [grads.pop(id(t), None) for t in node.outputs]
            if all(g is None for g in d):
                continue  # the call's outputs did not reach the loss
            dx, d_states = node.layer.run_backward(d)
            for tensor, g in zip(node.parents(), [dx, *d_states]):
                if g is None or tensor.node is None or values[id(tensor)].dtype.kind != "f":
                    continue  # a model input, or ids: no gradient needed
                grads[id(tensor)] = g if id(tensor) not in grads else grads[id(tensor)] + g
        self._used = None
        return None

    # ---- the module protocol -------------------------------------------------------------------

    def train(self, mode=True):
        self.training = bool(mode)
        for layer in self.front_layers:
            layer.layer.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def named_parameters(self):
        """The weights fit trains, named ``"{index}.{name}"`` after the layer's place: every
        parameter but those the layers hold fixed (``fixed_parameters``) or frozen."""
        out = []
        for i, layer in enumerate(self.front_layers):
            left_out = {*layer.fixed_parameters(), *layer.frozen_parameters()}
            out += [(f"{i}.{n}", p) for n, p in layer.layer.named_parameters() if n not in left_out]
        return out

    def parameters(self):
        return [p for _, p in self.named_parameters()]

    @property
    def grads(self):
        return {
            f"{i}.{n}": g
            for i, layer in enumerate(self.front_layers)
            for n, g in layer.layer.grads.items()
        }

    def zero_grad(self):
        for layer in self.front_layers:
            layer.layer.zero_grad()


def chain_graph(layers, input_shape, who):
    """The graph of layers applied one after another to inputs of ``input_shape`` (with the
    batch axis): a Sequential run as a functional model."""
    from .layers import Input  # layers does not import this module: no cycle

    first = Input(batch_shape=tuple(input_shape))
    tensor = first
    for layer in layers:
        tensor = layer(tensor)
    outputs = tensor if isinstance(tensor, list) else [tensor]
    return Graph([first], outputs, graph_nodes([first], outputs), who)


def predict_outputs(graph, x, batch_size, samples):
    """Every output of ``graph`` over the samples, batch by batch in inference mode (no state
    reset: Keras's stateful layers carry theirs on), each output joined along the batch axis.
    ``x``: the array fed to the graph (with a feed, the sample indices)."""
    graph.eval()
    parts = None
    for start in range(0, samples, batch_size):
        out = graph(x[start : start + batch_size])
        out = out if isinstance(out, list) else [out]
        parts = [[] for _ in out] if parts is None else parts
        for part, o in zip(parts, out):
            part.append(np.asarray(o))
    if parts is None:
        raise ValueError("x: expected at least one sample, got 0")
    return [np.concatenate(p, axis=0) for p in parts]
