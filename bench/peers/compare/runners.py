"""compare's peers: the runners of every library, each given the same Problem (one cell, shape and
dtype), gathered by all_runners. rnnfast's, the NumPy reference's and torch's are here; the others
have a module each.

Each library gives, per mode it supports, a pair (run, named): run() is what is timed and returns
the library's raw result; named(raw) turns that into {name: ndarray} for the agreement check. A
run that carries a method timed(repeats, min_repeat_s, warmup_s) is timed by that method (the JAX
peer, which times itself in its own process).

    rnnfast   rnnfast.functional (the C++ kernels): rnn_*, gru_*, lstm_* forward and backward
    torch     torch.nn.RNN / GRU / LSTM: no_grad for inference, autograd for training
    ort       ONNX Runtime's RNN / GRU / LSTM operator, inference only (onnx_peers.py)
    openvino  OpenVINO's CPU plugin on the same ONNX graphs, inference only, float32 only
              (onnx_peers.py)
    jax       jax.lax.scan under jax.jit, inference and training (jax.vjp), in a child process per
              thread count pinned to that many cores (jax_peer.py, jax_worker.py)
    numpy     rnnfast.reference, the NumPy loop over time steps
    blas      the anchor: the recurrence's GEMMs in torch.matmul's BLAS (MKL), unfused; forward
              and training for the Elman cell, forward only for the gated cells (blas.py)

A training run is the forward keeping what the backward needs, then the backward of dy = ones
(sum(y) in torch and JAX).
"""

from __future__ import annotations

import torch

from bench._common import log
from bench.peers.compare.blas import blas_runners
from bench.peers.compare.onnx_peers import openvino_runners, ort_runners
from bench.peers.compare.shapes import PeerUnavailable, Problem, grads_named
from rnnfast import functional, reference

LIBS = ("rnnfast", "torch", "ort", "openvino", "jax", "numpy", "blas")  # numpy: rnnfast.reference
PEERS = LIBS[1:]


def rnnfast_runners(p: Problem):
    args = (p.x, p.w_ih, p.w_hh, p.b_ih, p.b_hh)

    def fwd_seq():
        return functional.rnn_forward(*args)

    def fwd_last():
        return functional.rnn_forward(*args, return_sequences=False)[1]

    def train():
        y, _ = functional.rnn_forward(*args)
        return functional.rnn_backward(
            p.x, p.w_ih, p.w_hh, y, dy=p.dy, **functional.PLAIN_FORWARD_OPTIONS
        )

    def train_named(g):
        return {**grads_named(g.dx, g.dweight_ih, g.dweight_hh, g.dbias, g.dbias), "dh0": g.dh0}

    return {
        "fwd_seq": (fwd_seq, lambda r: {"y": r[0], "h_n": r[1]}),
        "fwd_last": (fwd_last, lambda r: {"h_n": r}),
        "train": (train, train_named),
    }


def reference_runners(p: Problem):
    """The NumPy reference has no last-state-only mode: fwd_last runs the full forward."""
    args = (p.x, p.w_ih, p.w_hh, p.b_ih, p.b_hh)

    def fwd_seq():
        return reference.rnn_forward(*args)

    def fwd_last():
        return reference.rnn_forward(*args)[1]

    def train():
        y, _ = reference.rnn_forward(*args)
        return reference.rnn_backward(
            p.x, p.w_ih, p.w_hh, y, dy=p.dy, **functional.PLAIN_FORWARD_OPTIONS
        )

    def train_named(g):
        dx, dh0, dw_ih, dw_hh, db = g
        return {**grads_named(dx, dw_ih, dw_hh, db, db), "dh0": dh0}

    return {
        "fwd_seq": (fwd_seq, lambda r: {"y": r[0], "h_n": r[1]}),
        "fwd_last": (fwd_last, lambda r: {"h_n": r}),
        "train": (train, train_named),
    }


def gated_runners(p: Problem, lib):
    """A GRU or LSTM in rnnfast.functional or rnnfast.reference (one signature, issue 23's
    contract): the forward with return_sequences=False for fwd_last, keep_workspace=True and the
    backward of p.dy for train. (The reference keeps no workspace; its backward recomputes.)"""
    forward = getattr(lib, f"{p.cell.name}_forward")
    backward = getattr(lib, f"{p.cell.name}_backward")
    options = (
        functional.PLAIN_GRU_OPTIONS if p.cell.name == "gru" else functional.PLAIN_LSTM_OPTIONS
    )
    args = (p.x, p.w_ih, p.w_hh, p.b_ih, p.b_hh)

    def train():
        out = forward(*args, keep_workspace=True)
        return backward(*args, out.y, out.workspace, dy=p.dy, **options)

    def states(out):
        return {name: getattr(out, name) for name in p.cell.states}

    return {
        "fwd_seq": (lambda: forward(*args), lambda out: {"y": out.y, **states(out)}),
        "fwd_last": (lambda: forward(*args, return_sequences=False), states),
        "train": (train, lambda g: {k: v for k, v in g._asdict().items() if v is not None}),
    }


def torch_runners(p: Problem):
    """torch computes y in both inference modes; training also asks for dx, as rnnfast gives it."""
    m = p.module
    xt = torch.from_numpy(p.x)
    x_grad = xt.clone().requires_grad_(True)
    params = [m.weight_ih_l0, m.weight_hh_l0, m.bias_ih_l0, m.bias_hh_l0]

    def states(r):
        """(h_n,) or the LSTM's (h_n, c_n), each (B, H) as numpy arrays."""
        return {
            name: s[0].numpy()
            for name, s in zip(p.cell.states, r if isinstance(r, tuple) else (r,))
        }

    def fwd_seq():
        with torch.no_grad():
            return m(xt)

    def fwd_last():
        with torch.no_grad():
            return m(xt)[1]

    def train():
        y, _ = m(x_grad)
        return torch.autograd.grad(y.sum(), [x_grad, *params])

    return {
        "fwd_seq": (fwd_seq, lambda r: {"y": r[0].numpy(), **states(r[1])}),
        "fwd_last": (fwd_last, states),
        "train": (train, lambda g: grads_named(*(t.numpy() for t in g))),
    }


def add_note(notes: list, note: str) -> None:
    """A note once per run, logged as it is first made."""
    if note not in notes:
        notes.append(note)
        log(note)


def all_runners(p: Problem, threads: int, notes: list, jax=None, skip=()):
    """Every library's runners, in LIBS order. A peer that cannot run this problem is left out
    with a note (ORT and OpenVINO in float64, a peer not installed); so are the peers in skip.
    jax: the run's jax_peer.JaxPeer (None: no JAX)."""
    gated = p.cell.gated
    makers = {
        "rnnfast": lambda: gated_runners(p, functional) if gated else rnnfast_runners(p),
        "torch": lambda: torch_runners(p),
        "ort": lambda: ort_runners(p, threads),
        "openvino": lambda: openvino_runners(p, threads),
        "jax": lambda: jax.runners(p, threads) if jax is not None else None,
        "numpy": lambda: gated_runners(p, reference) if gated else reference_runners(p),
        "blas": lambda: blas_runners(p),
    }
    runners = {}
    for lib, make in makers.items():
        if lib in skip:
            continue
        try:
            made = make()
        except PeerUnavailable as exc:  # its message is the note
            add_note(notes, str(exc))
            continue
        if made is not None:
            runners[lib] = made
    return runners
