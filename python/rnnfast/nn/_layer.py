"""The layer protocol: what the rest of rnnfast asks of a layer, and the base class ``Layer``
that answers it with defaults. ``Sequential``, ``Module``, ``fit``, ``summary``, save / load,
``quantize`` and the optimizers ask the layer itself; no module keeps a list of layer classes,
so a layer class of the user's that subclasses ``Layer`` works wherever rnnfast's own do.

What every layer has (``ParameterOwner``'s, from ``self._params`` and ``self.grads``):
``layer(x)`` and ``layer.backward(d_out) -> d_in`` (after a call in training mode),
``named_parameters()`` / ``parameters()`` (live arrays), ``grads`` (same keys, accumulated),
``zero_grad()``, ``state_dict()`` / ``load_state_dict()``, ``train()`` / ``eval()``.

What a layer says about itself (each with a default here; the layers override what differs):

``get_config()`` / ``from_config(config)``
    The constructor's arguments (JSON values) and the classmethod that rebuilds the layer from
    them: what ``save`` writes and ``load`` reads.
``output_shape(input_shape)``
    The output's shape for an input shape (batch first, None for unknown sizes), for
    ``summary()``; None when the layer does not say.
``num_parameters()`` / ``keras_param_count()``
    The parameter count in PyTorch's layout (what is stored) and in Keras's (an RNN's two bias
    vectors are one in Keras).
``call_with_padding(x, valid, suspect, who, **kwargs) -> (out, valid, suspect)``
    The call inside a container, with the valid mask of the input (``nn.masking``): a layer
    consumes it (an RNN runs to the lengths), makes one (an Embedding with ``mask_zero``),
    passes it on or ends it. The default passes it on when the output keeps the input's two
    leading axes and ends it otherwise.
``batch_first`` (an attribute, where a layer reads sequences)
    Their layout: the layers of a container agree on it, and it lays out the model's lengths
    and masks.
``call_arguments``
    The names of the arguments a call takes by position after ``x`` (the RNN's ``h0, lengths,
    mask``): a ``Module`` records them by name, and routes the gradients ``backward`` returns
    after ``dx`` to them, in that order.
``takes_embedding(embedding, ids)``
    Whether ``layer(ids, embedding=embedding)`` can stand for ``layer(embedding(ids))`` (the
    RNN's fused token input); False by default.
``quantized_copy(mode, where)``
    Its bf16 / int8 inference copy: by default made by the subclass of the layer's class whose
    ``float_class`` names it (``nn.quantized.layers``: ``QuantizedLinear.float_class is Linear``), found
    through the class hierarchy; containers copy their children.
``kernel_products`` (a class attribute)
    True where every product the layer computes is a call of rnnfast's float32 kernels, so
    that bf16 mixed precision (``fit(precision="bf16")``, ``Sequential(precision=)``) applies
    to all of them; False by default, and a model holding a layer with parameters that says
    False is refused bf16 by name (its NumPy products would stay float32).
"""

from __future__ import annotations

import numpy as np

from .._parameters import ParameterOwner
from .._validation import (
    layer_dtype,
)
from .files._file_format import save
from .masking import pass_padding_on
from .storage import storage_summary

__all__ = ["Layer", "quantize_layer"]


