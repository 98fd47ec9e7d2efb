"""Seq2Seq with GRU and LSTM encoders and decoders: the context handed over three ways (the
LSTM's h and c), exact gradients of train_batch with teacher forcing and scheduled sampling,
and greedy, sampling and beam decoding carrying the decoder's state (the LSTM's pair)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import central_difference

import rnnfast
from rnnfast import losses
from rnnfast.nn.seq2seq import Seq2Seq

CELLS = ["gru", "lstm"]
CONTEXTS = ["init", "input", "both"]
SRC_V, TGT_V, EMB, HID = 7, 6, 3, 4


def tiny_batch(seed=0):
    rng = np.random.default_rng(seed)
    src = rng.integers(0, SRC_V, (3, 5))
    src_lengths = np.array([5, 2, 4])
    tgt_in = rng.integers(0, TGT_V, (3, 4))
    tgt_out = rng.integers(0, TGT_V, (3, 4))
    tgt_lengths = np.array([4, 3, 1])
    return src, src_lengths, tgt_in, tgt_out, tgt_lengths


def model(cell, context, dtype=np.float64, seed=1):
    return Seq2Seq(SRC_V, TGT_V, EMB, HID, context=context, cell=cell, dtype=dtype, seed=seed)


# ---- construction ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cell, layer", [("rnn", rnnfast.RNN), ("gru", rnnfast.GRU), ("lstm", rnnfast.LSTM)]
)
def test_cell_builds_the_layers_and_round_trips(cell, layer):
    m = model(cell, "both")
    assert type(m.encoder) is layer and type(m.decoder) is layer
    assert m.decoder.input_size == EMB + HID
    config = m.get_config()
    assert config["cell"] == cell
    again = Seq2Seq(**config)
    assert type(again.decoder) is layer
    again.load_state_dict(m.state_dict())
    src, sl, tin, _, tl = tiny_batch()
    np.testing.assert_array_equal(again.forward(src, sl, tin, tl), m.forward(src, sl, tin, tl))
    assert f"cell={cell!r}" in repr(m)


def test_unknown_cell_raises():
    with pytest.raises(ValueError, match="cell"):
        Seq2Seq(3, 3, 2, 2, cell="transformer")


def test_gated_relu_activation():
    m = Seq2Seq(SRC_V, TGT_V, EMB, HID, cell="gru", nonlinearity="relu", seed=0)
    assert m.encoder.activation == "relu" and m.decoder.activation == "relu"


# ---- the context handed over ----------------------------------------------------------------


@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("context", CONTEXTS)
def test_forward_is_the_encoder_state_handed_to_the_decoder(cell, context):
    """The logits are the decoder run from the encoder's final state (for the LSTM both h and
    c) and/or with its h appended to every input: built here from the layers themselves."""
    m = model(cell, context).eval()
    src, sl, tin, _, tl = tiny_batch()
    _, state = m.encoder(m.encoder_embedding(src.T), lengths=sl)
    h = state[0] if cell == "lstm" else state  # (1, B, H)
    x = m.decoder_embedding(tin.T)
    if context != "init":
        x = np.concatenate([x, np.broadcast_to(h, (x.shape[0],) + h.shape[1:])], axis=2)
    h0 = state if context != "input" else None
    y, _ = m.decoder(x, h0=h0, lengths=tl)
    expected = m.output(y).swapaxes(0, 1)
    np.testing.assert_allclose(m.forward(src, sl, tin, tl), expected, rtol=1e-12, atol=1e-12)
    context_c = m.encode(src, sl)
    if cell == "lstm":  # the pair (h, c), both handed over as the initial state
        assert isinstance(context_c, tuple) and len(context_c) == 2
        # encode() projects the embedding table and gathers its rows, the layer above projected
        # the embedded sequence: GEMMs of other shapes, so equal up to their rounding
        np.testing.assert_allclose(context_c[1], state[1][0], rtol=1e-12, atol=1e-12)
        assert not np.allclose(context_c[0], context_c[1])


def test_lstm_init_hands_over_the_cell_state_too():
    """Zeroing the encoder's c at the handover changes the logits: c is carried, not only h."""
    m = model("lstm", "init").eval()
    src, sl, tin, _, tl = tiny_batch()
    h, c = m.encode(src, sl)
    y, _ = m.decoder(m.decoder_embedding(tin.T), h0=(h[None], np.zeros_like(c)[None]), lengths=tl)
    without_c = m.output(y).swapaxes(0, 1)
    assert not np.allclose(m.forward(src, sl, tin, tl), without_c, atol=1e-6)


