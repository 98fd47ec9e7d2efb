"""The layers of ``rnnfast.keras``: Keras's constructors, names and weight layout over
rnnfast's own layers (``rnnfast.RNN``, ``GRU``, ``LSTM``, ``Dense``, ``Dropout``,
``Embedding``).

A layer here holds Keras's arguments until it sees the shape of its input (its
``input_shape=``, the model's ``Input``, or the first data), then builds the rnnfast layer that
computes it (``layer.layer``) with Keras's default initial weights. Every sequence is batch
first, as in Keras.
"""

from __future__ import annotations

import copy

import numpy as np

from .. import nn
from .._validation import (
    check_bool,
    check_choice,
    check_positive_int,
    check_probability,
    describe,
    is_int,
    type_error,
    value_error,
)
from ..io import interop
from ..nn.activations import check_activation
from ..nn.recurrent.rnn_options import MERGE_MODES
from ._bf16_dense import BF16ProductsDense
from ._calls import (
    array_backward,
    array_call,
    eager_call,
    recurrent_backward,
    recurrent_call,
    symbolic_call,
)
from ._initializers import initializer, recurrent_weights
from ._masking import MaskingCore
from ._policy import MIXED, config_dtype, policy_name, variable_dtype
from ._symbolic import KerasTensor, is_symbolic

__all__ = [
    "GRU",
    "LSTM",
    "Bidirectional",
    "Dense",
    "Dropout",
    "Embedding",
    "Input",
    "Layer",
    "Masking",
    "SimpleRNN",
    "TimeDistributed",
]


def checked_shape(name, shape):
    """A sample's shape (no batch axis): a tuple of positive ints and None (a size not fixed)."""
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)) or not all(
        s is None or (is_int(s) and s > 0) for s in shape
    ):
        raise type_error(name, "a tuple of positive ints or None, e.g. (None, 8)", shape)
    return tuple(None if s is None else int(s) for s in shape)


def as_array(value):
    """A Keras variable, torch tensor or array-like as a NumPy array (read, not copied)."""
    value = getattr(value, "value", value)  # a Keras variable: its backend tensor
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return np.asarray(value)


# Keras arguments the front does not compute: accepted at Keras's default (None), refused
# otherwise, naming the argument (never taken and ignored)
_UNSUPPORTED = {
    "kernel_regularizer": "regularization losses are not computed",
    "recurrent_regularizer": "regularization losses are not computed",
    "bias_regularizer": "regularization losses are not computed",
    "activity_regularizer": "regularization losses are not computed",
    "embeddings_regularizer": "regularization losses are not computed",
    "kernel_constraint": "weight constraints are not applied",
    "recurrent_constraint": "weight constraints are not applied",
    "bias_constraint": "weight constraints are not applied",
    "embeddings_constraint": "weight constraints are not applied",
    "lora_rank": "LoRA is not supported",
    "quantization_config": "quantized Keras layers are not supported",
}


def refuse_unsupported(class_name, kwargs):
    """Take Keras's arguments that the front does not compute out of ``kwargs``: each at its
    Keras default (None) is dropped, any other value is a NotImplementedError naming it."""
    for key in [k for k in kwargs if k in _UNSUPPORTED]:
        value = kwargs.pop(key)
        if value is not None:
            raise NotImplementedError(
                f"{key}: {class_name} of rnnfast.keras does not support {key}={value!r} "
                f"({_UNSUPPORTED[key]}); leave it None, or use keras itself for this layer"
            )


class Input(KerasTensor):
    """Keras's ``Input(shape, batch_size=None, name=None, dtype=None, batch_shape=None)``: the
    shape of one sample, without the batch axis. It is a model's first entry
    (``Sequential([Input((None, 8)), SimpleRNN(64)])``) or the symbolic input of a functional
    model (``x = Input((None, 8)); y = LSTM(4)(x); Model(x, y)``).

    Parameters
    ----------
    shape : tuple of int or None
        (timesteps, features) for sequences, None where the size varies.
    batch_size : int, optional
        A fixed batch size, which Keras's ``stateful`` layers need (their state is one row per
        sample of the batch).
    dtype : optional
        "float32" (Keras's default: float data is cast to it) or "float64"; an integer dtype
        ("int32", "int64") for the ids an Embedding reads.
    batch_shape : tuple, optional
        ``(batch_size, *shape)`` at once, instead of ``shape`` and ``batch_size``.
    """

    def __init__(self, shape=None, batch_size=None, name=None, dtype=None, batch_shape=None):
        if batch_shape is not None:
            if shape is not None or batch_size is not None:
                raise ValueError(
                    "batch_shape: give either shape (and batch_size) or batch_shape, not both"
                )
            if not isinstance(batch_shape, (tuple, list)) or not batch_shape:
                raise type_error("batch_shape", "a tuple (batch_size, *shape)", batch_shape)
            batch_size, shape = batch_shape[0], tuple(batch_shape[1:])
        if shape is None:
            raise ValueError("shape: expected the shape of one sample, e.g. (None, 8), got None")
        sample = checked_shape("shape", shape)
        if batch_size is not None:
            batch_size = check_positive_int("batch_size", batch_size)
        if name is not None and not isinstance(name, str):
            raise type_error("name", "a str", name)
        super().__init__((batch_size, *sample), name=name)
        self.dtype = None if dtype is None else np.dtype(dtype)
        if self.dtype is not None and self.dtype.kind not in "fiu":
            raise value_error("dtype", "a float or an integer dtype", dtype)

    @property
    def batch_size(self):
        """The fixed batch size, or None."""
        return self.shape[0]

    def __repr__(self):
        batch = "" if self.shape[0] is None else f", batch_size={self.shape[0]}"
        return f"Input(shape={self.shape[1:]}{batch})"


