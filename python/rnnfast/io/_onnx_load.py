"""The ONNX reader behind ``rnnfast.io.onnx.load``.

The graph is run symbolically, node by node in its (topological) order. Every value is one of:
a constant (initializers, ``Constant`` and nodes of constants, folded with onnx's reference
evaluator); a shape vector with symbolic batch and time entries (``Shape`` and what is made of
it); zeros of a symbolic shape (``ConstantOfShape``: torch's initial state); or a value on one
of the model's paths: the main path (the input, then each layer's output), the initial state,
the final states and the lengths. A main-path value is an expression tree over the outputs of
the layers found so far (an ``RNN`` node's output sequence, an embedding's, a linear layer's),
with its axes named (time, batch, features), so that transposes move the layout and nothing
else. Where a layer reads an expression, the expression must be one an rnnfast layer returns:
the trees of the RNN's forms (the whole sequence, Keras's last output, the merge modes,
go_backwards) are built the way the exporter writes them and compared. Consecutive RNN nodes
that fit together become one stacked RNN (residual connections included); each layer then
becomes an rnnfast layer, in a chain.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from ..nn import Embedding, Linear, Module, Sequential
from ..nn.recurrent.cells import cell_by
from . import _onnx_spec_nodes as spec_nodes

__all__ = ["OnnxLoadError", "OnnxModel", "load_model"]


# The ops computed on constants (onnx's reference evaluator): what exporters leave between
# constants (shape arithmetic, casts, reshapes of weights). _SAME_SIZE keep their input's size;
# _GROWING have their output's size computed first; the others take at most _MAX_FOLD_INPUT
# values (a broadcast of two such inputs stays small).
_SAME_SIZE = {"Identity", "Cast", "Reshape", "Squeeze", "Unsqueeze", "Transpose", "Flatten"}
_SAME_SIZE |= {"Neg", "Abs", "Shape", "Size", "Sqrt", "Reciprocal", "Not"}
_GROWING = {"ConstantOfShape", "Expand", "Tile", "Range"}
_FOLDABLE = _SAME_SIZE | _GROWING | {"Concat", "Slice", "Gather", "Split", "Add", "Sub"}
_FOLDABLE |= {"Mul", "Div", "Equal", "And", "Or", "Less", "Greater", "Min", "Max", "ReduceSum"}
_FOLDABLE |= {"ReduceProd", "Where", "Clip"}
_MAX_FOLD_INPUT = 1 << 12
_MAX_FOLDED = 1 << 22


class OnnxLoadError(ValueError):
    """A graph rnnfast cannot read; the message names the node (or output) and why."""


# ---- values ------------------------------------------------------------------------------------


class _Const:
    def __init__(self, value):
        self.value = np.asarray(value)


class _Ints:
    """An int64 shape vector (or scalar) whose entries are ints or axis labels (str)."""

    def __init__(self, items, scalar=False):
        self.items, self.scalar = list(items), scalar


class _Zeros:
    def __init__(self, dims):
        self.dims = list(dims)


class _Input:
    """A graph input whose role (x, h0, lengths) is fixed by its first use."""

    def __init__(self, name, elem, dims):
        self.name, self.elem, self.dims = name, elem, dims
        self.role = None


class _X:
    """A main-path value: ``tree`` (what it computes), ``axes`` (labels: "T" / "B" once an RNN
    has read them, "a0" / "a1" before; "F" the features), ``width`` (of F), ``ids``."""

    def __init__(self, tree, axes, width, ids=False):
        self.tree, self.axes, self.width, self.ids = tree, tuple(axes), width, ids


class _RawY:
    """An RNN node's Y output (T, dirs, B, H), transposed as ``axes`` says."""

    def __init__(self, node, axes, swap=False):
        self.node, self.axes, self.swap = node, tuple(axes), swap


class _State:
    """Final states: rows (node, ONNX direction index), (rows, B, H); ``which``: "h" (Y_h)
    or "c" (an LSTM's Y_c); ``axes``: a transpose of ("D", "B", "H") (a layout=1 node's
    ("B", "D", "H")), None for (D, B, H); ``empty_zero``: the node's own output, zeros for an
    empty sequence (onnxruntime's; rnnfast's h_n is then h0, as a ``Where`` makes it)."""

    def __init__(self, rows, which="h", axes=None, empty_zero=False):
        self.rows, self.which = list(rows), which
        self.axes = None if axes == spec_nodes.STATE_AXES[0] else axes
        self.empty_zero = empty_zero


class _H0:
    """Rows of a graph input of initial states (``source``: its name); ``layout`` 1: the input
    is a layout=1 node's (B, dirs, H); ``value``: a constant (dirs, B, H) start instead of an
    input (``source`` is then ("const", its node))."""

    def __init__(self, rows, source=None, layout=0, value=None):
        self.rows = None if rows is None else list(rows)
        self.source, self.layout, self.value = source, layout, value


class _Len:
    """Lengths: ``src`` ("lengths", the graph input; ("count", pads): the ids that are not
    padding; ("min", pads): the smaller of the two); ``positive``: lengths > 0 (a mask)."""

    def __init__(self, src, positive=False):
        self.src, self.positive = src, positive


class _Pads:
    """Which ids are padding: ``equal``: True where an id is one of ``pads`` (else the
    complement, the real ids); ``axes`` as the ids'; ``counted`` after a cast to int."""

    def __init__(self, pads, equal, axes, counted=False):
        self.pads, self.equal, self.axes, self.counted = frozenset(pads), equal, axes, counted


# ---- the layers found --------------------------------------------------------------------------


class _Node:
    """A recurrent node: ``cell`` its op ("RNN", "GRU", "LSTM"); ``activation`` the layer's
    options it fixes (the RNN's nonlinearity; a gated cell's (activation,
    recurrent_activation, reset_after)); ``init`` / ``init_c`` its initial states."""

    def __init__(
        self, index, name, x_tree, w, r, b, direction, activation, lengths, init, cell, hidden
    ):
        self.index, self.name = index, name
        self.x_tree = x_tree
        self.w, self.r, self.b = w, r, b
        self.direction, self.activation = direction, activation
        self.dirs = 2 if direction == "bidirectional" else 1
        self.cell, self.hidden = cell, hidden
        self.lengths, self.init = lengths, init
        self.init_c = None
        self.peepholes = None  # the LSTM's P (dirs, 3H), ONNX's order i, o, f
        self.swap = None  # fixed when its Y is reshaped into a sequence


class _Stage:
    def __init__(self, kind, input_tree):
        self.kind, self.input_tree = kind, input_tree
        self.nodes = []
        self.residual = None
        self.form = None  # an RNN's (return, merge_mode), fixed where its output is read
        self.parts = set()
        self.table = self.weight = self.bias = None
        self.pads = frozenset()

    def tree(self):
        return (self.kind, id(self))


def _add(a, b):
    return ("add",) + tuple(sorted((a, b), key=repr))


def _mul(a, b):
    return ("mul",) + tuple(sorted((a, b), key=repr))


def _rnn_forms(stage):
    """Every (tree, return, merge_mode, part, residual) an rnnfast RNN with this stage's nodes
    returns, built as the exporter writes it."""
    node = stage.nodes[-1]
    H, dirs = node.hidden, node.dirs
    back = node.direction == "reverse" or bool(node.swap)
    lengths = node.lengths
    residuals = [stage.residual]
    if stage.residual is None and len(stage.nodes) > 1:
        residuals = [False, True]  # a 2-layer stack shows it only in its output
    out = []
    for residual in residuals:
        S = ("rnn", node.index)
        if residual and len(stage.nodes) > 1:
            S = _add(S, node.x_tree)
        seq = ("flip", S) if back else S
        first = ("step", S, 0)
        end = ("step", ("revseq", S, lengths), 0) if lengths is not None else ("step", S, -1)
        if dirs == 1:
            last = first if back else end
        else:
            a, c = (first, end) if back else (end, first)
            last = ("concat", ("cols", a, 0, H), ("cols", c, H, 2 * H))
        for ret, base in (("sequence", seq), ("last", last)):
            out.append((base, ret, "concat", None, residual))
            if dirs == 2:
                f, r = ("cols", base, 0, H), ("cols", base, H, 2 * H)
                out.append((_add(f, r), ret, "sum", None, residual))
                out.append((_mul(f, r), ret, "mul", None, residual))
                out.append((_mul(_add(f, r), ("const", 0.5)), ret, "ave", None, residual))
                out.append((f, ret, None, 0, residual))
                out.append((r, ret, None, 1, residual))
    return out


# ---- the interpreter ---------------------------------------------------------------------------


