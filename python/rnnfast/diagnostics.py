"""Gradient-flow diagnostics of recurrent layers: why gradients vanish or explode over time.

For the recurrence ``h_t = (1 - alpha) h_{t-1} + alpha act(z_t)``,
``z_t = W_ih x_t + b_ih + W_hh h_{t-1} + b_hh``, the Jacobian of one step is

    A_t = dh_t / dh_{t-1} = (1 - alpha) I + alpha diag(act'(z_t)) W_hh

and ``dh_t / dh_0 = A_t ... A_1`` (the lecture notes write its transpose, a product of
``W^T diag(act'(.))``; the two have the same spectral and Frobenius norms). In the linear regime
(act' ~ 1, alpha = 1) its norm grows or decays like ``rho(W_hh)^t``: a spectral radius above 1
explodes gradients, below 1 makes them vanish. Leaky units (alpha < 1) move the eigenvalues
towards 1 and lengthen the reach.

- :func:`spectral_radius`, :func:`singular_values`, :func:`for_layer`: of each ``W_hh``;
  :func:`scale_to_spectral_radius`, :func:`set_spectral_radius` to set it.
- :func:`jacobian_norms`: ``||dh_t / dh_0||`` over t, by forward-mode products along the
  layer's own trajectory.
- :func:`hidden_gradients`, :func:`gradient_norms`: ``dL/dh_t`` per step for one backward.

Everything is computed in float64, from the layer's parameters and a forward of its own kernels;
these are analysis tools, not part of training. :func:`hidden_gradients` takes dL/dh_t from one
float64 backward of rnnfast's kernels: their backward computes the deltas ``dL/dz_t`` step by
step, and hands them out as its input gradient when run with ``W_ih = I``; each ``dL/dh_t`` is
then one GEMM away (the deltas of the step after it times W_hh, plus the direct gradient), with
no Python loop over time but the leaky units' scalar carry. That backward is one extra: the
layer's own training backward keeps its deltas to itself (for them to come free, the kernels'
backward would have to return them, an optional (T, B, H) output). Full-length sequences only (no
``lengths`` or masks); unidirectional layers; no dropout of any kind (the eval-mode
trajectory). A dilated layer (h_t reads h_{t-d}) is run as the layer runs it, d interleaved
chains (rnnfast.nn.recurrent.dilation): its Jacobians are products along each chain,
``dh_t / dh_0 = A_t A_{t-d} ... A_{t mod d}``, and its gradients reach back d steps per factor.

Gated layers (``rnnfast.GRU``, ``rnnfast.LSTM``: any layer whose ``cell`` has more than one
gate) have no closed-form step Jacobian here; their diagnostics run the layer's own kernels one
step at a time, in float64, on a one-layer copy of each layer (the same cell and options):
:func:`jacobian_norms` takes each step's Jacobian ``A_t = ds_t / ds_{t-1}`` from one backward
of that step over S unit gradients per sequence, and :func:`hidden_gradients` carries
``dL/ds_t`` back through one backward per step. ``s`` is the cell's whole state: h for the
GRU, the pair (h, c) for the LSTM (its cell state is where its gradient flows), so the LSTM's
Jacobians are (R + H) square and its ``g`` and ``dh0`` come as pairs. :func:`for_layer` reports
each gate block of ``W_hh`` (an LSTM with a projection: the block times ``W_hr``, the map from
one step's cell output to the gate); :func:`set_spectral_radius` refuses gated layers (a gated
cell's gradient flow depends on its gates, not on one radius).

A deep-transition layer (``rnnfast.DeepTransitionRNN``, k >= 2 layers inside the step) is run
the gated layers' way, one step at a time on its own kernels: its step Jacobian is
``diag(act'(z_k)) W_k ... diag(act'(z_1)) W_hh``, k nonlinear layers per step. ``for_layer``
and ``set_spectral_radius`` read and scale its ``W_hh`` only.
"""

from __future__ import annotations

import numpy as np

from . import functional
from ._parameters import writing
from ._validation import check_int
from .nn.recurrent import dilation as dil