class Layer(ParameterOwner):
    """Base class of rnnfast's layers and containers, and of layers of your own.

    A layer of your own calls ``super().__init__(dtype)``, creates its parameters with
    :meth:`add_parameter`, and defines ``forward(x)`` (``layer(x)`` calls it), ``backward(d_out)``
    (adding into ``self.grads``, returning the input's gradient) and ``get_config()``. It then
    trains with the optimizers and ``rnnfast.training.fit``, sits in ``Sequential`` and
    ``Module``, shows in ``summary()``, saves and loads (``rnnfast.load`` finds the class by its
    name once it is defined, or takes ``cls=``) and pickles; the methods below say the rest
    (output shape, parameter counts, padding), with defaults. See "Writing your own layer" in
    the documentation.

    Parameters
    ----------
    dtype : float32 or float64
        The dtype of the parameters (``self.dtype``) and of the inputs the layer takes.
    """

    # the names of a call's positional arguments after x, and of the inputs whose gradients
    # backward returns after dx, in order (the RNN: h0, lengths, mask; dx, dh0)
    call_arguments = ()
    # whether every product it computes is a float32 kernel call (see the module's docstring);
    # a layer of the user's may multiply in NumPy, which bf16 products would not reach
    kernel_products = False

    def __init__(self, dtype=np.float32):
        self.dtype = layer_dtype(dtype)
        self._params = {}
        self.grads = {}
        self.training = True
        self._cache = None

    def add_parameter(self, name, value):
        """A new parameter ``name`` holding ``value`` (in the layer's dtype, C-contiguous) and its
        zero gradient; returns the live array (optimizers update it in place)."""
        self._params[name] = np.ascontiguousarray(value, dtype=self.dtype)
        self.grads[name] = np.zeros_like(self._params[name])
        return self._params[name]

    def __call__(self, x):
        return self.forward(x)

    def random_generators(self):
        """The numpy Generators this layer draws its training noise (dropout masks) from, by
        attribute name: ``rnnfast.distributed.seed_dropout`` gives each rank streams of its
        own by replacing them. None here; a layer that draws masks names its own."""
        return {}

    def _take_cache(self):
        if self._cache is None:
            raise RuntimeError(
                f"{type(self).__name__}.backward: no training forward to differentiate; call the "
                "layer in training mode first (each forward allows one backward)"
            )
        cache, self._cache = self._cache, None
        return cache

    # ---- configuration: save and load ---------------------------------------------------------

    def get_config(self):
        """The constructor's arguments that rebuild the layer (JSON values, the dtype by name)."""
        raise NotImplementedError(
            f"{type(self).__name__}.get_config: define it (the constructor's arguments, as a "
            "dict of JSON values) so that save and load can rebuild the layer"
        )

    @classmethod
    def from_config(cls, config):
        """A new layer built from what :meth:`get_config` returned: ``cls(**config)``."""
        return cls(**config)

    @classmethod
    def parameter_shapes(cls, config):
        """``{name: shape}`` of the parameters a layer built from ``config`` (what
        :meth:`get_config` returned) holds, computed without building it: ``rnnfast.load``
        compares them with a file's arrays before it allocates anything. None: the class does
        not say (load then bounds every size in the config by the file's largest array
        dimension). A config value that cannot be a size raises TypeError or ValueError naming
        it."""
        return None

    def save(self, path):
        """Write configuration and parameters to a .npz file (no pickle); ``rnnfast.load``
        reads it."""
        save(self, path)

    # ---- description: summary -----------------------------------------------------------------

    def output_shape(self, input_shape):
        """The output's shape for ``input_shape`` (batch first, None for unknown sizes), as a
        Keras summary shows it; None: the layer does not say (the summary shows "?")."""
        return None

    def num_parameters(self):
        """The number of parameters stored (PyTorch's layout)."""
        return sum(p.size for _, p in self.named_parameters())

    def keras_param_count(self):
        """The number of parameters in Keras's layout (the same as PyTorch's unless the layer
        says otherwise)."""
        return self.num_parameters()

    def summary(self):
        """Print (and return) each layer's weight type and bytes and the totals
        (``nn.storage``); Sequential and RNN print a Keras table instead."""
        text = storage_summary(self)
        print(text)
        return text

    # ---- padding -------------------------------------------------------------------------------

    def call_with_padding(self, x, valid, suspect, who, **kwargs):
        """``self(x, **kwargs)`` with the padding carried (``nn.masking``): ``(out, valid,
        suspect)`` of the output. ``who`` names the layer in messages ("layers[1]")."""
        return pass_padding_on(self, x, valid, suspect, **kwargs)

    def takes_embedding(self, embedding, ids):
        """Whether ``self(ids, embedding=embedding)`` can stand for ``self(embedding(ids))``."""
        return False

    # ---- quantization --------------------------------------------------------------------------

    def quantized_copy(self, mode, where="model"):
        """The bf16 / int8 inference copy of this float32 layer (``rnnfast.quantize``), made by
        the class that names this layer's exact class as its ``float_class``."""
        cls = type(self)
        found = [c for c in cls.__subclasses__() if c.__dict__.get("float_class") is cls]
        if not found:
            raise ValueError(
                f"{where}: a {cls.__name__} cannot be quantized; rnnfast.quantize takes RNN, GRU, "
                "LSTM, Linear/Dense, Embedding, Dropout, Sequential, rnnfast.Module subclasses and "
                "Seq2Seq (with their exact classes: a subclass of a layer may compute what the "
                "quantized kernels do not)"
            )
        dtype = np.dtype(self.dtype)
        if dtype != np.float32:
            raise TypeError(
                f"{where}: {cls.__name__} has dtype {dtype.name}; rnnfast.quantize takes "
                "float32 models: build the same model with dtype=np.float32 and copy the "
                "weights into it (model32.load_state_dict(model.state_dict()) converts them), "
                "then quantize"
            )
        return found[0].from_float(self, mode)


def quantize_layer(layer, mode, where):
    """``layer.quantized_copy(mode, where)``, refusing a layer that is a quantized copy already
    or has no ``quantized_copy`` (containers call it for each child, ``quantize`` for the model)."""
    done = getattr(layer, "quantized", None)
    if done is not None:
        raise ValueError(
            f"{where}: {type(layer).__name__} is already a quantized ({done}) inference copy; "
            "quantize the float32 model it was made from (quantizing twice would round twice)"
        )
    if not callable(getattr(layer, "quantized_copy", None)):
        raise ValueError(
            f"{where}: a {type(layer).__name__} cannot be quantized: it is not an rnnfast layer "
            "(a subclass of rnnfast.nn.Layer)"
        )
    return layer.quantized_copy(mode, where)
