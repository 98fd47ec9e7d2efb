"""The lecture notes' two PyTorch clients trained with torch.nn's recurrent layer and with
rnnfast.torch's, the class name the only change (issue 41, item 5).

    python -m bench.end_to_end.notes_clients [--clients decoder charrnn] [--threads 1]
        [--repeats 7] [--min-repeat-s 0.5] [--warmup-s 0.25] [--check-iterations 5] [--data ROOT] [--json PATH]

The clients, as the notes define them (../shared/notes, "Teacher Forcing" and "Using nn.RNN"):

- ``decoder``: ``DecoderRNN`` (Embedding -> GRU -> Linear), called once per step inside a Python
  loop by the notes' ``train(decoder, target_seq, decoder_hidden, teacher_forcing_ratio=0.5)``
  (a coin from ``torch.rand`` per step: the truth or the model's argmax is the next input). A
  training iteration: that loop over T = 20 steps at B = 32, H = 256 (embedding 256), the cross
  entropy of steps 1..T-1 against the targets, backward, Adam's step (lr 1e-3). The targets are
  20-character windows of tinyshakespeare (its 65 characters the vocabulary), the initial state
  zeros (the notes' "from encoder or zero"). ``nn.GRU`` -> ``rnnfast.torch.GRU``; target 1.5x.
- ``charrnn``: ``CharRNN`` (RNN over one-hot letters, Linear on h_n, LogSoftmax), as in the notes,
  trained as the notes train their name classifier: ``nn.CrossEntropyLoss`` (on log-probabilities
  it equals NLLLoss, the softmax of log-softmax being the identity) and AdamW (lr 1e-3), one name
  per iteration (B = 1), the names of 7 letters of the names data set (T = 7, 57 letters, 128
  hidden units, 18 languages). ``nn.RNN`` -> ``rnnfast.torch.RNN``; target 2x.

Both models of a client start from the same weights (the rnnfast one loads the torch one's
state_dict). Before timing, each trains ``--check-iterations`` iterations from those weights
with torch's generator seeded alike (the same coins) and the per-iteration losses are printed
side by side with their largest relative difference (a correctness check, not a threshold).
Timing: one training iteration per call, the two sides' repeats alternating
(``bench._common.time_alternating``), each repeat at least ``--min-repeat-s``; medians over
``--repeats``, ``ratio`` = torch's median over rnnfast's. The process is pinned to ``--threads``
cores (default 1) and every library set to that many threads; the header names the CPU and
rnnfast's ISA, and the line under the table how busy other processes kept the CPUs meanwhile.
``--json PATH`` writes the results (nothing is written without it).
"""

from __future__ import annotations

import argparse
import string

import torch
from torch import nn

from bench import SHARED_DATA
from bench._common import (
    WARMUP_S,
    cell,
    cpu_clock,
    log,
    others_cpus,
    text_table,
    time_alternating,
)
from bench.end_to_end import _one_name
from examples._tasks import ascii_letters
from rnnfast import datasets

# ----------------------------------------------------------------------------- the notes' models


class DecoderRNN(nn.Module):
    """The notes' decoder; ``rnn`` the recurrent class (nn.GRU in the notes)."""

    def __init__(self, output_dim, emb_dim, hidden_dim, rnn=nn.GRU):
        super().__init__()
        self.embedding = nn.Embedding(output_dim, emb_dim)
        self.rnn = rnn(emb_dim, hidden_dim)
        self.fc = nn.Linear(hidden_dim, output_dim)

    def forward(self, input, hidden):
        embedded = self.embedding(input)  # (1, B, emb_dim): one step
        output, hidden = self.rnn(embedded, hidden)
        prediction = self.fc(output.squeeze(0))  # (B, output_dim)
        return prediction, hidden


def decode(decoder, target_seq, decoder_hidden, teacher_forcing_ratio=0.5):
    """The notes' ``train``: the outputs (T, B, V) of the decoder fed, step by step, the truth
    or its own argmax by the coin of ``torch.rand``."""
    target_len, batch_size = target_seq.shape
    outputs = torch.zeros(target_len, batch_size, decoder.fc.out_features)
    decoder_input = target_seq[0, :]
    for t in range(1, target_len):
        output, decoder_hidden = decoder(decoder_input.unsqueeze(0), decoder_hidden)
        outputs[t] = output
        teacher_force = torch.rand(1).item() < teacher_forcing_ratio
        top1 = output.argmax(1)
        decoder_input = target_seq[t] if teacher_force else top1
    return outputs


