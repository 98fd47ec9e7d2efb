"""A small builder of ONNX graphs for ``rnnfast.io.onnx.export``: named nodes, initializers
and constants, the opset chosen once. The ``onnx`` package is imported when a builder is made,
never when rnnfast is imported."""

from __future__ import annotations

import numpy as np

from .._validation import check_int

__all__ = ["DEFAULT_OPSET", "MIN_OPSET", "Graph", "check_opset"]

# 14: the RNN op as it is today (the ``layout`` attribute); Squeeze, Unsqueeze, ReduceSum and
# Slice take their axes as inputs from 13 on, which is what the builder writes.
MIN_OPSET = 14
# What onnxruntime has run for years; ``opset=`` asks for another (up to onnx's newest).
DEFAULT_OPSET = 17

INT64_MIN = np.iinfo(np.int64).min


def check_opset(opset):
    """``opset`` (None: the default) checked against what this builder writes and what the
    installed onnx knows."""
    import onnx

    newest = onnx.defs.onnx_opset_version()
    if opset is None:
        return min(DEFAULT_OPSET, newest)
    # the upper bound is the installed onnx's newest opset
    return check_int("opset", opset, MIN_OPSET, newest)


class Graph:
    """Nodes, initializers, inputs and outputs of one graph; every name unique."""

    def __init__(self, opset, dtype):
        import onnx

        self.onnx = onnx
        self.opset = opset
        self.dtype = np.dtype(dtype)
        self.elem = onnx.helper.np_dtype_to_tensor_dtype(self.dtype)
        self.nodes = []
        self.initializers = []
        self.inputs = []
        self.outputs = []
        self._names = set()
        self._count = 0
        self._consts = {}

    # ---- names ----------------------------------------------------------------------------

    def name(self, hint):
        """A fresh value name from ``hint``."""
        while True:
            self._count += 1
            candidate = f"{hint}_{self._count}"
            if candidate not in self._names:
                self._names.add(candidate)
                return candidate

    def reserve(self, name):
        if name in self._names:
            raise ValueError(f"graph: the name {name!r} is taken")
        self._names.add(name)
        return name

    # ---- values ---------------------------------------------------------------------------

    def initializer(self, array, hint):
        """A named initializer (a parameter), in the array's own dtype."""
        name = self.name(hint)
        self.initializers.append(
            self.onnx.numpy_helper.from_array(np.array(array, order="C"), name)
        )
        return name

    def const(self, value, dtype=np.int64):
        """A small constant (indices, shapes, axes), shared by every use of the same value."""
        arr = np.asarray(value, dtype=dtype)
        key = (arr.dtype.str, arr.shape, arr.tobytes())
        if key not in self._consts:
            self._consts[key] = self.initializer(arr, "const")
        return self._consts[key]

    def fconst(self, value):
        """A float constant in the model's dtype."""
        return self.const(value, dtype=self.dtype)

    def add_input(self, name, elem, shape):
        self.reserve(name)
        self.inputs.append(self.onnx.helper.make_tensor_value_info(name, elem, shape))
        return name

    def add_output(self, value, name, elem, shape):
        """Graph output ``name``, from ``value`` (renamed through an Identity)."""
        self.reserve(name)
        self.nodes.append(self.onnx.helper.make_node("Identity", [value], [name]))
        self.outputs.append(self.onnx.helper.make_tensor_value_info(name, elem, shape))

    # ---- nodes ----------------------------------------------------------------------------

    def op(self, op_type, inputs, n_out=1, hint=None, **attrs):
        """Add a node; its output name (or names, with n_out > 1)."""
        outs = [self.name(hint or op_type) for _ in range(n_out)]
        self.nodes.append(self.onnx.helper.make_node(op_type, list(inputs), outs, **attrs))
        return outs[0] if n_out == 1 else outs

    def transpose(self, x, perm):
        return self.op("Transpose", [x], perm=list(perm))

    def slice(self, x, start, end, axis, step=1):
        return self.op(
            "Slice",
            [x, self.const([start]), self.const([end]), self.const([axis]), self.const([step])],
        )

    def flip(self, x, axis):
        """``x`` reversed along ``axis`` (of any length)."""
        return self.slice(x, -1, INT64_MIN, axis, -1)

    def gather(self, x, index, axis):
        return self.op("Gather", [x, self.const(index)], axis=int(axis))

    def squeeze(self, x, axes):
        return self.op("Squeeze", [x, self.const(list(axes))])

    def unsqueeze(self, x, axes):
        return self.op("Unsqueeze", [x, self.const(list(axes))])

    def reshape(self, x, shape):
        return self.op("Reshape", [x, self.const(list(shape))])

    def cast(self, x, elem):
        return self.op("Cast", [x], to=int(elem))

    # ---- the model ------------------------------------------------------------------------

    def model(self, doc=""):
        onnx = self.onnx
        graph = onnx.helper.make_graph(
            self.nodes, "rnnfast", self.inputs, self.outputs, self.initializers, doc_string=doc
        )
        opsets = [onnx.helper.make_opsetid("", self.opset)]
        model = onnx.helper.make_model(
            graph,
            opset_imports=opsets,
            producer_name="rnnfast",
            ir_version=onnx.helper.find_min_ir_version_for(opsets),
        )
        onnx.checker.check_model(model, full_check=True)
        return model
