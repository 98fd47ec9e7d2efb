"""The one refusal every quantized inference copy gives to training: ``backward``,
``train()``, gradients and optimizers raise the same RuntimeError, which names the copy and says
what to do instead. (No imports: containers and layers alike use it.)"""

from __future__ import annotations

__all__ = ["refuse_training"]


def refuse_training(model, what):
    """RuntimeError for ``what`` (``"backward"``, ``"train"``, ...) if ``model`` is a quantized
    inference copy (its ``quantized`` attribute names the mode); nothing otherwise."""
    mode = getattr(model, "quantized", None)
    if mode is None:
        return
    raise RuntimeError(
        f"{what}: this {type(model).__name__} is a quantized ({mode}) inference copy made by "
        "rnnfast.quantize; it has no float weights or gradients and cannot be trained: train "
        "the float32 model, then quantize it again"
    )