class _Reader:
    def __init__(self, model):
        import onnx

        self.onnx = onnx
        self.model = model
        self.graph = model.graph
        self.values = {}
        self.stages = []
        self.nodes = []
        self.inputs = {}
        self.x_input = None
        self.float_dtype = None
        opsets = {o.domain: o.version for o in model.opset_import}
        self.opset = opsets.get("", opsets.get("ai.onnx", 0))

    def fail(self, node, why):
        where = f"node {node.name!r} ({node.op_type})" if node.name else f"a {node.op_type} node"
        raise OnnxLoadError(f"onnx graph: {where}: {why}")

    # ---- setup ----------------------------------------------------------------------------

    def read(self):
        onnx = self.onnx
        for init in self.graph.initializer:
            self.values[init.name] = _Const(onnx.numpy_helper.to_array(init))
        for inp in self.graph.input:
            if inp.name in self.values:
                continue  # an initializer listed as an input (older exporters)
            tt = inp.type.tensor_type
            dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
            value = _Input(inp.name, tt.elem_type, dims)
            self.values[inp.name] = value
            self.inputs[inp.name] = value
        for node in self.graph.node:
            if node.domain not in ("", "ai.onnx"):
                self.fail(
                    node, f"the op domain {node.domain!r} is not ONNX's; rnnfast reads ONNX ops"
                )
            args = [self.values.get(n) if n else None for n in node.input]
            for name, arg in zip(node.input, args):
                if name and arg is None:
                    self.fail(node, f"its input {name!r} is not defined before it")
            recurrent = node.op_type in ("RNN", "GRU", "LSTM")
            if all(isinstance(a, _Const) or a is None for a in args) and not recurrent:
                outs = self.fold(node, args)
            else:
                handler = getattr(self, "op_" + node.op_type, None)
                if handler is None:
                    self.fail(
                        node,
                        "rnnfast does not read this op: it reads RNN, GRU, LSTM, Gather, "
                        "MatMul / Gemm + "
                        "Add and the glue around them (Transpose, Reshape, Squeeze, Unsqueeze, "
                        "Slice, Concat, Shape, Constant, ConstantOfShape, Cast, ...)",
                    )
                outs = self.run_handler(handler, node, args)
                if not isinstance(outs, (list, tuple)):
                    outs = [outs]
            for name, value in zip(node.output, outs):
                if name:
                    self.values[name] = value
        return self.assemble()

    def run_handler(self, handler, node, args):
        """``handler(node, args)``. The handlers read a graph that came from a file: an
        attribute missing or of another type, an index or axis out of range, a graph nested
        deeper than Python recurses: each is a graph rnnfast cannot read, said so naming the
        node, not an error of rnnfast's."""
        try:
            return handler(node, args)
        except OnnxLoadError:
            raise
        except (
            IndexError,
            KeyError,
            TypeError,
            AttributeError,
            ValueError,
            ZeroDivisionError,
            OverflowError,
            RecursionError,
            UnicodeDecodeError,
        ) as exc:
            self.fail(node, f"malformed ({type(exc).__name__}: {exc})")

    def attrs(self, node):
        return {a.name: self.onnx.helper.get_attribute_value(a) for a in node.attribute}

    def fold(self, node, args):
        """A node of constants, computed (onnx's reference evaluator: every ONNX op)."""
        if node.op_type == "Constant":
            a = self.attrs(node)
            if "value" in a:
                return [_Const(self.onnx.numpy_helper.to_array(a["value"]))]
            for key in ("value_float", "value_int", "value_floats", "value_ints"):
                if key in a:
                    return [_Const(np.asarray(a[key]))]
            self.fail(node, "a Constant of a kind rnnfast does not read")
        self.check_fold(node, args)
        from onnx.reference import ReferenceEvaluator

        helper = self.onnx.helper
        names = [f"in{i}" if n else "" for i, n in enumerate(node.input)]
        inputs = [
            helper.make_tensor_value_info(
                nm, helper.np_dtype_to_tensor_dtype(a.value.dtype), a.value.shape
            )
            for nm, a in zip(names, args)
            if nm
        ]
        outs = [f"out{i}" for i in range(len(node.output))]
        new = helper.make_node(node.op_type, names, outs, **self.attrs(node))
        graph = helper.make_graph(
            [new], "fold", inputs, [helper.make_value_info(o, helper.TypeProto()) for o in outs]
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)])
        feeds = {nm: a.value for nm, a in zip(names, args) if nm}
        try:
            result = ReferenceEvaluator(model).run(None, feeds)
        except MemoryError:
            raise  # check_fold bounds the sizes: this would be rnnfast's error
        # onnx's evaluator raises whatever its numpy code meets on a malformed node (wrong
        # attributes, inputs of other types or shapes): a node rnnfast cannot compute
        except Exception as exc:
            self.fail(node, f"its constant inputs cannot be computed ({type(exc).__name__}: {exc})")
        out = [_Const(np.asarray(v)) for v in result]
        if sum(o.value.size for o in out) > _MAX_FOLDED:
            self.fail(node, f"computes more than {_MAX_FOLDED:,} constant values")
        return out

    def check_fold(self, node, args):
        """Fold only the glue ops an exporter leaves between constants, and none whose output
        would be larger than the file could mean: ``ConstantOfShape``, ``Expand``, ``Tile`` and
        ``Range`` have their output's size computed from their inputs first, and the other
        ops take small inputs (or keep their input's size)."""
        op = node.op_type
        if op not in _FOLDABLE:
            self.fail(node, f"rnnfast does not compute {op} of constants")
        values = [a.value for a in args if a is not None]
        if op in _GROWING:
            size = self._folded_size(node, op, values)
            if size > _MAX_FOLDED:
                self.fail(node, f"{op} of constants to {size:,} values (at most {_MAX_FOLDED:,})")
        elif op not in _SAME_SIZE and sum(v.size for v in values) > _MAX_FOLD_INPUT:
            self.fail(
                node, f"{op} of constants of more than {_MAX_FOLD_INPUT:,} values (glue is small)"
            )

    def _folded_size(self, node, op, values):
        def ints(v):
            if v.dtype.kind not in "iu" or v.ndim > 1 or v.size > 64:
                self.fail(node, f"{op}: a shape that is not a short int vector")
            return [int(i) for i in v.reshape(-1)]

        wanted = {"ConstantOfShape": 1, "Expand": 2, "Tile": 2, "Range": 3}[op]
        if len(values) != wanted or (op == "Range" and any(v.size != 1 for v in values)):
            self.fail(node, f"{op} of {len(values)} inputs (it takes {wanted})")
        if op == "ConstantOfShape":
            dims = ints(values[0])
        elif op == "Expand":
            shape = ints(values[1])
            rank = max(len(shape), values[0].ndim)
            mine = [1] * (rank - values[0].ndim) + list(values[0].shape)
            theirs = [1] * (rank - len(shape)) + shape
            dims = [max(a, b) for a, b in zip(mine, theirs)]
        elif op == "Tile":
            reps = ints(values[1])
            dims = [a * b for a, b in zip(values[0].shape, reps)]
        else:  # Range: start, limit, delta scalars
            start, limit, delta = (float(np.asarray(v).reshape(-1)[0]) for v in values[:3])
            if not all(np.isfinite([start, limit, delta])) or delta == 0:
                self.fail(node, "a Range of non-finite or zero-step bounds")
            dims = [max(0, math.ceil((limit - start) / delta))]
        if any(d < 0 for d in dims):
            self.fail(node, f"{op}: negative dims {dims}")
        return math.prod(dims)

    # ---- roles of the graph inputs --------------------------------------------------------

    def as_role(self, node, value, role):
        if not isinstance(value, _Input):
            return value
        if value.role is not None and value.role != role:
            self.fail(node, f"the graph input {value.name!r} is used as {value.role} and {role}")
        value.role = role
        TP = self.onnx.TensorProto
        if role == "x":
            if self.x_input is not None and self.x_input is not value:
                self.fail(node, "the model reads two graph inputs as its input")
            self.x_input = value
            if value.elem in (TP.INT64, TP.INT32):
                if len(value.dims) != 2:
                    self.fail(node, f"token ids {value.name!r}: expected rank 2 (T, B) or (B, T)")
                return _X(("in",), ("a0", "a1"), None, ids=True)
            if value.elem not in (TP.FLOAT, TP.DOUBLE):
                self.fail(node, f"graph input {value.name!r}: expected floats or int64 ids")
            if len(value.dims) != 3 or value.dims[2] is None:
                self.fail(node, f"graph input {value.name!r}: expected (T, B, D) with D fixed")
            return _X(("in",), ("a0", "a1", "F"), value.dims[2])
        if role == "h0":
            rows = value.dims[0] if value.dims else None
            return _H0(list(range(rows)) if rows else None, value.name)
        if role == "lengths":
            if value.elem not in (TP.INT64, TP.INT32):
                self.fail(node, f"graph input {value.name!r}: lengths must be integers")
            return _Len("lengths")
        raise AssertionError(role)

    def x_of(self, node, value, what="its input"):
        value = self.as_role(node, value, "x")
        if not isinstance(value, _X):
            self.fail(node, f"{what} is not on the model's main path")
        return value

    # ---- shape arithmetic -----------------------------------------------------------------

    def op_Shape(self, node, args):
        ints = self._shape(node, args)
        a = self.attrs(node)
        if "start" in a or "end" in a:  # opset 15: a part of the shape
            ints = _Ints(ints.items[a.get("start", 0) : a.get("end", len(ints.items))])
        return ints

    def _shape(self, node, args):
        (v,) = args
        if isinstance(v, _Input):
            dims = [d if d is not None else f"a{i}" for i, d in enumerate(v.dims)]
            if v.role is None:
                v = self.as_role(node, v, "x")
            return _Ints(["a0", "a1"] + dims[2:])
        if isinstance(v, _X):
            return _Ints([v.width if a == "F" else a for a in v.axes])
        if isinstance(v, _Zeros):
            return _Ints(v.dims)
        if isinstance(v, _RawY):  # the dynamo exporter reshapes Y by its own shape
            sizes = {"D": v.node.dirs, "H": v.node.hidden}
            return _Ints([sizes.get(a, a) for a in v.axes])
        self.fail(node, "the shape of a value rnnfast does not track")

    def _ints(self, v):
        if isinstance(v, _Ints):
            return v
        if isinstance(v, _Const) and v.value.dtype.kind in "iu" and v.value.ndim <= 1:
            return _Ints(v.value.reshape(-1).tolist(), scalar=v.value.ndim == 0)
        return None

    def _const_ints(self, node, v, what):
        if not isinstance(v, _Const) or v.value.dtype.kind not in "iu":
            self.fail(node, f"{what} must be a constant")
        return [int(i) for i in v.value.reshape(-1)]

    def op_ConstantOfShape(self, node, args):
        shape = self._ints(args[0])
        value = self.attrs(node).get("value")
        if value is not None and np.any(self.onnx.numpy_helper.to_array(value) != 0):
            self.fail(node, "a constant other than zeros of a dynamic shape")
        if shape is None:
            self.fail(node, "its shape is not a shape vector")
        return _Zeros(shape.items)

    def op_Expand(self, node, args):
        """Zeros broadcast to a symbolic shape (the dynamo exporter's initial state)."""
        v, shape = args
        shape = self._ints(shape)
        if isinstance(v, _Const) and not np.any(v.value) and shape is not None:
            return _Zeros(shape.items)
        self.fail(node, "an Expand other than of zeros to a shape vector")

    def op_Unsqueeze(self, node, args):
        v = args[0]
        axes = (
            self._const_ints(node, args[1], "axes")
            if len(args) > 1
            else list(self.attrs(node)["axes"])
        )
        ints = self._ints(v)
        if ints is not None and ints.scalar and axes == [0]:
            return _Ints(ints.items)
        if isinstance(v, _Len) and v.positive:
            return v
        self.fail(node, "an Unsqueeze rnnfast does not read here")

    def op_Concat(self, node, args):
        axis = self.attrs(node)["axis"]
        if all(self._ints(a) is not None for a in args):
            items = []
            for a in args:
                items.extend(self._ints(a).items)
            return _Ints(items)
        if all(isinstance(a, _State) and a.axes is None for a in args) and axis == 0:
            if len({a.which for a in args}) != 1:
                self.fail(node, "a Concat of an LSTM's h and c states")
            rows = [row for a in args for row in a.rows]
            return _State(rows, args[0].which, None, any(a.empty_zero for a in args))
        xs = [a for a in args if isinstance(a, _X)]
        if len(xs) == len(args):
            rank = len(xs[0].axes)
            if any(x.axes != xs[0].axes for x in xs) or xs[0].axes[axis % rank] != "F":
                self.fail(node, "a Concat other than of features")
            return _X(("concat",) + tuple(x.tree for x in xs), xs[0].axes, sum(x.width for x in xs))
        self.fail(node, "a Concat of values rnnfast does not join")

    def op_Gather(self, node, args):
        data, index = args
        axis = self.attrs(node).get("axis", 0)
        ints = self._ints(data)
        if ints is not None and isinstance(index, _Const):
            idx = index.value
            items = [ints.items[int(i)] for i in idx.reshape(-1)]
            return _Ints(items, scalar=idx.ndim == 0)
        if isinstance(data, _Const) and data.value.ndim == 2 and axis == 0:
            ids = self.x_of(node, index, "the indices")
            if not ids.ids or ids.tree != ("in",):
                self.fail(node, "an embedding lookup of something other than the input ids")
            table = data.value
            if table.dtype.kind != "f":
                self.fail(node, "an embedding table that is not floats")
            stage = self.new_stage(node, "emb", ids.tree)
            stage.table = table
            return _X(stage.tree(), ids.axes + ("F",), table.shape[1])
        if isinstance(data, _Input) and isinstance(index, _Const):
            data = self.as_role(node, data, "h0")
        if isinstance(data, _H0) and axis == 0 and isinstance(index, _Const):
            picked = [int(i) for i in index.value.reshape(-1)]
            rows = picked if data.rows is None else [data.rows[i] for i in picked]
            return _H0(rows, data.source)
        if isinstance(data, _State) and axis == 0 and isinstance(index, _Const) and not data.axes:
            rows = [data.rows[int(i)] for i in index.value.reshape(-1)]
            return _State(rows, data.which, None, data.empty_zero)
        if isinstance(data, _RawY) and isinstance(index, _Const):
            if data.axes[axis] == "D" and index.value.tolist() == [1, 0] and data.node.dirs == 2:
                return _RawY(data.node, data.axes, not data.swap)
            self.fail(node, "a Gather of an RNN output rnnfast does not read")
        if isinstance(data, (_X, _Input)) and isinstance(index, _Const) and index.value.ndim == 0:
            x = self.x_of(node, data)
            if x.axes[axis] != "T" or int(index.value) not in (0, -1):
                self.fail(node, "a Gather of one time step other than the first or the last")
            return _X(
                ("step", x.tree, int(index.value)), x.axes[:axis] + x.axes[axis + 1 :], x.width
            )
        self.fail(node, "a Gather rnnfast does not read")

    # ---- layout ---------------------------------------------------------------------------

    def op_Identity(self, node, args):
        return args[0]

    def op_Dropout(self, node, args):
        return [args[0], None]

    def op_Transpose(self, node, args):
        (v,) = args
        v = self.as_role(node, v, "x")
        perm = list(self.attrs(node).get("perm", []))
        if isinstance(v, _X):
            perm = perm or list(range(len(v.axes)))[::-1]
            axes = tuple(v.axes[p] for p in perm)
            if "F" in v.axes and axes[-1] != "F":
                self.fail(node, "a Transpose that moves the features from the last axis")
            return _X(v.tree, axes, v.width, v.ids)
        if isinstance(v, _RawY):
            return _RawY(v.node, tuple(v.axes[p] for p in perm), v.swap)
        if isinstance(v, _State) and sorted(perm) == [0, 1, 2]:
            axes = v.axes or spec_nodes.STATE_AXES[0]
            return _State(v.rows, v.which, tuple(axes[p] for p in perm), v.empty_zero)
        self.fail(node, "a Transpose of a value rnnfast does not track")

    def _sequence_of(self, node, raw):
        if (
            raw.axes[-1:] != ("H",)
            or raw.axes[2:-1] not in ((), ("D",))
            or set(raw.axes[:2]) != {"T", "B"}
        ):
            self.fail(node, "an RNN output reshaped in another layout than (T, B, dirs*H)")
        n = raw.node
        if n.swap is not None and n.swap != raw.swap:
            self.fail(node, "an RNN node's output read in two direction orders")
        n.swap = raw.swap
        return _X(("rnn", n.index), raw.axes[:2] + ("F",), n.dirs * n.hidden)

    def op_Reshape(self, node, args):
        v, shape = args
        if isinstance(v, _Ints) and self._ints(shape) is not None:
            if self._ints(shape).items in ([-1], [len(v.items)]):
                return _Ints(v.items)
        if isinstance(v, _RawY):
            target = self._ints(shape)
            n = v.node
            if (
                target is not None
                and len(target.items) == 3
                and v.axes in (("T", "B", "D", "H"), ("B", "T", "D", "H"))
                and target.items[2] in (-1, n.dirs * n.hidden)
                # an int > 0: the exporter fixed that axis (the dynamo exporter fixes T), so
                # the graph runs that size only, where rnnfast's layer computes the same
                and all(
                    t in (0, a, -1) or (isinstance(t, int) and t > 0)
                    for t, a in zip(target.items[:2], v.axes[:2])
                )
            ):
                return self._sequence_of(node, v)
        self.fail(
            node, "a Reshape rnnfast does not read (it reads (T, B, dirs, H) -> (T, B, dirs*H))"
        )

    def op_Squeeze(self, node, args):
        v = args[0]
        axes = (
            self._const_ints(node, args[1], "axes")
            if len(args) > 1 and args[1] is not None
            else list(self.attrs(node).get("axes", []))
        )
        if isinstance(v, _RawY) and v.node.dirs == 1 and len(axes) == 1:
            if v.axes[axes[0]] == "D":
                axes_left = v.axes[: axes[0]] + v.axes[axes[0] + 1 :]
                return self._sequence_of(node, _RawY(v.node, axes_left, v.swap))
        if isinstance(v, _State) and len(v.rows) == 1 and len(axes) == 1:
            have = v.axes or spec_nodes.STATE_AXES[0]
            if -len(have) <= axes[0] < len(have) and have[axes[0]] == "D":  # (B, H): tf2onnx's
                return _State(v.rows, v.which, tuple(a for a in have if a != "D"), v.empty_zero)
        ints = self._ints(v)
        if ints is not None and len(ints.items) == 1 and axes in ([0], []):
            return _Ints(ints.items, scalar=True)
        self.fail(node, "a Squeeze rnnfast does not read")

    def op_Slice(self, node, args):
        v = args[0]
        if len(args) < 3:
            self.fail(node, "a Slice without starts and ends inputs (opset < 10)")
        starts = self._const_ints(node, args[1], "starts")
        ends = self._const_ints(node, args[2], "ends")
        axes = (
            self._const_ints(node, args[3], "axes")
            if len(args) > 3 and args[3] is not None
            else list(range(len(starts)))
        )
        steps = (
            self._const_ints(node, args[4], "steps")
            if len(args) > 4 and args[4] is not None
            else [1] * len(starts)
        )
        if len(starts) != 1:
            self.fail(node, "a Slice of several axes at once")
        start, end, axis, step = starts[0], ends[0], axes[0], steps[0]
        ints = self._ints(v)
        if ints is not None and step == 1:
            return _Ints(ints.items[start:end])
        if isinstance(v, _Zeros) and step == 1:
            dims = list(v.dims)
            if isinstance(dims[axis], int):
                dims[axis] = len(range(dims[axis])[start:end])
            return _Zeros(dims)
        if isinstance(v, _Input):
            v = self.as_role(node, v, "h0" if axis == 0 and v.role != "x" else "x")
        if isinstance(v, _H0) and axis == 0 and step == 1:
            rows = v.rows[start:end] if v.rows is not None else list(range(start, end))
            return _H0(rows, v.source)
        if isinstance(v, _X):
            rank = len(v.axes)
            tag = v.axes[axis % rank]
            if tag == "T" and step == -1 and start == -1 and end <= -(2**62):
                return _X(("flip", v.tree), v.axes, v.width)
            if tag == "F" and step == 1:
                a, b = (
                    max(0, start if start >= 0 else v.width + start),
                    min(v.width, end if end >= 0 else v.width + end),
                )
                return _X(("cols", v.tree, a, b), v.axes, b - a)
        self.fail(node, "a Slice rnnfast does not read")

    # ---- arithmetic -----------------------------------------------------------------------

    def op_Add(self, node, args):
        a, b = args
        for x, c in ((a, b), (b, a)):
            if isinstance(x, _X) and isinstance(c, _Const):
                return self.bias_of(node, x, c.value)
        a, b = self.as_role(node, a, "x"), self.as_role(node, b, "x")
        if isinstance(a, _X) and isinstance(b, _X):
            if a.axes != b.axes or a.width != b.width:
                self.fail(node, "an Add of values of different layouts")
            return _X(_add(a.tree, b.tree), a.axes, a.width)
        self.fail(node, "an Add rnnfast does not read")

    def op_Mul(self, node, args):
        a, b = args
        ia, ib = self._ints(a), self._ints(b)
        if ia is not None and ib is not None and len(ia.items) == len(ib.items):
            if all(isinstance(i, int) for i in ia.items + ib.items):  # sizes of a shape
                return _Ints([i * j for i, j in zip(ia.items, ib.items)], ia.scalar and ib.scalar)
        for x, c in ((a, b), (b, a)):
            if isinstance(x, _X) and isinstance(c, _Const) and c.value.size == 1:
                return _X(_mul(x.tree, ("const", float(c.value.reshape(-1)[0]))), x.axes, x.width)
        if isinstance(a, _X) and isinstance(b, _X) and a.axes == b.axes:
            return _X(_mul(a.tree, b.tree), a.axes, a.width)
        self.fail(node, "a Mul rnnfast does not read")

    def bias_of(self, node, x, bias):
        stage = self.stages[-1] if self.stages else None
        if (
            stage is None
            or stage.kind != "lin"
            or x.tree != stage.tree()
            or stage.bias is not None
            or bias.reshape(-1).shape != (x.width,)
        ):
            self.fail(node, "an Add of a constant that is not a linear layer's bias")
        stage.bias = bias.reshape(-1)
        return x

    def op_MatMul(self, node, args):
        x, w = args
        x = self.x_of(node, x)
        if not isinstance(w, _Const) or w.value.ndim != 2 or w.value.shape[0] != x.width:
            self.fail(node, "a MatMul of the input and something other than a weight (in, out)")
        return self.linear(node, x, w.value.T, None)

    def op_Gemm(self, node, args):
        a = self.attrs(node)
        x = self.x_of(node, args[0])
        w = args[1]
        if a.get("transA", 0) or a.get("alpha", 1.0) != 1.0 or a.get("beta", 1.0) != 1.0:
            self.fail(node, "a Gemm with transA, alpha or beta")
        if not isinstance(w, _Const) or len(x.axes) != 2:
            self.fail(node, "a Gemm of something other than (B, in) and a weight")
        weight = w.value if a.get("transB", 0) else w.value.T
        bias = None if len(args) < 3 or args[2] is None else args[2].value.reshape(-1)
        return self.linear(node, x, weight, bias)

    def linear(self, node, x, weight, bias):
        if weight.shape[1] != x.width:
            self.fail(node, f"a weight of shape {weight.shape} for features of width {x.width}")
        stage = self.new_stage(node, "lin", x.tree)
        stage.weight, stage.bias = np.ascontiguousarray(weight), bias
        return _X(stage.tree(), x.axes, weight.shape[0])

    # ---- lengths --------------------------------------------------------------------------

    def op_Cast(self, node, args):
        (v,) = args
        to = self.attrs(node)["to"]
        TP = self.onnx.TensorProto
        if isinstance(v, _Input):
            v = self.as_role(node, v, "lengths")
        if isinstance(v, _Len) and to in (TP.INT32, TP.INT64):
            return v
        if isinstance(v, _Pads) and not v.equal and to in (TP.INT32, TP.INT64):
            return _Pads(v.pads, False, v.axes, counted=True)
        self.fail(node, "a Cast rnnfast does not read")

    def op_Equal(self, node, args):
        ids, pad = args
        ids = self.x_of(node, ids)
        if not ids.ids or not isinstance(pad, _Const) or pad.value.size != 1:
            self.fail(node, "an Equal other than of the token ids and a padding id")
        return _Pads({int(pad.value.reshape(-1)[0])}, True, ids.axes)

    def op_Not(self, node, args):
        (v,) = args
        if isinstance(v, _Pads) and not v.counted:
            return _Pads(v.pads, not v.equal, v.axes)
        self.fail(node, "a Not rnnfast does not read")

    def op_And(self, node, args):
        a, b = args
        if isinstance(a, _Pads) and isinstance(b, _Pads) and not a.equal and not b.equal:
            return _Pads(a.pads | b.pads, False, a.axes)
        self.fail(node, "an And rnnfast does not read")

    def op_ReduceSum(self, node, args):
        v = args[0]
        a = self.attrs(node)
        axes = (
            self._const_ints(node, args[1], "axes")
            if len(args) > 1 and args[1] is not None
            else list(a.get("axes", []))
        )
        if isinstance(v, _Pads) and v.counted and a.get("keepdims", 1) == 0 and len(axes) == 1:
            self.count_labels = getattr(self, "count_labels", []) + [v.axes[axes[0]]]
            return _Len(("count", v.pads))
        self.fail(node, "a ReduceSum other than counting the real ids of each sequence")

    def op_Min(self, node, args):
        lens = [self.as_role(node, a, "lengths") for a in args]
        srcs = sorted((str(v.src) for v in lens if isinstance(v, _Len) and not v.positive), key=str)
        if len(lens) == 2 and len(srcs) == 2:
            count = next(v for v in lens if v.src != "lengths")
            if count.src[0] == "count" and any(v.src == "lengths" for v in lens):
                return _Len(("min", count.src[1]))
        self.fail(node, "a Min rnnfast does not read")

    def op_Greater(self, node, args):
        v, zero = args
        v = self.as_role(node, v, "lengths")
        if isinstance(v, _Len) and isinstance(zero, _Const) and zero.value.size == 1:
            if int(zero.value.reshape(-1)[0]) == 0:
                return _Len(v.src, positive=True)
        self.fail(node, "a Greater rnnfast does not read")

    def op_Where(self, node, args):
        cond, state, init = args
        if isinstance(init, _Input):
            init = self.as_role(node, init, "h0")
        if (
            isinstance(cond, _Len)
            and cond.positive
            and isinstance(state, _State)
            and isinstance(init, _H0)
        ):
            node_ = state.rows[0][0]
            start = node_.init if state.which == "h" else node_.init_c
            if start is None or start.rows != init.rows or start.source != init.source:
                self.fail(node, "a Where that is not the final state of empty sequences")
            return _State(state.rows, state.which, state.axes)  # rnnfast's h_n: h0 there
        self.fail(node, "a Where rnnfast does not read")

    def op_ReverseSequence(self, node, args):
        v, lens = args
        a = self.attrs(node)
        v = self.x_of(node, v)
        lens = self.as_role(node, lens, "lengths")
        if not isinstance(lens, _Len) or lens.positive:
            self.fail(node, "a ReverseSequence by something other than the lengths")
        if v.axes[a.get("time_axis", 0)] != "T" or v.axes[a.get("batch_axis", 1)] != "B":
            self.fail(node, "a ReverseSequence over other axes than time and batch")
        return _X(("revseq", v.tree, lens.src), v.axes, v.width)

    # ---- the RNN --------------------------------------------------------------------------

    def op_RNN(self, node, args):
        return self.recurrent(node, args, "RNN")

    def op_GRU(self, node, args):
        return self.recurrent(node, args, "GRU")

    def op_LSTM(self, node, args):
        return self.recurrent(node, args, "LSTM")

    def _activations(self, node, a, cell, dirs):
        """The layer options a node's ``activations`` (and their alphas and betas) fix: the
        RNN's nonlinearity; a gated cell's (activation, recurrent_activation). What rnnfast's
        layers cannot run raises, naming the attribute."""
        acts = [s.decode() if isinstance(s, bytes) else s for s in a.get("activations", [])]
        if cell == "RNN":
            for bad in ("activation_alpha", "activation_beta"):
                if bad in a:
                    self.fail(node, f"the attribute {bad}: rnnfast's RNN has no such option")
            acts = acts or ["Tanh"] * dirs
            if len(set(acts)) != 1 or acts[0] not in ("Tanh", "Relu"):
                self.fail(
                    node, f"activations {acts}: rnnfast's RNN has tanh or relu, one per layer"
                )
            return acts[0].lower()
        per = 2 if cell == "GRU" else 3
        acts = acts or (["Sigmoid"] + ["Tanh"] * (per - 1)) * dirs
        alphas = list(a.get("activation_alpha", []))
        betas = list(a.get("activation_beta", []))
        if len(acts) != per * dirs:
            self.fail(node, f"activations {acts}: expected {per} per direction")
        # alphas and betas are consumed in order by the activations that take them
        # (onnxruntime's reading of the spec): HardSigmoid here
        funcs = []
        for name in acts:
            if name == "HardSigmoid":
                alpha = alphas.pop(0) if alphas else 0.2
                beta = betas.pop(0) if betas else 0.5
                if not (np.isclose(alpha, 1.0 / 6.0, rtol=1e-6) and np.isclose(beta, 0.5)):
                    self.fail(
                        node,
                        f"activations: HardSigmoid with activation_alpha={alpha} and "
                        f"activation_beta={beta}; rnnfast's hard_sigmoid is Keras 3's, "
                        "alpha 1/6 and beta 0.5",
                    )
                funcs.append("hard_sigmoid")
            else:
                funcs.append({"Sigmoid": "sigmoid", "Tanh": "tanh", "Relu": "relu"}.get(name))
        if alphas or betas:
            self.fail(
                node,
                "the attributes activation_alpha / activation_beta: parameters of activations "
                "rnnfast's cells do not have",
            )
        one = funcs[:per]
        if (
            funcs != one * dirs
            or one[0] not in ("sigmoid", "hard_sigmoid")
            or one[1] not in ("tanh", "relu")
            or len(set(one[1:])) != 1
        ):
            self.fail(
                node,
                f"activations {acts}: rnnfast's {cell} runs the gates on Sigmoid or HardSigmoid "
                f"(alpha 1/6, beta 0.5) and the cell on Tanh or Relu "
                f"({'g' if cell == 'GRU' else 'g and h alike'}), the same in both directions",
            )
        return (one[1], one[0])

    def recurrent(self, node, args, cell):
        """An ONNX ``RNN``, ``GRU`` or ``LSTM`` node: its weights, options, lengths and initial
        states, as a layer of an rnnfast RNN / GRU / LSTM."""
        a = self.attrs(node)
        G = cell_by(onnx_op=cell).num_gates
        if "clip" in a and cell != "LSTM":
            self.fail(
                node,
                f"the attribute clip: rnnfast's {cell} has no such option (rnnfast.LSTM's "
                "cell_clip is the LSTM's)",
            )
        clip = a.get("clip")
        if clip is not None and not (np.isfinite(clip) and clip > 0):
            self.fail(node, f"the attribute clip={clip}: expected a threshold > 0")
        input_forget = a.get("input_forget", 0)
        if input_forget not in (0, 1):
            self.fail(node, f"the attribute input_forget={input_forget}: expected 0 or 1")
        layout = spec_nodes.node_layout(a, cell, lambda why: self.fail(node, why))
        x_axes, y_axes, state_axes = spec_nodes.node_axes(layout)
        n_in = cell_by(onnx_op=cell).onnx_inputs
        args = list(args) + [None] * (n_in - len(args))
        x, w, r, b, seq_lens, init = args[:6]
        init_c = args[6] if cell == "LSTM" else None
        peepholes = args[7] if cell == "LSTM" and len(node.input) > 7 and node.input[7] else None
        if peepholes is not None and not isinstance(peepholes, _Const):
            self.fail(
                node,
                "its P (peepholes) is not a constant: rnnfast builds its layers from weights "
                "in the file (initializers)",
            )
        x = self.x_of(node, x, "its input X")
        direction = a.get("direction", b"forward")
        direction = direction.decode() if isinstance(direction, bytes) else direction
        if direction not in ("forward", "reverse", "bidirectional"):
            self.fail(node, f"direction {direction}: expected forward, reverse or bidirectional")
        dirs = 2 if direction == "bidirectional" else 1
        activation = self._activations(node, a, cell, dirs)
        reset_after = None
        if cell == "GRU":
            reset_after = bool(a.get("linear_before_reset", 0))
            if not reset_after and self.model.producer_name == "pytorch":
                warnings.warn(
                    f"onnx graph: GRU node {node.name!r} has linear_before_reset=0, which is "
                    "not nn.GRU's form (PyTorch's exporter has written it so for nn.GRU, "
                    "pytorch#189225); rnnfast runs the file as written, as onnxruntime does "
                    "(reset_after=False), which differs from the PyTorch model it came from",
                    UserWarning,
                    stacklevel=4,
                )
            activation = activation + (reset_after,)
        elif cell == "LSTM":
            # ONNX's forms (rnnfast.LSTM's input_forget, cell_clip, peepholes): layers stack
            # only with the same
            clip = None if clip is None else float(clip)
            activation = activation + (bool(input_forget), clip, peepholes is not None)
        for name, v in (("W", w), ("R", r), ("B", b)):
            if isinstance(v, _Input):
                self.fail(
                    node,
                    f"its {name} is the graph input {v.name!r}: rnnfast builds its layers from "
                    "weights in the file (initializers); bind it at load time with "
                    f"load(..., initializers={{{v.name!r}: array}})",
                )
            if name != "B" and not isinstance(v, _Const):
                self.fail(node, f"its {name} is not a constant")
        w, r = w.value, r.value
        if w.dtype.kind != "f" or w.ndim != 3 or w.shape[0] != dirs or w.shape[1] % G:
            self.fail(node, f"its W has shape {w.shape}, expected ({dirs}, {G}*H, D)")
        H = w.shape[1] // G
        # every size of the layer comes from W; hidden_size and R must agree with it
        if a.get("hidden_size", H) != H or r.shape != (dirs, G * H, H):
            self.fail(
                node,
                f"its W, R and hidden_size disagree: W {w.shape} gives hidden_size = "
                f"{w.shape[1]} / {G} = {H} and R of shape {(dirs, G * H, H)}, got hidden_size="
                f"{a.get('hidden_size', H)} and R of shape {r.shape} (a damaged or edited "
                "file: export the model again)",
            )
        if x.axes[0] not in ("T", "B") and x.axes[0].startswith("a"):
            self.label(x.axes[0], x_axes[0])
            self.label(x.axes[1], x_axes[1])
            x = _X(x.tree, x_axes, x.width)
        if x.axes != x_axes or x.width != w.shape[2]:
            self.fail(
                node,
                f"its X is not ({', '.join(x_axes[:2])}, {w.shape[2]}) "
                f"({'time' if layout == 0 else 'batch'}-major, layout={layout})",
            )
        if b is not None and not isinstance(b, _Const):
            self.fail(node, "its B is not a constant")
        b = None if b is None else b.value
        if b is not None and b.shape != (dirs, 2 * G * H):
            self.fail(node, f"its B has shape {b.shape}, expected ({dirs}, {2 * G * H})")
        if peepholes is not None:
            peepholes = peepholes.value
            if peepholes.dtype.kind != "f" or peepholes.shape != (dirs, 3 * H):
                self.fail(node, f"its P has shape {peepholes.shape}, expected ({dirs}, {3 * H})")
        lengths = None
        if isinstance(seq_lens, _Const):  # lengths the graph fixes (an initializer)
            batch = self.inputs_batch(x_axes)
            fixed = spec_nodes.constant_lengths(
                seq_lens.value, batch, lambda why: self.fail(node, why)
            )
            seq_lens = _Len(("const", fixed))
        if seq_lens is not None:
            seq_lens = self.as_role(node, seq_lens, "lengths")
            if not isinstance(seq_lens, _Len) or seq_lens.positive:
                self.fail(node, "its sequence_lens are not the model's lengths")
            lengths = seq_lens.src
        starts = []
        for what, v in (("initial_h", init), ("initial_c", init_c)):
            if isinstance(v, _Input):
                v = self.as_role(node, v, "h0")
                if layout == 1:  # (B, dirs, H): all its rows, transposed at the call
                    v = _H0(None, v.source, layout=1)
            if isinstance(v, _Zeros) and layout == 1:
                v = _Zeros([v.dims[i] for i in (1, 0, 2)] if len(v.dims) == 3 else v.dims)
            if isinstance(v, _Const) and np.any(v.value != 0):  # a constant start
                value = spec_nodes.constant_state(
                    v.value, layout, dirs, H, what, lambda why: self.fail(node, why)
                )
                v = _H0(None, ("const", node.name, len(self.nodes), what), value=value)
            if isinstance(v, _Zeros):
                if len(v.dims) != 3 or v.dims[0] != dirs or v.dims[2] != H:
                    self.fail(node, f"its {what} is zeros of another shape than (dirs, B, H)")
                v = None
            elif isinstance(v, _Const):
                if np.any(v.value != 0):
                    self.fail(
                        node, f"its {what} is a constant (a fixed batch); give it as an input"
                    )
                v = None
            elif v is not None and not isinstance(v, _H0):
                self.fail(node, f"its {what} is neither zeros nor rows of a graph input")
            starts.append(v)
        n = _Node(
            len(self.nodes),
            node.name,
            x.tree,
            w,
            r,
            b,
            direction,
            activation,
            lengths,
            starts[0],
            cell,
            H,
        )
        n.init_c = starts[1]
        n.peepholes = peepholes
        self.nodes.append(n)
        self.place_rnn(node, n, x)
        # an empty sequence's Y_h / Y_c are zeros (onnxruntime), where rnnfast's are h0 / c0
        zero = lengths is not None and any(s is not None for s in starts)
        rows = [(n, d) for d in range(dirs)]
        outs = [_RawY(n, y_axes), _State(rows, "h", state_axes, zero)]
        if cell == "LSTM":
            outs.append(_State(rows, "c", state_axes, zero))
        return outs

    def inputs_batch(self, x_axes):
        """The batch size the graph input X fixes (None: dynamic, or not known here)."""
        x = self.x_input
        if x is None or len(x.dims) != 3:
            return None
        labels = getattr(self, "labels", {})
        for i, label in enumerate(("a0", "a1")):
            if labels.get(label, x_axes[i]) == "B" and isinstance(x.dims[i], int):
                return x.dims[i] or None
        return None

    def label(self, old, new):
        # the input's axes get their names from the first RNN that reads them
        if old == new:
            return
        self.labels = getattr(self, "labels", {})
        self.labels.setdefault(old, new)

    def place_rnn(self, node, n, x):
        """Stack ``n`` onto the RNN before it when it reads that one's output directly (or
        plus its input: residual), else start a new RNN stage."""
        stage = self.stages[-1] if self.stages else None
        if stage is not None and stage.kind == "rnn" and stage.form is None:
            prev = stage.nodes[-1]
            plain = x.tree == ("rnn", prev.index)
            residual = x.tree == _add(("rnn", prev.index), prev.x_tree)
            first_layer = len(stage.nodes) == 1  # layer 0 has no skip connection
            fits = (
                (plain or (residual and not first_layer))
                and prev.hidden == n.hidden
                and prev.cell == n.cell
                and prev.direction == n.direction
                and prev.activation == n.activation
                and (prev.b is None) == (n.b is None)
                and prev.lengths == n.lengths
                and (prev.init is None) == (n.init is None)
                and (prev.init_c is None) == (n.init_c is None)
                and prev.w.dtype == n.w.dtype
                and (stage.residual is None or stage.residual == residual)
            )
            if fits:
                if not first_layer:
                    stage.residual = residual
                stage.nodes.append(n)
                return
        stage = self.new_stage(node, "rnn", x.tree)
        stage.nodes.append(n)

    def new_stage(self, node, kind, input_tree):
        """A layer reading ``input_tree``: the output of the layer before (its form fixed
        here), or the graph input for the first."""
        if not self.stages:
            if input_tree != ("in",):
                self.fail(node, "the first layer does not read the graph input")
        else:
            self.resolve(node, input_tree, self.stages[-1])
        stage = _Stage(kind, input_tree)
        self.stages.append(stage)
        return stage

    def resolve(self, node, tree, stage, part_ok=False):
        """Check that ``tree`` is what ``stage`` returns; an RNN's form is fixed by it."""
        if stage.kind != "rnn":
            if tree != stage.tree():
                self.fail(node, "reads something other than the previous layer's output")
            return None
        for form_tree, ret, merge, part, residual in _rnn_forms(stage):
            if form_tree == tree:
                stage.residual = residual
                if part is not None and not part_ok:
                    self.fail(node, "reads one direction of an RNN with merge_mode=None")
                form = (ret, merge)
                if stage.form is not None and stage.form != form:
                    self.fail(node, "reads an RNN's output in two different forms")
                stage.form = form
                return part
        self.fail(
            node,
            "reads an RNN's output transformed in a way that is not one of an rnnfast RNN's "
            "returns (its sequence, Keras's last output, a merge mode, go_backwards)",
        )

    # ---- the model ------------------------------------------------------------------------

    def assemble(self):
        onnx = self.onnx
        outs = []
        fake = onnx.helper.make_node("Identity", [], [], name="(graph output)")
        for out in self.graph.output:
            v = self.values.get(out.name)
            if isinstance(v, _Input) and v.role is None:
                v = self.as_role(fake, v, "x")
            outs.append((out.name, v))
        if not self.stages:
            raise OnnxLoadError("onnx graph: no layer (RNN, Gather, MatMul / Gemm) in it")
        last = self.stages[-1]
        spec = []
        for name, v in outs:
            fake.name = f"output {name}"
            raw = self.raw_output(v)
            if raw is not None:  # a node's Y in ONNX's layout: (stage, axes)
                spec.append(("Y",) + raw)
            elif isinstance(v, _X):
                part = self.resolve(fake, v.tree, last, part_ok=True)
                spec.append(("y", part, v.axes))
            elif isinstance(v, _State):
                kind = f"{v.which}_n" if not v.empty_zero else f"Y_{v.which}"
                axes = v.axes or (spec_nodes.STATE_AXES[0] if v.empty_zero else None)
                spec.append((kind, self.state_stage(fake, v), axes))
            else:
                raise OnnxLoadError(
                    f"onnx graph: output {name!r} is neither the model's output nor an RNN's "
                    "final state"
                )
        for stage in self.stages:
            if stage.kind == "rnn" and stage.form is None:
                stage.form = ("sequence", "concat")  # read only through its final state
        labels = getattr(self, "labels", {})
        batch_first = (labels.get("a0") == "B") if labels else None
        for kind, _, axes in spec:
            if kind != "y" or len(axes) != 3:
                continue
            named = tuple(labels.get(a, a) for a in axes[:2])
            if batch_first is None:
                want = ("a0", "a1")
            else:
                want = ("B", "T") if batch_first else ("T", "B")
            if named != want:
                raise OnnxLoadError(
                    "onnx graph: the output sequence's layout (batch and time axes) differs "
                    "from the input's; rnnfast's layers keep one batch_first"
                )
        for label in getattr(self, "count_labels", []):
            if labels.get(label) != "T":
                raise OnnxLoadError(
                    "onnx graph: the lengths are counted over the batch axis of the ids, "
                    "not their time axis"
                )
        return self.build(spec, batch_first)

    def raw_output(self, v):
        """A graph output that is an RNN node's Y as the spec writes it (all of it, or squeezed,
        in the node's or another axis order), as ("Y", stage index, axes); None for others.
        The node must be the last of its stage, read by nothing else than the output or the
        next layer's plain sequence; the model then turns the layer's output into it."""
        if isinstance(v, _RawY):
            node, axes, swap = v.node, v.axes, v.swap
        elif isinstance(v, _X) and len(v.tree) == 2 and v.tree[0] == "rnn":
            node = self.nodes[v.tree[1]]
            if node.direction != "reverse":  # a forward sequence is an rnnfast RNN's own y
                return None
            axes, swap = v.axes, False
        else:
            return None
        index = next(
            (i for i, st in enumerate(self.stages) if st.kind == "rnn" and st.nodes[-1] is node),
            None,
        )
        if index is None:
            raise OnnxLoadError(
                f"onnx graph: the output Y of {node.cell} node {node.name!r}, a layer inside a "
                "stack: rnnfast returns a stack's last layer's output only"
            )
        stage = self.stages[index]
        if swap or node.swap or stage.residual or stage.form not in (None, ("sequence", "concat")):
            raise OnnxLoadError(
                f"onnx graph: the output Y of {node.cell} node {node.name!r} is also read in "
                "another form (directions swapped, a residual sum, the last step)"
            )
        node.swap, stage.form = False, ("sequence", "concat")
        if len(stage.nodes) > 1:
            stage.residual = False
        return index, tuple(axes)

    def state_stage(self, fake, state):
        for index, stage in enumerate(self.stages):
            if stage.kind != "rnn":
                continue
            rows = []
            for n in stage.nodes:
                order = [1, 0] if n.swap else list(range(n.dirs))
                rows.extend((n, d) for d in order)
            if [(a.index, d) for a, d in state.rows] == [(a.index, d) for a, d in rows]:
                if state.which == "c" and stage.nodes[0].cell != "LSTM":
                    break
                return index
        raise OnnxLoadError(
            "onnx graph: an output of final states that is not one RNN's h_n (all its layers "
            "and directions, in order)"
        )

    def build(self, spec, batch_first):
        first = self.stages[0]
        arr = {"emb": first.table, "lin": first.weight}.get(first.kind)
        dtype = (first.nodes[0].w if first.kind == "rnn" else arr).dtype
        if dtype not in (np.float32, np.float64):
            raise OnnxLoadError(f"onnx graph: weights of dtype {dtype}; rnnfast has float32/64")
        model_lengths = self.model_lengths()
        layers = []
        # the padding an rnnfast model hands each RNN: lengths until an RNN returns its last
        # output; after a go_backwards RNN's sequence, padding at the start (a general mask)
        live = "lengths" if model_lengths is not None else None
        h0_stage, starts = None, ()
        for index, stage in enumerate(self.stages):
            if stage.kind == "emb":
                pads = set()
                if model_lengths is not None and model_lengths[0] in ("count", "min"):
                    pads = set(model_lengths[1])
                emb = Embedding(
                    *stage.table.shape,
                    dtype=dtype,
                    mask_zero=0 in pads,
                    padding_idx=next((p for p in sorted(pads) if p != 0), None),
                )
                emb.load_state_dict({"weight": stage.table})
                layers.append(emb)
            elif stage.kind == "lin":
                lin = Linear(*stage.weight.shape[::-1], bias=stage.bias is not None, dtype=dtype)
                state = {"weight": stage.weight}
                if stage.bias is not None:
                    state["bias"] = stage.bias
                lin.load_state_dict(state)
                layers.append(lin)
            else:
                if live == "start":
                    raise OnnxLoadError(
                        "onnx graph: an RNN reads the output of a go_backwards RNN with lengths "
                        "(padded at the start), which rnnfast runs with a general mask"
                    )
                rnn, uses_h0 = self.build_rnn(stage, batch_first, dtype, live, model_lengths)
                if uses_h0:
                    if h0_stage is not None:
                        raise OnnxLoadError("onnx graph: two RNNs read the initial state h0")
                    h0_stage = index
                    n0 = stage.nodes[0]
                    starts = (n0.init, n0.init_c) if n0.cell == "LSTM" else (n0.init,)
                layers.append(rnn)
                if stage.form[0] == "last":
                    live = None
                elif rnn.go_backwards and live:
                    live = "start"
        for layer in layers:
            layer.train(False)
        # a graph input nothing reads (lengths of a model without an RNN) changes nothing
        got = [(k, p) if k == "y" or axes is None else (k, p, axes) for k, p, axes in spec]
        graph = self.graph_io(model_lengths, starts)
        if (
            graph["lengths"] is not None
            or graph["starts"] is not None
            or any(len(g) == 3 for g in got)
        ):
            return OnnxModel(layers, got, h0_stage, graph=graph).eval()
        if len(layers) == 1 and self.stages[0].kind == "rnn":
            rnn = layers[0]
            if got == [("y", None)] and rnn.return_sequences is None:
                rnn.return_sequences, rnn.return_state = True, False  # y alone
            if got == self.rnn_returns(rnn):
                return rnn
        if got == [("y", None)] and h0_stage is None:
            return Sequential(layers).eval()
        return OnnxModel(layers, got, h0_stage, graph=graph).eval()

    def graph_io(self, model_lengths, starts):
        """What an ``OnnxModel`` needs of the graph beyond its layers: the graph's input and
        output names (for ``run``), the lengths it fixes, and its initial states when they are
        not all graph inputs of rnnfast's (dirs, B, H) (constants, a layout=1 node's (B, dirs,
        H), an LSTM's h without c): ("input" | a constant (dirs, B, H) | None) per state."""
        inputs = {"x": self.x_input.name if self.x_input is not None else None}
        inputs["lengths"] = next(
            (v.name for v in self.inputs.values() if v.role == "lengths"), None
        )
        inputs["h0"] = [s.source for s in starts if s is not None and s.value is None]
        fixed = None
        if model_lengths is not None and model_lengths[0] == "const":
            fixed = np.asarray(model_lengths[1], np.int64)
        used = [s for s in starts if s is not None]
        special = any(s.value is not None or s.layout == 1 for s in used)
        if len(starts) == 2 and len(used) == 1:
            special = True
        state = None
        if special:
            state = tuple(
                None if s is None else "input" if s.value is None else s.value for s in starts
            )
        layout = 1 if any(s.layout == 1 for s in used) else 0
        return {
            "inputs": inputs,
            "outputs": [o.name for o in self.graph.output],
            "lengths": fixed,
            "starts": state,
            "state_layout": layout,
        }

    def rnn_returns(self, rnn):
        """What a call of ``rnn`` returns, as [(kind, part)]."""
        keras = rnn.return_sequences is not None or rnn.return_state is not None
        ys = [("y", 0), ("y", 1)] if rnn.merge_mode is None else [("y", None)]
        if not keras or rnn.return_state:
            return ys + [("h_n", 0)] + ([("c_n", 0)] if rnn.cell.num_states == 2 else [])
        return ys

    def model_lengths(self):
        """The lengths the model is called with: "lengths" (the input), ("count", pads) from
        the ids, ("min", pads) both, or None; every RNN's must be this or none after a last
        output (checked in build_rnn)."""
        found = {n.lengths for n in self.nodes if n.lengths is not None}
        rev = set()
        for v in self.values.values():
            if isinstance(v, _X):
                rev |= self._revseq_sources(v.tree)
        found |= rev
        if len(found) > 1:
            raise OnnxLoadError(
                f"onnx graph: its RNNs run with different lengths {sorted(map(str, found))}"
            )
        return next(iter(found), None)

    def _revseq_sources(self, tree):
        out = set()
        if isinstance(tree, tuple):
            if tree and tree[0] == "revseq":
                out.add(tree[2])
            for t in tree[1:]:
                out |= self._revseq_sources(t)
        return out

    def build_rnn(self, stage, batch_first, dtype, live, model_lengths):
        nodes = stage.nodes
        n0 = nodes[0]
        dirs, H = n0.dirs, n0.hidden
        handed = model_lengths if live else None
        if n0.lengths != handed:
            raise OnnxLoadError(
                f"onnx graph: RNN node {n0.name!r} runs with lengths {n0.lengths!r} where an "
                f"rnnfast model hands it {handed!r}"
            )
        ret, merge = stage.form
        back = n0.direction == "reverse" or bool(n0.swap)
        if any(bool(n.swap) != bool(n0.swap) for n in nodes):
            raise OnnxLoadError("onnx graph: stacked RNN nodes read in different direction orders")
        keras = ret == "last" or merge is None
        cls = cell_by(onnx_op=n0.cell).layer_class
        if n0.cell == "RNN":
            options = {"nonlinearity": n0.activation}
        else:
            options = {"activation": n0.activation[0], "recurrent_activation": n0.activation[1]}
            if n0.cell == "GRU":
                options["reset_after"] = n0.activation[2]
            elif any(n0.activation[2:]):  # the LSTM's ONNX forms
                input_forget, clip, peepholes = n0.activation[2:]
                options.update(peepholes=peepholes, input_forget=input_forget, cell_clip=clip)
        rnn = cls(
            nodes[0].w.shape[2],
            H,
            num_layers=len(nodes),
            **options,
            bias=n0.b is not None,
            batch_first=bool(batch_first),
            bidirectional=dirs == 2,
            dtype=dtype,
            residual=bool(stage.residual) and len(nodes) > 1,
            merge_mode=merge if dirs == 2 else "concat",
            go_backwards=back,
            return_sequences=(ret == "sequence") if keras else None,
            return_state=None,
        )
        weights = []  # per (layer, direction), PyTorch's order: ONNX's (W, R, B)
        uses_h0 = False
        for k, n in enumerate(nodes):
            for d in range(dirs):
                onnx_d = (1 - d) if n.swap else d
                weights.append((n.w[onnx_d], n.r[onnx_d], None if n.b is None else n.b[onnx_d]))
            for start, which in ((n.init, "h0"), (n.init_c, "c0")):
                if start is None:
                    continue
                uses_h0 = True
                want = [k * dirs + ((1 - i) if n.swap else i) for i in range(dirs)]
                rows = list(range(dirs)) if start.rows is None else start.rows
                if rows != want:
                    raise OnnxLoadError(
                        f"onnx graph: {n.cell} node {n.name!r} starts from rows {start.rows} of "
                        f"{which}, rnnfast's layer {k} from rows {want}"
                    )
                first = n0.init if which == "h0" else n0.init_c
                other = n0.init_c if which == "h0" else n0.init
                if (
                    first is None
                    or start.source != first.source
                    or (other is not None and other.source == start.source)
                ):
                    raise OnnxLoadError(
                        f"onnx graph: {n.cell} node {n.name!r} takes its initial state from "
                        "another graph input than the layers before it (rnnfast's layer takes "
                        "one h0 (and one c0) for all its layers)"
                    )
        rnn.load_onnx_weights(weights)
        if n0.cell == "LSTM" and n0.peepholes is not None:
            rnn.load_onnx_peepholes(
                [n.peepholes[(1 - d) if n.swap else d] for n in nodes for d in range(dirs)]
            )
        if keras:
            rnn.return_state = self.returns_state(stage)
        return rnn, uses_h0

    def returns_state(self, stage):
        index = self.stages.index(stage)
        for out in self.graph.output:
            v = self.values.get(out.name)
            if isinstance(v, _State):
                try:
                    if self.state_stage(None, v) == index:
                        return True
                except OnnxLoadError:
                    pass
        return False


