"""PyTorch's word-level language model (the model of pytorch/examples' word_language_model,
written here) trained with ``nn.LSTM`` and with ``rnnfast.torch.LSTM``, the class name the only
change (issue 41, item 5): time per epoch, the loss curves side by side and the recurrent
layers' share of the epoch.

    python -m bench.end_to_end.word_lm [--epochs 1] [--max-batches N] [--log-interval 200] [--alternate 10]
        [--dropout 0.2] [--threads 1] [--seed 0] [--data ROOT] [--json PATH]

The model: Embedding (emsize 200) -> Dropout -> a 2-layer LSTM (nhid 200, dropout 0.2 between
the layers) -> Dropout -> Linear decoder over the vocabulary; the embedding and decoder weights
uniform in [-0.1, 0.1], the decoder's bias zero. The text: tinyshakespeare
(../shared/data/tinyshakespeare, karpathy/char-rnn's input.txt) split into words as the example
splits its corpus (each line's whitespace-separated words, then ``<eos>``), its first 90% for
training and the rest for validation. Training as the example trains: the token stream in 20
columns, windows of bptt 35, the state carried across windows and detached, cross entropy,
gradients clipped to norm 0.25, SGD at lr 20 (divided by 4 after an epoch whose validation
loss did not improve); validation in 10 columns.

Both models start from the same weights (the rnnfast one loads the torch one's state_dict) and
torch's generator in the same state, each side keeping its own generator state from then on.
They train on the same batches, the sides alternating every ``--alternate`` batches (default 10:
torch's, then rnnfast's), so that a change in the machine's load lands on both; every
``--log-interval`` batches (default 200, the example's) each side's mean loss and ms per batch
over the interval are printed side by side. With dropout the
two sides draw different masks (rnnfast's LSTM draws its masks between the layers from a seed
taken from torch's generator, and each draw shifts the generator's stream), so their curves
agree in trend only; ``--dropout 0`` makes them the same to rounding. Time per epoch: the sum of
an epoch's training intervals (validation not included); ``--max-batches N`` caps an epoch's
training and validation at N batches each for quick runs (default: the full epoch). The recurrent layer's share: the LSTM
module's forward and backward timed by hooks on the module (forward pre/post hooks, full
backward pre/post hooks: from the gradient of its output arriving to the gradient of its input
leaving), summed over the epoch, over the epoch's time. The process is pinned to ``--threads``
cores (default 1), every library on that many threads; the header names the CPU and rnnfast's
ISA. ``--json PATH`` writes the results (nothing is written without it).
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import torch
from torch import nn

from bench import SHARED_DATA
from bench._common import cell, cpu_clock, log, others_cpus, text_table
from bench.end_to_end import _one_name
from rnnfast import datasets

EMSIZE = NHID = 200
NLAYERS = 2
BPTT, BATCH, EVAL_BATCH = 35, 20, 10
LR, CLIP = 20.0, 0.25


class WordLM(nn.Module):
    """Embedding -> Dropout -> ``rnn`` (nn.LSTM: 2 layers, dropout between) -> Dropout ->
    Linear."""

    def __init__(self, vocab, dropout, rnn=nn.LSTM):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(vocab, EMSIZE)
        self.rnn = rnn(EMSIZE, NHID, NLAYERS, dropout=dropout)
        self.decoder = nn.Linear(NHID, vocab)
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)

    def forward(self, tokens, state):
        y, state = self.rnn(self.drop(self.encoder(tokens)), state)
        return self.decoder(self.drop(y)).reshape(-1, self.decoder.out_features), state

    def zero_state(self, batch):
        h = torch.zeros(NLAYERS, batch, NHID)
        return h, h.clone()


class ModuleClock:
    """Seconds a module spends in its forward and backward calls, by hooks on it."""

    def __init__(self, module):
        self.seconds = 0.0
        self._began = None
        module.register_forward_pre_hook(self._start)
        module.register_forward_hook(self._stop)
        module.register_full_backward_pre_hook(self._start)
        module.register_full_backward_hook(self._stop)

    def _start(self, *_):
        self._began = time.perf_counter()

    def _stop(self, *_):
        self.seconds += time.perf_counter() - self._began


def words(text):
    """The example's tokens: each line's words, then ``<eos>``."""
    return [w for line in text.splitlines() for w in [*line.split(), "<eos>"]]


def columns(ids, batch):
    """The token stream cut into ``batch`` columns, (L, batch), the remainder dropped."""
    n = len(ids) // batch
    return ids[: n * batch].reshape(batch, n).t().contiguous()


def windows(data):
    """(input, target) windows of ``data`` (L, B): inputs (<= bptt, B), targets flattened."""
    return [
        (data[i : i + n], data[i + 1 : i + 1 + n].reshape(-1))
        for i in range(0, data.shape[0] - 1, BPTT)
        for n in [min(BPTT, data.shape[0] - 1 - i)]
    ]


def detach(state):
    return tuple(s.detach() for s in state)


class Side:
    """One side's model, learning rate, carried state, generator state and clocks."""

    def __init__(self, model, seed):
        self.model = model
        self.lr = LR
        self.best = math.inf
        self.state = None
        self.rng = _one_name.same_rng(torch.get_rng_state, seed)
        self.rnn_clock = ModuleClock(model.rnn)

    def train_interval(self, batches):
        """Train on ``batches``; (their losses, seconds)."""
        previous = torch.get_rng_state()
        torch.set_rng_state(self.rng)
        model, losses = self.model.train(), []
        began = time.perf_counter()
        for tokens, targets in batches:
            self.state = detach(self.state)
            model.zero_grad()
            logits, self.state = model(tokens, self.state)
            loss = nn.functional.cross_entropy(logits, targets)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), CLIP)
            with torch.no_grad():
                for p in model.parameters():
                    p.add_(p.grad, alpha=-self.lr)
            losses.append(loss.item())
        seconds = time.perf_counter() - began
        self.rng = torch.get_rng_state()
        torch.set_rng_state(previous)
        return losses, seconds

    def validate(self, batches):
        """Mean cross entropy over the validation windows; the learning rate / 4 where it did
        not improve on the best so far."""
        model, state, total = self.model.eval(), self.model.zero_state(EVAL_BATCH), 0.0
        with torch.no_grad():
            for tokens, targets in batches:
                logits, state = model(tokens, state)
                total += len(targets) * nn.functional.cross_entropy(logits, targets).item()
        loss = total / sum(len(t) for _, t in batches)
        if loss < self.best:
            self.best = loss
        else:
            self.lr /= 4
        return loss


