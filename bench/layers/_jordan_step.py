"""The training step of a teacher-forced JordanRNN beside an RNN + Dense of the same D, H, O:
the models, their data and one step's runner each (forward, MSE, backward, Adam). Timed by
jordan_vs_rnn.py's step table and composition.py's jordan table."""

from __future__ import annotations

import numpy as np

import rnnfast
from rnnfast import JordanRNN, optim


class StepCase:
    """The two models of one training-step case and their data: x (T, B, D), targets y
    (T, B, O), the JordanRNN's packed teacher-forcing input [x, y_prev] (built once, as the
    data is)."""

    def __init__(self, steps, batch, d, h, o, seed=0):
        rng = np.random.default_rng(seed)
        self.x = rng.standard_normal((steps, batch, d)).astype(np.float32)
        self.y = rng.standard_normal((steps, batch, o)).astype(np.float32)
        self.jordan = JordanRNN(d, h, o, teacher_forced=True, seed=seed)
        self.packed = self.jordan.teacher_forcing_inputs(self.x, self.y)
        self.rnn = rnnfast.Sequential(
            [rnnfast.RNN(d, h, seed=seed), rnnfast.Dense(h, o, seed=seed + 1)]
        )


def step_runners(steps, batch, d, h, o, seed=0, case=None):
    """One training step (forward, MSE, backward, Adam) of each model, by name."""
    case = case or StepCase(steps, batch, d, h, o, seed)
    jordan, rnn, packed, x, y = case.jordan, case.rnn, case.packed, case.x, case.y
    opt_j, opt_r = optim.Adam(jordan, lr=1e-4), optim.Adam(rnn, lr=1e-4)

    def train(model, opt, inp):
        def step():
            model.zero_grad()
            out = model(inp)
            _, d_out = rnnfast.losses.mse_loss(out, y)
            model.backward(d_out)
            opt.step()

        return step

    return {"JordanRNN": train(jordan, opt_j, packed), "RNN + Dense": train(rnn, opt_r, x)}