__all__ = [
    "for_layer",
    "gradient_norms",
    "hidden_gradients",
    "jacobian_norms",
    "scale_to_spectral_radius",
    "set_spectral_radius",
    "singular_values",
    "spectral_radius",
]

_NORMS = ("spectral", "fro")


def _square(name, w):
    arr = np.asarray(w)
    if arr.dtype.kind not in "fiu":
        raise TypeError(f"{name}: expected a real matrix, got dtype {arr.dtype}")
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
        raise ValueError(f"{name}: expected a square matrix (H, H), got shape {arr.shape}")
    return arr.astype(np.float64)


def spectral_radius(w_hh):
    """The largest modulus of an eigenvalue of ``w_hh`` (H, H), a float."""
    w = _square("w_hh", w_hh)
    return float(np.max(np.abs(np.linalg.eigvals(w)))) if w.size else 0.0


def singular_values(w_hh):
    """The singular values of ``w_hh`` (H, H), largest first (float64 (H,)); the first is its
    spectral norm, an upper bound of the spectral radius."""
    return np.linalg.svd(_square("w_hh", w_hh), compute_uv=False)


def _recurrent_weights(rnn):
    names = [n for n, _ in rnn.named_parameters() if n.startswith("weight_hh")]
    if not names:
        raise TypeError(
            f"rnn: expected an RNN layer (parameters weight_hh_l*), got {type(rnn).__name__}"
        )
    params = dict(rnn.named_parameters())
    return [(n, params[n]) for n in names]


def _gated(rnn):
    """Whether ``rnn`` runs a gated cell (GRU, LSTM: more than one gate block), which the
    diagnostics step through its own kernels; the Elman cell's Jacobians are written here."""
    cell = getattr(rnn, "cell", None)
    return cell is not None and cell.num_gates > 1


def _stepped(rnn):
    """Whether the diagnostics step ``rnn`` through its own kernels: a gated cell, or a deep
    transition (``rnnfast.DeepTransitionRNN`` with k >= 2: its step Jacobian is a product
    over the transition's k layers, not the closed form written here)."""
    return _gated(rnn) or getattr(rnn, "transition_layers", 1) > 1


def _recurrent_blocks(rnn):
    """``(name, (H, H) float64)`` per recurrent map: each ``weight_hh_*`` of an Elman layer; each
    gate block ``weight_hh_*[gate]`` of a gated one (times ``weight_hr_*`` with a projection)."""
    weights = _recurrent_weights(rnn)
    if not _gated(rnn):
        return weights
    H, gates = rnn.hidden_size, rnn.cell.gate_orders["torch"]
    params = dict(rnn.named_parameters())
    blocks = []
    for name, w in weights:
        hr = params.get(name.replace("weight_hh", "weight_hr", 1))
        for i, gate in enumerate(gates):
            block = w[i * H : (i + 1) * H].astype(np.float64)
            blocks.append((f"{name}[{gate}]", block if hr is None else block @ hr))
    return blocks


def for_layer(rnn):
    """``{name: (spectral radius, singular values)}`` for every ``weight_hh_*`` of ``rnn``
    (every layer and direction, PyTorch's names).

    A gated layer's ``weight_hh_*`` stacks one (H, R) block per gate: its entries are
    ``"weight_hh_l0[r]"`` and the like, one per gate in PyTorch's order (GRU r, z, n; LSTM i,
    f, g, o); with an LSTM's projection each block is multiplied by ``weight_hr_*`` (R, H),
    which makes it the (H, H) map from one step's cell output to the gate's pre-activation.
    """
    return {name: (spectral_radius(w), singular_values(w)) for name, w in _recurrent_blocks(rnn)}


def scale_to_spectral_radius(w_hh, radius):
    """``w_hh`` scaled to spectral radius ``radius`` (a new array of its dtype)."""
    w = np.asarray(w_hh)
    if not np.isfinite(radius) or radius < 0:
        raise ValueError(f"radius: expected a finite number >= 0, got {radius}")
    current = spectral_radius(w)
    if current == 0.0:
        raise ValueError(
            f"w_hh: its spectral radius is 0 (nilpotent); it cannot be scaled to {radius}"
        )
    return (w * (radius / current)).astype(w.dtype)


