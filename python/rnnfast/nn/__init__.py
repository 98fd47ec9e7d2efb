"""Layers and containers (the package layout's ``rnnfast.nn``): the general container
``Module`` and how padding travels through models (``masking``). The layers themselves move here
with the architecture issue; until then they live in ``rnnfast.rnn`` and ``rnnfast.layers``."""

from .masking import PaddingWarning
from .module import Module

__all__ = ["Module", "PaddingWarning"]
