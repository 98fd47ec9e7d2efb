"""Monthly sunspot numbers: one-month-ahead forecasts by a stacked RNN on the sunspots data set.

    python examples/sunspots.py [--data ROOT] [--out DIR] [--epochs 60] [--window 24]
                                [--cell rnn|gru|lstm]

The series comes from ``rnnfast.datasets.load("sunspots", ROOT)``:
ROOT/sunspots/sunspots_monthly.dat (``--data ../shared/data``), else $RNNFAST_DATA, the cache or
a download. The series (1749-2009) is split in time: the first 80% trains, the rest tests. Values are
scaled to [0, 1] by the training part's minimum and maximum. Each sample is a window of 24
months; the target is the next month. The classic stacked model RNN(1, 50, sequences) ->
Dropout(0.2) -> RNN(50, 100, last step) -> Dropout(0.2) -> Dense(100, 1), MSE, Adam
(``--cell gru`` or ``--cell lstm``: GRU or LSTM layers in the RNNs' places). Prints
the model summary, the test RMSE in sunspot units against the persistence baseline (the next
month equals the last), draws the forecast against the truth and saves the model into
``--out``, and ends with a line
``RESULT test_rmse=... persistence_rmse=... time_s=...`` (time_s: loading, training and
testing, the work bench/end_to_end/torch_sunspots.py times; not the plot).

``--quantize bf16`` or ``--quantize int8``: the trained model is also quantized
(``rnnfast.quantize``), its summary (weight bytes) printed and its test RMSE added to the
RESULT line as ``quantized_test_rmse=...``.
"""

from __future__ import annotations

import time

import _cli  # the examples' shared command line, beside this file
from _tasks import rmse, split_scale, windows  # the task's data, as its twin in bench/ reads it

import rnnfast
from rnnfast import optim, training


def build_model(window, seed, cell="rnn"):
    return rnnfast.Sequential(
        [
            _cli.recurrent(cell, 1, 50, batch_first=True, return_sequences=True, seed=seed),
            rnnfast.Dropout(0.2, seed=seed + 1),
            _cli.recurrent(cell, 50, 100, batch_first=True, return_sequences=False, seed=seed + 2),
            rnnfast.Dropout(0.2, seed=seed + 3),
            rnnfast.Dense(100, 1, seed=seed + 4),
        ]
    )


def forecast_plot(months, truth, forecast, path, title):
    plt = _cli.pyplot("forecast plot")
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(12, 4.5))
    ax.plot(months, truth, color="k", lw=1, label="observed")
    ax.plot(months, forecast, color="C1", lw=1, label="RNN forecast (one month ahead)")
    ax.set_xlabel("year")
    ax.set_ylabel("monthly mean sunspot number")
    ax.set_title(title)
    ax.legend()
    _cli.save_figure(fig, path, "forecast plot")


def main(argv=None):
    parser = _cli.parser(__doc__)
    _cli.add_data(parser, "sunspots")
    _cli.add_out(parser)
    _cli.add_quantize(parser)
    _cli.add_cell(parser)
    parser.add_argument("--epochs", type=int, default=60, help="passes over the training set")
    parser.add_argument(
        "--window", type=int, default=24, help="months of history each forecast reads"
    )
    parser.add_argument("--batch-size", type=int, default=32, help="windows per batch")
    parser.add_argument("--lr", type=float, default=2e-3, help="Adam's learning rate")
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of the weights, the dropout and the batch order"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="rnnfast threads (0: the library's default, the cores available)",
    )
    args = parser.parse_args(argv)
    out = _cli.out_dir(parser, args.out)

    if args.threads:
        rnnfast.set_num_threads(args.threads)
    start = time.perf_counter()
    data = _cli.load(parser, "sunspots", args.data)
    values, months = data.values, data.years
    if args.window < 1:
        _cli.fail(parser, f"--window: expected a positive number of months, got {args.window}")
    if int(0.2 * len(values)) < 1 or int(0.8 * len(values)) <= args.window:
        _cli.fail(
            parser,
            f"--window {args.window}: the series' {len(values)} months are too "
            "few for it (the training part must be longer than a window)",
        )
    series, split, (lo, hi) = split_scale(values)
    x_train, y_train, _ = windows(series, args.window, 0, split)
    x_test, _, test_idx = windows(series, args.window, split, len(series))
    print(
        f"{len(values)} months ({months[0]:.0f}-{months[-1]:.0f}): {len(x_train)} training "
        f"and {len(x_test)} test windows of {args.window} months"
    )
    model = build_model(args.window, args.seed, args.cell)
    _cli.check_quantizable(parser, model, args.quantize)
    model.summary((args.window, 1))
    optimizer = optim.Adam(model, lr=args.lr)
    clock = _cli.EpochClock()
    training.fit(
        model,
        x_train,
        y_train,
        loss="mse",
        optimizer=optimizer,
        epochs=args.epochs,
        batch_size=args.batch_size,
        shuffle=True,
        seed=args.seed,
        callbacks=[clock],
    )
    pred = training.predict(model, x_test)[:, 0] * (hi - lo) + lo
    truth = values[test_idx]
    persistence = values[test_idx - 1]
    test_rmse, base_rmse = rmse(pred, truth), rmse(persistence, truth)
    print(
        f"test RMSE {test_rmse:.2f} sunspots, persistence {base_rmse:.2f} "
        f"({'better' if test_rmse < base_rmse else 'worse'} by {abs(base_rmse - test_rmse):.2f})"
    )
    _cli.print_epoch_times(clock.seconds)
    elapsed = time.perf_counter() - start  # the PyTorch twin's work; it draws no plot
    forecast_plot(
        months[test_idx],
        truth,
        pred,
        out / "sunspots_forecast.png",
        f"rnnfast stacked RNN: test RMSE {test_rmse:.1f} vs persistence {base_rmse:.1f}",
    )
    model.save(out / "sunspots.npz")
    print(f"model saved to {out / 'sunspots.npz'}")
    result = f"test_rmse={test_rmse:.3f}"
    if args.quantize:
        qpred = training.predict(_cli.quantized(model, args.quantize), x_test)[:, 0]
        q_rmse = rmse(qpred * (hi - lo) + lo, truth)
        print(f"quantized ({args.quantize}) test RMSE {q_rmse:.2f} sunspots")
        result += f" quantized_test_rmse={q_rmse:.3f}"
    print(f"RESULT {result} persistence_rmse={base_rmse:.3f} time_s={elapsed:.1f}")


if __name__ == "__main__":
    main()
