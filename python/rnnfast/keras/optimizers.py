"""Keras's optimizers by Keras's names and defaults, built on ``rnnfast.optim`` when the model's
weights exist: ``compile(optimizer="adam")`` is ``compile(optimizer=Adam())``.

Each takes Keras's common keywords too: ``clipnorm``, ``global_clipnorm``, ``clipvalue`` and
``weight_decay`` (applied around rnnfast's step as Keras applies them, see ``_stepper``);
Keras's other ones (``use_ema``, ``loss_scale_factor``, ``gradient_accumulation_steps``, a
learning-rate schedule) raise, naming the argument. A ``keras.optimizers`` object given to
``compile`` is read through its ``get_config()`` into one of these (``_keras_objects``).

Keras's epsilon enters elsewhere than PyTorch's ``eps``; rnnfast's optimizers take it as
``epsilon`` (with ``eps=0``), so these are Keras's update rules, not approximations of them.
"""

from __future__ import annotations

from .. import optim
from .._validation import check_bool, check_real_at_least, check_real_in
from ._keras_objects import is_keras_object, optimizer_from_config, optimizer_from_keras
from ._stepper import KerasStep

__all__ = ["SGD", "Adam", "AdamW", "Optimizer", "RMSprop", "from_config", "get"]


def _positive_or_none(name, value):
    return None if value is None else check_real_at_least(name, value, 0)


class Optimizer:
    """An optimizer's Keras arguments; ``build(params)`` makes the ``rnnfast.optim`` optimizer
    over a model's parameters, wrapped in Keras's clipping and weight decay.

    Parameters (every optimizer's)
    ------------------------------
    clipnorm, global_clipnorm, clipvalue : float, optional
        Keras's gradient clipping (at most one of them: Keras uses the first set).
    weight_decay : float, optional
        Keras's decoupled weight decay.
    name : str, optional
        Keras's; kept for ``get_config``.
    """

    def _common(self, learning_rate, clipnorm, global_clipnorm, clipvalue, weight_decay, name):
        """Every optimizer's arguments, checked in this order: Keras's common keywords, then
        the learning rate (before the optimizer's own)."""
        self.clipnorm = _positive_or_none("clipnorm", clipnorm)
        self.global_clipnorm = _positive_or_none("global_clipnorm", global_clipnorm)
        self.clipvalue = _positive_or_none("clipvalue", clipvalue)
        if self.clipnorm is not None and self.global_clipnorm is not None:
            raise ValueError(
                "clipnorm, global_clipnorm: only one of them can be set (as in Keras); pick one"
            )
        self.weight_decay = _positive_or_none("weight_decay", weight_decay)
        if name is not None and not isinstance(name, str):
            raise TypeError(f"name: expected a str, got {type(name).__name__}")
        self.name = type(self).__name__.lower() if name is None else name
        self.learning_rate = check_real_at_least("learning_rate", learning_rate, 0)

    def build(self, params):
        """The ``rnnfast.optim`` optimizer over ``params`` with Keras's clipping and decay."""
        return KerasStep(
            self._rule(params),
            clipnorm=self.clipnorm,
            global_clipnorm=self.global_clipnorm,
            clipvalue=self.clipvalue,
            weight_decay=self.weight_decay,
            name=self.name,
        )

    def _rule(self, params):  # pragma: no cover - every subclass overrides it
        raise NotImplementedError

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({args})"


class SGD(Optimizer):
    """Keras's ``SGD(learning_rate=0.01, momentum=0.0, nesterov=False)``: ``rnnfast.optim.SGD``
    (the same steps for a constant learning rate: Keras's velocity is -lr times PyTorch's
    momentum buffer)."""

    def __init__(
        self,
        learning_rate=0.01,
        momentum=0.0,
        nesterov=False,
        *,
        clipnorm=None,
        global_clipnorm=None,
        clipvalue=None,
        weight_decay=None,
        name=None,
    ):
        self._common(learning_rate, clipnorm, global_clipnorm, clipvalue, weight_decay, name)
        self.momentum = check_real_in("momentum", momentum, 0, 1)
        self.nesterov = check_bool("nesterov", nesterov)

    def _rule(self, params):
        return optim.SGD(
            params, lr=self.learning_rate, momentum=self.momentum, nesterov=self.nesterov
        )


class Adam(Optimizer):
    """Keras's ``Adam(learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7)``:
    ``rnnfast.optim.Adam(lr, betas=(beta_1, beta_2), eps=0.0, epsilon=epsilon)``."""

    def __init__(
        self,
        learning_rate=0.001,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-7,
        *,
        clipnorm=None,
        global_clipnorm=None,
        clipvalue=None,
        weight_decay=None,
        name=None,
    ):
        self._common(learning_rate, clipnorm, global_clipnorm, clipvalue, weight_decay, name)
        self.beta_1 = check_real_in("beta_1", beta_1, 0, 1, high_open=True)
        self.beta_2 = check_real_in("beta_2", beta_2, 0, 1, high_open=True)
        self.epsilon = check_real_at_least("epsilon", epsilon, 0)

    def _rule(self, params):
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

    def __init__(
        self,
        learning_rate=0.001,
        rho=0.9,
        momentum=0.0,
        epsilon=1e-7,
        centered=False,
        *,
        clipnorm=None,
        global_clipnorm=None,
        clipvalue=None,
        weight_decay=None,
        name=None,
    ):
        self._common(learning_rate, clipnorm, global_clipnorm, clipvalue, weight_decay, name)
        self.rho = check_real_in("rho", rho, 0, 1)
        self.momentum = check_real_at_least("momentum", momentum, 0)
        self.epsilon = check_real_at_least("epsilon", epsilon, 0)
        self.centered = check_bool("centered", centered)

    def _rule(self, params):
        return optim.RMSprop(
            params,
            lr=self.learning_rate,
            alpha=self.rho,
            eps=0.0,
            momentum=self.momentum,
            centered=self.centered,
            epsilon=self.epsilon,
        )


class AdamW(Adam):
    """Keras's ``AdamW(learning_rate=0.001, weight_decay=0.004, beta_1=0.9, beta_2=0.999,
    epsilon=1e-7)``: Adam with Keras's decoupled weight decay."""

    def __init__(
        self,
        learning_rate=0.001,
        weight_decay=0.004,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-7,
        **kwargs,
    ):
        super().__init__(
            learning_rate, beta_1, beta_2, epsilon, weight_decay=weight_decay, **kwargs
        )


_BY_NAME = {"sgd": SGD, "adam": Adam, "adamw": AdamW, "rmsprop": RMSprop}
_BY_CLASS = {cls.__name__: cls for cls in _BY_NAME.values()}


def from_config(class_name, config):
    """The optimizer of a Keras optimizer's class name and config (a ``.keras`` file's)."""
    class_name, kwargs = optimizer_from_config(class_name, config)
    return _BY_CLASS[class_name](**kwargs)


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
    if is_keras_object(identifier):  # keras.optimizers.Adam(...): read through its config
        class_name, kwargs = optimizer_from_keras(identifier)
        return _BY_CLASS[class_name](**kwargs)
    raise TypeError(
        "optimizer: expected 'adam', 'sgd', 'rmsprop', 'adamw', an optimizer of keras.optimizers, "
        f"rnnfast.keras.optimizers or rnnfast.optim, got {type(identifier).__name__}"
    )
