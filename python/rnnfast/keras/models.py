"""Keras's ``keras.models`` names on the front: ``load_model`` (a ``.keras`` file), and
``Sequential`` too, so ``from rnnfast.keras.models import load_model, Sequential`` runs as
written (``Sequential`` is documented with ``rnnfast.keras``)."""

from __future__ import annotations

from .model import Sequential  # noqa: F401 - Keras's path to it
from .saving import load_model

__all__ = ["load_model"]