class CharRNN(nn.Module):
    """The notes' CharRNN; ``rnn`` the recurrent class (nn.RNN in the notes)."""

    def __init__(self, input_size, hidden_size, output_size, rnn=nn.RNN):
        super().__init__()
        self.rnn = rnn(input_size, hidden_size)
        self.h2o = nn.Linear(hidden_size, output_size)
        self.softmax = nn.LogSoftmax(dim=1)

    def forward(self, line_tensor):
        rnn_out, hidden = self.rnn(line_tensor)
        output = self.h2o(hidden[0])
        return self.softmax(output)


# ----------------------------------------------------------------------------- the clients


class Client:
    """A client's two models, optimizers and batches; ``iteration(side)`` trains one step on
    the next batch and returns its loss."""

    name = ""
    target = 1.0

    def __init__(self, models, optimizer, batches):
        self.models = models
        self.optimizers = {side: optimizer(m.parameters()) for side, m in models.items()}
        self.batches = batches
        self.next = dict.fromkeys(models, 0)

    def batch(self, side):
        i = self.next[side]
        self.next[side] = (i + 1) % len(self.batches)
        return self.batches[i]

    def iteration(self, side):
        raise NotImplementedError


class Decoder(Client):
    name = "decoder"
    target = 1.5
    T, B, H, EMB = 20, 32, 256, 256

    def __init__(self, args):
        text = datasets.load("tinyshakespeare", args.data)
        alphabet = sorted(set(text))
        index = {c: i for i, c in enumerate(alphabet)}
        g = torch.Generator().manual_seed(args.seed)
        starts = torch.randint(0, len(text) - self.T, (16 * self.B,), generator=g).tolist()
        windows = torch.tensor([[index[c] for c in text[s : s + self.T]] for s in starts])
        batches = list(windows.reshape(16, self.B, self.T).transpose(1, 2))  # (T, B) each
        self.vocab = len(alphabet)
        models = _one_name.twins(
            lambda rnn: DecoderRNN(self.vocab, self.EMB, self.H, rnn), nn.GRU, args.seed
        )
        super().__init__(models, lambda p: torch.optim.Adam(p, lr=1e-3), batches)
        self.hidden = torch.zeros(1, self.B, self.H)
        self.criterion = nn.CrossEntropyLoss()

    def iteration(self, side):
        model, optimizer = self.models[side], self.optimizers[side]
        target_seq = self.batch(side)
        optimizer.zero_grad()
        outputs = decode(model, target_seq, self.hidden, 0.5)
        loss = self.criterion(outputs[1:].reshape(-1, self.vocab), target_seq[1:].reshape(-1))
        loss.backward()
        optimizer.step()
        return loss.item()

    def shape(self):
        return f"T={self.T} B={self.B} E={self.EMB} H={self.H} V={self.vocab}"


class Names(Client):
    name = "charrnn"
    target = 2.0
    T, H = 7, 128
    LETTERS = string.ascii_letters + " .,;'"

    def __init__(self, args):
        by_language = datasets.load("names", args.data)
        self.languages = len(by_language)
        pairs = [
            (name, k)
            for k, lang in enumerate(by_language)
            for name in map(ascii_letters, by_language[lang])
            if len(name) == self.T and all(c in self.LETTERS for c in name)
        ]
        g = torch.Generator().manual_seed(args.seed)
        order = torch.randperm(len(pairs), generator=g).tolist()
        batches = [self.encode(*pairs[i]) for i in order[:512]]
        models = _one_name.twins(
            lambda rnn: CharRNN(len(self.LETTERS), self.H, self.languages, rnn),
            nn.RNN,
            args.seed,
        )
        super().__init__(models, lambda p: torch.optim.AdamW(p, lr=1e-3), batches)
        self.criterion = nn.CrossEntropyLoss()

    def encode(self, name, language):
        """(the name one-hot, (T, 1, 57); its language index, (1,))."""
        line = torch.zeros(len(name), 1, len(self.LETTERS))
        for t, c in enumerate(name):
            line[t, 0, self.LETTERS.index(c)] = 1.0
        return line, torch.tensor([language])

    def iteration(self, side):
        model, optimizer = self.models[side], self.optimizers[side]
        line_tensor, category_tensor = self.batch(side)
        output = model(line_tensor)
        loss = self.criterion(output, category_tensor)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()

    def shape(self):
        return f"T={self.T} B=1 D={len(self.LETTERS)} H={self.H} classes={self.languages}"