def set_spectral_radius(rnn, radius):
    """Scale every ``weight_hh_*`` of ``rnn`` in place to spectral radius ``radius``; returns
    ``rnn``. Elman layers only: a gated layer's ``weight_hh_*`` stacks its gates' blocks, and
    its gradient flow depends on the gates' values, not on one radius (ValueError; scale a
    block yourself with :func:`scale_to_spectral_radius`)."""
    if _gated(rnn):
        gates = ", ".join(rnn.cell.gate_orders["torch"])
        raise ValueError(
            f"rnn: set_spectral_radius scales an Elman layer's W_hh (rnnfast.RNN); "
            f"{type(rnn).__name__}'s weight_hh_* stacks {rnn.cell.num_gates} gate blocks "
            f"({gates}), whose one radius means nothing for its gradient flow: scale a block "
            "with scale_to_spectral_radius(w[i*H:(i+1)*H], radius) if you mean to"
        )
    weights = [w for _, w in _recurrent_weights(rnn)]
    with writing(weights):  # the layer's live parameters are read-only
        for w in weights:
            w[...] = scale_to_spectral_radius(w, radius)
    return rnn


# ---- trajectories -------------------------------------------------------------------------------


class _LayerRun:
    """One layer of the stack along a forward: its input, h0, outputs (time-major) and
    parameters, its dilation d and the same in the chain layout the kernels ran (nn.recurrent.dilation:
    input, h0, chain lengths (None when all are full), outputs; for d = 1 the sequence itself)."""

    __slots__ = (
        "alpha",
        "b",
        "chain_h0",
        "chain_inp",
        "chain_lengths",
        "chain_y",
        "d",
        "h0",
        "inp",
        "names",
        "w_hh",
        "w_ih",
        "y",
    )


def _check_rnn(rnn):
    if getattr(rnn, "bidirectional", False):
        raise ValueError(
            "rnn: a bidirectional layer has two recurrences; the diagnostics "
            "handle unidirectional layers (build one per direction)"
        )
    if getattr(rnn, "go_backwards", False):
        raise ValueError("rnn: go_backwards is not handled; reverse x yourself instead")
    for option in ("input_to_all", "all_to_output"):
        if getattr(rnn, option, False):
            raise ValueError(
                f"rnn: {option}=True (dense skips) is not handled; the diagnostics follow a "
                "stack whose layers each read only the one below"
            )
    if not hasattr(rnn, "num_layers") or not hasattr(rnn, "hidden_size"):
        raise TypeError(
            f"rnn: expected a recurrent layer (rnnfast.RNN, GRU or LSTM), got {type(rnn).__name__}"
        )


def _time_major(rnn, name, a, width):
    arr = np.asarray(a)
    if arr.dtype.kind != "f":
        raise TypeError(f"{name}: expected a float array, got dtype {arr.dtype}")
    layout = "(B, T, F)" if rnn.batch_first else "(T, B, F)"
    if arr.ndim != 3 or arr.shape[2] != width:
        raise ValueError(
            f"{name}: expected 3 dimensions {layout} with F = {width}, got shape {arr.shape}"
        )
    if rnn.batch_first:
        arr = arr.swapaxes(0, 1)
    return np.ascontiguousarray(arr, dtype=rnn.dtype)


def _layer_index(rnn, layer):
    n = rnn.num_layers
    return check_int("layer", layer, -n, n - 1) % n  # a negative layer counts from the top