# ---- gradients ------------------------------------------------------------------------------


@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("context", CONTEXTS)
@pytest.mark.parametrize("ratio", [1.0, 0.5])
def test_train_batch_gradients_match_finite_differences(cell, context, ratio):
    m = model(cell, context)
    batch = tiny_batch()
    m.zero_grad()
    m.train_batch(*batch, teacher_forcing_ratio=ratio, rng=7)
    fed = m.last_fed_tokens
    if ratio < 1.0:
        assert (fed != batch[2]).any(), "scheduled sampling fed no prediction: a vacuous test"
    grads = {k: g.copy() for k, g in m.grads.items()}
    eps = 1e-6
    pick = np.random.default_rng(0)

    def loss():
        value = m.train_batch(*batch, teacher_forcing_ratio=ratio, rng=7)
        np.testing.assert_array_equal(m.last_fed_tokens, fed)
        return value

    for name, p in m.named_parameters():
        # a few entries of every parameter (each gate's block is reached over the cases)
        flat = pick.choice(p.size, min(p.size, 8), replace=False)
        for j in flat:
            i = np.unravel_index(j, p.shape)
            numeric = central_difference(loss, p, i, eps)
            np.testing.assert_allclose(
                grads[name][i], numeric, rtol=1e-5, atol=1e-8, err_msg=f"{name}{i}"
            )
    for name in ("encoder.weight_hh_l0", "encoder.bias_ih_l0", "encoder_embedding.weight"):
        assert np.abs(grads[name]).max() > 0, f"{name}: no gradient reached the encoder"


# ---- teacher forcing and scheduled sampling -------------------------------------------------


@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("context", CONTEXTS)
def test_ratio_one_is_exactly_a_ground_truth_pass(cell, context):
    src, sl, tin, tout, tl = tiny_batch()
    a, b, c = model(cell, context), model(cell, context), model(cell, context)
    loss = a.train_batch(src, sl, tin, tout, tl, teacher_forcing_ratio=1.0)
    logits = b.forward(src, sl, tin, tl)
    expected, d_logits = losses.cross_entropy(logits, tout, lengths=tl, batch_first=True)
    b.backward(d_logits)
    assert loss == expected
    # the two-pass (scheduled sampling) path with every coin landing on the ground truth
    assert c.train_batch(src, sl, tin, tout, tl, teacher_forcing_ratio=1 - 1e-12, rng=0) == loss
    for k, g in b.grads.items():
        np.testing.assert_array_equal(a.grads[k], g, err_msg=k)
        np.testing.assert_array_equal(c.grads[k], g, err_msg=k)


@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("context", CONTEXTS)
def test_ratio_zero_feeds_the_models_own_greedy_predictions(cell, context):
    src, sl, tin, tout, _ = tiny_batch()
    full = np.full(3, tin.shape[1])
    m = model(cell, context)
    m.train_batch(src, sl, tin, tout, full, teacher_forcing_ratio=0.0, rng=0)
    fed = m.last_fed_tokens
    np.testing.assert_array_equal(fed[:, 0], tin[:, 0])
    logits = m.eval().forward(src, sl, fed, full)
    np.testing.assert_array_equal(fed[:, 1:], logits[:, :-1].argmax(axis=2))
    greedy, _ = m.generate(src, sl, tin.shape[1] - 1, "greedy", bos=tin[:, 0])
    np.testing.assert_array_equal(fed[:, 1:], greedy)


# ---- decoding -------------------------------------------------------------------------------


