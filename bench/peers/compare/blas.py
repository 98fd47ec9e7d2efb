"""compare's "blas" anchor: what the best BLAS gives without fusion, through torch.matmul on MKL.

Elman cell: one projection GEMM (T*B x D) @ (D x H), then per step one (B x H) @ (H x H) GEMM
accumulated onto that step's projection and a tanh in place; training adds the backward's GEMMs:
per step dz_t @ W_hh (the recurrent delta), then dW_ih = dZ^T X, dW_hh = dZ[1:]^T Y[:-1] and
dX = dZ W_ih as large GEMMs over the whole sequence. Its FLOPs are the ones shapes counts, less
the products with h0 = 0 that no one needs to compute.

GRU and LSTM, forward only: the projection GEMM (T*B x D) @ (D x G*H) with bias_ih, then per step
one (B x H) @ (H x G*H) GEMM with bias_hh and the gates' elementwise math as separate torch ops
(sigmoid, tanh, products: each a pass over memory, nothing fused). No training mode: a hand-written
gated backward is not worth its code here (torch's autograd is the training peer).

It returns the same outputs (and, for the Elman cell, gradients) as the others and is checked
against them, so it is a real forward and backward.
"""

from __future__ import annotations

import torch

from bench.peers.compare.shapes import Problem, grads_named


def blas_runners(p: Problem):
    """The anchor's modes for the problem's cell."""
    return gated_blas_runners(p) if p.cell.gated else elman_blas_runners(p)


def elman_blas_runners(p: Problem):
    """torch.addmm / addmm_ per GEMM, on MKL (module docstring)."""
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


def gated_step(cell: str, gi, gh, h, c):
    """One step of the gated cell from its projections gi = W_ih x + b_ih and gh = W_hh h + b_hh
    (B x G*H, PyTorch's gate order): (h', c'), c' None for the GRU."""
    if cell == "gru":
        H = h.shape[1]
        r, z = torch.sigmoid(gi[:, : 2 * H] + gh[:, : 2 * H]).chunk(2, 1)
        n = torch.tanh(gi[:, 2 * H :] + r * gh[:, 2 * H :])
        return torch.lerp(n, h, z), None  # (1 - z) n + z h
    i, f, g, o = (gi + gh).chunk(4, 1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


def gated_blas_runners(p: Problem):
    """The gated forward, unfused (module docstring); fwd_last keeps the last states only."""
    T, B, D, H = p.shape
    x = torch.from_numpy(p.x)
    w_ih_t, w_hh_t = torch.from_numpy(p.w_ih).t(), torch.from_numpy(p.w_hh).t()
    b_ih, b_hh = torch.from_numpy(p.b_ih), torch.from_numpy(p.b_hh)
    cell = p.cell.name

    def forward(sequences: bool):
        gi = torch.addmm(b_ih, x.view(T * B, D), w_ih_t).view(T, B, -1)  # the projection
        h = torch.zeros(B, H, dtype=x.dtype)
        c = torch.zeros(B, H, dtype=x.dtype) if cell == "lstm" else None
        y = torch.empty(T, B, H, dtype=x.dtype) if sequences else None
        for t in range(T):
            h, c = gated_step(cell, gi[t], torch.addmm(b_hh, h, w_hh_t), h, c)
            if sequences:
                y[t] = h
        return y, h, c

    def named(r):
        y, h, c = r
        out = {"h_n": h.numpy(), **({"c_n": c.numpy()} if c is not None else {})}
        return out if y is None else {"y": y.numpy(), **out}

    return {
        "fwd_seq": (lambda: forward(True), named),
        "fwd_last": (lambda: forward(False), named),
    }