# ---- the model returned for graphs that are not one RNN or a Sequential ------------------------


class OnnxModel(Module):
    """A chain of rnnfast layers read from an ONNX graph whose outputs are more than the last
    layer's: ``model(x, h0=None, lengths=None)`` returns them in the graph's order (the model's
    output and an RNN's final state h_n). ``layers`` holds the layers; ``outputs`` lists
    ``("y", part)`` (part: None, or 0 / 1 for one direction of merge_mode=None) and
    ``("h_n", index)`` / ``("c_n", index)`` (the final states of ``layers[index]``, c_n an
    LSTM's); ``h0_layer`` is the index of the RNN that reads ``h0`` (an LSTM's: the pair
    ``(h0, c0)``). The training loops, optimizers and ``backward`` take it as any
    ``Module``.

    A graph of ONNX's recurrent nodes as the spec writes them is answered in its own layouts,
    the arrays onnxruntime returns: ``("Y", index, axes)`` is the node's Y (``axes`` a transpose
    of ("T", "D", "B", "H"); (T, num_directions, B, H) for layout=0, (B, T, num_directions, H)
    for layout=1; "F" for dirs*H when the graph reshaped it), computed from ``layers[index]``'s
    output; ``("h_n", index, axes)`` a final state in a layout=1 node's ("B", "D", "H");
    ``("Y_h", index, axes)`` / ``("Y_c", ...)`` the node's own, zeros for an empty sequence. The
    call takes ``h0`` as the graph's state inputs are (one array, or the pair (initial_h,
    initial_c), in the node's layout); ``graph["lengths"]`` are lengths the graph fixes
    (``sequence_lens`` as an initializer: the call takes no ``lengths``), ``graph["starts"]``
    its initial states ("input", a constant (dirs, B, H) or None for zeros, per state).
    :meth:`run` takes onnxruntime's ``(output_names, feeds)``."""

    def __init__(self, layers, outputs, h0_layer=None, graph=None):
        super().__init__()
        self.layers = list(layers)
        self.outputs = [tuple(o) for o in outputs]
        self.h0_layer = h0_layer
        self.graph = dict(graph or {})

    def __call__(self, x, *args, lengths=None, mask=None, **kwargs):
        fixed = self.graph.get("lengths")
        if fixed is not None:
            if lengths is not None or mask is not None:
                raise ValueError(
                    "lengths: the graph fixes its sequence_lens (an initializer) to "
                    f"{fixed.tolist()}; call the model without lengths or mask"
                )
            lengths = fixed
        return super().__call__(x, *args, lengths=lengths, mask=mask, **kwargs)

    def _start(self, h0, x, layer):
        """The initial state ``layer`` takes, from the call's ``h0`` and the graph's starts."""
        starts = self.graph.get("starts")
        if starts is None:
            return h0
        given = [None] * len(starts)
        wanted = [i for i, s in enumerate(starts) if isinstance(s, str)]
        if h0 is not None:
            parts = list(h0) if len(wanted) > 1 else [h0]
            if len(parts) != len(wanted):
                raise ValueError(
                    f"h0: the graph takes {len(wanted)} initial states "
                    f"{self.graph['inputs']['h0']}, got {len(parts)}"
                )
            for i, part in zip(wanted, parts):
                given[i] = part
        x = np.asarray(x)
        batch = x.shape[0 if layer.batch_first else 1]
        rows = layer.num_layers * (2 if layer.bidirectional else 1)
        shape = (rows, batch, layer.hidden_size)
        layout = self.graph.get("state_layout", 0)
        states = [spec_nodes.state_in(g, s, layout, shape, x.dtype) for g, s in zip(given, starts)]
        return states[0] if len(states) == 1 else tuple(states)

    def forward(self, x, h0=None, lengths=None):
        out = x
        states, ys = {}, {}
        for i, layer in enumerate(self.layers):
            if i == self.h0_layer:
                h0 = self._start(h0, out, layer)
            if i == self.h0_layer and h0 is not None:
                result = layer(out, h0)
            else:
                result = layer(out)
            if isinstance(result, tuple):  # (y, h_n), (y, (h_n, c_n)), Keras's (y, h_n, c_n)
                rest = result[1:]
                states[i] = rest[0] if len(rest) == 1 else tuple(rest)
                result = result[0]
            elif isinstance(result, list) and len(result) in (3, 4):  # [fwd, bwd, h_n(, c_n)]
                rest = result[2:]
                states[i] = rest[0] if len(rest) == 1 else tuple(rest)
                result = result[:2]
            out = ys[i] = result
        values = []
        for kind, which, *axes in self.outputs:
            if kind == "y":
                values.append(out if which is None else out[which])
            elif kind == "Y":
                layer = self.layers[which]
                values.append(
                    spec_nodes.raw_y(
                        ys[which],
                        axes[0],
                        layer.batch_first,
                        layer.go_backwards,
                        2 if layer.bidirectional else 1,
                        layer.hidden_size,
                    )
                )
            else:
                state = states[which]
                if isinstance(state, tuple):  # an LSTM's (h_n, c_n)
                    state = state[0] if kind in ("h_n", "Y_h") else state[1]
                if kind in ("Y_h", "Y_c") and lengths is not None:  # the op's zeros
                    state = np.where((np.asarray(lengths) == 0)[:, None], 0, state)
                values.append(spec_nodes.state_out(state, axes[0] if axes else None))
        return values[0] if len(values) == 1 else tuple(values)

    def run(self, output_names, feeds):
        """onnxruntime's ``InferenceSession.run``: ``feeds`` maps the graph's input names to
        arrays; returns the list of the outputs named in ``output_names`` (None: all), in the
        graph's layouts."""
        inputs = self.graph.get("inputs")
        if inputs is None:
            raise ValueError("run: this model was not read from an ONNX graph")
        known = [n for n in [inputs["x"], inputs["lengths"], *inputs["h0"]] if n is not None]
        unknown = sorted(set(feeds) - set(known))
        if unknown or inputs["x"] not in feeds:
            raise ValueError(
                f"feeds: the graph's inputs are {known} ({inputs['x']!r} required), got "
                f"{sorted(feeds)}"
            )
        states = [feeds.get(n) for n in inputs["h0"]]
        h0 = None
        if any(s is not None for s in states):
            if any(s is None for s in states):
                raise ValueError(f"feeds: give all the initial states {inputs['h0']} or none")
            h0 = states[0] if len(states) == 1 else tuple(states)
        lengths = feeds.get(inputs["lengths"]) if inputs["lengths"] else None
        out = self(feeds[inputs["x"]], h0, lengths=lengths)
        out = list(out) if len(self.outputs) > 1 else [out]
        names = self.graph["outputs"]
        if output_names is None:
            return out
        missing = sorted(set(output_names) - set(names))
        if missing:
            raise ValueError(f"output_names: {missing} are not outputs of the graph ({names})")
        return [out[names.index(n)] for n in output_names]


def load_model(source, initializers=None):
    """The rnnfast model of the ONNX graph in ``source`` (a path, a binary file or an
    ``onnx.ModelProto``); ``initializers`` (name -> array) binds graph inputs to arrays (the
    weights of a graph that takes them as inputs).

    Raises
    ------
    OnnxLoadError
        A graph rnnfast cannot read (a ValueError), named with its node; also for a graph
        whose shapes, attributes or inputs are malformed (the Python error that revealed it
        is named in the message).
    ValueError
        Not an ONNX file (protobuf cannot parse it), a tensor that is sparse, not numeric or
        whose dims disagree with its data, external data outside the model's folder (or in a
        model not read from a path, or shorter than the tensor), or a subgraph attribute.
    OSError
        Reading the file failed.
    """
    import onnx

    from ._onnx_file import check_model, parse_model

    if isinstance(source, onnx.ModelProto):
        model, where, folder = source, "onnx model", None
    else:
        model, where, folder = parse_model(source)
    check_model(model, where, folder)
    if initializers:
        model = spec_nodes.bind_initializers(model, initializers, onnx)
    return _Reader(model).read()
