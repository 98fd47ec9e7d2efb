"""What every container does the same way over its children (Sequential's layers, a Module's
attributes, Seq2Seq's parts): parameters and gradients under prefixed names ("0.weight",
"rnn.weight_ih_l0"), zero_grad, state dicts loaded all or nothing, the training mode, the
parameter counts, and the mark of a quantized copy. A container is a layer (``Layer``): it
nests in other containers, saves, loads and quantizes through the same protocol."""

from __future__ import annotations

import numpy as np

from .._state_dict import check_state_dict_keys
from ._inference_only import refuse_training
from ._layer import Layer

__all__ = ["ChildOwner"]


class ChildOwner(Layer):
    """Base of the containers: they define ``named_children() -> [(prefix, layer), ...]`` and
    keep ``self.training``; ``_forget_forward()`` drops what a training forward kept (optional).
    (They keep no parameters of their own, so they do not call ``Layer.__init__``.)"""

    def named_parameters(self):
        return [
            (f"{prefix}.{name}", p)
            for prefix, child in self.named_children()
            for name, p in child.named_parameters()
        ]

    def parameters(self):
        return [p for _, p in self.named_parameters()]

    @property
    def grads(self):
        """The children's live gradient arrays under this model's parameter names."""
        return {
            f"{prefix}.{name}": g
            for prefix, child in self.named_children()
            for name, g in child.grads.items()
        }

    def zero_grad(self):
        for _, child in self.named_children():
            child.zero_grad()

    def backward_runs_children(self):
        """Whether this container's ``backward`` only runs its children's, each once, and
        leaves their gradients alone after: then a child's gradients are complete when its
        backward returns, and data-parallel training (``rnnfast.distributed``) starts reducing
        them while the children below are still in theirs. False here: a container with a
        backward of its own (Seq2Seq) is one whole."""
        return False

    def children_run_by(self, child):
        """The children whose forward and backward ``child`` ran inside its own in the last
        forward (their gradients are complete when ``child``'s backward returns): none here."""
        return ()

    def state_dict(self):
        return {
            f"{prefix}.{name}": v
            for prefix, child in self.named_children()
            for name, v in child.state_dict().items()
        }

    def load_state_dict(self, state_dict):
        """Checks every key and shape first; on an error nothing changes."""
        expected = self.state_dict()
        check_state_dict_keys(state_dict, expected)
        for key, current in expected.items():
            shape = np.shape(state_dict[key])
            if shape != current.shape:
                raise ValueError(f"{key}: expected shape {current.shape}, got shape {shape}")
        named = self.named_children()
        previous = [child.state_dict() for _, child in named]
        try:
            for prefix, child in named:
                start = f"{prefix}."
                child.load_state_dict(
                    {k[len(start) :]: v for k, v in state_dict.items() if k.startswith(start)}
                )
        except BaseException:
            for (_, child), values in zip(named, previous):
                child.load_state_dict(values)
            raise

    def train(self, mode=True):
        if mode:
            refuse_training(self, "train")
        self.training = bool(mode)
        for _, child in self.named_children():
            child.train(mode)
        if not self.training:
            self._forget_forward()
        return self

    def eval(self):
        return self.train(False)

    def keras_param_count(self):
        return sum(child.keras_param_count() for _, child in self.named_children())

    def _as_inference_copy(self, mode):
        """This container (a copy made by ``quantized_copy``) as an inference copy: eval mode,
        its ``quantized`` mode recorded (save writes it; training refuses it)."""
        self.train(False)
        object.__setattr__(self, "quantized", mode)
        return self

    def _forget_forward(self):
        """Eval mode keeps no training forward: containers that keep one drop it here."""
