"""What Keras's optimizers do to the gradients and weights around the update rule, for the
front's optimizers: ``clipnorm`` (each gradient's own norm), ``global_clipnorm`` (all of them
together), ``clipvalue`` (each element) and ``weight_decay`` (decoupled: every weight shrinks
by ``learning_rate * weight_decay`` before the step), in Keras 3's order; and
``learning_rate`` as a settable attribute, which Keras's callbacks (``ReduceLROnPlateau``,
``LearningRateScheduler``) read and write.

The update rule itself is ``rnnfast.optim``'s (built without weight decay: Keras's decay is
applied here, the same for every optimizer, as Keras's ``BaseOptimizer.apply`` does).
"""

from __future__ import annotations

import math

import numpy as np

from .._parameters import writable_parameters
from .._validation import check_real_at_least

__all__ = ["KerasStep"]


class KerasStep:
    """An ``rnnfast.optim`` optimizer (``inner``) run as a Keras optimizer: the gradients
    clipped and the weights decayed before each of its steps.

    Everything else (``zero_grad``, ``state_dict``, ``slots``, ``lr``, ...) is the inner
    optimizer's.
    """

    def __init__(
        self,
        inner,
        *,
        clipnorm=None,
        global_clipnorm=None,
        clipvalue=None,
        weight_decay=None,
        name="optimizer",
    ):
        self.inner = inner
        self.clipnorm = clipnorm
        self.global_clipnorm = global_clipnorm
        self.clipvalue = clipvalue
        self.weight_decay = weight_decay
        self.name = name

    @property
    def learning_rate(self):
        """The learning rate (Keras's name for ``lr``); set it between steps as Keras's
        callbacks do."""
        return self.inner.lr

    @learning_rate.setter
    def learning_rate(self, value):
        value = getattr(value, "item", lambda: value)()  # a NumPy or torch scalar
        self.inner.lr = check_real_at_least("learning_rate", value, 0)

    def step(self):
        grads = [np.asarray(g) for g in self.inner.current_grads()]
        self._clip(grads)
        if self.weight_decay:  # decoupled (AdamW's): on the weights, before the step
            shrink = 1.0 - self.inner.lr * self.weight_decay
            params = [slot.param for slot in self.inner.slots]
            with writable_parameters(params):  # the layers repack after it
                for param in params:
                    param *= param.dtype.type(shrink)
        self.inner.step()

    def _variables(self, grads):
        """The gradients grouped as Keras's variables: a GRU with ``reset_after`` keeps its two
        biases in one Keras variable (2, 3H), rnnfast in two arrays (``bias_ih_*``,
        ``bias_hh_*``), and clipnorm clips a variable by its own norm."""
        names = [slot.name for slot in self.inner.slots]
        index = {name: i for i, name in enumerate(names)}
        groups, taken = [], set()
        for i, name in enumerate(names):
            if i in taken:
                continue
            group = [i]
            partner = index.get(name.replace("bias_ih", "bias_hh")) if "bias_ih" in name else None
            if partner is not None:
                group.append(partner)
            taken.update(group)
            groups.append([grads[j] for j in group])
        return groups

    def _clip(self, grads):
        # Keras's _clip_gradients: the first of clipnorm, global_clipnorm, clipvalue that is set
        if self.clipnorm:
            for group in self._variables(grads):
                norm = math.sqrt(sum(float(np.sum(np.square(g, dtype=np.float64))) for g in group))
                if norm > self.clipnorm:
                    for g in group:
                        g *= g.dtype.type(self.clipnorm / norm)
        elif self.global_clipnorm:
            norm = math.sqrt(sum(float(np.sum(np.square(g, dtype=np.float64))) for g in grads))
            if norm > self.global_clipnorm:
                for g in grads:
                    g *= g.dtype.type(self.global_clipnorm / norm)
        elif self.clipvalue:
            for g in grads:
                np.clip(g, -self.clipvalue, self.clipvalue, out=g)

    def __getattr__(self, name):
        # only reached for what this wrapper does not define: the inner optimizer's
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def __repr__(self):
        return f"<KerasStep {self.name} over {type(self.inner).__name__}>"
