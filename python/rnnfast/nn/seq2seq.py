"""Sequence-to-sequence (encoder-decoder) recurrent networks (Elman, GRU or LSTM), trained with
teacher forcing or scheduled sampling, decoded greedily, by sampling or by beam search.

    model = Seq2Seq(src_vocab, tgt_vocab, embed_dim=32, hidden_size=128, context="both",
                    cell="lstm")
    opt = optim.Adam(model, lr=3e-3)
    model.zero_grad()
    loss = model.train_batch(src, src_lengths, tgt_in, tgt_out, tgt_lengths,
                             teacher_forcing_ratio=teacher_forcing_schedule("inverse_sigmoid", step))
    opt.step()
    tokens, scores = model.generate(src, src_lengths, max_len=12, method="beam", beam_width=4,
                                    bos=BOS, eos=EOS)

Token arrays are batch-major: ``src`` (B, S), ``tgt_in`` / ``tgt_out`` (B, T) of integer ids,
padded at the end, with their lengths (B,). ``tgt_in`` is the target shifted right behind a start
token (``[BOS, y_1, ..., y_{n-1}]``) and ``tgt_out`` the target itself (``[y_1, ..., y_n]``, often
ending in EOS), both of length n.

``cell="gru"`` or ``cell="lstm"`` builds the encoder and the decoder as ``rnnfast.GRU`` /
``rnnfast.LSTM``; the three ways of handing the context over hold for every cell. The LSTM's
context is its pair of final states (h, c): as the initial state both are handed over, as the
input at every step h is (c is the cell's private memory).
"""

from __future__ import annotations

import copy
import math

import numpy as np

from .. import decoding
from .._validation import check_finite_real, check_int_array
from ..losses import cross_entropy, log_softmax
from ._children import ChildOwner
from ._inference_only import refuse_training
from ._layer import quantize_layer
from ._shapes import constructor_arguments, prefixed, size
from .embedding import Embedding
from .linear import Linear
from .recurrent import cells as cell_registry
from .recurrent import gated  # noqa: F401 (defines the gated cells' layers: the registry's layer_class)
from .sequential import embedding_feeds_rnn

__all__ = ["CELLS", "CONTEXT_MODES", "SCHEDULES", "Seq2Seq", "teacher_forcing_schedule"]

CONTEXT_MODES = ("init", "input", "both")
# the cells Seq2Seq builds its encoder and decoder of, by name (the cell registry, nn.recurrent.cells)
CELLS = tuple(spec.name for spec in cell_registry.CELLS)
SCHEDULES = ("linear", "exponential", "inverse_sigmoid")
METHODS = ("greedy", "sample", "beam")


# ---- scheduled sampling ---------------------------------------------------------------------


def teacher_forcing_schedule(kind, step, *, k=None, slope=None, minimum=0.0):
    """The teacher-forcing ratio ``eps_i`` of scheduled sampling at epoch or step ``i``
    (Bengio et al., 2015, "Scheduled Sampling for Sequence Prediction with Recurrent Neural
    Networks", section 2.4).

    ``linear``: ``eps_i = max(minimum, k - slope * i)`` (defaults k = 1, slope = 0.01);
    ``exponential``: ``eps_i = k ** i`` with ``0 < k < 1`` (default 0.99);
    ``inverse_sigmoid``: ``eps_i = k / (k + exp(i / k))`` with ``k >= 1`` (default 10).
    Every form is non-increasing in ``i`` and is clipped to ``[minimum, 1]``.

    Parameters
    ----------
    kind : {"linear", "exponential", "inverse_sigmoid"}
    step : real, >= 0
        The epoch or update count ``i``; the unit is the caller's (it sets how fast ``k`` decays).
    k, slope : float, optional
        The constants of the form (``slope`` only for ``linear``).
    minimum : float in [0, 1]
        The floor (Bengio et al.'s ``epsilon``): the least teacher forcing ever used.

    Returns
    -------
    float in [minimum, 1]: the probability of feeding the ground-truth previous token.

    Raises
    ------
    ValueError
        An unknown kind, a negative step, constants out of their range.
    TypeError
        Non-real arguments.
    """
    if kind not in SCHEDULES:
        raise ValueError(f"kind: expected one of {SCHEDULES}, got {kind!r}")
    i = check_finite_real("step", step)
    if i < 0:
        raise ValueError(f"step: expected a number >= 0, got {i}")
    minimum = check_finite_real("minimum", minimum)
    if not 0.0 <= minimum <= 1.0:
        raise ValueError(f"minimum: expected a number in [0, 1], got {minimum}")
    if slope is not None and kind != "linear":
        raise ValueError(f"slope: only the linear schedule has one, got kind={kind!r}")
    if kind == "linear":
        k = 1.0 if k is None else check_finite_real("k", k)
        slope = 0.01 if slope is None else check_finite_real("slope", slope)
        if slope < 0:
            raise ValueError(f"slope: expected a number >= 0, got {slope}")
        eps = k - slope * i
    elif kind == "exponential":
        k = 0.99 if k is None else check_finite_real("k", k)
        if not 0.0 < k < 1.0:
            raise ValueError(
                f"k: expected a number in (0, 1) for the exponential schedule, got {k}"
            )
        eps = k**i
    else:
        k = 10.0 if k is None else check_finite_real("k", k)
        if k < 1.0:
            raise ValueError(f"k: expected a number >= 1 for the inverse sigmoid schedule, got {k}")
        # k / (k + exp(i/k)) written to stay finite for large i
        z = i / k - math.log(k)
        eps = 1.0 / (1.0 + math.exp(z)) if z < 700 else 0.0
    return float(min(1.0, max(minimum, eps)))


