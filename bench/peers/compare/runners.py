"""compare's peers: one runner per library, each given the same Problem.

Each library gives, per mode it supports, a pair (run, named): run() is what is timed and returns
the library's raw result; named(raw) turns that into {name: ndarray} for the agreement check.

    rnnfast   rnnfast.functional (the C++ kernels)
    torch     torch.nn.RNN: no_grad for inference, autograd for training
    ort       ONNX Runtime's RNN operator, inference only (a graph with Y, one with Y_h only)
    numpy     rnnfast.reference, the NumPy loop over time steps
    blas      the anchor: the recurrence's GEMMs in torch.matmul's BLAS (MKL), unfused (below)

The "blas" anchor is what the best BLAS gives without fusion: one projection GEMM
(T*B x D) @ (D x H), then per step one (B x H) @ (H x H) GEMM accumulated onto that step's
projection and a tanh in place; training adds the backward's GEMMs: per step
dz_t @ W_hh (the recurrent delta), then dW_ih = dZ^T X, dW_hh = dZ[1:]^T Y[:-1] and dX = dZ W_ih
as large GEMMs over the whole sequence. Its FLOPs are the ones shapes counts, less the
products with h0 = 0 that no one needs to compute. It returns the same outputs and gradients as
the others and is checked against them, so it is a real forward and backward.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.capi.onnxruntime_pybind11_state import NotImplemented as OrtNotImplemented

from bench._common import log
from bench.peers.compare.shapes import Problem
from rnnfast import functional, reference

LIBS = ("rnnfast", "torch", "ort", "numpy", "blas")  # "numpy" is rnnfast.reference
PEERS = LIBS[1:]


def grads_named(dx, dweight_ih, dweight_hh, dbias_ih, dbias_hh):
    return {
        "dx": dx,
        "dweight_ih": dweight_ih,
        "dweight_hh": dweight_hh,
        "dbias_ih": dbias_ih,
        "dbias_hh": dbias_hh,
    }


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


def torch_runners(p: Problem):
    """torch computes y in both inference modes; training also asks for dx, as rnnfast gives it."""
    m = p.module
    xt = torch.from_numpy(p.x)
    x_grad = xt.clone().requires_grad_(True)
    params = [m.weight_ih_l0, m.weight_hh_l0, m.bias_ih_l0, m.bias_hh_l0]

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
        "fwd_seq": (fwd_seq, lambda r: {"y": r[0].numpy(), "h_n": r[1][0].numpy()}),
        "fwd_last": (fwd_last, lambda r: {"h_n": r[0].numpy()}),
        "train": (train, lambda g: grads_named(*(t.numpy() for t in g))),
    }


def blas_runners(p: Problem):
    """The unfused anchor (module docstring): torch.addmm / addmm_ per GEMM, on MKL."""
    T, B, D, H = p.shape
    x = torch.from_numpy(p.x)
    w_ih, w_hh = torch.from_numpy(p.w_ih), torch.from_numpy(p.w_hh)
    w_ih_t, w_hh_t = w_ih.t(), w_hh.t()  # transposed views: the BLAS reads them as they are
    bias = torch.from_numpy(p.b_ih + p.b_hh)
    dy = torch.from_numpy(p.dy)

    def forward():
        y = torch.addmm(bias, x.view(T * B, D), w_ih_t).view(T, B, H)  # the projection
        y[0].tanh_()  # h0 = 0: step 0 has no recurrent product
        for t in range(1, T):
            y[t].addmm_(y[t - 1], w_hh_t)
            y[t].tanh_()
        return y

    def train():
        y = forward()
        act_grad = 1 - y * y  # tanh' from the outputs, once for the whole sequence
        dz = torch.empty_like(y)
        torch.mul(dy[T - 1], act_grad[T - 1], out=dz[T - 1])
        for t in range(T - 1, 0, -1):
            torch.addmm(dy[t - 1], dz[t], w_hh, out=dz[t - 1])
            dz[t - 1].mul_(act_grad[t - 1])
        dz2 = dz.view(T * B, H)
        dh0 = dz[0] @ w_hh
        dw_ih = dz2.t() @ x.view(T * B, D)
        dw_hh = dz[1:].reshape((T - 1) * B, H).t() @ y[:-1].reshape((T - 1) * B, H)
        dx = (dz2 @ w_ih).view(T, B, D)
        db = dz2.sum(0)
        return dx, dw_ih, dw_hh, db, dh0

    def train_named(g):
        dx, dw_ih, dw_hh, db, dh0 = (t.numpy() for t in g)
        return {**grads_named(dx, dw_ih, dw_hh, db, db), "dh0": dh0}

    return {
        "fwd_seq": (forward, lambda y: {"y": y.numpy(), "h_n": y[-1].numpy()}),
        "fwd_last": (lambda: forward()[-1], lambda h: {"h_n": h.numpy()}),
        "train": (train, train_named),
    }


def onnx_rnn_model(p: Problem, with_sequences: bool) -> onnx.ModelProto:
    """A one-node graph: ONNX RNN with W [1, H, D], R [1, H, H], B [1, 2H] = concat(Wb, Rb)."""
    elem = TensorProto.DOUBLE if p.dtype == np.float64 else TensorProto.FLOAT
    inits = [
        numpy_helper.from_array(p.w_ih[None], "W"),
        numpy_helper.from_array(p.w_hh[None], "R"),
        numpy_helper.from_array(np.concatenate([p.b_ih, p.b_hh])[None], "B"),
    ]
    outputs = [helper.make_tensor_value_info("Y_h", elem, [1, p.B, p.H])]
    if with_sequences:
        outputs.insert(0, helper.make_tensor_value_info("Y", elem, [p.T, 1, p.B, p.H]))
    node = helper.make_node(
        "RNN",
        ["X", "W", "R", "B"],
        ["Y" if with_sequences else "", "Y_h"],
        hidden_size=p.H,
        activations=["Tanh"],
    )
    graph = helper.make_graph(
        [node],
        "rnn",
        [helper.make_tensor_value_info("X", elem, [p.T, p.B, p.D])],
        outputs,
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8  # old enough for any onnxruntime that has opset 14
    return model


def ort_session(model: onnx.ModelProto, threads: int) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def ort_runners(p: Problem, threads: int):
    """Inference only. Raises if ORT cannot run this dtype (the caller skips ORT with a note)."""
    seq = ort_session(onnx_rnn_model(p, with_sequences=True), threads)
    last = ort_session(onnx_rnn_model(p, with_sequences=False), threads)
    feed = {"X": p.x}

    def fwd_seq():
        return seq.run(None, feed)

    def fwd_last():
        return last.run(None, feed)[0]

    fwd_seq()  # a kernel missing for this dtype only shows when it runs
    return {
        "fwd_seq": (fwd_seq, lambda r: {"y": r[0][:, 0], "h_n": r[1][0]}),
        "fwd_last": (fwd_last, lambda r: {"h_n": r[0]}),
    }


def all_runners(p: Problem, threads: int, notes: list):
    """Every library's runners, in LIBS order; ORT left out with a note where it cannot run."""
    runners = {"rnnfast": rnnfast_runners(p), "torch": torch_runners(p)}
    try:
        runners["ort"] = ort_runners(p, threads)
    except OrtNotImplemented as exc:  # e.g. no float64 RNN kernel in ORT's CPU provider
        first_line = str(exc).strip().splitlines()[0][:160]
        note = f"ORT skipped for {p.dtype.name}: {type(exc).__name__}: {first_line}"
        if note not in notes:
            notes.append(note)
            log(note)
    runners["numpy"] = reference_runners(p)
    runners["blas"] = blas_runners(p)
    return runners
