"""rnnfast: fast CPU Elman recurrent layers (forward and fused BPTT) for NumPy code.

Imported on first use, so that rnnfast itself needs neither: ``rnnfast.onnx`` (the module
``rnnfast.io.onnx``: ONNX export and load; the onnx package) and, by ``import rnnfast.torch``,
the PyTorch bridge (``rnnfast.torch.RNN``, a drop-in ``torch.nn.RNN`` on rnnfast's kernels).
"""

from __future__ import annotations

import os

# libgomp's idle threads spin for ~300,000 iterations after every parallel region before they
# sleep; between rnnfast calls that takes a core from NumPy's (or anyone's) threads, and code
# alternating the two ran 2x slower here. Our per-step barrier spins on its own, so a short idle
# spin costs the kernels nothing. Read when libgomp loads (with _core, below); a value already in
# the environment wins.
os.environ.setdefault("GOMP_SPINCOUNT", "10000")

from ._allocator import keep_freed_memory as _keep_freed_memory  # noqa: E402

_keep_freed_memory()

from . import (  # noqa: E402
    data,
    datasets,
    decoding,
    diagnostics,
    functional,
    io,
    losses,
    metrics,
    nn,
    optim,
    reference,
    training,
)
from ._config import get_num_threads, set_num_threads, show_config, threads  # noqa: E402
from ._parameters import writable_parameters  # noqa: E402
from ._threadpool import register as _register_with_threadpoolctl  # noqa: E402
from ._version import __version__  # noqa: E402
from .data import (  # noqa: E402
    lengths_to_mask,
    mask_to_lengths,
    pad_sequences,
    reverse_sequences,
    unpad_sequences,
)
from .io import interop, persistence  # noqa: E402  (rnnfast.interop, rnnfast.persistence)
from .nn import (  # noqa: E402
    GRU,
    LSTM,
    RNN,
    DeepTransitionRNN,
    Dense,
    Dropout,
    Embedding,
    GRUCell,
    JordanRNN,
    Layer,
    LayerNormLSTM,
    Linear,
    LSTMCell,
    Module,
    Seq2Seq,
    Sequential,
    Streams,
    seq2seq,
)
from .nn.files.persistence import load, save  # noqa: E402
from .quantize import quantize  # noqa: E402  (the function: rnnfast.quantize(model, mode))

_register_with_threadpoolctl()


def __getattr__(name):
    if name == "onnx":  # rnnfast.onnx is rnnfast.io.onnx (onnx.py), imported on first use
        import importlib

        return importlib.import_module(".onnx", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "RNN",
    "GRU",
    "LSTM",
    "LayerNormLSTM",
    "GRUCell",
    "LSTMCell",
    "JordanRNN",
    "DeepTransitionRNN",
    "Layer",
    "diagnostics",
    "Linear",
    "Dense",
    "Embedding",
    "Dropout",
    "Sequential",
    "Streams",
    "Module",
    "nn",
    "io",
    "interop",
    "persistence",
    "Seq2Seq",
    "seq2seq",
    "decoding",
    "losses",
    "metrics",
    "optim",
    "training",
    "save",
    "load",
    "writable_parameters",
    "quantize",
    "functional",
    "reference",
    "data",
    "datasets",
    "pad_sequences",
    "unpad_sequences",
    "mask_to_lengths",
    "lengths_to_mask",
    "reverse_sequences",
    "get_num_threads",
    "set_num_threads",
    "threads",
    "show_config",
    "__version__",
]