CLIENTS = {"decoder": Decoder, "charrnn": Names}


# ----------------------------------------------------------------------------- measuring


def check(client, iterations, seed):
    """Each side's losses over ``iterations`` iterations from the shared start (the same
    batches and coins), and their largest relative difference."""
    losses = {}
    for side in _one_name.SIDES:
        losses[side] = _one_name.same_rng(
            lambda side=side: [client.iteration(side) for _ in range(iterations)], seed
        )
    diff = max(abs(a - b) / max(abs(a), 1e-30) for a, b in zip(losses["torch"], losses["rnnfast"]))
    return losses, diff


def measure(client, args):
    losses, diff = check(client, args.check_iterations, args.seed)
    log(f"{client.name}: losses agree to {diff:.1e}; timing")
    since = cpu_clock()
    t = time_alternating(
        {side: lambda side=side: client.iteration(side) for side in _one_name.SIDES},
        args.repeats,
        args.min_repeat_s,
        args.warmup_s,
    )
    busy = others_cpus(since)
    torch_s, rnnfast_s = (t[side]["median_s"] for side in _one_name.SIDES)
    ratio = torch_s / rnnfast_s
    return {
        "client": client.name,
        "shape": client.shape(),
        "torch_ms": torch_s * 1e3,
        "rnnfast_ms": rnnfast_s * 1e3,
        "ratio": ratio,
        "target": client.target,
        "verdict": _one_name.verdict(ratio, client.target),
        "others_cpus": busy,
        "check_losses": losses,
        "check_rel_diff": diff,
        "timings": t,
    }


def loss_table(rows):
    lines = []
    for r in rows:
        lines.append(f"\n{r['client']}: training losses from the same weights and coins")
        pairs = zip(r["check_losses"]["torch"], r["check_losses"]["rnnfast"])
        lines += [f"  {i + 1:>3} {a:.6f} {b:.6f}" for i, (a, b) in enumerate(pairs)]
        lines.append(f"  largest relative difference {r['check_rel_diff']:.1e}")
    return "\n".join(lines)


def table(rows):
    columns = [
        ("client", "<8", cell("client")),
        ("shape", "<33", cell("shape")),
        *_one_name.side_columns("ms", "ms", ".3f"),
        _one_name.RATIO_COLUMN,
        ("target", ">6", cell("target", ".1f", "x")),
        ("verdict", ">7", cell("verdict")),
        _one_name.LOAD_COLUMN,
    ]
    return text_table(columns, rows)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", nargs="+", choices=list(CLIENTS), default=list(CLIENTS))
    _one_name.add_arguments(parser, repeats=7)
    parser.add_argument("--min-repeat-s", type=float, default=0.5, help="default %(default)s")
    parser.add_argument("--warmup-s", type=float, default=WARMUP_S, help="default %(default)s")
    parser.add_argument("--check-iterations", type=int, default=5, help="default %(default)s")
    parser.add_argument("--data", default=SHARED_DATA if SHARED_DATA.is_dir() else None)
    args = parser.parse_args(argv)
    _one_name.check_positive(parser, args, ("threads", "repeats", "check_iterations"))
    if args.min_repeat_s <= 0:
        parser.error("--min-repeat-s: expected a positive number")
    with _one_name.pinned(args.threads) as cores:
        facts = _one_name.machine(args.threads, cores)
        print(_one_name.header(facts), flush=True)
        rows = [measure(CLIENTS[name](args), args) for name in args.clients]
    print("\nOne training iteration, float32 (medians; ratio = torch / rnnfast):")
    print(table(rows))
    print(loss_table(rows))
    _one_name.maybe_write_json(args.json, {**facts, "rows": rows})


if __name__ == "__main__":
    main()
