"""Digit strings -> their reversal (or sorted digits): a sequence-to-sequence RNN (Elman, GRU or
LSTM: ``--cell``), trained with full teacher forcing and with scheduled sampling, to measure
exposure bias, and with self-critical sequence training on BLEU.

    python examples/seq2seq.py [--out DIR] [--task reverse] [--max-len 12] [--steps 3000]
                               [--midpoint 0.3] [--schedule inverse_sigmoid] [--cell rnn]
                               [--objective teacher scheduled reinforce] [--rl-steps 300]

Strings of 3..12 digits are generated in code; a held-out set of strings never seen in training
measures exact-match accuracy (every digit and the end token right). The same model is trained
twice from the same initialisation on the same batches, the learning rate annealed to 0: once
reading the ground-truth previous token at every step (teacher forcing), once with scheduled
sampling (Bengio et al., 2015), whose teacher-forcing ratio falls (``--schedule``; an inverse
sigmoid by default) from ~1, through 0.5 at ``--midpoint`` of the run, towards 0, so that the
decoder learns to continue from its own predictions as it must at test time. Both are decoded
greedily and by beam search.

Exposure bias is what a model loses by reading its own predictions instead of the truth. It
cannot show as "exact match with the gold prefix fed (teacher forced) minus greedy exact match":
that is zero by construction, since up to its first error greedy decoding has read exactly the
gold prefix, so both err first at the same token (the table prints both). It shows after that
first error, where the gold-prefix pass reads the truth and greedy decoding reads its own
mistake: the example scores the positions after each string's first greedy error both ways,
and calls the difference of the two token error rates the exposure bias. Prints exact match
(gold prefix, greedy, beam) and those error rates for both models, and the token error rate
by output position from either prefix; draws exact match by length, error rate by position and
the training curves into ``--out``; ends with ``RESULT exact_match_greedy=... exact_match_beam=...
exposure_bias_tf=... exposure_bias_ss=... time_s=...`` (the exact matches of the
scheduled-sampling model; time_s: data, training and evaluation, not the plot).

``--objective`` picks the trainings (all three by default). ``reinforce`` is self-critical
sequence training (Rennie et al., 2017; the notes' "optimize sequence-level rewards directly
using the model's own rollouts", ``rnnfast.training.fit_self_critical``): warm-started from the
teacher-forced model, as the paper does, it runs ``--rl-steps`` more updates at ``--rl-lr``, each
sampling a sequence per string and rewarding it by sentence BLEU (sacrebleu over the token ids)
minus the BLEU of the model's own greedy decode. It needs sacrebleu (``pip install
'rnnfast[bleu]'``); so does the BLEU column, which is the mean sentence BLEU of the greedy
decodes against the held-out targets. The RESULT line is printed when teacher forcing and
scheduled sampling both ran.

``--cell gru`` / ``--cell lstm`` builds the encoder and the decoder as ``rnnfast.GRU`` /
``rnnfast.LSTM`` (the LSTM hands over both its h and its c with ``--context init`` or ``both``);
everything else is the same.

Measured at the defaults (``python examples/seq2seq.py --threads 1 --seed S``, 43-49 s on one
core), exact match greedy / beam and the exposure bias (error rate after the first error, own
prefix minus gold prefix):

    seed   teacher forcing            scheduled sampling
    0      0.933 / 0.949   0.42       0.951 / 0.974   0.23
    1      0.935 / 0.952   0.34       0.957 / 0.969   0.20
    2      0.945 / 0.956   0.43       0.961 / 0.974   0.22
    3      0.925 / 0.940   0.42       0.954 / 0.968   0.25

After its first mistake the teacher-forced model gets 37-47% of the remaining tokens wrong
when it reads its own output, against 2-5% when fed the truth; scheduled sampling about halves
that gap and beats teacher forcing by 1.6-2.9 points of exact match, greedy and beam, in each
seed (a change of float rounding, such as a new kernel, moves each figure by a point or so,
as a change of seed does: these are from after the encoder's Embedding -> RNN fusion).
The exact-match gain depends on the schedule, the smaller gap less so: with
``--midpoint 0.5`` (seed 0) scheduled sampling about ties (0.934 / 0.955 against
0.933 / 0.949) with the gap still halved (0.23 against 0.42). It needs long strings: with ``--max-len 8`` both
models are near perfect (seed 0, midpoint 0.5: 0.990 and 0.997 greedy), leaving few errors to
compound; ``--task sort`` is solved outright (0.994-1.000, 3..8 or 3..12 digits).
"""

