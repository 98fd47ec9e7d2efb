"""PyTorch twin of examples/charlm.py: same text, split, truncated-BPTT windows, model,
optimiser, clipping and epochs, for comparing end-to-end training time and accuracy.

    python -m bench.end_to_end.torch_charlm [--data ROOT] [--epochs 2] [--cell rnn|gru|lstm]
                                            [--threads 2]

``--cell gru`` or ``lstm``: a GRU or LSTM in the RNN's place, as the example's ``--cell``.
Prints the seconds of each epoch (training and validation) as the example does, and ends with ``RESULT val_perplexity=... time_s=...`` as the rnnfast example (the time covers the
same work: loading, training, validation and the three decoded samples).
"""

from __future__ import annotations

import math
import time

import torch
from torch import nn

from bench.end_to_end import _twin
from examples._tasks import encode_text
from rnnfast import datasets
from rnnfast.training import stream_windows


class CharLM(nn.Module):
    def __init__(self, vocab, embed, hidden, cell="rnn"):
        super().__init__()
        self.embedding = nn.Embedding(vocab, embed)
        self.rnn = _twin.recurrent(cell, embed, hidden, batch_first=True)
        self.linear = nn.Linear(hidden, vocab)

    def forward(self, x, h=None):
        y, h = self.rnn(self.embedding(x), h)
        return self.linear(y), h


def evaluate(model, tokens, batch_size, bptt):
    xs, ys = stream_windows(tokens, batch_size, bptt)
    model.eval()
    h, total = None, 0.0
    with torch.no_grad():
        for xb, yb in zip(xs, ys):
            logits, h = model(torch.from_numpy(xb), h)
            total += nn.functional.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), torch.from_numpy(yb).reshape(-1)
            ).item()
    return total / len(xs)


def decode(model, prompt_ids, length, mode, temperature=0.8, width=4, seed=0):
    """Greedy, sampled or beam-search continuation of the prompt (batch of one)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        _, h = model(torch.tensor([prompt_ids[:-1]]))
        if mode != "beam":
            token, out = prompt_ids[-1], []
            for _ in range(length):
                logits, h = model(torch.tensor([[token]]), h)
                lp = torch.log_softmax(logits[0, -1], -1)
                probs = torch.softmax(lp / temperature, -1)
                token = (
                    int(lp.argmax())
                    if mode == "greedy"
                    else int(torch.multinomial(probs, 1, generator=gen))
                )
                out.append(token)
            return out
        beams = [(0.0, [prompt_ids[-1]])]
        hs = h
        for _ in range(length):
            tokens = torch.tensor([[b[1][-1]] for b in beams])
            if _twin.hidden(hs).shape[1] != len(beams):
                hs = _twin.state_map(lambda s: s.expand(-1, len(beams), -1).contiguous(), hs)
            logits, hs = model(tokens, hs)
            lp = torch.log_softmax(logits[:, -1], -1)
            scores = torch.tensor([b[0] for b in beams])[:, None] + lp
            top = torch.topk(scores.reshape(-1), width)
            rows = top.indices // lp.shape[1]
            beams = [
                (float(s), beams[r][1] + [int(t)])
                for s, r, t in zip(top.values, rows, top.indices % lp.shape[1])
            ]
            hs = _twin.state_map(lambda s, rows=rows: s[:, rows], hs)
        return beams[0][1][1:]


def main(argv=None):
    args = _twin.parse_args(
        __doc__,
        argv,
        epochs=2,
        options={
            "--embed": 64,
            "--hidden": 256,
            "--batch-size": 32,
            "--bptt": 100,
            "--lr": 3e-3,
            "--clip": 5.0,
            "--prompt": "ROMEO:\n",
            "--length": 200,
            "--beam-width": 4,
            "--temperature": 0.8,
        },
    )
    start = _twin.start(args)
    train_ids, val_ids, alphabet = encode_text(datasets.load("tinyshakespeare", args.data))
    model = CharLM(len(alphabet), args.embed, args.hidden, args.cell)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    xs, ys = stream_windows(train_ids, args.batch_size, args.bptt)
    clock = _twin.EpochClock()
    for epoch in range(args.epochs):
        model.train()
        h, total = None, 0.0
        bar = _twin.progress(range(len(xs)), f"epoch {epoch + 1}/{args.epochs}")
        for i in bar:
            optimizer.zero_grad()
            logits, h = model(torch.from_numpy(xs[i]), h)
            h = _twin.state_map(torch.Tensor.detach, h)
            loss = nn.functional.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), torch.from_numpy(ys[i]).reshape(-1)
            )
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            optimizer.step()
            total += loss.item()
            bar.set_postfix(loss=f"{loss.item():.4f}")
        val = evaluate(model, val_ids, args.batch_size, args.bptt)
        clock.lap()
        print(
            f"epoch {epoch + 1}: train loss {total / len(xs):.4f}, validation loss {val:.4f} "
            f"(perplexity {math.exp(val):.3f})"
        )
    _twin.print_epoch_times(clock.seconds)
    model.eval()
    index = {c: i for i, c in enumerate(alphabet)}
    prompt_ids = [index[c] for c in args.prompt if c in index]
    for mode in ("greedy", "sample", "beam"):
        ids = decode(
            model, prompt_ids, args.length, mode, args.temperature, args.beam_width, args.seed
        )
        print(f"\n---- {mode} ----\n{args.prompt}{''.join(alphabet[i] for i in ids)}")
    print(f"RESULT val_perplexity={math.exp(val):.4f} time_s={time.perf_counter() - start:.1f}")


if __name__ == "__main__":
    main()
