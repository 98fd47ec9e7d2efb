"""ONNX export and import: ``rnnfast.io.onnx.export(model, path)`` and
``rnnfast.io.onnx.load(path)`` (also reachable as ``rnnfast.onnx``, imported on first use).

The ``onnx`` package is imported inside these functions only (``pip install onnx``; serving
the exported file needs ``onnxruntime``, or rnnfast itself through ``load``).

Export
------
``export(model, path, *, lengths=False, h0=False, opset=None, padding_at_end=False,
example=None)`` writes the inference graph of

- ``RNN``: stacked, bidirectional, tanh / relu, with or without bias, ``batch_first``,
  ``go_backwards``, ``residual``, PyTorch's ``(y, h_n)`` and Keras's forms (the last output,
  ``return_state``, every ``merge_mode``), as one ONNX ``RNN`` node per layer;
- ``Embedding`` (``Gather``), ``Linear`` / ``Dense`` (``MatMul`` + ``Add``), ``Dropout`` (gone:
  the graph is the eval-mode model);
- ``Sequential`` and ``Module`` whose forward is a plain chain of children (each reads the
  previous one's output; a Module's forward is run once in eval mode on a small input, or on
  ``example``, to see it), nested in each other as well;
- quantized copies of these (``rnnfast.quantize``, bf16 or int8) with their weights dequantized
  to float32, the values the copy computes with: the ONNX ``RNN`` op takes no integer or bf16
  weights, so the graph does not round activations as the quantized kernels do, and its outputs
  differ from the copy's by that rounding alone (within the quantization's error bound), while
  the file is the float32 size.

Graph inputs: ``x``, float (T, B, D), or (B, T, D) when the model is batch_first, or int64 token
ids (T, B) / (B, T) for a model that starts with an Embedding; ``h0`` (num_layers*dirs, B, H)
with ``h0=True`` (a standalone RNN only); ``lengths``, int64 (B,), with ``lengths=True``: the
ONNX RNN op's ``sequence_lens`` (int32, cast in the graph), reaching every RNN as the model's
lengths do. Outputs: ``y`` (``y_forward`` and ``y_backward`` for ``merge_mode=None``) and, for a
standalone RNN that returns it, ``h_n``. T and B are dynamic. Every graph passes
``onnx.checker.check_model(model, full_check=True)``; the ONNX model is returned (and written
to ``path`` unless it is None). A float64 model gives a float64 graph (valid ONNX; onnxruntime
has no float64 RNN kernel, so serve float32).

What the ONNX ops cannot express raises a ValueError naming the option: leaky units
(``alpha != 1``), dilation, dropouts in training mode (call ``model.eval()``), a stateful RNN
without ``h0=True``, Keras's general masks (padding inside a sequence: an RNN reading a
go_backwards RNN's padded output, or an Embedding's ``mask_zero`` / ``padding_idx`` unless
``padding_at_end=True`` promises the padding comes at each sequence's end, when the graph
counts the other ids as the lengths); other layers (JordanRNN, Seq2Seq) and forwards that are
not chains raise too.

Layers write themselves: the exporter keeps no list of layer types. A layer of your own joins
the graph by defining ``onnx_emit(exporter, flow, who)``: it writes its nodes on
``exporter.graph`` (``op(op_type, inputs, **attributes)``, ``initializer(array, hint)``,
``const(value)``) reading ``flow.value`` (a time-major (T, B, width) sequence, or (B, width))
and returns ``flow.derive(output_name, width)``; ``exporter.float_params(layer)`` gives its
parameters (dequantized for a quantized copy). Optionally ``onnx_input()`` says what it reads
as a model's first layer (an int width; ``"ids"`` for token ids; None for whatever the next
layer reads) and ``onnx_check(who)`` raises a ValueError for what its present state cannot
export. rnnfast's layers hand their facts to the exporter's writers for their ONNX patterns
(``linear``, ``embedding``, ``recurrent``: the ``RNN`` op's weights per layer and direction in
ONNX's layout and gate order, from ``RNN.onnx_weights``; ``RNN.load_onnx_weights`` is its
inverse for ``load``); a recurrent layer also has ``onnx_state_shape()`` (its ``h0`` without
the batch axis). A container says how it runs its children with ``onnx_chain``
(``Sequential``: in order; ``Module``: as its forward calls them). A layer without
``onnx_emit`` is refused with a TypeError naming it.

Load
----
``load(path_or_model)`` reads graphs of ONNX ``RNN``, ``GRU`` and ``LSTM`` nodes (what both
torch.onnx exporters write for ``nn.GRU`` / ``nn.LSTM`` too; a GRU with
``linear_before_reset=0`` runs as written, reset_after=False, with a UserWarning when PyTorch
wrote it; peepholes ``P``, ``input_forget``, ``clip`` and other activations raise, naming the
node and the attribute) with ``Gather`` (an embedding),
``MatMul`` / ``Gemm`` + ``Add`` (a linear layer) and the glue around them: everything
``export`` writes, and what torch.onnx's TorchScript exporter (``dynamo=False``) writes for
``nn.RNN`` with ``nn.Embedding`` and ``nn.Linear`` (Transpose, Reshape, Squeeze, Concat, Slice,
Gather, Shape, Unsqueeze, Constant, ConstantOfShape). It returns an ``rnnfast.RNN`` for a graph
that is one RNN, a ``Sequential`` for a chain with one output, else an ``OnnxModel`` (a
``Module``) whose call returns the graph's outputs in order; in eval mode. Any other op, or a
use of these that is not an rnnfast layer, raises a ValueError naming the node.

It reads ``RNN`` / ``GRU`` / ``LSTM`` nodes as the operator's spec writes them too (ONNX's node
tests, tf2onnx, ``onnx.helper``): ``layout`` 0 or 1, ``Y`` / ``Y_h`` / ``Y_c`` as graph outputs in
the node's layout, ``sequence_lens`` and initial states as graph inputs or initializers, weights
given as graph inputs with ``load(path, initializers={...})``. Such a graph loads as an
``OnnxModel`` that takes and returns the graph's arrays in the graph's layouts (``run(names,
feeds)`` as onnxruntime's); see ``_onnx_spec_nodes``.
"""

