"""The PyTorch bridge as registered custom operators (``torch.library``), the route of
``rnnfast.torch``'s modules under ``torch.compile`` and ``torch.export``. Imported only by
``rnnfast.torch`` (torch is imported nowhere else in the package).

Two operators in the namespace ``rnnfast``, over one layer and one direction of a recurrent
stack, time-major:

- ``rnnfast::layer_forward(cell, nonlinearity, x, h0, c0, weight_ih, weight_hh, bias_ih,
  bias_hh, weight_hr, keep, precision="float32") -> (y, h_n, c_n, workspace)``: ``cell``
  "elman", "gru" (PyTorch's form) or "lstm", ``nonlinearity`` the Elman cell's "tanh" or
  "relu"; x (T, B, D), h0 and y (T, B, R) / (B, R), c0 (B, H) the LSTM's. ``keep`` keeps the
  gated cells' training record (``workspace``, (T, B, 4H) for the GRU, (T, B, 5H) for the
  LSTM) for backward. What a cell has not (the Elman and GRU cells' c_n, a workspace not kept)
  is an empty tensor. ``precision`` is the products the kernels multiply with
  (``rnnfast.precision``: "bf16" under ``torch.autocast("cpu", dtype=torch.bfloat16)``).
- ``rnnfast::layer_backward(...)``: the gradients of one layer_forward, from its inputs, its
  output y and workspace (saved by the forward's autograd context: rnnfast's training record
  travels as tensors), and the gradients of y, h_n and c_n, with the forward's precision.

Under CPU autocast to bfloat16 a module's call runs them with ``precision="bf16"`` on float32
copies of the input and states and casts the outputs to torch's dtypes, as the eager route
does (``_torch_autocast``); what bf16 products cannot run is torch's own forward, its
AutocastFallbackWarning given while Dynamo traces (once per compile). Whether this machine
runs bf16 products, and torch's oneDNN switch, are constants of a compile.

Both have fake (meta) implementations, so the compilers trace them without running the
kernels, and the forward has its autograd formula (``register_autograd``: the backward calls
``layer_backward``). :func:`forward` composes a module's call of them (layers, directions,
batch_first, unbatched input, dropout between layers with ``torch.nn.functional.dropout``).

In eager mode ``rnnfast.torch`` keeps its ``torch.autograd.Function`` route: the dispatcher and
the generated autograd wrapper of a Python custom operator made an eager call 2-2.5x slower at
T = 1, B = 1, H = 64 (``bench/layers/compile_vs_eager.py``'s second table). :func:`compiling`
says which route a call takes.
"""

from __future__ import annotations

import importlib.machinery
import sys
import warnings

import numpy as np
import torch
from torch.nn.utils.rnn import PackedSequence

from ._torch_autocast import (
    COMPILE_TIME_CONSTANTS,
    AutocastFallbackWarning,
    autocast_refusal,
    fallback_message,
    output_dtypes,
    run_with,
)
from .nn.recurrent.cells import cell_by
from .nn.recurrent.stack import PlainRecord

__all__ = ["allow_in_dynamo", "compiling", "forward", "refuse_scripting"]

_DTYPES = (torch.float32, torch.float64)

_JIT_MESSAGE = (
    "rnnfast.torch.{name} cannot be {what}: its forward runs rnnfast's kernels from Python, "
    "which TorchScript cannot record. Use torch.compile(model) (training and inference) or "
    "torch.export.export(model, args) (inference) instead, or rnnfast.torch.to_torch(module) "
    "for a plain torch.nn.{name} copy that TorchScript takes."
)


def _name(module):
    """RNN, GRU or LSTM (``mode`` tells the RNN's nonlinearity too)."""
    return "RNN" if module.mode.startswith("RNN") else module.mode


def compiling(module):
    """True when ``module``'s call is traced by ``torch.compile`` or ``torch.export`` (the
    operators' route); False in eager mode. Under ``torch.jit.trace`` it raises: the trace
    would record the kernels' results as constants."""
    if torch.compiler.is_compiling():
        return True
    if torch._C._get_tracing_state() is not None:
        raise RuntimeError(
            _JIT_MESSAGE.format(name=_name(module), what="traced by torch.jit.trace")
        )
    return False


