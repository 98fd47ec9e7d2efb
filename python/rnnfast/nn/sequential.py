"""Sequential: layers applied one after another, with the layer protocol of its own."""

from __future__ import annotations

from ._children import ChildOwner
from ._inference_only import refuse_training
from ._layer import quantize_layer
from ._mixed_precision import check_model_precision, model_products, products_note
from ._shapes import prefixed
from .files.persistence import build_layer, layer_class, layer_config
from .masking import batch_first_of, call_layer, input_suspect, input_valid_mask
from .storage import storage_rows, storage_summary

__all__ = ["Sequential"]


def embedding_feeds_rnn(layer, following, ids):
    """Can ``following(ids, embedding=layer)`` stand for ``following(layer(ids))``, and pay?
    (Sequential and Seq2Seq's encoder ask before fusing.) The following layer says
    (``takes_embedding``, the layer protocol's: an RNN after an Embedding, when the batch has
    more tokens than the table rows)."""
    takes = getattr(following, "takes_embedding", None)
    return takes is not None and takes(layer, ids)


class Sequential(ChildOwner):
    """``Sequential([layer, ...])``: the output of each layer feeds the next; ``backward`` runs
    them in reverse. Parameters are named ``"{index}.{name}"`` (PyTorch's convention).

    A layer that returns a tuple (an RNN in PyTorch mode returns ``(y, h_n)``) passes on its
    first element; give RNNs ``return_sequences=True/False`` to choose what they pass on.

    An ``Embedding`` followed by an ``RNN`` runs fused (``rnn(ids, embedding=embedding)``)
    when the batch has more tokens than the vocabulary has entries: the same results to
    rounding, without the embedded sequence, its projection GEMM or its gradient.

    ``precision`` (None, "float32" or "bf16"): the products of every layer's forward and
    backward, Dense heads' included, whatever each layer's own ``precision`` says; None (the
    default) leaves each layer its own. "bf16" rounds both operands of every GEMM to bf16 and
    sums in float32 (``rnnfast.precision``); it needs float32 layers that run all their
    products on rnnfast's kernels (a quantized copy, a float64 layer or one that multiplies in
    NumPy is refused by name) and a CPU with bf16 products (a RuntimeError naming the ISA
    elsewhere). A ``fit(precision=...)`` around the model wins over it for that fit.
    """

    # a class default: Sequentials pickled before mixed precision leave each layer its own
    _precision = None

    def __init__(self, layers, *, precision=None):
        self.layers = list(layers)
        for i, layer in enumerate(self.layers):
            if not (callable(layer) and hasattr(layer, "backward")):
                raise TypeError(f"layers[{i}]: expected a layer, got {type(layer).__name__}")
        self.training = True
        self._fused = frozenset()  # indices of the Embeddings fused into the next layer
        self.output_mask = None
        self.precision = precision

    @property
    def precision(self):
        """The products of every layer's calls (None: each layer's own ``precision``)."""
        return self._precision

    @precision.setter
    def precision(self, value):
        self._precision = check_model_precision(self, value)

    def __call__(self, x, lengths=None, mask=None):
        return self.forward(x, lengths, mask)

    def forward(self, x, lengths=None, mask=None):
        """Run the layers in order.

        Parameters
        ----------
        x : array_like
            The first layer's input (token ids for an Embedding, else floats).
        lengths : array_like of int, (B,), optional
            Each sequence's length in a batch padded at the end. With neither lengths nor
            mask, an Embedding with ``mask_zero`` or ``padding_idx`` finds the padding itself.
        mask : array_like of bool, (B, T), optional
            Keras-style: True on real steps.

        The padding travels with the batch (``nn.masking``): RNNs run each sequence to its
        length, Dense and Dropout pass it on, an RNN that returns its last output ends it.
        ``self.output_mask`` is then the valid mask of the output (shaped like its two leading
        axes), or None; losses and metrics take it as their ``mask``.
        """
        valid = input_valid_mask(self, x, lengths, mask)
        out, self.output_mask, _ = self.call_with_padding(
            x, valid, input_suspect(x, valid), "Sequential"
        )
        return out

    def call_with_padding(self, x, valid, suspect, who, **kwargs):
        """The forward with the padding carried in and out: ``(out, valid, suspect)``. (The
        layers are named by their index in messages, ``who`` and ``kwargs`` are not used: a
        Sequential takes its input alone.)"""
        if kwargs:
            raise TypeError(
                f"{who}: a Sequential takes its input alone, got keyword(s) {sorted(kwargs)}"
            )
        with model_products(self._precision):
            return self._run_layers(x, valid, suspect)

    def _run_layers(self, x, valid, suspect):
        fused = set()
        i = 0
        while i < len(self.layers):
            layer = self.layers[i]
            if i + 1 < len(self.layers) and embedding_feeds_rnn(layer, self.layers[i + 1], x):
                x, valid, suspect = self.layers[i + 1].call_with_padding(
                    x, valid, suspect, f"layers[{i + 1}]", embedding=layer
                )
                fused.add(i)
                i += 2
            else:
                x, valid, suspect = call_layer(layer, x, valid, suspect, f"layers[{i}]")
                i += 1
            if isinstance(x, tuple):
                x = x[0]
        self._fused = frozenset(fused)
        return x, valid, suspect

    def backward(self, d_out):
        refuse_training(self, "backward")
        with model_products(self._precision):
            return self._backward_layers(d_out)

    def _backward_layers(self, d_out):
        i = len(self.layers) - 1
        while i >= 0:
            d_out = self.layers[i].backward(d_out)
            if isinstance(d_out, tuple):  # an RNN returns (dx, dh0)
                d_out = d_out[0]
            i -= 2 if i - 1 in self._fused else 1  # the RNN did its Embedding's backward
        return d_out

    @property
    def batch_first(self):
        """The layout of the model's sequences: its RNNs' ``batch_first`` (None without RNNs)."""
        return batch_first_of(self.layers, "Sequential")

    def named_children(self):
        """``(index, layer)`` of every layer: its parameters are named ``"{index}.{name}"``."""
        return [(str(i), layer) for i, layer in enumerate(self.layers)]

    def backward_runs_children(self):
        """True unless a subclass writes its own backward (see ``ChildOwner``)."""
        return type(self).backward is Sequential.backward

    def children_run_by(self, child):
        """The Embedding fused into ``child`` (the RNN after it) in the last forward, if any."""
        return tuple(
            self.layers[i]
            for i in self._fused
            if i + 1 < len(self.layers) and self.layers[i + 1] is child
        )

    def __getitem__(self, index):
        return self.layers[index]

    def __len__(self):
        return len(self.layers)

    # ---- description, persistence, quantization -----------------------------------------------

    def get_config(self):
        config = {"layers": [layer_config(layer) for layer in self.layers]}
        if self._precision is not None:  # a file without it: each layer its own
            config["precision"] = self._precision
        return config

    @classmethod
    def parameter_shapes(cls, config):
        """``{name: shape}`` of a Sequential built from ``config``: each layer's, under its
        index (None if one of them does not say)."""
        layers = config.get("layers") if isinstance(config, dict) else None
        if not isinstance(layers, list) or not all(isinstance(c, dict) for c in layers):
            raise TypeError(
                f"config['layers']: expected a list of layer configs (dicts), got "
                f"{type(layers).__name__}"
            )
        shapes = {}
        for i, child in enumerate(layers):
            child = dict(child)
            found = prefixed(
                str(i), layer_class(child.pop("__class__", "RNN")).parameter_shapes(child)
            )
            if found is None:
                return None
            shapes.update(found)
        return shapes

    @classmethod
    def from_config(cls, config):
        return cls([build_layer(c) for c in config["layers"]], precision=config.get("precision"))

    def output_shape(self, input_shape):
        """The last layer's output shape, each layer's from the one before (None when one of
        them does not say)."""
        shape = tuple(input_shape)
        for layer in self.layers:
            shape = None if shape is None else layer.output_shape(shape)
        return shape

    def quantized_copy(self, mode, where="model"):
        """A Sequential of the layers' quantized copies (``rnnfast.quantize``): of this exact
        class only, as for layers (a subclass may compute what the copy would not)."""
        if type(self) is not Sequential:
            return super().quantized_copy(mode, where)
        layers = [
            quantize_layer(c, mode, f"{where}.layers[{i}]") for i, c in enumerate(self.layers)
        ]
        return Sequential(layers)._as_inference_copy(mode)

    def summary(self, input_shape=None):
        """Print (and return) a Keras-style table: each layer, its output shape (from
        ``input_shape`` without the batch, e.g. ``(24, 1)`` for (T, D) sequences, when given)
        and its parameter count in Keras's layout (RNNs: one bias vector), then the totals. A
        quantized copy (``rnnfast.quantize``) also shows each layer's weight type and bytes,
        and the total bytes beside the float32 model's."""
        # a quantized copy's table also shows each layer's weight type and bytes
        quantized = getattr(self, "quantized", None) is not None
        extra = ("Weights", "Bytes") if quantized else ()
        rows = [("Layer (type)", "Output Shape", "Param #", *extra)]
        shape = None if input_shape is None else (None, *input_shape)
        for i, layer in enumerate(self.layers):
            shape = None if shape is None else layer.output_shape(shape)
            shown = "?" if shape is None else str(shape).replace("None", "None")
            row = (
                f"{type(layer).__name__.lower()}_{i} ({type(layer).__name__})",
                shown,
                f"{layer.keras_param_count():,}",
            )
            if quantized:
                stored = storage_rows(layer)
                kinds = sorted({r[2] for r in stored})
                row += ("/".join(kinds), f"{sum(r[3] for r in stored):,}")
            rows.append(row)
        widths = [max(len(r[c]) for r in rows) + 3 for c in range(len(rows[0]))]

        def fmt(r):
            return "".join(v.ljust(w) for v, w in zip(r, widths)).rstrip()

        total = self.keras_param_count()
        lines = [
            fmt(rows[0]),
            "=" * sum(widths),
            *(fmt(r) for r in rows[1:]),
            "=" * sum(widths),
            f"Total params: {total:,} (Keras layout)",
        ]
        note = products_note(self._precision)
        if note is not None:
            lines.append(note)
        if quantized:
            lines.append(storage_summary(self).splitlines()[-1])
        else:
            stored = sum(p.size for p in self.parameters())
            if stored != total:
                lines.append(
                    f"Stored: {stored:,} (RNNs keep PyTorch's two bias vectors, bias_ih and "
                    "bias_hh; Keras's one bias is their sum)"
                )
        text = "\n".join(lines)
        print(text)
        return text

    def __repr__(self):
        inner = ",\n".join(f"  ({i}): {layer!r}" for i, layer in enumerate(self.layers))
        if self._precision is not None:
            inner += f",\n  precision={self._precision!r}"
        return f"Sequential(\n{inner}\n)"

    # ---- ONNX (rnnfast.io.onnx asks this; nn does not import io) -----------------------------

    def onnx_chain(self, walk, x, who):
        """ONNX export: the chain is the layers, run one after another."""
        return walk.in_order(self.layers, x, who)