from __future__ import annotations

from ._onnx_load import OnnxLoadError, OnnxModel

__all__ = ["OnnxLoadError", "OnnxModel", "export", "load"]


def export(model, path, *, lengths=False, h0=False, opset=None, padding_at_end=False, example=None):
    """Write ``model``'s inference graph to ``path`` as ONNX; returns the ``onnx.ModelProto``.

    Parameters
    ----------
    model : layer or container
        RNN, Embedding, Linear, Dropout or a layer that defines ``onnx_emit``; or a
        Sequential or Module (a chain of those); or an object with ``rnnfast_model()`` that
        returns one (an ``rnnfast.keras.Sequential``)
    path : str or os.PathLike, or None (do not write)
    lengths : bool
        Add the graph input ``lengths`` (int64, (B,)): each sequence's length, as
        ``model(x, lengths=...)`` takes them.
    h0 : bool
        Add the graph input ``h0`` (num_layers*dirs, B, H) (a standalone RNN only).
    opset : int, optional
        The ONNX opset (default 17; 14 up to the installed onnx's newest).
    padding_at_end : bool
        For an Embedding with ``mask_zero`` / ``padding_idx`` feeding an RNN: promise that the
        padding ids come only at each sequence's end (see the module's documentation).
    example : array_like, optional
        An input of the model, to run a Module's forward on (default: one made from its first
        child).

    Raises
    ------
    ValueError
        An option, layer or forward that the ONNX ops cannot express, named in the message.
    TypeError
        A layer export cannot write, or a non-bool flag.
    """
    from ._onnx_export import export_model

    # a front's model (rnnfast.keras.Sequential) stands for the rnnfast model that computes it
    unwrap = getattr(model, "rnnfast_model", None)
    if callable(unwrap):
        model = unwrap()
    return export_model(
        model,
        path,
        lengths=lengths,
        h0=h0,
        opset=opset,
        padding_at_end=padding_at_end,
        example=example,
    )


def load(path, *, initializers=None):
    """An rnnfast model computing the ONNX graph at ``path`` (or an ``onnx.ModelProto``);
    see the module's documentation for the graphs it reads.

    Parameters
    ----------
    path : str, os.PathLike, binary file object or onnx.ModelProto
        A file may come from anyone: it is parsed from its bytes and every tensor checked
        before any is read. External data is read only from files inside the model's folder
        (so only for a path).
    initializers : dict of str to array_like, optional
        Graph inputs to read as initializers of these arrays: the weights (W, R, B) of a
        graph that takes them as inputs, as ONNX's own node tests do. rnnfast builds its
        layers from the weights at load time.

    Raises
    ------
    ValueError
        Not an ONNX file (protobuf cannot parse it; the message names the file); a tensor
        whose dims disagree with its data (none larger than the file is made), of a
        non-numeric type, sparse, or external outside the model's folder (an absolute path,
        ``..``, a link out) or shorter than it says; a subgraph. ``OnnxLoadError`` (a
        ValueError) for a graph rnnfast cannot read, naming the node: another op, attributes
        that disagree with the initialisers (``hidden_size`` and W / R, ``direction``),
        malformed attributes or inputs, constants computed to more values than a graph's glue
        has.
    OSError
        Reading the file (or an external data file) failed.
    """
    from ._onnx_load import load_model

    return load_model(path, initializers=initializers)
