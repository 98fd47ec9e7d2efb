"""The stack runner of the RNN layer: layers x directions over the whole sequence, in the
order the kernels want it (time-major, the batch sorted longest first, each reverse direction
reversed within its lengths), with what sits between the layers (residual connections,
dense skips, dropout) and inside them (input and recurrent dropout masks, Keras's step masks), forward and
backward. The layer (``nn.recurrent.rnn`` / ``rnnfast.RNN``) owns the API forms around it: PyTorch's and
Keras's returns, merge modes, batch_first, go_backwards, stateful layers and ``step``.

Everything here is in processing order: ``x`` (T, B, D) time-major, the batch sorted as
``run.lengths`` says, already reversed when the layer reads backwards.

The fast path (``plain_forward`` / ``plain_backward``) runs the simple case straight on the
cells' kernels: unidirectional layers over a batch of equal lengths, no dropout, nothing
between the layers, PyTorch's form of each cell. The PyTorch bridge (``rnnfast.torch``) takes
it for most training loops, where the layer's per-call machinery (API forms, state joins,
sorting, masks, gradient accumulation) would cost more than the kernels at small T and B.
Arrays C-contiguous, the weights of layer k the tuple ``(weight_ih, weight_hh, bias_ih,
bias_hh, weight_hr)`` (None where absent); every shape and dtype is checked by the kernels.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ... import functional
from ..._validation import dropout_mask
from ...data import reversal_index
from .._mixed_precision import layer_products
from . import dilation as dil
from .cells import direction_cache

__all__ = [
    "BatchOrder",
    "PlainCell",
    "PlainRecord",
    "Reverser",
    "Run",
    "StackCache",
    "float_direction_kernel",
    "plain_backward",
    "plain_forward",
    "stack_backward",
    "stack_forward",
]


class Reverser:
    """Reverses each sequence of a time-major batch within its own length (padding stays at
    the end), or the whole batch without lengths: a NumPy gather, no loop over time. The same
    gather un-reverses."""

    def __init__(self, lengths, steps, batch):
        if lengths is None:
            self.index = None
        else:
            self.index = (reversal_index(lengths, steps), np.arange(batch)[None, :])

    def __call__(self, a):
        if a is None:
            return None
        if self.index is None:
            return np.ascontiguousarray(a[::-1])
        return a[self.index]


class BatchOrder:
    """The batch sorted by length, longest first, once for all layers and directions: the
    kernels want that order (each step is then one GEMM over the running sequences), and
    sorting here rather than in every functional call saves a gather of x, y and dy per layer
    and direction, each way. Identity when there are no lengths or they are sorted already."""

    def __init__(self, lengths):
        self.order = self.inverse = None
        self.lengths = lengths
        if lengths is not None and np.any(lengths[:-1] < lengths[1:]):
            self.order = np.argsort(-lengths, kind="stable")
            self.inverse = np.argsort(self.order)
            self.lengths = np.ascontiguousarray(lengths[self.order])

    def sort(self, a, axis):
        if self.order is None or a is None:
            return a
        return np.take(a, self.order, axis=axis)

    def unsort(self, a, axis):
        if self.order is None or a is None:
            return a
        return np.take(a, self.inverse, axis=axis)


class Run(NamedTuple):
    """How one forward runs the stack (and so how its backward must).

    lengths: (B,) sorted, or None. step_mask: (T, B) bool in processing order, or None.
    zero_output: Keras's zero_output_for_mask for the masked steps. table: the embedding
    table of token input (layer 0 reads ids), or None. training: masks are drawn and caches
    kept. dilations: each layer's dilation (h_t reads h_{t-d}; empty: 1 everywhere). rings:
    also return each (layer, direction)'s last d states (nn.recurrent.dilation), what a stateful
    dilated layer carries to its next call. cell_options: the keyword options of a gated
    cell's kernels as the forward read them (``nn.recurrent.cells``), None for the Elman cell (which
    reads nonlinearity and alphas). input_to_all: every layer k > 0 reads [x, the layer
    below's output] (dense skips from the input). all_to_output: the stack's output is every
    layer's output concatenated, layer 0 first (dense skips to the output). precision: the
    layer's products ("float32" or "bf16", ``nn._mixed_precision``), its backward's too."""

    nonlinearity: str
    alphas: list
    residual: bool
    lengths: object
    step_mask: object
    zero_output: bool
    table: object
    training: bool
    dilations: tuple = ()
    rings: bool = False
    cell_options: object = None
    input_to_all: bool = False
    all_to_output: bool = False
    precision: str = "float32"


class StackCache(NamedTuple):
    """What one training forward keeps for its backward: per layer the directions' (input,
    h0, output, input-dropout mask, recurrent mask) and the between-layer dropout mask."""

    layers: list


def _directions(layer):
    return 2 if layer.bidirectional else 1


def float_direction_kernel(layer, idx, x, h0, nonlinearity, lengths, alpha, **masks):
    """One (layer, direction) of a float layer over the whole sequence, on its parameters
    (``functional.rnn_forward``): ``(y, h_n)``. A layer's ``_direction_kernel`` is this, or
    the quantized kernels for ``rnnfast.quantize``'s copies."""
    w_ih, w_hh, b_ih, b_hh = (None if n is None else layer._params[n] for n in layer._names[idx])
    return functional.rnn_forward(
        x, w_ih, w_hh, b_ih, b_hh, h0, nonlinearity, True, lengths, alpha,
        weight_cache=direction_cache(layer, idx), **masks,
    )  # fmt: skip