# ---- arguments ------------------------------------------------------------------------------


def _tokens(name, value, vocab=None):
    arr = np.asarray(value)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{name}: expected an integer array of token ids, got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise ValueError(f"{name}: expected shape (B, T), got shape {arr.shape}")
    if vocab is not None and arr.size and (arr.min() < 0 or arr.max() >= vocab):
        raise ValueError(
            f"{name}: expected ids in [0, {vocab}), got min {arr.min()}, max {arr.max()}"
        )
    return arr.astype(np.int64)


def _lengths(name, value, batch, steps):
    if value is None:
        return np.full(batch, steps, np.int64)
    arr = check_int_array(name, value)
    if arr.shape != (batch,):
        raise ValueError(f"{name}: expected shape (B,) = ({batch},), got shape {arr.shape}")
    if arr.size and (arr.min() < 0 or arr.max() > steps):
        raise ValueError(
            f"{name}: expected values in [0, T] = [0, {steps}], got min "
            f"{arr.min()}, max {arr.max()}"
        )
    return arr.astype(np.int64)


def _ratio(value):
    r = check_finite_real("teacher_forcing_ratio", value)
    if not 0.0 <= r <= 1.0:
        raise ValueError(f"teacher_forcing_ratio: expected a probability in [0, 1], got {r}")
    return r


# ---- the model ------------------------------------------------------------------------------


