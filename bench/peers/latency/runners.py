"""latency's runners: per number format and mode, every library's (run, named) pair on one
Problem (compare's: one cell, shape and float32 weights), the same pairs compare's runners give
(run() is timed, named(raw) gives {name: ndarray} for the checks).

    rnnfast   the layer a user calls: ``rnnfast.RNN / GRU / LSTM.from_torch`` of the problem's
              module; float32, ``precision="bf16"``, or ``rnnfast.quantize(layer, "int8")``;
              forward in eval mode, training as zero_grad, the training forward, backward(dy)
    kernel    rnnfast.functional's call of the same (compare's runners; under
              ``precision.products("bf16")`` for bf16): the layer's time less its Python path
    torch     float32: torch.nn (compare's runners); bf16: torch.autocast bf16 (the training
              step of bench.kernels.bf16_training); int8: torch's dynamic int8 copy
              (quantize_dynamic, bench.kernels.quantized_gated's; GRU and LSTM only)
    ort       float32: compare's ONNX Runtime session; int8: the same graph through ONNX
              Runtime's dynamic quantization (quantize_dynamic: LSTM only, which it turns into
              DynamicQuantizeLSTM; RNN and GRU it leaves float32)
    openvino  compare's OpenVINO CPU plugin, INFERENCE_PRECISION_HINT f32 or bf16
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

import rnnfast
from bench._common import log
from bench.kernels.bf16_training import in_bf16, torch_autocast_runner
from bench.kernels.quantized_gated import torch_layers  # its CELLS: GRU and LSTM
from bench.peers.compare import onnx_peers
from bench.peers.compare.runners import all_runners, gated_runners, rnnfast_runners
from bench.peers.compare.shapes import PeerUnavailable, Problem, grads_named
from rnnfast import functional
from rnnfast.io.interop import from_torch

FORMATS = ("float32", "bf16", "int8")
MODES = ("forward", "train")
COMPARE_MODE = {"forward": "fwd_seq", "train": "train"}  # compare's name of each mode
MINE = ("rnnfast", "kernel")  # rnnfast's libraries; the rest are peers
PEERS = ("torch", "ort", "openvino")
COMPARE_SKIP = ("jax", "numpy", "blas")  # compare's libraries that latency leaves out
PARAMETERS = ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0")


def add_note(notes: list, note: str) -> None:
    """A note once per run, logged as it is first made."""
    if note not in notes:
        notes.append(note)
        log(note)


def states_named(p: Problem, states) -> dict:
    """A layer's or torch's last states, h_n (and the LSTM's c_n), each (1, B, H) -> (B, H)."""
    states = states if isinstance(states, tuple) else (states,)
    return {name: _numpy(s)[0] for name, s in zip(p.cell.states, states)}


def _numpy(a):
    return a.float().numpy() if isinstance(a, torch.Tensor) else a


def layer_runners(layer, p: Problem, mode: str):
    """(run, named) of a rnnfast layer: the forward in eval mode, or a training step."""
    if mode == "forward":
        layer.eval()
        return (lambda: layer(p.x)), (lambda r: {"y": r[0], **states_named(p, r[1])})
    layer.train()

    def step():
        layer.zero_grad()
        layer(p.x)
        dx, _ = layer.backward(p.dy)
        return dx, layer.grads

    return step, lambda r: grads_named(r[0], *(r[1][k] for k in PARAMETERS))


def float_layer(p: Problem, precision: str = "float32"):
    layer = from_torch(p.module)
    layer.precision = precision
    return layer


def kernel_runner(p: Problem, mode: str):
    """rnnfast.functional's (run, named) of the mode: compare's runners."""
    made = gated_runners(p, functional) if p.cell.gated else rnnfast_runners(p)
    return made[COMPARE_MODE[mode]]


def torch_forward(model, p: Problem, autocast: bool = False):
    """(run, named) of a torch module's forward under no_grad (and autocast bf16)."""
    x = torch.from_numpy(p.x)

    def run():
        with torch.no_grad(), torch.autocast("cpu", torch.bfloat16, enabled=autocast):
            return model(x)

    return run, lambda r: {"y": _numpy(r[0]), **states_named(p, r[1])}


def torch_int8_module(p: Problem):
    """torch's dynamic int8 copy of the problem's module (bench.kernels.quantized_gated)."""
    if not p.cell.gated:
        raise PeerUnavailable("torch int8 skipped for rnn: quantize_dynamic has no nn.RNN")
    weights = tuple(getattr(p, k) for k in ("w_ih", "w_hh", "b_ih", "b_hh"))
    return torch_layers(p.cell.name, weights)[1]


def ort_int8_runner(p: Problem, threads: int):
    """ONNX Runtime's dynamic quantization of compare's graph (LSTM only, module docstring)."""
    if p.cell.name != "lstm":
        raise PeerUnavailable(
            f"ORT int8 skipped for {p.cell.name}: its dynamic quantization leaves the "
            f"{p.cell.name.upper()} operator float32 (it has DynamicQuantizeLSTM only)"
        )
    from onnxruntime.quantization import QuantType, quantize_dynamic

    def session(model):
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "int8.onnx"
            quantize_dynamic(model, path, weight_type=QuantType.QInt8)
            run = onnx_peers.ort_session(onnx_peers.onnx.load(path), threads).run
        return lambda x: run(None, {"X": x})

    return onnx_peers.graph_runners(p, session)["fwd_seq"]


def peers_of(p: Problem, fmt: str, mode: str, threads: int):
    """{peer: maker} of a format and mode; a maker returns (run, named) or raises
    PeerUnavailable."""
    if fmt == "bf16":
        if mode == "train":
            return {"torch": lambda: torch_autocast_runner(p)}
        return {
            "torch": lambda: torch_forward(p.module, p, autocast=True),
            "openvino": lambda: onnx_peers.openvino_runners(p, threads, "bf16")["fwd_seq"],
        }
    return {
        "torch": lambda: torch_forward(torch_int8_module(p), p),
        "ort": lambda: ort_int8_runner(p, threads),
    }


def runners(p: Problem, fmt: str, mode: str, threads: int, notes: list, skip=()) -> dict:
    """{library: (run, named)} of one format and mode, rnnfast's first; a peer that cannot run
    is left out with a note, and so are the peers in skip."""
    cm = COMPARE_MODE[mode]
    if fmt == "float32":
        found = all_runners(p, threads, notes, None, skip=(*COMPARE_SKIP, *skip))
        out = {"rnnfast": layer_runners(float_layer(p), p, mode)}
        out |= {"kernel" if k == "rnnfast" else k: r[cm] for k, r in found.items() if cm in r}
        return out
    if fmt == "bf16":
        run, named = kernel_runner(p, mode)
        out = {
            "rnnfast": layer_runners(float_layer(p, "bf16"), p, mode),
            "kernel": (in_bf16(run), named),
        }
    else:
        out = {"rnnfast": layer_runners(rnnfast.quantize(float_layer(p), fmt), p, mode)}
    for peer, make in peers_of(p, fmt, mode, threads).items():
        if peer in skip:
            continue
        try:
            out[peer] = make()
        except PeerUnavailable as exc:
            add_note(notes, str(exc))
    return out