def _trajectory(rnn, x, h0):
    """Run the stack layer by layer with rnnfast's kernels (no dropout): a _LayerRun each."""
    _check_rnn(rnn)
    xs = _time_major(rnn, "x", x, rnn.input_size)
    batch = xs.shape[1]
    H = rnn.hidden_size
    if h0 is not None:
        h0 = np.asarray(h0)
        if h0.shape != (rnn.num_layers, batch, H):
            raise ValueError(
                f"h0: expected shape (num_layers, B, H) = "
                f"{(rnn.num_layers, batch, H)}, got shape {h0.shape}"
            )
        h0 = np.ascontiguousarray(h0, dtype=rnn.dtype)
    params = dict(rnn.named_parameters())
    alpha = rnn.alpha
    alphas = list(alpha) if isinstance(alpha, (list, tuple)) else [alpha] * rnn.num_layers
    dilation = getattr(rnn, "dilation", 1)
    dilations = list(dilation) if isinstance(dilation, list) else [dilation] * rnn.num_layers
    steps = xs.shape[0]
    runs, inp = [], xs
    for k in range(rnn.num_layers):
        run = _LayerRun()
        run.names = (f"weight_ih_l{k}", f"weight_hh_l{k}")
        run.w_ih, run.w_hh = params[run.names[0]], params[run.names[1]]
        b = [params[n] for n in (f"bias_ih_l{k}", f"bias_hh_l{k}") if n in params]
        run.b = sum(b) if b else None
        run.alpha = float(alphas[k])
        run.inp = inp
        run.h0 = np.zeros((batch, H), rnn.dtype) if h0 is None else h0[k]
        # as many chains as there are steps at most: each then holds one step (nn.recurrent.dilation)
        run.d = d = dil.effective_dilation(int(dilations[k]), steps)
        run.chain_inp, run.chain_h0 = dil.to_chains(inp, d), dil.chain_h0(run.h0, d)
        full = steps % d == 0
        run.chain_lengths = None if full else dil.chain_lengths(None, steps, batch, d)
        run.chain_y, _ = functional.rnn_forward(
            run.chain_inp,
            run.w_ih,
            run.w_hh,
            params.get(f"bias_ih_l{k}"),
            params.get(f"bias_hh_l{k}"),
            run.chain_h0,
            rnn.nonlinearity,
            True,
            run.chain_lengths,
            run.alpha,
        )
        run.y = dil.from_chains(run.chain_y, d, steps)
        out = run.y
        if getattr(rnn, "residual", False) and k > 0:
            out = out + inp
        runs.append(run)
        inp = out
    return runs


def _act_derivative(run, nonlinearity):
    """act'(z_t) (T, B, H) in float64, z recomputed from the stored outputs (z_t reads
    h_{t-d}, h0 for t < d)."""
    y = run.y.astype(np.float64)
    steps, d = y.shape[0], run.d
    head = np.broadcast_to(run.h0.astype(np.float64), (min(d, steps),) + run.h0.shape)
    prev = np.concatenate([head, y[: max(steps - d, 0)]], axis=0)
    z = run.inp.astype(np.float64) @ run.w_ih.T.astype(np.float64) + prev @ run.w_hh.T.astype(
        np.float64
    )
    if run.b is not None:
        z = z + run.b.astype(np.float64)
    if nonlinearity == "tanh":
        return 1.0 - np.tanh(z) ** 2
    return (z > 0).astype(np.float64)