class Seq2Seq(ChildOwner):
    """Encoder-decoder RNN: Embedding -> RNN encodes the source; its state after each
    source sequence's own last token is the context ``c`` (B, H) (the LSTM's: the pair (h, c));
    Embedding -> RNN -> Linear decodes the target one token at a time. The RNNs are Elman
    layers (``rnnfast.RNN``), ``rnnfast.GRU`` or ``rnnfast.LSTM`` (``cell``).

    Parameters
    ----------
    src_vocab, tgt_vocab : int
        Vocabulary sizes (token ids in [0, vocab)).
    embed_dim, hidden_size : int
        Width of both embeddings and of both RNNs' states.
    context : {"init", "input", "both"}
        How the decoder sees ``c``: ``"init"``, as its initial state (Sutskever et al., 2014);
        ``"input"``, concatenated to the token embedding at every step, the decoder starting
        from zeros (Cho et al., 2014); ``"both"``. With ``cell="lstm"`` the initial state is
        the encoder's pair (h, c) and the input its h.
    cell : {"rnn", "gru", "lstm"}
        The encoder's and the decoder's layer: ``rnnfast.RNN`` (Elman), ``rnnfast.GRU``
        (PyTorch's form) or ``rnnfast.LSTM``.
    nonlinearity : {"tanh", "relu"}
        The Elman cell's nonlinearity; the gated cells' ``activation``.
    dtype : float32 or float64
    seed : int, optional
        Seeds the initialisation of every layer and the teacher-forcing coin flips of
        :meth:`train_batch` when it is given no ``rng``.

    The module protocol of the layers holds: ``named_parameters()`` (keys prefixed
    ``encoder_embedding.``, ``encoder.``, ``decoder_embedding.``, ``decoder.``, ``output.``),
    ``grads`` (same keys, accumulated by :meth:`backward` / :meth:`train_batch`),
    ``zero_grad()``, ``train()`` / ``eval()``, ``state_dict()`` / ``load_state_dict()``; so
    ``optim.Adam(model)`` and ``optim.clip_grad_norm(model, ...)`` work.
    """

    def __init__(
        self,
        src_vocab,
        tgt_vocab,
        embed_dim,
        hidden_size,
        *,
        context="init",
        cell="rnn",
        nonlinearity="tanh",
        dtype=np.float32,
        seed=None,
    ):
        if context not in CONTEXT_MODES:
            raise ValueError(f"context: expected one of {CONTEXT_MODES}, got {context!r}")
        if cell not in CELLS:
            raise ValueError(f"cell: expected one of {CELLS}, got {cell!r}")
        self.context = context
        self.cell = cell
        self.nonlinearity = nonlinearity
        self.seed = seed
        seeds = np.random.SeedSequence(seed).generate_state(6)
        s = [int(x) for x in seeds]
        self.encoder_embedding = Embedding(src_vocab, embed_dim, dtype=dtype, seed=s[0])
        self.encoder = self._recurrent(embed_dim, hidden_size, dtype, s[1])
        self.decoder_embedding = Embedding(tgt_vocab, embed_dim, dtype=dtype, seed=s[2])
        dec_in = embed_dim + (hidden_size if self.context_as_input else 0)
        self.decoder = self._recurrent(dec_in, hidden_size, dtype, s[3])
        self.output = Linear(hidden_size, tgt_vocab, dtype=dtype, seed=s[4])
        self._rng = np.random.default_rng(s[5])
        self.dtype = self.encoder.dtype
        self.src_vocab, self.tgt_vocab = int(src_vocab), int(tgt_vocab)
        self.embed_dim, self.hidden_size = int(embed_dim), int(hidden_size)
        self.training = True
        self._cache = None
        self._encoder_fused = False  # did the last encode() run Embedding -> RNN fused?
        self.last_fed_tokens = None  # the decoder input of the last train_batch, (B, T)

    def _recurrent(self, input_size, hidden_size, dtype, seed):
        """The encoder's or the decoder's layer of ``cell``."""
        spec = cell_registry.cell_by(name=self.cell)
        return spec.layer_class(
            input_size,
            hidden_size,
            dtype=dtype,
            seed=seed,
            **{spec.activation_option: self.nonlinearity},
        )

    @property
    def is_lstm(self):
        """Does the state come in two parts (the LSTM's (h, c))?"""
        return cell_registry.cell_by(name=self.cell).num_states == 2

    def _context_h(self, c):
        """The part of the context read as input: h ((B, H))."""
        return c[0] if self.is_lstm else c

    def _initial_state(self, c):
        """The context as the decoder's initial state (one layer): (1, B, H), or the pair."""
        if self.is_lstm:
            return (c[0][None], c[1][None])
        return c[None]

    @property
    def context_as_init(self):
        return self.context in ("init", "both")

    @property
    def context_as_input(self):
        return self.context in ("input", "both")

    def named_children(self):
        return list(self.modules.items())

    def _forget_forward(self):
        self._cache = None

    @property
    def modules(self):
        """The sub-layers by prefix, in state_dict order."""
        return {
            "encoder_embedding": self.encoder_embedding,
            "encoder": self.encoder,
            "decoder_embedding": self.decoder_embedding,
            "decoder": self.decoder,
            "output": self.output,
        }

    # ---- forward and backward ---------------------------------------------------------------

    def encode(self, src, src_lengths=None):
        """The context: the encoder's state after each source's own last token, (B, H); with
        ``cell="lstm"`` the pair (h, c) of such arrays.

        In training mode the encoder keeps its forward for :meth:`backward`. An empty source
        (length 0) gives zeros.
        """
        src = _tokens("src", src, self.src_vocab)
        lengths = _lengths("src_lengths", src_lengths, src.shape[0], src.shape[1])
        ids = np.ascontiguousarray(src.T)  # (S, B): time-major
        # Fused like Sequential's Embedding -> RNN when that pays (see embedding_feeds_rnn)
        self._encoder_fused = embedding_feeds_rnn(self.encoder_embedding, self.encoder, ids)
        if self._encoder_fused:
            _, h_n = self.encoder(ids, lengths=lengths, embedding=self.encoder_embedding)
        else:
            _, h_n = self.encoder(self.encoder_embedding(ids), lengths=lengths)
        if self.is_lstm:
            return h_n[0][0], h_n[1][0]
        return h_n[0]

    def _decoder_input(self, emb, c):
        """(T, B, E) embeddings -> the decoder's input, with the context appended if so."""
        if not self.context_as_input:
            return emb
        c = self._context_h(c)
        ctx = np.broadcast_to(c, (emb.shape[0],) + c.shape)
        return np.concatenate([emb, ctx], axis=2)

    def forward(self, src, src_lengths, tgt_in, tgt_lengths=None):
        """Logits of every target position given the tokens fed to the decoder (teacher forcing
        when ``tgt_in`` is the shifted ground truth).

        Parameters
        ----------
        src : int array (B, S); src_lengths : int array (B,) or None (all S)
        tgt_in : int array (B, T); tgt_lengths : int array (B,) or None (all T)

        Returns
        -------
        logits : ndarray (B, T, tgt_vocab) of the model's dtype; zeros-input logits (the
        output bias) past each target's length. In training mode the forward is kept for one
        :meth:`backward`.
        """
        tgt_in = _tokens("tgt_in", tgt_in, self.tgt_vocab)
        batch, steps = tgt_in.shape
        src = _tokens("src", src, self.src_vocab)
        if src.shape[0] != batch:
            raise ValueError(
                f"tgt_in: expected the batch of src, B = {src.shape[0]}, got shape {tgt_in.shape}"
            )
        tgt_lengths = _lengths("tgt_lengths", tgt_lengths, batch, steps)
        c = self.encode(src, src_lengths)
        emb = self.decoder_embedding(np.ascontiguousarray(tgt_in.T))
        h0 = self._initial_state(c) if self.context_as_init else None
        y, _ = self.decoder(self._decoder_input(emb, c), h0=h0, lengths=tgt_lengths)
        logits = self.output(y)  # (T, B, V)
        self._cache = (steps,) if self.training else None
        return np.ascontiguousarray(logits.swapaxes(0, 1))

    __call__ = forward

    def backward(self, d_logits):
        """Back-propagate ``d_logits`` (B, T, tgt_vocab) of the last training forward through
        decoder and encoder, adding into ``grads``."""
        refuse_training(self, "backward")
        if self._cache is None:
            raise RuntimeError(
                "backward: no training forward to differentiate; call the model "
                "in training mode first (each forward allows one backward)"
            )
        self._cache = None
        d_logits = np.asarray(d_logits, dtype=self.dtype)
        dy = self.output.backward(np.ascontiguousarray(d_logits.swapaxes(0, 1)))
        dx, dh0 = self.decoder.backward(dy)
        E = self.embed_dim
        self.decoder_embedding.backward(np.ascontiguousarray(dx[..., :E]))
        dh0_h = dh0[0] if self.is_lstm else dh0  # the LSTM's (dh0, dc0)
        dc = np.zeros_like(dh0_h[0])
        if self.context_as_init:
            dc += dh0_h[0]
        if self.context_as_input:
            dc += dx[..., E:].sum(axis=0)
        dh_n = dc[None]
        if self.is_lstm:
            dc_n = dh0[1] if self.context_as_init else None
            dh_n = (dh_n, None if dc_n is None else np.ascontiguousarray(dc_n))
        d_src, _ = self.encoder.backward(None, dh_n=dh_n)
        if not self._encoder_fused:  # else the encoder added the embedding's gradient
            self.encoder_embedding.backward(d_src)

    # ---- training ---------------------------------------------------------------------------

    def train_batch(
        self, src, src_lengths, tgt_in, tgt_out, tgt_lengths, teacher_forcing_ratio=1.0, rng=None
    ):
        """Forward and backward of one batch; returns the loss (the caller steps the optimizer).

        The loss is the softmax cross-entropy averaged over the target tokens within
        ``tgt_lengths``; its gradients are added into ``grads``.

        With ``teacher_forcing_ratio = 1`` the decoder reads ``tgt_in`` (the ground truth) as one
        sequence call. Below 1 (scheduled sampling), the token fed at each step t >= 1 of each
        sequence is the ground truth ``tgt_in[:, t]`` with probability ``teacher_forcing_ratio``,
        else the model's own greedy prediction at step t - 1 (the first token, ``tgt_in[:, 0]``,
        is always fed). That takes two passes: a step-by-step pass with no gradient picks the fed
        tokens, then one training forward and backward runs over the fed sequence. The
        gradient flows through the fed tokens' embeddings and every state but not through the
        choice of token (an argmax has no gradient): the stop-gradient through the sampling
        decision that scheduled sampling (Bengio et al., 2015) uses. The fed tokens are kept in
        ``last_fed_tokens`` (B, T).

        Parameters
        ----------
        src, src_lengths : int arrays (B, S), (B,) (None: all S)
        tgt_in, tgt_out : int arrays (B, T)
        tgt_lengths : int array (B,) (None: all T)
        teacher_forcing_ratio : float in [0, 1]
        rng : numpy.random.Generator, int or None
            The coin flips; None draws from the model's own generator (seeded by ``seed``).

        Returns
        -------
        loss : float
        """
        refuse_training(self, "train_batch")
        if not self.training:
            raise RuntimeError("train_batch: the model is in eval mode; call model.train() first")
        ratio = _ratio(teacher_forcing_ratio)
        tgt_in = _tokens("tgt_in", tgt_in, self.tgt_vocab)
        tgt_out = _tokens("tgt_out", tgt_out)
        if tgt_out.shape != tgt_in.shape:
            raise ValueError(
                f"tgt_out: expected the shape of tgt_in {tgt_in.shape}, got shape {tgt_out.shape}"
            )
        tgt_lengths = _lengths("tgt_lengths", tgt_lengths, *tgt_in.shape)
        fed = tgt_in
        if ratio < 1.0 and tgt_in.shape[1] > 1:
            rng = self._rng if rng is None else np.random.default_rng(rng)
            fed = self._scheduled_inputs(src, src_lengths, tgt_in, ratio, rng)
        self.last_fed_tokens = fed
        logits = self.forward(src, src_lengths, fed, tgt_lengths)
        loss, d_logits = cross_entropy(logits, tgt_out, lengths=tgt_lengths, batch_first=True)
        self.backward(d_logits)
        return loss

    def _scheduled_inputs(self, src, src_lengths, tgt_in, ratio, rng):
        """The no-gradient pass: the tokens fed at every step, each the ground truth with
        probability ``ratio``, else the greedy prediction of the step before."""
        batch, steps = tgt_in.shape
        teacher = rng.random((batch, steps)) < ratio
        teacher[:, 0] = True
        fed = tgt_in.copy()
        if teacher.all():
            return fed
        step_fn, state = self._inference(src, src_lengths)
        for t in range(steps - 1):
            log_probs, state = step_fn(fed[:, t], state)
            fed[:, t + 1] = np.where(teacher[:, t + 1], tgt_in[:, t + 1], log_probs.argmax(axis=1))
        return fed

    # ---- generation -------------------------------------------------------------------------

    def _inference(self, src, src_lengths):
        """``(step_fn, state)`` for rnnfast.decoding: the encoder run without keeping anything
        for backward, the decoder stepped on the live parameters."""
        # eval mode keeps nothing for backward; a pending training forward survives (its
        # cache is put back), so generation may sit between a forward and its backward.
        layers = (self.encoder, self.encoder_embedding)
        saved = [(layer.training, layer._cache) for layer in layers]
        for layer in layers:
            layer.train(False)
        try:
            c = self.encode(src, src_lengths)
        finally:
            for layer, (mode, cache) in zip(layers, saved):
                layer.train(mode)
                layer._cache = cache
        # the layers' own no-cache products (a quantized copy's run its own arithmetic)
        lookup, project = self.decoder_embedding.lookup, self.output.project
        decoder = self.decoder
        as_input = self.context_as_input
        ctx = self._context_h(c)
        zeros = np.zeros((1,) + ctx.shape, self.dtype)
        if self.context_as_init:  # copies: the steps must not write into the context
            h0 = tuple(p.copy() for p in self._initial_state(c)) if self.is_lstm else c[None].copy()
        else:
            h0 = (zeros, zeros.copy()) if self.is_lstm else zeros

        def step_fn(tokens, state):
            h, ctx = state
            x = lookup(tokens)
            if as_input:
                x = np.concatenate([x, ctx], axis=1)
            y, h_next = decoder.step(x, h)
            return log_softmax(project(np.ascontiguousarray(y))), (h_next, ctx)

        # the decoder's state (h, or the LSTM's pair (h, c), each (1, N, H)) and the context
        # read as input (N, H): both carry the batch on axis -2, as decoding's reorder takes it
        return step_fn, (h0, ctx)

    def generate(
        self,
        src,
        src_lengths=None,
        max_len=20,
        method="greedy",
        *,
        bos,
        eos=None,
        beam_width=4,
        temperature=1.0,
        top_k=None,
        length_penalty=1.0,
        rng=None,
    ):
        """Decode target sequences for a batch of sources with :mod:`rnnfast.decoding`.

        Parameters
        ----------
        src, src_lengths : int arrays (B, S), (B,) (None: all S)
        max_len : int
            Tokens to generate (start token excluded).
        method : {"greedy", "sample", "beam"}
        bos : int
            The start token fed at the first step.
        eos : int, optional
            Ends a sequence (its later positions hold ``eos``).
        beam_width, length_penalty : beam search's (see :func:`rnnfast.decoding.beam_search`)
        temperature, top_k, rng : sampling's (see :func:`rnnfast.decoding.sample_decode`)

        Returns
        -------
        tokens : int64 (B, max_len)
        scores : float64 (B,): the log-probability of each sequence (greedy, sample), or beam
        search's length-normalised score.

        Nothing is kept for backward; parameters, gradients and caches are left as they were.
        """
        if method not in METHODS:
            raise ValueError(f"method: expected one of {METHODS}, got {method!r}")
        step_fn, state = self._inference(src, src_lengths)
        if method == "greedy":
            return decoding.greedy_decode(step_fn, state, bos, max_len, eos_token=eos)
        if method == "sample":
            return decoding.sample_decode(
                step_fn,
                state,
                bos,
                max_len,
                temperature=temperature,
                top_k=top_k,
                eos_token=eos,
                rng=rng,
            )
        return decoding.beam_search(
            step_fn, state, bos, max_len, beam_width, eos_token=eos, length_penalty=length_penalty
        )

    # ---- configuration and quantization ------------------------------------------------------

    def quantized_copy(self, mode, where="model"):
        """A copy with its five layers quantized (``rnnfast.quantize``); decoding steps through
        them. Of this exact class only, as for layers."""
        if type(self) is not Seq2Seq:
            return super().quantized_copy(mode, where)
        q = copy.copy(self)
        for name, child in self.modules.items():
            setattr(q, name, quantize_layer(child, mode, f"{where}.{name}"))
        q._rng = copy.deepcopy(self._rng)  # the copy's coin flips do not advance the original's
        q._cache, q._encoder_fused, q.last_fed_tokens = None, False, None
        return q._as_inference_copy(mode)

    @classmethod
    def parameter_shapes(cls, config):
        """``{name: shape}`` of a Seq2Seq built from ``config``: its embeddings', encoder's,
        decoder's and output layer's, without building it."""
        args = constructor_arguments(cls, config)
        src, tgt = size(args, "src_vocab"), size(args, "tgt_vocab")
        embed, hidden = size(args, "embed_dim"), size(args, "hidden_size")
        spec = cell_registry.cell_by(name=args.get("cell"))
        recurrent = None if spec is None else spec.layer_class
        if recurrent is None:
            raise ValueError(f"config['cell']: expected one of {CELLS}, got {args.get('cell')!r}")
        dec_in = embed + (hidden if args.get("context") in ("input", "both") else 0)
        return {
            **prefixed("encoder_embedding", {"weight": (src, embed)}),
            **prefixed(
                "encoder", recurrent.parameter_shapes({"input_size": embed, "hidden_size": hidden})
            ),
            **prefixed("decoder_embedding", {"weight": (tgt, embed)}),
            **prefixed(
                "decoder", recurrent.parameter_shapes({"input_size": dec_in, "hidden_size": hidden})
            ),
            **prefixed("output", {"weight": (tgt, hidden), "bias": (tgt,)}),
        }

    def get_config(self):
        return {
            "src_vocab": self.src_vocab,
            "tgt_vocab": self.tgt_vocab,
            "embed_dim": self.embed_dim,
            "hidden_size": self.hidden_size,
            "context": self.context,
            "cell": self.cell,
            "nonlinearity": self.nonlinearity,
            "dtype": self.dtype.name,
            "seed": self.seed,
        }

    def __repr__(self):
        return (
            f"Seq2Seq({self.src_vocab}, {self.tgt_vocab}, embed_dim={self.embed_dim}, "
            f"hidden_size={self.hidden_size}, context={self.context!r}, "
            f"cell={self.cell!r}, dtype={self.dtype.name})"
        )
