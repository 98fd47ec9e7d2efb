"""Keras's symbolic tensors: what ``Input(...)`` and a layer called on one return
(``y = LSTM(8)(inputs)``), a shape and the call that made it, from which ``Model(inputs,
outputs)`` reads its graph. They hold no values; the model computes with NumPy arrays."""

from __future__ import annotations

__all__ = ["KerasTensor", "Node", "is_symbolic"]


class KerasTensor:
    """A symbolic tensor: ``shape`` (with the batch axis, None where a size is not fixed) and
    the ``node`` (layer call) whose ``index``-th output it is; None for a model input."""

    def __init__(self, shape, node=None, index=0, name=None):
        self.shape = tuple(shape)
        self.node = node
        self.index = index
        self.name = name

    @property
    def ndim(self):
        return len(self.shape)

    def __array__(self, *args, **kwargs):
        # NumPy on a symbolic tensor would make an object array and fail far from here
        raise TypeError(
            "a symbolic Keras tensor has no values; build a Model(inputs, outputs) and call "
            "predict (or the layer itself on a NumPy array)"
        )

    def __repr__(self):
        return f"<KerasTensor shape={self.shape}>"


class Node:
    """One call of a layer in a graph: its input tensor, its initial-state tensors (a recurrent
    layer's ``initial_state``) and its output tensors."""

    def __init__(self, layer, inputs, states):
        self.layer = layer
        self.inputs = list(inputs)
        self.states = list(states)
        self.outputs = []

    def parents(self):
        """The tensors this call reads, in order: its input, then its initial states."""
        return [*self.inputs, *self.states]


def is_symbolic(value):
    """Whether ``value`` is a symbolic tensor, or a list / tuple holding one."""
    if isinstance(value, (list, tuple)):
        return any(isinstance(v, KerasTensor) for v in value)
    return isinstance(value, KerasTensor)