class Layer:
    """What every layer of the front shares: the common Keras keywords, the build from the
    input shape, the weights in Keras's layout and the parameter count.

    Parameters
    ----------
    input_shape : tuple, optional
        Keras's: the shape of one sample, given to a model's first layer (accepted without a
        warning, as the notes use it).
    name : str, optional
        The name the summary shows; the model gives one (``dense``, ``dense_1``, ...) when None.
    dtype : "float32", "float64" or "mixed_bfloat16", optional
        Keras's dtype policy: a name, a ``keras.DTypePolicy`` or its config; None (the
        default) takes Keras's global policy (``keras.mixed_precision.set_global_policy``),
        float32 without one. "mixed_bfloat16" keeps the weights float32 and computes with
        bf16 products (``rnnfast.precision``), returning bfloat16 outputs, as Keras's mixed
        policy; any other policy is a ValueError naming it (``keras._policy``).
    seed : int, optional
        Seeds the initial weights and the dropout masks.
    trainable : bool
        Keras's: False freezes the layer's weights (fit leaves them as they are; the summary
        counts them as non-trainable). May be assigned later, also after compile, as in
        Keras 3.
    """

    keras_name = "layer"  # the stem of default names
    reads_ids = False  # an Embedding reads integer ids: they are not cast to floats
    supports_masking = True  # Keras's: a mask coming in passes through (or is read)

    def __init__(
        self, *, input_shape=None, name=None, dtype=None, seed=None, trainable=True, **unknown
    ):
        refuse_unsupported(type(self).__name__, unknown)
        if unknown:
            # Keras 3 refuses these too (a ValueError); say where the batch size goes now
            hint = ""
            if {"batch_input_shape", "batch_size"} & set(unknown):
                hint = (
                    "; Keras 3 takes a fixed batch size on the model's input: put "
                    "Input(shape, batch_size=N) (or Input(batch_shape=(N, ...))) first"
                )
            raise ValueError(
                f"Unrecognized keyword arguments passed to {type(self).__name__}: "
                f"{sorted(unknown)}{hint}"
            )
        self.trainable = trainable
        self.input_shape_arg = (
            None if input_shape is None else checked_shape("input_shape", input_shape)
        )
        if name is not None and not isinstance(name, str):
            raise type_error("name", "a str", name)
        self.name = name
        self.dtype_policy = policy_name(dtype, type(self).__name__)
        self.dtype = variable_dtype(self.dtype_policy)  # the weights', and between layers
        self.seed = seed
        self.layer = None  # the rnnfast layer, once built
        self.input_shape = self.output_shape = None

    @property
    def built(self):
        """Whether the rnnfast layer exists (the input shape was seen)."""
        return self.layer is not None

    @property
    def compute_dtype(self):
        """Keras's: the dtype of the computation and of the outputs ("bfloat16" under the
        mixed policy)."""
        return "bfloat16" if self.dtype_policy == MIXED else self.dtype.name

    @property
    def variable_dtype(self):
        """Keras's: the dtype of the weights."""
        return self.dtype.name

    @property
    def precision(self):
        """The products of the rnnfast layer's GEMMs: "bf16" under the mixed policy."""
        return "bf16" if self.dtype_policy == MIXED else "float32"

    # the attributes holding the layers a wrapper wraps (Bidirectional's directions,
    # TimeDistributed's inner layer): assigning trainable sets theirs too, as Keras's
    _wrapped = ()

    @property
    def trainable(self):
        """Whether fit trains the layer's weights (Keras's ``trainable``); a wrapper's
        assignment sets its wrapped layers' too."""
        return self._trainable

    @trainable.setter
    def trainable(self, value):
        self._trainable = check_bool("trainable", value)
        for attr in self._wrapped:
            if attr in self.__dict__:  # not while the wrapper's __init__ sets it
                getattr(self, attr).trainable = value

    def frozen_parameters(self):
        """The names of the rnnfast layer's parameters that fit leaves as they are because
        the layer is frozen (``trainable = False``): all of them, or none."""
        if self.trainable or not self.built:
            return ()
        return tuple(name for name, _ in self.layer.named_parameters())

    def trainable_count(self):
        """The number of weights fit trains, Keras's count (the summary's)."""
        return self.count_params() if self.trainable else 0

    # ---- calls: symbolic (a graph node), on arrays, and as a node of a functional model ---------

    def __call__(self, inputs, initial_state=None, training=None, mask=None):
        """Keras's layer call: on a symbolic tensor (``Input`` or a layer's output) it records
        the call for ``Model(inputs, outputs)`` and returns the output tensor (Keras's list of
        them with ``return_state``); on a NumPy array it returns the output at once."""
        states = () if initial_state is None else initial_state  # one array, or a list
        if is_symbolic(inputs) or is_symbolic(states):
            return symbolic_call(self, inputs, initial_state, training, mask)
        return eager_call(self, inputs, initial_state, training, mask)

    def output_shapes(self, input_shape, states):
        """The shapes of the outputs of a call (Keras's list), ``states`` initial states given."""
        return [self.compute_output_shape(tuple(input_shape))]

    def call_mask(self, x, mask):
        """The valid mask that ``layer(x, mask=mask)`` on arrays runs with: None here, as
        Keras's layers that read no mask (Dense, Dropout, Embedding, Masking) give the same
        output with one; a recurrent layer's skips the masked steps."""
        return None

    def run(self, x, states, valid, suspect, who):
        """A functional model's call of the layer on arrays: ``(outputs, their valid masks,
        suspect)`` (``nn.masking``)."""
        return array_call(self, x, states, valid, suspect, who)

    def run_backward(self, d_outputs):
        """``(dx, d_initial_states)`` of the last training :meth:`run`."""
        return array_backward(self, d_outputs)

    def build(self, input_shape, weights=None):
        """Make the rnnfast layer for inputs of ``input_shape`` (with the batch axis, None for
        it), with Keras's initial weights (or ``weights``, in Keras's layout, as a loaded file
        gives them: no initializer runs then). A built layer only checks that the shape fits."""
        input_shape = tuple(input_shape)
        if self.built:
            if input_shape[-1:] != self.input_shape[-1:]:
                raise ValueError(
                    f"{self._who()}: built for inputs of shape {self.input_shape}, got "
                    f"{input_shape}"
                )
            return
        self.layer = self._make(input_shape)
        self.input_shape = input_shape
        self.output_shape = self.compute_output_shape(input_shape)
        if weights is None:
            weights = self._initial_weights(np.random.default_rng(self.seed))
        if weights:
            self.set_weights(weights)

    def weight_shapes(self, input_shape):
        """The shapes of the weights (Keras's layout, ``get_weights`` order) that this layer
        would have for inputs of ``input_shape``, from its configuration alone: nothing is
        built or allocated, so a loader compares them with a file's arrays first.

        Raises
        ------
        ValueError
            ``input_shape`` does not fit the layer (its number of dimensions, an unknown last
            dimension).
        """
        raise NotImplementedError(f"{self._who()}: weight_shapes is not implemented")

    _config_keys = ()  # the constructor's arguments that get_config gives, Keras's names

    def get_config(self):
        """Keras's ``get_config()``: the constructor's arguments (with ``name``,
        ``trainable``, ``dtype``), from which :meth:`from_config` makes the same layer (not its
        weights); a wrapped layer as ``{"class_name", "config"}``."""
        config = {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": config_dtype(self.dtype_policy),
        }
        for key in self._config_keys:
            value = getattr(self, key)
            if isinstance(value, Layer):
                value = {"class_name": type(value).__name__, "config": value.get_config()}
            config[key] = value
        return config

    @classmethod
    def from_config(cls, config):
        """Keras's ``from_config``: the layer of a :meth:`get_config` dict (Keras's legacy
        keys, such as a GRU's ``implementation``, as the constructor takes them; Keras's
        ``DTypePolicy`` dict for ``dtype``, which the constructor reads; a wrapped layer as
        ``{"class_name", "config"}``). A key the constructor does not take is refused by name
        (ValueError)."""
        config = dict(config)
        for key, value in config.items():
            # an initializer's config is read when called; a DTypePolicy's by the constructor
            if key.endswith("_initializer") or key == "dtype":
                continue
            if isinstance(value, dict) and "class_name" in value and "config" in value:
                inner = globals().get(value["class_name"])
                if not (isinstance(inner, type) and issubclass(inner, Layer)):
                    raise ValueError(
                        f"{key}: {value['class_name']!r} is not a layer of rnnfast.keras"
                    )
                config[key] = inner.from_config(value["config"])
        return cls(**config)

    def weight_file_paths(self, count):
        """Where Keras's weights file keeps this layer's ``count`` weights, relative to its
        group (``layers/<key>``): ``(paths in get_weights order, groups Keras writes with no
        weights in them)``; a plain layer's are ``vars/0``, ``vars/1``, ..."""
        return [f"vars/{i}" for i in range(count)], ["vars"]

    def get_weights(self):
        """The weights as Keras lists them (``[kernel, bias]``, ``[kernel, recurrent_kernel,
        bias]``, ...): new arrays; empty before the layer is built."""
        return self._get_weights() if self.built else []

    def set_weights(self, weights):
        """Load weights in Keras's layout (what ``get_weights`` and Keras's own layer return),
        all of them or nothing.

        Raises
        ------
        ValueError
            The layer is not built yet, or the number or a shape of the arrays differs.
        """
        if not self.built:
            raise ValueError(
                f"{self._who()}: not built yet; give the model an input shape (input_shape= or "
                "Input) or call it on data first"
            )
        weights = [as_array(w) for w in weights]
        current = self.get_weights()
        if len(weights) != len(current):
            raise ValueError(
                f"weights: {self._who()} expected {len(current)} arrays, got {len(weights)}"
            )
        for i, (w, c) in enumerate(zip(weights, current)):
            if w.shape != c.shape:
                raise ValueError(
                    f"weights[{i}]: {self._who()} expected shape {c.shape}, got shape {w.shape}"
                )
        self._set_weights(weights)

    def count_params(self):
        """The number of weights, Keras's count."""
        return sum(w.size for w in self.get_weights())

    def fixed_parameters(self):
        """The names of the rnnfast layer's parameters that Keras's layer does not have, held
        at zero and left out of training (none here)."""
        return ()

    def _who(self):
        return f"{type(self).__name__} {self.name!r}"

    def _needs_dims(self, input_shape, ndim, what):
        if len(input_shape) != ndim:
            raise ValueError(
                f"{self._who()}: expected inputs of {ndim} dimensions {what}, got shape "
                f"{input_shape}"
            )
        if input_shape[-1] is None:
            raise ValueError(
                f"{self._who()}: the last dimension of the inputs must be known, got shape "
                f"{input_shape}"
            )

    def __repr__(self):
        return f"<{type(self).__name__} name={self.name!r}, built={self.built}>"


