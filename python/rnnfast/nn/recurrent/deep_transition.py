"""The deep-transition RNN (Pascanu et al., "How to Construct Deep Recurrent Neural Networks",
ICLR 2014; the lecture notes' slide 50, middle): an MLP of k layers inside the
hidden-to-hidden step,

    z_1 = act(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh),  z_i = act(W_i z_{i-1} + b_i) (i = 2..k),
    h_t = z_k,

so the path from h_{t-1} to h_t, and the gradient's way back, crosses k nonlinear layers. Its
cell description (``DeepTransitionSpec``, in ``nn.recurrent.cells``' style) adds the transition's
parameters to the Elman cell's and runs ``rnnfast.functional.deep_transition_*``; everything
around the cell (layers x directions, lengths, batch order, stateful layers, dense skips,
residual connections, dropout between layers and on the input, the API forms) is the Elman
layer's machinery, ``nn.recurrent.rnn`` and ``nn.recurrent.stack``, unchanged.
"""

from __future__ import annotations

import numpy as np

from ... import functional
from ..._validation import check_positive_int, describe, is_real
from .cells import ElmanSpec
from .rnn import RNN
from .rnn_options import fixed

__all__ = ["DEEP_TRANSITION", "DeepTransitionRNN", "DeepTransitionSpec"]

_TRANSITION = ("weight_tr", "bias_tr")


def _is_transition(name):
    return name.startswith(_TRANSITION)