def jacobian_norms(rnn, x, h0=None, *, layer=-1, norm="spectral", item=None):
    """``||dh_t / dh_0||`` for t = 1..T along the trajectory of ``x``: an array (T,).

    ``h_0`` is the layer's initial state (``h0``, zeros when omitted) and ``h_t`` its output at
    step t (1-based: entry 0 is the Jacobian of the first step, ``A_1``). The Jacobians are
    accumulated by forward-mode products ``J_t = A_t J_{t-1}``, ``J_0 = I``, with act' taken at
    the pre-activations recomputed from the stored outputs (exact, in float64), the layer's
    input held fixed. A dilated layer's ``J_t = A_t J_{t-d}``, each of its chains from ``I``.

    Parameters
    ----------
    rnn : rnnfast.RNN, unidirectional
    x : (T, B, D) (or (B, T, D) batch_first), the layer's dtype
    h0 : (num_layers, B, H), optional
    layer : int
        Which layer of a stack (default the last); its input is the output of the one below.
    norm : {"spectral", "fro"}
        The spectral norm (largest singular value) or the Frobenius norm of each J_t.
    item : int, optional
        One batch item's norms; by default the norms are averaged over the batch.

    Costs B * T * H^3 flops (H x H products per step and item).

    A gated layer's J_t is the Jacobian of its whole state s_t (the LSTM's (h, c): (R + H)
    square) with respect to s_0; ``h0`` is then in the layer's own form (the LSTM's pair).
    """
    if norm not in _NORMS:
        raise ValueError(f"norm: expected one of {_NORMS}, got {norm!r}")
    if _stepped(rnn):
        return _cell_jacobian_norms(rnn, x, h0, layer, norm, item)
    runs = _trajectory(rnn, x, h0)
    run = runs[_layer_index(rnn, layer)]
    steps, batch = run.y.shape[0], run.y.shape[1]
    if item is not None:
        item = check_int("item", item, 0, batch - 1)  # a sequence of the batch
    d = _act_derivative(run, rnn.nonlinearity)
    if item is not None:
        d = d[:, item : item + 1]
    H = rnn.hidden_size
    w = run.w_hh.astype(np.float64)
    a = run.alpha
    # one running product per chain: step t continues chain t mod dilation
    chains = np.broadcast_to(np.eye(H), (run.d, d.shape[1], H, H)).copy()
    out = np.empty(steps)
    for t in range(steps):
        # A_t J = (1 - a) J + a diag(d_t) W J
        J = chains[t % run.d]
        wj = w @ J
        J = chains[t % run.d] = (1.0 - a) * J + a * d[t][:, :, None] * wj
        if norm == "spectral":
            n = np.linalg.norm(J, ord=2, axis=(1, 2))
        else:
            n = np.sqrt(np.sum(J * J, axis=(1, 2)))
        out[t] = float(np.mean(n))
    return out


def hidden_gradients(rnn, x, d_output, h0=None, *, layer=-1, dh_n=None):
    """``(g, dh0)``: ``g[t] = dL/dh_t`` (T, B, H) in float64, the total gradient reaching the
    hidden state of ``layer`` at step t (its direct term plus what flows back from later steps),
    and ``dh0 = dL/dh_0`` (B, H), for ``L = sum(d_output * output) + sum(dh_n * h_n)``.

    ``d_output`` is the gradient of the layer stack's output sequence ((T, B, H) or (B, T, H)
    batch_first, as its forward returns it in PyTorch's form). The recurrence, from the stored
    outputs:

        g[T] = dy[T] + dh_n
        g[t-1] = dy[t-1] + (1 - alpha) g[t] + alpha (g[t] * act'(z_t)) W_hh

    For a lower layer of a stack, its output's gradient comes from the layers above (their
    backward through rnnfast's kernels). ``dh0`` matches ``rnn.backward(...)[1][layer]``.

    The deltas ``dL/dz_t`` come from one float64 backward of the kernels (module docstring);
    ``g`` follows from them by one GEMM, ``g[t-1] = dy[t-1] + (1 - alpha) g[t] + delta_t W_hh``
    (``g[t-d]`` from ``g[t]`` in a layer of dilation d: the steps of other chains get none).

    A gated layer's ``g[t]`` is ``dL/ds_t`` of its whole state, in the layer's form: the GRU's
    (T, B, H); the LSTM's pair ``(dL/dh_t (T, B, R), dL/dc_t (T, B, H))``, and ``dh0`` the
    pair ``(dh0, dc0)``; ``h0`` and ``dh_n`` are in its form too (the LSTM's pairs).
    """
    if _stepped(rnn):
        return _cell_hidden_gradients(rnn, x, d_output, h0, layer, dh_n)
    runs = _trajectory(rnn, x, h0)
    k = _layer_index(rnn, layer)
    top = runs[-1]
    steps, batch, H = top.y.shape
    d = _time_major(rnn, "d_output", d_output, H).astype(np.float64)
    dhn = None
    if dh_n is not None:
        dhn = np.asarray(dh_n, dtype=np.float64)
        if dhn.shape != (rnn.num_layers, batch, H):
            raise ValueError(
                f"dh_n: expected shape (num_layers, B, H) = "
                f"{(rnn.num_layers, batch, H)}, got shape {dhn.shape}"
            )
    residual = getattr(rnn, "residual", False)
    for j in range(rnn.num_layers - 1, k, -1):  # down to the layer asked for
        run = runs[j]
        g = functional.rnn_backward(
            run.chain_inp,
            run.w_ih,
            run.w_hh,
            run.chain_y,
            dil.to_chains(d.astype(rnn.dtype), run.d),
            None if dhn is None else _chained_state(run, dhn[j].astype(rnn.dtype)),
            h0=run.chain_h0,
            nonlinearity=rnn.nonlinearity,
            lengths=run.chain_lengths,
            alpha=run.alpha,
            step_mask=None,
            zero_output_for_mask=False,
            recurrent_mask=None,
        )
        d_in = dil.from_chains(g.dx, run.d, steps).astype(np.float64)
        d = d_in + d if residual and j > 0 else d_in
    return _state_gradients(runs[k], rnn.nonlinearity, d, None if dhn is None else dhn[k])