def epoch(sides, train, interval, alternate, number):
    """One epoch of both sides, alternating every ``alternate`` batches; its row of figures and
    its loss curve (a point every ``interval`` batches)."""
    for side in sides.values():
        side.state = side.model.zero_state(BATCH)
        side.rnn_clock.seconds = 0.0
    seconds = dict.fromkeys(sides, 0.0)
    curve = []
    since = cpu_clock()
    for start in range(0, len(train), interval):
        batches = train[start : start + interval]
        point = {"batches": start + len(batches)}
        losses, times = {n: [] for n in sides}, dict.fromkeys(sides, 0.0)
        for first in range(0, len(batches), alternate):
            for name, side in sides.items():
                chunk_losses, s = side.train_interval(batches[first : first + alternate])
                losses[name] += chunk_losses
                times[name] += s
        for name in sides:
            seconds[name] += times[name]
            point[f"{name}_loss"] = statistics.fmean(losses[name])
            point[f"{name}_ms_per_batch"] = times[name] / len(batches) * 1e3
        curve.append(point)
        print(
            f"  epoch {number} batch {point['batches']:>5}/{len(train)}  loss "
            + "  ".join(f"{n} {point[f'{n}_loss']:.4f}" for n in sides)
            + "  ms/batch "
            + "  ".join(f"{n} {point[f'{n}_ms_per_batch']:.1f}" for n in sides),
            flush=True,
        )
    row = {"epoch": number, "batches": len(train), "others_cpus": others_cpus(since)}
    for name, side in sides.items():
        row[f"{name}_s"] = seconds[name]
        row[f"{name}_lstm_s"] = side.rnn_clock.seconds
        row[f"{name}_lstm_share"] = side.rnn_clock.seconds / seconds[name]
    row["ratio"] = row["torch_s"] / row["rnnfast_s"]
    return row, curve


