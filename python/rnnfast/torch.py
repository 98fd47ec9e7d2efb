"""The PyTorch bridge: ``rnnfast.torch.RNN``, ``GRU`` and ``LSTM``, drop-in ``torch.nn.RNN``,
``torch.nn.GRU`` and ``torch.nn.LSTM`` whose forward and backward run rnnfast's kernels. torch
is imported here only (``import rnnfast.torch``).

Each *is* torch's module (a subclass): the same constructor, parameters (the same names,
shapes and initialisation), ``state_dict``, ``repr`` and ``forward(input, hx=None)`` with
tensors (batched, batch_first or unbatched) or a ``PackedSequence`` (``enforce_sorted=False``
too), returning ``(output, h_n)`` as torch does; the LSTM takes hx as the pair ``(h_0, c_0)``
and returns ``(output, (h_n, c_n))``, ``proj_size`` included. The GRU is PyTorch's form of the
cell (rnnfast's ``reset_after=True``). Its forward and backward go through one
``torch.autograd.Function`` per call, which hands the tensors to rnnfast as NumPy views (no
copy for contiguous CPU tensors: the input, the states and the parameters themselves; the
training record keeps them uncopied, guarded by torch's version check of saved tensors, so an
in-place change before backward raises as with torch's modules), keeps rnnfast's training cache
in the autograd context, and returns the gradients of the input (not computed when it needs
none), of the initial states (h_0, and the LSTM's c_0) and of every parameter, as torch's
autograd computes them (to rounding). A batch_first input is transposed once for the
time-major kernels and the output back; a training output is a copy of what backward reads,
so that the caller may change it in place. ``flatten_parameters()``, ``.double()`` /
``.float()`` and ``.to()`` keep working (the parameters are read at every call).

Two routes to the kernels: a call without lengths to a unidirectional module, with no dropout
masks between its layers (most training loops), runs the stack runner's
fast path (``nn.recurrent.stack.plain_forward``: each layer's kernels called straight, the per-call cost a
few tens of microseconds); anything else (PackedSequence, bidirectional, training dropout between
layers, an empty batch) runs rnnfast's general layer (``rnnfast.nn``), whose API forms cost
more per call.

Dropout between layers (training mode) draws its masks from a generator seeded from torch's
(so ``torch.manual_seed`` repeats runs; the masks differ from torch's own). Tensors rnnfast's
kernels do not take (not on the CPU, or neither float32 nor float64) run torch's own forward.

Under ``torch.autocast("cpu", dtype=torch.bfloat16)`` a call runs rnnfast's kernels with bf16
products (``rnnfast.precision``: every GEMM's operands rounded to bf16, float32 sums), forward
and backward (the backward runs later, outside the autocast block: each Function remembers the
products its forward ran with and re-enters them). The input and states are cast to float32
for the kernels (bf16 ones too), the parameters and their gradients stay float32, and the
outputs take the dtypes torch's own module gives them under the same autocast
(``_torch_autocast`` says which, cell by cell). What the bf16 products cannot run (autocast to
float16, a CPU without them, a module that is not float32) runs torch's own forward with an
``AutocastFallbackWarning`` naming the reason and the fix: nn's result in autocast's dtype,
never float32 kernels in its place.

A whole model holding the bridge's modules reloads with ``torch.load``'s default
``weights_only=True`` as one holding ``torch.nn``'s does: importing ``rnnfast.torch`` adds
``RNN``, ``GRU``, ``LSTM`` and ``LayerNormLSTM`` to torch's safe globals (their pickled state
is torch's own).
Double backward (a backward under ``create_graph=True``: a gradient penalty) recomputes the
call with torch's own recurrence and differentiates that (``_torch_recompute``): torch's numbers
and speed, for every option but dropout between layers in training, which raises. A call that
ran bf16 products is recomputed under torch's own bf16 autocast.

Under ``torch.compile`` and ``torch.export`` a call runs rnnfast's kernels as registered custom
operators (``_torch_ops``: ``rnnfast::layer_forward`` / ``layer_backward``, with fake
implementations and an autograd formula), so the compilers see them: no graph break, training
included. A PackedSequence input runs the eager route there (a graph break: an error under
fullgraph=True and torch.export, which want padded tensors); a double backward raises
(AOTAutograd's own limit). Under autocast to bfloat16 the operators run bf16 products as the
eager route does. ``torch.jit.script`` and ``torch.jit.trace`` raise an error naming
torch.compile, torch.export and ``to_torch``. Eager calls keep the autograd.Function route,
cheaper per call.

``convert(module)`` turns every ``torch.nn.RNN``, ``GRU`` and ``LSTM`` in a module tree into the
bridge's in place (the same objects and parameters: optimizers and hooks keep working;
subclasses, with a forward of their own, are left as they are); ``from_torch(module)`` returns
a new bridge module with a copy of a torch module's weights, and ``to_torch(module)`` a plain
torch copy.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from torch.nn.utils.rnn import PackedSequence

from . import _torch_ops
from ._torch_autocast import (
    AutocastFallbackWarning,
    autocast_refusal,
    output_dtypes,
    run_with,
    thread_products,
    warn_fallback,
)
from ._torch_layer_norm import LayerNormLSTM
from ._torch_recompute import differentiable_grads
from ._torch_weight_cache import LayerHook, bridge_cache, clear_caches
from .nn.recurrent.plain_calls import ELMAN_CELLS, GRU_CELL, LSTM_CELL
from .nn.recurrent.stack import plain_backward, plain_forward

__all__ = [
    "GRU",
    "LSTM",
    "RNN",
    "LayerNormLSTM",
    "AutocastFallbackWarning",
    "convert",
    "from_torch",
    "to_torch",
]

_DTYPES = {torch.float32: np.float32, torch.float64: np.float64}
# the cells of the stack runner's fast path (``nn.recurrent.stack.plain_forward``), made once


def _view(t):
    """A NumPy view of a CPU tensor (no copy), detached from autograd."""
    return t.detach().numpy()


def _tensor(a):
    """A tensor sharing ``a``'s memory (rnnfast returns its training outputs read-only; torch
    wants writable arrays, and the memory is ours to hand out)."""
    if not a.flags.writeable:
        a.flags.writeable = True
    return torch.from_numpy(a)


def _graph_grads(ctx, output_grads, lengths, dropout):
    """Both Functions' backward under create_graph=True: the gradients recomputed with torch's
    operators (``_torch_recompute``), so that they have a graph behind them; None for the four
    leading inputs that are not tensors, as both Functions take them. A forward that ran bf16
    products is recomputed under torch's own autocast to bf16, its counterpart."""
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=ctx.precision == "bf16")
    with autocast:
        grads = differentiable_grads(
            ctx.module,
            ctx.saved_tensors,
            ctx.needs_input_grad[4:],
            output_grads,
            lengths,
            ctx.batch_first,
            dropout,
        )
    return (None, None, None, None, *grads)