class DeepTransitionSpec(ElmanSpec):
    """The deep-transition cell: the Elman cell's parameters per (layer, direction) plus, for
    each layer i = 2..k of the transition, ``weight_tr{i}_l{l}[_reverse]`` (H, H) and (with
    ``bias``) ``bias_tr{i}_l{l}[_reverse]`` (H,). One state, one gate block. No PyTorch,
    Keras or ONNX counterpart: ``keras_name`` and ``onnx_op`` are empty (interop refuses
    such a cell), ``torch_name`` names the layer in summaries and its repr."""

    torch_name, keras_name, onnx_op = "DeepTransitionRNN", "", ""

    def transition_names(self, layer, idx):
        """``[(weight_tr{i} name, bias_tr{i} name or None) for i = 2..k]`` of (layer,
        direction) ``idx``."""
        return self._transition_names(layer, layer._names[idx][0])

    def _transition_names(self, layer, w_ih):
        """As :meth:`transition_names`, from the (layer, direction)'s ``weight_ih`` name."""
        return [
            (
                w_ih.replace("weight_ih", f"weight_tr{i}", 1),
                w_ih.replace("weight_ih", f"bias_tr{i}", 1) if layer.bias else None,
            )
            for i in range(2, layer.transition_layers + 1)
        ]

    def transition(self, layer, idx):
        """``(weight_tr (k - 1, H, H), bias_tr (k - 1, H) or None)`` of (layer, direction)
        ``idx`` as the kernels take them, stacked from the live parameters (a copy of
        (k - 1) H^2 values, small beside a sequence's products)."""
        names, p = self.transition_names(layer, idx), layer._params
        H = layer.hidden_size
        if not names:
            return np.empty((0, H, H), dtype=layer.dtype), None
        w = np.stack([p[w] for w, _ in names])
        b = np.stack([p[b] for _, b in names]) if layer.bias else None
        return w, b

    # ---- parameters ----------------------------------------------------------------------------

    def layout(self, layer):
        """The Elman cell's layout with each (layer, direction)'s transition parameters after its
        own four, ``weight_tr2, bias_tr2, weight_tr3, ...`` (the ``state_dict``'s order)."""
        names, elman = super().layout(layer)
        H = layer.hidden_size
        shapes = {}
        for group in names:
            for name in group:
                if name is not None:
                    shapes[name] = elman[name]
            for w, b in self._transition_names(layer, group[0]):
                shapes[w] = (H, H)
                if b is not None:
                    shapes[b] = (H,)
        return names, shapes

    def initial_values(self, layer, rng, shapes):
        """PyTorch's U(-1/sqrt(H), 1/sqrt(H)) for every parameter (torch.nn.Linear(H, H)'s
        bound too), the Elman cell's drawn first, in the order ``rnnfast.RNN`` draws them: with
        the same seed, the layer starts from ``RNN``'s W_ih, W_hh and biases (k = 1: it is that
        layer), its transition drawn after them."""
        elman = {n: s for n, s in shapes.items() if not _is_transition(n)}
        params = super().initial_values(layer, rng, elman)
        rest = {n: s for n, s in shapes.items() if _is_transition(n)}
        params.update(super().initial_values(layer, rng, rest))
        return {name: params[name] for name in shapes}

    def keras_count(self, layer, group):
        """Keras's count: the SimpleRNN's (kernel, recurrent kernel, one bias) plus one Dense(H)
        (H^2 + H) per further layer of the transition."""
        n = super().keras_count(layer, group)
        return n + sum(a.size for kind, a in group.items() if _is_transition(kind))

    def summary_kind(self, layer):
        return f"deep transition k={layer.transition_layers}, {layer.nonlinearity}"

    # ---- kernels -------------------------------------------------------------------------------

    def forward(
        self, layer, run, k, idx, x, h0, lengths, ids, step_mask, recurrent_mask, input_mask=None
    ):
        if layer.transition_layers == 1:  # the Elman layer, on its kernels: bit for bit RNN's
            return super().forward(
                layer, run, k, idx, x, h0, lengths, ids, step_mask, recurrent_mask, input_mask
            )
        # token input, step masks and recurrent dropout never reach here: the layer refuses them
        w_ih, w_hh, b_ih, b_hh = (
            None if n is None else layer._params[n] for n in layer._names[idx]
        )
        w_tr, b_tr = self.transition(layer, idx)
        out = functional.deep_transition_forward(
            x, w_ih, w_hh, w_tr, b_ih, b_hh, b_tr, h0, run.nonlinearity, lengths
        )
        return out.y, out.h_n, (out.workspace if run.training else None)

    def backward(self, layer, run, k, idx, record, dy, dh_n, table, input_gradient):
        if layer.transition_layers == 1:
            return super().backward(layer, run, k, idx, record, dy, dh_n, table, input_gradient)
        names, p = layer._names[idx], layer._params
        w_tr, _ = self.transition(layer, idx)
        g = functional.deep_transition_backward(
            record.fed, p[names[0]], p[names[1]], w_tr, record.y, record.workspace, dy, dh_n,
            h0=record.h0, nonlinearity=run.nonlinearity, lengths=record.lengths,
            input_gradient=input_gradient,
        )  # fmt: skip
        grads = {names[0]: g.dweight_ih, names[1]: g.dweight_hh}
        if names[2] is not None:
            grads[names[2]] = grads[names[3]] = g.dbias
        for i, (w, b) in enumerate(self.transition_names(layer, idx)):
            grads[w] = g.dweight_tr[i]
            if b is not None:
                grads[b] = g.dbias_tr[i]
        return grads, g.dx, g.dh0


DEEP_TRANSITION = DeepTransitionSpec()


def _deep_step(x_t, h, w_ih, w_hh, b_ih, b_hh, w_tr, b_tr, nonlinearity, alpha):
    """step()'s kernel, in the Elman layer's calling convention (``RNN._step_kernel``; alpha is
    always 1 here)."""
    return functional.deep_transition_step(x_t, h, w_ih, w_hh, w_tr, b_ih, b_hh, b_tr, nonlinearity)


def _refused(option, value, why):
    return ValueError(
        f"{option}={describe(value)}: not supported for DeepTransitionRNN ({why}); use "
        f"rnnfast.RNN({option}=...), which has it"
    )