def _chained_state(run, dh_n):
    """dL/dh_n (B, H) as the gradient of the chains' final states (d*B, H)."""
    steps, batch = run.y.shape[0], run.y.shape[1]
    return dil.chain_state_gradient(dh_n, dil.last_rows(None, steps, batch, run.d), run.d)


def _state_gradients(run, nonlinearity, dy, dh_n):
    """``(g, dh0)`` of one layer, g[t] = dL/dh_t (T, B, H) float64, from the deltas of a
    float64 kernel backward in the layer's chain layout. With ``W_ih = I`` its input gradient
    dx_t = delta_t W_ih is delta_t itself (x is then any (S, rows, H) array: it only enters
    dW_ih, discarded). Within a chain, step s + 1 follows step s."""
    steps, batch, H = run.y.shape
    w_hh = run.w_hh.astype(np.float64)
    y = run.chain_y.astype(np.float64)
    dy = dil.to_chains(np.asarray(dy, dtype=np.float64), run.d)
    dh_n = None if dh_n is None else _chained_state(run, np.asarray(dh_n, dtype=np.float64))
    kernel = functional.rnn_backward(
        y,
        np.eye(H),
        w_hh,
        y,
        dy,
        dh_n,
        h0=run.chain_h0.astype(np.float64),
        nonlinearity=nonlinearity,
        lengths=run.chain_lengths,
        alpha=run.alpha,
        step_mask=None,
        zero_output_for_mask=False,
        recurrent_mask=None,
    )
    delta = kernel.dx  # (S, rows, H): dL/dz_s, zero at the padding past a chain's end
    g = dy.copy()  # the direct terms, then what flows back into them
    if len(g):
        if dh_n is not None:  # only the chain of step T-1 has some, and it runs all S steps
            g[-1] += dh_n
        # delta_{s+1} W_hh for every s < S-1 at once: one GEMM over all those rows
        flat = g[:-1].reshape(-1, H)
        flat += delta[1:].reshape(-1, H) @ w_hh
        keep = 1.0 - run.alpha  # leaky units carry (1 - alpha) of g_t to h_{t-1} directly
        if keep:
            for s in range(len(g) - 2, -1, -1):
                g[s] += keep * g[s + 1]
    dh0 = kernel.dh0.reshape(run.d, batch, H).sum(axis=0)  # every chain started from h0
    return dil.from_chains(g, run.d, steps), dh0


def gradient_norms(rnn, x, d_output, h0=None, *, layer=-1, dh_n=None, per_item=False):
    """The per-step norms ``||dL/dh_t||`` of :func:`hidden_gradients`: (T,) Euclidean norms over
    the whole batch (the Frobenius norm of each (B, H) slice), or (T, B) one per sequence with
    ``per_item=True``. To see how far a gradient reaches, give ``d_output`` zeros but at the
    last step: then ``gradient_norms[t] = ||(dh_T / dh_t)^T d_T||``. A gated layer's norms are
    those of its whole state's gradient (the LSTM's h and c together)."""
    g, _ = hidden_gradients(rnn, x, d_output, h0, layer=layer, dh_n=dh_n)
    if isinstance(g, tuple):  # the LSTM's (h, c): the norm of the whole state
        g = np.concatenate(g, axis=-1)
    if per_item:
        return np.sqrt(np.sum(g * g, axis=2))
    return np.sqrt(np.sum(g * g, axis=(1, 2)))


