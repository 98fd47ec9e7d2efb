"""rnnfast: fast CPU Elman recurrent layers (forward and fused BPTT) for NumPy code."""

from __future__ import annotations

from . import functional, reference
from ._config import get_num_threads, set_num_threads, show_config, threads
from .rnn import RNN

__version__ = "0.1.0"

__all__ = [
    "RNN",
    "functional",
    "reference",
    "get_num_threads",
    "set_num_threads",
    "threads",
    "show_config",
    "__version__",
]
