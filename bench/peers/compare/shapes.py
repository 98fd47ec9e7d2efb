"""compare's shapes and cells: the grid of issue 3, the extra shapes outside it, the quick subsets,
the streaming shape, the --shapes syntax, the cells (Elman, GRU, LSTM), and the problem (inputs
and weights) built for one cell, shape and dtype."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

# (T, B, D, H): sequence length, batch, input size, hidden size
GRID = [
    (200, 1, 32, 64),
    (100, 16, 64, 128),
    (50, 64, 128, 256),
    (50, 32, 512, 512),
    (25, 64, 1024, 1024),
    (100, 1, 1024, 1024),
]
# Sizes off the grid, so that the kernels are not judged (or tuned) on the grid alone: H and B
# not multiples of the vector width or the register tile, D > H, B = 1 at another H, a large
# batch at H = 128 (a row of issue 13's table), an H above the grid's whose W_hh (9 MB in
# float32) outgrows the L2 cache. Kept small enough for the whole run to take about 10 minutes.
EXTRA = [
    (64, 8, 300, 300),
    (30, 24, 700, 700),
    (80, 48, 200, 96),
    (100, 128, 128, 128),
    (150, 1, 50, 200),
    (20, 24, 1500, 1500),
]
QUICK_GRID = [(200, 1, 32, 64), (100, 16, 64, 128), (50, 32, 512, 512)]
QUICK_EXTRA = [(64, 8, 300, 300)]
QUICK_FLOAT64_SUBSET = [(100, 16, 64, 128), (64, 8, 300, 300)]
# --quick runs the gated cells on these of its shapes only (a row of issue 23's table among them)
QUICK_GATED = [(100, 16, 64, 128), (64, 8, 300, 300)]
STREAMING_SHAPE = (200, 1, 32, 64)

MODES = ("fwd_seq", "fwd_last", "train")


def grads_named(dx, dweight_ih, dweight_hh, dbias_ih, dbias_hh) -> dict:
    """Gradients by the names every runner gives them for the agreement check (with "dh0" and
    "dc0" where a library returns them)."""
    return {
        "dx": dx,
        "dweight_ih": dweight_ih,
        "dweight_hh": dweight_hh,
        "dbias_ih": dbias_ih,
        "dbias_hh": dbias_hh,
    }


@dataclass(frozen=True)
class Cell:
    """A recurrent cell as compare runs it: its gate blocks, its states and torch's module.

    Weights are in PyTorch's layout and gate order (GRU r, z, n; LSTM i, f, g, o); each runner
    that needs another order (ONNX's) reorders them from that."""

    name: str
    gates: int  # blocks of H rows in weight_ih / weight_hh: 1, 3, 4
    states: tuple  # the state names a forward returns besides y
    torch_module: str  # torch.nn's class

    @property
    def gated(self) -> bool:
        return self.gates > 1


CELLS = {
    "rnn": Cell("rnn", 1, ("h_n",), "RNN"),
    "gru": Cell("gru", 3, ("h_n",), "GRU"),
    "lstm": Cell("lstm", 4, ("h_n", "c_n"), "LSTM"),
}


def parse_cells(text: str) -> list:
    """'rnn,gru' -> ['rnn', 'gru'], each a key of CELLS, in CELLS' order."""
    names = [name.strip().lower() for name in text.split(",")]
    unknown = [name for name in names if name not in CELLS]
    if unknown or not names:
        raise ValueError(f"--cells: expected some of {', '.join(CELLS)}, got {text!r}")
    return [name for name in CELLS if name in names]


def parse_shapes(text: str, option: str = "--shapes") -> list:
    """'200x1x32x64,50x32x512x512' -> [(200, 1, 32, 64), (50, 32, 512, 512)]."""
    shapes = []
    for item in text.split(","):
        parts = item.lower().split("x")
        if len(parts) != 4 or not all(v.isdigit() and int(v) > 0 for v in parts):
            raise ValueError(f"{option}: expected TxBxDxH with positive integers, got {item!r}")
        shapes.append(tuple(int(v) for v in parts))
    return shapes


def label(shape) -> str:
    """(200, 1, 32, 64) -> '200x1x32x64'."""
    return "x".join(map(str, shape))


def work_list(args) -> list:
    """(dtype, shape, cell) triples to run, in order: args.shapes in float32, then in float64,
    each shape in every cell of args.cells (the cells of a shape side by side).

    --dtype default runs both dtypes on every shape; under --quick, float64 only on
    QUICK_FLOAT64_SUBSET. The gated cells run on args.gated_shapes (all of args.shapes, but
    QUICK_GATED's under a --quick run of the default shapes)."""
    both = [s for s in args.shapes if s in QUICK_FLOAT64_SUBSET] if args.quick else args.shapes
    f64 = {"default": both, "float32": [], "float64": args.shapes, "both": args.shapes}[args.dtype]
    f32 = [] if args.dtype == "float64" else args.shapes
    return [
        (dtype, shape, cell)
        for dtype, shapes in ((np.float32, f32), (np.float64, f64))
        for shape in shapes
        for cell in args.cells
        if cell == "rnn" or shape in args.gated_shapes
    ]


def on_grid(shape) -> bool:
    """Whether a shape is one of issue 3's grid (the others are EXTRA or given by --shapes)."""
    return tuple(shape) in GRID


@dataclass
class Problem:
    """One cell, shape and dtype: the inputs and the torch module whose weights everyone uses
    (w_ih (G*H, D), w_hh (G*H, H), the biases (G*H,), G = the cell's gates)."""

    T: int
    B: int
    D: int
    H: int
    dtype: np.dtype
    x: np.ndarray
    w_ih: np.ndarray
    w_hh: np.ndarray
    b_ih: np.ndarray
    b_hh: np.ndarray
    dy: np.ndarray
    module: torch.nn.Module
    cell: Cell = CELLS["rnn"]

    @property
    def shape(self):
        return (self.T, self.B, self.D, self.H)

    @property
    def label(self):
        return label(self.shape)


class PeerUnavailable(Exception):
    """A peer cannot run a Problem (not installed, no kernel for its dtype); the message is the
    note the report gives, e.g. 'OpenVINO skipped for float64: ...'."""


def make_problem(shape, dtype, seed=0, cell="rnn") -> Problem:
    """torch.nn.RNN's (GRU's, LSTM's) initial weights for the shape, a standard normal x and
    dy = ones."""
    T, B, D, H = shape
    torch.manual_seed(seed)
    torch_dtype = torch.float64 if dtype == np.float64 else torch.float32
    module = getattr(torch.nn, CELLS[cell].torch_module)(D, H).to(torch_dtype)  # tanh
    state = {k: v.detach().numpy() for k, v in module.state_dict().items()}
    x = np.random.default_rng(seed).standard_normal((T, B, D)).astype(dtype)
    return Problem(
        T,
        B,
        D,
        H,
        np.dtype(dtype),
        x,
        state["weight_ih_l0"],
        state["weight_hh_l0"],
        state["bias_ih_l0"],
        state["bias_hh_l0"],
        np.ones((T, B, H), dtype),
        module,
        CELLS[cell],
    )


def forward_flops(p: Problem) -> int:
    """2*T*B*(D*H + H*H) per gate block (GRU 3x, LSTM 4x the Elman cell's): the input
    projection and the recurrent product of every step; the gates' elementwise work is not
    counted."""
    return 2 * p.T * p.B * (p.D * p.H + p.H * p.H) * p.cell.gates


def mode_flops(p: Problem, mode: str) -> int:
    """A mode's FLOPs: training (forward + backward) counts 3x the forward."""
    return 3 * forward_flops(p) if mode == "train" else forward_flops(p)