def _draw_masks(layer, run, batch, width):
    """The variational masks of one (layer, direction), one per sequence shared by every step
    (Gal and Ghahramani): on its input (B, width) and on h_{t-1} (B, H); None outside
    training or at probability 0 (and on the input of token ids, width None: the layer
    refuses input dropout with fused token input). A gated cell's masks are one per gate, as
    Keras 3's: (gates, B, width) and (gates, B, R), both applied inside its kernels."""
    if not run.training:
        return None, None
    rng, dtype = layer._dropout_rng, layer.dtype
    gates = layer.cell.num_gates
    m_in = (
        dropout_mask(rng, (batch, width) if gates == 1 else (gates, batch, width),
                     layer.input_dropout, dtype)
        if layer.input_dropout > 0.0 and width is not None
        else None
    )  # fmt: skip
    # the Elman cell's one mask (B, H); a gated cell's one per gate (gates, B, R), Keras 3's
    shape = (batch, layer.cell.output_width(layer))
    if layer.cell.num_gates > 1:
        shape = (layer.cell.num_gates, *shape)
    m_rec = (
        dropout_mask(rng, shape, layer.recurrent_dropout, dtype)
        if layer.recurrent_dropout > 0.0
        else None
    )
    return m_in, m_rec


def stack_forward(layer, x, h0, run):
    """The stack over ``x`` (T, B, D) (token ids (T, B) when ``run.table`` is set) from ``h0``
    (layers*dirs, B, S) (S: the cell's joined state width, ``nn.recurrent.cells``), or a list of one ring
    (d_k, B, S) per (layer, direction) (one state per chain, nn.recurrent.dilation), or None:
    ``(out (T, B, dirs*R), h_n, cache, rings)``, cache None
    outside training, rings (a list of one ring per (layer, direction)) None unless
    ``run.rings``."""
    # every kernel call of a recurrent layer's forward is below: its products are set here
    with layer_products(run.precision):
        return _stack_forward(layer, x, h0, run)


def _stack_forward(layer, x, h0, run):
    steps, batch = x.shape[0], x.shape[1]
    S, dirs = layer.cell.state_width(layer), _directions(layer)
    rev = Reverser(run.lengths, steps, batch) if dirs == 2 else None
    drop = run.training and layer.dropout > 0.0 and layer.num_layers > 1
    h_n = np.empty((layer.num_layers * dirs, batch, S), dtype=layer.dtype)
    caches, rings = [], [] if run.rings else None
    inp, layer_outputs = x, []
    for k in range(layer.num_layers):
        if run.input_to_all and k > 0:  # the stack's input beside the layer below's output
            inp = np.concatenate([x, inp], axis=2)
        runs, outs = [], []
        for d in range(dirs):
            idx = k * dirs + d
            xin = rev(inp) if d else inp
            mask = rev(run.step_mask) if d else run.step_mask
            tokens = run.table is not None and k == 0
            m_in, m_rec = _draw_masks(layer, run, batch, None if tokens else xin.shape[2])
            per_gate = m_in is not None and m_in.ndim == 3  # a gated cell's: to its kernels
            fed = xin if m_in is None or per_gate else xin * m_in[None]
            h0_d = None if h0 is None else h0[idx]
            y_d, h_n[idx], record, ring = _direction_forward(
                layer, run, k, idx, fed, mask, h0_d, m_rec, tokens, m_in if per_gate else None
            )
            if rings is not None:
                rings.append(ring)
            runs.append((record, m_in))
            outs.append(rev(y_d) if d else y_d)
        out = outs[0] if dirs == 1 else np.concatenate(outs, axis=2)
        if run.residual and k > 0:
            out = out + inp
        if run.all_to_output:
            layer_outputs.append(out)  # before the dropout, which acts on the next layer's input
        keep = None
        if drop and k < layer.num_layers - 1:
            keep = dropout_mask(layer._dropout_rng, out.shape, layer.dropout, layer.dtype)
            out = out * keep
        caches.append((runs, keep))
        inp = out
    if run.all_to_output:
        inp = np.concatenate(layer_outputs, axis=2)
    return inp, h_n, (StackCache(caches) if run.training else None), rings


