"""Keras's ``keras.models`` names on the front: ``load_model`` (a ``.keras`` file) and
``Sequential``, so ``from rnnfast.keras.models import load_model`` runs as written."""

from __future__ import annotations

from .model import Sequential
from .saving import load_model

__all__ = ["Sequential", "load_model"]