def table(rows):
    columns = [
        ("epoch", ">5", cell("epoch")),
        ("batches", ">7", cell("batches")),
        *_one_name.side_columns("s", "s", ".2f", 9),
        _one_name.RATIO_COLUMN,
        *_one_name.side_columns("lstm_s", "LSTM s", ".2f", 14),
        *_one_name.side_columns("lstm_share", "LSTM %", ".0%", 14),
        *_one_name.side_columns("val_loss", "val loss", ".4f", 16),
        _one_name.LOAD_COLUMN,
    ]
    return text_table(columns, rows)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=1, help="default %(default)s")
    parser.add_argument("--max-batches", type=int, default=None, help="batches per epoch, at most")
    parser.add_argument("--log-interval", type=int, default=200, help="default %(default)s")
    parser.add_argument("--alternate", type=int, default=10, help="default %(default)s")
    parser.add_argument("--dropout", type=float, default=0.2, help="default %(default)s")
    parser.add_argument("--data", default=SHARED_DATA if SHARED_DATA.is_dir() else None)
    _one_name.add_arguments(parser)
    args = parser.parse_args(argv)
    _one_name.check_positive(parser, args, ("epochs", "log_interval", "alternate", "threads"))
    if args.max_batches is not None:
        _one_name.check_positive(parser, args, ("max_batches",))
    tokens = words(datasets.load("tinyshakespeare", args.data))
    vocab = {w: i for i, w in enumerate(dict.fromkeys(tokens))}
    ids = torch.tensor([vocab[w] for w in tokens])
    split = int(0.9 * len(ids))
    train = windows(columns(ids[:split], BATCH))[: args.max_batches]
    valid = windows(columns(ids[split:], EVAL_BATCH))[: args.max_batches]
    with _one_name.pinned(args.threads) as cores:
        facts = _one_name.machine(args.threads, cores)
        print(_one_name.header(facts), flush=True)
        models = _one_name.twins(
            lambda rnn: WordLM(len(vocab), args.dropout, rnn), nn.LSTM, args.seed
        )
        sides = {name: Side(m, args.seed) for name, m in models.items()}
        print(
            f"{len(tokens)} words, vocabulary {len(vocab)}; {len(train)} training batches of "
            f"{BPTT} x {BATCH} per epoch, {len(valid)} validation batches; "
            f"dropout {args.dropout}",
            flush=True,
        )
        rows, curves = [], []
        for number in range(1, args.epochs + 1):
            row, curve = epoch(sides, train, args.log_interval, args.alternate, number)
            log(f"epoch {number}: validating")
            for name, side in sides.items():
                row[f"{name}_val_loss"] = side.validate(valid)
            rows.append(row)
            curves.append(curve)
    ratios = [r["torch_s"] for r in rows], [r["rnnfast_s"] for r in rows]
    torch_s, rnnfast_s = (statistics.median(r) for r in ratios)
    print("\nTime per epoch (training; the LSTM's forward + backward by hooks), float32:")
    print(table(rows))
    print(
        f"median over {len(rows)} epoch(s): torch {torch_s:.2f} s, rnnfast {rnnfast_s:.2f} s, "
        f"ratio {torch_s / rnnfast_s:.2f}x"
    )
    result = {**facts, "vocabulary": len(vocab), "dropout": args.dropout, "rows": rows}
    result["curves"] = curves
    _one_name.maybe_write_json(args.json, result)


if __name__ == "__main__":
    main()