# ---- gated cells: their own kernels, one step at a time ------------------------------------------

# a one-layer copy of a gated layer runs one direction, time-major, with nothing random
_ALONE = {
    "num_layers": 1,
    "bidirectional": False,
    "batch_first": False,
    "dropout": 0.0,
    "dtype": "float64",
    "precision": "float32",  # the float64 copy's products (bf16 is for float32 layers)
    "residual": False,
    "merge_mode": "concat",
    "go_backwards": False,
    "return_sequences": None,
    "return_state": None,
    "stateful": False,
    "input_dropout": 0.0,
    "recurrent_dropout": 0.0,
    "dilation": 1,
}


class _CellRun:
    """One layer of a gated stack along a forward, in float64: a one-layer copy of it
    (``alone``), its input (T, B, D), its joined states s_t (T, B, S) (nn.recurrent.cells: the LSTM's h
    and c side by side), its initial state (B, S) and its dilation."""

    __slots__ = ("alone", "d", "inp", "s", "s0")


def _alone(rnn, k, width):
    """Layer k of ``rnn`` as a one-layer float64 layer of the same class and options, with
    layer k's parameters."""
    config = rnn.get_config()
    config.update({key: value for key, value in _ALONE.items() if key in config})
    config["input_size"] = width
    alone = type(rnn)(**config)
    suffix = f"_l{k}"
    alone.load_state_dict(
        {
            name[: -len(suffix)] + "_l0": np.asarray(p, dtype=np.float64)
            for name, p in rnn.named_parameters()
            if name.endswith(suffix)
        }
    )
    return alone


def _form(alone, s):
    """A joined state (B, S) as a one-layer layer takes h0 and dh_n: (1, B, S), the LSTM's
    split into its pair (h, c)."""
    parts = alone.cell.split_state(alone, s[None])
    if alone.cell.num_states == 1:
        return np.ascontiguousarray(parts)
    return tuple(np.ascontiguousarray(p) for p in parts)


def _joined(state):
    """The inverse of :func:`_form`: (B, S)."""
    if isinstance(state, tuple):
        return np.concatenate(state, axis=-1)[0]
    return state[0]


def _split(rnn, s):
    """A joined state array (..., S) in the layer's form: itself, or the LSTM's (h, c)."""
    if rnn.cell.num_states == 1:
        return s
    return tuple(np.ascontiguousarray(p) for p in rnn.cell.split_state(rnn, s))


def _cell_trajectory(rnn, x, h0):
    """The stack run layer by layer, step by step, in float64: a _CellRun each."""
    _check_rnn(rnn)
    xs = _time_major(rnn, "x", x, rnn.input_size).astype(np.float64)
    steps, batch = xs.shape[0], xs.shape[1]
    S, R = rnn.cell.state_width(rnn), rnn.cell.output_width(rnn)
    if h0 is not None:  # the layer's own form, checked and joined as its stack runner takes it
        h0 = np.asarray(rnn._state_input("h0", h0, batch, False), dtype=np.float64)
    dilation = getattr(rnn, "dilation", 1)
    dilations = list(dilation) if isinstance(dilation, list) else [dilation] * rnn.num_layers
    runs, inp = [], xs
    for k in range(rnn.num_layers):
        run = _CellRun()
        run.alone = alone = _alone(rnn, k, inp.shape[2]).eval()
        run.d = d = int(dilations[k])
        run.inp = inp
        run.s0 = np.zeros((batch, S)) if h0 is None else h0[k]
        run.s = np.empty((steps, batch, S))
        for t in range(steps):  # step t reads s_{t-d} (s_0 before the first d steps)
            _, state = alone.step(inp[t], _form(alone, run.s[t - d] if t >= d else run.s0))
            run.s[t] = _joined(state)
        out = run.s[..., :R]  # a gated layer's output is its h, the state's first R columns
        if getattr(rnn, "residual", False) and k > 0:
            out = out + inp
        runs.append(run)
        inp = out
    return runs