class _RNNFunction(torch.autograd.Function):
    """One call of the rnnfast stack: inputs (module, layer, names, lengths, x, hx, cx,
    *weights); cx is the LSTM's c0 (None for the other cells, and for an LSTM without a given
    state); module the bridge module (for double backward). The outputs are (y, h_n), and the
    LSTM's (y, h_n, c_n)."""

    @staticmethod
    def forward(ctx, module, layer, names, lengths, x, hx, cx, *weights):
        _bind(layer, names, weights)
        ctx.weights = weights
        paired = layer.cell.num_states == 2
        y, h_n = layer(_view(x), _state_view(hx, cx, paired), lengths)
        ctx.layer, ctx.names, ctx.paired = layer, names, paired
        ctx.module, ctx.lengths, ctx.batch_first = module, lengths, layer._batch_first
        ctx.dropout = layer._dropout if layer.num_layers > 1 else 0.0
        ctx.rnnfast_cache = layer._cache
        layer._cache = None  # the next call of the same module keeps its own
        ctx.hx_given = hx is not None
        # backward runs later, outside the caller's products("bf16") block (autocast's): it
        # re-enters the products this forward ran with
        ctx.precision = thread_products()
        # x and the states are saved beside the weights for torch's version check: the layer
        # keeps them uncopied (_inputs_guarded), and an in-place change before backward
        # raises, as with nn.RNN, instead of altering the gradients
        ctx.save_for_backward(x, hx, cx, *weights)
        # a copy, contiguous (batch_first: (B, T, out), as torch returns it): backward reads
        # the layer's own output, which a caller may change in place
        y_t = torch.from_numpy(np.array(y, order="C"))
        if paired:
            return y_t, _tensor(h_n[0]), _tensor(h_n[1])
        return y_t, _tensor(h_n)

    @staticmethod
    def backward(ctx, dy, dh_n, dc_n=None):
        if torch.is_grad_enabled():  # create_graph=True: gradients with a graph behind them
            return _graph_grads(ctx, (dy, dh_n, dc_n), ctx.lengths, ctx.dropout)
        layer, names = ctx.layer, ctx.names
        ctx.saved_tensors  # noqa: B018 (the version check)
        # the module's own tensors (saved ones unpack as other objects): what the packed
        # weights were checked against in forward
        _bind(layer, names, ctx.weights)
        # the cache stays with the graph (a retained graph is differentiated again); backward
        # reads it and changes nothing in it
        layer._cache = ctx.rnnfast_cache
        layer.grads = {name: np.zeros_like(p) for name, p in layer._params.items()}
        d_state = None if dh_n is None else _view(dh_n)
        if ctx.paired:
            d_state = (d_state, None if dc_n is None else _view(dc_n))
        # an input that needs no gradient (a first layer's data) skips dx's GEMM and transpose
        with run_with(ctx.precision):
            dx, dh0 = layer.backward(
                None if dy is None else _view(dy), d_state, input_gradient=ctx.needs_input_grad[4]
            )
        grads = [
            torch.from_numpy(layer.grads[name]) if need else None
            for name, need in zip(names, ctx.needs_input_grad[7:])
        ]
        dx = None if dx is None else torch.from_numpy(np.ascontiguousarray(dx))
        dh0, dc0 = dh0 if ctx.paired else (dh0, None)
        dh0 = torch.from_numpy(dh0) if ctx.hx_given and ctx.needs_input_grad[5] else None
        dc0 = torch.from_numpy(dc0) if ctx.hx_given and ctx.needs_input_grad[6] else None
        return (None, None, None, None, dx, dh0, dc0, *grads)


