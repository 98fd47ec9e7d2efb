"""The PyTorch bridge: ``rnnfast.torch.RNN``, a drop-in ``torch.nn.RNN`` whose forward and
backward run rnnfast's kernels. torch is imported here only (``import rnnfast.torch``).

``RNN`` *is* a ``torch.nn.RNN`` (a subclass): the same constructor, parameters (the same
names, shapes and initialisation), ``state_dict``, ``repr`` and ``forward(input, hx=None)``
with tensors (batched, batch_first or unbatched) or a ``PackedSequence``, returning
``(output, h_n)`` as torch does. Its forward and backward go through one
``torch.autograd.Function`` per call, which hands the tensors to rnnfast as NumPy views (no
copy for contiguous CPU tensors: the input, the state and the parameters themselves; the
training record keeps them uncopied, guarded by torch's version check of saved tensors, so an
in-place change before backward raises as with ``nn.RNN``), keeps rnnfast's training cache in
the autograd context, and returns the gradients of the input (not computed when it needs none),
of ``hx`` and of every parameter, as ``torch.nn.RNN``'s autograd computes them (to rounding).
A batch_first input is transposed once for the time-major kernels and the output back (the
copies that remain).

Dropout between layers (training mode) draws its masks from a generator seeded from torch's
(so ``torch.manual_seed`` repeats runs; the masks differ from torch's own). Tensors rnnfast's
kernels do not take (not on the CPU, or neither float32 nor float64) run torch's own forward.
Double backward (``create_graph=True`` through the RNN) is not supported.

``convert(module)`` turns every ``torch.nn.RNN`` in a module tree into an ``rnnfast.torch.RNN``
in place (the same objects and parameters: optimizers and hooks keep working);
``from_torch(module)`` returns a new bridge module with a copy of an ``nn.RNN``'s weights, and
``to_torch(module)`` a plain ``torch.nn.RNN`` copy.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.autograd.function import once_differentiable
from torch.nn.utils.rnn import PackedSequence

__all__ = ["RNN", "convert", "from_torch", "to_torch"]

_DTYPES = {torch.float32: np.float32, torch.float64: np.float64}


def _view(t):
    """A NumPy view of a CPU tensor (no copy), detached from autograd."""
    return t.detach().numpy()


def _tensor(a):
    """A tensor sharing ``a``'s memory (rnnfast returns its training outputs read-only; torch
    wants writable arrays, and the memory is ours to hand out)."""
    if not a.flags.writeable:
        a.flags.writeable = True
    return torch.from_numpy(a)


class _RNNFunction(torch.autograd.Function):
    """One call of the rnnfast stack: inputs (layer, names, lengths, x, hx, *weights)."""

    @staticmethod
    def forward(ctx, layer, names, lengths, x, hx, *weights):
        _bind(layer, names, weights)
        y, h_n = layer(_view(x), None if hx is None else _view(hx), lengths)
        ctx.layer, ctx.names = layer, names
        ctx.rnnfast_cache = layer._cache
        layer._cache = None  # the next call of the same module keeps its own
        ctx.hx_given = hx is not None
        # x and hx are saved beside the weights for torch's version check: the layer keeps them
        # uncopied (_inputs_guarded), and an in-place change before backward raises, as with
        # nn.RNN, instead of altering the gradients
        ctx.save_for_backward(x, hx, *weights)
        y_t = _tensor(y)
        if not y_t.is_contiguous():  # batch_first: (B, T, out), as torch returns it
            y_t = y_t.contiguous()
        return y_t, _tensor(h_n)

    @staticmethod
    @once_differentiable
    def backward(ctx, dy, dh_n):
        layer, names = ctx.layer, ctx.names
        weights = ctx.saved_tensors[2:]
        _bind(layer, names, weights)
        # the cache stays with the graph (a retained graph is differentiated again); backward
        # reads it and changes nothing in it
        layer._cache = ctx.rnnfast_cache
        layer.grads = {name: np.zeros_like(p) for name, p in layer._params.items()}
        # an input that needs no gradient (a first layer's data) skips dx's GEMM and transpose
        dx, dh0 = layer.backward(
            None if dy is None else _view(dy),
            None if dh_n is None else _view(dh_n),
            input_gradient=ctx.needs_input_grad[3],
        )
        grads = [
            torch.from_numpy(layer.grads[name]) if need else None
            for name, need in zip(names, ctx.needs_input_grad[5:])
        ]
        dx = None if dx is None else torch.from_numpy(np.ascontiguousarray(dx))
        dh0 = torch.from_numpy(dh0) if ctx.hx_given and ctx.needs_input_grad[4] else None
        return (None, None, None, dx, dh0, *grads)


def _bind(layer, names, weights):
    """Point the rnnfast layer's parameters at the module's (NumPy views, no copy)."""
    for name, w in zip(names, weights):
        layer._params[name] = _view(w)


class RNN(torch.nn.RNN):
    """``torch.nn.RNN`` on rnnfast's kernels: the same constructor, parameters, state_dict
    and ``forward(input, hx=None)`` (tensors or a PackedSequence); see the module's
    documentation."""

    def _rnnfast_layer(self, dtype):
        """The rnnfast layer of this configuration and dtype (its own parameters unused: they
        are bound to the module's at every call)."""
        from .nn import RNN as FastRNN

        layers = self.__dict__.setdefault("_rnnfast_layers", {})
        key = (
            dtype,
            self.input_size,
            self.hidden_size,
            self.num_layers,
            self.nonlinearity,
            self.bias,
            bool(self.bidirectional),
        )
        layer = layers.get(key)
        if layer is None:
            layers.clear()
            layer = FastRNN(
                self.input_size,
                self.hidden_size,
                num_layers=self.num_layers,
                nonlinearity=self.nonlinearity,
                bias=self.bias,
                bidirectional=bool(self.bidirectional),
                dtype=dtype,
            )
            layer._inputs_guarded = True  # see _RNNFunction.forward
            layers[key] = layer
        return layer

    def _runs_on_rnnfast(self, data, hx):
        if getattr(self, "proj_size", 0) or data.device.type != "cpu":
            return False
        if data.dtype not in _DTYPES or any(w.dtype != data.dtype for w in self._flat_weights):
            return False
        if any(w.device.type != "cpu" for w in self._flat_weights):
            return False
        return hx is None or (hx.device.type == "cpu" and hx.dtype == data.dtype)

    def forward(self, input, hx=None):
        packed = isinstance(input, PackedSequence)
        data = input.data if packed else input
        if not self._runs_on_rnnfast(data, hx):
            return super().forward(input, hx)
        if packed:
            return self._forward_packed(input, hx)
        if input.dim() not in (2, 3):
            raise ValueError(
                f"RNN: Expected input to be 2D or 3D, got {input.dim()}D tensor instead"
            )
        batched = input.dim() == 3
        if hx is not None and hx.dim() != (3 if batched else 2):
            raise RuntimeError(
                f"For {'batched 3-D' if batched else 'unbatched 2-D'} input, hx should also be "
                f"{3 if batched else 2}-D but got {hx.dim()}-D tensor"
            )
        # torch's own checks and messages for the shapes
        check_in = input if batched else input.unsqueeze(0 if self.batch_first else 1)
        check_hx = hx if hx is None or batched else hx.unsqueeze(1)
        if check_hx is None:
            batch = check_in.size(0 if self.batch_first else 1)
            check_hx = torch.empty(
                self.num_layers * (2 if self.bidirectional else 1),
                batch,
                self.hidden_size,
                dtype=input.dtype,
            )
        self.check_forward_args(check_in, check_hx, None)
        return self._run(input, hx, None, self.batch_first)

    def _run(self, x, hx, lengths, batch_first):
        layer = self._rnnfast_layer(_DTYPES[x.dtype])
        layer._batch_first = bool(batch_first)
        layer._dropout = float(self.dropout) if self.training else 0.0
        weights = self._flat_weights
        names = tuple(self._flat_weights_names)
        needs_grad = torch.is_grad_enabled() and (
            x.requires_grad
            or (hx is not None and hx.requires_grad)
            or any(w.requires_grad for w in weights)
        )
        if layer._dropout > 0.0:
            seed = int(torch.randint(0, 2**62, (1,), dtype=torch.int64).item())
            layer._dropout_rng = np.random.default_rng(seed)
        if not needs_grad:
            layer.training = layer._dropout > 0.0
            try:
                _bind(layer, names, weights)
                y, h_n = layer(_view(x), None if hx is None else _view(hx), lengths)
            finally:
                layer._cache = None
            y_t = _tensor(y)
            return (y_t.contiguous() if not y_t.is_contiguous() else y_t), _tensor(h_n)
        layer.training = True
        return _RNNFunction.apply(layer, names, lengths, x, hx, *weights)

    def _forward_packed(self, packed, hx):
        """A PackedSequence as a padded time-major batch with lengths (rnnfast's form), and
        the output packed back in the input's order (torch's ops: gradients flow)."""
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


def convert(module):
    """Make every ``torch.nn.RNN`` in ``module`` (itself included) an ``rnnfast.torch.RNN`` in
    place: the same objects, parameters, hooks and optimizer state. Returns ``module``."""
    for sub in module.modules():
        if type(sub) is torch.nn.RNN:
            sub.__class__ = RNN
    return module


def from_torch(module):
    """A new ``rnnfast.torch.RNN`` with the configuration and a copy of the weights of a
    ``torch.nn.RNN`` (its dtype, device and training mode)."""
    if not isinstance(module, torch.nn.RNN):
        raise TypeError(f"module: expected a torch.nn.RNN, got {type(module).__name__}")
    return _copy(module, RNN)


def to_torch(module):
    """A plain ``torch.nn.RNN`` copy of an ``rnnfast.torch.RNN`` (or any ``nn.RNN``)."""
    if not isinstance(module, torch.nn.RNN):
        raise TypeError(f"module: expected an rnnfast.torch.RNN, got {type(module).__name__}")
    return _copy(module, torch.nn.RNN)


def _copy(module, cls):
    import warnings

    weight = next(iter(module.parameters()))
    with warnings.catch_warnings():
        # torch warns that dropout with one layer has nothing to act on; the value is kept
        warnings.filterwarnings("ignore", message=".*dropout.*", category=UserWarning)
        new = cls(
            module.input_size,
            module.hidden_size,
            num_layers=module.num_layers,
            nonlinearity=module.nonlinearity,
            bias=module.bias,
            batch_first=module.batch_first,
            dropout=module.dropout,
            bidirectional=module.bidirectional,
            device=weight.device,
            dtype=weight.dtype,
        )
    new.load_state_dict(module.state_dict())
    return new.train(module.training)