def _cell_backward(run, direct):
    """Back through one gated layer, one kernel backward per step: from the direct gradient
    of each state ``direct`` (T, B, S) (the output's in its h columns, dh_n's at the last
    step), ``(g (T, B, S) = dL/ds_t in total, ds0 (B, S), dx (T, B, D))``."""
    alone, d = run.alone.train(), run.d
    g = direct.copy()
    dx = np.empty_like(run.inp)
    ds0 = np.zeros_like(run.s0)
    for t in range(len(g) - 1, -1, -1):  # g[t] is complete once the steps after t are done
        alone(run.inp[t : t + 1], _form(alone, run.s[t - d] if t >= d else run.s0))
        dx_t, d_prev = alone.backward(None, _form(alone, g[t]))
        dx[t] = dx_t[0]
        if t >= d:
            g[t - d] += _joined(d_prev)
        else:
            ds0 += _joined(d_prev)
    alone.eval()
    return g, ds0, dx


def _cell_hidden_gradients(rnn, x, d_output, h0, layer, dh_n):
    runs = _cell_trajectory(rnn, x, h0)
    k = _layer_index(rnn, layer)
    steps, batch, S = runs[-1].s.shape
    R = rnn.cell.output_width(rnn)
    d = _time_major(rnn, "d_output", d_output, R).astype(np.float64)
    dhn = None
    if dh_n is not None:
        dhn = np.asarray(rnn._state_input("dh_n", dh_n, batch, False), dtype=np.float64)
    residual = getattr(rnn, "residual", False)

    def direct(j, dy):
        out = np.zeros((steps, batch, S))
        out[..., :R] = dy
        if dhn is not None and steps:
            out[-1] += dhn[j]  # h_n is the state after the last step
        return out

    for j in range(rnn.num_layers - 1, k, -1):  # down to the layer asked for
        _, _, dx = _cell_backward(runs[j], direct(j, d))
        d = dx + d if residual and j > 0 else dx
    g, ds0, _ = _cell_backward(runs[k], direct(k, d))
    return _split(rnn, g), _split(rnn, ds0)


def _cell_jacobian_norms(rnn, x, h0, layer, norm, item):
    runs = _cell_trajectory(rnn, x, h0)
    run = runs[_layer_index(rnn, layer)]
    steps, batch, S = run.s.shape
    inp, s, s0 = run.inp, run.s, run.s0
    if item is not None:
        item = check_int("item", item, 0, batch - 1)  # a sequence of the batch
        inp, s, s0 = inp[:, item : item + 1], s[:, item : item + 1], s0[item : item + 1]
        batch = 1
    alone, d = run.alone.train(), run.d
    # S copies of each sequence's step, told the unit gradients e_0 .. e_{S-1} of its state:
    # copy i's gradient of the previous state is row i of A_t = ds_t / ds_{t-1}
    units = np.tile(np.eye(S), (batch, 1))
    chains = np.broadcast_to(np.eye(S), (d, batch, S, S)).copy()
    out = np.empty(steps)
    for t in range(steps):
        prev = s[t - d] if t >= d else s0
        alone(np.repeat(inp[t], S, axis=0)[None], _form(alone, np.repeat(prev, S, axis=0)))
        _, d_prev = alone.backward(None, _form(alone, units))
        A = _joined(d_prev).reshape(batch, S, S)
        J = chains[t % d] = A @ chains[t % d]
        if norm == "spectral":
            n = np.linalg.norm(J, ord=2, axis=(1, 2))
        else:
            n = np.sqrt(np.sum(J * J, axis=(1, 2)))
        out[t] = float(np.mean(n))
    alone.eval()
    return out
