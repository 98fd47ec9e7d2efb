"""JordanRNN: the output-to-hidden recurrence ("RNN B" of the lecture notes).

    h_t = act(W_ih x_t + W_yh y_{t-1} + b_h)        y_t = V h_t + c

The hidden state does not feed itself: the only recurrence goes through the output. With
teacher forcing the fed outputs ``y_{t-1}`` are the targets of the step before, known in
advance, so the time steps decouple: forward and backward are each a couple of large GEMMs over
all T*B rows, with no loop over time and no BPTT. Free-running (each step feeds its own output)
and scheduled sampling are sequential: Python loops over time (``_free_output``, ``_own_fed``,
``_backward_free``), each step a few NumPy products.

Why this layer is not a cell of the shared stack runner (``nn.recurrent.stack``, the kernels' one time
loop), as RNN, GRU and LSTM are: the state its recurrence carries is its *output* y_t (O wide),
made from h_t by a second product with a bias after a barrier (``V h_t + c``, each thread owning
a block of h_t), then, with ``feedback="onehot"``, a row-wide argmax (another barrier, no
gradient); its backward's step is two products (``dy_t + dz_{t+1} W_yh``, then ``(. V) *
act'(h_t)``). No C++ cell policy carries such a state yet; the cell interface of issue 39
(steps with parts after a barrier: a second product, a row-wide reduction) is where one goes.
The docs'
"Choosing a cell" page (docs/choosing_a_cell.rst) gives the whole argument, and why folding
``W_yh V`` into an Elman cell is not taken.

How to train it with ``rnnfast.training.fit`` (which calls ``model(x)`` with one input): build
the layer with ``teacher_forced=True`` and give fit the *packed* input
``layer.teacher_forcing_inputs(x, y)``, the inputs and the shifted targets concatenated on the
feature axis (width ``input_size + output_size``); the targets stay fit's targets::

    layer = JordanRNN(D, H, O, teacher_forced=True, batch_first=True)
    fit(layer, layer.teacher_forcing_inputs(x, y), y, loss="mse", optimizer=Adam(layer))
    y_hat = layer(x, mode="free")            # autoregressive, from its own outputs

Integer targets (class ids, for ``loss="cross_entropy"``) are fed back one-hot.
"""

from __future__ import annotations

import math

import numpy as np

from ... import _core
from ..._validation import (
    as_float_array,
    check_bool,
    check_lengths,
    check_positive_int,
    check_probability,
    layer_dtype,
)
from ...data import mask_to_lengths
from .._layer import Layer
from .._shapes import constructor_arguments, flag, size
from ..masking import pass_padding_on, prefix_lengths, valid_from_lengths
from .rnn_options import BATCH_FIRST, NONLINEARITY

__all__ = ["JordanRNN", "previous_targets", "teacher_forcing_inputs"]

MODES = ("teacher", "free", "scheduled")
FEEDBACKS = ("output", "onehot")


def _one_hot(ids, classes, dtype):
    out = np.zeros(ids.shape + (classes,), dtype=dtype)
    np.put_along_axis(out, ids[..., None], 1, axis=-1)
    return out


def _as_fed_values(name, value, classes, dtype, leading):
    """Targets or a start value as the layer feeds them back: floats (..., O) as they are,
    integer class ids (...) one-hot (..., O). ``leading`` is the expected leading shape."""
    arr = np.asarray(value)
    if arr.dtype.kind in "iu":
        if arr.shape != leading:
            raise ValueError(
                f"{name}: expected class ids of shape {leading}, got shape {arr.shape}"
            )
        if arr.size and (arr.min() < 0 or arr.max() >= classes):
            raise ValueError(
                f"{name}: expected class ids in [0, {classes}) (output_size), got "
                f"min {arr.min()}, max {arr.max()}"
            )
        return _one_hot(arr.astype(np.int64), classes, dtype)
    arr = as_float_array(name, arr, dtype)
    if arr.shape != leading + (classes,):
        raise ValueError(
            f"{name}: expected shape {leading + (classes,)} (or integer class ids "
            f"{leading}), got shape {arr.shape}"
        )
    return arr


