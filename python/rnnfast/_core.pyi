# Type stub of the compiled module rnnfast._core (private; use the rnnfast package).
import numpy as np
import numpy.typing as npt

compiler: str

def rnn_forward(
    x: npt.NDArray[np.floating],
    h0: npt.NDArray[np.floating] | None,
    weight_ih: npt.NDArray[np.floating],
    weight_hh: npt.NDArray[np.floating],
    bias_ih: npt.NDArray[np.floating] | None,
    bias_hh: npt.NDArray[np.floating] | None,
    lengths: npt.NDArray[np.int64] | None,
    nonlinearity: str,
    alpha: float,
    return_sequences: bool,
    ids: npt.NDArray[np.int64] | None = None,
    *,
    step_mask: npt.NDArray[np.uint8] | None = None,
    zero_output_for_mask: bool = False,
    recurrent_mask: npt.NDArray[np.floating] | None = None,
) -> tuple[npt.NDArray[np.floating] | None, npt.NDArray[np.floating]]: ...
def rnn_backward(
    x: npt.NDArray[np.floating],
    h0: npt.NDArray[np.floating] | None,
    weight_ih: npt.NDArray[np.floating],
    weight_hh: npt.NDArray[np.floating],
    y: npt.NDArray[np.floating],
    dy: npt.NDArray[np.floating] | None,
    dh_n: npt.NDArray[np.floating] | None,
    lengths: npt.NDArray[np.int64] | None,
    nonlinearity: str,
    alpha: float,
    ids: npt.NDArray[np.int64] | None = None,
    *,
    step_mask: npt.NDArray[np.uint8] | None = None,
    zero_output_for_mask: bool = False,
    recurrent_mask: npt.NDArray[np.floating] | None = None,
    input_gradient: bool = True,
) -> tuple[npt.NDArray[np.floating] | None, ...]: ...
def deep_forward(
    x: npt.NDArray[np.floating],
    h0: npt.NDArray[np.floating] | None,
    weight_ih: npt.NDArray[np.floating],
    weight_hh: npt.NDArray[np.floating],
    bias_ih: npt.NDArray[np.floating] | None,
    bias_hh: npt.NDArray[np.floating] | None,
    weight_tr: npt.NDArray[np.floating],
    bias_tr: npt.NDArray[np.floating] | None,
    lengths: npt.NDArray[np.int64] | None,
    nonlinearity: str,
) -> tuple[npt.NDArray[np.floating], npt.NDArray[np.floating], npt.NDArray[np.floating]]: ...
def deep_backward(
    x: npt.NDArray[np.floating],
    h0: npt.NDArray[np.floating] | None,
    weight_ih: npt.NDArray[np.floating],
    weight_hh: npt.NDArray[np.floating],
    weight_tr: npt.NDArray[np.floating],
    y: npt.NDArray[np.floating],
    workspace: npt.NDArray[np.floating],
    dy: npt.NDArray[np.floating] | None,
    dh_n: npt.NDArray[np.floating] | None,
    lengths: npt.NDArray[np.int64] | None,
    nonlinearity: str,
    input_gradient: bool,
) -> tuple[npt.NDArray[np.floating] | None, ...]: ...
def gated_forward(
    cell: str,
    x: npt.NDArray[np.floating],
    h0: npt.NDArray[np.floating] | None,
    c0: npt.NDArray[np.floating] | None,
    weight_ih: npt.NDArray[np.floating],
    weight_hh: npt.NDArray[np.floating],
    bias_ih: npt.NDArray[np.floating] | None,
    bias_hh: npt.NDArray[np.floating] | None,
    weight_hr: npt.NDArray[np.floating] | None,
    lengths: npt.NDArray[np.int64] | None,
    activation: str,
    recurrent_activation: str,
    return_sequences: bool,
    keep_workspace: bool,
) -> tuple[npt.NDArray[np.floating] | None, ...]: ...
def gated_backward(
    cell: str,
    x: npt.NDArray[np.floating],
    h0: npt.NDArray[np.floating] | None,
    c0: npt.NDArray[np.floating] | None,
    weight_ih: npt.NDArray[np.floating],
    weight_hh: npt.NDArray[np.floating],
    weight_hr: npt.NDArray[np.floating] | None,
    y: npt.NDArray[np.floating],
    workspace: npt.NDArray[np.floating],
    dy: npt.NDArray[np.floating] | None,
    dh_n: npt.NDArray[np.floating] | None,
    dc_n: npt.NDArray[np.floating] | None,
    lengths: npt.NDArray[np.int64] | None,
    activation: str,
    recurrent_activation: str,
    input_gradient: bool,
) -> tuple[npt.NDArray[np.floating] | None, ...]: ...
def recurrent_cells() -> list[str]: ...
def rnn_step(
    x_t: npt.NDArray[np.floating],
    h: npt.NDArray[np.floating],
    weight_ih: npt.NDArray[np.floating],
    weight_hh: npt.NDArray[np.floating],
    bias_ih: npt.NDArray[np.floating] | None,
    bias_hh: npt.NDArray[np.floating] | None,
    nonlinearity: str,
    alpha: float,
) -> npt.NDArray[np.floating]: ...
def dense_forward(
    x: npt.NDArray[np.floating],
    weight: npt.NDArray[np.floating],
    bias: npt.NDArray[np.floating] | None,
) -> npt.NDArray[np.floating]: ...
def dense_backward(
    x: npt.NDArray[np.floating],
    weight: npt.NDArray[np.floating],
    dy: npt.NDArray[np.floating],
    dweight: npt.NDArray[np.floating],
) -> npt.NDArray[np.floating]: ...
def embedding_backward(
    ids: npt.NDArray[np.int64],
    rows: npt.NDArray[np.floating],
    dweight: npt.NDArray[np.floating],
) -> None: ...
def softmax_cross_entropy(
    logits: npt.NDArray[np.floating],
    targets: npt.NDArray[np.int64],
    weights: npt.NDArray[np.floating],
) -> tuple[float, npt.NDArray[np.floating]]: ...
def adam_update(
    param: npt.NDArray[np.floating],
    grad: npt.NDArray[np.floating],
    exp_avg: npt.NDArray[np.floating],
    exp_avg_sq: npt.NDArray[np.floating],
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
    decoupled: bool,
    step_size: float,
    bias2_sqrt: float,
) -> None: ...
def compiled_isas() -> list[str]: ...
def supported_isas() -> list[str]: ...
def active_isa() -> str: ...
def isa_note() -> str: ...
def set_active_isa(name: str) -> None: ...
def get_num_threads() -> int: ...
def set_num_threads(n: int) -> None: ...
def openmp_enabled() -> bool: ...
def helper_threads_in_use() -> int: ...
def peak_helper_threads(reset: bool = False) -> int: ...
def contention_backoff_seconds() -> float: ...
def clear_contention_backoff() -> None: ...