def _state_view(hx, cx, paired):
    """The initial state as the rnnfast layer takes it: h0, or the LSTM's pair (h0, c0)."""
    if hx is None:
        return None
    return (_view(hx), _view(cx)) if paired else _view(hx)


def _bind(layer, names, weights):
    """Point the rnnfast layer's parameters at the module's (NumPy views, no copy), and its
    packed-weight caches at the module's for these tensors (``_torch_weight_cache``)."""
    for name, w in zip(names, weights):
        layer._params[name] = _view(w)
    layer.__dict__["_weight_cache_hook"].weights = weights


def _array(t):
    """A C-contiguous NumPy array of a CPU tensor: a view when it is contiguous, else a copy.
    (``numpy(force=True)`` is ``detach().numpy()`` for a real CPU tensor, without the
    intermediate tensor: this runs for every parameter at every call.)"""
    return None if t is None else np.ascontiguousarray(t.numpy(force=True))


def _time_major(t, batch_first):
    """A (B, T, ·) tensor's time-major array (T, B, ·) (a copy), or a (T, B, ·) one's view."""
    a = t.numpy(force=True)
    return np.ascontiguousarray(a.swapaxes(0, 1) if batch_first else a)


def _from_time_major(a, batch_first):
    """A kernel's (T, B, ·) array as the tensor torch returns: itself, or (B, T, ·) (a copy)."""
    return torch.from_numpy(np.ascontiguousarray(a.swapaxes(0, 1)) if batch_first else a)


def _layer_weights(weights, layout):
    """The module's flat weights as each layer's arrays (weight_ih, weight_hh, bias_ih,
    bias_hh, weight_hr), None where the layer has no such parameter."""
    arrays = [_array(w) for w in weights]
    return [tuple(None if i is None else arrays[i] for i in row) for row in layout]