from __future__ import annotations

import copy
import os
import sys
import time

# These batches are small (64 x 128): one thread is fastest, and OpenBLAS's spinning threads
# beside rnnfast's OpenMP ones made a step 5x slower on 2 cores. An explicit setting wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import _cli  # the examples' shared command line, beside this file
import numpy as np
from _tasks import (  # the task's data, as its twin in bench/ reads it
    BOS,
    EOS,
    SRC_VOCAB,
    TGT_VOCAB,
    encode_batch,
    make_strings,
    schedule_constants,
    target_of,
)

import rnnfast
from rnnfast import optim
from rnnfast.nn.seq2seq import SCHEDULES, Seq2Seq, teacher_forcing_schedule
from rnnfast.training import fit_self_critical, sentence_bleu

OBJECTIVES = {
    "teacher": "teacher forcing",
    "scheduled": "scheduled sampling",
    "reinforce": "self-critical",
}


def progress(steps, desc):
    """tqdm's bar over range(steps) on a terminal where tqdm is installed (the examples extra),
    else the range: in a log a bar's carriage-return redraws are noise (as fit's verbose)."""
    if not sys.stderr.isatty():
        return range(steps)
    try:
        from tqdm import tqdm
    except ImportError:
        return range(steps)
    return tqdm(range(steps), desc=desc, unit="batch", mininterval=2.0)


def train(args, strings, scheduled, seed):
    model = Seq2Seq(
        SRC_VOCAB,
        TGT_VOCAB,
        args.embed,
        args.hidden,
        context=args.context,
        cell=args.cell,
        seed=seed,
    )
    opt = optim.Adam(model, lr=args.lr)
    # annealed to 0 so that a run ends at a settled model: at a constant rate the loss still
    # swung by 2x over the last updates, and exact match with it (sort, seed 2: 0.88 for
    # scheduled sampling, where annealed runs reach 0.999)
    lr_schedule = optim.CosineAnnealingLR(opt, T_max=args.steps)
    rng = np.random.default_rng(seed)  # the same batches for both runs
    constants = schedule_constants(args.schedule, max(args.midpoint * args.steps, 1.0))
    losses, ratios = [], []
    name = "scheduled sampling" if scheduled else "teacher forcing"
    bar = progress(args.steps, name)
    for i in bar:
        batch = [strings[j] for j in rng.integers(0, len(strings), args.batch_size)]
        ratio = teacher_forcing_schedule(args.schedule, i, **constants) if scheduled else 1.0
        model.zero_grad()
        loss = model.train_batch(
            *encode_batch(batch, args.task), teacher_forcing_ratio=ratio, rng=rng
        )
        optim.clip_grad_norm(model, 5.0)
        opt.step()
        lr_schedule.step()
        losses.append(loss)
        ratios.append(ratio)
        if i % 20 == 0 and hasattr(bar, "set_postfix"):
            bar.set_postfix(loss=f"{np.mean(losses[-20:]):.3f}", ratio=f"{ratio:.2f}")
    return model.eval(), np.array(losses), np.array(ratios)


def train_self_critical(args, strings, warm):
    """Self-critical training of a copy of the teacher-forced model ``warm``: ``--rl-steps``
    batches of ``--batch-size`` strings drawn from the training set, reward sentence BLEU."""
    model = copy.deepcopy(warm)
    rng = np.random.default_rng(args.seed + 2)
    picked = [strings[j] for j in rng.integers(0, len(strings), args.rl_steps * args.batch_size)]
    history = fit_self_critical(
        model,
        [np.array(s) for s in picked],
        [np.array(target_of(s, args.task)) for s in picked],
        optimizer=optim.Adam(model, lr=args.rl_lr),
        bos=BOS,
        eos=EOS,
        reward="bleu",
        batch_size=args.batch_size,
        bucket=False,
        clip_norm=5.0,
        seed=args.seed + 2,
        verbose=False,
    )
    return model.eval(), history


