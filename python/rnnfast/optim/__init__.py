"""Optimizers, gradient clipping and learning-rate schedules for rnnfast modules.

The update rules are PyTorch's (``torch.optim.SGD``, ``Adam``, ``AdamW``, ``RMSprop`` and
``torch.optim.lr_scheduler``; Keras's epsilon, which enters elsewhere, by its own keyword
``epsilon``), written as whole-array NumPy operations that change the parameter arrays in
place, in their own dtype. An optimizer reads the gradients a module's
``backward`` accumulated in ``module.grads``; a training step is::

    opt = Adam(layer, lr=1e-3)
    layer.zero_grad()            # or opt.zero_grad()
    y, h_n = layer(x)
    layer.backward(dy)
    clip_grad_norm(layer, 1.0)
    opt.step()

``params`` (of the optimizers and the clipping functions) is a module (anything with
``named_parameters()`` and ``grads``), a list of modules, or a list of ``(param, grad)`` array
pairs. Parameters are updated through the very arrays the module holds, so a module must update
its parameters in place (``RNN.load_state_dict`` does) for an optimizer built before to see them.
"""

from __future__ import annotations

from .adam import Adam, AdamW
from .clipping import clip_grad_norm, clip_grad_value
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .schedules import CosineAnnealingLR, ReduceLROnPlateau, StepLR
from .sgd import SGD

__all__ = [
    "SGD",
    "Adam",
    "AdamW",
    "CosineAnnealingLR",
    "Optimizer",
    "RMSprop",
    "ReduceLROnPlateau",
    "StepLR",
    "clip_grad_norm",
    "clip_grad_value",
]
