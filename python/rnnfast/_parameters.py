"""What every layer does the same way with its parameters (a dict ``_params`` of live arrays
and a dict ``grads`` of gradients under the same names) and its mode (``training``, and the
forward's ``_cache`` that only a training forward keeps)."""

from __future__ import annotations

__all__ = ["ParameterOwner"]


class ParameterOwner:
    """Mixin for layers that keep ``self._params``, ``self.grads``, ``self.training`` and
    ``self._cache``."""

    def parameters(self):
        """The live parameter arrays, in state_dict order (optimizers update them in place)."""
        return list(self._params.values())

    def named_parameters(self):
        return list(self._params.items())

    def zero_grad(self):
        for g in self.grads.values():
            g.fill(0)

    def state_dict(self):
        """Copies of the parameters under their names (PyTorch's, for RNN)."""
        return {name: p.copy() for name, p in self._params.items()}

    def train(self, mode=True):
        """Training mode (forwards keep what backward needs) or, with False, eval mode."""
        self.training = bool(mode)
        if not self.training:
            self._cache = None
        return self

    def eval(self):
        return self.train(False)
