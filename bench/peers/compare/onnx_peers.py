"""compare's peers that run an ONNX graph: ONNX Runtime and OpenVINO, inference only.

Both run the same one-node graph per cell and mode (onnx_model): ONNX's RNN (activations Tanh),
GRU (linear_before_reset=1: PyTorch's form, the reset gate applied after the recurrent product) or
LSTM operator, with W [1, G*H, D], R [1, G*H, H] and B [1, 2*G*H] = concat(Wb, Rb), the gate
blocks reordered from PyTorch's to ONNX's (GRU r, z, n -> z, r, h; LSTM i, f, g, o -> i, o, f, c).
fwd_seq's graph outputs Y and the last states (Y_h, and Y_c for the LSTM), fwd_last's the last
states only.

    ort       onnxruntime.InferenceSession on the CPU provider, intra_op_num_threads = the row's
              threads, sequential execution. ORT's CPU provider has no float64 RNN, GRU or LSTM
              kernel: it is skipped there with a note (the error ORT logs on stderr for the GRU
              and LSTM is that probe's).
    openvino  ov.Core().compile_model(model, "CPU", {INFERENCE_PRECISION_HINT: f32,
              INFERENCE_NUM_THREADS: the row's threads, NUM_STREAMS: 1, PERFORMANCE_HINT:
              LATENCY}): its CPU plugin, whose RNN / GRU / LSTM sequences are oneDNN's kernels.
              f32 is asked for because its default on AMX machines is bf16. float32 only: the CPU
              plugin computes a float64 graph in lower precision (its results then miss float64's
              agreement tolerance by far), so it is skipped in float64 with a note, as it is where
              the openvino package is not installed.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.capi.onnxruntime_pybind11_state import NotImplemented as OrtNotImplemented
from onnxruntime.capi.onnxruntime_pybind11_state import RuntimeException as OrtRuntimeException

from bench.peers.compare.shapes import PeerUnavailable, Problem

try:
    import openvino
except ImportError:  # an optional peer: the run goes on without it, with a note
    openvino = None

# per cell: the ONNX operator, PyTorch's gate blocks in ONNX's order, the operator's attributes
ONNX_OPS = {
    "rnn": ("RNN", [0], {"activations": ["Tanh"]}),
    "gru": ("GRU", [1, 0, 2], {"linear_before_reset": 1}),
    "lstm": ("LSTM", [0, 3, 1, 2], {}),
}
STATE_OUTPUTS = {"h_n": "Y_h", "c_n": "Y_c"}


def onnx_order(p: Problem, w: np.ndarray) -> np.ndarray:
    """PyTorch's gate blocks of w (G*H rows) in ONNX's order."""
    _, order, _ = ONNX_OPS[p.cell.name]
    blocks = np.split(w, p.cell.gates)
    return np.concatenate([blocks[i] for i in order])


def onnx_model(p: Problem, with_sequences: bool) -> onnx.ModelProto:
    """The one-node graph of the problem's cell (module docstring)."""
    op, _, attributes = ONNX_OPS[p.cell.name]
    elem = TensorProto.DOUBLE if p.dtype == np.float64 else TensorProto.FLOAT
    bias = np.concatenate([onnx_order(p, p.b_ih), onnx_order(p, p.b_hh)])
    inits = [
        numpy_helper.from_array(onnx_order(p, p.w_ih)[None], "W"),
        numpy_helper.from_array(onnx_order(p, p.w_hh)[None], "R"),
        numpy_helper.from_array(bias[None], "B"),
    ]
    states = [STATE_OUTPUTS[s] for s in p.cell.states]
    outputs = [helper.make_tensor_value_info(s, elem, [1, p.B, p.H]) for s in states]
    if with_sequences:
        outputs.insert(0, helper.make_tensor_value_info("Y", elem, [p.T, 1, p.B, p.H]))
    node = helper.make_node(
        op,
        ["X", "W", "R", "B"],
        ["Y" if with_sequences else "", *states],
        hidden_size=p.H,
        **attributes,
    )
    graph = helper.make_graph(
        [node],
        p.cell.name,
        [helper.make_tensor_value_info("X", elem, [p.T, p.B, p.D])],
        outputs,
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8  # old enough for any onnxruntime that has opset 14
    return model


def graph_runners(p: Problem, session):
    """fwd_seq and fwd_last of a library that runs onnx_model's graphs: session(model) gives a
    function of x that returns the graph's outputs in order."""
    seq = session(onnx_model(p, with_sequences=True))
    last = session(onnx_model(p, with_sequences=False))

    def states(outs):
        return {name: out[0] for name, out in zip(p.cell.states, outs)}

    return {
        "fwd_seq": (lambda: seq(p.x), lambda r: {"y": r[0][:, 0], **states(r[1:])}),
        "fwd_last": (lambda: last(p.x), states),
    }


def ort_session(model: onnx.ModelProto, threads: int) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def ort_runners(p: Problem, threads: int):
    """Inference only. Raises PeerUnavailable where ORT cannot run this dtype."""

    def session(model):
        run = ort_session(model, threads).run
        return lambda x: run(None, {"X": x})

    try:
        runners = graph_runners(p, session)
        runners["fwd_seq"][0]()  # a missing kernel shows when the session is made, or runs
    except (OrtNotImplemented, OrtRuntimeException) as exc:
        # no float64 kernel in ORT's CPU provider: RNN has none (NotImplemented when the session
        # is made), GRU and LSTM refuse double when they run (RuntimeException, logged by ORT)
        first_line = str(exc).strip().splitlines()[0][:160]
        raise PeerUnavailable(
            f"ORT skipped for {p.cell.name} {p.dtype.name}: {type(exc).__name__}: {first_line}"
        ) from None
    return runners


_core = None


def openvino_core():
    """One openvino.Core for the whole run."""
    global _core
    if _core is None:
        _core = openvino.Core()
    return _core


def openvino_config(threads: int, precision: str = "f32") -> dict:
    """The CPU plugin's settings; precision "bf16" is bench.kernels.bf16_training's peer."""
    return {
        "INFERENCE_PRECISION_HINT": precision,
        "INFERENCE_NUM_THREADS": threads,
        "NUM_STREAMS": 1,
        "PERFORMANCE_HINT": "LATENCY",
    }


def openvino_runners(p: Problem, threads: int, precision: str = "f32"):
    """Inference only, float32 only (module docstring); precision: the INFERENCE_PRECISION_HINT
    (openvino_config)."""
    if openvino is None:
        raise PeerUnavailable("OpenVINO skipped: the openvino package is not installed")
    if p.dtype != np.float32:
        raise PeerUnavailable(
            f"OpenVINO skipped for {p.dtype.name}: its CPU plugin computes a {p.dtype.name} "
            "graph in lower precision"
        )
    core = openvino_core()

    def session(model):
        read = core.read_model(model.SerializeToString(), openvino.Tensor(np.empty(0, np.uint8)))
        compiled = core.compile_model(read, "CPU", openvino_config(threads, precision))
        request = compiled.create_infer_request()
        outputs = compiled.outputs

        def run(x):
            result = request.infer({0: x}, share_inputs=True)
            return [result[o] for o in outputs]

        return run

    return graph_runners(p, session)


def openvino_version() -> str | None:
    return None if openvino is None else openvino.__version__
