# ruff: noqa: B023  (the bad-call lambdas are called at once, inside the iteration)
"""A small forward/backward workload for tools/memcheck.sh (valgrind memcheck).

Small sizes, every code path of the kernels once or twice: float32 and float64, tanh and relu,
biases or none, h0 or none, lengths (sorted and unsorted, with an empty sequence), leaky
units, last-state-only forward, rnn_step, an RNN layer (stacked, bidirectional, dropout) with
backward and step, T = 1 and B = 1, odd sizes, non-contiguous input, and a few refused calls
(C++ exceptions thrown across the bindings).
"""

import numpy as np

import rnnfast
from rnnfast import functional as F

rng = np.random.default_rng(0)


def arrays(T, B, D, H, dt):
    return (
        rng.standard_normal((T, B, D)).astype(dt),
        (0.4 * rng.standard_normal((H, D))).astype(dt),
        (0.4 * rng.standard_normal((H, H))).astype(dt),
        rng.standard_normal(H).astype(dt),
        rng.standard_normal(H).astype(dt),
        rng.standard_normal((B, H)).astype(dt),
    )


for threads in (1, 2):
    with rnnfast.threads(threads):
        for dt in (np.float32, np.float64):
            for nl in ("tanh", "relu"):
                for T, B, D, H, lengths, alpha in [
                    (4, 3, 5, 17, None, 1.0),
                    (1, 1, 1, 1, None, 1.0),
                    (5, 4, 3, 9, [5, 0, 3, 5], 1.0),  # unsorted, with an empty sequence
                    (3, 2, 33, 8, [3, 1], 0.3),  # sorted, leaky
                ]:
                    x, w_ih, w_hh, b_ih, b_hh, h0 = arrays(T, B, D, H, dt)
                    lens = None if lengths is None else np.array(lengths)
                    y, h_n = F.rnn_forward(
                        x, w_ih, w_hh, b_ih, b_hh, h0, nl, lengths=lens, alpha=alpha
                    )
                    _, h_last = F.rnn_forward(
                        x[:, :, :],
                        w_ih,
                        w_hh,
                        None,
                        None,
                        None,
                        nl,
                        return_sequences=False,
                        lengths=lens,
                        alpha=alpha,
                    )
                    dy = rng.standard_normal(y.shape).astype(dt)
                    options = {
                        **F.PLAIN_FORWARD_OPTIONS,
                        "h0": h0,
                        "nonlinearity": nl,
                        "lengths": lens,
                        "alpha": alpha,
                    }
                    g = F.rnn_backward(x, w_ih, w_hh, y, dy, h_n, **options)
                    # h0=None: the null-h0 path of the kernel (values unused here)
                    null_h0 = dict(options, h0=None)
                    g = F.rnn_backward(np.asfortranarray(x), w_ih, w_hh, y, None, h_n, **null_h0)
                    # the masked drivers: a general step mask and recurrent dropout
                    keep = rng.random((T, B)) < 0.6
                    drop = (rng.random((B, H)) < 0.8).astype(dt)
                    masked = dict(options, step_mask=keep, recurrent_mask=drop)
                    y_m, h_m = F.rnn_forward(x, w_ih, w_hh, b_ih, b_hh, **masked)
                    F.rnn_forward(x, w_ih, w_hh, b_ih, b_hh, return_sequences=False, **masked)
                    g = F.rnn_backward(x, w_ih, w_hh, y_m, dy, h_m, **masked)
                    F.rnn_step(x[0], h0, w_ih, w_hh, b_ih, b_hh, nl, alpha)
                    F.rnn_step(x[0, :, ::-1], h0, w_ih, w_hh, None, None, nl, alpha)

        # Refused calls: the bindings throw, pybind11 translates (no leak on the error path).
        x, w_ih, w_hh, b_ih, b_hh, h0 = arrays(3, 2, 4, 5, np.float32)
        for bad in [
            lambda: F.rnn_forward(x[:, :, :3], w_ih, w_hh),
            lambda: F.rnn_forward(x, w_ih, w_hh, h0=h0[:1]),
            lambda: F.rnn_backward(
                x,
                w_ih,
                w_hh,
                np.zeros((3, 2, 4), np.float32),
                **F.PLAIN_FORWARD_OPTIONS,
            ),
            lambda: F.rnn_step(x[0], h0[:, :2], w_ih, w_hh),
            lambda: F.rnn_forward(x, w_ih.astype(np.float64), w_hh),
        ]:
            try:
                bad()
            except (TypeError, ValueError):
                pass
            else:
                raise AssertionError("a bad call was accepted")

        for kw in [
            dict(num_layers=2, dropout=0.2, bidirectional=True),
            dict(num_layers=2, residual=True, nonlinearity="relu", alpha=0.5),
            dict(batch_first=True, return_sequences=False, return_state=True),
        ]:
            layer = rnnfast.RNN(4, 6, seed=0, **kw)
            xb = rng.standard_normal((3, 5, 4)).astype(np.float32)
            out = layer(
                xb, lengths=np.array([3, 1, 0, 3, 2]) if not kw.get("batch_first") else None
            )
            first = out[0] if isinstance(out, tuple) else out
            layer.backward(np.ones_like(first))
            if not kw.get("bidirectional"):
                layer.step(xb[0] if not kw.get("batch_first") else xb[:, 0])

print("memcheck workload done")