# ---- recurrent layers ---------------------------------------------------------------------------


def check_static_batch(layer, input_shape):
    """Keras's rule: a stateful layer's state has one row per sample, so its batch size must
    be fixed when it is built."""
    if layer.stateful and input_shape[0] is None:
        raise ValueError(
            f"{layer._who()}: stateful=True needs a fixed batch size, got input shape "
            f"{tuple(input_shape)}; put Input(shape, batch_size=N) (or Input(batch_shape="
            "(N, ...))) before it, as Keras 3 requires"
        )


def check_stateful_batch(layer, x):
    """Keras's rule: every batch a stateful layer reads has the batch size it was built for
    (the last, smaller batch of a data set too: choose a batch_size that divides it)."""
    expected = layer.input_shape[0] if layer.built else None
    if layer.stateful and expected is not None and np.shape(x)[0] != expected:
        raise ValueError(
            f"{layer._who()}: a stateful layer reads batches of its fixed batch size "
            f"{expected}, got a batch of {np.shape(x)[0]} (input shape {np.shape(x)}); pass "
            f"batch_size={expected} to predict / evaluate / fit, with a number of samples "
            f"that it divides"
        )


def check_use_cudnn(value):
    """Keras's ``use_cudnn`` of a GRU / LSTM: "auto" or False (the CPU kernels run either
    way); True asks for NVIDIA's cuDNN, which Keras refuses without it too."""
    if value is True:
        raise ValueError(
            "use_cudnn: True asks for NVIDIA's cuDNN kernels, and rnnfast.keras runs on the "
            "CPU; pass use_cudnn='auto' (Keras's default) or False"
        )
    if value not in ("auto", False):
        raise value_error("use_cudnn", "'auto', True or False", value)
    return value


def check_implementation(value):
    """Keras's ``implementation`` (0, 1 or 2) changes only how Keras batches the gates'
    products: the same result; kept for Keras code and configs that give it."""
    if not is_int(value) or value not in (0, 1, 2):
        raise value_error("implementation", "0, 1 or 2", value)
    return int(value)


