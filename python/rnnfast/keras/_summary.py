"""``Sequential.summary()``'s text: Keras's table of layers (name and type, output shape,
parameter count) and its totals, in Keras's counts (an RNN's one bias, a GRU's (2, 3H))."""

from __future__ import annotations

__all__ = ["summary_text"]

_WIDTHS = (29, 26, 10)


def _size(nbytes):
    """Bytes as Keras prints them (1024-based, two decimals)."""
    size = float(nbytes)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.2f} {unit}"
        size /= 1024
    return f"{size:.2f} GB"  # pragma: no cover - the loop returns


def _row(values):
    cells = [values[0].ljust(_WIDTHS[0]), values[1].ljust(_WIDTHS[1]), values[2]]
    return (" " + "".join(cells)).rstrip()


def summary_text(name, layers):
    """The table of a model called ``name`` whose built ``layers`` (of ``rnnfast.keras``) run
    in order."""
    line = "_" * (sum(_WIDTHS) + 1)
    lines = [
        f'Model: "{name}"',
        line,
        _row(("Layer (type)", "Output Shape", "Param #")),
        "=" * len(line),
    ]
    total = nbytes = trained = trained_bytes = 0
    for layer in layers:
        count = layer.count_params()
        total += count
        nbytes += count * layer.dtype.itemsize
        trained += layer.trainable_count()  # Keras's trainable / non-trainable split
        trained_bytes += layer.trainable_count() * layer.dtype.itemsize
        lines.append(
            _row((f"{layer.name} ({type(layer).__name__})", str(layer.output_shape), f"{count:,}"))
        )
    lines += [
        "=" * len(line),
        f"Total params: {total:,} ({_size(nbytes)})",
        f"Trainable params: {trained:,} ({_size(trained_bytes)})",
        f"Non-trainable params: {total - trained:,} ({_size(nbytes - trained_bytes)})",
        line,
    ]
    return "\n".join(lines)
