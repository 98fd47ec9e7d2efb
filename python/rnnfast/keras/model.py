"""Keras's ``Sequential`` model over ``rnnfast.Sequential`` and ``rnnfast.training``: add,
compile, fit, evaluate, predict, summary and the weights in Keras's layout."""

from __future__ import annotations

import numpy as np

from .. import nn, optim, training
from .._validation import type_error
from . import optimizers
from ._compile import Objective, check_compile_extras, loss_name
from ._graph import chain_graph, predict_outputs
from ._inputs import model_input, model_targets
from ._policy import compute_outputs
from ._stepper import KerasStep
from ._summary import summary_text
from ._trainable import follow_trainable
from .layers import Input, Layer, describe_layer

__all__ = ["History", "Sequential"]


class History:
    """What ``fit`` returns, as Keras's: ``history`` ({"loss": [...], "val_loss": [...],
    "accuracy": [...], ...}, one value per epoch), ``epoch`` (their indices), ``params`` and
    ``model``."""

    def __init__(self, history, params, model):
        self.history = history
        self.epoch = list(range(len(history.get("loss", ()))))
        self.params = params
        self.model = model

    def __repr__(self):
        return f"<History epochs={len(self.epoch)} keys={sorted(self.history)}>"


class Sequential:
    """Keras's ``Sequential([layers], name="sequential")``: the layers of ``rnnfast.keras``
    one after another, computed by an ``rnnfast.Sequential`` of their rnnfast layers (its
    ``model``), trained by ``rnnfast.training``.

    The layers build when the input shape is known: from an ``Input`` added first, the first
    layer's ``input_shape=``, :meth:`build`, or the first data given to ``fit``, ``evaluate``,
    ``predict`` or a call. Inputs are batch first: (batch, timesteps, features) for
    sequences, (batch, timesteps) for the ids of an Embedding.

    For ``rnnfast.optim`` the model is a module: ``rnnfast.optim.Adam(model, lr=...)`` (once
    built) updates its weights, and ``compile(optimizer=...)`` takes that optimizer.
    """

    def __init__(self, layers=None, name=None):
        if name is not None and not isinstance(name, str):
            raise type_error("name", "a str", name)
        self.name = "sequential" if name is None else name
        self._layers = []
        self._input_shape = None  # (None, ...) once known
        self._model = None
        self._graph = None  # the graph runner, where Keras's behaviour needs it (_build_for)
        self._compiled = None
        self.optimizer = None  # the rnnfast.optim optimizer fit uses, once built
        self.history = None
        self.stop_training = False  # Keras's flag, which a callback sets to stop fit
        for layer in layers or ():
            self.add(layer)

    # ---- the layers ------------------------------------------------------------------------

    @property
    def layers(self):
        """The layers, in order (a new list)."""
        return list(self._layers)

    def add(self, layer):
        """Append a layer (or, first, an ``Input``); it builds at once when the input shape is
        known.

        Raises
        ------
        TypeError
            Not a layer of ``rnnfast.keras``.
        ValueError
            An Input after layers, or a layer already in the model.
        """
        if isinstance(layer, Input):
            if self._layers:
                raise ValueError("layer: an Input must come first, before any layer")
            self._input_shape = layer.shape
            return
        if not isinstance(layer, Layer):
            raise type_error("layer", "a layer of rnnfast.keras (SimpleRNN, Dense, ...)", layer)
        if any(layer is other for other in self._layers):
            raise ValueError(f"layer: {describe_layer(layer)} is already in the model")
        if self._layers and _several_outputs(self._layers[-1]):
            raise ValueError(
                f"layer: {describe_layer(self._layers[-1])} returns several arrays "
                "(return_state=True, or a Bidirectional with merge_mode=None), and a layer "
                "after it in a Sequential would get them all (Keras raises too); use the "
                "functional API: outputs = layer(...)(inputs) and Model(inputs, outputs)"
            )
        if not self._layers and self._input_shape is None and layer.input_shape_arg is not None:
            self._input_shape = (None, *layer.input_shape_arg)
        if layer.name is None:
            layer.name = self._unique_name(layer.keras_name)
        self._layers.append(layer)
        self._model = self._graph = None
        if self._input_shape is not None:
            self._build_layers(self._input_shape)

    def _unique_name(self, stem):
        names = {layer.name for layer in self._layers}
        n = 0
        while (f"{stem}_{n}" if n else stem) in names:
            n += 1
        return f"{stem}_{n}" if n else stem

    def _build_layers(self, input_shape):
        shape = tuple(input_shape)
        for layer in self._layers:
            layer.build(shape)
            shape = layer.compute_output_shape(shape)

    def build(self, input_shape):
        """Build every layer for inputs of ``input_shape`` (with the batch axis, e.g.
        ``(None, None, 8)``)."""
        if not isinstance(input_shape, (tuple, list)) or not input_shape:
            raise type_error(
                "input_shape", "a tuple with the batch axis, e.g. (None, 24, 1)", input_shape
            )
        self._input_shape = (None, *tuple(input_shape)[1:])
        self._build_layers(self._input_shape)

    @property
    def built(self):
        """Whether every layer is built."""
        return bool(self._layers) and all(layer.built for layer in self._layers)

    @property
    def model(self):
        """The ``rnnfast.Sequential`` of the layers' rnnfast layers (once built)."""
        if not self.built:
            raise ValueError(
                f"{self.name}: not built yet; give it an input shape (Input, the first layer's "
                "input_shape=, build()) or call it on data first"
            )
        if self._model is None:
            self._model = nn.Sequential([layer.layer for layer in self._layers])
        return self._model

    def _build_for(self, x):
        """Build from the first data ``x`` (batch first) when no shape was given. The model to
        run: the rnnfast.Sequential, or the graph runner of ``_graph`` where Keras's
        behaviour needs it (stateful layers carry their state across calls; a last layer with
        several outputs)."""
        if not self._layers:
            raise ValueError(f"{self.name}: the model has no layers; add some first")
        if not self.built:
            self._input_shape = (None, *np.shape(x)[1:])
            self._build_layers(self._input_shape)
        if any(getattr(layer, "stateful", False) for layer in self._layers) or _several_outputs(
            self._layers[-1]
        ):
            if self._graph is None:
                self._graph = chain_graph(self._layers, self._input_shape, self.name)
            return self._graph
        return self.model

    def _several_outputs(self, what):
        """fit and evaluate train one output; Keras's Sequential fails on such a model too."""
        if _several_outputs(self._layers[-1]):
            raise ValueError(
                f"{what}: the last layer, {describe_layer(self._layers[-1])}, returns several "
                "arrays (return_state=True, or merge_mode=None), so there is no one output to "
                "train; use the functional API (Model(inputs, output) of the output to train)"
            )

    # ---- description and weights -------------------------------------------------------------

    def summary(self, print_fn=None):
        """Print Keras's table: each layer's name and type, output shape and parameter count
        (Keras's counts), then the totals. ``print_fn`` replaces ``print``."""
        if not self.built:
            raise ValueError(
                f"{self.name}: summary() needs the model built (an input shape, or a call on data)"
            )
        (print if print_fn is None else print_fn)(summary_text(self.name, self._layers))

    def count_params(self):
        """The number of weights, Keras's count."""
        return sum(layer.count_params() for layer in self._layers)

    def get_weights(self):
        """Every layer's weights in Keras's layout and order, as ``keras.Model.get_weights``
        lists them for the same model (new arrays)."""
        return [w for layer in self._layers for w in layer.get_weights()]

    def set_weights(self, weights):
        """Load weights in Keras's layout and order (a Keras twin's ``get_weights()``), all of
        them or nothing.

        Raises
        ------
        ValueError
            The model is not built, or the number or a shape of the arrays differs.
        """
        self.model  # noqa: B018 - built, or the error that says how
        weights = list(weights)
        counts = [len(layer.get_weights()) for layer in self._layers]
        if len(weights) != sum(counts):
            raise ValueError(f"weights: expected {sum(counts)} arrays, got {len(weights)}")
        # every shape first, so that a bad array changes nothing
        expected = self.get_weights()
        for i, (w, e) in enumerate(zip(weights, expected)):
            shape = np.shape(getattr(w, "value", w))
            if tuple(shape) != e.shape:
                raise ValueError(f"weights[{i}]: expected shape {e.shape}, got shape {shape}")
        start = 0
        for layer, count in zip(self._layers, counts):
            layer.set_weights(weights[start : start + count])
            start += count

    def reset_states(self):
        """Forget the carried state of every ``stateful`` layer."""
        for layer in self._layers:
            if hasattr(layer, "reset_states"):
                layer.reset_states()

    # ---- the module protocol of rnnfast.optim ------------------------------------------------

    def named_parameters(self):
        """The weights Keras trains, as the rnnfast model names them (``"0.weight_ih_l0"``,
        ...): every parameter but the second bias of PyTorch's layout where Keras has one
        (held at zero, see ``SimpleRNN.fixed_parameters``)."""
        fixed = {  # and the weights of frozen layers (trainable=False)
            f"{i}.{name}"
            for i, layer in enumerate(self._layers)
            for name in (*layer.fixed_parameters(), *layer.frozen_parameters())
        }
        return [(n, p) for n, p in self.model.named_parameters() if n not in fixed]

    def parameters(self):
        """The arrays of :meth:`named_parameters`."""
        return [p for _, p in self.named_parameters()]

    @property
    def grads(self):
        """The rnnfast model's gradients, under the parameters' names."""
        return self.model.grads

    def zero_grad(self):
        self.model.zero_grad()

    # ---- compile, fit, evaluate, predict ------------------------------------------------------

    def compile(
        self,
        optimizer="rmsprop",
        loss=None,
        loss_weights=None,
        metrics=None,
        weighted_metrics=None,
        run_eagerly=False,
        steps_per_execution=1,
        jit_compile="auto",
        auto_scale_loss=True,
    ):
        """Keras's ``compile``.

        Parameters
        ----------
        optimizer : str or optimizer
            "adam", "adamw", "sgd", "rmsprop" (Keras's defaults), a ``keras.optimizers``
            object of those (read through its config: clipnorm, clipvalue, global_clipnorm,
            weight_decay included), an optimizer of ``rnnfast.keras.optimizers``, or an
            ``rnnfast.optim`` optimizer built over this model (``rnnfast.optim.Adam(model,
            lr=...)``).
        loss : str or keras.losses object
            "mse", "mae", "mape", "msle", "huber", "log_cosh" (and Keras's long names),
            "sparse_categorical_crossentropy", "categorical_crossentropy",
            "binary_crossentropy", or a ``keras.losses`` object or function of those
            (``from_logits``, ``label_smoothing``, Huber's ``delta``). After a softmax
            (sigmoid) Dense, a categorical (binary) cross-entropy is computed from the logits.
        metrics : list of str or keras.metrics objects, optional
            "accuracy" (Keras's accuracy for the loss), "sparse_categorical_accuracy",
            "categorical_accuracy", "binary_accuracy", "mae", "mse".
        loss_weights, weighted_metrics
            Refused unless None (NotImplementedError).
        run_eagerly, steps_per_execution, jit_compile, auto_scale_loss
            How Keras runs its steps: accepted, and change nothing here.
        """
        check_compile_extras(
            loss_weights=loss_weights,
            weighted_metrics=weighted_metrics,
            run_eagerly=run_eagerly,
            steps_per_execution=steps_per_execution,
            jit_compile=jit_compile,
            auto_scale_loss=auto_scale_loss,
        )
        loss_name(loss)
        if metrics is None:
            metrics = []
        if isinstance(metrics, str) or not isinstance(metrics, (list, tuple)):
            raise type_error("metrics", "a list of metric names", metrics)
        Objective(loss, metrics, None)  # unknown names fail here, not in fit
        self._compiled = (optimizers.get(optimizer), loss, list(metrics))
        self.optimizer = None

    def _objective(self, what):
        if self._compiled is None:
            raise RuntimeError(f"{what}: compile the model first (model.compile(...))")
        if self._layers:
            self._several_outputs(what)
        _, loss, metrics = self._compiled
        return Objective(loss, metrics, self._layers[-1])

    def _built_optimizer(self):
        """The rnnfast optimizer of the compiled spec, made once (its state carries from one
        fit to the next, as Keras's)."""
        self.optimizer = follow_trainable(self, self.optimizer, self._compiled[0])
        if self.optimizer is None:
            spec = self._compiled[0]
            if isinstance(spec, optim.Optimizer):
                ours = {id(p) for p in self.parameters()}
                if any(id(slot.param) not in ours for slot in spec.slots):
                    raise ValueError(
                        "optimizer: it updates arrays that are not this model's weights; build "
                        "it over the model once it is built (rnnfast.optim.Adam(model, ...))"
                    )
                self.optimizer = KerasStep(spec)  # Keras's learning_rate, for callbacks
            else:
                self.optimizer = spec.build(self)
        return self.optimizer

    def fit(
        self,
        x=None,
        y=None,
        batch_size=None,
        epochs=1,
        verbose="auto",
        callbacks=None,
        validation_split=0.0,
        validation_data=None,
        shuffle=True,
        class_weight=None,
        sample_weight=None,
        initial_epoch=0,
        steps_per_epoch=None,
        validation_steps=None,
        validation_batch_size=None,
        validation_freq=1,
    ):
        """Keras's ``fit``: train for ``epochs`` over batches of ``batch_size`` (32) samples
        (``rnnfast.training``'s loop); returns a :class:`History`.

        ``x``, ``y``: arrays, or ``x`` a Python generator of ``(x, y)`` or ``(x, y,
        sample_weight)`` batches with ``steps_per_epoch`` (and ``validation_data`` arrays, or
        a generator with ``validation_steps``). ``sample_weight``: one weight per sample, as
        Keras weights the loss (not the metrics). ``validation_split`` holds out the last
        fraction of the samples (before shuffling), as Keras; ``validation_data`` is ``(x_val,
        y_val)`` or ``(x_val, y_val, sample_weight_val)``. ``callbacks``: Keras's
        (``keras.callbacks.EarlyStopping``, ``ModelCheckpoint``, ``ReduceLROnPlateau``,
        ``CSVLogger``, ``LambdaCallback``, ..., see ``rnnfast.keras.callbacks``) and
        ``rnnfast.training``'s. ``verbose`` is ``rnnfast.training.fit``'s (Keras's values).
        ``class_weight``, ``initial_epoch``, ``validation_batch_size`` and
        ``validation_freq`` other than their defaults raise NotImplementedError.
        """
        from ._fit import fit

        history, params = fit(
            self,
            x,
            y,
            batch_size=batch_size,
            epochs=epochs,
            verbose=verbose,
            callbacks=callbacks,
            validation_split=validation_split,
            validation_data=validation_data,
            shuffle=shuffle,
            sample_weight=sample_weight,
            class_weight=class_weight,
            initial_epoch=initial_epoch,
            steps_per_epoch=steps_per_epoch,
            validation_steps=validation_steps,
            validation_batch_size=validation_batch_size,
            validation_freq=validation_freq,
        )
        self.history = History(history, params, self)
        return self.history

    def evaluate(
        self,
        x=None,
        y=None,
        batch_size=None,
        verbose="auto",
        sample_weight=None,
        steps=None,
        callbacks=None,
        return_dict=False,
    ):
        """Keras's ``evaluate``: the loss (and the metrics) over ``(x, y)`` in inference mode:
        the loss alone without metrics, else ``[loss, metric, ...]`` (a dict with
        ``return_dict``); ``sample_weight`` weights the loss as in fit. ``verbose`` is
        accepted; nothing is printed. ``steps`` and ``callbacks`` raise NotImplementedError."""
        from ._fit import evaluate

        result, objective = evaluate(
            self,
            x,
            y,
            batch_size=batch_size,
            sample_weight=sample_weight,
            steps=steps,
            callbacks=callbacks,
        )
        if return_dict:
            return result
        values = [result["loss"], *(result[m.__name__] for m in objective.metrics)]
        return values[0] if len(values) == 1 else values

    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None):
        """Keras's ``predict``: the outputs for ``x`` in inference mode, batch by batch, in
        order (a tuple of arrays when the last layer returns several, as Keras's).
        ``verbose`` is accepted; nothing is printed."""
        for name, value in (("steps", steps), ("callbacks", callbacks)):
            if value is not None:  # Keras's, for generators and predict hooks: not here
                raise NotImplementedError(
                    f"{name}={value!r}: the front's predict runs over all of x (arrays) and calls "
                    "no callbacks; leave it None"
                )
        x = self._input(x)
        model = self._build_for(x)
        if model is self._graph:  # stateful layers keep their state; several outputs
            outs = predict_outputs(model, x, 32 if batch_size is None else batch_size, len(x))
            outs = compute_outputs(outs, self._output_policies())
            return tuple(outs) if len(outs) > 1 else outs[0]
        out = training.predict(
            model,
            x,
            batch_size=32 if batch_size is None else batch_size,
            batch_axis=0,
            bucket=False,
        )
        return compute_outputs(out, self._output_policies())

    def __call__(self, x, training=False):
        """The output for one batch ``x``: in inference mode, or with ``training=True`` in
        training mode (dropout on)."""
        x = self._input(x)
        model = self._build_for(x)
        model.train(bool(training))
        return compute_outputs(model(x), self._output_policies())

    def _output_policies(self):
        """The dtype policy of each output: the last layer's (its outputs' compute dtype,
        bfloat16 under mixed_bfloat16, as Keras returns them)."""
        return self._layers[-1].dtype_policy if self._layers else "float32"

    def _data(self, x, y):
        if x is None or y is None:
            raise ValueError("x, y: expected the inputs and the targets, got None")
        x = self._input(x)
        y = model_targets(y, self._layers[-1].dtype if self._layers else np.float32)
        if len(x) != len(y):
            raise ValueError(
                f"y: expected as many samples as x ({len(x)}), got {len(y)} (shapes "
                f"{x.shape} and {y.shape})"
            )
        return x, y

    def _input(self, x):
        """``x`` cast as Keras casts it (float32 data from float64 or ints) and its number of
        dimensions checked against the model's input shape (``_inputs``)."""
        first = self._layers[0] if self._layers else None
        if first is None:
            return np.asarray(x)
        return model_input(x, first, self._input_shape)

    def _validation(self, validation_data):
        if not isinstance(validation_data, (tuple, list)) or len(validation_data) != 2:
            raise ValueError(
                "validation_data: expected (x_val, y_val) (sample weights are not supported), "
                f"got {type(validation_data).__name__}"
                + (
                    f" of {len(validation_data)}"
                    if isinstance(validation_data, (tuple, list))
                    else ""
                )
            )
        return self._data(*validation_data)

    # ---- Keras's files, layers by name, export ------------------------------------------------

    def save(self, filepath, overwrite=True, zipped=None, **kwargs):
        """Keras's ``save``: the model to a ``.keras`` file (Keras 3's format, which
        ``keras.models.load_model`` and ``rnnfast.keras.models.load_model`` read)."""
        from .saving import save_model

        if kwargs:
            raise TypeError(f"save(): unexpected keyword arguments {sorted(kwargs)}")
        save_model(self, filepath, overwrite=overwrite, zipped=zipped)

    def save_weights(self, filepath, overwrite=True):
        """Keras's ``save_weights``: the weights to a ``.weights.h5`` file (Keras's layout)."""
        from .saving import save_weights

        save_weights(self, filepath, overwrite=overwrite)

    def load_weights(self, filepath, skip_mismatch=False):
        """Keras's ``load_weights``: from a ``.weights.h5`` or ``.keras`` file, each layer's
        weights found as Keras finds them (by class and position in the model, not by name)."""
        from .saving import load_weights

        if skip_mismatch:
            raise NotImplementedError(
                "skip_mismatch=True: the front loads every layer's weights or none; fix the "
                "model or the file so that they match"
            )
        load_weights(self, filepath)

    def get_layer(self, name=None, index=None):
        """Keras's ``get_layer``: the layer called ``name``, or at ``index`` (not both).

        Raises
        ------
        ValueError
            Neither or both given, no such name, or an index out of range.
        """
        if (name is None) == (index is None):
            raise ValueError("get_layer: give a name or an index (one of them)")
        if index is not None:
            if not isinstance(index, int) or isinstance(index, bool):
                raise type_error("index", "an int", index)
            if not -len(self._layers) <= index < len(self._layers):
                raise ValueError(
                    f"index: {index} is out of range: the model has {len(self._layers)} layers"
                )
            return self._layers[index]
        for layer in self._layers:
            if layer.name == name:
                return layer
        raise ValueError(
            f"name: no layer named {name!r}; the layers are {[lay.name for lay in self._layers]}"
        )

    def rnnfast_model(self):
        """The ``rnnfast.Sequential`` that computes this model, for what takes rnnfast models
        (``rnnfast.onnx.export``, ``rnnfast.quantize``, ``rnnfast.save``)."""
        return self.model

    def __repr__(self):
        return f"<Sequential name={self.name!r}, layers={[layer.name for layer in self._layers]}>"


def _several_outputs(layer):
    """Whether a layer returns several arrays: Keras's states, or two directions."""
    return bool(getattr(layer, "return_state", False)) or (
        getattr(layer, "output_merge_mode", "concat") is None
    )