# ---- quantized inference (issue 16) ------------------------------------------------------------
class QuantizedMatrix:
    """int8 (per-row scales) or bf16 weights (N, K), packed once; not picklable."""

    def __init__(
        self,
        kind: str,
        data: npt.NDArray[np.int8] | npt.NDArray[np.uint16],
        scale: npt.NDArray[np.float32] | None,
        gates: int = 1,
    ) -> None: ...
    @property
    def kind(self) -> str: ...
    @property
    def gates(self) -> int: ...
    @property
    def rows(self) -> int: ...
    @property
    def cols(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def path(self) -> str: ...

def quantized_dense(
    x: npt.NDArray[np.float32], w: QuantizedMatrix, bias: npt.NDArray[np.float32] | None
) -> npt.NDArray[np.float32]: ...
def quantized_rnn_forward(
    x: npt.NDArray[np.float32],
    h0: npt.NDArray[np.float32] | None,
    w_ih: QuantizedMatrix,
    w_hh: QuantizedMatrix,
    bias: npt.NDArray[np.float32] | None,
    lengths: npt.NDArray[np.int64] | None,
    nonlinearity: str,
    alpha: float,
    return_sequences: bool,
) -> tuple[npt.NDArray[np.float32] | None, npt.NDArray[np.float32]]: ...
def quantized_rnn_step(
    x_t: npt.NDArray[np.float32],
    h: npt.NDArray[np.float32],
    w_ih: QuantizedMatrix,
    w_hh: QuantizedMatrix,
    bias: npt.NDArray[np.float32] | None,
    nonlinearity: str,
    alpha: float,
) -> npt.NDArray[np.float32]: ...
def quantized_gated_forward(
    cell: str,
    x: npt.NDArray[np.float32],
    h0: npt.NDArray[np.float32] | None,
    c0: npt.NDArray[np.float32] | None,
    weight_ih: QuantizedMatrix,
    weight_hh: QuantizedMatrix,
    weight_hn: QuantizedMatrix | None,
    weight_hr: QuantizedMatrix | None,
    bias_ih: npt.NDArray[np.float32] | None,
    bias_hh: npt.NDArray[np.float32] | None,
    lengths: npt.NDArray[np.int64] | None,
    activation: str,
    recurrent_activation: str,
    return_sequences: bool,
) -> tuple[
    npt.NDArray[np.float32] | None, npt.NDArray[np.float32], npt.NDArray[np.float32] | None
]: ...
def quantize_rows(
    x: npt.NDArray[np.float32],
) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.float32]]: ...
def quantized_matmul_int32(
    qa: npt.NDArray[np.int8], w: QuantizedMatrix
) -> npt.NDArray[np.int32]: ...
def quantized_paths(kind: str | None = None) -> list[str]: ...
def quantized_path(kind: str) -> str: ...
def set_quantized_path(name: str) -> None: ...