def refuse_scripting(module):
    """``__prepare_scriptable__`` of the bridge's modules: ``torch.jit.script`` says what to use
    instead (its own error would point into the bridge's Python)."""
    raise RuntimeError(_JIT_MESSAGE.format(name=_name(module), what="scripted by torch.jit.script"))


# TorchDynamo (torch.compile) refuses to trace into any torch.nn.RNN / GRU / LSTM, subclasses
# included, unless torch._dynamo.config.allow_rnn is set (a graph break, or an error under
# fullgraph=True, naming the flag). The bridge's modules are subclasses whose forward Dynamo can
# trace (it reaches the operators below), so importing rnnfast.torch sets the flag: at once if
# Dynamo is loaded, else as it loads (importing Dynamo here would add a second to ``import
# rnnfast.torch``). Dynamo then also traces torch's own modules' forward instead of breaking
# the graph on them (torch.export sets the flag for that, too). The same moment makes the
# PackedSequence route's torch.compiler.disable wrapper (see forward).

_eager_packed = None


def _dynamo_loaded(dynamo):
    global _eager_packed
    dynamo.config.allow_rnn = True
    for function in COMPILE_TIME_CONSTANTS:
        dynamo.assume_constant_result(function)
    _eager_packed = dynamo.disable(_packed_eagerly, reason=_PACKED_REASON)


class _DynamoFinder:
    """A ``sys.meta_path`` finder that calls :func:`_dynamo_loaded` once torch._dynamo has
    loaded, then takes itself out."""

    def find_spec(self, fullname, path, target=None):
        if fullname != "torch._dynamo":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        loader = None if spec is None else spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        exec_module = loader.exec_module

        def exec_and_allow(module):
            exec_module(module)
            _dynamo_loaded(module)

        loader.exec_module = exec_and_allow
        return spec