def greedy_bleu(model, strings, task):
    """Mean sentence BLEU of the greedy decodes of ``strings`` against their targets (the
    decodes cut at their first EOS)."""
    src, sl, _, tgt_out, _ = encode_batch(strings, task)
    tokens, _ = model.generate(src, sl, tgt_out.shape[1] + 2, "greedy", bos=BOS, eos=EOS)
    scores = []
    for s, seq in zip(strings, tokens):
        ends = np.flatnonzero(seq == EOS)
        scores.append(sentence_bleu(seq[: ends[0] if ends.size else len(seq)], target_of(s, task)))
    return float(np.mean(scores))


def evaluate(model, strings, task, args):
    """Per-token errors (N, T) of the held-out targets (digits and EOS) predicted three ways,
    and the (N, T) mask of the positions each target has.

    ``gold prefix``: the argmax at every position with the decoder reading the ground-truth
    previous tokens, as in training with teacher forcing; ``greedy`` and ``beam``: decoded from
    the model's own previous tokens, as at test time. A string is an exact match when it has
    no error.
    """
    src, sl, tgt_in, tgt_out, tl = encode_batch(strings, task)
    steps = tgt_out.shape[1]
    preds = {"gold prefix": model.forward(src, sl, tgt_in, tl).argmax(axis=2)}
    for method in ("greedy", "beam"):
        # two spare steps so that beam search can weigh hypotheses that miss the EOS
        tokens, _ = model.generate(
            src,
            sl,
            steps + 2,
            method,
            bos=BOS,
            eos=EOS,
            beam_width=args.beam_width,
            length_penalty=args.length_penalty,
        )
        preds[method] = tokens[:, :steps]
    valid = np.arange(steps) < tl[:, None]
    return {name: (pred != tgt_out) & valid for name, pred in preds.items()}, valid


def exposure_bias(errors, valid):
    """Token error rates (gold prefix, own greedy prefix) at the positions after each string's
    first greedy error.

    Up to its first error, greedy decoding has read exactly the gold prefix, so it predicts
    what the teacher-forced pass predicts and errs at the same position with the same token
    (which is also why the teacher-forced exact match equals the greedy one). After it the
    two passes differ only in the prefix read: the gold one, or one holding the model's own
    mistake. The difference of their error rates there is the exposure bias.
    """
    gold, own = errors["gold prefix"], errors["greedy"]
    first = np.where(own.any(axis=1), own.argmax(axis=1), valid.shape[1])
    after = valid & (np.arange(valid.shape[1]) > first[:, None])
    count = max(after.sum(), 1)
    return gold[after].sum() / count, own[after].sum() / count


def plot(errors, valid, test_lengths, curves, path):
    plt = _cli.pyplot("plot")
    if plt is None:
        return
    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(18, 4.8))
    lengths = np.unique(test_lengths)
    positions = np.arange(1, valid.shape[1] + 1)
    for color, (regime, errs) in zip(("C0", "C1", "C2"), errors.items()):
        for method, style in (("greedy", "-"), ("beam", "--")):
            hits = ~errs[method].any(axis=1)
            ax1.plot(
                lengths,
                [hits[test_lengths == n].mean() for n in lengths],
                marker="o",
                color=color,
                linestyle=style,
                label=f"{regime}, {method}",
            )
        for method, style, label in (
            ("gold prefix", ":", "gold prefix"),
            ("greedy", "-", "own greedy prefix"),
        ):
            ax2.plot(
                positions,
                errs[method].sum(axis=0) / valid.sum(axis=0),
                marker="o",
                color=color,
                linestyle=style,
                label=f"{regime}, {label}",
            )
    ax1.set_xlabel("string length")
    ax1.set_ylabel("exact match (held out)")
    ax1.set_ylim(top=1.01)
    ax1.set_title("teacher forcing vs scheduled sampling, by length")
    ax1.legend(fontsize=8)
    ax2.set_xlabel("output position (the last of each string is its EOS)")
    ax2.set_ylabel("token error rate (held out)")
    ax2.set_title("errors compound along the model's own prefix")
    ax2.legend(fontsize=8)
    window = 25
    for label, (losses, _ratios) in curves.items():
        if label == OBJECTIVES["reinforce"]:  # a surrogate loss, not a cross-entropy
            continue
        smooth = np.convolve(losses, np.ones(window) / window, mode="valid")
        ax3.plot(np.arange(len(smooth)) + window - 1, smooth, label=f"{label} loss")
    ax3.set_yscale("log")
    ax3.set_xlabel("update")
    ax3.set_ylabel("training cross-entropy (tokens fed as trained)")
    if "scheduled sampling" in curves:
        twin = ax3.twinx()
        twin.plot(
            curves["scheduled sampling"][1],
            color="gray",
            linestyle=":",
            label="teacher-forcing ratio",
        )
        twin.set_ylabel("teacher-forcing ratio (scheduled)")
        twin.set_ylim(0, 1.05)
    ax3.legend(loc="upper right")
    _cli.save_figure(fig, path)


