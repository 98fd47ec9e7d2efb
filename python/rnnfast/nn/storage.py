"""The storage summary of a model: each layer's weight type (float32, float64, bf16, int8) and
bytes, and the totals beside float32's; ``summary()`` of quantized copies and of containers
without a Keras table (Module, Seq2Seq) prints it."""

from __future__ import annotations

__all__ = ["storage_rows", "storage_summary"]


def storage_rows(model, prefix=""):
    """``[(name, layer type, weight type, bytes, float32 bytes)]`` of every layer with weights
    (containers walked by ``named_children``): quantized layers' stored arrays, float layers'
    parameters."""
    if hasattr(model, "named_children"):
        rows = []
        for name, child in model.named_children():
            rows += storage_rows(child, f"{prefix}{name}.")
        return rows
    name = prefix[:-1] or type(model).__name__
    if getattr(model, "quantized", None) is not None:  # a quantized layer (nn.quantized.layers)
        nbytes, f32 = model.nbytes, model.float32_nbytes
        kind = model.quantized if nbytes else "-"  # Dropout: no weights
    else:
        params = [p for _, p in model.named_parameters()]
        kind = params[0].dtype.name if params else "-"
        nbytes = sum(p.nbytes for p in params)
        f32 = sum(4 * p.size for p in params)
    return [(name, type(model).__name__, kind, nbytes, f32)]


def storage_summary(model):
    """A table of the weight type and bytes of every layer of ``model`` and the totals, beside
    what the same parameters take in float32."""
    rows = storage_rows(model)
    table = [("Layer", "Type", "Weights", "Bytes", "float32 bytes")]
    table += [(n, t, k, f"{b:,}", f"{f:,}") for n, t, k, b, f in rows]
    widths = [max(len(r[c]) for r in table) + 3 for c in range(5)]

    def fmt(r):
        return "".join(v.ljust(w) for v, w in zip(r, widths)).rstrip()

    total, total32 = sum(r[3] for r in rows), sum(r[4] for r in rows)
    ratio = f" ({total / total32:.2f} of float32)" if total32 else ""
    lines = [
        f'Model: "{type(model).__name__}"',
        fmt(table[0]),
        "=" * sum(widths),
        *(fmt(r) for r in table[1:]),
        "=" * sum(widths),
        f"Total weight bytes: {total:,}{ratio}; float32: {total32:,}",
    ]
    return "\n".join(lines)
