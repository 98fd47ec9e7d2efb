"""Keras's functional API: ``Model(inputs, outputs)`` over layers called on symbolic tensors::

    encoder_inputs = Input((None, 8))
    _, h, c = LSTM(32, return_state=True)(encoder_inputs)
    decoder_inputs = Input((None, 8))
    seq = LSTM(32, return_sequences=True)(decoder_inputs, initial_state=[h, c])
    model = Model([encoder_inputs, decoder_inputs], TimeDistributed(Dense(8))(seq))

computed by the graph runner of ``_graph`` and trained by ``rnnfast.training`` with
``Sequential``'s compile / fit / evaluate (one output to train; predict gives every output).
Gradients reach the encoder through the decoder's initial state, so the pair trains end to end.
"""

from __future__ import annotations

import numpy as np

from .._validation import type_error
from ._graph import Graph, graph_nodes, predict_outputs
from ._inputs import model_input, model_targets
from ._policy import compute_outputs
from ._symbolic import is_symbolic
from .layers import Input
from .model import Sequential

__all__ = ["Model"]


def _tensor_list(name, value):
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if not values:
        raise ValueError(f"{name}: expected at least one symbolic tensor, got none")
    return values


class Model(Sequential):
    """Keras's ``Model(inputs, outputs, name=None)``: ``inputs`` an ``Input`` or a list of them,
    ``outputs`` a layer's output tensor or a list of them. It has Sequential's methods (compile,
    fit, evaluate, predict, summary, get_weights / set_weights in Keras's layer order,
    reset_states), with the data of several inputs given as a list (``fit([x_enc, x_dec],
    y)``). fit and evaluate train one output (a model of several outputs is a NotImplementedError
    there); predict returns every output (a list when ``outputs`` was a list).

    Not supported: a layer called more than once (shared weights), a model called on symbolic
    tensors (a nested model), explicit ``mask=`` arguments (use Masking or mask_zero): each is a
    clear error.
    """

    def __init__(self, inputs, outputs, name=None):
        super().__init__(name="functional" if name is None else name)
        self._model_inputs = _tensor_list("inputs", inputs)
        for i, tensor in enumerate(self._model_inputs):
            if not isinstance(tensor, Input):
                raise type_error(f"inputs[{i}]", "an Input of rnnfast.keras", tensor)
        self._listed_outputs = isinstance(outputs, (list, tuple))
        self._model_outputs = _tensor_list("outputs", outputs)
        nodes = graph_nodes(self._model_inputs, self._model_outputs)
        self._graph = Graph(self._model_inputs, self._model_outputs, nodes, self.name)
        for layer in self._graph.front_layers:
            if layer.name is None:
                layer.name = self._unique_name(layer.keras_name)
            self._layers.append(layer)
        self._input_shape = self._model_inputs[0].shape
        self._blocks = []  # the inputs of several-input data, registered by _data

    @property
    def inputs(self):
        return list(self._model_inputs)

    @property
    def outputs(self):
        return list(self._model_outputs)

    # ---- what Sequential asks of its model -------------------------------------------------------

    def add(self, layer):
        raise TypeError("add: a functional Model's layers come from Model(inputs, outputs)")

    def build(self, input_shape):
        """A functional model is built by its Input shapes (nothing to do)."""

    @property
    def model(self):
        """The graph runner (the module protocol of ``rnnfast.optim`` and ``training``)."""
        return self._graph

    def named_parameters(self):
        return self._graph.named_parameters()

    def _build_for(self, x):
        return self._graph

    def _several_outputs(self, what):
        if len(self._model_outputs) > 1:
            raise NotImplementedError(
                f"{what}: this model has {len(self._model_outputs)} outputs and fit / evaluate "
                "train one; build a Model(inputs, output) of the output to train (it shares the "
                "layers and their weights), and use this one for predict"
            )

    # ---- data ----------------------------------------------------------------------------------

    def _inputs_of(self, x, name="x"):
        """The arrays of each input, cast as Keras casts them (see ``_inputs``)."""
        many = len(self._model_inputs) > 1
        xs = list(x) if many and isinstance(x, (list, tuple)) else [x]
        if len(xs) != len(self._model_inputs):
            raise ValueError(
                f"{name}: this model has {len(self._model_inputs)} inputs; expected a list of "
                f"{len(self._model_inputs)} arrays, got "
                + (f"a list of {len(xs)}" if isinstance(x, (list, tuple)) else "one array")
            )
        out = []
        for i, (tensor, value) in enumerate(zip(self._model_inputs, xs)):
            label = f"{name}[{i}]" if many else name
            out.append(model_input(value, self._reader(tensor), tensor.shape, label))
        counts = {len(a) for a in out}
        if len(counts) > 1:
            raise ValueError(
                f"{name}: the inputs have different numbers of samples {sorted(counts)}"
            )
        return out

    def _reader(self, tensor):
        """What decides how an input is cast: its dtype, else the first layer reading it."""
        if tensor.dtype is not None:
            return _Dtype(tensor.dtype)
        for node in self._graph.nodes:
            if node.inputs[0] is tensor:
                return node.layer
        return _Dtype(np.float32)

    def _feed(self, arrays):
        """The array handed to the runner for ``arrays`` (one per input): the array itself for
        one input, else sample indices into a registered block of them."""
        if len(arrays) == 1:
            self._graph.feed = None
            return arrays[0]
        start = sum(len(b[0]) for b in self._blocks)
        self._blocks.append(arrays)
        self._graph.feed = _Blocks(self._blocks)
        return np.arange(start, start + len(arrays[0])).view(_Indices)

    def _data(self, x, y):
        if x is None or y is None:
            raise ValueError("x, y: expected the inputs and the targets, got None")
        if isinstance(x, _Indices):  # fit's validation_split: a slice of registered samples
            return x, model_targets(y, self._graph.dtype)
        arrays = self._inputs_of(x)
        y = model_targets(y, self._graph.dtype)
        if len(arrays[0]) != len(y):
            raise ValueError(f"y: expected as many samples as x ({len(arrays[0])}), got {len(y)}")
        return self._feed(arrays), y

    def fit(self, x=None, y=None, *args, **kwargs):
        self._blocks = []
        return super().fit(x, y, *args, **kwargs)

    def evaluate(self, x=None, y=None, *args, **kwargs):
        self._blocks = []
        return super().evaluate(x, y, *args, **kwargs)

    def predict(self, x, batch_size=None, verbose="auto", **kwargs):
        """Keras's ``predict``: every output over ``x`` in inference mode (a list when the model
        was given a list of outputs)."""
        self._blocks = []
        arrays = self._inputs_of(x)
        fed = self._feed(arrays)
        outs = predict_outputs(
            self._graph, fed, 32 if batch_size is None else batch_size, len(arrays[0])
        )
        outs = compute_outputs(outs, self._output_policies())
        return outs if self._listed_outputs else outs[0]

    def __call__(self, x, training=False):
        """The outputs for one batch ``x`` (arrays): in inference mode, or with
        ``training=True`` in training mode."""
        if is_symbolic(x):
            raise NotImplementedError(
                "x: calling a Model on symbolic tensors (a nested model) is not supported; "
                "call its layers on the tensors instead"
            )
        self._blocks = []
        fed = self._feed(self._inputs_of(x))
        self._graph.train(bool(training))
        out = self._graph(fed)
        return compute_outputs(out, self._output_policies())

    def _output_policies(self):
        """The dtype policy of each output: that of the layer whose call made it (an Input
        handed straight out keeps its dtype)."""
        return [
            "float32" if t.node is None else t.node.layer.dtype_policy for t in self._model_outputs
        ]

    def __repr__(self):
        return f"<Model name={self.name!r}, layers={[layer.name for layer in self._layers]}>"


class _Dtype:
    """An input's declared dtype, standing for the layer that decides its cast."""

    def __init__(self, dtype):
        self.dtype = np.dtype(dtype)
        self.reads_ids = self.dtype.kind in "iu"


class _Indices(np.ndarray):
    """Sample indices into registered blocks (a slice of them stays such indices)."""


class _Blocks:
    """The registered inputs of several-input data (one list of arrays, one per input, per
    block), indexed by sample number across the blocks; a batch comes from one block."""

    def __init__(self, blocks):
        self.blocks = blocks

    def gather(self, index):
        index = np.asarray(index)
        start = 0
        for arrays in self.blocks:
            if index.size == 0 or index[0] < start + len(arrays[0]):
                return [a[index - start] for a in arrays]
            start += len(arrays[0])
        raise IndexError(f"sample indices from {index[0]} beyond the registered data")