class _PlainFunction(torch.autograd.Function):
    """One call of the plain stack (the stack runner's fast path, ``nn.recurrent.stack``): inputs (module, cell, layout,
    batch_first, x, hx, cx, *weights), layout[k] the positions in weights of layer k's
    (weight_ih, weight_hh, bias_ih, bias_hh, weight_hr), module the bridge module (for double
    backward); outputs (y, h_n), and the LSTM's (y, h_n, c_n)."""

    @staticmethod
    def forward(ctx, module, cell, layout, batch_first, x, hx, cx, *weights):
        # gradients of outputs the loss does not read arrive as None, not as zeros: the
        # kernels then skip them
        ctx.set_materialize_grads(False)
        arrays = _layer_weights(weights, layout)
        ctx.weights = weights  # the tensors the packed weights are checked against
        y, h_n, c_n, records = plain_forward(
            cell, _time_major(x, batch_first), _array(hx), _array(cx), arrays, True,
            module._plain_caches(weights),
        )  # fmt: skip
        ctx.cell, ctx.layout, ctx.batch_first, ctx.module = cell, layout, batch_first, module
        ctx.arrays, ctx.records, ctx.hx_given = arrays, records, hx is not None
        ctx.precision = thread_products()  # for backward, as _RNNFunction's
        # the output is a copy (a batch_first one is made by the transpose): backward reads
        # the kernels' y, and a caller may change its output in place (an in-place
        # activation or dropout), as torch's modules allow
        y_t = _from_time_major(y if batch_first else y.copy(), batch_first)
        # x, the states and the weights are read by backward uncopied: torch's version check
        # of saved tensors makes an in-place change before backward raise, as with torch's
        # modules, instead of altering the gradients
        ctx.save_for_backward(x, hx, cx, *weights)
        if c_n is None:
            return y_t, torch.from_numpy(h_n)
        return y_t, torch.from_numpy(h_n), torch.from_numpy(c_n)

    @staticmethod
    def backward(ctx, dy, dh_n, dc_n=None):
        if torch.is_grad_enabled():  # create_graph=True: gradients with a graph behind them
            return _graph_grads(ctx, (dy, dh_n, dc_n), None, 0.0)
        ctx.saved_tensors  # noqa: B018 (the version check)
        needs = ctx.needs_input_grad[1:]
        with run_with(ctx.precision):
            dx, dh0, dc0, grads = plain_backward(
                ctx.cell,
                ctx.records,
                ctx.arrays,
                None if dy is None else _time_major(dy, ctx.batch_first),
                _array(dh_n),
                _array(dc_n),
                input_gradient=needs[3],
                caches=ctx.module._plain_caches(ctx.weights, contents=False),
            )
        weight_grads = [None] * (len(needs) - 6)
        for row, layer_grads in zip(ctx.layout, grads):
            for i, g in zip(row, layer_grads):
                if i is not None and needs[6 + i]:
                    weight_grads[i] = torch.from_numpy(g)
        dx = None if dx is None else _from_time_major(dx, ctx.batch_first)
        dh0 = torch.from_numpy(dh0) if ctx.hx_given and needs[4] else None
        dc0 = torch.from_numpy(dc0) if ctx.hx_given and needs[5] else None
        return (None, None, None, None, dx, dh0, dc0, *weight_grads)