def main(argv=None):
    parser = _cli.parser(__doc__)
    _cli.add_out(parser)
    _cli.add_cell(parser)
    parser.add_argument(
        "--task",
        choices=("reverse", "sort"),
        default="reverse",
        help="the target: the digits reversed, or sorted",
    )
    parser.add_argument("--min-len", type=int, default=3, help="shortest digit string")
    parser.add_argument("--max-len", type=int, default=12, help="longest digit string")
    parser.add_argument("--train-size", type=int, default=20000, help="distinct training strings")
    parser.add_argument(
        "--test-size",
        type=int,
        default=1000,
        help="distinct held-out strings, none of them in training",
    )
    parser.add_argument("--steps", type=int, default=3000, help="updates per model")
    parser.add_argument(
        "--schedule",
        choices=SCHEDULES,
        default="inverse_sigmoid",
        help="how the scheduled teacher-forcing ratio falls",
    )
    parser.add_argument(
        "--midpoint",
        type=float,
        default=0.3,
        help="fraction of the run where the scheduled ratio passes 0.5",
    )
    parser.add_argument(
        "--objective",
        nargs="+",
        choices=tuple(OBJECTIVES),
        default=list(OBJECTIVES),
        help="the trainings to run: teacher forcing, scheduled sampling, self-critical "
        "(reinforce: warm-started from the teacher-forced model, which it then trains too)",
    )
    parser.add_argument(
        "--rl-steps", type=int, default=300, help="self-critical updates after the warm start"
    )
    parser.add_argument(
        "--rl-lr", type=float, default=5e-5, help="Adam's learning rate of self-critical training"
    )
    parser.add_argument("--batch-size", type=int, default=64, help="strings per update")
    parser.add_argument("--embed", type=int, default=32, help="size of the token vectors")
    parser.add_argument(
        "--hidden", type=int, default=128, help="hidden units of the encoder and the decoder"
    )
    parser.add_argument(
        "--context",
        choices=("init", "input", "both"),
        default="both",
        help="how the decoder sees the encoding: its initial state, an input "
        "at every step, or both",
    )
    parser.add_argument(
        "--lr", type=float, default=3e-3, help="Adam's initial learning rate (cosine-annealed to 0)"
    )
    parser.add_argument("--beam-width", type=int, default=4, help="beams of the beam search")
    parser.add_argument(
        "--length-penalty",
        type=float,
        default=0.6,
        help="the beam search's length penalty exponent",
    )
    parser.add_argument("--threads", type=int, default=1, help="rnnfast threads")
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of the strings, the weights and the batches"
    )
    args = parser.parse_args(argv)
    out = _cli.out_dir(parser, args.out)
    if not 1 <= args.min_len <= args.max_len:
        _cli.fail(
            parser,
            f"--min-len {args.min_len} --max-len {args.max_len}: expected 1 <= min-len <= max-len",
        )
    try:
        import sacrebleu  # noqa: F401  (BLEU, the self-critical reward and the table's column)
    except ImportError:
        _cli.fail(parser, "needs sacrebleu for BLEU: pip install 'rnnfast[bleu]'")
    if args.rl_steps < 1:
        _cli.fail(parser, f"--rl-steps {args.rl_steps}: expected at least 1")
    rnnfast.set_num_threads(args.threads)

    start = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    test = make_strings(rng, args.test_size, args.min_len, args.max_len)
    train_strings = make_strings(
        rng, args.train_size, args.min_len, args.max_len, exclude=frozenset(test)
    )
    test_lengths = np.array([len(s) for s in test])

    errors, curves, train_s, bleu = {}, {}, [], {}
    runs = [o for o in ("teacher", "scheduled") if o in args.objective]
    if "reinforce" in args.objective and "teacher" not in runs:
        runs.insert(0, "teacher")  # the warm start
    models = {}
    for objective in runs:
        label = OBJECTIVES[objective]
        began = time.perf_counter()
        model, losses, ratios = train(args, train_strings, objective == "scheduled", args.seed + 1)
        train_s.append(time.perf_counter() - began)
        curves[label], models[objective] = (losses, ratios), model
    if "reinforce" in args.objective:
        began = time.perf_counter()
        model, history = train_self_critical(args, train_strings, models["teacher"])
        sc_s = time.perf_counter() - began
        models["reinforce"] = model
        curves[OBJECTIVES["reinforce"]] = (np.array(history["loss"]), None)
        print(
            f"self-critical: {args.rl_steps} updates in {sc_s:.1f} s, mean BLEU of the samples "
            f"{history['reward'][0]:.3f}, of the greedy decodes {history['greedy_reward'][0]:.3f}"
        )
    for objective, model in models.items():
        label = OBJECTIVES[objective]
        errors[label], valid = evaluate(model, test, args.task, args)
        bleu[label] = greedy_bleu(model, test, args.task)
    em = {
        (regime, method): 1.0 - wrong.any(axis=1).mean()
        for regime, errs in errors.items()
        for method, wrong in errs.items()
    }
    bias = {regime: exposure_bias(errs, valid) for regime, errs in errors.items()}

    print(
        f"\n{len(test)} held-out strings     exact match      token error rate after the "
        f"first greedy error ({_cli.CELLS[args.cell]} encoder and decoder)"
    )
    print(
        f"{'trained with':>18s}  gold prefix  greedy   beam   gold prefix  own prefix  "
        f"exposure bias  BLEU (greedy)"
    )
    for regime, (gold, own) in bias.items():
        print(
            f"{regime:>18s}  {em[(regime, 'gold prefix')]:11.3f}  {em[(regime, 'greedy')]:6.3f}"
            f"  {em[(regime, 'beam')]:5.3f}   {gold:11.3f}  {own:10.3f}  {own - gold:13.3f}"
            f"  {bleu[regime]:13.3f}"
        )
    print("(exact match with the gold prefix equals greedy's: both err first at the same token)")
    print("token error rate by output position, gold prefix -> own greedy prefix:")
    for regime, errs in errors.items():
        gold, own = (errs[m].sum(axis=0) / valid.sum(axis=0) for m in ("gold prefix", "greedy"))
        print(
            f"{regime:>18s}: "
            + ", ".join(f"{t + 1}: {a:.3f}->{b:.3f}" for t, (a, b) in enumerate(zip(gold, own)))
        )
    # an epoch: as many strings as the training set holds, read in (a fraction of) the updates
    epochs = args.steps * args.batch_size / len(train_strings)
    _cli.print_epoch_times(
        [t / epochs for t in train_s],
        f" ({', '.join(OBJECTIVES[o] for o in runs)}; {epochs:.2f} epochs of "
        f"{len(train_strings)} strings each)",
    )
    elapsed = time.perf_counter() - start  # as in the other examples, the plot is not timed
    plot(errors, valid, test_lengths, curves, out / "seq2seq.png")
    tf, ss = "teacher forcing", "scheduled sampling"
    if tf not in errors or ss not in errors:
        return
    print(
        f"RESULT exact_match_greedy={em[(ss, 'greedy')]:.4f} "
        f"exact_match_beam={em[(ss, 'beam')]:.4f} "
        f"exposure_bias_tf={bias[tf][1] - bias[tf][0]:.4f} "
        f"exposure_bias_ss={bias[ss][1] - bias[ss][0]:.4f} "
        f"time_s={elapsed:.1f}"
    )


if __name__ == "__main__":
    main()