class _Recurrent(Layer):
    """SimpleRNN, GRU and LSTM: Keras's recurrent arguments, the rnnfast layer of the cell."""

    core_class = None
    # the cell's gate blocks and Keras's states per direction (h; an LSTM's h and c), from
    # the rnnfast layer's cell description (nn.recurrent.cells)
    gates = property(lambda self: self.core_class.cell.num_gates)
    num_states = property(lambda self: self.core_class.cell.num_states)
    output_merge_mode = "concat"  # one output (a Bidirectional with merge_mode=None has two)
    _config_keys = (
        "units",
        "activation",
        "use_bias",
        "kernel_initializer",
        "recurrent_initializer",
        "bias_initializer",
        "dropout",
        "recurrent_dropout",
        "return_sequences",
        "return_state",
        "go_backwards",
        "stateful",
        "unroll",
        "zero_output_for_mask",
        "seed",
    )

    def __init__(
        self,
        units,
        activation="tanh",
        use_bias=True,
        dropout=0.0,
        recurrent_dropout=0.0,
        return_sequences=False,
        return_state=False,
        go_backwards=False,
        stateful=False,
        kernel_initializer="glorot_uniform",
        recurrent_initializer="orthogonal",
        bias_initializer="zeros",
        unroll=False,
        zero_output_for_mask=False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.units = check_positive_int("units", units)
        # Keras's initializers: names, Keras objects (Constant(0.01), ...) or functions
        for key, value in (
            ("kernel_initializer", kernel_initializer),
            ("recurrent_initializer", recurrent_initializer),
            ("bias_initializer", bias_initializer),
        ):
            initializer(key, value, self.dtype)  # checked now, called when built
            setattr(self, key, value)
        # Keras's unroll changes only how the loop is compiled: the kernels run one loop
        self.unroll = check_bool("unroll", unroll)
        # Keras's: the output of a step a mask skips is zeros (True) or the previous one
        self.zero_output_for_mask = check_bool("zero_output_for_mask", zero_output_for_mask)
        self.activation = check_choice("activation", activation, ("tanh", "relu"))
        self.use_bias = check_bool("use_bias", use_bias)
        # Keras's dropout: on the inputs of each step (rnnfast's input_dropout)
        self.dropout = check_probability("dropout", dropout)
        self.recurrent_dropout = check_probability("recurrent_dropout", recurrent_dropout)
        self.return_sequences = check_bool("return_sequences", return_sequences)
        self.return_state = check_bool("return_state", return_state)
        self.go_backwards = check_bool("go_backwards", go_backwards)
        self.stateful = check_bool("stateful", stateful)

    def core_layer(self, input_size, bidirectional=False, merge_mode="concat"):
        """The rnnfast layer of this cell over ``input_size`` features, batch first."""
        return self.core_class(
            input_size,
            self.units,
            bias=self.use_bias,
            batch_first=True,
            bidirectional=bidirectional,
            dtype=self.dtype,
            # Keras's mixed_bfloat16: bf16 products in forward, backward and step
            precision=self.precision,
            seed=self.seed,
            merge_mode=merge_mode,
            go_backwards=self.go_backwards,
            return_sequences=self.return_sequences,
            return_state=self.return_state,
            stateful=self.stateful,
            input_dropout=self.dropout,
            recurrent_dropout=self.recurrent_dropout,
            # Keras: a step a mask skips repeats the previous output unless
            # zero_output_for_mask (Keras's Bidirectional sets it to return_sequences)
            zero_output_for_mask=(
                self.return_sequences if bidirectional else self.zero_output_for_mask
            ),
            **self._cell_options(),
        )

    def _make(self, input_shape):
        self._needs_dims(input_shape, 3, "(batch, timesteps, features)")
        check_static_batch(self, input_shape)
        return self.core_layer(input_shape[-1])

    def output_shapes(self, input_shape, states):
        """The output's shape, then with ``return_state`` each state's (batch, units)."""
        shapes = [self._sequence_shape(tuple(input_shape))]
        if self.return_state:
            shapes += [(input_shape[0], self.units)] * self.num_states
        return shapes

    def run(self, x, states, valid, suspect, who):
        check_stateful_batch(self, x)
        return recurrent_call(self, x, states, valid, suspect, who)

    def call_mask(self, x, mask):
        """Keras's ``mask`` of a call on arrays: (batch, timesteps) booleans, True on the
        steps to run; a masked step keeps the state (see ``zero_output_for_mask``)."""
        mask = np.asarray(getattr(mask, "value", mask))
        if hasattr(mask, "detach"):
            mask = mask.detach().cpu().numpy()
        if mask.shape != x.shape[:2]:
            raise ValueError(
                f"mask: {self._who()} expected a mask of shape {x.shape[:2]} (the inputs' "
                f"batch and timesteps), got shape {mask.shape}"
            )
        return mask.astype(bool)

    def run_backward(self, d_outputs):
        return recurrent_backward(self, d_outputs)

    def _sequence_shape(self, input_shape, width=None):
        """The output's shape (the sequence, or the last step) for ``input_shape``."""
        width = self.units if width is None else width
        if self.return_sequences:
            return (input_shape[0], input_shape[1], width)
        return (input_shape[0], width)

    def compute_output_shape(self, input_shape):
        """Keras's: the output's shape, or with ``return_state`` the tuple of it and each
        state's (batch, units)."""
        shapes = self.output_shapes(input_shape, 0)
        return shapes[0] if len(shapes) == 1 else tuple(shapes)

    def _initializers(self):
        """The keywords of ``recurrent_weights`` for this layer's three initializers."""
        return {
            "kernel": initializer("kernel_initializer", self.kernel_initializer, self.dtype),
            "recurrent": initializer(
                "recurrent_initializer", self.recurrent_initializer, self.dtype
            ),
            "bias_init": initializer("bias_initializer", self.bias_initializer, self.dtype),
        }

    def weight_shapes(self, input_shape):
        """``[kernel (D, G*H), recurrent_kernel (H, G*H)(, bias)]`` of one direction."""
        self._needs_dims(tuple(input_shape), 3, "(batch, timesteps, features)")
        width = self.gates * self.units
        shapes = [(int(input_shape[-1]), width), (self.units, width)]
        if self.use_bias:
            shapes.append((2, width) if getattr(self, "reset_after", False) else (width,))
        return shapes

    def weight_file_paths(self, count):
        """Keras's: the weights under the cell (``cell/vars/0``, ...)."""
        return [f"cell/vars/{i}" for i in range(count)], ["vars"]

    def direction_weights(self, rng, input_size):
        """Keras's initial weights of one direction."""
        return recurrent_weights(
            rng, input_size, self.units, self.gates, self.use_bias, **self._initializers()
        )

    def _initial_weights(self, rng):
        return self.direction_weights(rng, self.input_shape[-1])

    def _get_weights(self):
        return interop.keras_weights(self.layer)

    def _set_weights(self, weights):
        interop.load_keras(self.layer, weights)

    def reset_states(self):
        """Forget the carried state of a ``stateful`` layer (Keras 2's name, kept by Keras 3)."""
        if self.built:
            self.layer.reset_state()

    def reset_state(self):
        """Forget the carried state of a ``stateful`` layer (Keras 3's name)."""
        self.reset_states()

    def fixed_parameters(self):
        """Keras's SimpleRNN and LSTM (and a GRU without ``reset_after``) have one bias where
        rnnfast has PyTorch's two: ``bias_hh`` holds zeros and is not trained, so that a step
        moves the one bias as Keras's does (training both would move their sum twice as far)."""
        if not self.built or getattr(self, "reset_after", False):
            return ()
        return tuple(
            name for name, _ in self.layer.named_parameters() if name.startswith("bias_hh")
        )


class SimpleRNN(_Recurrent):
    """Keras's ``SimpleRNN(units, activation="tanh", use_bias=True, dropout=0.0,
    recurrent_dropout=0.0, return_sequences=False, return_state=False, go_backwards=False,
    stateful=False)`` on ``rnnfast.RNN``; ``dropout`` is Keras's, on the inputs. Takes the
    keywords of :class:`Layer` too."""

    core_class = nn.RNN
    keras_name = "simple_rnn"

    def _cell_options(self):
        return {"nonlinearity": self.activation}


class GRU(_Recurrent):
    """Keras's ``GRU`` on ``rnnfast.GRU``: SimpleRNN's arguments and ``recurrent_activation``
    ("sigmoid" or "hard_sigmoid") and ``reset_after`` (True, Keras 3's default: PyTorch's
    form; False: the reset gate before the recurrent product)."""

    core_class = nn.GRU
    keras_name = "gru"
    _config_keys = (
        *_Recurrent._config_keys,
        "recurrent_activation",
        "reset_after",
        "use_cudnn",
        "implementation",
    )

    def __init__(
        self,
        units,
        recurrent_activation="sigmoid",
        reset_after=True,
        use_cudnn="auto",
        implementation=2,
        **kwargs,
    ):
        super().__init__(units, **kwargs)
        self.recurrent_activation = check_choice(
            "recurrent_activation", recurrent_activation, ("sigmoid", "hard_sigmoid")
        )
        self.reset_after = check_bool("reset_after", reset_after)
        self.use_cudnn = check_use_cudnn(use_cudnn)
        self.implementation = check_implementation(implementation)

    def _cell_options(self):
        return {
            "activation": self.activation,
            "recurrent_activation": self.recurrent_activation,
            "reset_after": self.reset_after,
        }

    def direction_weights(self, rng, input_size):
        rows = 2 if self.reset_after else 1  # reset_after: the input and the recurrent bias
        return recurrent_weights(
            rng,
            input_size,
            self.units,
            self.gates,
            self.use_bias,
            bias_rows=rows,
            **self._initializers(),
        )


class LSTM(_Recurrent):
    """Keras's ``LSTM`` on ``rnnfast.LSTM``: SimpleRNN's arguments and
    ``recurrent_activation`` ("sigmoid" or "hard_sigmoid") and ``unit_forget_bias`` (the
    forget gate's bias starts at 1)."""

    core_class = nn.LSTM
    keras_name = "lstm"
    _config_keys = (
        *_Recurrent._config_keys,
        "recurrent_activation",
        "unit_forget_bias",
        "use_cudnn",
        "implementation",
    )

    def __init__(
        self,
        units,
        recurrent_activation="sigmoid",
        unit_forget_bias=True,
        use_cudnn="auto",
        implementation=2,
        **kwargs,
    ):
        super().__init__(units, **kwargs)
        self.recurrent_activation = check_choice(
            "recurrent_activation", recurrent_activation, ("sigmoid", "hard_sigmoid")
        )
        self.unit_forget_bias = check_bool("unit_forget_bias", unit_forget_bias)
        self.use_cudnn = check_use_cudnn(use_cudnn)
        self.implementation = check_implementation(implementation)

    def _cell_options(self):
        return {
            "activation": self.activation,
            "recurrent_activation": self.recurrent_activation,
        }

    def direction_weights(self, rng, input_size):
        return recurrent_weights(
            rng,
            input_size,
            self.units,
            4,
            self.use_bias,
            forget_bias=self.unit_forget_bias,
            **self._initializers(),
        )


def check_backward_layer(layer, backward):
    """Keras's ``backward_layer``: a layer of the same kind as ``layer`` that runs backwards
    (``go_backwards=True``) with its own initializers; rnnfast runs the two directions as one
    layer, so every other setting must be ``layer``'s (a ValueError naming the first that
    differs, as Keras's for go_backwards, return_sequences, return_state and stateful)."""
    if type(backward) is not type(layer):
        raise type_error(
            "backward_layer", f"a {type(layer).__name__} of rnnfast.keras, as layer", backward
        )
    if not backward.go_backwards:
        raise ValueError(
            "backward_layer: expected go_backwards=True (Keras: the forward and the backward "
            "layer must have different go_backwards), got go_backwards=False"
        )
    if backward.built:
        raise ValueError("backward_layer: already built; wrap a new layer")
    skip = {"go_backwards", "name", "trainable", "_trainable", "layer", "input_shape_arg"}
    skip |= {"kernel_initializer", "recurrent_initializer", "bias_initializer", "seed"}
    skip |= {"use_cudnn", "implementation", "unroll"}  # speed only (use_cudnn: layer's wins)
    for key, value in vars(layer).items():
        if key in skip:
            continue
        other = vars(backward).get(key)
        if type(other) is not type(value) or other != value:
            raise ValueError(
                f"backward_layer: {key}={other!r}, but layer has {key}={value!r}; rnnfast runs "
                "both directions as one layer, so they differ only in their initializers, "
                "seed, name and trainable"
            )
    return backward


def _wrapper_defaults(layer, kwargs, wrapper):
    """A wrapper's (Bidirectional's, TimeDistributed's) keywords: the wrapped ``layer``'s seed
    and trainable unless given, and its dtype policy, but where Keras's rule differs: Keras's
    wrapper takes the global policy, and so does this one where the wrapped layer's or the
    global one is "mixed_bfloat16" (the wrapped layer's policy decides the products, the
    wrapper's the outputs' dtype, as in Keras). ``layer`` must not be built yet."""
    if layer.built:
        raise ValueError("layer: already built; wrap a new layer")
    if kwargs.get("dtype") is None:
        keras_default = policy_name(None, wrapper)
        if MIXED not in (layer.dtype_policy, keras_default):
            kwargs["dtype"] = layer.dtype_policy  # the front's rule for float32 / float64
        elif variable_dtype(keras_default) == layer.dtype:
            kwargs["dtype"] = keras_default
        else:
            raise ValueError(
                f"dtype: the wrapped {type(layer).__name__} has the dtype policy "
                f"{layer.dtype_policy!r}, and Keras's {wrapper} would take the global policy "
                f"{keras_default!r}, whose weights' dtype differs; pass dtype= to {wrapper}"
            )
    kwargs.setdefault("seed", layer.seed)
    kwargs.setdefault("trainable", layer.trainable)


class Bidirectional(Layer):
    """Keras's ``Bidirectional(layer, merge_mode="concat")``: the recurrent ``layer`` run both
    ways by one bidirectional rnnfast layer, the two outputs merged ("concat", "sum", "mul",
    "ave", or None for the list of both). Its weights are the forward direction's, then the
    backward's, as Keras lists them. The wrapped layer's ``input_shape``, dtype and seed are
    the wrapper's unless given here."""

    keras_name = "bidirectional"
    _config_keys = ("merge_mode",)
    _wrapped = ("forward_layer", "backward_layer")

    def get_config(self):
        """Keras's: the merge mode and the two wrapped layers' configs."""
        config = super().get_config()
        for key, layer in (("layer", self.forward_layer), ("backward_layer", self.backward_layer)):
            config[key] = {"class_name": type(layer).__name__, "config": layer.get_config()}
        return config

    def __init__(self, layer, merge_mode="concat", backward_layer=None, **kwargs):
        if not isinstance(layer, _Recurrent):
            raise type_error("layer", "a SimpleRNN, GRU or LSTM of rnnfast.keras", layer)
        if layer.go_backwards:
            raise ValueError(
                "layer: go_backwards=True inside Bidirectional would run the forward direction "
                "backwards; wrap a layer with go_backwards=False"
            )
        _wrapper_defaults(layer, kwargs, "Bidirectional")
        if layer.input_shape_arg is not None:
            kwargs.setdefault("input_shape", layer.input_shape_arg)
        self.forward_layer = layer
        # Keras's backward_layer: by default a copy of layer's settings, run backwards; its
        # trainable (and forward_layer's) freezes one direction
        if backward_layer is None:
            self.backward_layer = copy.copy(layer)
            self.backward_layer.go_backwards = True
            if layer.name is not None:
                self.backward_layer.name = f"backward_{layer.name}"
        else:
            self.backward_layer = check_backward_layer(layer, backward_layer)
        if hasattr(layer, "use_cudnn"):  # Keras keeps the wrapped layer's for both
            self.backward_layer.use_cudnn = layer.use_cudnn
        super().__init__(**kwargs)
        # None (the two directions' outputs as a list) is one of Keras's choices
        self.merge_mode = (
            None if merge_mode is None else check_choice("merge_mode", merge_mode, MERGE_MODES)
        )

    # what the graph's calls read of a recurrent layer: the wrapped layer's settings
    units = property(lambda self: self.forward_layer.units)
    # the products are the wrapped layer's (its policy's); the outputs' dtype the wrapper's
    precision = property(lambda self: self.forward_layer.precision)
    num_states = property(lambda self: self.forward_layer.num_states)
    return_state = property(lambda self: self.forward_layer.return_state)
    stateful = property(lambda self: self.forward_layer.stateful)
    output_merge_mode = property(lambda self: self.merge_mode)
    call_mask = _Recurrent.call_mask
    run = _Recurrent.run
    run_backward = _Recurrent.run_backward

    def frozen_parameters(self):
        """The whole layer's parameters when it is frozen, else those of a frozen direction
        (``forward_layer.trainable`` / ``backward_layer.trainable``)."""
        if not self.built:
            return ()
        names = [name for name, _ in self.layer.named_parameters()]
        if not self.trainable:
            return tuple(names)
        return tuple(
            n
            for n in names
            if not (self.backward_layer if n.endswith("_reverse") else self.forward_layer).trainable
        )

    def trainable_count(self):
        if not self.trainable:
            return 0
        half = self.count_params() // 2  # the two directions have the same weights
        return half * (self.forward_layer.trainable + self.backward_layer.trainable)

    def _make(self, input_shape):
        self._needs_dims(input_shape, 3, "(batch, timesteps, features)")
        check_static_batch(self, input_shape)
        return self.forward_layer.core_layer(input_shape[-1], True, self.merge_mode)

    def _sequence_shape(self, input_shape):
        """The shape of the merged output (of each direction's with merge_mode=None)."""
        units = self.forward_layer.units
        width = 2 * units if self.merge_mode == "concat" else units
        return self.forward_layer._sequence_shape(input_shape, width)

    def compute_output_shape(self, input_shape):
        """Keras's: the merged output's shape; a tuple of the outputs' shapes with
        merge_mode=None (two) or ``return_state`` (then the states')."""
        shapes = self.output_shapes(input_shape, 0)
        return shapes[0] if len(shapes) == 1 else tuple(shapes)

    def output_shapes(self, input_shape, states):
        """Keras's outputs: the merged output (the two directions' with merge_mode=None),
        then with ``return_state`` the forward direction's states and the backward's."""
        first = self._sequence_shape(tuple(input_shape))
        shapes = [first] * (2 if self.merge_mode is None else 1)
        if self.return_state:
            shapes += [(input_shape[0], self.units)] * (2 * self.num_states)
        return shapes

    def weight_shapes(self, input_shape):
        """The forward direction's shapes, then the backward's (the same)."""
        return 2 * self.forward_layer.weight_shapes(input_shape)

    def weight_file_paths(self, count):
        """Keras's: each direction's under ``forward_layer`` and ``backward_layer``."""
        paths, groups = [], ["vars"]
        for direction in ("forward_layer", "backward_layer"):
            layer = getattr(self, direction)
            inner, inner_groups = layer.weight_file_paths(count // 2)
            paths += [f"{direction}/{p}" for p in inner]
            groups += [f"{direction}/{g}" for g in inner_groups]
        return paths, groups

    def _initial_weights(self, rng):
        d = self.input_shape[-1]
        return [
            *self.forward_layer.direction_weights(rng, d),
            *self.backward_layer.direction_weights(rng, d),
        ]

    def _get_weights(self):
        return interop.keras_weights(self.layer)

    def _set_weights(self, weights):
        interop.load_keras(self.layer, weights)

    def reset_states(self):
        """Forget the carried state of a ``stateful`` layer (Keras 2's name, kept by Keras 3)."""
        if self.built:
            self.layer.reset_state()

    reset_state = _Recurrent.reset_state

    def fixed_parameters(self):
        """As the wrapped layer's (see ``SimpleRNN.fixed_parameters``)."""
        if not self.built or getattr(self.forward_layer, "reset_after", False):
            return ()
        return tuple(
            name for name, _ in self.layer.named_parameters() if name.startswith("bias_hh")
        )


# ---- the other layers ---------------------------------------------------------------------------


class Dense(Layer):
    """Keras's ``Dense(units, activation=None, use_bias=True)`` on ``rnnfast.Dense`` (over the
    last axis of any input): ``activation`` None / "linear", "relu", "tanh", "sigmoid" or
    "softmax". Weights ``[kernel (features, units), bias (units,)]``."""

    keras_name = "dense"
    _config_keys = ("units", "activation", "use_bias", "kernel_initializer", "bias_initializer")

    def __init__(
        self,
        units,
        activation=None,
        use_bias=True,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.units = check_positive_int("units", units)
        self.activation = check_activation(activation)
        self.use_bias = check_bool("use_bias", use_bias)
        for key, value in (
            ("kernel_initializer", kernel_initializer),
            ("bias_initializer", bias_initializer),
        ):
            initializer(key, value, self.dtype)  # checked now, called when built
            setattr(self, key, value)

    def _make(self, input_shape):
        if len(input_shape) < 2 or input_shape[-1] is None:
            raise ValueError(
                f"{self._who()}: expected inputs (batch, ..., features) with the features "
                f"known, got shape {input_shape}"
            )
        dense = BF16ProductsDense if self.dtype_policy == MIXED else nn.Dense
        return dense(
            input_shape[-1],
            self.units,
            bias=self.use_bias,
            dtype=self.dtype,
            seed=self.seed,
            activation=self.activation,
        )

    def compute_output_shape(self, input_shape):
        """The input's shape with the last axis ``units`` wide."""
        return (*input_shape[:-1], self.units)

    def weight_shapes(self, input_shape):
        """``[kernel (features, units)(, bias (units,))]``."""
        if len(input_shape) < 2 or input_shape[-1] is None:
            raise ValueError(
                f"{self._who()}: expected inputs (batch, ..., features) with the features "
                f"known, got shape {tuple(input_shape)}"
            )
        return [(int(input_shape[-1]), self.units)] + ([(self.units,)] if self.use_bias else [])

    def _initial_weights(self, rng):
        kernel_init = initializer("kernel_initializer", self.kernel_initializer, self.dtype)
        kernel = kernel_init(rng, (self.input_shape[-1], self.units))
        if not self.use_bias:
            return [kernel]
        bias_init = initializer("bias_initializer", self.bias_initializer, self.dtype)
        return [kernel, bias_init(rng, (self.units,))]

    def _get_weights(self):
        p = dict(self.layer.named_parameters())
        return [p["weight"].T.copy()] + ([p["bias"].copy()] if self.use_bias else [])

    def _set_weights(self, weights):
        state = {"weight": weights[0].T}
        if self.use_bias:
            state["bias"] = weights[1]
        self.layer.load_state_dict(state)


class Dropout(Layer):
    """Keras's ``Dropout(rate)`` on ``rnnfast.Dropout``: in training, each input is zeroed
    with probability ``rate`` and the rest scaled by 1 / (1 - rate)."""

    keras_name = "dropout"
    _config_keys = ("rate", "seed")

    def __init__(self, rate, noise_shape=None, **kwargs):
        super().__init__(**kwargs)
        self.rate = check_probability("rate", rate)
        if noise_shape is not None:
            raise value_error("noise_shape", "None (a mask per element)", noise_shape)

    def _make(self, input_shape):
        return nn.Dropout(self.rate, seed=self.seed, dtype=self.dtype)

    def compute_output_shape(self, input_shape):
        """The input's shape."""
        return tuple(input_shape)

    def weight_shapes(self, input_shape):
        """None: no weights."""
        return []

    def _initial_weights(self, rng):
        return []

    def _get_weights(self):
        return []

    def _set_weights(self, weights):
        pass  # no weights: set_weights has checked that none came


class Embedding(Layer):
    """Keras's ``Embedding(input_dim, output_dim, embeddings_initializer="uniform",
    mask_zero=False, weights=None)`` on ``rnnfast.Embedding``: integer ids to vectors; with
    ``mask_zero`` id 0 is padding, and the recurrent layers after it run each sequence to its
    length. Weights ``[embeddings (input_dim, output_dim)]``, initialised by
    ``embeddings_initializer`` (Keras's "uniform": U(-0.05, 0.05); a name, a Keras
    initializer object or a function, as the other layers' initializers), or set to
    ``weights``: Keras's (input_dim, output_dim) matrix of initial embeddings, or a list of
    that one matrix (checked at once; ValueError for another shape, as Keras's
    ``set_weights``)."""

    keras_name = "embedding"
    _config_keys = ("input_dim", "output_dim", "embeddings_initializer", "mask_zero")
    reads_ids = True

    def __init__(
        self,
        input_dim,
        output_dim,
        embeddings_initializer="uniform",
        mask_zero=False,
        weights=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.input_dim = check_positive_int("input_dim", input_dim)
        self.output_dim = check_positive_int("output_dim", output_dim)
        initializer("embeddings_initializer", embeddings_initializer, self.dtype)
        self.embeddings_initializer = embeddings_initializer
        self.mask_zero = check_bool("mask_zero", mask_zero)
        self._given_weights = None
        if weights is not None:  # Keras: a matrix, or a list of the one matrix
            if not (isinstance(weights, list) and len(weights) == 1):
                weights = [weights]
            table = as_array(weights[0])
            expected = (self.input_dim, self.output_dim)
            if table.shape != expected:
                raise ValueError(
                    f"weights: {self._who()} expected an embeddings matrix of shape "
                    f"(input_dim, output_dim) = {expected}, got shape {table.shape}"
                )
            if table.dtype.kind not in "fiu":
                raise value_error("weights", "an array of numbers", table.dtype)
            self._given_weights = [np.array(table, dtype=self.dtype)]  # a copy, as Keras's

    def _make(self, input_shape):
        return nn.Embedding(
            self.input_dim,
            self.output_dim,
            dtype=self.dtype,
            seed=self.seed,
            mask_zero=self.mask_zero,
        )

    def build(self, input_shape, weights=None):
        # ids: any shape fits the table, so a built Embedding takes every shape
        if self.built:
            return
        super().build(input_shape, weights)

    @property
    def supports_masking(self):
        """Keras's: an Embedding makes a mask with ``mask_zero`` (and reads none)."""
        return self.mask_zero

    def compute_output_shape(self, input_shape):
        """The ids' shape with an axis ``output_dim`` wide."""
        return (*input_shape, self.output_dim)

    def weight_shapes(self, input_shape):
        """``[embeddings (input_dim, output_dim)]``, whatever the ids' shape."""
        return [(self.input_dim, self.output_dim)]

    def _initial_weights(self, rng):
        if self._given_weights is not None:
            return self._given_weights
        init = initializer("embeddings_initializer", self.embeddings_initializer, self.dtype)
        return [init(rng, (self.input_dim, self.output_dim))]

    def _get_weights(self):
        return [self.layer.weight.copy()]

    def _set_weights(self, weights):
        self.layer.load_state_dict({"weight": weights[0]})


class Masking(Layer):
    """Keras's ``Masking(mask_value=0.0)``: a timestep whose features all equal ``mask_value``
    is padding; its features become zeros and the recurrent layers after it skip it (Keras's
    mask: a skipped step keeps the state, and a sequence output repeats the last output, zeros
    in a Bidirectional), the loss leaves it out. No weights."""

    keras_name = "masking"
    _config_keys = ("mask_value",)

    def __init__(self, mask_value=0.0, **kwargs):
        super().__init__(**kwargs)
        if isinstance(mask_value, bool) or not isinstance(mask_value, (int, float, np.number)):
            raise type_error("mask_value", "a number", mask_value)
        self.mask_value = float(mask_value)

    def _make(self, input_shape):
        self._needs_dims(input_shape, 3, "(batch, timesteps, features)")
        return MaskingCore(self.mask_value, dtype=self.dtype)

    def compute_mask(self, inputs, mask=None):
        """Keras's: the mask this layer hands on for ``inputs``, True on a step with a
        feature other than ``mask_value`` (a mask coming in is not read, as in Keras)."""
        x = np.asarray(getattr(inputs, "value", inputs))
        return np.any(x != self.mask_value, axis=-1)

    def compute_output_shape(self, input_shape):
        """The input's shape."""
        return tuple(input_shape)

    weight_shapes = Dropout.weight_shapes
    _initial_weights = Dropout._initial_weights
    _get_weights = Dropout._get_weights
    _set_weights = Dropout._set_weights


class TimeDistributed(Layer):
    """Keras's ``TimeDistributed(layer)`` for a ``Dense`` (or ``Dropout``): the layer applied at
    every timestep, (batch, timesteps, features) to (batch, timesteps, units), with the
    layer's weights (``[kernel, bias]``). rnnfast's Dense reads the last axis of any input, so
    it is that Dense itself; the padding passes through to the loss."""

    keras_name = "time_distributed"
    _wrapped = ("inner",)

    def get_config(self):
        """Keras's: the wrapped layer's config."""
        config = super().get_config()
        config["layer"] = {
            "class_name": type(self.inner).__name__,
            "config": self.inner.get_config(),
        }
        return config

    def __init__(self, layer, **kwargs):
        if not isinstance(layer, (Dense, Dropout)):
            raise type_error(
                "layer",
                "a Dense or Dropout of rnnfast.keras (a recurrent layer is not supported "
                "inside TimeDistributed)",
                layer,
            )
        _wrapper_defaults(layer, kwargs, "TimeDistributed")
        super().__init__(**kwargs)
        self.inner = layer  # Keras's ``layer`` attribute is this layer too

    # the products are the wrapped layer's (its policy's); the outputs' dtype the wrapper's
    precision = property(lambda self: self.inner.precision)

    def _make(self, input_shape):
        self._needs_dims(input_shape, 3, "(batch, timesteps, features)")
        self.inner.build(input_shape)  # a no-op when build built it first
        return self.inner.layer

    def compute_output_shape(self, input_shape):
        """The inner layer's output shape at each step."""
        return self.inner.compute_output_shape(tuple(input_shape))

    def weight_shapes(self, input_shape):
        """The wrapped layer's."""
        self._needs_dims(tuple(input_shape), 3, "(batch, timesteps, features)")
        return self.inner.weight_shapes(input_shape)

    def weight_file_paths(self, count):
        """Keras's: the wrapped layer's under ``layer``."""
        paths, groups = self.inner.weight_file_paths(count)
        return [f"layer/{p}" for p in paths], ["vars", *(f"layer/{g}" for g in groups)]

    def build(self, input_shape, weights=None):
        if self.built:
            return super().build(input_shape)
        self.inner.build(input_shape, weights)  # its own initial weights, or these
        super().build(input_shape, [])

    def _initial_weights(self, rng):
        return []  # the inner layer built with its own initial weights

    def call_mask(self, x, mask):
        """Keras's check of a ``mask`` (its batch and timesteps those of the inputs); the
        Dense inside reads no mask, so the output is the same with it, as in Keras."""
        shape = np.shape(mask)
        if len(shape) < 2:
            raise ValueError(
                "mask: The `mask` passed to the `TimeDistributed` layer must be at least 2D "
                f"(e.g., `(batch_size, timesteps)`), but it has shape {shape}"
            )
        if shape[:2] != x.shape[:2]:
            raise ValueError(
                f"The `mask` passed to the `TimeDistributed` layer has a shape {shape} that is "
                f"incompatible with the input shape {x.shape}: its first two dimensions (batch "
                f"size and timesteps) must be the input's, {x.shape[:2]}"
            )
        return None

    def _get_weights(self):
        return self.inner.get_weights()

    def _set_weights(self, weights):
        self.inner.set_weights(weights)


def describe_layer(layer):
    """``layer`` for a message: its class and name, or what it is."""
    return layer._who() if isinstance(layer, Layer) else describe(layer)