class _Bridge:
    """What the bridge modules share (mixed in before ``torch.nn.RNN`` / ``GRU`` / ``LSTM``):
    the forward on rnnfast's kernels, PackedSequence and unbatched input, the fallback to
    torch's own forward."""

    def _fast_class(self):
        raise NotImplementedError

    def _fast_options(self):
        """The cell's own constructor options of the rnnfast layer (the key of its cache)."""
        return ()

    def _rnnfast_layer(self, dtype):
        """The rnnfast layer of this configuration and dtype (its own parameters unused: they
        are bound to the module's at every call)."""
        layers = self.__dict__.setdefault("_rnnfast_layers", {})
        options = self._fast_options()
        key = (
            dtype,
            self.input_size,
            self.hidden_size,
            self.num_layers,
            self.bias,
            bool(self.bidirectional),
            options,
        )
        layer = layers.get(key)
        if layer is None:
            layers.clear()
            layer = self._fast_class()(
                self.input_size,
                self.hidden_size,
                num_layers=self.num_layers,
                bias=self.bias,
                bidirectional=bool(self.bidirectional),
                dtype=dtype,
                **dict(options),
            )
            layer._inputs_guarded = True  # see _RNNFunction.forward
            # its packed weights are the module's, checked against torch's version counters;
            # its parameters, views of the module's bound at every call, stay as torch has them
            layer.__dict__["_weight_cache_hook"] = LayerHook(self)
            layer._params = dict(layer._params)
            layers[key] = layer
        return layer

    def _states(self, hx):
        """``(h0, c0)`` of ``hx`` (c0 None but for the LSTM's pair; either None without a
        state); None for what rnnfast's kernels do not take as a state."""
        return hx, None

    def _runs_on_rnnfast(self, data, hx):
        dtype = data.dtype
        if not data.is_cpu or dtype not in _DTYPES:
            return False
        for w in self._flat_weights:  # one loop: this runs at every call
            if w.dtype != dtype or not w.is_cpu:
                return False
        states = self._states(hx)
        return states is not None and all(
            s is None or (type(s) is torch.Tensor and s.is_cpu and s.dtype == dtype) for s in states
        )

    def _check_state_dims(self, hx, batched):
        if hx is not None and hx.dim() != (3 if batched else 2):
            raise RuntimeError(
                f"For {'batched 3-D' if batched else 'unbatched 2-D'} input, hx should also be "
                f"{3 if batched else 2}-D but got {hx.dim()}-D tensor"
            )

    def forward(self, input, hx=None):
        if _torch_ops.compiling(self):  # torch.compile / torch.export: the registered operators
            return _torch_ops.forward(self, input, hx, super().forward)
        packed = isinstance(input, PackedSequence)
        data = input.data if packed else input
        if torch.is_autocast_enabled("cpu") and data.is_cpu:
            return self._forward_autocast(input, hx, packed)
        if not self._runs_on_rnnfast(data, hx):
            return super().forward(input, hx)
        return self._forward_kernels(input, hx, packed)

    def _forward_kernels(self, input, hx, packed):
        """The call on rnnfast's kernels, with this thread's products."""
        if packed:
            return self._forward_packed(input, hx)
        self._check_shapes(input, hx)
        return self._run(input, hx, None, self.batch_first)

    def _forward_autocast(self, input, hx, packed):
        """A call under ``torch.autocast("cpu", dtype=torch.bfloat16)``: rnnfast's kernels with
        bf16 products on float32 copies of the input and states (the parameters are float32
        already), the outputs cast to the dtypes torch's own module gives them
        (``_torch_autocast``); torch's own forward, with a warning, for what they cannot run."""
        data = input.data if packed else input
        states = self._states(hx)
        if states is None:
            return super().forward(input, hx)  # not a state torch takes: torch says so
        refusal = autocast_refusal(self._flat_weights, data, states)
        if refusal is not None:
            warn_fallback(self, refusal, stacklevel=5)  # the line that called the module
            return super().forward(input, hx)
        dtypes = output_dtypes(self, data, states, packed)
        input = input.float()  # a PackedSequence's too; a no-op for float32
        hx = self._float_states(hx)
        # autocast off inside: the bridge's own torch ops (packing, transposes) stay float32
        with torch.autocast("cpu", enabled=False), run_with("bf16"):
            y, state = self._forward_kernels(input, hx, packed)
        y = y.to(dtypes[0])  # a PackedSequence's data too
        if isinstance(state, tuple):
            return y, (state[0].to(dtypes[1]), state[1].to(dtypes[2]))
        return y, state.to(dtypes[1])

    def _float_states(self, hx):
        return None if hx is None else hx.float()

    def _check_shapes(self, input, hx):
        """Whether the (unpacked) ``input`` is batched, after torch's checks of its shape and
        of ``hx``'s, with torch's messages; eager mode's and the operators' (``_torch_ops``)."""
        if input.dim() not in (2, 3):
            raise ValueError(
                f"{self.mode}: Expected input to be 2D or 3D, got {input.dim()}D instead"
                if self.mode in ("GRU", "LSTM")
                else f"RNN: Expected input to be 2D or 3D, got {input.dim()}D tensor instead"
            )
        batched = input.dim() == 3
        self._check_state_dims(hx, batched)
        # torch's own checks and messages for the shapes
        check_in = input if batched else input.unsqueeze(0 if self.batch_first else 1)
        if hx is None:
            self.check_input(check_in, None)
        else:
            self.check_forward_args(check_in, self._batched_states(hx, batched), None)
        return batched

    def _batched_states(self, hx, batched):
        return hx if batched else hx.unsqueeze(1)

    def _plain_cell(self):
        """The cell of the plain stack (``nn.recurrent.stack.plain_forward``), None where the kernels
        cannot run this module's configuration there."""
        raise NotImplementedError

    def _plain_layout(self):
        """Per layer, the positions in ``_flat_weights`` of (weight_ih, weight_hh, bias_ih,
        bias_hh, weight_hr), None for those it has not (kept per list of names)."""
        names = tuple(self._flat_weights_names)
        cached = self.__dict__.get("_rnnfast_plain_layout")
        if cached is not None and cached[0] == names:
            return cached[1]
        where = {name: i for i, name in enumerate(names)}
        kinds = ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr")
        layout = tuple(
            tuple(where.get(f"{kind}_l{k}") for kind in kinds) for k in range(self.num_layers)
        )
        self.__dict__["_rnnfast_plain_layout"] = (names, layout)
        return layout

    def _direction_rows(self):
        """Per direction index ``k * dirs + d``, the positions in ``_flat_weights`` of its
        tensors, in order (kept per list of names): what its packed weights are checked
        against."""
        names = tuple(self._flat_weights_names)
        cached = self.__dict__.get("_rnnfast_direction_rows")
        if cached is not None and cached[0] == names:
            return cached[1]
        suffixes = [
            f"_l{k}" + ("_reverse" if d else "")
            for k in range(self.num_layers)
            for d in range(2 if self.bidirectional else 1)
        ]
        rows = tuple(
            tuple(i for i, name in enumerate(names) if name.endswith(sfx)) for sfx in suffixes
        )
        self.__dict__["_rnnfast_direction_rows"] = (names, rows)
        return rows

    def _plain_caches(self, weights, contents=True):
        """The packed-weight cache of each layer of the plain stack (one direction) for the
        weight tensors ``weights`` (``_flat_weights``, or those a backward saved, which trusts
        its forward's check of their bytes: ``contents=False``)."""
        rows = self._direction_rows()
        return [
            bridge_cache(self, k, tuple(weights[i] for i in rows[k]), contents)
            for k in range(len(rows))
        ]

    def parameters_changed(self):
        """Drop the packed weights kept between calls: for a write torch's version counter does
        not see (through ``w.data``); in-place writes to the parameters themselves (optimizers,
        ``torch.no_grad()`` copies, ``load_state_dict``) are seen. Returns the module."""
        clear_caches(self)
        return self

    def _plain_call(self, x, lengths):
        """The plain stack's cell for this call, or None where it runs the general layer:
        lengths, two directions, dropout masks between layers, an empty batch."""
        if (
            lengths is not None
            or self.bidirectional
            or (self.training and self.dropout > 0 and self.num_layers > 1)
            or x.shape[0] == 0
            or (x.dim() == 3 and x.shape[1] == 0)
        ):
            return None
        return self._plain_cell()

    def _run_plain(self, cell, x, h0, c0, batch_first):
        """``_run`` on the plain stack; unbatched input and states as a batch of one."""
        unbatched = x.dim() == 2
        if unbatched:
            x, batch_first = x.unsqueeze(1), False
            h0 = None if h0 is None else h0.unsqueeze(1)
            c0 = None if c0 is None else c0.unsqueeze(1)
        layout, weights = self._plain_layout(), self._flat_weights
        needs_grad = torch.is_grad_enabled() and (
            x.requires_grad
            or (h0 is not None and h0.requires_grad)
            or (c0 is not None and c0.requires_grad)
            or any(w.requires_grad for w in weights)
        )
        if needs_grad:
            out = _PlainFunction.apply(self, cell, layout, batch_first, x, h0, c0, *weights)
        else:
            y, h_n, c_n, _ = plain_forward(
                cell,
                _time_major(x, batch_first),
                _array(h0),
                _array(c0),
                _layer_weights(weights, layout),
                False,
                self._plain_caches(weights),
            )
            out = (_from_time_major(y, batch_first), torch.from_numpy(h_n))
            out += () if c_n is None else (torch.from_numpy(c_n),)
        if unbatched:
            out = (out[0][:, 0], *(s[:, 0] for s in out[1:]))
        return (out[0], (out[1], out[2])) if len(out) == 3 else out

    def _run(self, x, hx, lengths, batch_first):
        cell = self._plain_call(x, lengths)
        if cell is not None:
            return self._run_plain(cell, x, *self._states(hx), batch_first)
        layer = self._rnnfast_layer(_DTYPES[x.dtype])
        layer._batch_first = bool(batch_first)
        layer._dropout = float(self.dropout) if self.training else 0.0
        weights = self._flat_weights
        names = tuple(self._flat_weights_names)
        h0, c0 = self._states(hx)
        needs_grad = torch.is_grad_enabled() and (
            x.requires_grad
            or (h0 is not None and h0.requires_grad)
            or (c0 is not None and c0.requires_grad)
            or any(w.requires_grad for w in weights)
        )
        if layer._dropout > 0.0:
            seed = int(torch.randint(0, 2**62, (1,), dtype=torch.int64).item())
            layer._dropout_rng = np.random.default_rng(seed)
        paired = layer.cell.num_states == 2
        if not needs_grad:
            layer.training = layer._dropout > 0.0
            try:
                _bind(layer, names, weights)
                y, h_n = layer(_view(x), _state_view(h0, c0, paired), lengths)
            finally:
                layer._cache = None
            y_t = _tensor(y)
            y_t = y_t.contiguous() if not y_t.is_contiguous() else y_t
            if paired:
                return y_t, (_tensor(h_n[0]), _tensor(h_n[1]))
            return y_t, _tensor(h_n)
        layer.training = True
        out = _RNNFunction.apply(self, layer, names, lengths, x, h0, c0, *weights)
        return (out[0], (out[1], out[2])) if paired else out

    def _forward_packed(self, packed, hx):
        """A PackedSequence as a padded time-major batch with lengths (rnnfast's form), and
        the output packed back in the input's order (torch's ops: gradients flow). The states
        stay in the caller's order, as the padded batch: torch's permutation of hx (and cx)
        by ``sorted_indices`` and back is the identity here."""
        data, batch_sizes, sorted_indices, unsorted_indices = packed
        sizes = batch_sizes.tolist()
        steps, batch = len(sizes), sizes[0] if sizes else 0
        t_index = torch.repeat_interleave(torch.arange(steps), batch_sizes)
        b_sorted = torch.cat([torch.arange(n) for n in sizes]) if sizes else t_index
        b_index = b_sorted if sorted_indices is None else sorted_indices[b_sorted]
        padded = data.new_zeros((steps, batch, data.shape[1]))
        padded = padded.index_put((t_index, b_index), data)
        lengths = np.zeros(batch, dtype=np.int64)
        np.add.at(lengths, b_index.numpy(), 1)
        if hx is not None:
            self.check_forward_args(data, hx, batch_sizes)
        y, h_n = self._run(padded, hx, lengths, False)
        out = y[t_index, b_index]
        return PackedSequence(out, batch_sizes, sorted_indices, unsorted_indices), h_n

    def __prepare_scriptable__(self):
        _torch_ops.refuse_scripting(self)  # torch.jit.script: an error naming the alternatives

    def __getstate__(self):
        # rnnfast's per-call caches (its layer, the weights' layout) are rebuilt at the next
        # call: a pickled module (torch.save of a whole model) holds torch's state only, so that
        # torch.load's default weights_only=True can read it back (see add_safe_globals below)
        state = super().__getstate__()  # torch's (it drops the weights' weak references)
        return {k: v for k, v in state.items() if not k.startswith("_rnnfast_")}