class DeepTransitionRNN(RNN):
    """Deep-transition RNN layer (Pascanu et al., ICLR 2014): an MLP of ``transition_layers``
    nonlinear layers of width H inside the hidden-to-hidden step,

    ``z_1 = act(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh)``, ``z_i = act(W_i z_{i-1} + b_i)`` for
    i = 2..k, ``h_t = z_k`` (act tanh or relu, the same in every layer).

    ``transition_layers=k`` counts every layer of the transition: k = 1 is ``rnnfast.RNN``,
    bit for bit (the same parameters, the same kernels). The input projection of all steps is
    one GEMM; each step runs its k products inside the kernels' time loop; the backward is
    exact BPTT through every layer (``rnnfast.functional.deep_transition_forward`` /
    ``_backward``).

    A class of its own rather than an option of ``RNN``: its parameters are not the Elman
    layer's (``weight_tr{i}_l{l}[_reverse]`` (H, H) and ``bias_tr{i}_l{l}[_reverse]`` (H,), i =
    2..k, beside RNN's four per layer and direction), so nothing that reads an ``RNN`` as
    ``torch.nn.RNN``'s layout (``to_torch`` / ``from_torch``, Keras weights, the ONNX ``RNN``
    op, ``rnnfast.quantize``'s kernels, a saved file that names no class) can take one for an
    RNN and silently drop its transition: each refuses it by name. Everything the layer
    machinery does around the cell is ``RNN``'s and works the same: ``num_layers``,
    ``bidirectional``, ``lengths`` (and prefix masks), ``batch_first``, unbatched input,
    ``dropout`` between layers, ``input_dropout``, ``residual``, ``input_to_all`` /
    ``all_to_output`` (dense skips), ``merge_mode``, ``go_backwards``, Keras's
    ``return_sequences`` / ``return_state``, ``stateful``, ``step`` (a sequence of one step
    through the forward kernel), ``summary``, ``get_config``, save and load.

    Parameters
    ----------
    input_size, hidden_size, num_layers, nonlinearity, bias, batch_first, dropout,
    bidirectional, dtype, seed, residual, merge_mode, go_backwards, return_sequences,
    return_state, stateful, input_dropout, zero_output_for_mask, input_to_all, all_to_output :
        As ``rnnfast.RNN``. With the same ``seed`` the Elman parameters start as ``RNN``'s;
        the transition's are drawn after them, U(-1/sqrt(H), 1/sqrt(H)) as well.
    transition_layers : int >= 1
        k, the layers of the transition, its first (reading x_t and h_{t-1}) included.
        Fixed at construction.
    alpha, dilation, recurrent_dropout :
        Refused unless neutral (1.0, 1, 0.0): leaky units, dilated recurrences and recurrent
        dropout are the Elman layer's (their kernels have no deep transition).

    Not supported, each refused by name: token input (``embedding=``: call
    ``layer(embedding(ids))``; ``Sequential`` never fuses this layer), Keras's general step
    masks (a mask that is not a prefix of each row, or a prefix mask whose padded steps repeat
    the previous output, ``zero_output_for_mask=False``: pass lengths), ``rnnfast.quantize``,
    ONNX export and ``to_torch`` / ``from_torch`` (neither format has the transition).
    """

    cell = DEEP_TRANSITION
    transition_layers = fixed("transition_layers", "the parameters depend on it")

    _cell_options_declared = (("transition_layers", 2),)
    _fixed_options = ("transition_layers",)

    def _init_cell(self, a):
        # read by the cell's layout when the constructor draws the parameters
        self._transition_layers = check_positive_int("transition_layers", a["transition_layers"])

    # ---- RNN's options this layer refuses, but at their neutral values ----------------------

    @property
    def alpha(self):
        """Always 1.0: leaky units are the Elman layer's (``rnnfast.RNN(alpha=...)``)."""
        return 1.0

    @alpha.setter
    def alpha(self, value):
        values = value if isinstance(value, (list, tuple)) else [value]
        if not all(is_real(a) and float(a) == 1.0 for a in values):
            raise _refused("alpha", value, "leaky units: the deep-transition kernels have none")
        self._alpha, self._alphas = 1.0, [1.0] * self.num_layers

    @property
    def dilation(self):
        """Always 1: dilated recurrences are the Elman layer's (``rnnfast.RNN(dilation=...)``)."""
        return 1

    @dilation.setter
    def dilation(self, value):
        values = value if isinstance(value, (list, tuple)) else [value]
        if not all(is_real(d) and not isinstance(d, bool) and d == 1 for d in values):
            raise _refused("dilation", value, "a deep transition reads h_{t-1} only")
        self._dilation, self._dilations = 1, (1,) * self.num_layers

    @property
    def recurrent_dropout(self):
        """Always 0.0: recurrent dropout is the Elman layer's (its kernels apply the mask)."""
        return 0.0

    @recurrent_dropout.setter
    def recurrent_dropout(self, value):
        if not (is_real(value) and float(value) == 0.0):
            raise _refused(
                "recurrent_dropout", value, "the deep-transition kernels apply no recurrent mask"
            )
        self._recurrent_dropout = 0.0

    # ---- what the layer machinery asks -------------------------------------------------------

    def _mask_arg(self, lengths, mask, steps, batch, o):
        """As ``RNN``'s, refusing what would run as a Keras step mask (the deep-transition
        kernels run lengths only)."""
        lengths, step_mask = super()._mask_arg(lengths, mask, steps, batch, o)
        if step_mask is not None:
            prefix = bool(np.all(step_mask[1:] <= step_mask[:-1]))
            why = (
                "a prefix mask whose padded steps repeat the previous output "
                "(zero_output_for_mask False)"
                if prefix
                else "a mask that skips steps inside a sequence"
            )
            raise ValueError(
                f"mask: DeepTransitionRNN runs each sequence to its own length (padded steps "
                f"output zeros) and takes no Keras step mask; got {why}. Pass lengths= (or a "
                "prefix mask with zero_output_for_mask=True)"
            )
        return lengths, None

    def _token_input(self, ids, embedding, batch_first):
        raise ValueError(
            "embedding: DeepTransitionRNN has no fused token input (its kernels read a float "
            "sequence); call layer(embedding(ids)) instead"
        )

    def takes_embedding(self, embedding, ids):
        """Never: the layer has no fused token input (Sequential embeds the ids first)."""
        return False

    # step(): the Elman layer's streaming code on the deep-transition step kernel
    _step_kernel = staticmethod(_deep_step)

    def _step_weights(self, layer):
        """The step kernel's weight arguments for stacked layer ``layer``, read live: RNN's four
        and the transition's two."""
        return (*super()._step_weights(layer), *self.cell.transition(self, layer))

    def get_config(self):
        """The constructor arguments: ``DeepTransitionRNN(**layer.get_config())`` builds the
        same architecture (fresh parameters). JSON-serialisable."""
        return {**super().get_config(), "transition_layers": self.transition_layers}

    # ---- the formats that have no deep transition refuse it by name ---------------------------

    def quantized_copy(self, mode, where="model"):
        raise ValueError(
            f"{where}: a DeepTransitionRNN cannot be quantized: rnnfast.quantize has no "
            "kernels for its transition layers (weight_tr*); run it in float32, or quantize a "
            "model built with rnnfast.RNN"
        )

    def onnx_check(self, who):
        raise ValueError(
            f"{who}: a DeepTransitionRNN cannot be exported to ONNX: the ONNX RNN op has one "
            "layer in its transition, and the exporter writes no loop of several; export a "
            "model built with rnnfast.RNN"
        )

    def onnx_emit(self, exporter, flow, who):
        self.onnx_check(who)

    def to_torch(self):
        raise ValueError(
            "layer: torch.nn has no deep-transition RNN (torch.nn.RNN's transition is one "
            "layer), so a DeepTransitionRNN has no torch module to become; compose one from "
            "torch.nn.Linear layers over the steps if you need it in PyTorch"
        )

    @classmethod
    def from_torch(cls, module):
        raise ValueError(
            "module: torch.nn has no deep-transition RNN to read a DeepTransitionRNN from "
            "(torch.nn.RNN's transition is one layer); use rnnfast.RNN.from_torch(module)"
        )