def allow_in_dynamo():
    """Let TorchDynamo trace the bridge's modules (see above)."""
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is not None and hasattr(dynamo, "disable"):
        _dynamo_loaded(dynamo)
    elif not any(isinstance(f, _DynamoFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _DynamoFinder())


# the operators


def _array(t):
    """A C-contiguous NumPy array of a CPU tensor (a view where it is one), None for None."""
    return None if t is None else np.ascontiguousarray(t.numpy(force=True))


def _tensor(a, like):
    """A tensor of the kernels' array (sharing its memory), an empty one of like's dtype for
    None."""
    if a is None:
        return like.new_empty(0)
    if not a.flags.writeable:
        a.flags.writeable = True
    return torch.from_numpy(a)


# precision: the products the kernels multiply with ("float32", or "bf16" under autocast), an
# argument of both operators: the backward runs outside the caller's autocast block
_FORWARD_SCHEMA = (
    "(str cell, str nonlinearity, Tensor x, Tensor? h0, Tensor? c0, Tensor weight_ih, "
    "Tensor weight_hh, Tensor? bias_ih, Tensor? bias_hh, Tensor? weight_hr, bool keep, "
    'str precision="float32") -> (Tensor, Tensor, Tensor, Tensor)'
)


@torch.library.custom_op("rnnfast::layer_forward", mutates_args=(), schema=_FORWARD_SCHEMA)
def layer_forward(
    cell, nonlinearity, x, h0, c0, weight_ih, weight_hh, bias_ih, bias_hh, weight_hr, keep,
    precision="float32",
):  # fmt: skip
    weights = (weight_ih, weight_hh, bias_ih, bias_hh, weight_hr)
    with run_with(precision):
        y, h, c, workspace = cell_by(kernel_cell=cell).plain_layer_forward(
            nonlinearity, _array(x), _array(h0), _array(c0), tuple(map(_array, weights)), keep
        )  # the stack runner's fast path, one layer (nn.recurrent.cells)
    return _tensor(y, x), _tensor(h, x), _tensor(c, x), _tensor(workspace, x)


def _two_states(cell):
    return cell_by(kernel_cell=cell).num_states == 2


def _workspace_width(cell, hidden):
    return cell_by(kernel_cell=cell).stored_per_step * hidden


@layer_forward.register_fake
def _(
    cell, nonlinearity, x, h0, c0, weight_ih, weight_hh, bias_ih, bias_hh, weight_hr, keep,
    precision="float32",
):  # fmt: skip
    steps, batch = x.shape[0], x.shape[1]
    hidden = weight_hh.shape[1] if weight_hr is None else weight_hr.shape[1]
    out = hidden if weight_hr is None else weight_hr.shape[0]
    y = x.new_empty((steps, batch, out))
    h_n = x.new_empty((batch, out))
    c_n = x.new_empty((batch, hidden)) if _two_states(cell) else x.new_empty(0)
    width = _workspace_width(cell, hidden)
    workspace = x.new_empty((steps, batch, width)) if keep and width else x.new_empty(0)
    return y, h_n, c_n, workspace


_BACKWARD_SCHEMA = (
    "(str cell, str nonlinearity, Tensor x, Tensor? h0, Tensor? c0, Tensor weight_ih, "
    "Tensor weight_hh, Tensor? weight_hr, Tensor y, Tensor workspace, Tensor? dy, "
    'Tensor? dh_n, Tensor? dc_n, bool input_gradient, bool has_bias, str precision="float32") '
    "-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)"
)


@torch.library.custom_op("rnnfast::layer_backward", mutates_args=(), schema=_BACKWARD_SCHEMA)
def layer_backward(
    cell, nonlinearity, x, h0, c0, weight_ih, weight_hh, weight_hr, y, workspace, dy, dh_n,
    dc_n, input_gradient, has_bias, precision="float32",
):  # fmt: skip
    """``(dx, dh0, dc0, dweight_ih, dweight_hh, dbias_ih, dbias_hh, dweight_hr)``, empty
    tensors for what the layer has not (dx without input_gradient)."""
    record = PlainRecord(_array(x), _array(h0), _array(c0), _array(y), _array(workspace))
    # the biases' values are not read, only whether the layer has them
    weights = (_array(weight_ih), _array(weight_hh), has_bias or None, None, _array(weight_hr))
    with run_with(precision):
        dx, dh0, dc0, grads = cell_by(kernel_cell=cell).plain_layer_backward(
            nonlinearity, record, weights, _array(dy), _array(dh_n), _array(dc_n), input_gradient
        )
    return tuple(_tensor(a, x) for a in (dx, dh0, dc0, *grads))


@layer_backward.register_fake
def _(
    cell, nonlinearity, x, h0, c0, weight_ih, weight_hh, weight_hr, y, workspace, dy, dh_n,
    dc_n, input_gradient, has_bias, precision="float32",
):  # fmt: skip
    empty = x.new_empty(0)
    batch, hidden = x.shape[1], weight_hh.shape[1] if weight_hr is None else weight_hr.shape[1]
    gates = weight_ih.shape[0]
    return (
        torch.empty_like(x, memory_format=torch.contiguous_format) if input_gradient else empty,
        x.new_empty((batch, y.shape[2])),
        x.new_empty((batch, hidden)) if _two_states(cell) else empty.clone(),
        torch.empty_like(weight_ih, memory_format=torch.contiguous_format),
        torch.empty_like(weight_hh, memory_format=torch.contiguous_format),
        x.new_empty(gates) if has_bias else empty.clone(),
        x.new_empty(gates) if has_bias else empty.clone(),
        torch.empty_like(weight_hr, memory_format=torch.contiguous_format)
        if weight_hr is not None
        else empty.clone(),
    )


def _setup_context(ctx, inputs, output):
    cell, nonlinearity, x, h0, c0, w_ih, w_hh, b_ih, _, w_hr, _, precision = inputs
    y, _, c_n, workspace = output
    ctx.cell, ctx.nonlinearity, ctx.has_bias = cell, nonlinearity, b_ih is not None
    ctx.precision = precision
    ctx.mark_non_differentiable(workspace)
    if not _two_states(cell):
        ctx.mark_non_differentiable(c_n)
    ctx.save_for_backward(x, h0, c0, w_ih, w_hh, w_hr, y, workspace)


def _backward(ctx, dy, dh_n, dc_n, _):
    x, h0, c0, w_ih, w_hh, w_hr, y, workspace = ctx.saved_tensors
    needs = ctx.needs_input_grad
    dx, dh0, dc0, dw_ih, dw_hh, db_ih, db_hh, dw_hr = layer_backward(
        ctx.cell, ctx.nonlinearity, x, h0, c0, w_ih, w_hh, w_hr, y, workspace, dy, dh_n,
        dc_n if _two_states(ctx.cell) else None, needs[2], ctx.has_bias, ctx.precision,
    )  # fmt: skip

    def given(grad, i, present=True):
        return grad if present and needs[i] else None

    return (
        None,
        None,
        given(dx, 2),
        given(dh0, 3, h0 is not None),
        given(dc0, 4, c0 is not None),
        given(dw_ih, 5),
        given(dw_hh, 6),
        given(db_ih, 7, ctx.has_bias),
        given(db_hh, 8, ctx.has_bias),
        given(dw_hr, 9, w_hr is not None),
        None,
        None,
    )


layer_forward.register_autograd(_backward, setup_context=_setup_context)


# a module's call, composed of the operators


_PACKED_REASON = (
    "rnnfast.torch: a PackedSequence input runs the bridge's eager route (its lengths are data "
    "a traced graph cannot depend on), a graph break; under fullgraph=True or torch.export, "
    "pass a padded tensor of sequences of one length instead"
)


def _packed_eagerly(module, input, hx):
    """The eager route of a PackedSequence call (torch.compiler.disable'd: a graph break)."""
    return module.forward(input, hx)


def _weights(module):
    """The module's parameters in torch's flat order, read by name: ``_flat_weights`` may hold
    stale tensors where a tracer swapped the parameters (torch.export does; torch's own forward
    refreshes the list first)."""
    return [getattr(module, name) for name in module._flat_weights_names]


def _on_kernels(data, weights, states):
    """Whether rnnfast's kernels take this call (CPU, float32 or float64, one dtype): else
    torch's own forward runs it, as in eager mode."""
    if data.device.type != "cpu" or data.dtype not in _DTYPES:
        return False
    if states is None:
        return False
    for t in (*weights, *states):
        if t is not None and (t.device.type != "cpu" or t.dtype != data.dtype):
            return False
    return True


def forward(module, input, hx, fallback):
    """A bridge module's ``forward(input, hx)`` on the operators (the compilers' route);
    ``fallback`` is torch's own forward, for what rnnfast's kernels do not take."""
    if isinstance(input, PackedSequence):
        if _eager_packed is None or torch.compiler.is_exporting():
            raise RuntimeError(f"{_PACKED_REASON} (rnnfast.torch.{_name(module)})")
        return _eager_packed(module, input, hx)
    states, weights = module._states(hx), _weights(module)
    if torch.is_autocast_enabled("cpu") and input.device.type == "cpu":
        return _forward_autocast(module, input, hx, states, weights, fallback)
    if not _on_kernels(input, weights, states):
        return fallback(input, hx)  # torch's own forward, as in eager mode
    return _forward_kernels(module, input, hx, states, weights, "float32")


def _warn_at_trace(module, refusal):
    """The eager route's AutocastFallbackWarning, given once per compile: TorchDynamo cannot
    trace warnings.warn, and runs comptime's first function while it traces (with this frame's
    locals: it may have no free variables); torch.export's non-strict tracing, plain Python,
    runs the second."""
    from torch._dynamo.comptime import comptime

    message = fallback_message(module, refusal)
    comptime(_warn_traced, lambda: warnings.warn(message, AutocastFallbackWarning, stacklevel=2))


def _warn_traced(ctx):
    message = ctx.get_local("message").as_python_constant()
    warnings.warn(message, AutocastFallbackWarning, stacklevel=2)


def _forward_autocast(module, input, hx, states, weights, fallback):
    """The eager route's ``_forward_autocast`` on the operators: bf16 products on float32
    copies of the input and states, the outputs in torch's dtypes (``_torch_autocast``)."""
    if states is None:
        return fallback(input, hx)  # not a state torch takes: torch says so
    refusal = autocast_refusal(weights, input, states)
    if refusal is not None:
        _warn_at_trace(module, refusal)
        return fallback(input, hx)
    dtypes = output_dtypes(module, input, states, False)
    input, hx = input.float(), module._float_states(hx)
    states = module._states(hx)
    with torch.autocast("cpu", enabled=False):
        y, state = _forward_kernels(module, input, hx, states, weights, "bf16")
    if isinstance(state, tuple):
        return y.to(dtypes[0]), (state[0].to(dtypes[1]), state[1].to(dtypes[2]))
    return y.to(dtypes[0]), state.to(dtypes[1])


def _forward_kernels(module, input, hx, states, weights, precision):
    """The call on the operators with ``precision``'s products."""
    batched = module._check_shapes(input, hx)
    h0, c0 = states
    if batched:
        x = input.transpose(0, 1) if module.batch_first else input
    else:
        x = input.unsqueeze(1)
        h0 = None if h0 is None else h0.unsqueeze(1)
        c0 = None if c0 is None else c0.unsqueeze(1)
    y, h_n, c_n = _stack(module, weights, x, h0, c0, precision)
    if not batched:
        y, h_n = y[:, 0], h_n[:, 0]
        c_n = None if c_n is None else c_n[:, 0]
    elif module.batch_first:
        y = y.transpose(0, 1)
    return (y, (h_n, c_n)) if module.mode == "LSTM" else (y, h_n)


def _cell(module):
    """``(the kernels' name of the cell, the Elman cell's nonlinearity)`` of a torch module,
    by its mode (RNN_TANH, RNN_RELU, GRU, LSTM) from the cell registry (``nn.recurrent.cells``)."""
    name, _, nonlinearity = module.mode.partition("_")
    return cell_by(torch_name=name).kernel_cell, nonlinearity.lower() or "tanh"


def _stack(module, weights, x, h0, c0, precision):
    """The stack over time-major x: (y, h_n, c_n or None), as torch's modules give them."""
    cell, nonlinearity = _cell(module)
    layers, directions = module.num_layers, 2 if module.bidirectional else 1
    per = len(weights) // (layers * directions)
    keep = torch.is_grad_enabled() and (
        x.requires_grad
        or (h0 is not None and h0.requires_grad)
        or (c0 is not None and c0.requires_grad)
        or any(w.requires_grad for w in weights)
    )
    dropout = module.dropout if module.training else 0.0
    h_n, c_n = [], []
    inp = x
    for k in range(layers):
        outs = []
        for d in range(directions):
            i = k * directions + d
            group = weights[i * per : (i + 1) * per]
            w_ih, w_hh = group[0], group[1]
            b_ih, b_hh = (group[2], group[3]) if module.bias else (None, None)
            w_hr = group[-1] if module.proj_size > 0 else None
            y, h, c, _ = layer_forward(
                cell, nonlinearity, inp if d == 0 else inp.flip(0),
                None if h0 is None else h0[i], None if c0 is None else c0[i],
                w_ih, w_hh, b_ih, b_hh, w_hr, keep, precision,
            )  # fmt: skip
            outs.append(y if d == 0 else y.flip(0))
            h_n.append(h)
            c_n.append(c)
        inp = outs[0] if directions == 1 else torch.cat(outs, dim=2)
        if dropout > 0 and k < layers - 1:
            inp = torch.nn.functional.dropout(inp, dropout, training=True)
    return inp, torch.stack(h_n), torch.stack(c_n) if _two_states(cell) else None