class RNN(_Bridge, torch.nn.RNN):
    """``torch.nn.RNN`` on rnnfast's kernels: the same constructor, parameters, state_dict
    and ``forward(input, hx=None)`` (tensors or a PackedSequence); see the module's
    documentation."""

    def _fast_class(self):
        from .nn import RNN as FastRNN

        return FastRNN

    def _plain_cell(self):
        # None for another nonlinearity: the general layer says what is wrong with it
        return ELMAN_CELLS.get(self.nonlinearity)

    def _fast_options(self):
        return (("nonlinearity", self.nonlinearity),)


class GRU(_Bridge, torch.nn.GRU):
    """``torch.nn.GRU`` on rnnfast's kernels (PyTorch's form of the cell, ``reset_after``):
    the same constructor, parameters, state_dict and ``forward(input, hx=None)`` (tensors or
    a PackedSequence) returning ``(output, h_n)``; see the module's documentation."""

    def _fast_class(self):
        from .nn import GRU as FastGRU

        return FastGRU

    def _plain_cell(self):
        return GRU_CELL


class LSTM(_Bridge, torch.nn.LSTM):
    """``torch.nn.LSTM`` on rnnfast's kernels, ``proj_size`` included: the same constructor,
    parameters, state_dict and ``forward(input, hx=None)`` with hx the pair ``(h_0, c_0)``
    (tensors or a PackedSequence), returning ``(output, (h_n, c_n))``; backward routes the
    gradients to h_0 and c_0. See the module's documentation."""

    def _fast_class(self):
        from .nn import LSTM as FastLSTM

        return FastLSTM

    def _fast_options(self):
        return (("proj_size", int(self.proj_size)),)

    def _plain_cell(self):
        return LSTM_CELL

    def _states(self, hx):
        if hx is None:
            return None, None
        if not isinstance(hx, tuple) or len(hx) != 2 or any(s is None for s in hx):
            return None  # not torch's pair: torch's own forward says so
        return hx[0], hx[1]

    def _check_state_dims(self, hx, batched):
        if hx is None:
            return
        n = 3 if batched else 2
        if hx[0].dim() != n or hx[1].dim() != n:
            raise RuntimeError(
                f"For {'batched 3-D' if batched else 'unbatched 2-D'} input, hx and cx should "
                f"also be {n}-D but got ({hx[0].dim()}-D, {hx[1].dim()}-D) tensors"
            )

    def _batched_states(self, hx, batched):
        return tuple(hx) if batched else (hx[0].unsqueeze(1), hx[1].unsqueeze(1))

    def _float_states(self, hx):
        return None if hx is None else (hx[0].float(), hx[1].float())


