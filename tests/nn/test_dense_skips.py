"""Dense skip connections on stacked layers (the notes' slide 50): ``input_to_all`` feeds the
stack's input to every layer k > 0 beside the layer below's output, ``all_to_output``
concatenates every layer's output. For RNN, GRU and LSTM: parity with the same wiring composed
by hand from single-layer torch modules (forward and gradients, lengths, both directions),
finite differences, streaming steps, Keras's last output, counts, persistence and the
refusals of what cannot hold them."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close, numerical_gradient

import rnnfast
from rnnfast.quantize import ERROR_BOUND

T, B, D, H = 5, 3, 4, 3
F64 = np.float64
CELLS = {"RNN": rnnfast.RNN, "GRU": rnnfast.GRU, "LSTM": rnnfast.LSTM}
# (input_to_all, all_to_output): every combination with a skip
SKIPS = [(True, False), (False, True), (True, True)]


def _layer(cell, num_layers=3, dtype=F64, **options):
    return CELLS[cell](D, H, num_layers=num_layers, dtype=dtype, seed=7, **options)


def _torch_layer(torch, layer, k):
    """A single-layer torch module of ``layer``'s cell holding ``layer``'s layer k."""
    dirs = layer.num_directions
    R = layer.cell.output_width(layer)
    width = layer.input_size if k == 0 else R * dirs
    if k > 0 and layer.input_to_all:
        width += layer.input_size
    options = {"proj_size": layer.proj_size} if getattr(layer, "proj_size", 0) else {}
    module = getattr(torch.nn, layer.cell.torch_name)(
        width, H, bidirectional=layer.bidirectional, dtype=torch.float64, **options
    )
    state = {
        name.replace(f"_l{k}", "_l0"): torch.from_numpy(value.copy())
        for name, value in layer.state_dict().items()
        if f"_l{k}" in name
    }
    module.load_state_dict(state)
    return module


def _torch_stack(torch, layer, x, lengths):
    """The dense-skip stack composed by hand from single-layer torch modules: ``(y, h_n,
    modules)`` (h_n the LSTM's h only; torch.cat does the concatenations)."""
    modules, outs, states = [], [], []
    inp = x
    for k in range(layer.num_layers):
        if k > 0 and layer.input_to_all:
            inp = torch.cat([x, inp], dim=-1)
        module = _torch_layer(torch, layer, k)
        modules.append(module)
        if lengths is None:
            out, state = module(inp)
        else:
            packed = torch.nn.utils.rnn.pack_padded_sequence(
                inp, torch.tensor(lengths), enforce_sorted=False
            )
            out, state = module(packed)
            out, _ = torch.nn.utils.rnn.pad_packed_sequence(out, total_length=x.shape[0])
        outs.append(out)
        states.append(state[0] if isinstance(state, tuple) else state)
        inp = out
    y = torch.cat(outs, dim=-1) if layer.all_to_output else inp
    return y, torch.cat(states, dim=0), modules


@pytest.mark.parametrize("skips", SKIPS, ids=["input", "output", "both"])
@pytest.mark.parametrize("use_lengths", [False, True], ids=["full", "lengths"])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
@pytest.mark.parametrize("cell", ["RNN", "GRU", "LSTM"])
def test_matches_torch_composed_by_hand(torch, rng, cell, bidirectional, use_lengths, skips):
    input_to_all, all_to_output = skips
    options = {"proj_size": 2} if cell == "LSTM" and bidirectional else {}
    layer = _layer(
        cell,
        bidirectional=bidirectional,
        input_to_all=input_to_all,
        all_to_output=all_to_output,
        **options,
    )
    x = rng.standard_normal((T, B, D))
    lengths = np.array([T, 2, 4]) if use_lengths else None
    y, state = layer(x, lengths=lengths)
    h_n = state[0] if cell == "LSTM" else state
    assert y.shape == (T, B, layer.output_size)
    dy = rng.standard_normal(y.shape)
    dh_n = rng.standard_normal(h_n.shape)
    dx, _ = layer.backward(dy, (dh_n, None) if cell == "LSTM" else dh_n)

    xt = torch.tensor(x, requires_grad=True)
    yt, hnt, modules = _torch_stack(torch, layer, xt, lengths)
    loss = (yt * torch.from_numpy(dy)).sum() + (hnt * torch.from_numpy(dh_n)).sum()
    loss.backward()
    assert_close(y, yt.detach().numpy(), F64, "y")
    assert_close(h_n, hnt.detach().numpy(), F64, "h_n")
    assert_close(dx, xt.grad.numpy(), F64, "dx")
    for k, module in enumerate(modules):
        for name, p in module.named_parameters():
            ours = name.replace("_l0", f"_l{k}")
            assert_close(layer.grads[ours], p.grad.numpy(), F64, ours)


@pytest.mark.parametrize("cell", ["RNN", "GRU", "LSTM"])
def test_finite_differences_keras_last_output(rng, cell):
    """Keras's last output of a bidirectional dense stack (each block's forward half at the
    sequence's own end, its reverse half at its start), with lengths: every gradient against
    central differences in float64."""
    layer = _layer(
        cell,
        num_layers=2,
        bidirectional=True,
        input_to_all=True,
        all_to_output=True,
        return_sequences=False,
    )
    x = rng.standard_normal((3, 2, D))
    lengths = np.array([3, 2])
    w = rng.standard_normal((2, layer.output_size))

    def loss():
        was = layer.training
        layer.eval()
        out = layer(x, lengths=lengths)
        layer.train(was)
        return float((out * w).sum())

    out = layer(x, lengths=lengths)
    assert out.shape == (2, 2 * 2 * H)
    dx, _ = layer.backward(w)
    # central differences of step 1e-6: truncation and rounding near 1e-9
    np.testing.assert_allclose(dx, numerical_gradient(loss, x), rtol=1e-6, atol=1e-8)
    for name in ("weight_ih_l1", "weight_hh_l0_reverse", "weight_ih_l1_reverse"):
        expected = numerical_gradient(loss, layer._params[name])
        np.testing.assert_allclose(layer.grads[name], expected, rtol=1e-6, atol=1e-8, err_msg=name)


@pytest.mark.parametrize("cell", ["RNN", "GRU", "LSTM"])
def test_steps_give_the_forward(rng, cell):
    layer = _layer(cell, input_to_all=True, all_to_output=True).eval()
    x = rng.standard_normal((T, B, D))
    y, _ = layer(x)
    state, outs = None, []
    for t in range(T):
        out, state = layer.step(x[t], state)
        outs.append(out)
    assert_close(np.stack(outs), y, F64, "steps")


def test_parameter_shapes_and_keras_counts():
    layer = rnnfast.GRU(D, H, num_layers=3, bidirectional=True, input_to_all=True, seed=1)
    assert layer.state_dict()["weight_ih_l1"].shape == (3 * H, D + 2 * H)
    assert layer.state_dict()["weight_ih_l0"].shape == (3 * H, D)
    # Keras's GRU (reset_after): 3(D_k H + H H + 2H) per direction
    expected = sum(2 * 3 * (d_k * H + H * H + 2 * H) for d_k in (D, D + 2 * H, D + 2 * H))
    assert layer.keras_param_count() == expected
    text = layer.summary()
    assert "input_to_all" in text and f"Total params: {expected:,}" in text
    rnn = rnnfast.RNN(D, H, num_layers=2, all_to_output=True, seed=1)
    assert rnn.output_size == 2 * H
    assert f"(T, B, {2 * H})" in rnn.summary()


def test_dropout_acts_between_layers_not_on_the_output(rng):
    """all_to_output returns each layer's output as it computed it; the between-layer dropout
    changes what the next layer reads only."""
    layer = _layer("RNN", num_layers=2, dropout=0.5, all_to_output=True)
    x = rng.standard_normal((T, B, D))
    y_train, _ = layer(x)
    y_eval, _ = layer.eval()(x)
    assert_close(y_train[..., :H], y_eval[..., :H], F64, "layer 0's output")
    assert not np.allclose(y_train[..., H:], y_eval[..., H:])


def test_state_dict_save_load_and_config(rng, tmp_path):
    layer = _layer("LSTM", bidirectional=True, input_to_all=True, all_to_output=True).eval()
    x = rng.standard_normal((T, B, D))
    path = tmp_path / "dense.npz"
    rnnfast.save(layer, path)
    loaded = rnnfast.load(path)
    assert loaded.input_to_all and loaded.all_to_output
    assert_close(loaded.eval()(x)[0], layer(x)[0], F64, "loaded")
    again = rnnfast.LSTM(**layer.get_config())
    again.load_state_dict(layer.state_dict())
    assert_close(again.eval()(x)[0], layer(x)[0], F64, "config + state_dict")
    plain = rnnfast.LSTM(D, H, num_layers=3, bidirectional=True, dtype=F64)
    with pytest.raises(ValueError, match="weight_ih_l1"):
        plain.load_state_dict(layer.state_dict())


def test_quantized_copy_keeps_the_skips(rng):
    """rnnfast.quantize copies the Elman layer (the one it quantizes) with its skips: the copy
    runs the same stack runner on its quantized kernels."""
    layer = _layer("RNN", dtype=np.float32, input_to_all=True, all_to_output=True).eval()
    x = rng.standard_normal((T, B, D)).astype(np.float32)
    y, _ = layer(x)
    q = rnnfast.quantize(layer, "bf16")
    yq, _ = q(x)
    assert yq.shape == y.shape
    assert np.linalg.norm(yq - y) / np.linalg.norm(y) < ERROR_BOUND["bf16"]


@pytest.mark.parametrize("option", ["input_to_all", "all_to_output"])
def test_torch_and_onnx_refuse_by_name(tmp_path, option):
    layer = _layer("RNN", dtype=np.float32, **{option: True}).eval()
    with pytest.raises(ValueError, match=option):
        layer.to_torch()
    pytest.importorskip("onnx")
    from rnnfast.io import onnx as rf_onnx

    with pytest.raises(ValueError, match=option):
        rf_onnx.export(layer, tmp_path / "m.onnx")


def test_bad_options_are_refused():
    with pytest.raises(ValueError, match="input_to_all.*num_layers=1"):
        rnnfast.RNN(D, H, input_to_all=True)
    with pytest.raises(ValueError, match="all_to_output.*num_layers=1"):
        rnnfast.GRU(D, H, all_to_output=True)
    with pytest.raises(ValueError, match="residual=True with input_to_all=True"):
        rnnfast.LSTM(D, H, num_layers=2, input_to_all=True, residual=True)
    with pytest.raises(TypeError, match="input_to_all"):
        rnnfast.RNN(D, H, num_layers=2, input_to_all=1)
    layer = rnnfast.RNN(D, H, num_layers=2, bidirectional=True, all_to_output=True)
    with pytest.raises(ValueError, match="merge_mode='sum' with all_to_output=True"):
        layer.merge_mode = "sum"
    with pytest.raises(AttributeError, match="input_to_all is fixed"):
        layer.input_to_all = True
    with pytest.raises(ValueError, match="residual=True with input_to_all=True"):
        rnnfast.RNN(D, H, num_layers=2, input_to_all=True).residual = True
    dense = rnnfast.RNN(D, H, num_layers=2, input_to_all=True)
    emb = rnnfast.Embedding(10, D)
    with pytest.raises(ValueError, match="embedding: input_to_all"):
        dense(np.zeros((T, B), dtype=np.int64), embedding=emb)
    assert not dense.takes_embedding(emb, np.zeros((50, 4), dtype=np.int64))
