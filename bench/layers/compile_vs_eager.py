"""The PyTorch bridge compiled against eager: what ``torch.compile`` of a model holding
``rnnfast.torch``'s modules (the registered operators of ``rnnfast._torch_ops``) costs or saves
per call against the same model in eager mode (the bridge's autograd.Function route), with
torch's own modules in eager mode beside them.

    python -m bench.layers.compile_vs_eager [--char-cases T,B;...] [--lm-cases T,B;...]
                                            [--route-cells rnn,gru,lstm] [--repeats 9] [--min-repeat-s 0.05]
                                            [--warmup-s 0.25] [--out PATH]

Two models, float32, one thread, pinned to one core:

- ``char``: the lecture notes' character RNN, Embedding(65, 32) -> rnnfast.torch.RNN(32, 128)
  -> Linear(128, 65), batch_first, at T = 7..50, B = 1..32 (default cases 7,1; 20,8; 50,32);
- ``lm``: a word-level language model, Embedding(1000, 200) -> 2-layer rnnfast.torch.LSTM(200,
  200) -> Linear(200, 1000), time-major, T = 35, B = 20.

For each case and mode (``infer``: the forward under no_grad; ``train``: forward, cross-entropy
and backward, gradients set to None between calls), medians of alternating repeats of: the
bridge eager (``eager``), the bridge under ``torch.compile(model, fullgraph=True)`` (Inductor,
``compiled``) and the same model on torch.nn's modules eager (``torch``); the ratio eager /
compiled (above 1: compiling is faster) and the first compiled call's time (the compilation).
Dynamo's caches are reset between cases (each case compiles once, static shapes). The last
column is the CPUs other processes kept busy meanwhile (a loaded machine's rows are noisier).

A second table says why eager calls keep the bridge's autograd.Function route instead of the
custom operators: one module call at T = 1, B = 1, D = H = 64 (``--route-cells``), forward under
no_grad and forward + backward, on the eager route (``function``) and on the operators called
eagerly (``ops``: ``rnnfast._torch_ops.forward``, what a compiled graph runs, without the
compiler).

Prints the table with the CPU and ISA, and writes JSON (default
bench/results/compile_vs_eager.json).
"""

from __future__ import annotations

import argparse
import time
import warnings

import torch

import rnnfast.torch as rt
from bench import RESULTS
from bench._common import (
    add_timing_arguments,
    cell,
    cores_for,
    cpu_clock,
    cpu_model,
    others_cpus,
    parse_tuples,
    pinned_to,
    split_names,
    text_table,
    thread_count,
    time_alternating,
    write_json,
)
from rnnfast import _core, _torch_ops

MIN_REPEAT_S = 0.05
CHAR = {"vocab": 65, "emb": 32, "hidden": 128}
LM = {"vocab": 1000, "emb": 200, "hidden": 200, "layers": 2}


class CharRNN(torch.nn.Module):
    def __init__(self, rnn_class):
        super().__init__()
        self.emb = torch.nn.Embedding(CHAR["vocab"], CHAR["emb"])
        self.rnn = rnn_class(CHAR["emb"], CHAR["hidden"], batch_first=True)
        self.out = torch.nn.Linear(CHAR["hidden"], CHAR["vocab"])

    def forward(self, ids):
        y, _ = self.rnn(self.emb(ids))
        return self.out(y)


class LanguageModel(torch.nn.Module):
    def __init__(self, lstm_class):
        super().__init__()
        self.emb = torch.nn.Embedding(LM["vocab"], LM["emb"])
        self.rnn = lstm_class(LM["emb"], LM["hidden"], num_layers=LM["layers"])
        self.out = torch.nn.Linear(LM["hidden"], LM["vocab"])

    def forward(self, ids):
        y, _ = self.rnn(self.emb(ids))
        return self.out(y)


def parse_cases(text):
    return parse_tuples(text, "T,B", "--cases")


def _models(kind):
    """(bridge model, torch.nn model) with the same weights."""
    torch.manual_seed(0)
    if kind == "char":
        ref = CharRNN(torch.nn.RNN)
        mine = CharRNN(rt.RNN)
    else:
        ref = LanguageModel(torch.nn.LSTM)
        mine = LanguageModel(rt.LSTM)
    mine.load_state_dict(ref.state_dict())
    return mine, ref


def _runner(model, ids, vocab, train):
    """One call: the forward under no_grad, or a training step's forward, loss and backward."""
    params = list(model.parameters())
    target = ids.reshape(-1)

    if train:

        def run():
            for p in params:
                p.grad = None
            logits = model(ids)
            torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), target).backward()

    else:

        def run():
            with torch.no_grad():
                model(ids)

    return run