def stack_backward(layer, cache, run, d_out, dh_n, input_gradient=True):
    """Gradients of one training forward's stack: ``(dx, dh0, grads)`` from the gradient of
    its output sequence ``d_out`` (T, B, dirs*R) (None: zero) and of h_n (None: zero). dx is
    the embedding table's gradient (V, D) with token input; None with ``input_gradient=False``
    (the first layer's kernels then skip it; a table's gradient is always computed).
    ``grads`` maps parameter names to this call's gradients (the caller adds them, so a
    failed call adds nothing). It runs with the products its forward ran with
    (``run.precision``)."""
    with layer_products(run.precision):
        return _stack_backward(layer, cache, run, d_out, dh_n, input_gradient)


def _stack_backward(layer, cache, run, d_out, dh_n, input_gradient):
    R, dirs = layer.cell.output_width(layer), _directions(layer)
    steps, batch = cache.layers[0][0][0][0].steps_batch  # layer 0, direction 0's record
    rev = Reverser(run.lengths, steps, batch) if dirs == 2 else None
    grads = {}
    dh0 = [None] * (layer.num_layers * dirs)
    # dense skips: the gradient of the stack's output is one block per layer's output, and
    # that of its input gathers the layers' gradients of the x they read
    d_blocks = _layer_blocks(d_out, layer.num_layers) if run.all_to_output else None
    d_out = None if run.all_to_output else d_out
    d_stack_input = None
    D = layer.input_size
    for k in reversed(range(layer.num_layers)):
        runs, keep = cache.layers[k]
        if keep is not None and d_out is not None:
            d_out = d_out * keep
        if d_blocks is not None and d_blocks[k] is not None:
            d_out = d_blocks[k] if d_out is None else d_out + d_blocks[k]
        d_in = d_out.copy() if (run.residual and k > 0 and d_out is not None) else None
        for d in range(dirs):
            idx = k * dirs + d
            record, m_in = runs[d]
            dy = None if d_out is None else d_out[..., d * R : (d + 1) * R]
            if dy is not None:
                dy = rev(dy) if d else np.ascontiguousarray(dy)
            tokens = run.table is not None and k == 0
            needed = input_gradient or k > 0 or tokens
            g, dx, dh0[idx] = _direction_backward(
                layer, run, k, idx, record, dy, None if dh_n is None else dh_n[idx], tokens, needed
            )
            grads.update(g)
            if dx is None:
                continue
            if m_in is not None and m_in.ndim == 2:  # per gate: the kernels applied them
                dx = dx * m_in[None]
            # with token input, dx is the table's gradient: no time or batch order in it
            dx = rev(dx) if d and not tokens else dx
            d_in = dx if d_in is None else d_in + dx
        if run.input_to_all and k > 0 and d_in is not None:
            d_x = d_in[..., :D]
            d_stack_input = d_x if d_stack_input is None else d_stack_input + d_x
            d_in = np.ascontiguousarray(d_in[..., D:])
        d_out = d_in
    if d_stack_input is not None and d_out is not None:  # None: input_gradient=False
        d_out = d_out + d_stack_input
    per_chain = any(runs[d][0].per_chain for runs, _ in cache.layers for d in range(dirs))
    return d_out, (dh0 if per_chain else np.stack(dh0)), grads


def _layer_blocks(d_out, num_layers):
    """The gradient of an all_to_output stack's output (T, B, L*W) as one (T, B, W) block per
    layer (None for each when ``d_out`` is None)."""
    if d_out is None:
        return [None] * num_layers
    return [np.ascontiguousarray(b) for b in np.split(d_out, num_layers, axis=2)]


