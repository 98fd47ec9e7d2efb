"""Keras's ``trainable`` in fit: the optimizer updates the weights of the layers that are
trainable *now* (Keras 3 reads ``trainable_variables`` at each step, so freezing a layer after
compile takes effect). The front's optimizer is built over the model's trainable weights; when
the set changes it is built again, each weight's optimizer state (Adam's moments, momentum)
and the step count carried over, as Keras's optimizer keeps a slot per variable."""

from __future__ import annotations

from .. import optim

__all__ = ["follow_trainable"]


def follow_trainable(model, optimizer, spec):
    """The optimizer to step ``model``'s trainable weights with: ``optimizer`` when it updates
    exactly them (or None before the first fit), else one built again from ``spec``.

    Raises
    ------
    ValueError
        ``spec`` is an ``rnnfast.optim`` optimizer of the user's that updates a frozen weight.
    """
    params = model.parameters()
    current = [id(p) for p in params]
    if isinstance(spec, optim.Optimizer):
        ours = set(current)
        frozen = [s.name for s in spec.slots if id(s.param) not in ours]
        if frozen and _all_weights(model) >= {id(s.param) for s in spec.slots}:
            raise ValueError(
                f"optimizer: it updates {frozen[0]}, a weight of a frozen layer (trainable="
                "False); build the rnnfast.optim optimizer after freezing "
                "(rnnfast.optim.Adam(model, ...)), or compile with a Keras optimizer, which "
                "follows trainable"
            )
        return optimizer
    if optimizer is None or [id(s.param) for s in optimizer.slots] == current:
        return optimizer
    rebuilt = spec.build(model)
    state = optimizer.state_dict()
    old = {id(s.param): i for i, s in enumerate(optimizer.slots)}
    if state["buffers"]:
        state["buffers"] = {
            name: [
                arrays[old[id(s.param)]] if id(s.param) in old else s.param * 0
                for s in rebuilt.slots
            ]
            for name, arrays in state["buffers"].items()
        }
    rebuilt.load_state_dict(state)
    return rebuilt


def _all_weights(model):
    """The ids of every weight of the model, trainable or frozen."""
    return {
        id(p) for layer in model.layers if layer.built for _, p in layer.layer.named_parameters()
    }
