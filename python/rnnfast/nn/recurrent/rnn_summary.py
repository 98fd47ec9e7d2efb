"""The RNN's Keras-style description: its summary table and its parameter count in Keras's
layout (one bias vector per direction where rnnfast, as PyTorch, stores two), read from its
parameters' PyTorch names."""

from __future__ import annotations

import re

from .._mixed_precision import products_note
from .cells import ELMAN

__all__ = ["keras_param_count", "summary_text"]

# hr: the LSTM projection; peephole: the LSTM's peepholes (ONNX's P); tr2, tr3, ...: a deep transition's layers (nn.recurrent.deep_transition)
_PARAM = re.compile(r"^(weight|bias)_(ih|hh|hr|peephole|tr\d+)_l(\d+)(_reverse)?$")
_NORM = re.compile(r"^([gc]_norm_(?:weight|bias))_l(\d+)(_reverse)?$")


def _groups(layer):
    """{(layer index, reverse): {kind: array}} from the named parameters; others apart."""
    groups, others = {}, {}
    for name, p in layer.named_parameters():
        m = _PARAM.match(name)
        if m is None:
            m = _NORM.match(name)  # the LayerNorm LSTM's norms count with their direction
            if m is None:
                others[name] = p
                continue
            key = (int(m.group(2)), m.group(3) is not None)
            groups.setdefault(key, {})[m.group(1)] = p
            continue
        key = (int(m.group(3)), m.group(4) is not None)
        groups.setdefault(key, {})[f"{m.group(1)}_{m.group(2)}"] = p
    return groups, others


def _keras_count(layer, group):
    """Keras's count for one direction, as the layer's cell says (``nn.recurrent.cells``): kernel,
    recurrent kernel and Keras's bias vector(s)."""
    return getattr(layer, "cell", ELMAN).keras_count(layer, group)


def summary_text(layer):
    """A Keras-style table of ``layer``: one row per stacked layer (both directions together),
    its output shape and its parameter count in Keras's layout (one bias vector per direction,
    so the totals equal Keras's ``SimpleRNN`` / ``Bidirectional`` counts), then the total in
    PyTorch's layout (two bias vectors, ``bias_ih`` and ``bias_hh``), which rnnfast stores.

    Returns
    -------
    str
    """
    groups, others = _groups(layer)
    cell = getattr(layer, "cell", ELMAN)
    H = cell.output_width(layer)
    dirs = 2 if getattr(layer, "bidirectional", False) else 1
    batch_first = getattr(layer, "batch_first", False)
    last = layer.num_layers - 1
    merge_mode = getattr(layer, "merge_mode", "concat")
    # None: PyTorch's convention, the whole sequence
    return_sequences = getattr(layer, "return_sequences", None) is not False

    rows = [("Layer (type)", "Output Shape", "Param #")]
    keras_total = 0
    for k in range(layer.num_layers):
        count = sum(_keras_count(layer, g) for (i, _), g in groups.items() if i == k)
        keras_total += count
        width = H * dirs if (k < last or merge_mode == "concat") else H
        if k == last and getattr(layer, "all_to_output", False):
            width *= layer.num_layers  # every layer's output, concatenated
        if k == last and not return_sequences:
            shape = f"(B, {width})"
        else:
            shape = f"(B, T, {width})" if batch_first else f"(T, B, {width})"
        kind = ("Bidirectional " if dirs == 2 else "") + cell.summary_kind(layer)
        # Keras's dropout / recurrent_dropout (rnnfast's input_ / recurrent_dropout) shown
        # where set: they change what training computes, not the parameters
        drops = "".join(
            f", {keras_name} {getattr(layer, ours)}"
            for keras_name, ours in (
                ("dropout", "input_dropout"),
                ("recurrent_dropout", "recurrent_dropout"),
            )
            if getattr(layer, ours, 0.0)
        )
        # dense skips: what a layer reads or returns beyond the plain stack's
        if k > 0 and getattr(layer, "input_to_all", False):
            drops += ", input_to_all"
        if k == last and getattr(layer, "all_to_output", False):
            drops += ", all_to_output"
        name = cell.torch_name.lower()
        rows.append((f"{name}_l{k} ({kind}{drops})", shape, f"{count:,}"))
    other_total = sum(p.size for p in others.values())
    if others:
        rows.append(("other parameters", "", f"{other_total:,}"))
        keras_total += other_total
    torch_total = sum(p.size for p in layer.parameters())

    widths = [max(len(r[i]) for r in rows) + 3 for i in range(3)]
    width = sum(widths)

    def fmt(row):
        return " " + "".join(c.ljust(w) for c, w in zip(row, widths)).rstrip()

    lines = [f'Model: "{type(layer).__name__}"', "_" * width, fmt(rows[0]), "=" * width]
    for i, row in enumerate(rows[1:]):
        lines.append(fmt(row))
        lines.append("=" * width if i == len(rows) - 2 else "_" * width)
    lines.append(f"Total params: {keras_total:,}")
    if getattr(layer, "bias", True) and torch_total != keras_total:
        lines.append(
            f"PyTorch layout: {torch_total:,} params (rnnfast stores two bias vectors per "
            "direction, bias_ih and bias_hh; Keras's one bias is their sum)"
        )
    elif getattr(layer, "bias", True):  # a GRU with reset_after: Keras's two biases too
        lines.append(f"PyTorch layout: {torch_total:,} params (the same)")
    else:
        lines.append(f"PyTorch layout: {torch_total:,} params (no biases)")
    note = products_note(getattr(layer, "precision", None))
    if note is not None:  # what training computes, beside the parameters
        lines.append(note)
    return "\n".join(lines)


def keras_param_count(layer):
    """An RNN's parameters in Keras's layout: one bias vector per direction, not two."""
    groups, others = _groups(layer)
    return sum(_keras_count(layer, g) for g in groups.values()) + sum(
        p.size for p in others.values()
    )