class _Record(NamedTuple):
    """One (layer, direction) as the kernels ran it: (T, B) shapes for an undilated layer; for
    a dilated one, its d interleaved chains as d*B rows (nn.recurrent.dilation). per_chain: h0 was a
    ring, one state per chain (its gradient is then one per chain too)."""

    steps_batch: tuple
    fed: object
    h0: object
    y: object
    lengths: object
    step_mask: object
    recurrent_mask: object
    dilation: int
    last_rows: object
    per_chain: bool
    workspace: object = None
    input_mask: object = None  # a gated cell's per-gate input masks (gates, B, D)
    ring_index: object = None  # per chain, the entry of the ring h0 it started from
    ring_length: int = 1  # that ring's length (the short form, nn.recurrent.dilation)


def _direction_forward(layer, run, k, idx, fed, mask, h0_d, m_rec, tokens, m_in=None):
    """One (layer, direction): ``(y (T, B, R), h_n (B, S), record, ring)``. A dilated layer
    runs its chains as one batch of d*B rows; h_n is then each sequence's state after its own
    last step, in the chain that holds that step. h0_d is (B, S) (every chain starts from it)
    or a ring (d, B, S) (one per chain); ring, the last d states (d, B, S), only when
    ``run.rings``. The dropout masks m_rec and m_in (a gated cell's per-gate input masks),
    one per sequence, are mapped to the chains (each reads its sequence's)."""
    steps, batch = fed.shape[0], fed.shape[1]
    dilation = run.dilations[k] if run.dilations else 1
    lengths, last, index = run.lengths, None, None
    per_chain = h0_d is not None and h0_d.ndim == 3
    # the ring a stateful call continues (nn.recurrent.dilation's short form; a plain h0 is a ring of one)
    ring_in = None
    if run.rings and dilation > 1:
        ring_in = h0_d if per_chain else _as_ring(h0_d, batch, layer)
    ring_length = h0_d.shape[0] if per_chain else 1
    # as many chains as the call has steps at most: O(T) whatever the dilation (nn.recurrent.dilation)
    d = dil.effective_dilation(dilation, steps, per_chain)
    if d > 1:
        # chains of equal length need none (the kernels' plain path), else each its own
        full = run.lengths is None and steps % d == 0
        lengths = None if full else dil.chain_lengths(run.lengths, steps, batch, d)
        last = dil.last_rows(run.lengths, steps, batch, d)
        fed, mask = dil.to_chains(fed, d), dil.to_chains(mask, d, fill=False)
        index = dil.ring_index(dilation, ring_length, d) if per_chain else None
        h0_d = dil.chain_h0(h0_d, d, index)
        m_rec, m_in = dil.chain_masks(m_rec, d), dil.chain_masks(m_in, d)
    elif per_chain:  # the ring of an undilated layer of a dilated stack: its one state
        h0_d = h0_d[0]
    record = _Record((steps, batch), fed, h0_d, None, lengths, mask, m_rec, d, last, per_chain)
    record = record._replace(input_mask=m_in, ring_index=index, ring_length=ring_length)
    y, h_n, workspace = layer.cell.forward(
        layer,
        run,
        k,
        idx,
        run.table if tokens else fed,
        h0_d,
        lengths,
        fed if tokens else None,
        mask,
        m_rec,
        input_mask=m_in,
    )
    record = record._replace(y=y, workspace=workspace)
    ring = None
    if ring_in is not None:
        ring = dil.ring_from_chains(h_n, run.lengths, steps, batch, dilation, d, ring_in)
    elif run.rings:
        ring = h_n[None]
    if d == 1:
        return y, h_n, record, ring
    return dil.from_chains(y, d, steps), h_n[last], record, ring


def _as_ring(h0_d, batch, layer):
    """A plain initial state (B, S), or None for zeros, as a ring of one (1, B, S)."""
    if h0_d is None:
        return np.zeros((1, batch, layer.cell.state_width(layer)), dtype=layer.dtype)
    return h0_d[None]


