"""PyTorch twin of examples/sunspots.py: same data, split, scaling, windows, model, optimiser
and epochs, for comparing end-to-end training time and accuracy.

    python -m bench.end_to_end.torch_sunspots [--data ROOT] [--epochs 60] [--cell rnn|gru|lstm]
                                              [--threads 2]

``--cell gru`` or ``lstm``: GRU or LSTM layers in the RNNs' places, as the example's ``--cell``.
Prints the seconds of each epoch as the example does, and ends with
``RESULT test_rmse=... persistence_rmse=... time_s=...`` as the rnnfast example.
"""

from __future__ import annotations

import time

import numpy as np
import torch
from torch import nn

from bench.end_to_end import _twin
from examples._tasks import rmse, split_scale, windows
from rnnfast import datasets


class Stacked(nn.Module):
    """RNN(1, 50, sequences) -> Dropout(0.2) -> RNN(50, 100, last step) -> Dropout(0.2)
    -> Linear(100, 1)."""

    def __init__(self, cell="rnn"):
        super().__init__()
        self.rnn1 = _twin.recurrent(cell, 1, 50, batch_first=True)
        self.drop1 = nn.Dropout(0.2)
        self.rnn2 = _twin.recurrent(cell, 50, 100, batch_first=True)
        self.drop2 = nn.Dropout(0.2)
        self.dense = nn.Linear(100, 1)

    def forward(self, x):
        y, _ = self.rnn1(x)
        _, state = self.rnn2(self.drop1(y))
        return self.dense(self.drop2(_twin.hidden(state)[-1]))


def main(argv=None):
    args = _twin.parse_args(
        __doc__, argv, epochs=60, options={"--window": 24, "--batch-size": 32, "--lr": 2e-3}
    )
    start = _twin.start(args)
    values = datasets.load("sunspots", args.data).values
    series, split, (lo, hi) = split_scale(values)
    x_train, y_train, _ = windows(series, args.window, 0, split)
    x_test, _, test_idx = windows(series, args.window, split, len(series))
    x_train, y_train = torch.from_numpy(x_train), torch.from_numpy(y_train)
    model = Stacked(args.cell)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = nn.MSELoss()
    rng = np.random.default_rng(args.seed)
    n = len(x_train)
    clock = _twin.EpochClock()
    for epoch in range(args.epochs):
        model.train()
        order = torch.from_numpy(rng.permutation(n))
        batches = [order[i : i + args.batch_size] for i in range(0, n, args.batch_size)]
        bar = _twin.progress(batches, f"epoch {epoch + 1}/{args.epochs}")
        total = 0.0
        for index in bar:
            optimizer.zero_grad()
            loss = loss_fn(model(x_train[index]), y_train[index])
            loss.backward()
            optimizer.step()
            total += loss.item() * len(index)
            bar.set_postfix(loss=f"{total / n:.4f}", refresh=False)
        clock.lap()
    model.eval()
    with torch.no_grad():
        pred = model(torch.from_numpy(x_test))[:, 0].numpy() * (hi - lo) + lo
    truth = values[test_idx]
    test_rmse, base_rmse = rmse(pred, truth), rmse(values[test_idx - 1], truth)
    print(f"test RMSE {test_rmse:.2f} sunspots, persistence {base_rmse:.2f}")
    _twin.print_epoch_times(clock.seconds)
    print(
        f"RESULT test_rmse={test_rmse:.3f} persistence_rmse={base_rmse:.3f} "
        f"time_s={time.perf_counter() - start:.1f}"
    )


if __name__ == "__main__":
    main()