def measure(args):
    torch._inductor.config.compile_threads = 1  # no pool of compile workers beside the timing
    rows = []
    cases = [("char", c) for c in args.char_cases] + [("lm", c) for c in args.lm_cases]
    with thread_count(1), pinned_to(cores_for(1)):
        for kind, (steps, batch) in cases:
            for mode in ("infer", "train"):
                torch._dynamo.reset()
                mine, ref = _models(kind)
                compiled = torch.compile(mine, fullgraph=True, dynamic=False)
                vocab = CHAR["vocab"] if kind == "char" else LM["vocab"]
                g = torch.Generator().manual_seed(1)
                shape = (batch, steps) if kind == "char" else (steps, batch)
                ids = torch.randint(0, vocab, shape, generator=g)
                train = mode == "train"
                fns = {
                    "eager": _runner(mine, ids, vocab, train),
                    "compiled": _runner(compiled, ids, vocab, train),
                    "torch": _runner(ref, ids, vocab, train),
                }
                start = time.perf_counter()
                fns["compiled"]()  # the compilation
                compile_s = time.perf_counter() - start
                since = cpu_clock()
                t = time_alternating(fns, args.repeats, args.min_repeat_s, args.warmup_s)
                busy = others_cpus(since)
                us = {k: v["median_s"] * 1e6 for k, v in t.items()}
                rows.append(
                    {
                        "model": kind,
                        "mode": mode,
                        "T": steps,
                        "B": batch,
                        **{f"{k}_us": v for k, v in us.items()},
                        "eager_over_compiled": us["eager"] / us["compiled"],
                        "torch_over_compiled": us["torch"] / us["compiled"],
                        "compile_s": compile_s,
                        "others_cpus": busy,
                    }
                )
    return rows


def _route_runner(module, x, ops, train):
    """One eager call of the module, on its own route or on the custom operators."""
    fallback = super(rt._Bridge, module).forward
    params = list(module.parameters())

    def call():
        return _torch_ops.forward(module, x, None, fallback) if ops else module(x)

    if train:

        def run():
            for p in params:
                p.grad = None
            call()[0].sum().backward()

    else:

        def run():
            with torch.no_grad():
                call()

    return run


def measure_routes(args):
    rows = []
    classes = {"rnn": rt.RNN, "gru": rt.GRU, "lstm": rt.LSTM}
    with thread_count(1), pinned_to(cores_for(1)):
        for name in args.route_cells:
            torch.manual_seed(0)
            module = classes[name](64, 64)
            x = torch.randn(1, 1, 64)
            for mode in ("infer", "train"):
                train = mode == "train"
                fns = {
                    "function": _route_runner(module, x, False, train),
                    "ops": _route_runner(module, x, True, train),
                }
                t = time_alternating(fns, args.repeats, args.min_repeat_s, args.warmup_s)
                us = {k: v["median_s"] * 1e6 for k, v in t.items()}
                row = {"cell": name, "mode": mode, **{f"{k}_us": v for k, v in us.items()}}
                row["ops_over_function"] = us["ops"] / us["function"]
                rows.append(row)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--char-cases", type=parse_cases, default=[(7, 1), (20, 8), (50, 32)])
    parser.add_argument("--lm-cases", type=parse_cases, default=[(35, 20)])
    parser.add_argument("--route-cells", default="rnn,lstm")
    add_timing_arguments(parser, 9, MIN_REPEAT_S, RESULTS / "compile_vs_eager.json")
    args = parser.parse_args(argv)
    args.route_cells = split_names(args.route_cells, "--route-cells", ("rnn", "gru", "lstm"))
    with warnings.catch_warnings():
        # torch's own import-time DeprecationWarning as Inductor loads (torch.utils.mkldnn)
        warnings.simplefilter("ignore", DeprecationWarning)
        import torch._inductor.compile_fx  # noqa: F401
    rows = measure(args)
    machine = (
        f"{cpu_model()}, rnnfast {_core.active_isa()}, 1 thread, float32, torch {torch.__version__}"
    )
    print(
        f"compiled vs eager, us per call (medians of {args.repeats} alternating repeats): {machine}"
    )
    columns = [("model", "<5", cell("model")), ("mode", "<5", cell("mode"))]
    columns += [("T", ">3", cell("T")), ("B", ">3", cell("B"))]
    columns += [(k, ">9", cell(f"{k}_us", ".1f")) for k in ("eager", "compiled", "torch")]
    columns += [("eager/compiled", ">14", cell("eager_over_compiled", ".2f", "x"))]
    columns += [("torch/compiled", ">14", cell("torch_over_compiled", ".2f", "x"))]
    columns += [("compile", ">8", cell("compile_s", ".1f", " s"))]
    columns += [("others' CPUs", ">12", cell("others_cpus", ".1f"))]
    print(text_table(columns, rows))
    routes = measure_routes(args)
    print("\neager routes at T = 1, B = 1, D = H = 64, us per call (medians, alternating):")
    columns = [("cell", "<5", cell("cell")), ("mode", "<5", cell("mode"))]
    columns += [(k, ">9", cell(f"{k}_us", ".1f")) for k in ("function", "ops")]
    columns += [("ops/function", ">12", cell("ops_over_function", ".2f", "x"))]
    print(text_table(columns, routes))
    result = {"machine": machine, "isa": _core.active_isa(), "rows": rows, "routes": routes}
    write_json(args.out, result)


if __name__ == "__main__":
    main()
