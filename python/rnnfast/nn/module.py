"""Module: the general container, for models that are not a plain stack.

Subclass it, assign layers (or lists of layers) as attributes in ``__init__`` and write
``forward``; the container does the rest, PyTorch's way: ``parameters`` / ``named_parameters``
(``"rnn.weight_ih_l0"``), ``grads``, ``zero_grad``, ``train`` / ``eval``, ``state_dict`` /
``load_state_dict``, ``save`` and ``rnnfast.load(path, cls=...)``; the optimizers and
``training.fit`` take it as they take a layer.

The backward chain is the container's job. While ``forward`` runs, every call of a child is
recorded (which arrays went in, which came out); ``backward(d_out)`` then runs the children's
backwards in reverse order, routing each gradient to the array it belongs to and summing where
one array fed several children. What cannot be routed is refused, never dropped silently:

- a child's input made by NumPy between two children (slicing, concatenating, arithmetic): the
  container cannot differentiate it, so ``backward`` raises (before any child's backward has
  added to a gradient), asking for a ``backward`` of the subclass's own; the same for a nested
  container whose forward prepares its own input with NumPy, when the gradient of that input is
  needed (at the top, preparing the model's input is allowed: ``backward`` then returns None);
- an in-place change of a child's output: in training, children's outputs are read-only;
- a child called twice in one training forward: a layer keeps one forward for its backward.

Padding travels as in ``Sequential`` (``nn.masking``): ``model(x, lengths=...)`` (or ``mask=``,
or an Embedding with ``mask_zero``) reaches every RNN that reads what came from ``x``, without
``forward`` passing it on; a ``forward(self, x, lengths=None)`` also gets it directly.
"""

from __future__ import annotations

import copy
import functools
import inspect

import numpy as np

from ._children import ChildOwner
from ._inference_only import refuse_training
from ._layer import quantize_layer
from .masking import batch_first_of, call_layer, input_suspect, input_valid_mask

__all__ = ["Module"]


def _is_layer(value):
    return (
        callable(value)
        and hasattr(value, "backward")
        and hasattr(value, "named_parameters")
        and not isinstance(value, type)
    )


def _is_layer_list(value):
    return isinstance(value, (list, tuple)) and len(value) > 0 and all(map(_is_layer, value))


class _Call:
    """One recorded child call: the layer, its name, its differentiable inputs, its output."""

    __slots__ = ("layer", "name", "inputs", "output")

    def __init__(self, layer, name, inputs, output):
        self.layer, self.name, self.inputs, self.output = layer, name, inputs, output