_BRIDGES = {torch.nn.RNN: RNN, torch.nn.GRU: GRU, torch.nn.LSTM: LSTM}

# A model holding the bridge's modules reloads with torch.load's default weights_only=True as
# one holding torch.nn's does: the unpickler may rebuild these four classes (their state is
# torch's own: tensors, numbers, strings; see _Bridge.__getstate__), nothing else of rnnfast's.
torch.serialization.add_safe_globals([RNN, GRU, LSTM, LayerNormLSTM])
# torch.compile traces the three classes (Dynamo's allow_rnn; see _torch_ops)
_torch_ops.allow_in_dynamo()


def convert(module):
    """Make every ``torch.nn.RNN``, ``torch.nn.GRU`` and ``torch.nn.LSTM`` in ``module``
    (itself included) an ``rnnfast.torch.RNN``, ``GRU`` or ``LSTM`` in place: the same
    objects, parameters, hooks and optimizer state. Subclasses of them (their own forward)
    are left as they are. Returns ``module``."""
    for sub in module.modules():
        bridge = _BRIDGES.get(type(sub))
        if bridge is not None:
            sub.__class__ = bridge
    return module


def _torch_class(module, what):
    for base in _BRIDGES:
        if isinstance(module, base):
            return base
    raise TypeError(
        f"module: expected {what} torch.nn.RNN, torch.nn.GRU or torch.nn.LSTM, got "
        f"{type(module).__name__}"
    )