def _log_prob(m, src, sl, bos, tokens):
    """The teacher-forced log-probability of each row of ``tokens`` (B, L) after ``bos``."""
    fed = np.concatenate([np.full((tokens.shape[0], 1), bos), tokens[:, :-1]], axis=1)
    logp = losses.log_softmax(m.forward(src, sl, fed))
    return np.take_along_axis(logp, tokens[..., None], axis=2)[..., 0].sum(axis=1)


@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("context", CONTEXTS)
def test_decoders_scores_are_the_forward_log_probabilities(cell, context):
    """Greedy, sampled and every beam hypothesis, rescored by one teacher-forced forward: the
    decoders' scores hold only if the state (the LSTM's h and c) followed each hypothesis
    through beam search's reorders."""
    m = model(cell, context, seed=3).eval()
    src, sl, *_ = tiny_batch(1)
    bos, steps = 0, 5
    for method, kwargs in (("greedy", {}), ("sample", {"rng": 4})):
        tokens, scores = m.generate(src, sl, steps, method, bos=bos, **kwargs)
        np.testing.assert_allclose(scores, _log_prob(m, src, sl, bos, tokens), rtol=1e-10)
    step_fn, state = m._inference(src, sl)
    width = 4
    tokens, scores = rnnfast.decoding.beam_search(
        step_fn, state, bos, steps, width, length_penalty=0.0, return_all=True
    )
    rep = lambda a: np.repeat(a, width, axis=0)  # noqa: E731
    rescored = _log_prob(m, rep(src), rep(sl), bos, tokens.reshape(-1, steps))
    np.testing.assert_allclose(scores.ravel(), rescored, rtol=1e-10)
    # width 1 without length normalisation is greedy decoding
    greedy, _ = m.generate(src, sl, steps, "greedy", bos=bos)
    one, _ = m.generate(src, sl, steps, "beam", bos=bos, beam_width=1, length_penalty=0.0)
    np.testing.assert_array_equal(one, greedy)


@pytest.mark.parametrize("cell", CELLS)
def test_beam_search_is_exhaustive_when_wide_enough(cell):
    """V ** L hypotheses fit in the beam: it returns the most probable sequence of all."""
    m = Seq2Seq(5, 3, 3, 4, context="both", cell=cell, dtype=np.float64, seed=5).eval()
    src, sl = np.array([[1, 2, 3], [4, 0, 2]]), np.array([3, 2])
    steps = 3
    tokens, _ = m.generate(src, sl, steps, "beam", bos=0, beam_width=27, length_penalty=0.0)
    every = np.array(np.meshgrid(*[range(3)] * steps, indexing="ij")).reshape(steps, -1).T
    for b in range(2):
        n = len(every)
        logp = _log_prob(m, np.repeat(src[b : b + 1], n, 0), np.repeat(sl[b : b + 1], n), 0, every)
        np.testing.assert_array_equal(tokens[b], every[logp.argmax()])


@pytest.mark.parametrize("cell", CELLS)
def test_generate_leaves_a_pending_training_forward(cell):
    m = model(cell, "both")
    src, sl, tin, tout, tl = tiny_batch()
    logits = m.forward(src, sl, tin, tl)
    m.generate(src, sl, 3, "beam", bos=0, beam_width=3)
    _, d = losses.cross_entropy(logits, tout, lengths=tl, batch_first=True)
    m.backward(d)
    ref = model(cell, "both")
    ref.forward(src, sl, tin, tl)
    ref.backward(d)
    for k, g in ref.grads.items():
        np.testing.assert_array_equal(m.grads[k], g, err_msg=k)


@pytest.mark.parametrize("cell", CELLS)
def test_float32_trains_and_decodes(cell):
    m = model(cell, "both", dtype=np.float32)
    loss = m.train_batch(*tiny_batch(), teacher_forcing_ratio=0.5, rng=1)
    assert np.isfinite(loss)
    tokens, scores = m.eval().generate(*tiny_batch()[:2], 4, "beam", bos=0, eos=1)
    assert tokens.shape == (3, 4) and np.isfinite(scores).all()