class _Tape:
    """The calls of one forward and the padding (valid mask, suspect) of each array seen."""

    def __init__(self, training):
        self.training = training
        self.calls = []
        self.padding = {}  # id(array) -> (valid, suspect)
        self.inputs = []  # the model's own input arrays
        self._keep = []  # keeps every array in ``padding`` alive, so ids stay unique

    def note(self, array, valid, suspect):
        self.padding[id(array)] = (valid, suspect)
        self._keep.append(array)

    def call(self, layer, name, args, kwargs):
        if self.training and any(c.layer is layer for c in self.calls):
            raise RuntimeError(
                f"{name}: called twice in one training forward; a layer keeps one forward for "
                "its backward, so give each use a layer of its own (or share the weights "
                "with a backward written by hand)"
            )
        x = args[0] if args else kwargs.pop("x")
        # a child handed to a child (rnn(ids, embedding=self.embed)): the layer itself
        kwargs = {k: v._layer if isinstance(v, _Recorded) else v for k, v in kwargs.items()}
        # the layer names its positional arguments after x (an RNN's h0, lengths, mask)
        names = getattr(layer, "call_arguments", ())
        if names:
            kwargs.update(zip(names, args[1:]))
            args = args[:1]
        if len(args) > 1:  # a layer of the user's with more inputs: called as it is
            out, valid, suspect = layer(*args, **kwargs), None, None
        else:
            valid, suspect = self.padding.get(id(x), (None, None))
            out, valid, suspect = call_layer(layer, x, valid, suspect, name, **kwargs)
        if self.training:
            out = _read_only(out)
        # backward's gradients after dx go to these, in order (an RNN's dh0 to h0)
        inputs = [x] + [kwargs.get(name) for name in names]
        self.calls.append(_Call(layer, name, inputs, out))
        first = out[0] if isinstance(out, tuple) else out
        self.note(first, valid, suspect)
        if isinstance(out, tuple):
            for part in out[1:]:
                self.note(part, None, None)
        self._keep.append(out)
        return out

    def _produced(self):
        return {
            id(a)
            for c in self.calls
            for a in (c.output if isinstance(c.output, tuple) else (c.output,))
        }

    def input_gradient_incomplete(self):
        """Whether the model's input gradient is unknown: the first call's input was made by
        NumPy from the model's input (allowed: a model's own input needs no gradient), or the
        input went into a nested container whose input gradient is unknown."""
        if not self.calls:
            return False
        inputs = {id(a) for a in self.inputs}
        first = self.calls[0].inputs[0]
        if (
            first is not None
            and np.asarray(first).dtype.kind == "f"
            and id(first) not in self._produced() | inputs
        ):
            return True
        return any(id(c.inputs[0]) in inputs and _nested_incomplete(c.layer) for c in self.calls)

    def _check_routes(self, outputs, d_outs, owner):
        """Refuse, before any child's backward has added to a gradient, an input that the
        backward could not route: made by NumPy between two children, or the input of a
        nested container that cannot differentiate its own input."""
        produced = self._produced()
        known = produced | {id(a) for a in self.inputs}
        needed = {id(o) for o, d in zip(outputs, d_outs) if d is not None}
        for index in reversed(range(len(self.calls))):
            call = self.calls[index]
            outs = call.output if isinstance(call.output, tuple) else (call.output,)
            if not any(id(o) in needed for o in outs):
                continue
            needed.update(id(a) for a in call.inputs[1:] if a is not None)  # h0
            inp = call.inputs[0]
            if inp is None or np.asarray(inp).dtype.kind != "f":
                continue
            if id(inp) not in known:
                if index == 0:
                    continue  # the first call's input derives from the model's input only
                raise _untraced_input(owner, call)
            if id(inp) in produced and _nested_incomplete(call.layer):
                raise RuntimeError(
                    f"{owner}.backward: {call.name} cannot give the gradient of its input: its "
                    "forward feeds its first layer an array made by NumPy from that input; "
                    f"write its backward yourself, or feed its first layer its input as it is"
                )
            needed.add(id(inp))

    def backward(self, output, d_out, owner):
        """Run the recorded calls' backwards; the gradient of the model's first input."""
        grads = {}
        produced = self._produced()
        outputs = output if isinstance(output, tuple) else (output,)
        d_outs = d_out if isinstance(output, tuple) else (d_out,)
        for o, d in zip(outputs, d_outs):
            if id(o) not in produced:
                raise RuntimeError(
                    f"{owner}.backward: forward returned an array that no child layer returned "
                    "(NumPy arithmetic after the last layer?); the container can only route "
                    f"gradients between layers, so write {owner}.backward(d_out) yourself"
                )
            if d is not None:
                grads[id(o)] = d
        self._check_routes(outputs, d_outs, owner)
        incomplete = self.input_gradient_incomplete()  # before nested backwards clear theirs
        known = produced | {id(a) for a in self.inputs}
        for index in reversed(range(len(self.calls))):
            call = self.calls[index]
            outs = call.output if isinstance(call.output, tuple) else (call.output,)
            d = [grads.pop(id(o), None) for o in outs]
            if all(g is None for g in d):
                continue  # this call's output did not reach the loss
            result = (
                call.layer.backward(*d)
                if isinstance(call.output, tuple)
                else call.layer.backward(d[0])
            )
            in_grads = result if isinstance(result, tuple) else (result,)
            for inp, g in zip(call.inputs, in_grads):
                if g is None or inp is None or np.asarray(inp).dtype.kind != "f":
                    continue
                if id(inp) not in known:
                    if index == 0:
                        continue  # the first call's input derives from the model's input only
                    raise _untraced_input(owner, call)
                grads[id(inp)] = g if id(inp) not in grads else grads[id(inp)] + g
        if not self.inputs or incomplete:
            return None
        return grads.get(id(self.inputs[0]))


def _untraced_input(owner, call):
    """The error for a call whose input no layer made and that is not the model's input: the
    container cannot route a gradient through the NumPy operation that made it."""
    return RuntimeError(
        f"{owner}.backward: the input of {call.name} was made by an operation "
        "between layers (slicing, concatenation, arithmetic) that the container "
        f"cannot differentiate; write {owner}.backward(d_out) yourself, or feed "
        f"{call.name} a layer's output or the model's input as it is"
    )


