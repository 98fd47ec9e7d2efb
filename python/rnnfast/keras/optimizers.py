"""Keras's optimizers by Keras's names and defaults, built on ``rnnfast.optim`` when the model's
weights exist: ``compile(optimizer="adam")`` is ``compile(optimizer=Adam())``.

Keras's epsilon enters elsewhere than PyTorch's ``eps``; rnnfast's optimizers take it as
``epsilon`` (with ``eps=0``), so these are Keras's update rules, not approximations of them.
"""

from __future__ import annotations

from .. import optim
from .._validation import check_bool, check_real_at_least, check_real_in

__all__ = ["SGD", "Adam", "Optimizer", "RMSprop", "get"]


class Optimizer:
    """An optimizer's Keras arguments; ``build(params)`` makes the ``rnnfast.optim`` optimizer
    over a model's parameters."""

    def build(self, params):  # pragma: no cover - every subclass overrides it
        raise NotImplementedError

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({args})"


class SGD(Optimizer):
    """Keras's ``SGD(learning_rate=0.01, momentum=0.0, nesterov=False)``: ``rnnfast.optim.SGD``
    (the same steps for a constant learning rate: Keras's velocity is -lr times PyTorch's
    momentum buffer)."""

    def __init__(self, learning_rate=0.01, momentum=0.0, nesterov=False):
        self.learning_rate = check_real_at_least("learning_rate", learning_rate, 0)
        self.momentum = check_real_in("momentum", momentum, 0, 1)
        self.nesterov = check_bool("nesterov", nesterov)

    def build(self, params):
        return optim.SGD(
            params, lr=self.learning_rate, momentum=self.momentum, nesterov=self.nesterov
        )


class Adam(Optimizer):
    """Keras's ``Adam(learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7)``:
    ``rnnfast.optim.Adam(lr, betas=(beta_1, beta_2), eps=0.0, epsilon=epsilon)``."""

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7):
        self.learning_rate = check_real_at_least("learning_rate", learning_rate, 0)
        self.beta_1 = check_real_in("beta_1", beta_1, 0, 1, high_open=True)
        self.beta_2 = check_real_in("beta_2", beta_2, 0, 1, high_open=True)
        self.epsilon = check_real_at_least("epsilon", epsilon, 0)

    def build(self, params):
        return optim.Adam(
            params,
            lr=self.learning_rate,
            betas=(self.beta_1, self.beta_2),
            eps=0.0,
            epsilon=self.epsilon,
        )


class RMSprop(Optimizer):
    """Keras's ``RMSprop(learning_rate=0.001, rho=0.9, momentum=0.0, epsilon=1e-7,
    centered=False)``: ``rnnfast.optim.RMSprop(lr, alpha=rho, eps=0.0, epsilon=epsilon,
    momentum, centered)``."""

    def __init__(self, learning_rate=0.001, rho=0.9, momentum=0.0, epsilon=1e-7, centered=False):
        self.learning_rate = check_real_at_least("learning_rate", learning_rate, 0)
        self.rho = check_real_in("rho", rho, 0, 1)
        self.momentum = check_real_at_least("momentum", momentum, 0)
        self.epsilon = check_real_at_least("epsilon", epsilon, 0)
        self.centered = check_bool("centered", centered)

    def build(self, params):
        return optim.RMSprop(
            params,
            lr=self.learning_rate,
            alpha=self.rho,
            eps=0.0,
            momentum=self.momentum,
            centered=self.centered,
            epsilon=self.epsilon,
        )


_BY_NAME = {"sgd": SGD, "adam": Adam, "rmsprop": RMSprop}


def get(identifier):
    """The optimizer of ``compile(optimizer=...)``: a name ("adam", "sgd", "rmsprop": Keras's
    defaults), an optimizer of this module, or an ``rnnfast.optim`` optimizer (already over the
    model's parameters), returned as given."""
    if isinstance(identifier, str):
        key = identifier.lower()
        if key not in _BY_NAME:
            raise ValueError(
                f"optimizer: expected one of {sorted(_BY_NAME)}, an optimizer of "
                f"rnnfast.keras.optimizers or of rnnfast.optim, got {identifier!r}"
            )
        return _BY_NAME[key]()
    if isinstance(identifier, (Optimizer, optim.Optimizer)):
        return identifier
    raise TypeError(
        "optimizer: expected 'adam', 'sgd', 'rmsprop', an optimizer of rnnfast.keras.optimizers "
        f"or of rnnfast.optim, got {type(identifier).__name__}"
    )
