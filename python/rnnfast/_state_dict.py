"""The check every load_state_dict makes before anything else: a mapping whose keys are exactly
the model's, so that a load changes nothing or everything."""

from __future__ import annotations


def check_state_dict_keys(state_dict, expected):
    """TypeError unless ``state_dict`` is a mapping; ValueError naming the keys of ``expected``
    it lacks and the keys it has that ``expected`` does not, unless there are none."""
    if not hasattr(state_dict, "keys"):
        raise TypeError(f"state_dict: expected a mapping, got {type(state_dict).__name__}")
    missing = [k for k in expected if k not in state_dict]
    extra = [k for k in state_dict if k not in expected]
    if missing or extra:
        raise ValueError(f"state_dict: missing key(s) {missing}, unexpected key(s) {extra}")