def _nested_incomplete(layer):
    """Whether ``layer`` is a container whose last training forward cannot give the gradient
    of its input."""
    last = layer.__dict__.get("_last") if isinstance(layer, Module) else None
    return last is not None and last[0].input_gradient_incomplete()


def _read_only(out):
    """A child's output as ``forward`` sees it in training: read-only (a view), so an in-place
    change between two children, which the recorded backward cannot see, fails loudly."""
    if isinstance(out, tuple):
        return tuple(_read_only(o) for o in out)
    if isinstance(out, np.ndarray) and out.flags.writeable:
        out = out.view()
        out.flags.writeable = False
    return out


class Module(ChildOwner):
    """Base class of models with named children; see the module's documentation.

    Example
    -------
    >>> class Tagger(rnnfast.Module):
    ...     def __init__(self, vocab, tags, dim=64, hidden=128):
    ...         super().__init__()
    ...         self.embed = rnnfast.Embedding(vocab, dim, mask_zero=True)
    ...         self.rnn = rnnfast.RNN(dim, hidden, bidirectional=True, batch_first=True,
    ...                                return_sequences=True)
    ...         self.head = rnnfast.Dense(2 * hidden, tags)
    ...     def forward(self, ids):
    ...         return self.head(self.rnn(self.embed(ids)))

    The constructor's arguments are recorded, so ``rnnfast.load(path, cls=Tagger)`` rebuilds
    the model from a file ``model.save(path)`` wrote.
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "__init__" not in cls.__dict__:
            return
        init = cls.__init__
        signature = inspect.signature(init)

        @functools.wraps(init)
        def recording_init(self, *args, **kw):
            outermost = "_init_config" not in self.__dict__
            if outermost:  # the most derived class's arguments rebuild the model
                bound = signature.bind(self, *args, **kw)
                bound.apply_defaults()
                config = dict(bound.arguments)
                config.pop(next(iter(signature.parameters)))
                object.__setattr__(self, "_init_config", config)
            init(self, *args, **kw)

        cls.__init__ = recording_init

    def __init__(self):
        object.__setattr__(self, "_children", {})
        object.__setattr__(self, "_tape", None)
        object.__setattr__(self, "_last", None)
        self.training = True
        self.output_mask = None

    # ---- children -------------------------------------------------------------------------

    def __setattr__(self, name, value):
        children = self.__dict__.get("_children")
        if children is None:
            raise RuntimeError(
                f"{type(self).__name__}: call super().__init__() first in "
                "__init__, before assigning attributes"
            )
        if _is_layer(value) or _is_layer_list(value):
            children[name] = list(value) if isinstance(value, (list, tuple)) else value
            self.__dict__.pop(name, None)
        else:
            children.pop(name, None)
            object.__setattr__(self, name, value)

    def __getattr__(self, name):
        # only reached for names not in __dict__: the children, recorded while forward runs
        children = self.__dict__.get("_children", {})
        if name not in children:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        child = children[name]
        tape = self.__dict__.get("_tape")
        if tape is None:
            return child
        if isinstance(child, list):
            return [_Recorded(c, tape, f"self.{name}[{i}]") for i, c in enumerate(child)]
        return _Recorded(child, tape, f"self.{name}")

    def __delattr__(self, name):
        if name in self.__dict__.get("_children", {}):
            del self._children[name]
        else:
            object.__delattr__(self, name)

    def named_children(self):
        """``(name, layer)`` of every child, lists flattened as ``"name.0"``, ``"name.1"``."""
        out = []
        for name, child in self._children.items():
            if isinstance(child, list):
                out.extend((f"{name}.{i}", c) for i, c in enumerate(child))
            else:
                out.append((name, child))
        return out

    def _forget_forward(self):
        object.__setattr__(self, "_last", None)

    def backward_runs_children(self):
        """True unless a subclass writes its own backward (see ``ChildOwner``): the tape runs
        each child's backward once."""
        return type(self).backward is Module.backward

    def children(self):
        return [c for _, c in self.named_children()]

    # ---- forward and backward ---------------------------------------------------------------

    def forward(self, x):
        raise NotImplementedError(f"{type(self).__name__}: define forward(self, x)")

    def __call__(self, x, *args, lengths=None, mask=None, **kwargs):
        valid = input_valid_mask(self, x, lengths, mask)
        out, self.output_mask, _ = self._run(
            x, args, kwargs, valid, input_suspect(x, valid), lengths, mask
        )
        return out

    def call_with_padding(self, x, valid, suspect, who, **kwargs):
        """The forward with the padding carried in and out (when nested in a container)."""
        return self._run(x, (), kwargs, valid, suspect, None, None)

    def _run(self, x, args, kwargs, valid, suspect, lengths, mask):
        tape = _Tape(self.training)
        tape.inputs = [a for a in (x, *args) if isinstance(a, np.ndarray)]
        tape.note(x, valid, suspect)
        parameters = inspect.signature(self.forward).parameters
        for name, value in (("lengths", lengths), ("mask", mask)):
            if value is not None and name in parameters:
                kwargs[name] = value
        object.__setattr__(self, "_tape", tape)
        try:
            out = self.forward(x, *args, **kwargs)
        finally:
            object.__setattr__(self, "_tape", None)
        first = out[0] if isinstance(out, tuple) else out
        out_valid, out_suspect = tape.padding.get(id(first), (None, None))
        object.__setattr__(self, "_last", (tape, out) if self.training else None)
        return out, out_valid, out_suspect

    def backward(self, d_out):
        """Gradients of the last training forward: the children's backwards in reverse order.
        Returns the gradient with respect to the forward's input (None for token ids)."""
        refuse_training(self, "backward")
        if self._last is None:
            raise RuntimeError(
                f"{type(self).__name__}.backward: no training forward to "
                "differentiate; call the model in training mode first"
            )
        tape, out = self._last
        object.__setattr__(self, "_last", None)
        return tape.backward(out, d_out, type(self).__name__)

    @property
    def batch_first(self):
        """The layout of the model's sequences: its RNNs' ``batch_first`` (None without RNNs)."""
        return batch_first_of(self.children(), type(self).__name__)

    # ---- description, persistence, quantization -------------------------------------------

    def get_config(self):
        """The constructor's arguments, recorded when the model was built."""
        return dict(self.__dict__.get("_init_config", {}))

    def quantized_copy(self, mode, where="model"):
        """A copy with its children quantized (``rnnfast.quantize``): the subclass's own forward
        runs on them. Its other attributes are shared with the original (a shallow copy)."""
        children = {}
        for name, child in self._children.items():
            if isinstance(child, list):
                children[name] = [
                    quantize_layer(c, mode, f"{where}.{name}[{i}]") for i, c in enumerate(child)
                ]
            else:
                children[name] = quantize_layer(child, mode, f"{where}.{name}")
        q = copy.copy(self)
        object.__setattr__(q, "_children", children)
        object.__setattr__(q, "_tape", None)
        object.__setattr__(q, "_last", None)
        object.__setattr__(q, "output_mask", None)
        return q._as_inference_copy(mode)

    def __repr__(self):
        inner = ",\n".join(f"  ({name}): {child!r}" for name, child in self.named_children())
        return f"{type(self).__name__}(\n{inner}\n)"

    # ---- ONNX (rnnfast.io.onnx asks this; nn does not import io) -----------------------------

    def onnx_chain(self, walk, x, who):
        """ONNX export: the chain is the children as ``forward`` calls them, seen by running
        it once on ``x``."""
        return walk.traced(self, x, who)


class _Recorded:
    """A child as ``forward`` sees it: calls are recorded on the tape, everything else (its
    attributes, ``step``, ``reset_state``) goes to the child itself."""

    __slots__ = ("_layer", "_tape", "_name")

    def __init__(self, layer, tape, name):
        object.__setattr__(self, "_layer", layer)
        object.__setattr__(self, "_tape", tape)
        object.__setattr__(self, "_name", name)

    def __call__(self, *args, **kwargs):
        return self._tape.call(self._layer, self._name, args, kwargs)

    def __getattr__(self, attr):
        if attr == "forward":  # self.rnn.forward(x) is recorded as self.rnn(x) is
            return self.__call__
        return getattr(self._layer, attr)

    def __setattr__(self, attr, value):
        setattr(self._layer, attr, value)

    def __repr__(self):
        return repr(self._layer)