def from_torch(module):
    """A new ``rnnfast.torch.RNN``, ``GRU`` or ``LSTM`` with the configuration and a copy of
    the weights of a ``torch.nn.RNN``, ``GRU`` or ``LSTM`` (its dtype, device and training
    mode)."""
    return _copy(module, _BRIDGES[_torch_class(module, "a")])


def to_torch(module):
    """A plain ``torch.nn.RNN``, ``GRU`` or ``LSTM`` copy of a bridge module (or of any
    of torch's)."""
    return _copy(module, _torch_class(module, "an rnnfast.torch or a"))


def _copy(module, cls):
    weight = next(iter(module.parameters()))
    with warnings.catch_warnings():
        # torch warns that dropout with one layer has nothing to act on; the value is kept
        warnings.filterwarnings("ignore", message=".*dropout.*", category=UserWarning)
        options = {}
        if isinstance(module, torch.nn.RNN):
            options["nonlinearity"] = module.nonlinearity
        if isinstance(module, torch.nn.LSTM):
            options["proj_size"] = module.proj_size
        new = cls(
            module.input_size,
            module.hidden_size,
            num_layers=module.num_layers,
            **options,
            bias=module.bias,
            batch_first=module.batch_first,
            dropout=module.dropout,
            bidirectional=module.bidirectional,
            device=weight.device,
            dtype=weight.dtype,
        )
    new.load_state_dict(module.state_dict())
    return new.train(module.training)