def previous_targets(y, y0=None, *, output_size=None, batch_first=False, dtype=None):
    """The fed outputs of teacher forcing: ``y_prev[t] = y[t - 1]``, ``y_prev[0] = y0``.

    Parameters
    ----------
    y : float array (T, B, O) (or (B, T, O) with ``batch_first``), or integer class ids
        (T, B) / (B, T), which become one-hot vectors of ``output_size`` classes.
    y0 : (B, O) floats or (B,) class ids, optional
        What step 0 is fed (zeros when omitted; a start token for classification).
    output_size : int, needed for class ids (else y's last axis).
    dtype : float32 or float64 (default: y's float dtype, float32 for class ids).

    Returns
    -------
    ndarray shaped (T, B, O) (or (B, T, O)), a new array.
    """
    arr = np.asarray(y)
    if arr.dtype.kind in "iu":
        if output_size is None:
            raise ValueError("output_size: needed to one-hot integer targets")
        if arr.ndim != 2:
            raise ValueError(
                f"y: expected class ids of 2 dimensions ((B, T) or (T, B)), got shape {arr.shape}"
            )
        classes = check_positive_int("output_size", output_size)
        leading = arr.shape
    else:
        if arr.ndim != 3:
            raise ValueError(
                f"y: expected 3 dimensions ((T, B, O), or (B, T, O) batch-first), "
                f"or integer class ids (T, B), got shape {arr.shape}"
            )
        classes = (
            arr.shape[2] if output_size is None else check_positive_int("output_size", output_size)
        )
        leading = arr.shape[:2]
    dtype = layer_dtype(
        dtype if dtype is not None else (arr.dtype if arr.dtype.kind == "f" else np.float32)
    )
    fed = _as_fed_values("y", arr, classes, dtype, leading)
    batch = leading[0] if batch_first else leading[1]
    start = (
        np.zeros((batch, classes), dtype=dtype)
        if y0 is None
        else _as_fed_values("y0", y0, classes, dtype, (batch,))
    )
    out = np.empty_like(fed)
    if batch_first:
        out[:, 1:] = fed[:, :-1]
        if out.shape[1]:
            out[:, 0] = start
    else:
        out[1:] = fed[:-1]
        if out.shape[0]:
            out[0] = start
    return out


def teacher_forcing_inputs(x, y, y0=None, *, output_size=None, batch_first=False, dtype=None):
    """``[x, y_prev]`` concatenated on the feature axis: the packed input a JordanRNN built
    with ``teacher_forced=True`` reads (see :func:`previous_targets` for ``y``, ``y0``)."""
    y_prev = previous_targets(y, y0, output_size=output_size, batch_first=batch_first, dtype=dtype)
    x = as_float_array("x", x, y_prev.dtype)
    if x.ndim != 3 or x.shape[:2] != y_prev.shape[:2]:
        raise ValueError(
            f"x: expected 3 dimensions with leading axes {y_prev.shape[:2]} (y's), "
            f"got shape {x.shape}"
        )
    return np.concatenate([x, y_prev], axis=2)


class _Run:
    """What one training forward keeps for its backward."""

    __slots__ = (
        "explicit",
        "extra",
        "fed_mask",
        "h",
        "kind",
        "nonlinearity",
        "packed",
        "rows",
        "shape",
        "valid",
        "w_cat",
        "x",
        "y_prev",
    )

    def __init__(self, **kw):
        for k in self.__slots__:
            setattr(self, k, kw.get(k))