def _direction_backward(layer, run, k, idx, record, dy, dh_n, tokens, input_gradient):
    """``(gradients {name: array}, dx (T, B, D) or the table's (V, D), dh0 (B, S))`` of one
    (layer, direction) from the gradients of its outputs dy (T, B, R) and its h_n (B, S); dx
    None without ``input_gradient``."""
    d = record.dilation
    steps, batch = record.steps_batch
    if d > 1:
        dy = None if dy is None else dil.to_chains(dy, d)
        if dh_n is not None:
            dh_n = dil.chain_state_gradient(dh_n, record.last_rows, d)
    grads, dx, dh0 = layer.cell.backward(
        layer, run, k, idx, record, dy, dh_n, run.table if tokens else None, input_gradient
    )
    if d == 1:
        return grads, dx, (dh0[None] if record.per_chain else dh0)
    dx = dx if tokens or dx is None else dil.from_chains(dx, d, steps)
    dh0 = dh0.reshape(d, batch, -1)
    # a ring gave each chain its own h0 (some chains the same entry of a short or partly read
    # ring: their sum); otherwise every chain started from the one h0, whose gradient is then
    # the chains' sum
    if record.per_chain:
        return grads, dx, dil.ring_gradient(dh0, record.ring_index, record.ring_length)
    return grads, dx, dh0.sum(axis=0)


# ---- the fast path ------------------------------------------------------------------------------


class PlainCell(NamedTuple):
    """The fast path's cell: its description (``nn.recurrent.cells``) and the Elman cell's nonlinearity
    ("tanh" or "relu"; the gated cells run PyTorch's tanh and sigmoid)."""

    spec: object
    nonlinearity: str = "tanh"

    @property
    def kind(self):
        """The cell as the kernels name it ("elman", "gru", "lstm")."""
        return self.spec.kernel_cell


class PlainRecord(NamedTuple):
    """What a layer's backward reads: its input, initial states, output and workspace."""

    x: np.ndarray
    h0: object
    c0: object
    y: np.ndarray
    workspace: object


def _row(s, k):
    return None if s is None else s[k]


def _stacked(states):
    """Per-layer states as one (L, B, ·) array: one layer's as a view."""
    return states[0][None] if len(states) == 1 else np.stack(states)


def plain_forward(cell, x, h0, c0, weights, keep, caches=None):
    """The fast path over x (T, B, D): ``(y (T, B, R), h_n (L, B, R), c_n (L, B, H) or None,
    records)``. h0 (L, B, R) and c0 (L, B, H) (a two-state cell's) or None for zeros.
    ``keep``: training, the records for :func:`plain_backward` (else None). ``caches``: per
    layer its packed weights (a ``_core.WeightCache`` valid for ``weights[k]``, or None), or
    None: none kept."""
    spec, h_n, c_n, records = cell.spec, [], [], [] if keep else None
    inp = x
    for k, w in enumerate(weights):
        h0_k, c0_k = _row(h0, k), _row(c0, k)
        y, h, c, workspace = spec.plain_layer_forward(
            cell.nonlinearity, inp, h0_k, c0_k, w, keep, _row(caches, k)
        )
        if keep:
            records.append(PlainRecord(inp, h0_k, c0_k, y, workspace))
        h_n.append(h)
        c_n.append(c)
        inp = y
    return inp, _stacked(h_n), _stacked(c_n) if spec.num_states == 2 else None, records


def plain_backward(cell, records, weights, dy, dh_n, dc_n, input_gradient, caches=None):
    """Gradients of one :func:`plain_forward` from those of y (T, B, R), h_n and c_n (each
    None for zeros): ``(dx (T, B, D) or None without input_gradient, dh0 (L, B, R), dc0 (L, B,
    H) or None, grads)``, grads[k] the tuple ``(dweight_ih, dweight_hh, dbias_ih, dbias_hh,
    dweight_hr)`` of layer k (None where the layer has no such parameter), each a new array.
    ``caches``: as :func:`plain_forward`'s."""
    spec, layers = cell.spec, len(weights)
    dh0, dc0, grads = [None] * layers, [None] * layers, [None] * layers
    d_out = dy
    for k in reversed(range(layers)):
        needed = input_gradient or k > 0  # a lower layer reads this one's dx as its dy
        d_out, dh0[k], dc0[k], grads[k] = spec.plain_layer_backward(
            cell.nonlinearity, records[k], weights[k], d_out, _row(dh_n, k), _row(dc_n, k), needed,
            _row(caches, k),
        )  # fmt: skip
    return d_out, _stacked(dh0), _stacked(dc0) if spec.num_states == 2 else None, grads