class JordanRNN(Layer):
    """Output-to-hidden recurrence: ``h_t = act(W_ih x_t + W_yh y_{t-1} + b_h)``,
    ``y_t = V h_t + c`` (Jordan's network; the lecture notes' "RNN B").

    Parameters (``named_parameters()``; the names are those of ``state_dict``)
    ------------------------------------------------------------------------------
    ``weight_ih`` (H, D)  W_ih, input to hidden
    ``weight_yh`` (H, O)  W_yh, fed output to hidden
    ``bias_h``    (H,)    b_h (when ``bias``)
    ``weight_ho`` (O, H)  V, hidden to output
    ``bias_o``    (O,)    c (when ``bias``)

    initialised U(-1/sqrt(H), 1/sqrt(H)) as PyTorch's RNN (and its Linear of in_features H).

    Arguments
    ---------
    input_size, hidden_size, output_size : int (D, H, O)
    nonlinearity : {"tanh", "relu"}
    bias : bool
    batch_first : bool
        Sequences as (B, T, ...) instead of (T, B, ...).
    dtype : float32 or float64
    seed : int, optional
        Seeds the initialisation and then the coin flips of scheduled sampling.
    teacher_forced : bool
        The input of a call is packed: ``[x, y_prev]`` on the feature axis, width D + O (as
        :meth:`teacher_forcing_inputs` builds it), so that ``training.fit`` and ``predict``,
        which pass one input, train and evaluate it teacher-forced. ``mode="free"`` still takes
        x alone (width D).
    feedback : {"output", "onehot"}
        What a step feeds back when it feeds its own output (free-running, scheduled sampling):
        ``"output"`` the output vector y_t itself (regression; free-running training
        differentiates through it, exact BPTT), ``"onehot"`` the one-hot vector of its argmax
        (classification: the same encoding as integer targets fed by teacher forcing; no
        gradient through the argmax).
    teacher_forcing_ratio : float in [0, 1]
        In training mode, a teacher-forced call below 1 runs scheduled sampling: each step
        t >= 1 of each sequence is fed its target with this probability, else the layer's own
        output of the step before (no gradient through that choice). Eval mode ignores it.

    Calls
    -----
    ``layer(x, y_prev=None, lengths=None, mask=None, *, y0=None, mode=None, ...) -> y``, y
    (T, B, O) (or (B, T, O)). Given ``y_prev`` (or packed input) the call is teacher-forced
    (two GEMMs over all rows; scheduled sampling when the ratio is below 1 in training mode);
    without it, free-running from ``y0`` (zeros when omitted). ``lengths`` / ``mask``: padded
    steps output zeros and get no gradient. ``layer.backward(dy)`` after a training call adds
    every parameter's gradient into ``grads`` and returns the gradient of what the call read:
    one array for packed input, ``(dx, dy_prev)`` for a given ``y_prev``, ``(dx, dy0)``
    free-running. ``layer.step(x_t, y_prev)`` runs one step (decoding); ``layer.decoder()``
    makes a step function for ``rnnfast.decoding``.
    """

    # the options every recurrent layer has (nn.recurrent.rnn_options), checked on assignment
    nonlinearity, batch_first = NONLINEARITY, BATCH_FIRST

    def __init__(
        self,
        input_size,
        hidden_size,
        output_size,
        nonlinearity="tanh",
        bias=True,
        batch_first=False,
        dtype=np.float32,
        seed=None,
        *,
        teacher_forced=False,
        feedback="output",
        teacher_forcing_ratio=1.0,
    ):
        self._input_size = check_positive_int("input_size", input_size)
        self._hidden_size = check_positive_int("hidden_size", hidden_size)
        self._output_size = check_positive_int("output_size", output_size)
        self._bias = check_bool("bias", bias)
        self._dtype = layer_dtype(dtype)
        self._seed = seed
        self.nonlinearity = nonlinearity
        self.batch_first = batch_first
        self.teacher_forced = teacher_forced
        self.feedback = feedback
        self.teacher_forcing_ratio = teacher_forcing_ratio
        rng = np.random.default_rng(seed)
        D, H, O = self._input_size, self._hidden_size, self._output_size
        bound = 1.0 / math.sqrt(H)
        shapes = [("weight_ih", (H, D)), ("weight_yh", (H, O))]
        if self._bias:
            shapes.append(("bias_h", (H,)))
        shapes.append(("weight_ho", (O, H)))
        if self._bias:
            shapes.append(("bias_o", (O,)))
        self._params = {
            name: rng.uniform(-bound, bound, shape).astype(self._dtype) for name, shape in shapes
        }
        self.grads = {name: np.zeros_like(p) for name, p in self._params.items()}
        self._rng = rng  # continues the seeded stream: the coin flips are reproducible too
        self.training = True
        self._cache = None
        self.output_mask = None
        self.last_fed = None

    # ---- options ------------------------------------------------------------------------------

    def _fixed(name):
        def refuse(self, value):
            raise AttributeError(
                f"{name} is fixed at construction (the parameters depend on "
                "it); build a new layer instead"
            )

        return property(lambda self: getattr(self, "_" + name), refuse)

    input_size = _fixed("input_size")
    hidden_size = _fixed("hidden_size")
    output_size = _fixed("output_size")
    bias = _fixed("bias")
    dtype = _fixed("dtype")
    seed = _fixed("seed")
    del _fixed

    @property
    def teacher_forced(self):
        return self._teacher_forced

    @teacher_forced.setter
    def teacher_forced(self, value):
        self._teacher_forced = check_bool("teacher_forced", value)

    @property
    def feedback(self):
        return self._feedback

    @feedback.setter
    def feedback(self, value):
        if not isinstance(value, str) or value not in FEEDBACKS:
            raise ValueError(f"feedback: expected one of {FEEDBACKS}, got {value!r}")
        self._feedback = value

    @property
    def teacher_forcing_ratio(self):
        return self._ratio

    @teacher_forcing_ratio.setter
    def teacher_forcing_ratio(self, value):
        self._ratio = check_probability("teacher_forcing_ratio", value)

    # ---- helpers ------------------------------------------------------------------------------

    def previous_targets(self, y, y0=None):
        """:func:`previous_targets` in this layer's layout, output size and dtype."""
        return previous_targets(
            y, y0, output_size=self._output_size, batch_first=self._batch_first, dtype=self._dtype
        )

    def teacher_forcing_inputs(self, x, y, y0=None):
        """:func:`teacher_forcing_inputs` in this layer's layout, output size and dtype: the
        packed input of a ``teacher_forced=True`` layer (what to give ``fit`` as x)."""
        return teacher_forcing_inputs(
            x,
            y,
            y0,
            output_size=self._output_size,
            batch_first=self._batch_first,
            dtype=self._dtype,
        )

    def _act(self, z):
        if self._nonlinearity == "tanh":
            return np.tanh(z, out=z)
        return np.maximum(z, 0, out=z)

    @staticmethod
    def _act_grad(dh, h, nonlinearity):
        """dL/dz from dL/dh and the stored h = act(z), written into dh (one temporary)."""
        if nonlinearity == "tanh":
            d = np.multiply(h, h)
            np.subtract(1, d, out=d)
        else:
            d = h > 0
        return np.multiply(dh, d, out=dh)

    def _w_cat(self):
        return np.ascontiguousarray(
            np.concatenate([self._params["weight_ih"], self._params["weight_yh"]], axis=1)
        )

    # ---- forward ------------------------------------------------------------------------------

    def __call__(self, x, y_prev=None, lengths=None, mask=None, **kwargs):
        return self.forward(x, y_prev, lengths, mask, **kwargs)

    def forward(
        self,
        x,
        y_prev=None,
        lengths=None,
        mask=None,
        *,
        y0=None,
        mode=None,
        teacher_forcing_ratio=None,
        rng=None,
    ):
        """Run the layer over a batch of sequences; returns y (T, B, O) (or (B, T, O)).

        Parameters
        ----------
        x : array_like, (T, B, D) (or (B, T, D) with ``batch_first``); with
            ``teacher_forced=True`` the packed ``[x, y_prev]`` (..., D + O) unless
            ``mode="free"``.
        y_prev : array_like, shaped like the output, optional
            The fed outputs: ``y_prev[t]`` feeds step t (the targets shifted by one step,
            :meth:`previous_targets`). Given: teacher forcing. Not with packed input.
        lengths : ints (B,), optional; mask : bools (B, T), optional
            A padded batch: steps past each sequence's length output zeros and get no gradient.
        y0 : (B, O), optional
            What a free-running call feeds step 0 (zeros when omitted).
        mode : {None, "teacher", "free", "scheduled"}
            None: "teacher" when fed outputs are given ("scheduled" in training mode with a
            ratio below 1), else "free". "scheduled" in eval mode is allowed too.
        teacher_forcing_ratio : float in [0, 1], optional
            This call's ratio (default: the layer's ``teacher_forcing_ratio``).
        rng : numpy Generator or int, optional
            Scheduled sampling's coin flips (default: the layer's generator).

        The output is read-only in training mode (backward reads it). ``output_mask`` is set
        to the output's valid mask (the layout's leading axes), or None; ``last_fed`` to what
        each step was fed as y_prev (shaped like the output).
        """
        if mode is not None and mode not in MODES:
            raise ValueError(f"mode: expected None or one of {MODES}, got {mode!r}")
        ratio = (
            self._ratio
            if teacher_forcing_ratio is None
            else check_probability("teacher_forcing_ratio", teacher_forcing_ratio)
        )
        D, O = self._input_size, self._output_size
        x_user = x
        x, y_prev, y0, lengths, mode, packed = self._checked_call(
            x, y_prev, y0, lengths, mask, mode, ratio
        )
        lead = x.shape[:2]
        steps, batch = (lead[1], lead[0]) if self._batch_first else lead
        valid = None
        if lengths is not None and np.any(lengths < steps):
            bt = np.arange(steps)[None, :] < lengths[:, None]
            valid = bt if self._batch_first else np.ascontiguousarray(bt.T)
        if lengths is not None:
            self.output_mask = valid_from_lengths(lengths, steps, self._batch_first)
        else:
            self.output_mask = None
        self.last_fed = None
        training = self.training
        if training and np.may_share_memory(x, np.asarray(x_user)):
            x = x.copy()  # backward reads it: the caller may change its array meanwhile
        nl = self._nonlinearity

        if mode == "free" and self._feedback == "output":
            y, run = self._free_output(x, y0, valid, training)
        else:
            explicit = y_prev is not None
            if packed:
                rows = x.reshape(-1, D + O)
            else:
                if mode == "free":
                    y_prev = self._own_fed(x, None, None, y0, valid)  # onehot feedback
                    self.last_fed = y_prev
                rows = np.concatenate([x, y_prev], axis=2).reshape(-1, D + O)
            fed_mask = None
            self.last_fed = rows.reshape(lead + (D + O,))[..., D:] if packed else y_prev
            if mode == "scheduled":
                rows, fed_mask = self._scheduled_rows(rows, lead, ratio, rng, valid)
            y, run = self._teacher(rows, lead, valid, training)
            run.packed, run.explicit, run.fed_mask = packed, explicit, fed_mask
            run.kind = "free-onehot" if mode == "free" else "teacher"
        if training:
            run.nonlinearity = nl
            run.shape = x.shape
            self._cache = run
            y = y.view()
            y.flags.writeable = False
        else:
            self._cache = None
        return y

    def _checked_call(self, x, y_prev, y0, lengths, mask, mode, ratio):
        """The arguments of a forward checked: ``(x, y_prev, y0, lengths, mode, packed)``, the
        mode resolved (teacher, scheduled or free) from what was given."""
        D, O = self._input_size, self._output_size
        packed = self._teacher_forced and mode != "free"
        if packed and y_prev is not None:
            raise ValueError(
                "y_prev: a teacher_forced=True layer reads the fed outputs from its "
                "packed input [x, y_prev] (teacher_forcing_inputs); pass x alone"
            )
        width = D + O if packed else D
        x = as_float_array("x", x, self._dtype)
        layout = "(B, T, F)" if self._batch_first else "(T, B, F)"
        if x.ndim != 3 or x.shape[2] != width:
            what = (
                f"D + O = {D} + {O} (the packed [x, y_prev] of teacher_forced=True; "
                "mode='free' takes x alone)"
                if packed
                else f"input_size = {D}"
            )
            raise ValueError(
                f"x: expected 3 dimensions {layout} with F = {what}, got shape {x.shape}"
            )
        lead = x.shape[:2]
        steps, batch = (lead[1], lead[0]) if self._batch_first else lead
        fed_given = packed or y_prev is not None
        if mode is None:
            mode = (
                "scheduled"
                if fed_given and self.training and ratio < 1.0
                else "teacher"
                if fed_given
                else "free"
            )
        if mode == "free" and y_prev is not None:
            raise ValueError(
                "y_prev: a free-running call feeds its own outputs; leave y_prev "
                "out, or use mode='teacher'"
            )
        if mode in ("teacher", "scheduled") and not fed_given:
            raise ValueError(
                f"y_prev: mode={mode!r} needs the fed outputs (the targets shifted "
                "by one step: layer.previous_targets(y)), or teacher_forced=True "
                "with packed input"
            )
        if mode != "free" and y0 is not None:
            raise ValueError(
                "y0: the fed outputs give step 0's y_prev already; y0 is for free-running calls"
            )
        if y_prev is not None:
            y_prev = as_float_array("y_prev", y_prev, self._dtype)
            if y_prev.shape != lead + (O,):
                raise ValueError(
                    f"y_prev: expected shape {lead + (O,)} (like the output), got "
                    f"shape {y_prev.shape}"
                )
        if y0 is not None:
            y0 = as_float_array("y0", y0, self._dtype)
            if y0.shape != (batch, O):
                raise ValueError(f"y0: expected shape (B, O) = {(batch, O)}, got shape {y0.shape}")
        if lengths is not None and mask is not None:
            raise ValueError("lengths, mask: give one of them, not both")
        if mask is not None:
            m = np.asarray(mask)
            if m.shape != (batch, steps):
                raise ValueError(
                    f"mask: expected shape (B, T) = {(batch, steps)}, got shape {m.shape}"
                )
            lengths = mask_to_lengths(m)
        lengths = check_lengths(lengths, steps, batch)
        return x, y_prev, y0, lengths, mode, packed

    def _teacher(self, rows, lead, valid, training):
        """h = act(rows [W_ih, W_yh]^T + b_h), y = h V^T + c over all rows: two GEMMs."""
        p = self._params
        w_cat = self._w_cat()
        h = _core.dense_forward(rows, w_cat, p.get("bias_h"))
        self._act(h)
        flat = None if valid is None else valid.reshape(-1)
        if flat is not None:
            h[~flat] = 0
        y = _core.dense_forward(h, p["weight_ho"], p.get("bias_o"))
        if flat is not None:
            y[~flat] = 0
        run = _Run(rows=rows if training else None, w_cat=w_cat, h=h, valid=flat)
        return y.reshape(lead + (self._output_size,)), run

    def _time_major(self, a):
        return a.swapaxes(0, 1) if (self._batch_first and a is not None) else a

    def _own(self, y_t):
        """What a step feeds back of its own output y_t (B, O)."""
        if self._feedback == "output":
            return y_t
        return _one_hot(np.argmax(y_t, axis=1), self._output_size, self._dtype)

    def _step_core(self, x_t, y_prev):
        p = self._params
        z = x_t @ p["weight_ih"].T + y_prev @ p["weight_yh"].T
        if self._bias:
            z += p["bias_h"]
        h = self._act(z)
        y = h @ p["weight_ho"].T
        if self._bias:
            y += p["bias_o"]
        return h, y

    def _own_fed(self, x, targets, teacher, y0, valid):
        """The fed outputs (layout of x) of a sequential no-gradient pass: step t is fed
        ``targets[t]`` where ``teacher[t]`` (time-major bools (T, B)), else the feedback of its
        own output at t - 1; step 0 is fed ``targets[0]`` (or y0, or zeros)."""
        D, O = self._input_size, self._output_size
        xt = self._time_major(x)[..., :D]
        tgt = self._time_major(targets)
        steps, batch = xt.shape[0], xt.shape[1]
        fed = np.zeros((steps, batch, O), dtype=self._dtype)
        vt = self._time_major(valid)
        prev = (
            (
                tgt[0]
                if tgt is not None
                else y0
                if y0 is not None
                else np.zeros((batch, O), dtype=self._dtype)
            )
            if steps
            else None
        )
        for t in range(steps):
            fed[t] = prev
            _, y_t = self._step_core(np.ascontiguousarray(xt[t]), prev)
            if vt is not None:
                y_t[~vt[t]] = 0
            prev = self._own(y_t)
            if tgt is not None and t + 1 < steps:
                prev = np.where(teacher[t + 1][:, None], tgt[t + 1], prev)
        return np.ascontiguousarray(fed.swapaxes(0, 1)) if self._batch_first else fed

    def _scheduled_rows(self, rows, lead, ratio, rng, valid):
        """Scheduled sampling: the rows with their fed part replaced where a coin said "own
        output", and the mask (rows,) of where the target was fed."""
        D, O = self._input_size, self._output_size
        gen = self._rng if rng is None else np.random.default_rng(rng)
        steps = lead[1] if self._batch_first else lead[0]
        batch = lead[0] if self._batch_first else lead[1]
        teacher = gen.random((steps, batch)) < ratio
        if steps:
            teacher[0] = True
        full = rows.reshape(lead + (D + O,))
        if teacher.all():
            fed = full[..., D:]
        else:
            fed = self._own_fed(full, full[..., D:], teacher, None, valid)
        self.last_fed = fed
        new = np.concatenate([full[..., :D], fed], axis=2).reshape(-1, D + O)
        mask = teacher.T if self._batch_first else teacher
        return new, np.ascontiguousarray(mask).reshape(-1)

    def _free_output(self, x, y0, valid, training):
        """Free-running with y_t itself fed back: the input projection as one GEMM, then a
        loop over time; keeps everything exact BPTT needs."""
        p = self._params
        D, H, O = self._input_size, self._hidden_size, self._output_size
        xt = self._time_major(x)
        steps, batch = xt.shape[0], xt.shape[1]
        xrows = np.ascontiguousarray(xt).reshape(-1, D)
        proj = _core.dense_forward(xrows, p["weight_ih"], p.get("bias_h")).reshape(steps, batch, H)
        hs = np.empty((steps, batch, H), dtype=self._dtype)
        ys = np.empty((steps, batch, O), dtype=self._dtype)
        fed = np.empty((steps, batch, O), dtype=self._dtype)
        vt = self._time_major(valid)
        w_yh_t = p["weight_yh"].T
        v_t = p["weight_ho"].T
        prev = y0 if y0 is not None else np.zeros((batch, O), dtype=self._dtype)
        for t in range(steps):
            fed[t] = prev
            z = proj[t] + prev @ w_yh_t
            h = self._act(z)
            if vt is not None:
                h[~vt[t]] = 0
            y = h @ v_t
            if self._bias:
                y += p["bias_o"]
            if vt is not None:
                y[~vt[t]] = 0
            hs[t], ys[t] = h, y
            prev = ys[t]
        self.last_fed = fed.swapaxes(0, 1) if self._batch_first else fed
        run = _Run(kind="free-output", x=xrows if training else None, h=hs, y_prev=fed, valid=vt)
        y = ys.swapaxes(0, 1) if self._batch_first else ys
        return y, run

    # ---- backward -----------------------------------------------------------------------------

    def backward(self, dy):
        """Gradients of the last training call: adds every parameter's into ``grads`` and
        returns the gradient of what the call read (one array for packed input; ``(dx,
        dy_prev)`` for a given y_prev, zero where scheduled sampling fed the layer's own
        output; ``(dx, dy0)`` free-running). A failed call changes nothing and keeps the
        forward for a retry."""
        run = self._cache
        if run is None:
            raise RuntimeError(
                "backward: no training forward to differentiate; call the layer "
                "in training mode first (each forward allows one backward)"
            )
        lead = run.shape[:2]
        expected = lead + (self._output_size,)
        if dy is None:
            dy = np.zeros(expected, dtype=self._dtype)
        dy = np.asarray(dy)
        if dy.shape != expected:
            as_float_array("dy", dy, self._dtype)  # a dtype error first: it names the fix
            raise ValueError(
                f"dy: expected shape {expected} (like the output), got shape {dy.shape}"
            )
        dy = as_float_array("dy", dy, self._dtype)
        self._cache = None
        if run.kind == "free-output":
            return self._backward_free(run, dy)
        return self._backward_teacher(run, dy, lead)

    def _backward_teacher(self, run, dy, lead):
        D, O = self._input_size, self._output_size
        p, g = self._params, self.grads
        rows_dy = dy.reshape(-1, O)
        if run.valid is not None:
            rows_dy = rows_dy * run.valid[:, None]
        dh = _core.dense_backward(run.h, p["weight_ho"], rows_dy, g["weight_ho"])
        if self._bias:
            g["bias_o"] += rows_dy.sum(axis=0)
        dz = self._act_grad(dh, run.h, run.nonlinearity)
        if run.valid is not None:
            dz *= run.valid[:, None]
        dw_cat = np.zeros_like(run.w_cat)
        drows = _core.dense_backward(run.rows, run.w_cat, dz, dw_cat)
        g["weight_ih"] += dw_cat[:, :D]
        g["weight_yh"] += dw_cat[:, D:]
        if self._bias:
            g["bias_h"] += dz.sum(axis=0)
        if run.fed_mask is not None:
            drows[~run.fed_mask, D:] = 0  # own outputs fed: no gradient through the choice
        drows = drows.reshape(run.shape[:2] + (D + O,))
        if run.packed:
            return drows
        dx = np.ascontiguousarray(drows[..., :D])
        dfed = np.ascontiguousarray(drows[..., D:])
        if run.explicit:
            return dx, dfed
        # free-running with one-hot feedback: only y0 (step 0's fed value) has a gradient
        if dfed.shape[1 if self._batch_first else 0] == 0:
            return dx, np.zeros((dfed.shape[0 if self._batch_first else 1], O), self._dtype)
        return dx, np.ascontiguousarray(dfed[:, 0] if self._batch_first else dfed[0])

    def _backward_free(self, run, dy):
        """Exact BPTT through the fed outputs: g_y[t] = dy[t] + dz[t+1] W_yh, dz[t] =
        (g_y[t] V) * act'(h[t]); the weight gradients are GEMMs over all steps afterwards."""
        D, H, O = self._input_size, self._hidden_size, self._output_size
        p, g = self._params, self.grads
        dyt = np.ascontiguousarray(self._time_major(dy))
        steps, batch = dyt.shape[0], dyt.shape[1]
        hs, vt = run.h, run.valid
        gy = np.empty_like(dyt)
        dz = np.empty((steps, batch, H), dtype=self._dtype)
        w_yh, v = p["weight_yh"], p["weight_ho"]
        nxt = None
        for t in range(steps - 1, -1, -1):
            gy_t = dyt[t] if nxt is None else dyt[t] + nxt @ w_yh
            if vt is not None:
                gy_t = gy_t * vt[t][:, None]
            gy[t] = gy_t
            dz_t = self._act_grad(gy_t @ v, hs[t], run.nonlinearity)
            if vt is not None:
                dz_t *= vt[t][:, None]
            dz[t] = dz_t
            nxt = dz_t
        gy_rows, dz_rows = gy.reshape(-1, O), dz.reshape(-1, H)
        g["weight_ho"] += gy_rows.T @ hs.reshape(-1, H)
        if self._bias:
            g["bias_o"] += gy_rows.sum(axis=0)
            g["bias_h"] += dz_rows.sum(axis=0)
        dx = _core.dense_backward(run.x, p["weight_ih"], dz_rows, g["weight_ih"])
        g["weight_yh"] += dz_rows.T @ run.y_prev.reshape(-1, O)
        dy0 = dz[0] @ w_yh if steps else np.zeros((batch, O), dtype=self._dtype)
        dx = dx.reshape(steps, batch, D)
        if self._batch_first:
            dx = np.ascontiguousarray(dx.swapaxes(0, 1))
        return dx, np.ascontiguousarray(dy0)

    # ---- one step and decoding ----------------------------------------------------------------

    def step(self, x_t, y_prev=None):
        """One step: ``y_t = layer.step(x_t, y_prev)``, x_t (B, D), y_prev (B, O) (zeros when
        None) or class ids (B,) (fed one-hot). Nothing is kept for backward."""
        x_t = as_float_array("x_t", x_t, self._dtype)
        if x_t.ndim != 2 or x_t.shape[1] != self._input_size:
            raise ValueError(
                f"x_t: expected shape (B, input_size) = (B, {self._input_size}), "
                f"got shape {x_t.shape}"
            )
        batch = x_t.shape[0]
        if y_prev is None:
            y_prev = np.zeros((batch, self._output_size), dtype=self._dtype)
        else:
            y_prev = _as_fed_values("y_prev", y_prev, self._output_size, self._dtype, (batch,))
        return self._step_core(x_t, y_prev)[1]

    def decoder(self, inputs=None, batch_size=None):
        """A step function for ``rnnfast.decoding`` (greedy, sampling, beam search) over a
        classification JordanRNN, and its start state: ``step_fn, state = layer.decoder(...)``.

        ``step_fn(tokens, state) -> (log_probs, state)`` feeds the previous tokens back one-hot
        (as teacher forcing feeds integer targets, so decode with the start token the training
        used as ``y0``) and returns the log-softmax of y_t (N, O).

        Parameters
        ----------
        inputs : None, "tokens" or array_like (T, B, D) ((B, T, D) with batch_first)
            x_t of each step: None zeros; "tokens" the one-hot previous token too (needs
            input_size == output_size); an array its step t (decode at most T tokens).
        batch_size : int
            B, needed when inputs is None or "tokens".

        The state is an int64 array (N, 2), [step, sequence] per row: the batch on axis -2, as
        ``decoding.default_reorder`` (beam search) wants it.
        """
        O = self._output_size
        table = None
        if isinstance(inputs, str):
            if inputs != "tokens":
                raise ValueError(f"inputs: expected None, 'tokens' or an array, got {inputs!r}")
            if self._input_size != O:
                raise ValueError(
                    f"inputs='tokens': feeds one-hot tokens as x_t, needs "
                    f"input_size == output_size, got {self._input_size} and {O}"
                )
        elif inputs is not None:
            table = as_float_array("inputs", inputs, self._dtype)
            if table.ndim != 3 or table.shape[2] != self._input_size:
                raise ValueError(
                    f"inputs: expected 3 dimensions with last input_size = "
                    f"{self._input_size}, got shape {table.shape}"
                )
            table = self._time_major(table)
            if batch_size is not None and batch_size != table.shape[1]:
                raise ValueError(
                    f"batch_size: the inputs hold {table.shape[1]} sequences, got {batch_size}"
                )
            batch_size = table.shape[1]
        if batch_size is None:
            raise ValueError("batch_size: needed when inputs is None or 'tokens'")
        batch_size = check_positive_int("batch_size", batch_size)
        mode = inputs if isinstance(inputs, str) else None

        def step_fn(tokens, state):
            tokens = np.asarray(tokens, dtype=np.int64)
            t, b = state[:, 0], state[:, 1]
            if table is not None:
                if t.size and t.max() >= table.shape[0]:
                    raise ValueError(
                        f"inputs: hold {table.shape[0]} steps; decoding asked for "
                        f"step {int(t.max()) + 1}"
                    )
                x_t = table[t, b]
            elif mode == "tokens":
                x_t = _one_hot(tokens, O, self._dtype)
            else:
                x_t = np.zeros((len(tokens), self._input_size), dtype=self._dtype)
            y = self.step(x_t, tokens)
            shifted = y - y.max(axis=1, keepdims=True)
            log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
            new = state.copy()
            new[:, 0] += 1
            return log_probs, new

        state = np.stack([np.zeros(batch_size, np.int64), np.arange(batch_size)], axis=1)
        return step_fn, state

    # ---- parameters, description, persistence -------------------------------------------------

    def random_generators(self):
        """None: a JordanRNN draws no dropout masks; its generator flips the teacher-forcing
        coins, which stay those of the layer's seed on every rank (see
        ``Layer.random_generators``)."""
        return {}

    @classmethod
    def parameter_shapes(cls, config):
        """``{name: shape}`` of a JordanRNN built from ``config``, without building it."""
        args = constructor_arguments(cls, config)
        D, H, O = (size(args, k) for k in ("input_size", "hidden_size", "output_size"))
        bias = flag(args, "bias", True)
        shapes = {"weight_ih": (H, D), "weight_yh": (H, O)}
        if bias:
            shapes["bias_h"] = (H,)
        shapes["weight_ho"] = (O, H)
        if bias:
            shapes["bias_o"] = (O,)
        return shapes

    def get_config(self):
        """The constructor arguments (JSON-ready): ``JordanRNN(**layer.get_config())``."""
        return {
            "input_size": self._input_size,
            "hidden_size": self._hidden_size,
            "output_size": self._output_size,
            "nonlinearity": self._nonlinearity,
            "bias": self._bias,
            "batch_first": self._batch_first,
            "dtype": self._dtype.name,
            "seed": None if self._seed is None else int(self._seed),
            "teacher_forced": self._teacher_forced,
            "feedback": self._feedback,
            "teacher_forcing_ratio": self._ratio,
        }

    def keras_param_count(self):
        """Keras's count: a SimpleRNN-like hidden layer (kernel, output-feedback kernel, one
        bias) and a Dense output layer; rnnfast stores exactly these, one bias each."""
        return self.num_parameters()

    def output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self._output_size,)

    def summary(self):
        """Print (and return) a Keras-style table: the hidden and the output layer, their output
        shapes and parameter counts."""
        D, H, O = self._input_size, self._hidden_size, self._output_size
        b = 1 if self._bias else 0
        seq = "(B, T, {})" if self._batch_first else "(T, B, {})"
        rows = [
            ("Layer (type)", "Output Shape", "Param #"),
            (
                f"hidden (JordanRNN, {self._nonlinearity}: W_ih x_t + W_yh y_t-1 + b_h)",
                seq.format(H),
                f"{H * (D + O) + b * H:,}",
            ),
            ("output (Dense: V h_t + c)", seq.format(O), f"{O * H + b * O:,}"),
        ]
        widths = [max(len(r[i]) for r in rows) + 3 for i in range(3)]
        width = sum(widths)

        def fmt(row):
            return " " + "".join(c.ljust(w) for c, w in zip(row, widths)).rstrip()

        lines = [
            'Model: "JordanRNN"',
            "_" * width,
            fmt(rows[0]),
            "=" * width,
            fmt(rows[1]),
            "_" * width,
            fmt(rows[2]),
            "=" * width,
            f"Total params: {self.keras_param_count():,}",
        ]
        text = "\n".join(lines)
        print(text)
        return text

    def call_with_padding(self, x, valid, suspect, who, **kwargs):
        """The call inside a container: a valid mask padded at the end runs as the lengths
        (padded steps output zeros, as the RNN's), and is passed on with the output."""
        if valid is not None and "lengths" not in kwargs:
            lengths = prefix_lengths(valid, self.batch_first)
            if lengths is None:
                raise ValueError(
                    f"{who}: JordanRNN takes lengths, padding at the end of each "
                    "sequence; this batch has masked steps inside sequences"
                )
            kwargs["lengths"] = lengths
        return pass_padding_on(self, x, valid, suspect, **kwargs)

    def __repr__(self):
        extra = "".join(
            [
                f", nonlinearity={self._nonlinearity!r}" if self._nonlinearity != "tanh" else "",
                ", bias=False" if not self._bias else "",
                ", batch_first=True" if self._batch_first else "",
                ", teacher_forced=True" if self._teacher_forced else "",
                f", feedback={self._feedback!r}" if self._feedback != "output" else "",
                f", teacher_forcing_ratio={self._ratio}" if self._ratio != 1.0 else "",
            ]
        )
        return (
            f"JordanRNN({self._input_size}, {self._hidden_size}, {self._output_size}{extra}, "
            f"dtype={self._dtype.name})"
        )
